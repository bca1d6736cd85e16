# An NVML call that never returns (a wedged driver) is bounded: after VGPU_NVML_TIMEOUT_S seconds
# vgpu says the driver is not answering and exits (4; 125 for vgpu run) instead of hanging.
# The simulated NVML's slow=FUNCTION:MS failure makes one entry point take that long.
. "$(dirname "$0")/lib.sh"

timed() { # DESC EXPECTED_RC CMD...: runs CMD, asserts its status, its message and that it took < 5 s
  local desc=$1 want=$2 t0 t1; shift 2
  t0=$(date +%s%N)
  run env VGPU_NVML_TIMEOUT_S=1 "$@"
  t1=$(date +%s%N)
  assert_rc "$desc: exit $want" "$want"
  assert_contains "$desc: says the driver is not answering" "the NVIDIA driver is not answering" "$err"
  local ms=$(( (t1 - t0) / 1000000 ))
  if [ "$ms" -lt 5000 ]; then ok "$desc: gives up after the timeout (${ms} ms)"; else not_ok "$desc: took ${ms} ms"; fi
}

timed "vgpu list with nvmlInit hanging" 4 env VGPU_FAKE_FAIL=slow=nvmlInit_v2:20000 timeout 30 vgpu list
timed "vgpu ps with nvmlInit hanging" 4 env VGPU_FAKE_FAIL=slow=nvmlInit_v2:20000 timeout 30 vgpu ps
timed "vgpu run --mem with a device query hanging" 125 \
  env VGPU_FAKE_FAIL=slow=nvmlDeviceGetHandleByIndex_v2:20000 timeout 30 vgpu run --mem 1G true
assert_contains "the message names what hung" "listing the GPUs" "$err"

# A slow call under the bound is waited for.
run env VGPU_NVML_TIMEOUT_S=2 VGPU_FAKE_FAIL=slow=nvmlInit_v2:300 vgpu list
assert_rc "an NVML call slower than usual but under the bound: 0" 0
# 0 turns the bound off; a bad value is reported and the default used.
run env VGPU_NVML_TIMEOUT_S=0 VGPU_FAKE_FAIL=slow=nvmlInit_v2:1500 vgpu list
assert_rc "VGPU_NVML_TIMEOUT_S=0 waits as long as it takes: 0" 0
run env VGPU_NVML_TIMEOUT_S=soon vgpu list
assert_rc "a bad VGPU_NVML_TIMEOUT_S still lists: 0" 0
assert_contains "a bad VGPU_NVML_TIMEOUT_S is reported" "VGPU_NVML_TIMEOUT_S='soon'" "$err"
run env VGPU_NVML_TIMEOUT_S=soon vgpu top --json -n 3 -d 0.1
assert_eq "... once a process, not at every NVML call (3 refreshes of top)" 1 "$(grep -c "VGPU_NVML_TIMEOUT_S='soon'" <<<"$err")"

done_testing
