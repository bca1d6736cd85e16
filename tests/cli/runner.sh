# tests/run.sh itself (issue 18): a script that stops before its end, or whose plan disagrees with
# the tests it printed, fails; skips pass but are counted and listed with their reasons. Runs a
# copy of run.sh and lib.sh on a few small scripts in a scratch tree.
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
done_testing
