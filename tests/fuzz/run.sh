#!/usr/bin/env bash
# The libFuzzer harnesses of tests/fuzz (make fuzz).
#   run.sh check CC PKG...        fails, saying what to install, when CC cannot build libFuzzer programs
#   run.sh run FUZZ_BUILD SECONDS  runs every harness SECONDS seconds, one after another, on its corpus
#                                  (FUZZ_BUILD/corpus/NAME, seeded from tests/fuzz/seeds/NAME), and prints a
#                                  table: executions, corpus size, findings. First it replays the inputs of
#                                  past findings (tests/fuzz/findings/NAME-*): REPLAY says how many still
#                                  fail (each also has a unit test). A finding (crash, leak,
#                                  timeout, broken invariant) is saved as FUZZ_BUILD/findings/NAME/...; turn
#                                  each into a unit test. Exits 1 when anything was found.
set -u
cd "$(dirname "$0")/../.." || exit 2
mode=$1; shift

if [ "$mode" = check ]; then
  cc=$1; shift
  line="apt-get install -y $*"
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "make fuzz: $cc is not installed; it needs clang and its libFuzzer runtime (make test does not):" >&2
    echo "make fuzz: install them with:  sudo $line   (or run 'sudo make deps-fuzz')" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/t.c"
  if ! "$cc" -fsanitize=fuzzer,address "$tmp/t.c" -o "$tmp/t" 2>"$tmp/err"; then
    echo "make fuzz: $cc cannot build a libFuzzer program: $(head -n 3 "$tmp/err")" >&2
    echo "make fuzz: install the runtime with:  sudo $line   (or run 'sudo make deps-fuzz')" >&2
    exit 1
  fi
  exit 0
fi

[ "$mode" = run ] || { echo "usage: run.sh check CC PKG... | run.sh run FUZZ_BUILD SECONDS" >&2; exit 2; }
build=$1 secs=$2
case $secs in ''|*[!0-9]*) echo "make fuzz: FUZZ_SECONDS must be a whole number of seconds, not '$secs'" >&2; exit 2 ;; esac
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
found=0
printf '%-18s %7s %8s %12s %10s %8s %s\n' HARNESS REPLAY SECONDS EXECUTIONS EXEC/S CORPUS FINDINGS
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus=$build/corpus/$name findings=$build/findings/$name log=$build/logs/$name.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  rm -f "$log.replay"
  touch "$log.start"
  shm_before=$(ls -d /dev/shm/vgpu-fuzz-* 2>/dev/null)
  [ -d "tests/fuzz/seeds/$name" ] && cp -n tests/fuzz/seeds/"$name"/* "$corpus"/ 2>/dev/null
  replay=0 failing=0
  for f in tests/fuzz/findings/"$name"-*; do
    [ -f "$f" ] || continue
    replay=$((replay + 1))
    "$bin" -timeout=5 -rss_limit_mb=2048 "$f" >>"$log.replay" 2>&1 || failing=$((failing + 1))
  done
  [ "$failing" -gt 0 ] && found=1
  # -timeout: an input that takes more than 5 s is a finding (a hang); -rss_limit_mb: so is 2 GB.
  "$bin" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  persec=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  ncorpus=$(ls "$corpus" | wc -l)
  nfound=$(find "$findings" -type f -newer "$log.start" | wc -l)   # this run's, not earlier ones
  # Scratch files of harness processes that crashed (an exit removes its own).
  for f in /dev/shm/vgpu-fuzz-*; do
    [ -e "$f" ] && ! grep -qxF "$f" <<<"$shm_before" && rm -rf "$f"
  done
  what="none"
  if [ "$rc" -ne 0 ] || [ "$nfound" -gt 0 ]; then
    found=1
    what="$nfound in $findings ($(grep -m1 -oE 'ERROR: [A-Za-z]+: [a-z-]+|invariant broken: .*|ERROR: libFuzzer: [a-z-]+' "$log" || echo "exit $rc"); log $log)"
  fi
  printf '%-18s %7s %8s %12s %10s %8s %s\n' "$name" "$failing/$replay" "$secs" "${execs:-?}" "${persec:-?}" "$ncorpus" "$what"
done
exit $found
