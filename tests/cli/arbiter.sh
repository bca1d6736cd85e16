#!/usr/bin/env bash
# The arbiter (vgpu daemon; vgpu/arbiter.h, DESIGN.md decision 10): root's daemon alone writes the
# GPU-time schedules, so another user who writes everything it can, and asks the daemon for
# everything that is not its own, cannot starve, uncap or steer root's capped jobs. Without the
# daemon each user has a schedule of its own that other users cannot reach. Killing the daemon
# mid-run costs the jobs nothing: they keep their caps and rejoin a restarted one.
# Shares are core_loop's late_share (after its first second, when both jobs run) on the simulated
# GPU; the jobs synchronize every 8 kernels, so a busy CPU changes little, and what it changes is
# measured: each share is held against an uncapped loop's, run just before its jobs (within).
. "$(dirname "$0")/lib.sh"
need_other_user

UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
K=1000
user_dirs
trap 'kill $daemon 2>/dev/null; sched_squat -r $UUID 0 4 >/dev/null; rm -rf /tmp/vgpu-arb-nobody-$$ /tmp/vgpu-arb-nobody2-$$; t_cleanup' EXIT
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR \
    VGPU_STATE_DIR=/tmp/vgpu-arb-nobody-$$ "$@"
}
late_pct() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n 's/^late_share=//p' | awk '{ printf "%d", 100 * $1 + 0.5 }'; }
# within DESC VALUE WANT TOL DETAIL: at most WANT + TOL, and at least WANT of as much of the GPU as
# an uncapped loop got just before the jobs started ($ref, lib.sh cpu_ref), less TOL: a busy
# machine leaves a job less of its leases (beside a CPU hog: 44 for 50, 54 for 60).
within() {
  local lo=$(( $3 * ref / 100 - $4 ))
  if [ -n "$2" ] && [ "$2" -ge $lo ] && [ "$2" -le $(($3 + $4)) ]; then ok "$1 ($2; reference $ref)"
  else not_ok "$1" "got '${2}', want $lo..$(($3 + $4)) ($3 ± $4, an uncapped loop's $ref % now): $5"; fi
}
ref=100
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# root's pair, --core 30 and --core 60, for SECONDS while CMD... runs as nobody
pair_beside() { # seconds cmd...
  local s=$1; shift
  ref=$(cpu_ref $K)
  vgpu run --core 30 -- core_loop -t "$s" -d 1 -s 8 -k $K >"$T_DIR/a.out" 2>&1 &
  local a=$!
  vgpu run --core 60 -- core_loop -t "$s" -d 1 -s 8 -k $K >"$T_DIR/b.out" 2>&1 &
  local b=$!
  "$@" >"$T_DIR/h.out" 2>&1
  wait $a $b
  p30=$(late_pct "$(cat "$T_DIR/a.out")") p60=$(late_pct "$(cat "$T_DIR/b.out")")
}

# ---- without the daemon: each user's own schedule --------------------------------------------
run vgpu run --core 30 -- true
assert_contains "without a daemon, the first capped job says jobs of other users are not scheduled with it" \
  "jobs of other users are not scheduled together with yours" "$err"
run vgpu run --core 30 -- true
assert_not_contains "... once" "no arbiter" "$err"
run vgpu list
assert_not_contains "... once for every command (list)" "no arbiter" "$err"
run as_nobody vgpu list
assert_contains "... once for each user (nobody's first list says it)" "no arbiter (vgpu daemon) runs" "$err"
run vgpu daemon --check
assert_rc "--check without a daemon: 1" 1
assert_contains "--check says none answers, and how to start one" "no arbiter answers" "$err"
run vgpu daemon --spin-us 1e3
assert_rc "--spin-us takes whole microseconds only (1e3: 2)" 2
assert_contains "... saying what it takes" "give whole microseconds from 0 to 100000" "$err"
pair_beside 3 as_nobody sched_hostile $UUID 3
hostile=$(cat "$T_DIR/h.out")
assert_eq "nobody can write no schedule segment of root's" "0" "$(field "$hostile" writable_segments)"
within "no daemon, nobody scribbling: root's --core 30 job keeps its share" "$p30" 30 5 "$(cat "$T_DIR/a.out") / $hostile"
within "... and its --core 60 job" "$p60" 60 5 "$(cat "$T_DIR/b.out")"
run sched_peek $UUID
assert_contains "root's jobs were on root's own schedule (and it is gone after them)" "exists=0 where=own" "$out"

# nobody makes segments under root's keys first (mode 0666, to be joined and steered): root's
# jobs pass them over for keys of their own.
squat=$(as_nobody sched_squat $UUID 0 4)
assert_eq "nobody squats root's first four schedule keys" "squatted=4" "$squat"
ref=$(cpu_ref $K)
run vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K
within "root's --core 30 job beside squatted keys keeps its cap" "$(late_pct "$out")" 30 5 "$out / $err"
assert_not_contains "... and says nothing about them" "NOT limited" "$err"

