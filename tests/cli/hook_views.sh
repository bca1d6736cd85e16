# libvgpu.so views: cuMemGetInfo, cuDeviceTotalMem and NVML show the job's slice with
# used + free = total and never a negative free; NVML lists only the job's GPUs; without a
# limit everything shows the real GPU.
. "$(dirname "$0")/lib.sh"
use_scenario big                   # 8 x H100 80GB
field() { printf '%s\n' "$2" | sed -n "s/.*[ ^]$1=\([0-9]*\).*/\1/p" | sed -n "${3:-1}p"; }

run nvml_probe
assert_contains "outside a job NVML lists every GPU" "count=8" "$out"
real_total=$(field total "$out")
real_free=$(field free "$out")

run vgpu run --gpu 2,5 --mem 2G -- sh -c 'alloc_probe alloc 1G hold > "$0/h" & wait_until 30 grep -q holding "$0/h"
  nvml_probe; nvml_probe --dlopen; alloc_probe meminfo meminfo32 totalmem; kill $!' "$T_DIR"
assert_eq "inside a job NVML lists only the job's GPUs (linked and dlopen'ed)" 2 "$(printf '%s\n' "$out" | grep -c '^count=2')"
assert_contains "... the first GPU of the job first" "gpu=0 uuid=GPU-5a1e0002" "$out"
assert_contains "... then the second" "gpu=1 uuid=GPU-5a1e0005" "$out"
gpu0=$(printf '%s\n' "$out" | grep '^gpu=0' | head -1)
assert_contains "nvmlDeviceGetMemoryInfo: total is the slice" "total=2147483648" "$gpu0"
assert_contains "nvmlDeviceGetMemoryInfo: used is the job's (1 GiB + the holder's 512 MiB context)" "used=1610612736 " "$gpu0" 
t=$(field total "$gpu0"); f=$(field free "$gpu0"); u=$(field used "$gpu0")
assert_eq "nvmlDeviceGetMemoryInfo: used + free = total" "$t" "$((u + f))"
t=$(field v2total "$gpu0"); f=$(field v2free "$gpu0"); u=$(field v2used "$gpu0"); r=$(field v2reserved "$gpu0")
assert_eq "nvmlDeviceGetMemoryInfo_v2: reserved + used + free = total" "$t" "$((u + f + r))"
assert_eq "nvmlDeviceGetMemoryInfo_v2: total is the slice" 2147483648 "$t"
mi=$(printf '%s\n' "$out" | grep '^meminfo ')
assert_contains "cuMemGetInfo_v2: total is the slice" "total=2147483648" "$mi"
assert_eq "cuMemGetInfo_v2: used + free = total" "$(field total "$mi")" "$(( $(field used "$mi") + $(field free "$mi") ))"
assert_contains "cuMemGetInfo_v2 at the limit: free is 0, not negative, and the call succeeds" "rc=0 free=0 " "$mi"
assert_contains "old cuMemGetInfo: the slice too" "meminfo32 rc=0 free=0 total=2147483648" "$out"
assert_contains "cuDeviceTotalMem_v2: the slice" "totalmem rc=0 bytes=2147483648" "$out"

# A limit lowered below what the job holds: free 0, used = total, never negative.
run vgpu run --name lowered --mem 4G -- sh -c 'alloc_probe alloc 2G await "$0/go" meminfo alloc 1M > "$0/h" & wait_until 30 grep -q awaiting "$0/h"
  vgpu limit lowered --mem 1G >/dev/null; nvml_probe; alloc_probe meminfo; touch "$0/go"; wait; cat "$0/h"' "$T_DIR"
gpu0=$(printf '%s\n' "$out" | grep '^gpu=0' | head -1)
assert_contains "over a lowered limit NVML shows free 0 and used = total" "total=1073741824 free=0 used=1073741824" "$gpu0"
assert_contains "over a lowered limit a new process cannot even create its context: OUT_OF_MEMORY" "cuDevicePrimaryCtxRetain(&ctx, dev) failed: 2" "$err"
assert_contains "over a lowered limit cuMemGetInfo shows free 0 and succeeds" "meminfo rc=0 free=0 total=1073741824" "$out"
assert_contains "... and allocations are refused with OUT_OF_MEMORY" "alloc rc=2 size=1048576" "$out"

# No memory limit: the real numbers (still only the job's GPUs).
run vgpu run --gpu 3 -- sh -c 'nvml_probe; alloc_probe meminfo totalmem'
assert_contains "no limit: NVML still lists only the job's GPU" "count=1" "$out"
assert_contains "no limit: NVML shows the real total" "total=$real_total " "$out"
assert_contains "no limit: cuDeviceTotalMem is the real total, never 0" "totalmem rc=0 bytes=84927315968" "$out"
assert_match "no limit: cuMemGetInfo shows the real GPU" "meminfo rc=0 free=[0-9]+ total=84927315968" "$out"
# Another tenant beside the job (fakegpu-ctl hold: a context and 70 GiB, outside any job): the
# job's free memory is capped at what the GPU really has free, never its limit's worth. A view
# that ignored the device (free = limit - used) promised 40 GiB of which 9 GiB existed.
use_scenario h100
# exec: HOLD_PID is fakegpu-ctl itself, which the kill below ends (a subshell around it was
# killed and left it holding 70 GiB for the rest of the suite); 120 s at most all the same.
coproc HOLD { exec fakegpu-ctl hold 0 $((70 * 1024 * 1024 * 1024)) 120; }
read -r -t 20 ready <&"${HOLD[0]}"
assert_match "a second tenant holds 70 GiB of the GPU" "^ready" "${ready:-}"
# The driver's own numbers (raw: without libvgpu.so), each beside the view the job gets through
# the same API, in the same state (a CUDA process pays a context, an NVML one does not).
run vgpu run --gpu 0 --mem 40G -- sh -c 'env -u LD_PRELOAD alloc_probe meminfo | sed s/^/raw:/; alloc_probe meminfo
  env -u LD_PRELOAD nvml_probe | sed s/^/raw:/; nvml_probe'
phys_free=$(field free "$(grep '^raw:meminfo' <<<"$out")")
job_free=$(field free "$(grep '^meminfo' <<<"$out")")
nvml_phys_free=$(field free "$(grep '^raw:gpu=' <<<"$out")")
nvml_free=$(field free "$(grep '^gpu=' <<<"$out")")
check "the physical free memory beside the tenant is under 10 GiB ($phys_free)" test "$phys_free" -lt $((10 * 1024 * 1024 * 1024))
check "cuMemGetInfo's free ($job_free) is no more than the GPU has free ($phys_free)" test "${job_free:-999999999999}" -le "$phys_free"
check "... and NVML's free ($nvml_free) is no more than NVML's own ($nvml_phys_free)" \
  test "${nvml_free:-999999999999}" -le "${nvml_phys_free:-0}"
check "... yet not 0: the job may use what is there" test "${job_free:-0}" -gt 0
kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null

done_testing
