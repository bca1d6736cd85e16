# The libFuzzer harness of the daemon's request handler (tests/fuzz/fuzz_arbiter.c; `make fuzz`
# runs it FUZZ_SECONDS), bounded for make test: every seed (tests/fuzz/seeds/fuzz_arbiter) and past
# finding replayed, then 20 s of fuzzing from the seeds. Its invariants: a reply fits its buffer, no
# descriptor leaks, no entry of another uid touched. Runs only where clang can build libFuzzer
# programs (`make deps-fuzz`; .ci/run does not install clang, too big for CI: skipped there,
# saying so), and only in make test: under make asan the harness is clang's ASan build already.
. "$(dirname "$0")/lib.sh"

[ "${VGPU_ASAN:-0}" = 1 ] && skip_all "the harness is built with clang's ASan+UBSan already: make test runs it"
if ! why=$(bash "$VGPU_SRC/tests/fuzz/run.sh" check clang clang libclang-rt-14-dev 2>&1); then
  skip_all "clang with libFuzzer is not installed here ($(head -n 1 <<<"$why" | cut -c1-160))"
fi

run make -C "$VGPU_SRC" -s --no-print-directory fuzz-build FUZZ_ONLY=fuzz_arbiter
assert_rc "the harness builds (make fuzz-build FUZZ_ONLY=fuzz_arbiter)" 0
[ "$rc" = 0 ] || { printf '%s\n' "$err" | tail -n 5 | sed 's/^/# /'; done_testing; exit 0; }
bin=$VGPU_SRC/build-fuzz/fuzz/fuzz_arbiter
seeds=$VGPU_SRC/tests/fuzz/seeds/fuzz_arbiter
# The simulated NVML of this build (the harness's default is the source tree's build/).
export VGPU_NVML_LIB=$VGPU_FAKE_LIBDIR/libnvidia-ml.so.1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

nseeds=$(ls "$seeds" | wc -l)
run "$bin" -runs=0 "$seeds"
assert_rc "the $nseeds seeds (a valid run of each op) replay without a finding" 0
assert_contains "... each of them ran" "INITED" "$err"

findings=("$VGPU_SRC"/tests/fuzz/findings/fuzz_arbiter-*)
if [ -e "${findings[0]}" ]; then
  run "$bin" -timeout=5 "${findings[@]}"
  assert_rc "past findings (tests/fuzz/findings/fuzz_arbiter-*) no longer fail" 0
fi

mkdir -p "$T_DIR/corpus" "$T_DIR/found"
shm_before=$(ls -d /dev/shm/vgpu-fuzz-arbiter.* 2>/dev/null)
cp "$seeds"/* "$T_DIR/corpus/"
run "$bin" -max_total_time=20 -timeout=5 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$T_DIR/found/" "$T_DIR/corpus"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' <<<"$err" | tail -n 1)
what=$(grep -m1 -E 'invariant broken: .*|ERROR: [A-Za-z]+: [a-z-]+' <<<"$err")
if [ "$rc" = 0 ] && [ -z "$(ls -A "$T_DIR/found")" ]; then
  ok "20 s of fuzzing the request handler: no finding (${execs:-?} inputs)"
else
  mkdir -p "$VGPU_BUILD/fuzz-findings"
  cp "$T_DIR"/found/* "$VGPU_BUILD/fuzz-findings/" 2>/dev/null
  not_ok "20 s of fuzzing the request handler: no finding" "rc=$rc ${what:-} inputs=${execs:-?}; kept in $VGPU_BUILD/fuzz-findings: $(ls "$T_DIR/found" | tr '\n' ' ')(FUZZ_ARBITER_TRACE=1 $bin FILE replays one, saying each message's answer); add it to tests/fuzz/findings/ as fuzz_arbiter-NAME, with a unit test"
fi
# What a harness that crashed left behind (one that exits removes its own).
for f in /dev/shm/vgpu-fuzz-arbiter.*; do
  [ -e "$f" ] && ! grep -qxF "$f" <<<"$shm_before" && rm -rf "$f"
done
[ "${execs:-0}" -gt "$nseeds" ] && ok "... $execs inputs, more than the $nseeds seeds" || not_ok "... more inputs than the seeds" "${execs:-none}"

done_testing
