# libvgpu.so symbol routing: dlsym on the driver's handle, cuGetProcAddress (4- and 5-argument)
# with old ABI versions and the per-thread default-stream flag, names that must not be touched.
# The fake driver records which exported variant actually ran (VGPU_FAKE_TRACE).
. "$(dirname "$0")/lib.sh"

export LD_PRELOAD="$VGPU_BUILD/libvgpu.so${LD_PRELOAD:+:$LD_PRELOAD}"
trace=$T_DIR/trace

# One request: prints the probe's line; the trace keeps the variants called after the setup.
ask() {
  rm -f "$trace"
  run env VGPU_FAKE_TRACE="$trace" procaddr_probe "$@"
  called=$(grep -E '^cu(MemAlloc|MemGetInfo|LaunchKernel|MemAllocAsync|MemPrefetchAsync|MemAdvise|CtxCreate)' "$trace" \
    | grep -v '^cuMemAllocManaged$' | sort -u | tr '\n' ' ')
}

ask cuMemAlloc 3000 0
assert_contains "cuMemAlloc for CUDA 3.0: our wrapper" "rc=0 from=hook call=0" "$out"
assert_eq "... of the 32-bit ABI: the driver's cuMemAlloc ran" "cuMemAlloc " "$called"
ask cuMemAlloc 12000 0
assert_eq "cuMemAlloc for 12.0: cuMemAlloc_v2 ran" "cuMemAlloc_v2 " "$called"
ask cuMemGetInfo 3000 0
assert_eq "cuMemGetInfo for 3.0: the old ABI ran" "cuMemGetInfo " "$called"
ask cuLaunchKernel 12000 0
assert_eq "cuLaunchKernel, legacy stream: cuLaunchKernel ran" "cuLaunchKernel " "$called"
ask cuLaunchKernel 12000 2
assert_contains "cuLaunchKernel with PER_THREAD_DEFAULT_STREAM: our wrapper" "flags=2 rc=0 from=hook call=0" "$out"
assert_eq "... which calls cuLaunchKernel_ptsz" "cuLaunchKernel_ptsz " "$called"
ask cuMemAllocAsync 12000 2
assert_eq "cuMemAllocAsync per-thread: cuMemAllocAsync_ptsz ran" "cuMemAllocAsync_ptsz " "$called"
ask cuMemPrefetchAsync 12010 0
assert_contains "cuMemPrefetchAsync for 12.1 is the driver's own (v8000 ABI, call succeeds)" "from=driver call=0" "$out"
assert_eq "... the v8000 variant ran" "cuMemPrefetchAsync " "$called"
ask cuMemPrefetchAsync 12020 0
assert_eq "cuMemPrefetchAsync for 12.2: the _v2 variant ran" "cuMemPrefetchAsync_v2 " "$called"
ask cuMemAdvise 12010 0
assert_contains "cuMemAdvise for 12.1 with the v8000 ABI succeeds" "from=driver call=0" "$out"
ask cuCtxCreate 3020 0
assert_eq "cuCtxCreate for 3.2: cuCtxCreate_v2 ran" "cuCtxCreate_v2 " "$called"
ask cuCtxCreate 11040 0
assert_eq "cuCtxCreate for 11.4: cuCtxCreate_v3 ran" "cuCtxCreate_v3 " "$called"
ask cuCtxCreate 12050 0
assert_eq "cuCtxCreate for 12.5: cuCtxCreate_v4 ran" "cuCtxCreate_v4 " "$called"
ask cuGetProcAddress 12000 0
assert_contains "asking for cuGetProcAddress itself gives our wrapper" "cuGetProcAddress ver=12000 flags=0 rc=0 from=hook call=0" "$out"
ask cudnnCreate 12000 0 cuNoSuchThing 12000 0
assert_contains "an unknown name comes back NULL, untouched" "cudnnCreate ver=12000 flags=0 rc=0 from=null" "$out"
ask cuMemAlloc 14000 0
assert_contains "a version above the driver's: the driver's INVALID_VALUE, untouched" "rc=1 from=null" "$out"
ask --v1 cuMemAlloc 11030 0 cuLaunchKernel 11030 2
assert_contains "the 4-argument cuGetProcAddress is ours too" "getter from=hook" "$out"
assert_contains "... and routes cuMemAlloc" "cuMemAlloc ver=11030 flags=0 rc=0 from=hook call=0" "$out"
assert_eq "... and the PTDS flag" "cuLaunchKernel_ptsz cuMemAlloc_v2 " "$called"

run dlsym_probe cuda cuMemAlloc_v2 cuda cuMemAlloc cuda cuMemcpy cuda cuGetExportTable cuda cudnnCreate \
  cuda cuMemPrefetchAsync cuda cuGetProcAddress nvml nvmlDeviceGetMemoryInfo_v2 nvml nvmlInit_v2 \
  default cuLaunchKernel_ptsz next malloc
assert_contains "dlsym on the libcuda handle reaches the hook" "cuda cuMemAlloc_v2 from=hook" "$out"
assert_contains "... for the old ABI too" "cuda cuMemAlloc from=hook" "$out"
assert_contains "names we do not hook come from the driver" "cuda cuMemcpy from=driver" "$out"
assert_contains "cuGetExportTable is passed through" "cuda cuGetExportTable from=driver" "$out"
assert_contains "cudnn names are never diverted" "cuda cudnnCreate from=null" "$out"
assert_contains "cuMemPrefetchAsync is the driver's" "cuda cuMemPrefetchAsync from=driver" "$out"
assert_contains "cuGetProcAddress through dlsym is ours" "cuda cuGetProcAddress from=hook" "$out"
assert_contains "NVML memory info through dlsym is ours" "nvml nvmlDeviceGetMemoryInfo_v2 from=hook" "$out"
assert_contains "other NVML names are NVML's" "nvml nvmlInit_v2 from=driver" "$out"
assert_contains "RTLD_DEFAULT finds the hook" "default cuLaunchKernel_ptsz from=hook" "$out"
assert_match "RTLD_NEXT from the program finds the next malloc (libc's, or a sanitizer's)" "next malloc from=(libc|.*libasan)" "$out"
done_testing
