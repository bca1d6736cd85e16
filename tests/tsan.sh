#!/usr/bin/env bash
# make tsan: the tests that run libvgpu.so's threads (the compute limiter's helper thread, the
# fake driver's stream-callback thread) and its concurrent processes, against a build made with
# -fsanitize=thread (build-tsan/). Ends with "N passed, N failed", where every distinct
# ThreadSanitizer report is one more failure.
#   tests/tsan.sh [BUILD_DIR]
#
# How TSan gets into the processes: libvgpu.so, the fake libraries and every program are built
# with -fsanitize=thread, so each links libtsan.so.2 and loads it itself. Nothing is preloaded for
# the tests (VGPU_TEST_PRELOAD stays unset, unlike `make asan`): preloading libtsan.so into bash
# or dash crashes them (SIGSEGV at startup, GCC 12), while a shell that `vgpu run` starts with
# the instrumented libvgpu.so preloaded runs fine (libtsan then comes in as that library's
# dependency). Races between processes (hook_race.sh, the soak) go through shared memory that
# TSan cannot see across processes; what it checks there is each process's own threads.
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-tsan}
[ -x "$build/vgpu" ] || { echo "tests/tsan.sh: no TSan build in '$build'; run make tsan" >&2; exit 2; }
tests=(hook_race hook_launch core_limit machine_wide soak test_sched_shared test_region)

logs=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-tsan.XXXXXX")
chmod 1777 "$logs"   # the second user's processes of machine_wide.sh and the soak write here too
trap 'rm -rf "$logs"' EXIT
# exitcode=0: a report must not change what a test sees (it is counted below instead);
# history_size: the limiter's threads live long.
export TSAN_OPTIONS="log_path=$logs/tsan exitcode=0 halt_on_error=0 history_size=4 second_deadlock_stack=1"

pass=0 fail=0
for t in "${tests[@]}"; do
  out=$(bash tests/run.sh "$build" "$t" 2>&1)
  printf '%s\n' "$out" | grep -E '^(cli|unit)/|^    \| ' 
  p=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  f=$(printf '%s\n' "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-1}))
done

# Every distinct report (by its SUMMARY line) is a failure; the first of each is shown.
reports=$(cat "$logs"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
summaries=$(cat "$logs"/tsan.* 2>/dev/null | sed -n 's/^SUMMARY: ThreadSanitizer: //p' | sort | uniq -c | sort -rn)
if [ -n "$summaries" ]; then
  n=$(printf '%s\n' "$summaries" | wc -l)
  fail=$((fail + n))
  echo
  echo "ThreadSanitizer: $reports reports, $n distinct:"
  printf '%s\n' "$summaries" | sed 's/^/  /'
  first=$(grep -l '^WARNING: ThreadSanitizer' "$logs"/tsan.* | head -n 1)
  echo "the first one ($first):"
  sed -n '/^WARNING: ThreadSanitizer/,/^SUMMARY/p' "$first" | head -n 60 | sed 's/^/  | /'
else
  echo
  echo "ThreadSanitizer: no reports"
fi
echo
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