# ---- with the daemon ----------------------------------------------------------------------------
# The machine-wide directory is root's 0755: nobody cannot make the daemon's directory first. One
# left by an older vgpu, when the directory was 1777, is moved aside.
run as_nobody mkdir -m 0777 "$VGPU_MACHINE_DIR/arbiter"
assert_rc "nobody cannot squat the daemon's directory" 1
mkdir -m 0777 "$VGPU_MACHINE_DIR/arbiter"; chown nobody "$VGPU_MACHINE_DIR/arbiter"
daemon_start
assert_contains "the daemon moves aside an arbiter/ that is not its own" "moved aside" "$(cat "$T_DIR/daemon.log")"
assert_eq "its directory is root's, 0755" "0 755" "$(stat -c '%u %a' "$VGPU_MACHINE_DIR/arbiter")"
run as_nobody vgpu daemon --check
assert_rc "nobody's jobs find root's daemon" 0
run as_nobody env VGPU_STATE_DIR=/tmp/vgpu-arb-nobody2-$$ vgpu list
assert_not_contains "with the daemon, nothing is said" "no arbiter" "$err"
run as_nobody vgpu daemon
assert_rc "another user's daemon cannot serve root's directory" 6
assert_contains "... and says why" "only root's daemon serves this directory" "$err"

# Two users' jobs share the daemon's one schedule: two --core 60 jobs split the GPU.
ref=$(cpu_ref $K)
as_nobody vgpu run --core 60 -- core_loop -t 3 -d 1 -s 8 -k $K >"$T_DIR/n.out" 2>&1 &
a=$!
vgpu run --core 60 -- core_loop -t 3 -d 1 -s 8 -k $K >"$T_DIR/r.out" 2>&1 &
b=$!
peek=""
sched_has() { peek=$(sched_peek $UUID); case $peek in *"$1"*) return 0 ;; esac; return 1; }
sched_has_both() { sched_has "where=$1" && sched_has "$2"; }
wait_until 20 sched_has jobs=2
assert_contains "two users' jobs are in the arbiter's one schedule" "where=arbiter jobs=2" "$peek"
wait $a $b
pn=$(late_pct "$(cat "$T_DIR/n.out")") pr=$(late_pct "$(cat "$T_DIR/r.out")")
within "two users' --core 60 jobs split the GPU: nobody's" "$pn" 50 5 "$(cat "$T_DIR/n.out")"
within "... and root's" "$pr" 50 5 "$(cat "$T_DIR/r.out")"

# A job root starts as nobody (vgpu run --user): the daemon takes its cap from root's limits
# file, which the job's processes show it, not from their word.
ref=$(cpu_ref $K)
run vgpu run --user nobody --core 30 -- core_loop -t 2.5 -d 1 -s 8 -k $K
within "a --user nobody --core 30 job through the daemon keeps its cap" "$(late_pct "$out")" 30 5 "$out / $err"

pair_beside 4 as_nobody sched_hostile $UUID 4
hostile=$(cat "$T_DIR/h.out")
assert_eq "nobody cannot map the arbiter's schedule writable" "refused" "$(field "$hostile" write_map)"
assert_eq "... nor make it writable" "refused" "$(field "$hostile" mprotect)"
assert_eq "... nor write any segment" "0" "$(field "$hostile" writable_segments)"
assert_eq "the daemon grants nobody nothing of root's (releases, acquires)" "0" "$(field "$hostile" forged_ok)"
check "... and says no to each ($(field "$hostile" refused))" test "$(field "$hostile" refused)" -gt 0
check "nobody gets at most 8 job entries" test "$(field "$hostile" jobs)" -le 8
within "with the daemon, nobody hostile: root's --core 30 job keeps its share" "$p30" 30 5 "$(cat "$T_DIR/a.out") / $hostile"
within "... and its --core 60 job" "$p60" 60 5 "$(cat "$T_DIR/b.out")"

# ---- placement, --wait and the job count through the daemon ----------------------------------------
# The daemon keeps every user's promises, --wait queue and job count (cmd/daemon/place.c); nothing
# of them is in a directory another user can write. root's 60G job leaves 19.65 GiB of the H100.
vgpu run --mem 60G -- sleep 60 >/dev/null 2>&1 &
big=$!
started() { grep -q . "/proc/$1/task/$1/children" 2>/dev/null; }
wait_until 20 started $big
run as_nobody vgpu run --mem 30G -- true
assert_rc "through the daemon, another user is not promised memory root's job holds" 125
assert_contains "... and is told what is left" "19.65 GiB left" "$err"
run as_nobody vgpu run --mem 10G -- true
assert_rc "... while what is left can still be had" 0
assert_eq "nothing of placement is in the machine-wide directory (only root's arbiter/, userjobs/ and the daemon's acct.db)" "" \
  "$(find "$VGPU_MACHINE_DIR" -mindepth 1 ! -path "$VGPU_MACHINE_DIR/arbiter*" ! -path "$VGPU_MACHINE_DIR/userjobs*" ! -path "$VGPU_MACHINE_DIR/acct.db*" 2>/dev/null)"
