#!/usr/bin/env bash
# Runs the whole suite: every unit-test binary and every CLI test script, each of which prints
# TAP lines ("ok N - ...", "not ok N - ...") and its plan "1..N" (cmocka prints it first, the CLI
# scripts last, from done_testing in tests/cli/lib.sh). A file without a plan, or whose plan
# disagrees with the number of tests it printed, fails: a test that did not run is a failure.
# Skips ("ok N - name # SKIP reason", or "1..0 # SKIP reason" for a whole file) are allowed,
# counted, and listed at the end with their reasons. Ends with "N passed, N failed" on its own
# line and exits non-zero when anything failed.
#   tests/run.sh [BUILD_DIR] [FILTER]    FILTER: run only the files whose name contains it
set -u
cd "$(dirname "$0")/.." || exit 2
src=$(pwd)
build=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "tests/run.sh: no build directory '${1:-build}'; run make first" >&2; exit 2; }
filter=${2:-}
export VGPU_SRC=$src VGPU_BUILD=$build VGPU_FAKE_LIBDIR=$build/fakegpu
export NO_COLOR=1 LC_ALL=C.UTF-8
unset VGPU_REGION VGPU_LIBRARY VGPU_LOG CUDA_VISIBLE_DEVICES LD_PRELOAD
if [ "${VGPU_ASAN:-0}" = 1 ]; then
  # Every process of a CLI test gets the sanitizer runtimes first, so that the sanitized
  # libvgpu.so and fake libraries can be preloaded into any program (bash, jq, ...).
  asan_rt=$(${CC:-cc} -print-file-name=libasan.so) ubsan_rt=$(${CC:-cc} -print-file-name=libubsan.so)
  export VGPU_TEST_PRELOAD="$asan_rt:$ubsan_rt"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:verify_asan_link_order=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

pass=0 fail=0 skip=0
failed_lines=() skipped_lines=()
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() { # file label
  local f=$1 label=$2 p f_ s plans planned line
  p=$(grep -cE '^ok ' "$f"); f_=$(grep -cE '^not ok ' "$f"); s=$(grep -cE '^ok .*# ?SKIP' "$f")
  pass=$((pass + p - s)); fail=$((fail + f_)); skip=$((skip + s))
  # Each failure with the first lines of its diagnostics ("#  got ..."), so that the list at the
  # end, which is what a truncated CI log keeps, says what each failed test measured.
  while IFS= read -r line; do failed_lines+=("$label: $line"); done < <(
    awk '/^not ok /{print; n=3; next} n>0 && /^#/{print "    " substr($0,1,300); n--; next} {n=0}' "$f")
  while IFS= read -r line; do
    # "ok 3 - name # SKIP reason" (lib.sh), or "ok 3 # SKIP name" (cmocka's skip(), no reason)
    skipped_lines+=("$label: $(printf '%s' "$line" | sed -E 's/^ok [0-9]+ # ?SKIP *(.*)$/\1  -- cmocka skip() (no reason given)/;
      s/^ok [0-9]+ (- )?//; s/ *# ?SKIP */  -- /')")
  done < <(grep -E '^ok .*# ?SKIP' "$f")
  # The plan: exactly one "1..N" line, and N tests printed. run_one counts a problem as one failure.
  plan_problem=
  plans=$(grep -cE '^1\.\.[0-9]+' "$f")
  planned=$(grep -E '^1\.\.[0-9]+' "$f" | head -n 1 | sed -E 's/^1\.\.([0-9]+).*/\1/')
  if [ "$plans" -eq 0 ]; then
    plan_problem="no TAP plan (1..N): it stopped before its end (an early exit?), or lacks done_testing"
  elif [ "$plans" -gt 1 ]; then
    plan_problem="$plans TAP plans (1..N); one is expected"
  elif [ "$planned" -ne $((p + f_)) ]; then
    plan_problem="planned $planned tests, ran $((p + f_))"
  elif [ "$planned" -eq 0 ]; then
    # "1..0 # SKIP reason": the whole file was skipped.
    skip=$((skip + 1))
    skipped_lines+=("$label: the whole file  -- $(grep -E '^1\.\.0' "$f" | sed -E 's/^1\.\.0 *(# ?SKIP *)?//')")
  fi
  printf '%-34s %4d passed %4d failed %3d skipped\n' "$label" $((p - s)) "$f_" "$s"
}

run_one() { # label command...
  local label=$1; shift
  local out=$tmp/out rc
  if [ "${VGPU_TEST_VERBOSE:-0}" = 1 ]; then
    timeout 600 "$@" 2>&1 | tee "$out"; rc=${PIPESTATUS[0]}
  else
    timeout 600 "$@" >"$out" 2>&1; rc=$?
  fi
  count "$out" "$label"
  if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$out"; then
    # A crash or an error outside any assertion is a failure too.
    fail=$((fail + 1)); failed_lines+=("$label: exited with status $rc outside any test${plan_problem:+; $plan_problem}")
    tail -n 20 "$out" | sed 's/^/    | /'
  elif [ -n "$plan_problem" ]; then
    fail=$((fail + 1)); failed_lines+=("$label: $plan_problem")
    grep -E -A8 '^not ok ' "$out" | head -n 60 | sed 's/^/    | /'
    tail -n 5 "$out" | sed 's/^/    | /'
  elif grep -qE '^not ok ' "$out"; then
    grep -E -A8 '^not ok ' "$out" | head -n 60 | sed 's/^/    | /'
  fi
}

for bin in "$build"/tests/unit/test_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ -n "$filter" ] && [[ $name != *$filter* ]] && continue
  state=$(mktemp "$tmp/fake.XXXXXX"); rm -f "$state"
  VGPU_FAKE_SCENARIO=$src/tests/fakegpu/scenarios/h100.json VGPU_FAKE_STATE=$state \
  VGPU_STATE_DIR=$(mktemp -d "$tmp/state.XXXXXX") VGPU_MACHINE_DIR=$(mktemp -d "$tmp/machine.XXXXXX") \
  CMOCKA_MESSAGE_OUTPUT=TAP \
    run_one "unit/$name" "$bin"
done

for t in tests/cli/*.sh; do
  [ "$(basename "$t")" = lib.sh ] && continue
  [ -n "$filter" ] && [[ $t != *$filter* ]] && continue
  run_one "cli/$(basename "$t" .sh)" bash "$t"
done

if [ ${#failed_lines[@]} -gt 0 ]; then
  echo
  echo "Failures:"
  printf '  %s\n' "${failed_lines[@]}"
fi
if [ ${#skipped_lines[@]} -gt 0 ]; then
  echo
  echo "Skipped (${#skipped_lines[@]}), each with its reason:"
  printf '  %s\n' "${skipped_lines[@]}"
fi
echo
[ $skip -gt 0 ] && echo "($skip skipped)"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
