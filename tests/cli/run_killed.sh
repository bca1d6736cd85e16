#!/usr/bin/env bash
# A job whose `vgpu run` is killed with SIGKILL (issue 35 item 6, issue 36 N7). Before: the next
# vgpu ps ended the job and removed its region, so the command, when it reached the GPU, ran with
# no limits (share 0.77 at --core 30) and left no record. Now liveness is the job's processes: the
# job stays listed, keeps --core and --mem, and the reader that found it orphaned starts an
# adopter which writes one record when the last process ends, ending then.
source "$(dirname "$0")/lib.sh"

K=2000   # µs per kernel
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# The job's record, once there is one: its fields as "recovered approximate count".
recorded() { [ "$(vgpu acct --json --name "$1" | jq '.jobs | length')" -ge 1 ]; }
listed() { vgpu ps --json | jq -e --arg n "$1" 'any(.jobs[]; .name == $n and .state == "running")'; }
child_of() { cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{ print $1 }'; }
has_child() { [ -n "$(child_of "$1")" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
region_of() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n) | .id'; }

run core_loop -t 1 -k $K -s 8
base=$(field "$out" share)
assert_match "uncapped baseline runs" '^share=0\.[5-9]' "$out"

# ---- 1. the command had not reached the GPU when vgpu run was killed ----
vgpu run --name killed --core 30 --mem 1G -- sh -c "wait_until 60 test -e '$T_DIR/go'
  alloc_probe alloc 2G; exec core_loop -t 2 -k $K -s 8" >"$T_DIR/k.out" 2>"$T_DIR/k.err" & vr=$!
wait_until 10 has_child "$vr"
cmd=$(child_of "$vr")
wait_until 10 listed killed
id=$(region_of killed)
kill -9 "$vr"; wait "$vr" 2>/dev/null
vgpu wait "$id" --timeout 120 >"$T_DIR/w.out" 2>&1 & waiter=$!
run vgpu ps --json
assert_eq "vgpu ps after kill -9 of vgpu run: the job is still running" "running" \
  "$(jq -r '.jobs[] | select(.name == "killed") | .state' <<<"$out")"
check "its region is still there" test -e "$VGPU_STATE_DIR/jobs/$id.region"
run vgpu ps
assert_contains "and listed again by the next vgpu ps" "killed" "$out"
# Its memory promise and its place in the job count outlive the killed vgpu run (vgpu/holder.h):
# another job's placement and count look at them, which drops the entries of processes that are
# gone. Before, the killed job's were dropped there, and its memory could be promised again.
run vgpu run --mem 1G --max-jobs 8 -- true
held() { grep -l "^+holder $cmd " "$VGPU_STATE_DIR/$1"/* 2>/dev/null | grep -c .; }
assert_eq "its memory promise is kept while its command runs, after another placement looked" 1 "$(held promises)"
assert_eq "and so is its place in the job count" 1 "$(held jobcount)"
: >"$T_DIR/go"
check "vgpu wait waits while the job's command runs" kill -0 "$waiter"
wait_until 60 gone "$cmd"
wait "$waiter"; wrc=$?
run vgpu run --mem 1G --max-jobs 8 -- true
assert_eq "once its command ended, the next placement drops both" "0 0" "$(held promises) $(held jobcount)"
assert_eq "then vgpu wait says it ended without a status (exit 1)" "1 yes" \
  "$wrc $(grep -q 'ended without an exit status' "$T_DIR/w.out" && echo yes)"
assert_contains "--mem 1G still holds: 2 GiB refused" "alloc rc=2" "$(cat "$T_DIR/k.out")"
line=$(grep '^share=' "$T_DIR/k.out")
pct=$(awk -v s="$(field "$line" share)" -v b="$base" 'BEGIN { printf "%d", (b > 0 ? 100 * s / b : 0) }')
if [ -n "$line" ] && [ "$pct" -ge 22 ] && [ "$pct" -le 38 ]; then ok "--core 30 still holds ($pct % of the uncapped run)"
else not_ok "--core 30 still holds" "got $pct % of the uncapped run: $line (baseline $base); stderr: $(head -c 600 "$T_DIR/k.err")"; fi

# ---- 2. the record: written once, by the adopter, ending when the command did ----
wait_until 20 recorded killed
run vgpu acct --json --name killed
assert_eq "one record, recovered, end approximate" "1 true true" \
  "$(jq -r '"\(.jobs | length) \(.jobs[0].recovered) \(.jobs[0].end_time_approximate)"' <<<"$out")"
dur=$(jq -r '.jobs[0].duration_seconds' <<<"$out"); gs=$(jq -r '.jobs[0].gpus[0].gpu_seconds' <<<"$out")
# core_loop ran 2 s after the kill (and after the go file): the record ends after that, not at the kill.
check "it ends when the command ended, not when vgpu run died (duration $dur s >= 2)" \
  awk -v d="$dur" 'BEGIN { exit !(d ~ /^[0-9.]+$/ && d >= 2) }'
check "its GPU time ($gs s) is at most its duration ($dur s)" \
  awk -v d="$dur" -v g="$gs" 'BEGIN { exit !(g ~ /^[0-9.]+$/ && d ~ /^[0-9.]+$/ && g <= d) }'
check "its GPU time was measured (> 0.2 s at --core 30 over 2 s)" awk -v g="$gs" 'BEGIN { exit !(g ~ /^[0-9.]+$/ && g > 0.2) }'
wait_until 10 sh -c "! test -e '$VGPU_STATE_DIR/jobs/$id.region'"
ok "the adopter removed the region after recording it"
run vgpu ps --json
assert_eq "and vgpu ps no longer lists it" "" "$(jq -r '.jobs[] | select(.name == "killed") | .id' <<<"$out")"
assert_eq "still one record after more listings" "1" "$(vgpu acct --json --name killed | jq '.jobs | length')"

# ---- 3. a descendant left behind, not on the GPU yet: the command and vgpu run both gone ----
vgpu run --name orphan --mem 1G -- sh -c "sh -c \"wait_until 60 test -e '$T_DIR/go2'; alloc_probe alloc 2G alloc 512M\" &
  wait_until 60 test -e '$T_DIR/stop1'" >"$T_DIR/o.out" 2>&1 & vr=$!
wait_until 10 has_child "$vr"
cmd=$(child_of "$vr")
wait_until 10 listed orphan
kill -9 "$vr"; wait "$vr" 2>/dev/null
: >"$T_DIR/stop1"
wait_until 20 gone "$cmd"
run vgpu ps --json
assert_eq "a descendant carrying the region keeps the job running" "running" \
  "$(jq -r '.jobs[] | select(.name == "orphan") | .state' <<<"$out")"
: >"$T_DIR/go2"
wait_until 20 recorded orphan
assert_contains "the descendant kept --mem 1G (2 GiB refused)" "alloc rc=2" "$(cat "$T_DIR/o.out")"
assert_contains "and got 512 MiB" "alloc rc=0" "$(cat "$T_DIR/o.out")"

# ---- 4. the job's processes in a PID namespace of their own ----
if ! unshare -pf --mount-proc true 2>/dev/null; then
  skip "PID namespaces" "unshare -pf --mount-proc does not work here (needs root or user namespaces)"
else
  vgpu run --name ns --mem 1G -- unshare -pf --kill-child --mount-proc sh -c "wait_until 60 test -e '$T_DIR/go3'
    alloc_probe alloc 2G alloc 512M" >"$T_DIR/n.out" 2>&1 & vr=$!
  wait_until 10 has_child "$vr"
  wait_until 10 listed ns
  kill -9 "$vr"; wait "$vr" 2>/dev/null
  run vgpu ps --json
  assert_eq "pid namespace: the job is still running after kill -9 of vgpu run" "running" \
    "$(jq -r '.jobs[] | select(.name == "ns") | .state' <<<"$out")"
  : >"$T_DIR/go3"
  wait_until 20 recorded ns
  assert_contains "pid namespace: --mem 1G still holds" "alloc rc=2" "$(cat "$T_DIR/n.out")"
  assert_eq "pid namespace: one record" "1" "$(vgpu acct --json --name ns | jq '.jobs | length')"
fi

done_testing
