# libvgpu.so: every allocation path just under and just over the limit, on the simulated GPU
# (h100 scenario: the first context costs 512 MiB, so a 1 GiB job has 512 MiB to allocate).
# Over the limit every path returns CUDA_ERROR_OUT_OF_MEMORY (2), and each free path gives back
# what it charged (the job's used memory returns to the context overhead).
. "$(dirname "$0")/lib.sh"

probe() { run vgpu run --mem 1G -- alloc_probe "$@"; }
# The charge is also read from the job region ('charged', before the job's own cuMemGetInfo,
# which re-measures pools): a bug that moved the job's view and its charge together would pass
# a check of the view alone (issue 27).
line() { printf '%s\n' "$out" | grep -E "^$1 " | sed -n "${2:-1}p"; }
base="used=536870912"    # the context overhead alone

probe alloc 512M charged alloc 1 free charged meminfo
assert_eq "cuMemAlloc_v2 up to the limit exactly" "alloc rc=0 size=536870912" "$(line alloc 1)"
assert_eq "cuMemAlloc_v2 one byte over: OUT_OF_MEMORY" "alloc rc=2 size=1" "$(line alloc 2)"
assert_contains "cuMemFree_v2 gives the charge back" "$base" "$(line meminfo)"
assert_eq "the job region is charged the limit exactly" "charged rc=0 bytes=1073741824" "$(line charged 1)"
assert_eq "cuMemFree_v2 gives the charge back (read from the job region)" "charged rc=0 bytes=536870912" "$(line charged 2)"
assert_match "the refusal names the job, the request and the limit" \
  "vgpu\[[0-9]+\]: warning: job [0-9a-f]+: cuMemAlloc_v2 of 1 B on GPU 0 refused .*of its 1 GiB limit" "$err"
assert_eq "one line on stderr per refusal" 1 "$(printf '%s\n' "$err" | grep -c refused)"

probe alloc32 512M alloc32 1 free charged meminfo
assert_eq "old 32-bit cuMemAlloc just under / over" "alloc32 rc=0|alloc32 rc=2" "$(line alloc32 1)|$(line alloc32 2)"
assert_contains "old cuMemFree gives the charge back" "$base" "$(line meminfo)"
assert_eq "old cuMemFree gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe pitch 1024 524288 pitch 1024 1 free charged meminfo
assert_eq "cuMemAllocPitch_v2 just under (pitch x height = 512 MiB)" "pitch rc=0 pitch=1024" "$(line pitch 1)"
assert_eq "cuMemAllocPitch_v2 over" "pitch rc=2 pitch=0" "$(line pitch 2)"
assert_contains "pitched free gives the charge back" "$base" "$(line meminfo)"
assert_eq "pitched free gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe managed 500M managed 13M free charged meminfo
assert_eq "cuMemAllocManaged just under / over" "managed rc=0|managed rc=2" "$(line managed 1)|$(line managed 2)"
assert_contains "managed free gives the charge back" "$base" "$(line meminfo)"
assert_eq "managed free gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe async 500M async 13M free trim charged meminfo
assert_eq "cuMemAllocAsync just under / over" "async rc=0|async rc=2" "$(line async 1)|$(line async 2)"
assert_contains "the pool's memory is given back once the pool shrinks" "$base" "$(line meminfo)"
assert_eq "the pool's memory is given back once the pool shrinks (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe pool 500M pool 13M free trim charged meminfo
assert_eq "cuMemAllocFromPoolAsync just under / over" "pool rc=0|pool rc=2" "$(line pool 1)|$(line pool 2)"
assert_contains "explicit pool trimmed: charge given back" "$base" "$(line meminfo)"
assert_eq "explicit pool trimmed: charge given back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

# A stale charge must not give a false out-of-memory: after the synchronize the pool holds
# nothing, but the job is still charged its 500 MiB until the hook measures the pool again.
# Before refusing, the hook re-measures and tries once more (admit.c): the 500 MiB fit.
probe async 500M free sync charged alloc 500M charged
assert_eq "a pool emptied at synchronize is still charged (the stale charge)" "bytes=1061158912" \
  "$(line charged 1 | sed 's/.* //')"
assert_eq "cuMemAlloc_v2 re-measures before refusing: 500 MiB fit" "alloc rc=0 size=524288000" "$(line alloc)"
assert_eq "... and the job region holds the new charge only" "bytes=1061158912" \
  "$(line charged 2 | sed 's/.* //')"

probe async 100M async 100M async 100M async 100M async 100M async 100M meminfo
assert_eq "16-style repeated cuMemAllocAsync stops at the limit" "5" "$(printf '%s\n' "$out" | grep -c '^async rc=0')"
assert_eq "... and the next one is OUT_OF_MEMORY, never -1" "async rc=2" "$(line async 6)"

