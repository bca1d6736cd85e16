#!/bin/bash
# A/B of the launch path on a real GPU, interleaved on one machine (issue 14):
#   bash tests/gpu/launch_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]
# For each build and round: launch_toggle under --core 90 and 50 (capped minus unlimited, in one
# process) and -r (through libvgpu.so minus the driver's own cuLaunchKernel, no core limit),
# pinned to one CPU. Processes differ by about ±600 ns per launch, so only the in-process
# differences are comparable; the rounds alternate the builds so that drift hits both.
set -u
[ $# -ge 2 ] || { echo "usage: launch_ab.sh OLD_BUILD NEW_BUILD [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 rounds=${3:-3}
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export VGPU_STATE_DIR=$tmp/s VGPU_MACHINE_DIR=$tmp/m; mkdir -m 700 "$tmp/s"; mkdir -m 0755 "$tmp/m"
cpu=$(( $(nproc) > 2 ? 2 : 0 ))
for round in $(seq "$rounds"); do
  for b in "$old" "$new"; do
    for c in 90 50; do
      echo "$round $b core$c $(timeout 120 taskset -c $cpu "$b/vgpu" run --gpu 0 --core $c -- "$b/tests/progs/launch_toggle" -n 6000 -c $c 2>&1 | tail -n 1)"
    done
    echo "$round $b raw $(timeout 120 taskset -c $cpu "$b/vgpu" run --gpu 0 --mem 4G -- "$b/tests/progs/launch_toggle" -r -n 6000 2>&1 | tail -n 1)"
  done
done
