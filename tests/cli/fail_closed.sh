# vgpu run --fail-closed and VGPU_FAIL_CLOSED=1 (issue 12 item 2): a process that cannot reach its
# job region gets errors from the driver instead of running unlimited: context creation returns
# CUDA_ERROR_NOT_PERMITTED (800), allocations CUDA_ERROR_OUT_OF_MEMORY (2); it is said once.
. "$(dirname "$0")/lib.sh"
lib=$VGPU_BUILD/libvgpu.so
preload=$lib${LD_PRELOAD:+:$LD_PRELOAD}

# Without it (the default): a child that lost VGPU_REGION runs unlimited.
run vgpu run --mem 1G -- sh -c 'unset VGPU_REGION; alloc_probe alloc 2G'
assert_rc "without --fail-closed a child without VGPU_REGION still runs" 0
assert_contains "... and gets 2 GiB under a 1 GiB job (unlimited)" "alloc rc=0 size=2147483648" "$out"

# With --fail-closed: the same child cannot create a context.
run vgpu run --fail-closed --mem 1G -- sh -c 'unset VGPU_REGION; alloc_probe alloc 2G'
assert_rc "--fail-closed: the child's setup fails (alloc_probe exits 2)" 2
assert_contains "--fail-closed: cuDevicePrimaryCtxRetain returns CUDA_ERROR_NOT_PERMITTED" \
  "cuDevicePrimaryCtxRetain(&ctx, dev) failed: 800" "$err"
assert_contains "--fail-closed: the library says why and what to do" "VGPU_FAIL_CLOSED=1 and this process has no usable job region" "$err"

# A region that cannot be opened counts the same.
run vgpu run --fail-closed --mem 1G -- sh -c 'VGPU_REGION=/nonexistent/x.region alloc_probe alloc 1M'
assert_rc "--fail-closed: an unusable VGPU_REGION is refused too" 2
assert_contains "the open error is said first" "cannot open the job region VGPU_REGION=/nonexistent/x.region" "$err"
assert_eq "the refusal is said once" 1 "$(grep -c 'VGPU_FAIL_CLOSED=1 and this process' <<<"$err")"

# The job itself is unaffected.
run vgpu run --fail-closed --mem 1G -- alloc_probe alloc 256M alloc 1G
assert_rc "--fail-closed: a job with its region runs" 0
assert_contains "its allocations are limited as always" "alloc rc=0 size=268435456" "$out"
assert_contains "and refused over the limit" "alloc rc=2 size=1073741824" "$out"

# The variable alone (an orchestrator that preloads the library itself).
run env LD_PRELOAD="$preload" VGPU_FAIL_CLOSED=1 alloc_probe alloc 1M
assert_rc "VGPU_FAIL_CLOSED=1 without any job: refused" 2
assert_contains "... with CUDA_ERROR_NOT_PERMITTED" "failed: 800" "$err"
run env LD_PRELOAD="$preload" VGPU_FAIL_CLOSED=0 alloc_probe alloc 1M
assert_rc "VGPU_FAIL_CLOSED=0: no job, no limits, runs" 0
run env LD_PRELOAD="$preload" VGPU_FAIL_CLOSED=yes alloc_probe alloc 1M
assert_rc "VGPU_FAIL_CLOSED=yes: taken as 1 (the safe side)" 2
assert_contains "... and the bad value is said" "VGPU_FAIL_CLOSED='yes': write 1 (or 0); taken as 1" "$err"

# cuCtxCreate_v2 is refused as well.
touch "$T_DIR/go" "$T_DIR/release"
run env LD_PRELOAD="$preload" VGPU_FAIL_CLOSED=1 ctx_start "$T_DIR/go" "$T_DIR/release" create
assert_contains "cuCtxCreate_v2 under VGPU_FAIL_CLOSED=1: CUDA_ERROR_NOT_PERMITTED" "ctx rc=800" "$out"

done_testing
