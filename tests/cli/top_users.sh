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

# Two capped jobs of root's today: 30 % of 2 s each, 0.6 GPU-seconds (0.00017 GPU-hours) apiece.
must vgpu run --core 30 -- core_loop -t 2 -k 2000 -s 8
must vgpu run --core 30 -- true
tm new-session -d -s t -x 120 -y 40 "vgpu top -d 0.5"
expect "top starts" "vgpu top - "
keys u
expect "u opens today's usage per user" "Today's usage per user"
expect "... with its columns" "USER +JOBS +GPU-HOURS +GIB-HOURS +ENERGY-KWH"
expect "... root's 2 jobs and their GPU-hours (own store, no daemon)" "^root +2 +0\.000[1-2]"
keys u
expect "u closes it: the panels again" "PID USER"
keys h
expect "the help lists the key" "today's usage per user"
keys x
tm kill-server 2>/dev/null

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
  expect "... and root's own, handed to the daemon" "^root +2 "
  keys q
else
  skip "the view through the daemon" "needs root, setpriv and a user nobody"
fi
done_testing
