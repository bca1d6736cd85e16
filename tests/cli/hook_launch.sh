# libvgpu.so launch paths: every launch entry point (and its _ptsz variant) goes through our
# wrapper, which calls exactly the same variant of the driver, with and without a core limit.
. "$(dirname "$0")/lib.sh"

names="cuLaunchKernel cuLaunchKernel_ptsz cuLaunchKernelEx cuLaunchKernelEx_ptsz cuLaunchCooperativeKernel
cuLaunchCooperativeKernel_ptsz cuLaunchHostFunc cuLaunchHostFunc_ptsz cuGraphLaunch cuGraphLaunch_ptsz
cuLaunch cuLaunchGrid cuLaunchGridAsync cuLaunchCooperativeKernelMultiDevice"
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

# The legacy and multi-device entry points pass the compute limiter's gate: under --core 30 a
# saturating loop of 2 ms kernels gets well under the share it gets alone. (Bands are wide:
# tests/cli/core_limit.sh and bench/core.sh measure accuracy.)
share() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n 's/^share=//p'; }
for m in grid multi; do
  run core_loop -t 1 -k 2000 -m $m
  base=$(share "$out")
  run vgpu run --core 30 -- core_loop -t 1.5 -k 2000 -m $m
  assert_rc "--core 30 with $m launches runs" 0
  capped=$(share "$out")
  if awk -v b="${base:-0}" -v c="${capped:-1}" 'BEGIN { exit !(b > 0.3 && c < 0.6 * b) }'; then
    ok "--core 30 throttles $m launches (alone $base, capped $capped)"
  else
    not_ok "--core 30 throttles $m launches" "alone $base, capped $capped: $out $err"
  fi
done
done_testing
