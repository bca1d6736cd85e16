#!/usr/bin/env bash
# The own record store (issue 36 item 1), as nobody without VGPU_STATE_DIR: it lives in
# $XDG_STATE_HOME/vgpu (not the runtime directory a logout empties), takes over the records an
# older vgpu kept in the runtime directory, is handed to the arbiter by the next vgpu run (not
# only by vgpu acct), and while the arbiter is down vgpu acct and vgpu metrics say they show it
# alone (partial).
. "$(dirname "$0")/lib.sh"
need_other_user
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"

user_dirs
ADIR=$(mktemp -d /tmp/vgpu-acctdb.XXXXXX); chmod 0755 "$ADIR"
ADB=$ADIR/db/acct.db
NHOME=$(mktemp -d /tmp/vgpu-acct-home.XXXXXX); chown nobody "$NHOME"; chmod 0700 "$NHOME"
trap 'kill $daemon 2>/dev/null; rm -rf "$ADIR" "$NHOME"; t_cleanup' EXIT
RUNDIR=$NHOME/run STATE=$NHOME/state
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR HOME=$NHOME \
    XDG_RUNTIME_DIR=$RUNDIR XDG_STATE_HOME=$STATE "$@"
}
as_nobody mkdir -m 0700 "$RUNDIR"
start_daemon() { daemon_start -- --acct-db "$ADB"; }
stop_daemon() { daemon_stop; }
q() { sqlite3 "$1" "SELECT group_concat(name, ' ') FROM (SELECT name FROM jobs ORDER BY name)" 2>/dev/null; }

# ---- an older vgpu's store in the runtime directory: moved once ----
must as_nobody env VGPU_STATE_DIR=$RUNDIR/vgpu vgpu run --name old -- true
assert_eq "(the old place holds a record)" "old" "$(q "$RUNDIR/vgpu/acct.db")"
run as_nobody vgpu acct --json
assert_eq "vgpu acct shows the record of the old place" "old" "$(printf '%s' "$out" | jq -r '[.jobs[].name] | join(" ")')"
assert_eq "... moved into \$XDG_STATE_HOME/vgpu/acct.db" "old" "$(q "$STATE/vgpu/acct.db")"
check "... and the old file is gone" test ! -e "$RUNDIR/vgpu/acct.db"

# ---- no daemon ever: the own store is the whole history, not partial ----
must as_nobody vgpu run --name buffered -- true
assert_eq "a job ended without a daemon is in the own store, outside the runtime directory" "buffered old" \
  "$(q "$STATE/vgpu/acct.db")"
run as_nobody vgpu acct --json
assert_eq "no arbiter ever ran here: source own, not partial" "own false" \
  "$(printf '%s' "$out" | jq -r '"\(.source) \(.partial)"')"

# ---- the next vgpu run hands the own store over ----
start_daemon
must as_nobody vgpu run --name next -- true
assert_eq "vgpu run, with the daemon up, hands the own store's records to it" "buffered next old" "$(q "$ADB")"
assert_eq "... and they leave the own store" "" "$(q "$STATE/vgpu/acct.db")"

# ---- the daemon down: said, partial ----
stop_daemon
must as_nobody vgpu run --name while-down -- true
run as_nobody vgpu acct --json
assert_eq "the daemon down: the own store's record, source own, partial" "while-down own true" \
  "$(printf '%s' "$out" | jq -r '"\([.jobs[].name] | join(" ")) \(.source) \(.partial)"')"
run as_nobody vgpu acct
assert_contains "the table's vgpu acct says the arbiter does not answer" "does not answer" "$err"
assert_contains "... and that it shows a part" "partial" "$err"
run as_nobody vgpu metrics
assert_contains "vgpu metrics: the series come from the own store" 'vgpu_acct_records_source{source="own"' \
  "$(printf '%s' "$out" | grep ' 1$')"
assert_match "... partial" 'vgpu_acct_records_partial\{[^}]*\} 1' "$out"
start_daemon
run as_nobody vgpu metrics
assert_contains "the daemon back: from the arbiter" 'vgpu_acct_records_source{source="arbiter"' \
  "$(printf '%s' "$out" | grep ' 1$')"

# ---- N10: --retention says which store it changed, and is root's policy with the arbiter ----
run as_nobody vgpu acct --retention 5
assert_rc "--retention with the arbiter answering: refused (2)" 2
assert_contains "... saying retention there is root's policy alone" "root's policy alone" "$err"
stop_daemon
run as_nobody vgpu acct --retention 5
assert_eq "without it: the own store's, named" "0 1" "$rc $(printf '%s' "$err" | grep -c "your own store $STATE/vgpu/acct.db")"
done_testing
