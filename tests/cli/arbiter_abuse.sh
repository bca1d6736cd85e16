#!/usr/bin/env bash
# The arbiter against a user who tries to exhaust what it has (issue 35, "no resource one user can
# exhaust"): descriptors passed with messages, connections, made-up GPUs, job entries through
# subordinate uids. nobody attacks with tests/progs/arb_attack (the raw protocol); root's
# --core 30 job, and root's `vgpu daemon --check`, are the victims. Each share is compared with a
# control run made in this script just before that attack (the share of a --core 30 job drifts with
# the machine's load: 17-26 % in one afternoon here, so one control for all of them was not enough).
# The daemon runs with a file limit of 1024 (soft and hard), the old unit's default.
. "$(dirname "$0")/lib.sh"
need_other_user

UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
K=1000
user_dirs
holders=()
trap 'exec 7>&- 21>&- 22>&- 23>&- 24>&- 2>/dev/null; kill ${holders[@]+"${holders[@]}"} $daemon 2>/dev/null; rm -rf /tmp/vgpu-abuse-$$; t_cleanup' EXIT
NOBODY=$(id -u nobody)
as_uid() { # uid cmd...: as that uid (nogroup), with a state directory of its own
  local u=$1; shift
  setpriv --reuid="$u" --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR \
    VGPU_STATE_DIR=/tmp/vgpu-abuse-$$/"$u" "$@"
}
as_nobody() { as_uid "$NOBODY" "$@"; }
late_pct() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n 's/^late_share=//p' | awk '{ printf "%d", 100 * $1 + 0.5 }'; }
# An attack wins by holding root's job below what it got just before (the control), so the share
# may not fall more than the tolerance below it; above it is the machine's load easing, which
# is no attack, up to the job's cap (30 %) plus the tolerance: beyond that it is not limited.
# (A two-sided band failed CI once at 28 against a control of 24, both under the cap.)
near() { # desc value control tolerance detail
  timing_skipped "$1" "$2" && return 0
  local hi=$((30 + $4)); [ "$3" -gt 30 ] && hi=$(($3 + $4))
  if [ -n "$2" ] && [ "$2" -ge $(($3 - $4)) ] && [ "$2" -le "$hi" ]; then ok "$1 ($2, control $3)"
  else not_ok "$1" "got '${2}', want $(($3 - $4))..$hi (control $3, cap 30): $5"; fi
}
fds_of() { ls "/proc/$daemon/fd" | wc -l; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$daemon/stat"; }
# The daemon's share of a CPU from cpu_from to cpu_since, in per cent. Ticks are 1/100 s (USER_HZ);
# the wall time is in microseconds.
cpu_from() { cpu_c0=$(cpu_ticks) cpu_w0=${EPOCHREALTIME/./}; }
cpu_since() {
  local c1 w1; c1=$(cpu_ticks) w1=${EPOCHREALTIME/./}
  echo $(( (c1 - cpu_c0) * 10000 * 100 / ((w1 - cpu_w0) / 100 + 1) / 100 ))
}
# root's --core 30 job, 2 s: its late share in $p30 (and its output in $T_DIR/r30.out)
root30() {
  vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K >"$T_DIR/r30.out" 2>&1
  p30=$(late_pct "$(cat "$T_DIR/r30.out")")
}
mkdir -p /tmp/vgpu-abuse-$$ && chmod 1777 /tmp/vgpu-abuse-$$
# A subordinate-uid file of this script's own (the daemon reads it only because VGPU_MACHINE_DIR
# relocates it): uids 300000-300099 are nobody's container's.
printf 'nobody:300000:100\n' >"$T_DIR/subuid"
daemon_start --nofile 1024 VGPU_SUBUID_FILE="$T_DIR/subuid"
assert_contains "the daemon fits its connections into its file limit, keeping some for root" \
  "kept for root" "$(cat "$T_DIR/daemon.log")"

control_run() { root30; control=$p30; check "control: root's --core 30 job through the daemon ($control)" test -n "$control"; }
control_run

# ---- descriptors passed with messages ---------------------------------------------------------------
# The baseline once the control job's record is in: the daemon opens its database (3 descriptors)
# at the first record, which vgpu run's finisher sends up to a second after the job.
records_settled
base=$(fds_of)
run as_nobody arb_attack fds 508
assert_eq "508 HELLOs carrying 2 descriptors each are all answered" "answered=508" "$out"
at_base() { [ "$(fds_of)" -le "$base" ]; }
if poll_until 10 at_base; then ok "the daemon's descriptors return to their baseline ($base)"
else not_ok "the daemon's descriptors return to their baseline" "baseline $base, now $(fds_of)"; fi
run vgpu daemon --check
assert_rc "root's --check answers after it" 0

# ---- connections ------------------------------------------------------------------------------------
# The daemon's CPU while root's job runs alone, to hold the same figure beside the connections to.
cpu_from; vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K >/dev/null 2>&1; cpu_control=$(cpu_since)
mkfifo "$T_DIR/hold7"
as_nobody bash -c 'ulimit -n 2048 2>/dev/null; exec arb_attack conns 1015' <"$T_DIR/hold7" >"$T_DIR/conns.out" 2>&1 &
holders+=($!)
exec 7>"$T_DIR/hold7"
wait_until 60 grep -q answered= "$T_DIR/conns.out"
cpu_from
run vgpu daemon --check
assert_rc "beside nobody's 1015 connections, root's vgpu daemon --check answers" 0
root30
near "... and root's --core 30 job keeps its share" "$p30" "$control" 3 "$(cat "$T_DIR/r30.out")"
assert_not_contains "... saying nothing of a lost arbiter" "arbiter" "$(cat "$T_DIR/r30.out")"
cpu_pct=$(cpu_since)
# The daemon spins a while after each request by design (--spin-us), so serving the job costs it a
# share of a CPU of its own (38-42 % here, more under a sanitizer): the connections may not add to
# it. (Watched by poll, 704 idle ones added 10 points; by epoll, none.)
check "the daemon does not spin meanwhile ($cpu_pct % of a CPU; serving the job alone $cpu_control %, at most 8 more)" \
  test "$cpu_pct" -le $((cpu_control + 8))
answered=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' "$T_DIR/conns.out")
check "nobody got fewer connections than it asked (${answered:-?} of 1015): the daemon's file limit is kept" \
  test "${answered:-1015}" -lt 1015
exec 7>&-
wait "${holders[-1]}" 2>/dev/null
at_base2() { [ "$(fds_of)" -le "$base" ]; }
if poll_until 10 at_base2; then ok "the descriptors return to their baseline when nobody's connections end"
else not_ok "the descriptors return to their baseline when nobody's connections end" "baseline $base, now $(fds_of)"; fi

# ---- made-up GPUs ---------------------------------------------------------------------------------
control_run
run as_nobody arb_attack uuids 64
assert_eq "no made-up GPU UUID is opened (they are not NVML's)" "opened=0" "$out"
run vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K
assert_not_contains "root's --core 30 job after it is limited" "NOT limited" "$err"
near "... and keeps its share" "$(late_pct "$out")" "$control" 3 "$out / $err"

# ---- job entries, through subordinate uids ---------------------------------------------------------
# nobody's container's uids 300000-300003 take 8 job entries each if they can: 8 in all are theirs.
control_run
for i in 0 1 2 3; do
  mkfifo "$T_DIR/hold$i"
  as_uid $((300000 + i)) arb_attack jobs $UUID 8 <"$T_DIR/hold$i" >"$T_DIR/jobs$i.out" 2>&1 &
  holders+=($!)
done
exec 21>"$T_DIR/hold0" 22>"$T_DIR/hold1" 23>"$T_DIR/hold2" 24>"$T_DIR/hold3"
for i in 0 1 2 3; do wait_until 20 grep -q jobs= "$T_DIR/jobs$i.out"; done
got=$(cat "$T_DIR"/jobs?.out | sed -n 's/.*jobs=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
assert_eq "nobody's 4 subordinate uids get 8 job entries together, one login's quota" "8" "$got"
assert_contains "... the others are told why" "with_its_subordinate_uids" "$(cat "$T_DIR"/jobs?.out)"
# nobody itself is the same login: its own job finds its quota full, and waits rather than run
# unlimited; it goes on once the container's entries are given back.
as_nobody vgpu run --core 30 -- core_loop -t 1 -d 1 -s 8 -k $K >"$T_DIR/n30.out" 2>&1 21>&- 22>&- 23>&- 24>&- &
n30=$!
wait_until 20 grep -q "wait until there is room" "$T_DIR/n30.out"
assert_not_contains "nobody's job beside its full quota is never run NOT limited" "NOT limited" "$(cat "$T_DIR/n30.out")"
check "... it waits meanwhile" kill -0 $n30
run vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K
assert_not_contains "root's --core 30 job beside them is limited" "NOT limited" "$err"
near "... and keeps its share" "$(late_pct "$out")" "$control" 3 "$out / $err"
exec 21>&- 22>&- 23>&- 24>&-
wait "$n30"
rc=$?
assert_eq "nobody's waiting job runs once there is room (status)" 0 "$rc"
assert_contains "... and says so" "has room again" "$(cat "$T_DIR/n30.out")"

# ---- root's reserve --------------------------------------------------------------------------------
# 4 other users (no subordinate uids) x 8 entries: the table's last 4 entries stay root's.
daemon_stop
daemon_start --nofile 1024
control_run
for i in 0 1 2 3; do
  mkfifo "$T_DIR/hr$i"
  as_uid $((310000 + i)) arb_attack jobs $UUID 8 <"$T_DIR/hr$i" >"$T_DIR/r$i.out" 2>&1 &
  holders+=($!)
done
exec 21>"$T_DIR/hr0" 22>"$T_DIR/hr1" 23>"$T_DIR/hr2" 24>"$T_DIR/hr3"
for i in 0 1 2 3; do wait_until 20 grep -q jobs= "$T_DIR/r$i.out"; done
got=$(cat "$T_DIR"/r?.out | sed -n 's/.*jobs=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
assert_eq "4 users of 8 entries each get 28 of the 32: 4 are kept for root" "28" "$got"
assert_contains "... the last is told why" "kept_for_root" "$(cat "$T_DIR"/r?.out)"
run vgpu run --core 30 -- core_loop -t 2 -d 1 -s 8 -k $K
assert_not_contains "root's --core 30 job beside a table full of other users' entries is limited" "NOT limited" "$err"
near "... and keeps its share" "$(late_pct "$out")" "$control" 3 "$out / $err"
exec 21>&- 22>&- 23>&- 24>&-

done_testing
