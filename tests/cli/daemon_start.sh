#!/usr/bin/env bash
# What vgpu daemon checks before it serves (cmd/daemon/startup.c; issue 36 N9, L1, L8, L9, L17,
# L19): an accounting database it cannot write stops it at start, saying why; an empty
# VGPU_MACHINE_DIR is refused; closed descriptors 0-2 become /dev/null; a machine directory
# other users cannot search is served with a warning; its --help fits 90 columns.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the daemon's directories are root's)"

daemon=""
stop_daemon() { [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; daemon=""; }
trap 'stop_daemon; t_cleanup' EXIT

# ---- L1 ----
run vgpu daemon --help
assert_eq "vgpu daemon --help: no line over 90 columns" "" "$(printf '%s\n' "$out" | awk 'length($0) > 90')"

# ---- L8 ----
run timeout 10 env VGPU_MACHINE_DIR= vgpu daemon
assert_rc "an empty VGPU_MACHINE_DIR is refused: 2" 2
assert_contains "... saying so" "VGPU_MACHINE_DIR is set but empty" "$err"
run timeout 10 env VGPU_MACHINE_DIR= vgpu daemon --check
assert_rc "... by --check too" 2

# ---- L17, N9 ----
ADIR=$T_DIR/acct; mkdir -m 0755 "$ADIR"
run timeout 10 vgpu daemon --acct-db "$ADIR"
assert_rc "--acct-db DIR stops the daemon at start: 2" 2
assert_contains "... saying it is a directory and what to give" \
  "is a directory: give the database file's path" "$err"
check "... and it never listened" test ! -e "$VGPU_MACHINE_DIR/arbiter/sock"
head -c 4096 /dev/urandom >"$ADIR/bad.db"; chmod 0600 "$ADIR/bad.db"
run timeout 10 vgpu daemon --acct-db "$ADIR/bad.db"
assert_rc "a damaged --acct-db stops the daemon at start: 1" 1
assert_contains "... saying the file is not a database" "not a database" "$err"
sub=$T_DIR/open; mkdir -m 0777 "$sub"
run timeout 10 vgpu daemon --acct-db "$sub/acct.db"
assert_rc "an --acct-db in a directory others may write stops it: 1" 1
assert_contains "... saying whose directory it must be" "not the daemon's own directory" "$err"
check "... and no database was made there" test ! -e "$sub/acct.db"

# ---- L9 ----
vgpu daemon --acct-db "$ADIR/acct.db" 0<&- 1>&- 2>&- &
daemon=$!
wait_until 20 vgpu daemon --check
fds=$(for f in 0 1 2; do readlink "/proc/$daemon/fd/$f"; done | tr '\n' ' ')
assert_eq "a daemon started with 0-2 closed has /dev/null there, not its lock, directory or socket" \
  "/dev/null /dev/null /dev/null " "$fds"
must vgpu run -- true
assert_eq "... and it serves: the job's record is in its database" 1 "$(sqlite3 "$ADIR/acct.db" 'SELECT COUNT(*) FROM jobs' 2>/dev/null)"
stop_daemon

# ---- L19 ----
closed=$(mktemp -d /tmp/vgpu-closed-machine.XXXXXX); chmod 0700 "$closed"
T_USER_DIRS+=("$closed")
VGPU_MACHINE_DIR=$closed vgpu daemon 2>"$T_DIR/closed.log" &
daemon=$!
VGPU_MACHINE_DIR=$closed wait_until 20 vgpu daemon --check
assert_contains "a 0700 machine directory is served with a warning that other users cannot reach the socket" \
  "other users' jobs cannot reach the arbiter's socket" "$(cat "$T_DIR/closed.log")"
stop_daemon
chmod 0755 "$closed"
VGPU_MACHINE_DIR=$closed vgpu daemon 2>"$T_DIR/open.log" &
daemon=$!
VGPU_MACHINE_DIR=$closed wait_until 20 vgpu daemon --check
assert_not_contains "... and a 0755 one without it" "cannot reach" "$(cat "$T_DIR/open.log")"
stop_daemon

# ---- N9: the database damaged while the daemon runs ----
# Its header overwritten after a checkpoint (the WAL emptied into the file): the next record
# fails. The daemon logs it, naming the file once (it said "accounting database P: accounting
# database P: ..."); a user is told to ask root, never to move root's file away; root's vgpu
# acct gets the whole reason, advice included (the reply's 160 bytes cut it to "...; vgpu start").
if command -v setpriv >/dev/null && command -v sqlite3 >/dev/null && id nobody >/dev/null 2>&1; then
  user_dirs
  DDIR=$(mktemp -d /tmp/vgpu-acctdb.XXXXXX); chmod 0755 "$DDIR"; T_USER_DIRS+=("$DDIR")
  DDB=$DDIR/db/acct.db
  NSTATE=/tmp/vgpu-start-nobody-$$; T_USER_DIRS+=("$NSTATE")
  as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR VGPU_STATE_DIR=$NSTATE "$@"; }
  : >"$T_DIR/damaged.log"
  vgpu daemon --acct-db "$DDB" 2>>"$T_DIR/damaged.log" &
  daemon=$!
  wait_until 20 vgpu daemon --check
  must vgpu run --name before -- true
  # The record is written by the daemon's accounting thread after the job ended, and a checkpoint
  # while it writes cannot empty the WAL (busy): wait for both.
  recorded() { [ "$(sqlite3 "$DDB" "SELECT COUNT(*) FROM jobs WHERE name = 'before'" 2>/dev/null)" = 1 ]; }
  checkpointed() { [ "$(sqlite3 "$DDB" 'PRAGMA wal_checkpoint(TRUNCATE)' 2>/dev/null | cut -d'|' -f1)" = 0 ]; }
  wait_until 20 recorded
  wait_until 20 checkpointed
  # Written by the shell itself (1<> opens without truncating): dd under make asan's preloaded
  # sanitizer aborted on its aligned_alloc, and the file was never damaged.
  printf 'not an SQLite file: its header overwritten while the daemon has it open.......' 1<>"$DDB"
  must as_nobody vgpu run --name damaged -- true
  run as_nobody vgpu acct
  assert_contains "damaged while it runs: nobody's vgpu acct is told to ask root" "root: see vgpu daemon's log" "$err"
  assert_not_contains "... never to move root's file away" "move it away" "$out$err"
  assert_contains "... and shown its job, from its own store" "damaged" "$out"
  warn=$(grep "warning: .*accounting database" "$T_DIR/damaged.log")
  assert_contains "the daemon's log warns that the database is not one" \
    "warning: accounting database $DDB: starting to write a record: file is not a database" "$warn"
  once=$(printf '%s\n' "$warn" | awk -v p="$DDB" '{ n = 0; s = $0; while ((i = index(s, p))) { n++; s = substr(s, i + length(p)) }
    print n }' | sort -u)
  assert_eq "... naming the file once" 1 "$once"
  run vgpu acct
  assert_rc "root's vgpu acct: refused (1)" 1
  assert_contains "... with the whole reason and advice, not cut by the reply's size" \
    "file is not a database (the database is damaged: move it away; vgpu starts a new one)" "$err"
  stop_daemon
else
  skip "the database damaged while the daemon runs" "needs setpriv, the sqlite3 command and a user nobody"
fi

done_testing
