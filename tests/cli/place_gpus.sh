#!/usr/bin/env bash
# vgpu run --gpus N (issue 26): N GPUs chosen together, all or nothing: binpack, spread, NVLink
# islands before memory, --wait for all N, refusal (and no promise left behind), --oversubscribe,
# MIG instances, the error cases, and vgpu ps showing the job's GPUs.
. "$(dirname "$0")/lib.sh"
export VGPU_FAKE_ROOT=1

use_scenario h100x8   # NVLink islands 0-3 and 4-7 (tests/fakegpu/README.md)
for i in 0 1 2 3 4 5 6 7; do u[$i]=$(vgpu list --json | jq -r ".gpus[$i].uuid"); done
pair() { echo "${u[$1]},${u[$2]}"; }
# hold GPU SIZE: a job with SIZE promised on GPU, until its .go file appears; sets held_pid
hold() {
  rm -f "$T_DIR/hold$1" "$T_DIR/hold$1.go"
  vgpu run --gpu "$1" --mem "$2" -- sh -c 'echo up >"$0"; wait_until 120 test -e "$0.go"' "$T_DIR/hold$1" &
  held_pid=$!
  wait_until 20 test -s "$T_DIR/hold$1"
}
release() { touch "$T_DIR/hold$1.go"; }

run vgpu run --gpus 2 --mem 10G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_rc "--gpus 2 on an empty machine runs" 0
assert_eq "... on GPUs 0 and 1 (ties: the lowest)" "$(pair 0 1)" "$out"
assert_contains "... and says which, and how they are joined" "placed on GPUs 0, 1 (${u[0]}, ${u[1]}): NVLink" "$err"

hold 0 40G; h0=$held_pid
hold 5 40G; h5=$held_pid
run vgpu run --gpus 2 --mem 10G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "binpack: the fullest GPUs that fit, in one NVLink island" "$(pair 0 1)" "$out"
run vgpu run --gpus 2 --mem 10G --place spread -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "spread: the emptiest" "$(pair 1 2)" "$out"
release 0; release 5; wait $h0 $h5

# By memory alone binpack would take 3 and 4 (the fullest), which share no NVLink.
hold 3 40G; h3=$held_pid
hold 4 40G; h4=$held_pid
run vgpu run --gpus 2 --mem 10G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "topology first: an NVLink pair (0, 3), not the two fullest GPUs (3, 4)" "$(pair 0 3)" "$out"
run vgpu run --gpus 4 --mem 10G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "--gpus 4: one whole island" "${u[0]},${u[1]},${u[2]},${u[3]}" "$out"
assert_contains "... said to share NVLink" "placed on GPUs 0, 1, 2, 3 (" "$err"
release 3; release 4; wait $h3 $h4
# Every island has one GPU left with 50 GiB: the pair crosses the islands, and says so.
hs=()
for g in 0 1 2 4 5 6; do hold $g 40G; hs+=("$held_pid"); done
run vgpu run --gpus 2 --mem 50G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "no NVLink pair has room: GPUs 3 and 7" "$(pair 3 7)" "$out"
assert_contains "... said to share no NVLink or PCIe switch" "placed on GPUs 3, 7 (${u[3]}, ${u[7]}): no NVLink or PCIe switch shared" "$err"
run vgpu run --gpus 1 --mem 50G -- true
assert_contains "--gpus 1: one GPU, said" "placed on GPU 3 (${u[3]})" "$err"
for g in 0 1 2 4 5 6; do release $g; done
wait "${hs[@]}"

# ---- all or nothing, and --wait for all N ----
use_scenario h100x2
hold 0 60G; h0=$held_pid
run vgpu run --gpus 2 --mem 30G -- true
assert_rc "GPU 1 has room, GPU 0 not: refused" 125
assert_contains "... saying so" "no 2 GPUs have 30 GiB each of memory not promised to running jobs" "$err"
assert_contains "... with what each GPU has left" "19.65 GiB left of 79.65 GiB" "$err"
run vgpu run --gpus 3 --mem 1G -- true
assert_rc "--gpus 3 on a machine of 2: fails at once" 125
assert_contains "... saying why" "--gpus 3: only 2 GPUs (or MIG instances) on this machine; ask for at most 2" "$err"
run vgpu run --gpus 3 --mem 1G --wait -- true
assert_rc "... even with --wait (it would never end)" 125
vgpu run --gpus 2 --mem 30G --wait -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$0"' "$T_DIR/waited" 2>"$T_DIR/w.err" &
w=$!
wait_until 20 grep -q "waiting for 2 GPUs with 30 GiB each of GPU memory: place 1 in the queue" "$T_DIR/w.err"
assert_eq "--wait: not started while one of the two is full" "" "$(cat "$T_DIR/waited" 2>/dev/null)"
release 0
wait $h0 $w
assert_eq "... and runs on both once there is room" "$(pair 0 1)" "$(cat "$T_DIR/waited")"

run vgpu run --gpus 2 --mem 100G --oversubscribe=20G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_rc "--oversubscribe: placed by what stays on each GPU" 0
assert_eq "... on both" "$(pair 0 1)" "$out"

vgpu run --gpus 2 --mem 1G --name pair -- sh -c 'echo up >"$0"; wait_until 60 test -e "$0.go"' "$T_DIR/ps" 2>/dev/null &
p=$!
wait_until 20 test -s "$T_DIR/ps"
run vgpu ps --json
assert_eq "vgpu ps --json: the job's two GPUs" "${u[0]} ${u[1]}" \
  "$(printf '%s' "$out" | jq -r '.jobs[] | select(.name == "pair") | [.gpus[].uuid] | join(" ")')"
touch "$T_DIR/ps.go"; wait $p

# ---- errors ----
run vgpu run --gpus 2 --gpu 0 -- true
assert_rc "--gpus with --gpu: an error" 125
assert_contains "... saying both choose the GPUs" "--gpus and --gpu both choose the job's GPUs" "$err"
for bad in 0 17 two -1 ""; do
  run vgpu run --gpus "$bad" -- true
  assert_rc "--gpus '$bad': an error" 125
done
assert_contains "... saying what to give" "give how many GPUs the job needs, 1 to 16" "$err"
run vgpu run --gpus 2 --mem 50% -- true
assert_rc "--gpus with --mem PCT%: an error" 125
assert_contains "... asking for a size" "--gpus needs --mem SIZE" "$err"
run vgpu run --gpus 2 -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "--gpus without --mem: any two GPUs" "$(pair 0 1)" "$out"

# ---- MIG instances ----
use_scenario h100
must vgpu mig enable
must vgpu mig create 3g.40gb,2g.20gb,2g.20gb
run vgpu run --gpus 2 --mem 15G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
small=$(vgpu mig list --json | jq -r '[.gpus[0].gpu_instances[] | select(.profile=="2g.20gb") | .compute_instances[0].uuid] | sort | join(",")')
assert_eq "MIG: two instances, binpack takes both 2g.20gb" "$small" "$(printf '%s' "$out" | tr ',' '\n' | sort | paste -sd,)"
assert_contains "... said to be on the same GPU" "the same GPU" "$err"
run vgpu run --gpus 2 --mem 30G -- true
assert_rc "MIG: only one instance holds 30 GiB" 125
done_testing