probe vmm 500M vmm 14M free charged meminfo
assert_eq "cuMemCreate (DEVICE) just under / over" "vmm rc=0|vmm rc=2" "$(line vmm 1)|$(line vmm 2)"
assert_contains "cuMemRelease gives the charge back" "$base" "$(line meminfo)"
assert_eq "cuMemRelease gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe vmmhost 2G charged meminfo
assert_eq "cuMemCreate on a HOST_NUMA location is not device memory" "vmmhost rc=0" "$(line vmmhost)"
assert_contains "... and is not charged" "$base" "$(line meminfo)"
assert_eq "... and is not charged (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe array 1024 100000 array 1024 40000 free charged meminfo
assert_eq "cuArrayCreate_v2 just under / over" "array rc=0|array rc=2" "$(line array 1)|$(line array 2)"
assert_contains "cuArrayDestroy gives the charge back" "$base" "$(line meminfo)"
assert_eq "cuArrayDestroy gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe array3d 64 64 30000 array3d 64 64 10000 free charged meminfo
assert_eq "cuArray3DCreate_v2 over / under" "array3d rc=2|array3d rc=0" "$(line array3d 1)|$(line array3d 2)"
assert_contains "3D array destroyed: charge given back" "$base" "$(line meminfo)"
assert_eq "3D array destroyed: charge given back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe mipmap 16384 8192 2 mipmap 4096 4096 5 free charged meminfo
assert_eq "cuMipmappedArrayCreate over / under" "mipmap rc=2|mipmap rc=0" "$(line mipmap 1)|$(line mipmap 2)"
assert_contains "cuMipmappedArrayDestroy gives the charge back" "$base" "$(line meminfo)"
assert_eq "cuMipmappedArrayDestroy gives the charge back (read from the job region)" "bytes=536870912" "$(line charged | sed 's/.* //')"

probe heap 256M meminfo heap 1G meminfo heap 8M meminfo
assert_eq "cuCtxSetLimit(MALLOC_HEAP_SIZE) within / beyond the limit" "heap rc=0|heap rc=2|heap rc=0" \
  "$(line heap 1)|$(line heap 2)|$(line heap 3)"
assert_contains "the heap's growth (beyond the default 8 MiB) is charged" "used=796917760" "$(line meminfo 1)"
assert_contains "a refused heap leaves the old one (and its charge)" "used=796917760" "$(line meminfo 2)"
assert_contains "shrinking the heap gives the charge back" "$base" "$(line meminfo 3)"

probe stack 2048 stack 4096 meminfo
assert_eq "cuCtxSetLimit(STACK_SIZE) within / beyond the limit" "stack rc=0|stack rc=2" "$(line stack 1)|$(line stack 2)"

probe badfree alloc 64M meminfo
assert_eq "freeing a pointer nobody charged passes through to the driver" "badfree rc=1" "$(line badfree)"

probe fill 100M meminfo
assert_eq "allocating until refused: 5 x 100 MiB fit in 512 MiB" "fill rc=2 count=5" "$(line fill)"
assert_match "used + free = total at the limit" "free=12582912 total=1073741824 used=1061158912" "$(line meminfo)"

VGPU_LOG=error probe alloc 2G
assert_eq "VGPU_LOG=error silences the refusal line" "" "$err"
assert_eq "... the refusal itself stays" "alloc rc=2 size=2147483648" "$(line alloc)"

probe alloc 1 alloc 1 alloc 1 alloc 600M alloc 600M alloc 600M
assert_eq "refusals are rate limited (one line a second)" 1 "$(printf '%s\n' "$err" | grep -c refused)"

run vgpu run -- alloc_probe alloc 8G meminfo
assert_eq "no limit: allocations pass" "alloc rc=0 size=8589934592" "$(line alloc)"
assert_match "no limit: cuMemGetInfo shows the real GPU" "total=84927315968" "$(line meminfo)"

probe graph 100M charged meminfo graphtrim charged meminfo
assert_eq "a graph with a memory node launches" "graph rc=0" "$(line graph)"
assert_contains "the graph pool's growth (100 MiB, 2 MiB steps) is charged" "used=641728512" "$(line meminfo 1)"
assert_eq "... in the job region too" "charged rc=0 bytes=641728512" "$(line charged 1)"
assert_contains "cuDeviceGraphMemTrim gives it back" "$base" "$(line meminfo 2)"
assert_eq "... in the job region too" "charged rc=0 bytes=536870912" "$(line charged 2)"
done_testing
