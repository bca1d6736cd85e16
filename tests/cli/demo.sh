# make demo on the simulated GPU: the GPUs, two limited jobs in vgpu ps and vgpu top --once,
# and each job held near its GPU-time cap.
. "$(dirname "$0")/lib.sh"
run env VGPU_DEMO_SIMULATED=1 bash "$VGPU_SRC/tests/demo.sh" "$VGPU_BUILD"
assert_rc "the demo exits 0" 0
assert_contains "it says it uses the simulated GPU" "runs on the simulated GPU" "$out"
assert_contains "it lists the GPU" "NVIDIA H100 80GB HBM3" "$out"
top=$(sed -n '/vgpu top --once/,/what each job got/p' <<<"$out")
assert_match "vgpu top --once shows infer against 4G and 30%" "infer .* 0 .*/4G .*/30%" "$top"
assert_match "vgpu top --once shows train against 8G and 60%" "train .* 0 .*/8G .*/60%" "$top"
# The demo's jobs synchronize every 8 kernels: their queue stays full however late a busy CPU
# runs them, so the simulated GPU's time they get (their kernels' time over the wall time after
# the first 2 s: late_share) is what the limiter allows, within 5 points of the cap.
for j in infer:30 train:60; do
  share=$(sed -n "s/^  ${j%%:*}: share=.* late_share=\([0-9.]*\).*/\1/p" <<<"$out")
  # Under ASan on 2 CPUs both jobs ran ~10 % under their caps together (0.268 and 0.546 in a CI
  # run, max_stall 118 ms: the instrumented loops, not the limiter, ran short of CPU).
  timing_skipped "${j%%:*} got its ${j#*:}% cap, within 5 points" "$share" && continue
  if [ -n "$share" ] && awk -v s="$share" -v c="${j#*:}" 'BEGIN { exit !(s * 100 <= c + 5 && s * 100 >= c - 5) }'; then
    ok "${j%%:*} got its ${j#*:}% cap, within 5 points ($share)"
  else
    not_ok "${j%%:*} got its ${j#*:}% cap, within 5 points" "late_share=$share"$'\n'"$(tail -n 2 <<<"$out")"
  fi
done
done_testing
