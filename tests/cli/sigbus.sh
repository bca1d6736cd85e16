# The program's own SIGBUS behaves under libvgpu.so as it does without it (the library's SIGBUS
# handler, which keeps a process alive when its job region is truncated, acts only on faults
# inside the library's own mappings of the region): raise(SIGBUS) and a fault on the program's
# own truncated mapping still kill it by SIGBUS, and its own handler, installed before or after
# the library's, still runs with the same siginfo. A handler the program installs after the
# library also gets the region's faults: libvgpu(7) says so.
. "$(dirname "$0")/lib.sh"

# Each case: bus_probe alone (no library), then under vgpu run; the status, and what the
# program's own handler printed, must be the same.
same() { # desc expected-status steps...
  local desc=$1 want=$2; shift 2
  run bus_probe "$@"
  local prc=$rc perr=$err pout=$out
  # Under the sanitizer build its runtime's own SIGBUS handler reports and exits: whatever the
  # program alone does is the reference, the expected status only outside it.
  [ "${VGPU_ASAN:-0}" = 1 ] || assert_eq "$desc, without the library: status $want" "$want" "$prc"
  run vgpu run --mem 1G -- bus_probe "$@"
  assert_eq "$desc, under the library: the same status ($prc)" "$prc" "$rc"
  assert_eq "$desc: the same output" "$pout" "$out"
  local ph h
  ph=$(grep -o 'own handler si_code=-*[0-9]*' <<<"$perr"); h=$(grep -o 'own handler si_code=-*[0-9]*' <<<"$err")
  assert_eq "$desc: the program's handler saw the same ('${ph:-none}')" "$ph" "$h"
}

same "raise(SIGBUS)" 135 init raise
same "a fault on the program's own truncated mapping" 135 init ownfault
same "its own handler (installed before the library's), raise" 42 handler init raise
same "its own handler (installed before the library's), its own fault" 42 handler init ownfault
same "its own handler (installed after the library's), its own fault" 42 init handler ownfault
assert_contains "the handler saw a fault (BUS_ADRERR, si_code 2), not a signal sent" "own handler si_code=2" "$err"

# A program handler installed before the library's: the region's faults are the library's (the
# program's handler does not run); one installed after it takes them (documented).
for when in before after; do
  if [ $when = before ]; then steps="handler init"; else steps="init handler"; fi
  run vgpu run --mem 1G -- sh -c 'bus_probe '"$steps"' launchuntil "$0.go" launch 200 100 >"$0" & p=$!
    wait_until 20 grep -q launching "$0"; truncate -s 0 "$VGPU_REGION"; touch "$0.go"
    wait $p; st=$?; cat "$0"; exit $st' "$T_DIR/h.$when"
  if [ $when = before ]; then
    assert_rc "own handler installed before the library's, region truncated: it lives on (0)" 0
    assert_not_contains "... the program's handler did not run" "own handler" "$err"
    assert_eq "... the damage is said once" 1 "$(grep -c 'the job region is damaged' <<<"$err")"
  else
    assert_rc "own handler installed after the library's, region truncated: the program's handler decides (42)" 42
    assert_contains "... it ran, for the fault on the region" "own handler si_code=2" "$err"
  fi
done

done_testing
