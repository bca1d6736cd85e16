#!/usr/bin/env bash
# Accounting that a user who does not play fair cannot use against root (issue 35 items 4 and 5;
# cmd/daemon/acct.c, acct_worker.c, acct_jobs.c). nobody floods the daemon with records that end
# ten years from now, and asks its own totals back to back: root's --core 30 job keeps its share
# (against a control run made here first), root's HELLO, --check and --totals answer within 1 s,
# and the flood is cut to nobody's rate (and its ends to now). nobody sends its own job's record
# before its vgpu run does, and a record with the id of root's running job: both are refused, and
# both jobs' records are their vgpu run's, with the schedule's charge.
# Shares are core_loop's late_share on the simulated GPU (after its first second).
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the other user is nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
id nobody >/dev/null 2>&1 || skip_all "needs a user 'nobody'"

UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
K=1000
user_dirs
ADIR=$(mktemp -d /tmp/vgpu-acctforge.XXXXXX); chmod 0755 "$ADIR"
ADB=$ADIR/db/acct.db
NSTATE=/tmp/vgpu-acct-forge-nobody-$$
NUID=$(id -u nobody)
daemon=""
trap 'kill $daemon 2>/dev/null; rm -rf "$ADIR" "$NSTATE"; t_cleanup' EXIT
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR VGPU_STATE_DIR=$NSTATE "$@"
}
q() { sqlite3 -separator ' ' "$ADB" "$1"; }
late_pct() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n 's/^late_share=//p' | awk '{ printf "%d", 100 * $1 + 0.5 }'; }
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# The attack must not lower the share; more than the control (a busy machine that calmed down) is
# not the attack's doing.
at_least() { # desc value control tolerance detail
  timing_skipped "$1" "$2" && return 0
  if [ -n "$2" ] && [ "$2" -ge $(($3 - $4)) ]; then ok "$1 ($2, control $3)"
  else not_ok "$1" "got '${2}', want at least $3 - $4: $5"; fi
}
ms() { echo $(( (${EPOCHREALTIME/./} - $1) / 1000 )); }
under_1s() { # desc cmd...
  local desc=$1; shift
  local t0=${EPOCHREALTIME/./}; "$@" >/dev/null 2>&1; local r=$? d; d=$(ms "$t0")
  if [ $r = 0 ] && [ "$d" -lt 1000 ]; then ok "$desc (${d} ms)"; else not_ok "$desc" "status $r after $d ms"; fi
}
vgpu daemon --acct-db "$ADB" 2>>"$T_DIR/daemon.log" &
daemon=$!
wait_until 20 vgpu daemon --check

# GPU seconds of root's job NAME, stored, and core_loop's own (share x elapsed) from its output
rec_s() { q "SELECT SUM(g.gpu_ns) / 1e9 FROM jobs j JOIN job_gpus g ON g.job_id = j.id WHERE j.name = '$1' AND j.uid = 0"; }
# What the schedule charges a saturating --core 30 job: 30 % of its run time (its kernels' own
# share is less: a lease is charged whole, cmd/daemon/arbiter.c).
loop_s() { awk -v e="$(field "$1" elapsed_s)" 'BEGIN { printf "%.3f", 0.30 * e }'; }
close_to() { # desc stored measured pct
  if awk -v a="$2" -v b="$3" -v p="$4" 'BEGIN { exit !(a != "" && b > 0 && a >= b * (1 - p / 100) && a <= b * (1 + p / 100) + 0.1) }'
  then ok "$1 ($2 s stored, $3 s charged)"; else not_ok "$1" "stored '$2' s, the schedule charges $3 s (± $4 %)"; fi
}

# ---- the control: root's --core 30 job beside the same traffic without accounting (two of
# nobody's processes sending HELLOs back to back: on a 2-core machine the flooders' CPU alone
# costs the job a few points) ----
vgpu run --core 30 --name control -- core_loop -t 4 -d 1 -s 8 -k $K >"$T_DIR/c.out" 2>&1 &
a=$!
as_nobody acct_flood hellos 4 >/dev/null 2>&1 &
f1=$!
as_nobody acct_flood hellos 4 >/dev/null 2>&1
wait $a $f1
control=$(late_pct "$(cat "$T_DIR/c.out")")

