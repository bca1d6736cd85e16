#!/usr/bin/env bash
# Accounting on a real GPU (issue 28): an uncapped PyTorch job that keeps the GPU busy about
# half the time for 20 s; the job measures its own kernels' time with CUDA events (the truth:
# the GPU time its work took), and its record's GPU-seconds (NVML's per-process samples,
# gpu_time_source "nvml") must be within 5 % of it. The same for a --core 30 job (the schedule's
# measurement), whose truth is not its events: under a cap, an event pair also spans the time its
# queued kernels were held out of turn (10.25 s of events against 5.14 GPU-s recorded, H200). It
# counts its matmuls instead, and the truth is that count times one matmul's GPU time, measured
# first by the same script run bare (no vgpu, no cap: events are right there) for 5 s. Its energy
# is compared with nvidia-smi's mean power draw over the job, times its duration (a sanity bound,
# ±25 %: nvidia-smi samples power, the counter integrates it).
#   bash tests/gpu/acct.sh [BUILD]          (GPU 0, nothing else on it; about 1 minute)
# Prints TAP and appends a summary to tests/gpu/RESULTS.md (or $ACCT_RESULTS).
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
vgpu=$build/vgpu
tmp=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$tmp"' EXIT
export VGPU_STATE_DIR=$tmp/state; mkdir -m 0700 "$VGPU_STATE_DIR"
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "ok - # SKIP no PyTorch with CUDA"; exit 0; }

# The job (argv[1]: seconds, default 20; argv[2]: idle time per busy time, default 1) prints the
# GPU time of its own kernels (CUDA events around each burst, in seconds) and how many matmuls it
# ran. The capped job idles nowhere (0): on a GPU with a --core cap the record has what the
# schedule charged, the time the job held its turns (a turn goes back once its work is done and
# it launches nothing for 0.2 ms; before, one held idle to its end was charged whole: an H200,
# --core 30, busy then idle as long, 5.08 s held for 3.22 s of kernels; vgpu-acct(1)).
job='
import sys, torch, time
x = torch.randn(4096, 4096, device="cuda")
y = x @ x; torch.cuda.synchronize()   # cuBLAS set up before the first timed burst
busy, n = 0.0, 0
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 20
idle = float(sys.argv[2]) if len(sys.argv) > 2 else 1
t = time.time()
while time.time() - t < secs:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        y = x @ x
    b.record(); b.synchronize()
    n += 20
    ms = a.elapsed_time(b)
    busy += ms / 1000
    time.sleep(idle * ms / 1000)     # 1: idle as long as it was busy, about 50 %
print(f"busy_s={busy:.3f} matmuls={n}")
'
# One matmul's GPU time, bare (the same rhythm as the capped job's, so the same clocks).
bare=$(python3 -c "$job" 5 0 2>&1) || { echo "not ok - the bare calibration run failed: $bare"; exit 1; }
per_mm=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
              END { if (v["matmuls"] > 0) printf "%.9f", v["busy_s"] / v["matmuls"] }' <<<"$bare")
[ -n "$per_mm" ] || { echo "not ok - the bare calibration run printed no matmuls: $bare"; exit 1; }
echo "# one 4096x4096 fp32 matmul: $per_mm s of GPU time, bare ($bare)"
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }'; }
summary=()
for mode in uncapped capped; do
  opts=(); idle=1; [ "$mode" = capped ] && opts=(--core 30) && idle=0
  nvidia-smi --query-gpu=power.draw --format=csv,noheader,nounits -i 0 -lms 200 >"$tmp/power.$mode" 2>/dev/null & smi=$!
  out=$("$vgpu" run --gpu 0 --name "acct-$mode" "${opts[@]}" -- python3 -c "$job" 20 "$idle" 2>&1); rc=$?
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  [ $rc = 0 ] || { bad "$mode job ran (rc=$rc: $out)"; continue; }
  events=$(sed -n 's/^busy_s=\([0-9.]*\).*/\1/p' <<<"$out")
  matmuls=$(sed -n 's/.*matmuls=\([0-9]*\).*/\1/p' <<<"$out")
  truth=$events
  [ "$mode" = capped ] && truth=$(awk -v n="$matmuls" -v p="$per_mm" 'BEGIN { printf "%.3f", n * p }')
  [ -n "$truth" ] || { bad "$mode job printed its GPU time ($out)"; continue; }
  rec=$("$vgpu" acct --json --name "acct-$mode")
  g=$(jq -r '.jobs[0].gpus[0].gpu_seconds' <<<"$rec"); srcname=$(jq -r '.jobs[0].gpus[0].gpu_time_source' <<<"$rec")
  e=$(jq -r '.jobs[0].gpus[0].energy_joules' <<<"$rec"); dur=$(jq -r '.jobs[0].duration_seconds' <<<"$rec")
  want=$([ "$mode" = capped ] && echo schedule || echo nvml)
  [ "$srcname" = "$want" ] && ok "$mode: GPU time from $srcname" || bad "$mode: GPU time from $want (got $srcname)"
  what="its kernels took $truth s by their events"
  [ "$mode" = capped ] && what="its $matmuls matmuls x $per_mm s = $truth s (events, held turns included: $events s)"
  within "$g" "$truth" 5 && ok "$mode: $g GPU-seconds recorded, $what (±5 %)" \
    || bad "$mode: $g GPU-seconds recorded, $what (±5 %)"
  pw=$(awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n }' "$tmp/power.$mode")
  if [ "$e" = null ]; then echo "ok - # SKIP $mode: energy unknown (no counter on this GPU?)"
  else
    smi_j=$(awk -v p="$pw" -v d="$dur" 'BEGIN { printf "%.1f", p * d }')
    within "$e" "$smi_j" 25 && ok "$mode: $e J recorded; nvidia-smi's mean $pw W x $dur s = $smi_j J (±25 %)" \
      || bad "$mode: $e J recorded; nvidia-smi's mean $pw W x $dur s = $smi_j J (±25 %)"
  fi
  summary+=("| acct $mode | GPU-s $g vs $([ "$mode" = capped ] && echo "matmuls x bare" || echo events) $truth ($srcname) | energy $e J vs nvidia-smi ${pw} W x ${dur} s |")
done
{
  echo; echo "## acct.sh $(date -u +%F) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0)"
  printf '%s\n' "${summary[@]}"
} >>"${ACCT_RESULTS:-$src/tests/gpu/RESULTS.md}"
exit $fail
