#!/usr/bin/env bash
# A live job whose region is damaged (issue 36 N14): its limits read out of range (a core limit
# of 1753356997 %, as the audit found) with its limits sequence moved, as random bytes over page 0
# leave it. Before: vgpu ps dropped the job, its processes took the garbage as "no limit", and a
# new process of it ran unlimited. Now ps lists it marked damaged, vgpu limit refuses it with exit
# 11, its processes keep the limits they last saw, and a new one is refused the GPU.
source "$(dirname "$0")/lib.sh"

K=2000
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
on_gpu() { vgpu ps --json | jq -e --arg n "$1" 'any(.jobs[]; .name == $n and (.processes | length) > 0)'; }
# FILE OFFSET BYTES (dd without the sanitizers' preload: ASan refuses dd's aligned_alloc)
poke() { printf "$3" | env -u LD_PRELOAD dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

run core_loop -t 1 -k $K -s 8
base=$(field "$out" share)
assert_match "uncapped baseline runs" '^share=0\.[5-9]' "$out"

vgpu run --name dl --core 30 -- core_loop -t 6 -k $K -s 8 >"$T_DIR/dl.out" 2>"$T_DIR/dl.err" & vr=$!
wait_until 20 on_gpu dl
id=$(vgpu ps --json | jq -r '.jobs[] | select(.name == "dl") | .id')
f=$VGPU_STATE_DIR/jobs/$id.region
# dev[0].core_limit (offset 856) and limits_seq (652) of the version 1 header (region.c asserts).
poke "$f" 856 '\xc5\x1a\x82\x68'
poke "$f" 652 '\x7f\x7f\x7f\x7f'
run vgpu ps --json
assert_eq "vgpu ps --json still lists the job, among the damaged ones" "$id root" \
  "$(jq -r --arg i "$id" '.damaged_jobs[] | select(.id == $i) | "\(.id) \(.owner)"' <<<"$out")"
assert_contains "and says why" "core limit is out of range" "$(jq -r --arg i "$id" '.damaged_jobs[] | select(.id == $i) | .why' <<<"$out")"
run vgpu ps
assert_contains "the table shows it as damaged" "region damaged" "$out"
assert_not_contains "and does not count it as an unreadable file" "could not be read" "$err"
run vgpu limit "$id" --core 50
assert_rc "vgpu limit on it: exit 11" 11
assert_contains "vgpu limit says its region is damaged" "$id.region is damaged" "$err"
assert_not_contains "not 'no job'" "no job" "$err"
run vgpu wait "$id" --timeout 1
assert_rc "vgpu wait on it: exit 11 as well" 11
# A new process of the job (the environment vgpu run gave it) is refused, never unlimited.
run env VGPU_REGION="$f" LD_PRELOAD="${VGPU_TEST_PRELOAD:+$VGPU_TEST_PRELOAD:}$VGPU_BUILD/libvgpu.so" alloc_probe alloc 1M
assert_contains "a new process of the job is refused the GPU" "refused the GPU" "$err"
assert_not_contains "and is not run unlimited" "alloc rc=0" "$out"
wait "$vr"
line=$(grep '^share=' "$T_DIR/dl.out")
pct=$(awk -v s="$(field "$line" share)" -v b="$base" 'BEGIN { printf "%d", (b > 0 ? 100 * s / b : 0) }')
if timing_skipped "the running process kept --core 30" "$pct % of the uncapped run"; then :
elif [ -n "$line" ] && [ "$pct" -ge 20 ] && [ "$pct" -le 38 ]; then ok "the running process kept --core 30 ($pct % of the uncapped run)"
else not_ok "the running process kept --core 30" "got $pct % of the uncapped run: $line (baseline $base); $(head -c 600 "$T_DIR/dl.err")"; fi

done_testing
