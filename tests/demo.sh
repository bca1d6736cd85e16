#!/usr/bin/env bash
# make demo: the main job on the real GPU when there is one, else on the simulated GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
build=$(cd "${1:-build}" && pwd)
export PATH="$build:$PATH"
real=0
if [ -z "${VGPU_DEMO_SIMULATED:-}" ] && [ -e /dev/nvidiactl ] && ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
  real=1
fi
if [ $real = 1 ]; then
  echo "vgpu demo: using the real NVIDIA GPU(s) of this machine"
else
  echo "vgpu demo: no NVIDIA GPU here, so this runs on the simulated GPU (tests/fakegpu: one H100 80GB)"
  demo_dir=$(mktemp -d)
  trap 'rm -rf "$demo_dir"' EXIT
  export LD_LIBRARY_PATH="$build/fakegpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export VGPU_FAKE_SCENARIO=$PWD/tests/fakegpu/scenarios/h100.json
  export VGPU_FAKE_STATE=$demo_dir/fakegpu.state
  export VGPU_STATE_DIR=$demo_dir/state
fi
set -x
vgpu list
