#!/usr/bin/env bash
# make demo: the main job on the real GPU when there is one, else on the simulated GPU:
# the GPUs, then two jobs with memory and GPU-time limits side by side, seen in vgpu ps and
# vgpu top --once, and what each job got.
set -u
cd "$(dirname "$0")/.." || exit 2
build=$(cd "${1:-build}" && pwd)
export PATH="$build:$PATH"
real=0
if [ -z "${VGPU_DEMO_SIMULATED:-}" ] && [ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
  real=1
fi
demo_dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$demo_dir"' EXIT
if [ $real = 1 ]; then
  echo "vgpu demo: using the real NVIDIA GPU(s) of this machine"
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    # A matmul loop for 8 s; prints the matmuls per second it reached.
    job=(python3 -c '
import torch, time
a = torch.randn(4096, 4096, device="cuda"); n = 0; t = time.time()
while time.time() - t < 8:
    a @ a; n += 1
    if n % 16 == 0: torch.cuda.synchronize()
torch.cuda.synchronize(); print(f"{n / (time.time() - t):.0f} matmuls/s")')
  else
    echo "vgpu demo: no PyTorch with CUDA here, so only the GPUs are shown"
    job=()
  fi
else
  echo "vgpu demo: no NVIDIA GPU here, so this runs on the simulated GPU (tests/fakegpu: one H100 80GB)"
  export LD_LIBRARY_PATH="$build/fakegpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VGPU_FAKE_SCENARIO=$PWD/tests/fakegpu/scenarios/h100.json
  export VGPU_FAKE_STATE=$demo_dir/fakegpu.state
  export VGPU_STATE_DIR=$demo_dir/state
  # A saturating kernel loop on the simulated GPU for 8 s; prints its share of the GPU's time
  # (share: over the 8 s; late_share: after the first 2 s).
  job=("$build/tests/progs/core_loop" -t 8 -s 8 -d 2)
fi
step() { printf '\n$ %s\n' "$*"; "$@"; }

step vgpu list || exit 1
[ ${#job[@]} -gt 0 ] || exit 0
printf '\n$ vgpu run --name infer --mem 4G --core 30 -- JOB &    # JOB: a GPU loop that would take all it can\n'
vgpu run --name infer --mem 4G --core 30 -- "${job[@]}" > "$demo_dir/infer.out" &
printf '$ vgpu run --name train --mem 8G --core 60 -- JOB &\n'
vgpu run --name train --mem 8G --core 60 -- "${job[@]}" > "$demo_dir/train.out" &
# Shown once both jobs have had half a second of GPU time each (the limiter's own measure),
# however long a loaded machine takes to start them; not after a guessed delay.
both_ran() {
  [ "$(vgpu ps --json 2>/dev/null | jq '[.jobs[] | select(.name == "infer" or .name == "train")
      | select(([.gpus[].gpu_time_ns // 0] | add) >= 500000000)] | length' 2>/dev/null)" = 2 ]
}
for _ in $(seq 600); do both_ran && break; sleep 0.05; done
both_ran || { echo "vgpu demo: the two jobs did not get 0.5 s of GPU time each within 30 s" >&2; vgpu ps >&2; exit 1; }
step vgpu ps
step env COLUMNS=110 vgpu top --once
wait
printf '\nwhat each job got (capped at 30%% and 60%% of the GPU'"'"'s time):\n'
printf '  infer: %s\n  train: %s\n' "$(cat "$demo_dir/infer.out")" "$(cat "$demo_dir/train.out")"
