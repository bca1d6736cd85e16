# Lending across users through the arbiter (issue 37 item 4, vgpu/lend.h): a job's regions are its
# user's, so a borrower sees only its own user's jobs; with vgpu daemon each job's vgpu run tells
# the arbiter what the job holds (every 250 ms) and keeps the answer, what the other users' jobs
# there add, beside its region. A borrower of one user then gives way to another user's request,
# in the one order (the lower priority first, then the one that borrows more), and another user's
# figures never count past the promise placement admitted.
# On the code before, a borrower never saw another user's unmet request: every "within 1 s" row
# failed (the owner waited its second and got CUDA_ERROR_OUT_OF_MEMORY naming the borrower).
# Owners run with VGPU_FAKE_NO_EVICT=1, as in lend_squeeze.sh: they get memory only when vgpu's
# squeeze gave it. h100 scenario: 79.09 GiB usable, each process's context 512 MiB.
. "$(dirname "$0")/lib.sh"
need_other_user
G=1073741824
user_dirs
NB=/tmp/vgpu-lend-nobody-$$
trap 'rm -rf "$NB"; t_cleanup' EXIT
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR \
    VGPU_STATE_DIR=$NB "$@"
}
use_scenario h100
daemon_start
# Started in the background: the function's subshell becomes setpriv, so that $! is the job's vgpu run.
nobody_bg() {
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR \
    VGPU_STATE_DIR=$NB "$@"
}
# What the other users' jobs borrow on GPU 0 as the arbiter last told root's job NAME (its .lend
# file beside its region: dev[0].borrowed at byte 32, vgpu/lend.h): at least MIN bytes.
told_borrowed() { # name min
  local id; id=$(vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n and .state == "running") | .id')
  [ -n "$id" ] && [ -f "$VGPU_STATE_DIR/jobs/$id.lend" ] &&
    [ "$(od -A n -t u8 -j 32 -N 8 "$VGPU_STATE_DIR/jobs/$id.lend" | tr -d ' ')" -ge "$2" ]
}
demoted_of() { # name [as_nobody]
  ${2:+as_nobody} vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n and .state == "running") | .gpus[0].mem_demoted_bytes'
}
timed_ms() { sed -n 's/^timed rc=0 size=[0-9]* ms=\([0-9]*\)$/\1/p' "$1"; }
holding() { grep -q -e holding -e '^timed rc=[^0]' "$1"; }

# ---- root borrows, nobody's request needs the room ----
vgpu run --name rootb --mem 2G:75G -- oversub_probe alloc 70G hold >"$T_DIR/rootb.out" 2>&1 &
rootb=$!
if poll_until 10 grep -q holding "$T_DIR/rootb.out"; then ok "root's borrower holds 70 GiB past a 2 GiB request"
else not_ok "root's borrower holds 70 GiB past a 2 GiB request" "$(cat "$T_DIR/rootb.out")"; fi
nobody_bg env VGPU_FAKE_NO_EVICT=1 vgpu run --name nobo --mem 60G -- oversub_probe timed 59G hold >"$T_DIR/nobo.out" 2>&1 &
nobo=$!
poll_until 10 holding "$T_DIR/nobo.out"
ms=$(timed_ms "$T_DIR/nobo.out")
check "nobody's job of --mem 60G gets 59 GiB within 1 s beside root's borrower (${ms:-no} ms)" \
  test -n "$ms" -a "${ms:-9999}" -lt 1000
check "... root's borrower is not killed" kill -0 "$rootb"
d=$(demoted_of rootb)
assert_eq "... and shows its 70 GiB demoted" "$((70 * G))" "$d"
kill "$nobo"; wait "$nobo" 2>/dev/null
if poll_until 5 sh -c "[ \"\$(vgpu ps --json | jq -r '.jobs[] | select(.name == \"rootb\") | .gpus[0].mem_demoted_bytes')\" = 0 ]"; then
  ok "nobody's job ended: root's borrower is promoted back within 5 s"
