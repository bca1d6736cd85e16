# vgpu mode get|set on the simulated GPU: NVML's compute mode, the permission and MIG rules.
. "$(dirname "$0")/lib.sh"

run vgpu mode get
assert_rc "mode get succeeds" 0
assert_match "mode get shows GPU 0 in the default mode" '^0 +NVIDIA H100 80GB HBM3 .* default$' "$out"

run vgpu mode get --json
assert_rc "mode get --json succeeds" 0
assert_eq "mode get --json: schema" 1 "$(jq -r .schema <<<"$out")"
assert_eq "mode get --json: compute_mode" default "$(jq -r '.gpus[0].compute_mode' <<<"$out")"
assert_eq "mode get --json: is_mig_device" false "$(jq -r '.gpus[0].is_mig_device' <<<"$out")"

VGPU_FAKE_ROOT=0 run vgpu mode set exclusive-process
assert_rc "mode set as non-root: permission exit status" 6
assert_contains "mode set as non-root: says root is needed" "requires root" "$err"
run vgpu mode get --json
assert_eq "mode set as non-root changed nothing" default "$(jq -r '.gpus[0].compute_mode' <<<"$out")"

VGPU_FAKE_ROOT=0 run vgpu mode set default
assert_rc "setting the mode a GPU already has needs no root" 0
assert_contains "and says so" "already default" "$out"

VGPU_FAKE_ROOT=1 run vgpu mode set exclusive-process --gpu 0
assert_rc "mode set exclusive-process as root" 0
assert_contains "mode set reports the change" "default -> exclusive-process" "$out"
assert_contains "mode set explains persistence" "lost on reboot" "$out"
run vgpu mode get --json
assert_eq "the mode is now exclusive-process" exclusive-process "$(jq -r '.gpus[0].compute_mode' <<<"$out")"
run nvidia-smi -i 0 -c EXCLUSIVE_PROCESS
assert_contains "nvidia-smi sees the same mode" "already set to EXCLUSIVE_PROCESS" "$out"

VGPU_FAKE_ROOT=1 run vgpu mode set 2 --json
assert_rc "mode set by number (2 = prohibited) --json" 0
assert_eq "set --json: compute_mode" prohibited "$(jq -r '.gpus[0].compute_mode' <<<"$out")"
assert_eq "set --json: previous_compute_mode" exclusive-process "$(jq -r '.gpus[0].previous_compute_mode' <<<"$out")"
assert_eq "set --json: changed" true "$(jq -r '.gpus[0].changed' <<<"$out")"
assert_eq "set --json: error" null "$(jq -r '.gpus[0].error' <<<"$out")"
VGPU_FAKE_ROOT=1 run vgpu mode set DEFAULT
assert_rc "nvidia-smi's upper-case names are accepted" 0

VGPU_FAKE_ROOT=0 run vgpu mode set prohibited --json
assert_rc "failed set --json: exit status" 6
assert_match "failed set --json: the error is in the document" '"error": ".*requires root' "$out"
assert_eq "failed set --json: changed false" false "$(jq -r '.gpus[0].changed' <<<"$out")"

run vgpu mode set exclusive-thread
assert_rc "exclusive-thread is refused" 2
assert_contains "exclusive-thread: explains why" "removed" "$err"
run vgpu mode set exclusiv-process
assert_rc "unknown mode: usage error" 2
assert_contains "unknown mode: suggests" "did you mean 'exclusive-process'" "$err"
run vgpu mode set
assert_rc "set without a mode" 2
run vgpu mode
assert_rc "no verb" 2
run vgpu mode gte
assert_rc "unknown verb" 2
assert_contains "unknown verb suggests get" "did you mean 'get'" "$err"
run vgpu mode get extra
assert_rc "extra operand" 2
run vgpu mode get --gpu 7
assert_rc "unknown GPU" 2
assert_contains "unknown GPU lists the GPUs" "GPU-" "$err"

# MIG: the parent GPU takes no compute mode, and exclusive-process never under MIG.
cat >"$T_DIR/mig.json" <<'J'
{ "gpus": [ { "model": "h100-80gb", "uuid": "GPU-11111111-2222-4333-8444-555555555555", "mig_mode": 1 } ] }
J
export VGPU_FAKE_SCENARIO=$T_DIR/mig.json; rm -f "$VGPU_FAKE_STATE"
VGPU_FAKE_ROOT=1 run vgpu mode set prohibited --gpu 0
assert_rc "MIG parent GPU: refused" 1
assert_contains "MIG parent GPU: says to use MIG devices" "set per MIG device" "$err"
VGPU_FAKE_ROOT=1 run vgpu mode set exclusive-process --gpu 0
assert_rc "MIG parent GPU, exclusive-process: refused" 1
VGPU_FAKE_ROOT=1 run vgpu mode set default --gpu 0
assert_rc "MIG parent GPU already in the default mode: set default changes nothing, exit 0" 0
assert_contains "... and says it is already so" "already default" "$out"
VGPU_FAKE_ROOT=1 run vgpu mode set default
assert_rc "set default over every GPU with a MIG one: 0" 0

# No driver.
VGPU_FAKE_FAIL=nvml_init=driver_not_loaded run vgpu mode get
assert_rc "driver not loaded: exit status 4" 4
done_testing
