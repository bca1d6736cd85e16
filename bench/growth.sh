#!/usr/bin/env bash
# The cost of growth (issue 14, item 5), on the simulated GPU (one H100): how the launch cost
# under a core limit, the allocation cost, and the time of `vgpu ps` and `vgpu top --once` grow
# with the number of jobs on a GPU (1, 16, 64) and of processes in a job (1 to 1024). Prints a
# table; a cost that grows faster than the load would show as a ratio far above the load's.
#   launch: tests/progs/launch_toggle in the job, --core 90 against unlimited, mean/median ns
#           added per launch (GROWTH_PAIRS pairs of 64-launch batches, default 1500)
#   alloc:  ns per cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB through libvgpu.so (alloc_probe churn)
#   outside_us: one check for processes outside the limiter (vgpu_outside_find) over 128 of the
#           job's processes, as each process of the job makes it once a second (slot_fill, with
#           the N-1 processes it made; "-" for N = 1)
#   ps/top: best of 3 of `vgpu ps` and `vgpu top --once`, exec to exit, ms
# Processes in a job: slot_fill gives the job N-1 processes (each holds a slot, as a process of
# the job that has used CUDA does), the measurements run as the Nth.
# Jobs on the GPU: N-1 more jobs, each an inference-like client (one 100 µs kernel every 200 ms,
# --core 10), so each is in the GPU's schedule.
set -u
: "${VGPU_BUILD:?run through bench/run.sh (make bench)}" "${VGPU_SRC:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-growth.XXXXXX")
groups=()
cleanup() { for g in "${groups[@]}"; do kill -- -"$g" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export PATH="$VGPU_BUILD:$VGPU_BUILD/fakegpu:$VGPU_BUILD/tests/progs:$PATH"
export LD_LIBRARY_PATH="$VGPU_BUILD/fakegpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VGPU_STATE_DIR=$T/state VGPU_FAKE_STATE=$T/fakegpu.state VGPU_MACHINE_DIR=$T/machine
export VGPU_FAKE_SCENARIO=$VGPU_SRC/tests/fakegpu/scenarios/h100.json NO_COLOR=1
unset VGPU_REGION LD_PRELOAD CUDA_VISIBLE_DEVICES
mkdir -m 0700 -p "$VGPU_STATE_DIR"; mkdir -m 1777 -p "$VGPU_MACHINE_DIR"
PAIRS=${GROWTH_PAIRS:-1500}
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# A command in its own session, so that the whole job can be ended at once.
start() { setsid "$@" </dev/null >/dev/null 2>&1 & groups+=($!); }
stop_all() { for g in "${groups[@]}"; do kill -- -"$g" 2>/dev/null; done; wait 2>/dev/null; groups=(); }
# Waits for a file (up to 120 s); a timeout fails the benchmark.
await() { local i; for ((i = 0; i < 2400; i++)); do [ -e "$1" ] && return 0; sleep 0.05; done
          echo "growth: timed out waiting for $1" >&2; exit 1; }
best_ms() { local b=999999 i t0 t1; for i in 1 2 3; do t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
            (( (t1 - t0) / 1000 < b )) && b=$(( (t1 - t0) / 1000 )); done; awk -v u="$b" 'BEGIN { printf "%.1f", u / 1000 }'; }

# One measured job with N processes: its own costs, then ps and top from outside.
measure() { # label N
  local tag=$1 n=$2 out i
  rm -f "$T/ready" "$T/done"
  # N-1 processes from slot_fill; the measurements run as the Nth, and then a process that holds
  # a slot keeps the job at N while ps and top are timed (a job has 1024 slots: no more).
  local fill="echo '0 -' > $T/ready;"
  [ "$n" -gt 1 ] && fill="slot_fill $((n - 1)) $T/ready &"
  start vgpu run --mem 8G --core 90 -- bash -c "$fill until [ -s $T/ready ]; do sleep 0.05; done
    alloc_probe alloc 1048576 churn 1000 > $T/alloc 2>&1; launch_toggle -n $PAIRS -c 90 > $T/launch 2>&1
    alloc_probe alloc 1048576 hold >/dev/null 2>&1 & touch $T/done; wait"
  await "$T/done"
  for ((i = 0; i < 200; i++)); do   # the holder has its slot
    [ "$(vgpu ps --json 2>/dev/null | jq '.jobs[0].processes | length' 2>/dev/null)" = "$n" ] && break; sleep 0.05
  done
  local churn launch ns
  churn=$(sed -n "s/^churn rc=0 n=\([0-9]*\).*/\1/p" "$T/alloc")
  [ -n "$churn" ] || echo "growth: alloc_probe: $(tr "\n" " " < "$T/alloc")" >&2
  ns=$(awk -v n="${churn:-0}" 'BEGIN { printf "%.0f", (n > 0 ? 1e9 / n : -1) }')
  launch=$(tail -n 1 "$T/launch")
  local ps top sched
  ps=$(best_ms vgpu ps); top=$(best_ms vgpu top --once)
  sched=$(get "$(sched_peek "$uuid" 2>/dev/null)" jobs)
  printf '%-22s %6s %10s %10s %10s %11s %9s %9s %7s\n' "$tag" "$(awk '{ print $1 + 1 }' "$T/ready")" \
    "$(get "$launch" mean_ns)" "$(get "$launch" median_ns)" "$ns" "$(awk '{ print $2 }' "$T/ready")" "$ps" "$top" \
    "${sched:-0}"
}

uuid=$(vgpu list --json 2>/dev/null | jq -r '.gpus[0].uuid' 2>/dev/null)
# sched: job entries in the GPU's schedule (at most VGPU_SCHED_MAX_JOBS, 32: a job past them runs
# with its GPU time NOT limited, and says so on its stderr)
printf '%-22s %6s %10s %10s %10s %11s %9s %9s %7s\n' "load" procs "launch+ns" "(median)" "alloc_ns" "outside_us" \
  "ps_ms" "top_ms" sched
for n in ${GROWTH_PROCS:-1 16 64 256 1024}; do
  measure "1 job, $n proc" "$n"
  stop_all
done
for j in ${GROWTH_JOBS:-1 16 64}; do
  for ((k = 1; k < j; k++)); do
    start vgpu run --name "peer$k" --core 10 -- core_loop -m client -s 1 -k 100 -i 200000 -t 600
  done
  # every peer has launched (it is in the schedule) before the measured job starts
  for ((i = 0; i < 600; i++)); do
    [ "$(vgpu ps --json 2>/dev/null | jq '[.jobs[]? | select(.state == "running")] | length' 2>/dev/null)" = $((j - 1)) ] && break
    sleep 0.1
  done
  sleep 1
  measure "$j jobs on the GPU" 1
  stop_all
done
