# A lost GPU (VGPU_FAKE_FAIL=gpu_lost=N): every command says "GPU N is lost", exits 12
# (vgpu(1)), and JSON has null where a value is missing (issue 13: list, mode get and
# mig status printed a row of empty fields and exited 0; vgpu run said "no GPU reports its
# memory").
. "$(dirname "$0")/lib.sh"

export VGPU_FAKE_FAIL=gpu_lost=0
for c in "list" "mode get" "mig status"; do
  # shellcheck disable=SC2086
  run vgpu $c
  assert_rc "vgpu $c: exits 12" 12
  assert_contains "vgpu $c: stderr names the lost GPU" "GPU 0 is lost" "$err"
  assert_contains "vgpu $c: its row says it is lost" "GPU is lost" "$out"
  run vgpu $c --json
  assert_rc "vgpu $c --json: exits 12" 12
  assert_eq "vgpu $c --json: name is null, lost is true" "null true" "$(jq -r '.gpus[0] | "\(.name) \(.lost)"' <<<"$out")"
done
run vgpu mode set default
assert_rc "vgpu mode set on a lost GPU: 12" 12
assert_contains "vgpu mode set names the lost GPU" "GPU 0 is lost" "$err"
export VGPU_FAKE_ROOT=1
run vgpu mig enable
assert_rc "vgpu mig enable on a lost GPU: 12" 12
unset VGPU_FAKE_ROOT
run vgpu run --mem 1G -- true
assert_rc "vgpu run --mem 1G: 125" 125
assert_contains "vgpu run --mem 1G names the lost GPU" "GPU 0 is lost" "$err"
run vgpu run --gpu 0 -- true
assert_contains "vgpu run --gpu 0 names the lost GPU" "GPU 0 is lost" "$err"

# Another GPU still works: listed normally; placement chooses around the lost one.
use_scenario mixed
run vgpu list --json
assert_rc "mixed, GPU 0 lost: list exits 12" 12
assert_eq "mixed, GPU 0 lost: GPU 1 still has its name" "NVIDIA H100 80GB HBM3 false" "$(jq -r '.gpus[1] | "\(.name) \(.lost)"' <<<"$out")"
run vgpu run --mem 1G -- true
assert_rc "mixed, GPU 0 lost: vgpu run --mem 1G is placed elsewhere" 0
unset VGPU_FAKE_FAIL
run vgpu list
assert_rc "no GPU lost: list exits 0" 0

# vgpu timeslice too (use_scenario h100: GPU 0 is the only one).
use_scenario h100
export VGPU_FAKE_FAIL=gpu_lost=0
run vgpu timeslice get
assert_rc "vgpu timeslice get: 12" 12
assert_contains "vgpu timeslice get names the lost GPU" "GPU 0 is lost" "$err"
run vgpu timeslice get --json
assert_eq "vgpu timeslice get --json: name is null" "null" "$(jq -r '.gpus[0].name' <<<"$out")"
run env VGPU_FAKE_ROOT=1 vgpu timeslice set long
assert_rc "vgpu timeslice set on a lost GPU: 12" 12
unset VGPU_FAKE_FAIL

done_testing