# nobody takes 32 places in the queue and never comes back, tries to take over root's promise and
# pid 1's, counts itself on the GPU and sends garbage.
as_nobody place_hostile $UUID $big 4 >"$T_DIR/ph.out" 2>&1 &
ph=$!
wait_until 20 grep -q tickets= "$T_DIR/ph.out"
hostile=$(cat "$T_DIR/ph.out")
check "nobody took places in the queue ($(field "$hostile" tickets))" test "$(field "$hostile" tickets)" -ge 1
assert_eq "... but nothing of root's (its promise) or pid 1's" "0" "$(field "$hostile" adopted)"
assert_eq "... and no garbage was taken" "0" "$(field "$hostile" garbage_accepted)"
assert_eq "... nor a promise on a stale look" "0" "$(field "$hostile" stale_accepted)"
run vgpu run --mem 10G -- true
assert_rc "root's placement is not held back by nobody's 32 waiters" 0
run as_nobody vgpu run --mem 30G -- true
assert_rc "... and root's promise still counts" 125
vgpu run --mem 30G --wait -- true >/dev/null 2>"$T_DIR/w.err" &
w=$!
wait_until 20 grep -q "place 1 in the queue" "$T_DIR/w.err"
assert_contains "root's --wait queues first among root's jobs, whatever nobody holds" "place 1 in the queue" "$(cat "$T_DIR/w.err")"
kill $big; wait $big 2>/dev/null
wait_until 20 sh -c "! kill -0 $w 2>/dev/null"
wait $w; rc=$?
assert_rc "... and starts when root's 60G job ends" 0
wait $ph   # its connections close when it exits: what it held ends with them
# A detached job's promise outlives the `vgpu run` that made it: its supervisor takes it over.
run vgpu run -d --mem 60G sleep 30
did=$out
run as_nobody vgpu run --mem 30G -- true
assert_rc "a detached job's promise is held by its supervisor after vgpu run -d returns" 125
sup=$(vgpu ps --json | jq -r --arg id "$did" '.jobs[] | select(.id == $id) | .creator_pid')
kill -TERM "$sup" 2>/dev/null
run vgpu wait --timeout 10 "$did"
run as_nobody vgpu run --mem 30G -- true
assert_rc "... and gives it back when the job ends" 0
# Root's max-jobs-per-gpu counts every user's jobs through the daemon.
printf 'max-jobs-per-gpu 1\n' >"$VGPU_MACHINE_DIR/policy"; chmod 0644 "$VGPU_MACHINE_DIR/policy"
vgpu run --gpu 0 -- sleep 30 >/dev/null 2>"$T_DIR/one.err" &
one=$!
wait_until 20 started $one || cat "$T_DIR/one.err" >&2
run as_nobody vgpu run --gpu 0 -- true
assert_rc "with max-jobs-per-gpu 1, another user's job beside root's is refused" 125
assert_contains "... saying why" "already runs 1 job" "$err"
kill $one; wait $one 2>/dev/null
run as_nobody vgpu run --gpu 0 -- true
assert_rc "... and runs once root's has ended" 0
rm -f "$VGPU_MACHINE_DIR/policy"

# ---- the daemon killed mid-run, and restarted -------------------------------------------------------
ref=$(cpu_ref $K)
vgpu run --core 30 -- core_loop -t 6 -d 1 -s 8 -k $K >"$T_DIR/a.out" 2>&1 &
a=$!
vgpu run --core 60 -- core_loop -t 6 -d 1 -s 8 -k $K >"$T_DIR/b.out" 2>&1 &
b=$!
vgpu run --mem 60G -- sleep 30 >/dev/null 2>&1 &
big=$!
wait_until 20 sched_has "procs=2"
wait_until 20 started $big
kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
wait_until 5 sched_has "where=own jobs=2 procs=2"
assert_contains "killed, the daemon's jobs move to their user's own schedule" "where=own jobs=2" "$peek"
t0=$(date +%s%N)
daemon_start
wait_until 5 sched_has_both arbiter "procs=2"
t1=$(date +%s%N)
check "... and rejoin a restarted daemon within 1 s ($(( (t1 - t0) / 1000000 )) ms)" test $(( (t1 - t0) / 1000000 )) -le 1000
nobody_refused() { ! as_nobody vgpu run --mem 30G -- true >/dev/null 2>&1; }
wait_until 5 nobody_refused
run as_nobody vgpu run --mem 30G -- true
assert_rc "a running job's promise is made again to the restarted daemon" 125
kill $big; wait $big 2>/dev/null
wait $a $b
within "through the kill and restart, the --core 30 job keeps its cap" "$(late_pct "$(cat "$T_DIR/a.out")")" 30 5 "$(cat "$T_DIR/a.out")"
within "... and the --core 60 job" "$(late_pct "$(cat "$T_DIR/b.out")")" 60 5 "$(cat "$T_DIR/b.out")"
assert_contains "each said once that the daemon went away" "arbiter (vgpu daemon) went away" "$(cat "$T_DIR/a.out")"
done_testing
