#!/usr/bin/env bash
# The compute limiter's accuracy on the simulated GPU (its kernels occupy the device for a
# simulated time, serialized across processes like time-sliced contexts):
#   - one saturating job at N = 10/30/50/70 %, for four kernel shapes, throughput relative to
#     the uncapped run of the same shape (PASS when within ±5 points of N);
#   - two jobs at 30 and 70 (shares of the uncapped throughput);
#   - two jobs at 50/50 soft, one idle: the busy one's share (PASS at >= 90 %);
#   - the launch path's added cost under budget (median ns per launch, capped vs uncapped job).
# BENCH_SECONDS (default 4) is the length of every run.
set -u
: "${VGPU_BUILD:?run through bench/run.sh (make bench)}" "${VGPU_SRC:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-bench.XXXXXX")
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
export PATH="$VGPU_BUILD:$VGPU_BUILD/fakegpu:$VGPU_BUILD/tests/progs:$PATH"
export LD_LIBRARY_PATH="$VGPU_BUILD/fakegpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VGPU_STATE_DIR=$T/state VGPU_FAKE_STATE=$T/fakegpu.state VGPU_FAKE_LIBDIR=$VGPU_BUILD/fakegpu
export VGPU_FAKE_SCENARIO=$VGPU_SRC/tests/fakegpu/scenarios/h100.json
unset VGPU_REGION LD_PRELOAD CUDA_VISIBLE_DEVICES
mkdir -m 0700 -p "$VGPU_STATE_DIR"
S=${BENCH_SECONDS:-4}

get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# shapes: name and core_loop arguments
shapes=("many-short|-k 500 -s 8" "few-long|-k 20000" "graph|-m graph -g 8 -k 1000" "coop+ex|-m coop -k 2000")
declare -A base
for sh in "${shapes[@]}"; do
  name=${sh%%|*} args=${sh#*|}
  base[$name]=$(get "$(core_loop -t "$S" $args)" share)
done

pass=0 fail=0
verdict() { # measured target band
  awk -v m="$1" -v t="$2" -v b="$3" 'BEGIN { d = m - t; if (d < 0) d = -d; print (d <= b ? "PASS" : "FAIL") }'
}
count() { if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi; }

printf '%-11s %5s %9s %9s %9s  %s\n' shape cap uncapped capped "% of unc" verdict
for sh in "${shapes[@]}"; do
  name=${sh%%|*} args=${sh#*|}
  for n in 10 30 50 70; do
    line=$(vgpu run --core "$n" -- core_loop -t "$S" $args)
    s=$(get "$line" share)
    p=$(awk -v s="$s" -v b="${base[$name]}" 'BEGIN { printf "%.1f", 100 * s / b }')
    v=$(verdict "$p" "$n" 5); count "$v"
    printf '%-11s %4d%% %9s %9s %8s%%  %s (max stall %s ms)\n' "$name" "$n" "${base[$name]}" "$s" "$p" "$v" "$(get "$line" max_stall_ms)"
  done
done

b=${base[many-short]}
vgpu run --core 30 -- core_loop -t "$S" -k 500 -s 8 >"$T/a" &
vgpu run --core 70 -- core_loop -t "$S" -k 500 -s 8 >"$T/b"
wait
pa=$(awk -v s="$(get "$(cat "$T/a")" share)" -v b="$b" 'BEGIN { printf "%.1f", 100 * s / b }')
pb=$(awk -v s="$(get "$(cat "$T/b")" share)" -v b="$b" 'BEGIN { printf "%.1f", 100 * s / b }')
va=$(verdict "$pa" 30 5) vb=$(verdict "$pb" 70 5); count "$va"; count "$vb"
echo
printf 'pair 30:70             %6s%% : %s%%   %s %s\n' "$pa" "$pb" "$va" "$vb"

vgpu run --core 50 --core-policy soft -- sleep $((S + 1)) &
idle=$!
ps_=$(awk -v s="$(get "$(vgpu run --core 50 --core-policy soft -- core_loop -t "$S" -k 500 -s 8)" share)" -v b="$b" \
  'BEGIN { printf "%.1f", 100 * s / b }')
kill $idle 2>/dev/null; wait $idle 2>/dev/null
vs=$(awk -v p="$ps_" 'BEGIN { print (p >= 90 ? "PASS" : "FAIL") }'); count "$vs"
printf 'soft 50/50, peer idle  busy job %s%% (target >= 90%%)   %s\n' "$ps_" "$vs"

u=$(get "$(vgpu run -- core_loop -m rate -t 2)" p50_ns)
c=$(get "$(vgpu run --core 90 -- core_loop -m rate -t 2)" p50_ns)
d=$((c - u))
vo=$([ "$d" -lt 200 ] && echo PASS || echo FAIL); count "$vo"
printf 'launch cost under budget: uncapped job %s ns, capped job %s ns, added %s ns (target < 200)   %s\n' "$u" "$c" "$d" "$vo"
echo
echo "core: $pass PASS, $fail FAIL (simulated GPU, ${S} s per run)"
# A FAIL row fails the benchmark (make bench, bench/run.sh say which one failed).
[ "$fail" -eq 0 ]