# ---- the flood: records of made-up jobs, as fast as nobody can send them ----
vgpu run --core 30 --name flooded -- core_loop -t 4 -d 1 -s 8 -k $K >"$T_DIR/a.out" 2>&1 &
a=$!
as_nobody acct_flood records 4 >"$T_DIR/f1.out" 2>&1 &
f1=$!
as_nobody acct_flood records 4 >"$T_DIR/f2.out" 2>&1
wait $a $f1
at_least "beside nobody's accounting flood, root's --core 30 job keeps its share: no more than 3 points below" \
  "$(late_pct "$(cat "$T_DIR/a.out")")" "$control" 3 "$(cat "$T_DIR/a.out") / $(cat "$T_DIR/f1.out" "$T_DIR/f2.out")"
close_to "... and its record is there, its GPU time within 5 % of what the schedule charges" \
  "$(rec_s flooded)" "$(loop_s "$(cat "$T_DIR/a.out")")" 5
sent=$(( $(field "$(cat "$T_DIR/f1.out")" requests) + $(field "$(cat "$T_DIR/f2.out")" requests) ))
kept=$(q "SELECT COUNT(*) FROM jobs WHERE uid = $NUID")
check "nobody's flood is cut to its rate: at most 400 + 50 a second of 8 s kept ($kept kept of $sent requests)" \
  test "$kept" -le 800
assert_eq "... and no record of it ends in the future (ends ten years on are stored as now)" 0 \
  "$(q "SELECT COUNT(*) FROM jobs WHERE end_ns > (strftime('%s','now') + 120) * 1000000000")"

# ---- its own totals, asked back to back ----
as_nobody acct_flood totals 5 >"$T_DIR/t1.out" 2>&1 &
t1=$!
as_nobody acct_flood totals 5 >"$T_DIR/t2.out" 2>&1 &
t2=$!
hello=$(acct_flood hello)
h=$(field "$hello" hello_ms)
if [ "$(field "$hello" rc)" -ge 0 ] 2>/dev/null && awk -v h="$h" 'BEGIN { exit !(h < 1000) }'; then
  ok "while nobody asks its totals back to back, root's HELLO is answered in < 1 s ($h ms)"
else not_ok "while nobody asks its totals back to back, root's HELLO is answered in < 1 s" "$hello"; fi
under_1s "... root's vgpu daemon --check in < 1 s" vgpu daemon --check
under_1s "... root's vgpu acct --totals in < 1 s" vgpu acct --totals
wait $t1 $t2
check "... and nobody's totals were answered meanwhile ($(cat "$T_DIR/t1.out"))" \
  test "$(field "$(cat "$T_DIR/t1.out")" taken)" -gt 0

# ---- nobody's job sends its own record first, saying 0 GPU-seconds ----
run as_nobody vgpu run --core 30 --name liar -- sh -c \
  "core_loop -t 2 -k 2000 -s 8 >/dev/null && acct_forge --zero \"\$(basename \"\$VGPU_REGION\" .region)\" liar $UUID"
assert_contains "a job's own record sent before its vgpu run's is refused" "zero=-1" "$out"
assert_eq "... and the one stored is its vgpu run's, with the schedule's GPU time" "1 schedule" \
  "$(q "SELECT COUNT(*), MIN(g.gpu_time_source) FROM jobs j JOIN job_gpus g ON g.job_id = j.id
        WHERE j.name = 'liar' AND g.gpu_ns > 500000000")"

# ---- nobody sends a record with the id of root's running job ----
vgpu run --core 30 --name victim -- core_loop -t 6 -d 1 -s 8 -k $K >"$T_DIR/v.out" 2>&1 &
v=$!
# Running: its command started, so its vgpu run has named it to the daemon (and it has not ended).
victim_id() { vgpu ps --json | jq -e -r '.jobs[] | select(.name == "victim" and .state == "running") | .id'; }
wait_until 20 victim_id
vid=$(victim_id)
run as_nobody acct_forge "$vid" 0 root
assert_contains "a record with the id of root's running job, sent by nobody, is refused" "forged=-1" "$out"
check "... while the job still ran" victim_id
wait $v
assert_eq "... and root's job's record is root's" "0 root victim" \
  "$(q "SELECT uid, user, name FROM jobs WHERE id = '$vid'")"
close_to "... with its GPU time within 5 % of what the schedule charges" "$(rec_s victim)" "$(loop_s "$(cat "$T_DIR/v.out")")" 5

done_testing
