# libvgpu.so launch paths: every launch entry point (and its _ptsz variant) goes through our
# wrapper, which calls exactly the same variant of the driver, with and without a core limit.
. "$(dirname "$0")/lib.sh"

names="cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx cuLaunchKernelEx_ptsz cuLaunchCooperativeKernel
cuLaunchCooperativeKernel_ptsz cuLaunchHostFunc cuLaunchHostFunc_ptsz cuGraphLaunch cuGraphLaunch_ptsz"
for limit in "" "--core 50"; do
  rm -f "$T_DIR/trace"
  run env VGPU_FAKE_TRACE="$T_DIR/trace" vgpu run $limit -- launch_probe
  what=${limit:-no core limit}
  for n in $names; do
    assert_contains "$what: $n succeeds" "$n rc=0" "$out"
    assert_eq "$what: $n ran the driver's $n exactly once" 1 "$(grep -cx "$n" "$T_DIR/trace")"
  done
done
run nm -D --defined-only "$VGPU_BUILD/libvgpu.so"
for n in $names; do assert_contains "$n is exported by libvgpu.so" " $n" "$out"; done
done_testing
