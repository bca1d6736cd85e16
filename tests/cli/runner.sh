# tests/run.sh itself (issue 18): a script that stops before its end, or whose plan disagrees with
# the tests it printed, fails; skips pass but are counted and listed with their reasons; lib.sh's
# waits (wait_until, in the script and in its child processes) and setup steps (must) fail when
# what they wait for does not come. Runs a copy of run.sh and lib.sh on a few small scripts in a
# scratch tree.
. "$(dirname "$0")/lib.sh"
tree=$T_DIR/tree
mkdir -p "$tree/tests/cli"
cp "$VGPU_SRC/tests/run.sh" "$tree/tests/"
cp "$VGPU_SRC/tests/cli/lib.sh" "$tree/tests/cli/"
script() { # NAME BODY: tests/cli/zz_NAME.sh
  printf '. "$(dirname "$0")/lib.sh"\n%s\n' "$2" > "$tree/tests/cli/zz_$1.sh"
}
runner() { # FILTER: run the copy on the scripts whose name has FILTER
  run env -u VGPU_TEST_PRELOAD -u LD_PRELOAD VGPU_SRC="$tree" bash "$tree/tests/run.sh" "$VGPU_BUILD" "$1"
}

script good $'ok "one"\nok "two"\ndone_testing'
runner zz_good
assert_rc "a script that runs to done_testing passes" 0
assert_contains "... 2 passed" "2 passed, 0 failed" "$out"

script early $'ok "one"\n[ -e /nonexistent ] || exit 0\nok "two"\ndone_testing'
runner zz_early
assert_rc "a script that exits 0 before its end fails the run" 1
assert_contains "... and says it has no plan" "zz_early: no TAP plan (1..N)" "$out"
assert_contains "... counted as a failure" "1 passed, 1 failed" "$out"

script count $'ok "one"\necho "1..3"'
runner zz_count
assert_rc "a plan that disagrees with the tests run fails" 1
assert_contains "... and says by how much" "zz_count: planned 3 tests, ran 1" "$out"

script twice $'ok "one"\ndone_testing\ndone_testing'
runner zz_twice
assert_contains "two plans fail" "zz_twice: 2 TAP plans" "$out"

script skip $'ok "one"\nskip "needs tmux" "tmux is not installed"\ndone_testing'
runner zz_skip
assert_rc "a skip passes" 0
assert_contains "... is listed with its reason" "zz_skip: needs tmux  -- tmux is not installed" "$out"
assert_contains "... and counted" "(1 skipped)" "$out"

script all $'skip_all "no GPU here"'
runner zz_all
assert_rc "a whole-file skip passes" 0
assert_contains "... is listed with its reason" "zz_all: the whole file  -- no GPU here" "$out"

script crash $'ok "one"\nkill -SEGV $$'
runner zz_crash
assert_rc "a script killed outside any test fails" 1
assert_match "... once, with its status and the missing plan" \
  "zz_crash: exited with status [0-9]+ outside any test; no TAP plan" "$out"
assert_contains "... counted once" "1 passed, 1 failed" "$out"

script wait $'touch "$T_DIR/f"; wait_until 5 test -e "$T_DIR/f" && ok "came"\nwait_until 1 false\ndone_testing'
runner zz_wait
assert_rc "wait_until: a condition that never comes fails the run" 1
assert_contains "... naming what was awaited" "zz_wait: not ok 2 - timed out after 1 s waiting for: false" "$out"
assert_contains "... and one that comes passes" "1 passed, 1 failed" "$out"

script childwait $'sh -c \'wait_until 1 test -e /nonexistent; echo "child rc=$?"\'\nok "one"\ndone_testing'
runner zz_childwait
assert_rc "wait_until in a child process: a timeout fails the run" 1
assert_contains "... reported by done_testing" \
  "zz_childwait: not ok 2 - timed out after 1 s waiting for: test -e /nonexistent (in a child process)" "$out"

script must $'must false\nmust true\nok "one"\ndone_testing'
runner zz_must
assert_rc "must: a failed setup step fails the run" 1
assert_contains "... naming it" "zz_must: not ok 1 - setup step failed: false" "$out"
assert_contains "... and a step that works adds no test" "1 passed, 1 failed" "$out"

script needle $'assert_contains "empty" "" "any text"\ndone_testing'
runner zz_needle
assert_contains "assert_contains with an empty needle fails" "zz_needle: not ok 1 - empty" "$out"
done_testing
