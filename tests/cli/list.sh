# vgpu list on the simulated GPU: table, JSON, selection, and every way NVML can be missing.
. "$(dirname "$0")/lib.sh"

run vgpu list
assert_rc "list exits 0" 0
assert_contains "list shows the driver version" "Driver 580.159.04" "$out"
assert_contains "list shows the CUDA version" "CUDA 13.0" "$out"
assert_contains "list shows the GPU" "NVIDIA H100 80GB HBM3" "$out"
assert_match "list shows memory in MiB like nvidia-smi" '[0-9]+ MiB / 81559 MiB' "$out"
assert_match "list shows MIG mode and compute mode" ' off +default$' "$out"

run vgpu ls --json
assert_rc "ls --json exits 0" 0
check "list --json is valid JSON" jq -e . <<<"$out"
assert_eq "schema is 1" 1 "$(jq -r .schema <<<"$out")"
assert_eq "one GPU" 1 "$(jq '.gpus | length' <<<"$out")"
assert_eq "total memory in bytes" 85520809984 "$(jq '.gpus[0].mem_total_bytes' <<<"$out")"
assert_eq "memory used: 0 (no process on the GPU)" 0 "$(jq -r '.gpus[0].mem_used_bytes' <<<"$out")"
assert_eq "MIG mode current" disabled "$(jq -r '.gpus[0].mig_mode_current' <<<"$out")"
assert_eq "compute mode" default "$(jq -r '.gpus[0].compute_mode' <<<"$out")"
assert_eq "driver version" 580.159.04 "$(jq -r '.driver_version' <<<"$out")"
assert_eq "cuda version" 13.0 "$(jq -r '.cuda_version' <<<"$out")"
assert_match "UUID" '^GPU-[0-9a-f-]{36}$' "$(jq -r '.gpus[0].uuid' <<<"$out")"

use_scenario mixed
run vgpu list --json
assert_eq "mixed scenario has three GPUs" 3 "$(jq '.gpus | length' <<<"$out")"
uuid1=$(jq -r '.gpus[1].uuid' <<<"$out")
pci2=$(jq -r '.gpus[2].pci_bus_id' <<<"$out")
run vgpu list --gpu 1 --json
assert_eq "--gpu index selects one" "$uuid1" "$(jq -r '.gpus[0].uuid' <<<"$out")"
run vgpu list --gpu "$uuid1" --json
assert_eq "--gpu UUID selects it" 1 "$(jq -r '.gpus[0].index' <<<"$out")"
run vgpu list --gpu "${uuid1:0:14}" --json
assert_eq "--gpu unique UUID prefix selects it" 1 "$(jq -r '.gpus[0].index' <<<"$out")"
run vgpu list --gpu "${uuid1:4:8}" --json
assert_eq "--gpu prefix without GPU- selects it" 1 "$(jq -r '.gpus[0].index' <<<"$out")"
run vgpu list --gpu "$pci2" --json
assert_eq "--gpu PCI bus id selects it" 2 "$(jq -r '.gpus[0].index' <<<"$out")"
run vgpu list --gpu "${pci2#00000000:}" --json
assert_eq "--gpu short PCI bus id selects it" 2 "$(jq -r '.gpus[0].index' <<<"$out")"
run vgpu list --gpu 2,0 --json
assert_eq "--gpu comma list keeps the order" "2 0" "$(jq -r '[.gpus[].index] | join(" ")' <<<"$out")"
run vgpu list --gpu all --json
assert_eq "--gpu all selects every GPU" 3 "$(jq '.gpus | length' <<<"$out")"
run vgpu list --gpu 5
assert_rc "unknown index exits 2" 2
assert_contains "unknown index is named" "there is no GPU 5" "$err"
assert_contains "unknown index lists the GPUs" "$uuid1" "$err"
# "GPU-" (or "G") says nothing about which GPU: at least two characters of the UUID itself.
run vgpu list --gpu GPU-
assert_rc "--gpu GPU- (no UUID character) exits 2" 2
assert_contains "--gpu GPU- asks for two characters of the UUID" "two characters or more after GPU-" "$err"
use_scenario h100
run vgpu list --gpu GPU-
assert_rc "--gpu GPU- is refused with one GPU too" 2
run vgpu list --gpu GPU-4f --json
assert_eq "--gpu GPU-4f (two characters) selects it" 0 "$(jq -r '.gpus[0].index' <<<"$out")"
# lspci writes the domain with 4 digits, NVML with 8: both name the GPU, in either case.
for pci in 0000:1B:00.0 0000:1b:00.0 00000000:1B:00.0 1b:00.0; do
  run vgpu list --gpu "$pci" --json
  assert_eq "--gpu $pci selects the GPU at 00000000:1B:00.0" 0 "$(jq -r '.gpus[0].index' <<<"$out")"
