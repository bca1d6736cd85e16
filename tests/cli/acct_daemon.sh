#!/usr/bin/env bash
# Accounting through the arbiter (DESIGN.md decision 12, cmd/daemon/acct.c): with vgpu daemon
# answering, every user's jobs are recorded in its one root-owned database; each user reads only
# their own records, root reads all; the user is the sender's, whatever the record says; a job that
# ends while no daemon answers goes to its user's own store, is shown from there, and is handed to
# the daemon (once) when one answers again.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the other user is nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
id nobody >/dev/null 2>&1 || skip_all "needs a user 'nobody'"

user_dirs
ADIR=$(mktemp -d /tmp/vgpu-acctdb.XXXXXX); chmod 0755 "$ADIR"
ADB=$ADIR/db/acct.db
NSTATE=/tmp/vgpu-acct-nobody-$$
daemon=""
trap 'kill $daemon 2>/dev/null; rm -rf "$ADIR" "$NSTATE"; t_cleanup' EXIT
NUID=$(id -u nobody)
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR VGPU_STATE_DIR=$NSTATE "$@"
}
start_daemon() {
  vgpu daemon --acct-db "$ADB" 2>>"$T_DIR/daemon.log" &
  daemon=$!
  wait_until 20 vgpu daemon --check
}
names() { jq -r '[.jobs[].name] | sort | join(" ")'; }
q() { sqlite3 "$ADB" "$1"; }

# ---- the option ----
run vgpu daemon --acct-db "$ADB" --acct-db "$ADB"
assert_rc "--acct-db given twice: 2" 2
assert_contains "... saying so" "--acct-db is given twice" "$err"
run vgpu daemon --acct-db relative.db
assert_rc "--acct-db takes an absolute path only: 2" 2

# ---- both users' jobs in the daemon's database ----
start_daemon
must vgpu run --name rootjob -- true
must as_nobody vgpu run --name nobodyjob -- true
must vgpu run --user nobody --name asnobody -- true
assert_eq "root's and nobody's jobs are in the daemon's database, each under its user" \
  "asnobody|$NUID|nobody|1 nobodyjob|$NUID|nobody|0 rootjob|0|root|0" \
  "$(q "SELECT name, uid, user, run_as_user FROM jobs ORDER BY name" | tr '\n' ' ' | sed 's/ $//')"
assert_eq "... and not in their own stores" "" "$(ls "$VGPU_STATE_DIR/acct.db" "$NSTATE/acct.db" 2>/dev/null)"
assert_eq "the database is root's, 0600, in root's 0755 directory" "root 600 root 755" \
  "$(stat -c '%U %a' "$ADB") $(stat -c '%U %a' "$ADIR/db")"
run as_nobody cat "$ADB"
check "nobody cannot read the database file" test "$rc" -ne 0
run as_nobody vgpu acct --json
assert_eq "nobody's vgpu acct shows nobody's jobs only (with the one root ran as nobody)" "asnobody nobodyjob" \
  "$(printf '%s' "$out" | names)"
run as_nobody vgpu acct --totals --json
assert_eq "... and nobody's totals are nobody's only" "$NUID" "$(printf '%s' "$out" | jq -r '[.totals[].uid] | unique | join(" ")')"
run as_nobody vgpu acct --json --user root
assert_rc "nobody asking for root's records is refused" 6
run vgpu acct --json
assert_eq "root's vgpu acct shows every user's" "asnobody nobodyjob rootjob" "$(printf '%s' "$out" | names)"
run vgpu acct --json --user nobody
assert_eq "root's vgpu acct --user nobody: nobody's" "asnobody nobodyjob" "$(printf '%s' "$out" | names)"

# ---- a record that names another user ----
run as_nobody acct_forge f0f0f0f0f0f0 0 root
assert_eq "nobody's record that says it is root's is written (1), a damaged one refused" "forged=1 damaged=-22" "$out"
assert_eq "... under nobody, not root, and not as run by root (--user)" "$NUID|nobody|0" \
  "$(q "SELECT uid, user, run_as_user FROM jobs WHERE id = 'f0f0f0f0f0f0'")"
run vgpu acct --json --user root
assert_eq "root's records do not show it" "rootjob" "$(printf '%s' "$out" | names)"