else not_ok "nobody's job ended: root's borrower is promoted back within 5 s" "$(demoted_of rootb)"; fi
kill "$rootb"; wait "$rootb" 2>/dev/null

# ---- the order across users: nobody's low-priority borrower gives before root's normal one ----
nobody_bg vgpu run --name nlow --mem 1G:40G --priority low -- oversub_probe alloc 30G hold >"$T_DIR/nlow.out" 2>&1 &
nlow=$!
vgpu run --name rnorm --mem 1G:40G -- oversub_probe alloc 30G hold >"$T_DIR/rnorm.out" 2>&1 &
rnorm=$!
poll_until 10 grep -q holding "$T_DIR/nlow.out"; poll_until 10 grep -q holding "$T_DIR/rnorm.out"
# (Both borrowers' figures reach the arbiter at their vgpu run's next walk.)
if poll_until 5 told_borrowed rnorm $((29 * G)); then ok "the arbiter tells root's borrower what nobody's borrows"
else not_ok "the arbiter tells root's borrower what nobody's borrows" "$(ls -la "$VGPU_STATE_DIR/jobs")"; fi
VGPU_FAKE_NO_EVICT=1 vgpu run --name rown --mem 30G -- oversub_probe timed 29G hold >"$T_DIR/rown.out" 2>&1 &
rown=$!
poll_until 10 holding "$T_DIR/rown.out"
ms=$(timed_ms "$T_DIR/rown.out")
check "root's owner of 29 GiB beside two users' borrowers: within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
dl=$(demoted_of nlow nobody); dn=$(demoted_of rnorm)
check "... nobody's --priority low borrower gave way ($dl B), root's normal one did not ($dn B)" \
  test "${dl:-0}" -ge $((13 * G)) -a "${dn:-x}" = 0
check "... neither killed" kill -0 "$nlow" "$rnorm"
kill "$rown" "$nlow" "$rnorm"; wait "$rown" "$nlow" "$rnorm" 2>/dev/null

# ---- a liar: nobody's borrower is ahead in the order and never gives way (stopped) ----
# The one behind it (root's) gives after the shortfall lasted half a second.
nobody_bg vgpu run --name nstop --mem 1G:40G --priority low -- sh -c 'oversub_probe alloc 30G hold & echo "pid $!"; wait' \
  >"$T_DIR/nstop.out" 2>&1 &
nstop=$!
vgpu run --name rbehind --mem 1G:40G -- oversub_probe alloc 30G hold >"$T_DIR/rbehind.out" 2>&1 &
rbehind=$!
poll_until 10 grep -q holding "$T_DIR/nstop.out"; poll_until 10 grep -q holding "$T_DIR/rbehind.out"
poll_until 5 told_borrowed rbehind $((29 * G))
spid=$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$T_DIR/nstop.out")
[ -n "$spid" ] && kill -STOP "$spid"
VGPU_FAKE_NO_EVICT=1 vgpu run --name rown2 --mem 30G -- oversub_probe timed 29G hold >"$T_DIR/rown2.out" 2>&1 &
rown2=$!
poll_until 10 holding "$T_DIR/rown2.out"
ms=$(timed_ms "$T_DIR/rown2.out")
check "nobody's borrower ahead is stopped: root's owner still within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
[ -n "$spid" ] && kill -CONT "$spid"
kill "$rown2" "$nstop" "$rbehind"; wait "$rown2" "$nstop" "$rbehind" 2>/dev/null

# ---- without the daemon, each user's jobs see only their own ----
daemon_stop
vgpu run --name alone --mem 2G:75G -- oversub_probe alloc 70G hold >"$T_DIR/alone.out" 2>&1 &
alone=$!
poll_until 10 grep -q holding "$T_DIR/alone.out"
check "without the daemon no answer file is kept beside the region, and the ended jobs left none" \
  sh -c '! ls "$1"/jobs/*.lend 2>/dev/null | grep -q .' _ "$VGPU_STATE_DIR"
kill "$alone"; wait "$alone" 2>/dev/null
done_testing
