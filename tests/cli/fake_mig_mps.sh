#!/usr/bin/env bash
# The simulated GPU's MIG and MPS throughput (issue 18 item 10): each MIG compute instance has
# its own timeline (two CIs of one GPU instance run side by side, two processes on one CI take
# turns); an MPS client gets at most its active thread percentage of the SMs, and its pinned
# device memory limit refuses allocations past it.
source "$(dirname "$0")/lib.sh"
export VGPU_FAKE_ROOT=1

field() { # line key
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
# elapsed_s of core_loop as integer ms
ms() { awk -v s="$(field "$1" elapsed_s)" 'BEGIN { printf "%d", s * 1000 }'; }
in_band() { # desc value lo hi detail
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2)"; else not_ok "$1" "got $2, want $3..$4: $5"; fi
}

# ---- MIG: one timeline per compute instance ----
run vgpu mig enable
assert_rc "MIG on" 0
run vgpu mig create 2g.20gb --ci 1c.2g.20gb --json
assert_rc "a 2g.20gb GPU instance with one 1c.2g.20gb compute instance" 0
gi=$(jq -r '.created[0].gpu_instance_id' <<<"$out"); ci_a=$(jq -r '.created[0].uuid' <<<"$out")
run fakegpu-ctl mig-ci 0 "$gi" 1c.2g.20gb
assert_rc "a second compute instance in it" 0
ci_b=$out
# One 300 ms kernel in each process (core_loop stops after its first synchronize).
pair() { # uuid uuid
  CUDA_VISIBLE_DEVICES=$1 core_loop -k 300000 -t 0.01 >"$T_DIR/a" 2>&1 &
  local p=$!
  CUDA_VISIBLE_DEVICES=$2 core_loop -k 300000 -t 0.01 >"$T_DIR/b" 2>&1
  wait $p
  a=$(ms "$(cat "$T_DIR/a")"); b=$(ms "$(cat "$T_DIR/b")")
}
pair "$ci_a" "$ci_b"
in_band "two compute instances run side by side: the first kernel takes its 300 ms" "$a" 295 420 "$(cat "$T_DIR/a" "$T_DIR/b")"
in_band "... and so does the second" "$b" 295 420 "$(cat "$T_DIR/a" "$T_DIR/b")"
pair "$ci_a" "$ci_a"
max=$(( a > b ? a : b ))
in_band "two processes on one compute instance take turns: the later one waits" "$max" 450 800 "$(cat "$T_DIR/a" "$T_DIR/b")"
run vgpu mig disable
vgpu mig destroy all >/dev/null 2>&1; vgpu mig disable >/dev/null 2>&1; fakegpu-ctl reset >/dev/null 2>&1
run fakegpu-ctl show
assert_eq "MIG off again" 0 "$(jq -r '.gpus[0].mig_current' <<<"$out")"

# ---- MPS: active thread percentage and pinned device memory ----
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
P=$T_DIR/pipe
trap 'vgpu mps stop --pipe-dir "$P" --force --timeout 2 >/dev/null 2>&1; t_cleanup' EXIT
run vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0
assert_rc "an MPS daemon serves GPU 0" 0
# One 200 ms kernel: alone, a client at 25 % of the SMs needs four times as long.
run core_loop -k 200000 -t 0.01
in_band "not a client: the whole GPU (ms)" "$(ms "$out")" 195 300 "$out"
CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 run core_loop -k 200000 -t 0.01
in_band "a client at 25 %: a quarter of the throughput (ms)" "$(ms "$out")" 790 950 "$out"
run vgpu run --mps --core 50 -- core_loop -k 200000 -t 0.01
in_band "vgpu run --mps --core 50: half the throughput (ms)" "$(ms "$out")" 390 520 "$out"
CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G run alloc_probe alloc 768M alloc 512M alloc 256M
assert_contains "under a 1 GiB pinned limit 768 MiB fit" "alloc rc=0 size=$((768 << 20))" "$out"
assert_contains "512 MiB more do not (CUDA_ERROR_OUT_OF_MEMORY)" "alloc rc=2 size=$((512 << 20))" "$out"
assert_contains "256 MiB more still do (the context is the server's, not counted)" "alloc rc=0 size=$((256 << 20))" "$out"
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G run alloc_probe alloc 1536M
assert_contains "not a client (no pipe directory): no pinned limit" "alloc rc=0 size=$((1536 << 20))" "$out"

done_testing
