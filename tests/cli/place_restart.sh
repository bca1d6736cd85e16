#!/usr/bin/env bash
# Placement across a restart of the arbiter (issue 35 item 6, issue 37 item 6): a daemon knows the
# promises and the job count only from the running jobs' vgpu run, which make theirs again at
# their next walk (every 250 ms). In that window a placement was admitted against an empty ledger:
# with 102 GiB promised on a 140 GiB H200, `vgpu run --mem 60G` ran right after a restart. The
# daemon keeps the list of whom it serves (MACHINE_DIR/arbiter/holders, root's, 0600); one that
# starts and finds living holders there answers new placements "try again" until each has promised
# again, 1 s after its start at most (vgpu-daemon(8), "Restarts"). A fresh daemon never waits, and
# a holders file that is not the daemon's own is ignored, saying why. Before the daemon kept the
# file, the placements right after a restart were admitted 10 times of 10 (rows 6, 7, 11, 18).
. "$(dirname "$0")/lib.sh"

use_scenario h200   # one H200: 140.4 GiB
HOLDERS=$VGPU_MACHINE_DIR/arbiter/holders
BOOT=$(cat /proc/sys/kernel/random/boot_id)
ms_now() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }
# The daemon started again, without lib.sh's 50 ms polling: it answers at once, as after a
# systemd restart, so that the first placement comes before the jobs' next walk.
restart_now() {
  [ -n "$daemon" ] && { kill -9 "$daemon"; wait "$daemon" 2>/dev/null; }
  vgpu daemon 2>>"$T_DIR/daemon.log" &
  daemon=$!
  local end=$(( $(ms_now) + 20000 ))
  until vgpu daemon --check >/dev/null 2>&1; do
    [ "$(ms_now)" -lt "$end" ] || { not_ok "the daemon started again within 20 s"; return 1; }
  done
}
# timed CMD...: run, with $ms its wall time
timed() { local t0; t0=$(ms_now); run "$@"; ms=$(( $(ms_now) - t0 )); }
started() { [ -s "$T_DIR/$1.up" ]; }

daemon_start
# 102 GiB promised and three jobs counted, by three holders: two vgpu run, and a detached job's
# supervisor (which took its promise over from the vgpu run that started it).
vgpu run --mem 40G -- sh -c 'echo $$ >"$0"; exec sleep 600' "$T_DIR/a.up" >/dev/null 2>"$T_DIR/a.err" &
ja=$!
vgpu run --mem 40G -- sh -c 'echo $$ >"$0"; exec sleep 600' "$T_DIR/b.up" >/dev/null 2>"$T_DIR/b.err" &
jb=$!
must vgpu run -d --name detached --mem 22G -- sh -c 'echo $$ >"$0"; exec sleep 600' "$T_DIR/c.up"
wait_until 20 started a
wait_until 20 started b
wait_until 20 started c
run vgpu run --mem 60G -- true
assert_rc "102 GiB promised: --mem 60G is refused" 125
assert_contains "... saying what is left" "38.40 GiB left of 140.40 GiB" "$err"
check "the daemon lists whom it serves in root's holders file" test -f "$HOLDERS" -a -O "$HOLDERS"
assert_eq "... mode 0600" 600 "$(stat -c %a "$HOLDERS")"
assert_eq "... the three holders" 3 "$(grep -c '^[0-9]' "$HOLDERS")"

# ---- kill -9, start again, place at once: 10 of 10 refused, as without the restart ----
refused=0 rcs= waits=
for i in $(seq 10); do
  restart_now || break
  timed vgpu run --mem 60G -- true
  rcs="$rcs $rc" waits="$waits $ms"
  # refused for want of memory, with the 102 GiB counted (not for a daemon that would not answer)
  [ "$rc" = 125 ] && case $err in *"38.40 GiB left of 140.40 GiB"*) refused=$((refused + 1)) ;; esac
done
assert_eq "killed and started again, --mem 60G at once is refused 10 of 10 times (answered after$waits ms)" 10 "$refused"
[ "$refused" = 10 ] || echo "# exit statuses:$rcs; the last said: $err"
refused=0 rcs=
for i in $(seq 10); do
  restart_now || break
  run vgpu run --max-jobs 3 -- true
  rcs="$rcs $rc"
  [ "$rc" = 125 ] && case $err in *"already runs 3 jobs"*) refused=$((refused + 1)) ;; esac
done
assert_eq "... and a 4th job with --max-jobs 3 is refused 10 of 10 times, the GPU running 3 (the count too)" 10 \
  "$refused"
[ "$refused" = 10 ] || echo "# exit statuses:$rcs; the last said: $err"
restart_now
timed vgpu daemon --check
check "while it waits for the holders, vgpu daemon --check answers at once (${ms} ms)" test "$rc" = 0 -a "$ms" -lt 1000
assert_contains "the daemon says whom it waits for" "3 running jobs held promises" "$(cat "$T_DIR/daemon.log")"
assert_contains "... and that they promised again" "promised again after" "$(cat "$T_DIR/daemon.log")"

