# vgpu timeslice get|set through the (fake) nvidia-smi compute-policy.
. "$(dirname "$0")/lib.sh"

run vgpu timeslice get
assert_rc "timeslice get succeeds" 0
assert_match "timeslice get shows GPU 0 default" '^0 +NVIDIA H100 80GB HBM3 .* disabled +default$' "$out"
run vgpu timeslice get --json
assert_eq "get --json: schema" 1 "$(jq -r .schema <<<"$out")"
assert_eq "get --json: timeslice" default "$(jq -r '.gpus[0].timeslice' <<<"$out")"
assert_eq "get --json: timeslice_value" 0 "$(jq -r '.gpus[0].timeslice_value' <<<"$out")"
assert_eq "get --json: mig_enabled" false "$(jq -r '.gpus[0].mig_enabled' <<<"$out")"

VGPU_FAKE_ROOT=0 run vgpu timeslice set short
assert_rc "set as non-root: exit status 6" 6
assert_contains "set as non-root: explains" "requires root" "$err"
assert_contains "set as non-root: quotes nvidia-smi" "Insufficient Permissions" "$err"

VGPU_FAKE_ROOT=1 run vgpu timeslice set short
assert_rc "set short as root" 0
assert_contains "set reports the change" "default -> short" "$out"
assert_contains "set explains new contexts" "Contexts created from now on" "$out"
assert_contains "set explains driver reload" "driver reload" "$out"
run nvidia-smi compute-policy -l
assert_contains "nvidia-smi sees Short" "Timeslice       Short" "$out"
run vgpu timeslice get --json
assert_eq "get after set" short "$(jq -r '.gpus[0].timeslice' <<<"$out")"

VGPU_FAKE_ROOT=1 run vgpu timeslice set 3 --gpu 0 --json
assert_rc "set by number --json" 0
assert_eq "set --json: timeslice" long "$(jq -r '.gpus[0].timeslice' <<<"$out")"
assert_eq "set --json: previous_timeslice" short "$(jq -r '.gpus[0].previous_timeslice' <<<"$out")"
assert_eq "set --json: changed" true "$(jq -r '.gpus[0].changed' <<<"$out")"
VGPU_FAKE_ROOT=0 run vgpu timeslice set LONG
assert_rc "setting the current value is a no-op (no root needed)" 0
assert_contains "and says so" "already long" "$out"

run vgpu timeslice set 4
assert_rc "value 4 is refused" 2
run vgpu timeslice set lnog
assert_contains "a typo gets a suggestion" "did you mean 'long'" "$err"
run vgpu timeslice
assert_rc "no verb" 2
run vgpu timeslice get --gpu 9
assert_rc "unknown GPU" 2

# nvidia-smi missing, failing, or printing something else.
VGPU_NVIDIA_SMI=$T_DIR/none run vgpu timeslice get
assert_rc "nvidia-smi missing: exit status 3" 3
assert_contains "nvidia-smi missing: names VGPU_NVIDIA_SMI" "VGPU_NVIDIA_SMI" "$err"
printf '#!/bin/sh\necho "No devices were found"; exit 6\n' >"$T_DIR/smi-nodev"; chmod +x "$T_DIR/smi-nodev"
VGPU_NVIDIA_SMI=$T_DIR/smi-nodev run vgpu timeslice get
assert_rc "nvidia-smi finds no GPU: exit status 5" 5
assert_contains "nvidia-smi finds no GPU: says so" "No devices were found" "$err"
VGPU_NVIDIA_SMI=$T_DIR/smi-nodev VGPU_FAKE_ROOT=1 run vgpu timeslice set short
assert_rc "nvidia-smi does not know the GPU on set: exit status 8" 8
printf '#!/bin/sh\necho "Failed to set timeslice policy with value SHORT for GPU 0 : Not Supported"\necho "Failed to set timeslice for requested devices : Not Supported"; exit 3\n' >"$T_DIR/smi-ns"
chmod +x "$T_DIR/smi-ns"
VGPU_NVIDIA_SMI=$T_DIR/smi-ns run vgpu timeslice set short
assert_rc "unsupported: exit status 1" 1
assert_contains "unsupported: explains" "does not support the time-slice policy" "$err"
printf '#!/bin/sh\necho "Usage: something else"\n' >"$T_DIR/smi-old"; chmod +x "$T_DIR/smi-old"
VGPU_NVIDIA_SMI=$T_DIR/smi-old run vgpu timeslice get
assert_rc "unknown output: exit status 1" 1
assert_contains "unknown output: says it cannot read it" "cannot read the output" "$err"
# Exit status 0 without the success line: not "failed (exit status 0)".
printf '#!/bin/sh\ncase "$*" in *--set-timeslice*) echo "Something unexpected"; exit 0;; esac\nexec nvidia-smi "$@"\n' >"$T_DIR/smi-odd"
chmod +x "$T_DIR/smi-odd"
VGPU_NVIDIA_SMI=$T_DIR/smi-odd VGPU_FAKE_ROOT=1 run vgpu timeslice set short
assert_rc "set answered oddly with 0: exit status 1" 1
assert_not_contains "... not 'exit status 0'" "exit status 0" "$err"
assert_contains "... says it did not confirm, quoting it" "did not say it succeeded (it said: Something unexpected)" "$err"
VGPU_FAKE_FAIL=nvml_init=driver_not_loaded run vgpu timeslice get
assert_rc "driver not loaded: exit status 4" 4

# MIG-enabled GPUs are refused.
cat >"$T_DIR/mig.json" <<'J'
{ "gpus": [ { "model": "h100-80gb", "uuid": "GPU-11111111-2222-4333-8444-555555555555", "mig_mode": 1 } ] }
J
export VGPU_FAKE_SCENARIO=$T_DIR/mig.json; rm -f "$VGPU_FAKE_STATE"
VGPU_FAKE_ROOT=1 run vgpu timeslice set short
assert_rc "MIG-enabled GPU: refused" 1
assert_contains "MIG-enabled GPU: explains" "in MIG mode" "$err"
run vgpu timeslice get --json
assert_eq "MIG-enabled GPU: get marks it" true "$(jq -r '.gpus[0].mig_enabled' <<<"$out")"
VGPU_FAKE_ROOT=1 run vgpu timeslice set short --json
assert_match "MIG refusal --json has the error" '"error": ".*MIG' "$out"
done_testing