# ---- paging: more records than one reply holds ----
q "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
   INSERT INTO jobs SELECT printf('b%011d', i), 'bulk', $NUID, 'nobody', 'x', i, 1000 + i, 0, 0, 0, 0, 0, 0 FROM n;
   INSERT INTO job_gpus(job_id, ordinal, uuid, nvml_index, mem_limit_bytes, core_limit, core_policy, priority,
     oversub_device_bytes, gpu_ns, throttled_ns, mem_peak_bytes, mem_byte_seconds, gpu_time_source)
   SELECT id, 0, 'GPU-bulk', 0, 0, 0, 'hard', 0, 0, 1000000000, 0, 0, 0, 'schedule' FROM jobs WHERE name = 'bulk'; COMMIT;"
run as_nobody vgpu acct --json --name bulk
assert_eq "300 records come over several replies, each once, in order" "300 300 true" \
  "$(printf '%s' "$out" | jq -r '[(.jobs | length), ([.jobs[].id] | unique | length), ([.jobs[].end_time_ns] == ([.jobs[].end_time_ns] | sort))] | join(" ")')"
assert_eq "... and their totals: 300 jobs, 300 GPU-seconds" "300 300" \
  "$(as_nobody vgpu acct --totals --json --name bulk | jq -r '.totals[0] | "\(.jobs) \(.gpu_hours * 3600 | round)"')"

# ---- a job whose daemon was killed before it ended: the user's own store, then handed over ----
FLAG=$ADIR/flag
as_nobody vgpu run --name afterkill -- sh -c "until [ -e $FLAG ]; do sleep 0.05; done" >/dev/null 2>&1 &
job=$!
nobody_runs() { as_nobody vgpu ps 2>/dev/null | grep -q "$1"; }
wait_until 20 nobody_runs afterkill
kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=""
wait_until 20 sh -c '! vgpu daemon --check'
touch "$FLAG"
wait "$job"
assert_eq "with the daemon gone, the job's record is in nobody's own store" "1" \
  "$(sqlite3 "$NSTATE/acct.db" "SELECT count(*) FROM jobs WHERE name = 'afterkill'")"
run as_nobody vgpu acct --json --name afterkill
assert_eq "... and nobody's vgpu acct shows it" "afterkill" "$(printf '%s' "$out" | names)"
start_daemon
run as_nobody vgpu acct --json --name afterkill
assert_eq "with the daemon back, it is shown once" "afterkill" "$(printf '%s' "$out" | names)"
assert_eq "... from the daemon's database now (handed over), no longer from the own store" "1 0" \
  "$(q "SELECT count(*) FROM jobs WHERE name = 'afterkill'") $(sqlite3 "$NSTATE/acct.db" "SELECT count(*) FROM jobs")"
run as_nobody vgpu acct --json
assert_eq "nobody's records are all there, each once" "afterkill asnobody forged nobodyjob" \
  "$(printf '%s' "$out" | jq -r '[.jobs[].name | select(. != "bulk")] | sort | join(" ")')"
run vgpu acct --json --name afterkill
assert_eq "root sees it too" "afterkill" "$(printf '%s' "$out" | names)"

# ---- the lent memory in the daemon's totals (issue 37) ----
# A borrower's requested and borrowed GiB-hours come over the wire in the totals (struct
# vgpu_acct_total, its size in the request's a[2]): root's totals (the kept aggregates) are the
# sums of root's records. On the code before, the totals had no such figure (null).
must vgpu run --name lentd --mem 1G:8G -- oversub_probe alloc 3G sleep 500
lent_sums() { jq -r "$1"' | "\(.mem_requested_gib_hours * 3600 * 1073741824 | round) \(.mem_borrowed_gib_hours * 3600 * 1073741824 | round)"'; }
want=$(vgpu acct --json --user root | lent_sums '{mem_requested_gib_hours: ([.jobs[].gpus[].mem_requested_gib_hours] | add),
  mem_borrowed_gib_hours: ([.jobs[].gpus[].mem_borrowed_gib_hours] | add)}')
check "root's records through the daemon: a borrower's borrowed byte-seconds (${want#* })" test "${want#* }" -gt 0
assert_eq "... and root's totals through the daemon hold the same requested and borrowed sums" "$want" \
  "$(vgpu acct --totals --json --user root | lent_sums '.users[0]')"
run acct_flood totals-as 0
assert_eq "a totals request of an older vgpu (no size of its totals) is refused, saying why" \
  "rc=-71 msg=this arbiter is another vgpu's version (its accounting totals differ): use the same vgpu" "$out"

done_testing