done
run vgpu list --gpu 0001:1B:00.0
assert_rc "--gpu in another PCI domain matches nothing" 2
for typo in al alll lal; do
  run vgpu list --gpu "$typo"
  assert_contains "--gpu $typo: did you mean 'all'" "did you mean 'all'?" "$err"
done
run vgpu list --gpu 4f
assert_rc "--gpu 4f: a UUID start is no typo of all" 0
# Values have no spaces, as every other option's (vgpu(1), SIZES): "0, 1" was taken as 0,1.
for sp in " 0" "0 " "0, 0"; do
  run vgpu list --gpu "$sp"
  assert_rc "--gpu '$sp' (a space) exits 2" 2
  assert_contains "--gpu '$sp' says it has a space" "has a space" "$err"
done
# Two GPUs whose UUIDs start alike: their common start is ambiguous, said with the count.
sed 's/GPU-7d3e9b20/GPU-4f6c9b20/' "$VGPU_SRC/tests/fakegpu/scenarios/mixed.json" > "$T_DIR/alike.json"
export VGPU_FAKE_SCENARIO=$T_DIR/alike.json; rm -f "$VGPU_FAKE_STATE"
run vgpu list --gpu GPU-4f6c
assert_rc "ambiguous prefix exits 2" 2
assert_contains "ambiguous prefix says so" "matches 2 GPUs" "$err"
use_scenario mixed
run vgpu list --gpu nonsense
assert_rc "unknown selector exits 2" 2
assert_contains "unknown selector quotes it" "'nonsense'" "$err"
run vgpu list --gpu ""
assert_rc "empty selector exits 2" 2
run vgpu list extra
assert_rc "unexpected operand exits 2" 2
use_scenario h100

# NVML missing in each of its ways: each its own message and status.
run env LD_LIBRARY_PATH=/nonexistent vgpu list
assert_rc "no NVML library exits 3" 3
assert_contains "no NVML library is explained" "cannot load libnvidia-ml.so.1" "$err"
assert_contains "no NVML library suggests the driver" "Is the NVIDIA driver installed?" "$err"
run env VGPU_NVML_LIB=/nonexistent/libnvidia-ml.so.1 vgpu list
assert_rc "VGPU_NVML_LIB to a missing file exits 3" 3
run env VGPU_NVML_LIB=/lib/x86_64-linux-gnu/libc.so.6 vgpu list
assert_rc "a library that is not NVML exits 3" 3
assert_contains "a library that is not NVML is explained" "not the NVIDIA driver's NVML library" "$err"

run env VGPU_FAKE_FAIL=nvml_init=driver_not_loaded vgpu list
assert_rc "driver not loaded exits 4" 4
assert_contains "driver not loaded is explained" "kernel driver is not loaded" "$err"
run env VGPU_FAKE_FAIL=nvml_init=lib_version_mismatch vgpu list
assert_rc "version mismatch exits 4" 4
assert_contains "version mismatch is explained" "different versions" "$err"
run env VGPU_FAKE_FAIL=nvml_init=no_gpus vgpu list
assert_rc "no GPUs exits 5" 5
assert_contains "no GPUs is explained" "no supported NVIDIA GPU" "$err"
run env VGPU_FAKE_FAIL=nvml_init=no_permission vgpu list
assert_rc "no permission exits 6" 6
assert_contains "no permission is explained" "/dev/nvidia" "$err"
done_testing
