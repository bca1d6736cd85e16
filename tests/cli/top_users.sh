#!/usr/bin/env bash
# vgpu top's u key (cmd/top/users.c): today's totals per user from the accounting records, from
# the caller's own store without a daemon and from the arbiter's database with one (root: every
# user's). Under tmux, polling the pane (as top_screen.sh).
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip_all "screen tests: tmux is not installed"

SOCK=vgpu-top-users-$$
export LANG=C.UTF-8 LC_ALL=C.UTF-8 HOME=$T_DIR
tm() { tmux -L "$SOCK" "$@"; }
daemon=""
ADIR=""
users_cleanup() { tm kill-server 2>/dev/null; [ -n "$daemon" ] && kill "$daemon" 2>/dev/null; [ -n "$ADIR" ] && rm -rf "$ADIR" "/tmp/vgpu-top-users-nobody-$$"; t_cleanup; }
trap users_cleanup EXIT
pane() { tm capture-pane -p -t t 2>/dev/null; }
on_pane() { pane | grep -qE -- "$1"; }
expect() { # desc regex [seconds]
  if poll_until "${3:-10}" on_pane "$2"; then ok "$1"; else not_ok "$1" "missing: $2"$'\n'"$(pane)"; fi
}
keys() { tm send-keys -t t "$@"; }
# The server ended, before a new one is asked for: `q` ends top, and with it the last session, so
# the server is exiting on its own, and a new-session that reached it then failed with "server
# exited unexpectedly" (a make test beside a CPU hog, twice).
tm_gone() { ! tm ls >/dev/null 2>&1; }
tm_end() { tm kill-server 2>/dev/null; wait_until 5 tm_gone; }

# Two capped jobs of root's today: 30 % of 2 s each, 0.6 GPU-seconds (0.00017 GPU-hours) apiece.
must vgpu run --core 30 -- core_loop -t 2 -k 2000 -s 8
must vgpu run --core 30 -- true
tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
expect "top starts" "vgpu top - "
keys u
expect "u opens today's usage per user" "Today's usage per user"
expect "... with its columns" "USER +JOBS +GPU-HOURS +GIB-HOURS +ENERGY-KJ"
expect "... root's 2 jobs and their GPU-hours (own store, no daemon)" "^root +2 +0\.000[1-2]"
# (A refresh or two after both records counted: under make asan the screen that first showed
# "root 2" was drawn while the second job's finisher still wrote, and said so.)
no_writing() { ! pane | grep -q 'still writing'; }
if poll_until 5 no_writing; then ok "... and none is said to be still writing its record by then"
else not_ok "... and none is said to be still writing its record by then" "$(pane)"; fi
keys u
expect "u closes it: the panels again" "PID USER"
keys h
expect "the help lists the key" "today's usage per user"
keys x
tm_end

# A job whose record vgpu run's finisher is still writing as the view opens: said so, and read
# again at each refresh until it is in. The finisher is held with SIGSTOP while the view opens.
finisher_pid() {
  local f c
  for f in /proc/[0-9]*/comm; do
    read -r c <"$f" 2>/dev/null && [ "$c" = vgpu-finisher ] && { f=${f#/proc/}; echo "${f%/comm}"; return; }
  done
}
must vgpu run --name held --core 30 -- core_loop -t 0.3 -k 2000 -s 8
fin=$(finisher_pid)
# Held in time only when stopped before it wrote the record: vgpu acct, which waits 2 s for a
# record on its way, then says it is still being written.
if [ -n "$fin" ] && kill -STOP "$fin" 2>/dev/null && vgpu acct --name held 2>&1 | grep -q "still writing"; then
  tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
  expect "top starts (a record on its way)" "vgpu top - "
  keys u
  expect "the view says a job of the caller's is still writing its record" "1 job of yours that just ended is still writing its record"
  kill -CONT "$fin"
  expect "... and adds it once written, without being opened again" "^root +3 +0\.000[1-2]"
  check "... saying no more of it" test -z "$(pane | grep 'still writing')"
  keys q
  tm_end
else
  [ -n "$fin" ] && kill -CONT "$fin" 2>/dev/null
  records_settled
  skip "the view while a record is on its way" "the job's finisher had written its record before it could be held"
fi

# Lent memory (issue 37): on a screen of 92 columns or more, the GiB-hours requested and borrowed
# past --mem REQUEST after the others. A borrower holds 3 GiB and its context (0.5 GiB) against
# a 1 GiB request for 2 s: 5 GiB-s borrowed (0.0014 GiB-hours), 2 GiB-s requested (0.0006). On the
# code before, the view had neither column.
records_settled
must vgpu run --name lent --mem 1G:8G -- oversub_probe alloc 3G sleep 2000
tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
expect "top starts (a borrower's record in)" "vgpu top - "
keys u
expect "the view's lent columns on a wide screen" "USER +JOBS +GPU-HOURS +GIB-HOURS +ENERGY-KJ +REQ-GIB-H +BORROW-GIB-H"
expect "... root's requested and borrowed GiB-hours (the borrower's 0.0006 and 0.0014)" \
  "^root +4 .* 0\.000[5-7] +0\.001[3-5] *$"
keys q
tm_end
tm new-session -d -s t -x 80 -y 40 "vgpu top -d 0.5"
expect "top starts at 80 columns" "vgpu top - "
keys u
expect "... where the first five columns stay" "USER +JOBS +GPU-HOURS +GIB-HOURS +ENERGY-KJ *$"
check "... and the lent ones are left out whole, never cut" test -z "$(pane | grep -E 'REQ-GIB|BORROW')"
keys q
tm_end

# With the arbiter: root's view is every user's, from the daemon's database.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  user_dirs
  ADIR=$(mktemp -d /tmp/vgpu-top-users.XXXXXX); chmod 0755 "$ADIR"
  vgpu daemon --acct-db "$ADIR/db/acct.db" 2>>"$T_DIR/daemon.log" & daemon=$!
  wait_until 20 vgpu daemon --check
  must setpriv --reuid=nobody --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR \
    VGPU_STATE_DIR="/tmp/vgpu-top-users-nobody-$$" vgpu run -- true
  tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
  expect "top starts (with a daemon)" "vgpu top - "
  keys u
  expect "root's view through the daemon shows nobody's job" "^nobody +1 "
  expect "... and root's own, handed to the daemon" "^root +4 "
  keys q
  tm_end
  # The daemon down (issue 36 N3): a job ended now is in root's own store alone; the view says it
  # adds up a part, and counts that job, not the database's 5.
  kill "$daemon"; wait "$daemon"; daemon=""
  must vgpu run --name while-down -- true
  tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
  expect "top starts (the daemon stopped)" "vgpu top - "
  keys u
  expect "the daemon down: the view says PARTIAL, the arbiter does not answer" \
    "PARTIAL: the arbiter \\(vgpu daemon\\) does not answer; only your own store's records"
  expect "... and counts the job ended while it was down, from root's own store" "^root +1 "
  check "... not nobody's, which only the daemon's database holds" test -z "$(pane | grep '^nobody ')"
  keys q
else
  skip "the view through the daemon" "needs root, setpriv and a user nobody"
fi
done_testing