# --wait: queued as without the restart, placed once a holder ends
restart_now
vgpu run --mem 60G --wait -- true >/dev/null 2>"$T_DIR/w.err" &
w=$!
sleep 1.5   # past the daemon's 1 s: still queued is the assertion (admitted, it would have ended)
check "... with --wait it waits" kill -0 $w
kill $ja; wait $ja 2>/dev/null
if poll_until 20 sh -c "! kill -0 $w 2>/dev/null"; then ok "... and runs once a 40 GiB job ended"
else not_ok "... and runs once a 40 GiB job ended" "$(cat "$T_DIR/w.err")"; fi
wait $w
assert_eq "... successfully" 0 "$?"
kill $jb; wait $jb 2>/dev/null
kill "$(cat "$T_DIR/c.up")"   # the detached job's command: its supervisor then ends

# ---- a fresh daemon never waits -------------------------------------------------------------
place_free() { [ "$(vgpu run --mem 100G -- true >/dev/null 2>&1; echo $?)" = 0 ]; }
wait_until 10 place_free
restart_now
timed vgpu run --mem 100G -- true
first=$ms
timed vgpu run --mem 100G -- true
check "no holder alive: the first placement after a start is admitted ($first ms, then $ms)" test "$rc" = 0
check "... at once: no more than 300 ms slower than the next one" test $(( first - ms )) -lt 300
rm -f "$HOLDERS"
restart_now
timed vgpu run --mem 100G -- true
check "no holders file: admitted at once ($ms ms)" test "$rc" = 0 -a "$ms" -lt 1000

# ---- holders that died while no daemon ran are not waited for ----
vgpu run --mem 100G -- sh -c 'echo $$ >"$0"; exec sleep 600' "$T_DIR/d.up" >/dev/null 2>&1 &
jd=$!
wait_until 20 started d
kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
kill -9 $jd; wait $jd 2>/dev/null
kill "$(cat "$T_DIR/d.up")"   # its command, which outlived it
restart_now
timed vgpu run --mem 100G -- true
check "a holder killed while the daemon was down is not waited for ($ms ms)" test "$rc" = 0 -a "$ms" -lt 1000

# ---- a living holder that never promises again holds placements back 1 s at most ----
sleep 600 &
s=$!
forge() { # owner mode
  daemon_stop
  rm -f "$HOLDERS"
  printf 'vgpu-holders 1 %s\n%d %s 0 1 -\n' "$BOOT" $s "$(awk '{ print $22 }' /proc/$s/stat)" >"$HOLDERS"
  chown "$1" "$HOLDERS"; chmod "$2" "$HOLDERS"
  daemon=
}
forge 0 600
restart_now
timed vgpu run --mem 100G -- true
check "a listed holder alive that never promises again: admitted ($rc) after about 1 s ($ms ms)" \
  test "$rc" = 0 -a "$ms" -ge 700 -a "$ms" -lt 3000
assert_contains "... the daemon says it stopped waiting" "stopped waiting" "$(cat "$T_DIR/daemon.log")"
# untrusted OWNER MODE WHY [garbage]: a forged holders file naming the living $s, not the daemon's own
untrusted() {
  forge "$1" "$2"
  [ "${4:-}" = garbage ] && printf 'vgpu-holders 1 %s\n%d x\n' "$BOOT" $s >"$HOLDERS"
  : >"$T_DIR/daemon.log"
  restart_now
  timed vgpu run --mem 100G -- true
  check "a holders file $3 is not trusted: admitted at once ($ms ms)" test "$rc" = 0 -a "$ms" -lt 700
  assert_contains "... and the daemon says it ignored it" "ignored $HOLDERS" "$(cat "$T_DIR/daemon.log")"
}
untrusted 65534 600 "not root's"
untrusted 0 644 "others may read"
untrusted 0 600 "that does not parse" garbage
forge 0 600
mv "$HOLDERS" "$T_DIR/elsewhere"
cp -p "$T_DIR/elsewhere" "$T_DIR/elsewhere.orig"
ln -s "$T_DIR/elsewhere" "$HOLDERS"
: >"$T_DIR/daemon.log"
restart_now
timed vgpu run --mem 100G -- true
check "a holders file that is a symlink (to a valid one) is not followed: admitted at once ($ms ms)" \
  test "$rc" = 0 -a "$ms" -lt 700
assert_contains "... said" "ignored $HOLDERS" "$(cat "$T_DIR/daemon.log")"
check "... the daemon's own list replaced the link, and what it pointed to is untouched" \
  sh -c "test ! -L '$HOLDERS' && test -f '$HOLDERS' && cmp -s '$T_DIR/elsewhere' '$T_DIR/elsewhere.orig'"
kill $s; wait $s 2>/dev/null
daemon_stop
done_testing
