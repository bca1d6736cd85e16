# vgpu run --oversubscribe (issue 15): virtual device memory. A job may allocate up to its --mem
# cap, of which at most DEVICE_SIZE stays on the GPU; cuMemAlloc past that is served from managed
# memory (lib/hook/spill.c); what cannot be paged fails at the device share; jobs without the
# option never spill and keep their memory. Also CUDA_OVERSUBSCRIBE=true with HAMi's variables.
# On the code before, vgpu run had no --oversubscribe and a --mem larger than the GPU was
# refused, so every assertion here failed.
# h100 scenario: 84,927,315,968 B usable, each process's context costs 512 MiB (charged on the
# device part).
. "$(dirname "$0")/lib.sh"

line() { printf '%s\n' "$out" | grep -E "^$1 " | sed -n "${2:-1}p"; }
G=1073741824
ctx=536870912

run vgpu run --mem 120G --oversubscribe=2G -- oversub_probe meminfo alloc 1G ismanaged alloc 2G ismanaged meminfo \
  alloc 100G alloc 20G free free free meminfo
assert_rc "a job with a 120 GiB cap runs on an 80 GB GPU" 0
assert_eq "cuMemGetInfo shows the cap, not the GPU" "meminfo rc=0 free=$((120 * G - ctx)) total=$((120 * G))" "$(line meminfo 1)"
assert_eq "within the device share: ordinary device memory" "ismanaged rc=0 v=0" "$(line ismanaged 1)"
assert_eq "past the device share: the allocation still succeeds ..." "alloc rc=0 size=$((2 * G))" "$(line alloc 2)"
assert_eq "... from managed memory" "ismanaged rc=0 v=1" "$(line ismanaged 2)"
assert_eq "both count against the cap" "meminfo rc=0 free=$((117 * G - ctx)) total=$((120 * G))" "$(line meminfo 2)"
assert_eq "100 GiB more fits under the cap (spilled)" "alloc rc=0 size=$((100 * G))" "$(line alloc 3)"
assert_eq "the cap is hard: 20 GiB more is OUT_OF_MEMORY" "alloc rc=2 size=$((20 * G))" "$(line alloc 4)"
assert_eq "frees give everything back, spilled or not" "meminfo rc=0 free=$((120 * G - ctx)) total=$((120 * G))" "$(line meminfo 3)"

# NVML's per-process figure counts only resident managed pages: the library's reconciliation
# with it (at most once a second, before an allocation) must not take spilled memory that is not
# resident for context overhead it over-charged, and give the overhead back.
# (The sleep is under test: the reconciliation runs at most once a second, so it runs at the next
# allocation.)
run vgpu run --mem 120G --oversubscribe=2G -- oversub_probe alloc 1G alloc 3G meminfo sleep 1100 alloc 1M meminfo
assert_eq "spilled memory that is not resident does not make the context overhead vanish" \
  "meminfo rc=0 free=$((116 * G - ctx - 1048576)) total=$((120 * G))" "$(line meminfo 2)"

run vgpu run --mem 120G --oversubscribe=2G -- alloc_probe totalmem
assert_eq "cuDeviceTotalMem shows the cap" "totalmem rc=0 bytes=$((120 * G))" "$(line totalmem)"
run vgpu run --mem 120G --oversubscribe=2G -- nvml_probe
assert_match "NVML inside the job shows the cap too" "total=$((120 * G)) " "$out"

# What cannot be paged fails at the device share (2 GiB, 512 MiB of it the context).
run vgpu run --mem 120G --oversubscribe=2G -- alloc_probe vmm 2G async 2G pool 2G array 32768 32768 alloc 2G
assert_eq "VMM (cuMemCreate) past the device share: OUT_OF_MEMORY" "vmm rc=2" "$(line vmm | cut -d' ' -f1-2)"
assert_eq "a pool allocation past it: OUT_OF_MEMORY" "async rc=2" "$(line async | cut -d' ' -f1-2)"
assert_eq "an explicit pool past it: OUT_OF_MEMORY" "pool rc=2" "$(line pool | cut -d' ' -f1-2)"
assert_eq "an array (4 GiB) past it: OUT_OF_MEMORY" "array rc=2" "$(line array | cut -d' ' -f1-2)"
assert_eq "while cuMemAlloc of the same size spills" "alloc rc=0" "$(line alloc | cut -d' ' -f1-2)"
run vgpu run --mem 120G --oversubscribe=2G -- oversub_probe alloc 1G ipc alloc 2G ipc
assert_eq "IPC export of device memory within the share works" "ipc rc=0" "$(line ipc 1)"
assert_eq "IPC export of spilled memory: OUT_OF_MEMORY, as the allocation without the option" "ipc rc=2" "$(line ipc 2)"
assert_contains "... saying why" "cuIpcGetMemHandle of memory allocated past the job's device share" "$err"
run vgpu run --mem 120G --oversubscribe=2G -- alloc_probe graph 2G
assert_eq "graph memory past it: OUT_OF_MEMORY" "graph rc=2" "$(line graph | cut -d' ' -f1-2)"

# vgpu ps, vgpu top and their JSON show what lives on and off the device.
vgpu run --name ov --mem 120G --oversubscribe=2G -- oversub_probe alloc 1G alloc 3G hold >"$T_DIR/ov.out" 2>&1 &
ov=$!
if poll_until 10 grep -q holding "$T_DIR/ov.out"; then ok "a job spills 3 GiB"; else not_ok "a job spills 3 GiB" "$(cat "$T_DIR/ov.out")"; fi
run vgpu ps --json
assert_eq "ps --json: on and off the device, per GPU" "true $((2 * G)) $((3 * G + G + ctx - 3 * G)) $((3 * G))" \
  "$(printf '%s' "$out" | jq -r '.jobs[] | select(.name == "ov") | .gpus[0] | "\(.oversubscribed) \(.mem_device_limit_bytes) \(.mem_on_device_bytes) \(.mem_off_device_bytes)"')"
assert_eq "ps --json: per job" "$((G + ctx)) $((3 * G))" \
  "$(printf '%s' "$out" | jq -r '.jobs[] | select(.name == "ov") | "\(.mem_on_device_bytes) \(.mem_off_device_bytes)"')"
run vgpu ps
assert_contains "vgpu ps says it under the job's row" "~ 3 GiB of 4.50 GiB off the device (at most 2 GiB on GPU 0)" "$out"
run vgpu top --json -n 1
assert_eq "top --json: on and off the device" "true $((2 * G)) $((G + ctx)) $((3 * G))" \
  "$(printf '%s' "$out" | head -n 1 | jq -r '.jobs[] | select(.name == "ov") | "\(.oversubscribed) \(.mem_device_limit_bytes) \(.mem_on_device_bytes) \(.mem_off_device_bytes)"')"
run vgpu limit ov --mem 200G
assert_rc "vgpu limit raises an oversubscribed job's cap past the GPU" 0
run vgpu ps --json
assert_eq "... to 200 GiB, the device share unchanged" "$((200 * G)) $((2 * G))" \
  "$(printf '%s' "$out" | jq -r '.jobs[] | select(.name == "ov") | .gpus[0] | "\(.mem_limit_bytes) \(.mem_device_limit_bytes)"')"
kill "$ov"; wait "$ov" 2>/dev/null

# A job without the option never spills.
run vgpu run --mem 4G -- oversub_probe alloc 3G alloc 1G
assert_eq "without --oversubscribe: OUT_OF_MEMORY at the limit, as before" "alloc rc=0|alloc rc=2" \
  "$(line alloc 1 | cut -d' ' -f1-2)|$(line alloc 2 | cut -d' ' -f1-2)"

# ... and keeps its memory beside one that does: the oversubscribed job's managed pages fill
# the GPU (a kernel touches them), and the other job's cuMemAlloc evicts them to the host.
vgpu run --mem 120G --oversubscribe=1G -- oversub_probe alloc 100G launch meminfo hold >"$T_DIR/big.out" 2>&1 &
big=$!
if poll_until 10 grep -q holding "$T_DIR/big.out" && grep -q "^alloc rc=0" "$T_DIR/big.out"; then ok "an oversubscribed job spills 100 GiB"; else not_ok "an oversubscribed job spills 100 GiB" "$(cat "$T_DIR/big.out")"; fi
run nvml_probe   # outside any job: the GPU as it is
gfree=$(printf '%s\n' "$out" | sed -n 's/^gpu=0 .* free=\([0-9]*\) .*/\1/p')
if [ -n "$gfree" ] && [ "$gfree" -lt "$G" ]; then ok "... whose pages the kernel made resident fill the GPU"; else not_ok "... whose pages the kernel made resident fill the GPU" "$out"; fi
run vgpu run --mem 60G -- oversub_probe alloc 50G
assert_eq "a job without the option gets its memory beside it" "alloc rc=0 size=$((50 * G))" "$(line alloc)"
kill "$big"; wait "$big" 2>/dev/null

# The default device share is what the GPU has free at the start.
run env VGPU_LOG=debug vgpu run --mem 120G --oversubscribe -- true
assert_match "default device share: the GPU's free memory" "oversubscribed: 79\.[0-9]+ GiB of 120 GiB" "$err"

# Bad input.
run vgpu run --oversubscribe -- true
assert_rc "--oversubscribe without --mem: exit 125" 125
assert_contains "... says --mem is needed" "--oversubscribe needs --mem SIZE" "$err"
run vgpu run --mem 4G --oversubscribe=lots -- true
assert_rc "a bad DEVICE_SIZE: exit 125" 125
run vgpu run --mem 4G --oversubscribe=100G -- true
assert_contains "a DEVICE_SIZE larger than the GPU is refused" "larger than GPU 0" "$err"
run vgpu run --mem 120G -- true
assert_rc "a cap larger than the GPU still needs --oversubscribe" 125

# HAMi's variables: CUDA_OVERSUBSCRIBE=true means the same (spill when the GPU is full).
hami() { run env LD_PRELOAD="$VGPU_BUILD/libvgpu.so" CUDA_DEVICE_MEMORY_SHARED_CACHE="$T_DIR/hami.$1" \
  CUDA_DEVICE_MEMORY_LIMIT=120g CUDA_OVERSUBSCRIBE="$2" oversub_probe meminfo alloc 70G alloc 20G ismanaged; }
hami a true
assert_eq "HAMi: CUDA_OVERSUBSCRIBE=true shows the scaled limit" "meminfo rc=0 free=$((120 * G - ctx)) total=$((120 * G))" "$(line meminfo)"
assert_eq "HAMi: what the GPU cannot hold spills" "alloc rc=0|ismanaged rc=0 v=1" "$(line alloc 2 | cut -d' ' -f1-2)|$(line ismanaged)"
hami b false
assert_eq "HAMi: without it, the GPU's own OUT_OF_MEMORY" "alloc rc=2" "$(line alloc 2 | cut -d' ' -f1-2)"
hami c yes
assert_contains "HAMi: a bad CUDA_OVERSUBSCRIBE is an error" "CUDA_OVERSUBSCRIBE='yes': write true or false" "$err"
done_testing
