#!/usr/bin/env bash
# vgpu acct and the record every job leaves (issue 28): a capped job's GPU time, an idle job, a
# killed command, a vgpu run killed with -9 (recovered), a database locked by another writer, a
# full disk, pruning, schema migrations from version-1 and version-6 fixtures, and two users' stores.
source "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jsondoc.lib"

command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
DB=$VGPU_STATE_DIR/acct.db
jq_rec() { vgpu acct --json | jq -r "$1"; }

# ---- a capped job: 30 % of 4 s is 1.2 GPU-seconds (the schedule's measurement) ----
must vgpu run --core 30 --name capped -- core_loop -t 4 -k 2000 -s 8
run vgpu acct --json --name capped
g=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_seconds')
if awk -v g="$g" 'BEGIN { exit !(g >= 1.0 && g <= 1.4) }'; then ok "--core 30 for 4 s: $g GPU-seconds (1.2 ± 0.2)"
else not_ok "--core 30 for 4 s: 1.2 ± 0.2 GPU-seconds" "$out"; fi
assert_eq "its GPU time comes from the schedule, its exit status 0, its command argv[0]" "schedule 0 core_loop" \
  "$(printf '%s' "$out" | jq -r '[.jobs[0].gpus[0].gpu_time_source, .jobs[0].exit_code, .jobs[0].command] | join(" ")')"
peak=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].mem_peak_bytes'); gib=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].mem_gib_hours')
# core_loop holds 512 MiB (its buffers) for about 4 s: 2 GiB-seconds, 0.00056 GiB-hours.
if [ "$peak" -gt 0 ] && awk -v g="$gib" -v p="$peak" 'BEGIN { e = p / 1073741824 * 4 / 3600; exit !(g > e * 0.7 && g < e * 1.3) }'
then ok "peak memory $peak B and $gib GiB-hours (its memory over its 4 s)"; else not_ok "peak memory and GiB-hours" "$out"; fi

# ---- an idle job: no GPU time ----
must vgpu run --core 30 --name idle -- sleep 0.5
assert_eq "an idle capped job: 0 GPU-seconds" "0" "$(vgpu acct --json --name idle | jq -r '.jobs[0].gpus[0].gpu_seconds')"
must vgpu run --name uncapped -- true
assert_eq "an uncapped job: GPU time not measured (null, source none)" "null none" \
  "$(vgpu acct --json --name uncapped | jq -r '.jobs[0].gpus[0] | "\(.gpu_seconds) \(.gpu_time_source)"')"

# ---- a command killed by a signal ----
run vgpu run --name killed -- sh -c 'kill -KILL $$'
assert_rc "a killed command: vgpu run dies by its signal" 137
assert_eq "its record says SIGKILL, no exit code" "9 null" \
  "$(vgpu acct --json --name killed | jq -r '.jobs[0] | "\(.exit_signal) \(.exit_code)"')"
run vgpu acct --name killed
assert_contains "the table says SIGKILL" "SIGKILL" "$out"

# ---- vgpu run killed with -9: the next listing writes the record from the region ----
vgpu run --name orphan -- sleep 300 & vr=$!
child() { c=$(cat "/proc/$vr/task/$vr/children" 2>/dev/null | awk '{ print $1 }'); [ -n "$c" ]; }
wait_until 10 child
wait_until 10 sh -c "vgpu ps | grep -q orphan"
kill -9 "$vr"; wait "$vr" 2>/dev/null; kill "$c"
wait_until 10 sh -c "! kill -0 $c 2>/dev/null"
assert_eq "not recorded while nothing listed the jobs" "0" "$(sqlite3 "$DB" "SELECT count(*) FROM jobs WHERE name = 'orphan'")"
run vgpu acct --json --name orphan
assert_eq "vgpu acct recovers it: recovered, end approximate, status unknown" "true true null" \
  "$(printf '%s' "$out" | jq -r '.jobs[0] | "\(.recovered) \(.end_time_approximate) \(.exit_code)"')"
run vgpu acct --name orphan
assert_contains "the table says so" "end approximate" "$out"
assert_eq "and the region is gone" "" "$(vgpu ps | grep orphan)"

# ---- a database locked by another writer (sqlite3 holding a write transaction) ----
mkfifo "$T_DIR/lock.in"
sqlite3 "$DB" <"$T_DIR/lock.in" & holder=$!
exec 7>"$T_DIR/lock.in"
echo "BEGIN IMMEDIATE; INSERT INTO meta VALUES('lock', 'held');" >&7
wait_until 10 sh -c "! sqlite3 -cmd '.timeout 0' '$DB' 'BEGIN IMMEDIATE' 2>/dev/null"
run vgpu run --name locked -- sh -c 'exit 3'
assert_rc "a locked database: vgpu run still exits with the command's status" 3
assert_contains "and says the record is kept" "stays in the job's region" "$err"
echo "ROLLBACK;" >&7; exec 7>&-; wait "$holder"
run vgpu acct --json --name locked
assert_eq "the next vgpu acct writes it, with the exact end and status" "true false 3" \
  "$(printf '%s' "$out" | jq -r '.jobs[0] | "\(.recovered) \(.end_time_approximate) \(.exit_code)"')"

# ---- pruning ----
before=$(sqlite3 "$DB" "SELECT count(*) FROM jobs")
sqlite3 "$DB" "UPDATE jobs SET end_ns = end_ns - 3 * 86400000000000 WHERE name = 'idle'"
run vgpu acct --retention 2
assert_contains "--retention 2 removes the record that ended 3 days ago" "1 older record removed" "$err"
assert_eq "and only it, with its GPUs" "$((before - 1)) 0" \
  "$(sqlite3 "$DB" "SELECT count(*) FROM jobs") $(sqlite3 "$DB" "SELECT count(*) FROM job_gpus WHERE job_id NOT IN (SELECT id FROM jobs)")"
assert_eq "--retention is kept in the database" "2" "$(sqlite3 "$DB" "SELECT value FROM meta WHERE key = 'retention_days'")"
run vgpu acct --retention 0
assert_rc "--retention 0: a usage error" 2

# ---- queries ----
run vgpu acct --since -1h --csv
assert_eq "--csv: a header and one line per job and GPU" "$(( $(sqlite3 "$DB" 'SELECT count(*) FROM job_gpus') + 1 ))" \
  "$(printf '%s\n' "$out" | wc -l)"
run vgpu acct --until -1h --json
assert_eq "--until -1h: nothing ended before" "0" "$(printf '%s' "$out" | jq '.jobs | length')"
id=$(vgpu acct --json --name capped | jq -r '.jobs[0].id')
assert_eq "-j with the start of an id" "capped" "$(vgpu acct --json -j "${id:0:6}" | jq -r '.jobs[0].name')"
run vgpu acct --totals --json
assert_eq "--totals: one row for root on GPU 0, all its jobs" "$(sqlite3 "$DB" 'SELECT count(*) FROM job_gpus')" \
  "$(printf '%s' "$out" | jq '.totals[0].jobs')"
check_doc "vgpu acct --json" "$(vgpu acct --json)"
check_doc "vgpu acct --totals --json" "$out"
run vgpu acct --since yesterday
assert_rc "--since yesterday: a usage error" 2
assert_contains "saying which forms there are" "-7d" "$err"
run vgpu acct --gpu 7 --json
assert_eq "--gpu 7: no job used it" "0" "$(printf '%s' "$out" | jq '.jobs | length')"
check "the database is 0600 and whole" sh -c "[ \"\$(stat -c %a '$DB')\" = 600 ] && [ \"\$(sqlite3 '$DB' 'PRAGMA integrity_check')\" = ok ]"

# ---- --totals adds up hours and days (schema 4), and says what the records add up to ----
# 2000 records of 3 users on 2 GPUs, one ending every 7 minutes (some 9 days), then some moved
# and removed by hand; every window's totals must equal the records' own sums, the lent memory's
# requested and borrowed GiB-hours too (schema 7; before it, --totals had neither: null).
export VGPU_STATE_DIR=$T_DIR/periods
mkdir -m 0700 "$VGPU_STATE_DIR"
must vgpu run --name seed -- true
PDB=$VGPU_STATE_DIR/acct.db
sqlite3 "$PDB" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
  INSERT INTO jobs(id, name, uid, user, command, start_ns, end_ns, exit_code, exit_signal, run_as_user)
    SELECT printf('p%011d', i), 'p', 7000 + i % 3, 'u' || (i % 3), 'x', end_ns - i * 420000000000 - 5,
    end_ns - i * 420000000000, 0, 0, 0 FROM n, (SELECT end_ns FROM jobs LIMIT 1);
  INSERT INTO job_gpus(job_id, ordinal, uuid, nvml_index, mem_limit_bytes, core_limit, core_policy, priority,
    oversub_device_bytes, gpu_ns, throttled_ns, mem_peak_bytes, mem_byte_seconds, gpu_time_source, energy_mj,
    mem_request_bytes, mem_requested_byte_seconds, mem_borrowed_byte_seconds)
  SELECT id, 0, 'GPU-p' || (rowid % 2), rowid % 2, 0, 30, 'hard', 0, 0, rowid * 1000000, 0, 0, rowid * 1.5, 'schedule',
    CASE WHEN rowid % 4 = 0 THEN NULL ELSE rowid END, 1073741824, rowid * 2.25, (rowid % 3) * 0.75
    FROM jobs WHERE name = 'p';
  PRAGMA foreign_keys = ON;
  UPDATE jobs SET end_ns = end_ns - 2 * 86400000000000 WHERE name = 'p' AND rowid % 5 = 0;
  UPDATE job_gpus SET gpu_ns = gpu_ns + 7, uuid = 'GPU-q' WHERE rowid % 11 = 0;
  UPDATE job_gpus SET mem_borrowed_byte_seconds = mem_borrowed_byte_seconds + 0.5 WHERE rowid % 17 = 0;
  DELETE FROM jobs WHERE rowid % 13 = 0;"
now=$(date +%s)
sums() { # SINCE UNTIL (seconds; 0: open): the records' own sums, as --totals --json shows them below
  sqlite3 "$PDB" "SELECT j.uid, g.uuid, count(*), sum(g.gpu_ns), CAST(round(2 * sum(g.mem_byte_seconds)) AS INTEGER),
    sum(coalesce(g.energy_mj, 0)), count(g.energy_mj) > 0, CAST(round(4 * sum(g.mem_requested_byte_seconds)) AS INTEGER),
    CAST(round(4 * sum(g.mem_borrowed_byte_seconds)) AS INTEGER) FROM jobs j JOIN job_gpus g ON g.job_id = j.id
    WHERE ($1 = 0 OR j.end_ns >= $1 * 1000000000) AND ($2 = 0 OR j.end_ns < $2 * 1000000000)
    GROUP BY 1, 2 ORDER BY 1, 2" | tr '\n' ' '
}
totals() { # SINCE UNTIL
  local a=(); [ "$1" = 0 ] || a+=(--since "@$1"); [ "$2" = 0 ] || a+=(--until "@$2")
  vgpu acct --totals --json "${a[@]}" | jq -r '.totals[] | [.uid, .gpu_uuid, .jobs, (.gpu_hours * 3600e9 | round),
    (.mem_gib_hours * 3600 * 1073741824 * 2 | round), ((.energy_joules // 0) * 1000 | round), (.energy_joules != null),
    (.mem_requested_gib_hours * 3600 * 1073741824 * 4 | round), (.mem_borrowed_gib_hours * 3600 * 1073741824 * 4 | round)]
    | map(tostring) | join("|")' | sed 's/|true|/|1|/; s/|false|/|0|/' | tr '\n' ' '
}
for w in "0 0" "$((now - 3 * 86400 - 1234)) 0" "$((now - 5 * 86400 + 77)) $((now - 86400 - 999))" \
         "$((now - 7000)) $((now - 1000))" "0 $((now - 4 * 86400 + 3601))"; do
  assert_eq "--totals over [${w/ /, }) equals the records' sums" "$(sums $w)" "$(totals $w)"
done
export VGPU_STATE_DIR=$T_DIR/state

# ---- a full disk: the job's status is kept, the record waits in the region ----
if [ "$(id -u)" = 0 ] && mkdir -p "$T_DIR/small" && mount -t tmpfs -o size=2m,mode=0700 tmpfs "$T_DIR/small"; then
  export VGPU_STATE_DIR=$T_DIR/small/state
  must vgpu run --name first -- true
  vgpu run --name full -- wait_until 30 test -e "$T_DIR/go" & vr=$!
  wait_until 10 sh -c "vgpu ps | grep -q full"
  dd if=/dev/zero of="$T_DIR/small/filler" bs=64k 2>/dev/null
  touch "$T_DIR/go"; wait "$vr"; vrc=$?
  assert_eq "a full disk: vgpu run exits with the command's status" 0 "$vrc"
  rm -f "$T_DIR/small/filler"
  run vgpu acct --json
  assert_eq "the earlier record is there, and the next vgpu acct writes the job's" "first:false full:true" \
    "$(printf '%s' "$out" | jq -r '[.jobs[] | "\(.name):\(.recovered)"] | join(" ")')"
  check "the database is whole" sh -c "[ \"\$(sqlite3 '$VGPU_STATE_DIR/acct.db' 'PRAGMA integrity_check')\" = ok ]"
  umount "$T_DIR/small"
  export VGPU_STATE_DIR=$T_DIR/state
else
  skip "a full disk" "needs root to mount a small tmpfs"; skip "a full disk: records" "-"; skip "a full disk: whole" "-"
fi

# ---- a database of schema version 1 is migrated ----
export VGPU_STATE_DIR=$T_DIR/old
mkdir -m 0700 "$VGPU_STATE_DIR"
sqlite3 "$VGPU_STATE_DIR/acct.db" <"$VGPU_SRC/tests/cli/acct_v1.sql"; chmod 600 "$VGPU_STATE_DIR/acct.db"
run vgpu acct --json
assert_eq "version 1's record reads back, its GPU time marked as the schedule's, energy unknown" \
  "old-train 50 schedule null false" \
  "$(printf '%s' "$out" | jq -r '.jobs[0] | "\(.name) \(.gpus[0].gpu_seconds) \(.gpus[0].gpu_time_source) \(.gpus[0].energy_joules) \(.recovered)"')"
assert_eq "the schema is now version 7" "7" "$(sqlite3 "$VGPU_STATE_DIR/acct.db" "SELECT value FROM meta WHERE key = 'schema_version'")"
# Version 6 (lent memory): an old record's request is its limit, promised over its life, nothing borrowed.
assert_eq "... an old record's request is its memory limit, promised over its duration, nothing borrowed" "true true 0" \
  "$(printf '%s' "$out" | jq -r '.jobs[0] | (.gpus[0].mem_limit_bytes // 0) as $l | "\(.gpus[0].mem_request_bytes == .gpus[0].mem_limit_bytes) \((.gpus[0].mem_requested_gib_hours * 1073741824 * 3600 - $l * .duration_seconds) | fabs < 1e6) \(.gpus[0].mem_borrowed_gib_hours)"')"
assert_eq "... its totals by hour and day hold the old record (--totals adds them up)" "1 50 1|1" \
  "$(vgpu acct --totals --json | jq -r '.totals[0] | "\(.jobs) \(.gpu_hours * 3600 | round)"') $(sqlite3 "$VGPU_STATE_DIR/acct.db" \
    "SELECT (SELECT sum(jobs) FROM totals_by_hour), (SELECT sum(jobs) FROM totals_by_day)")"
assert_eq "... its lent memory too: 8 GiB requested over its 100 s, nothing borrowed" "800 0" \
  "$(vgpu acct --totals --json | jq -r '.totals[0] | "\(.mem_requested_gib_hours * 3600 | round) \(.mem_borrowed_gib_hours)"')"
must vgpu run --name after -- true
assert_eq "and takes new records" "old-train after" "$(vgpu acct --json | jq -r '[.jobs[].name] | join(" ")')"
chmod 644 "$VGPU_STATE_DIR/acct.db"
run vgpu acct
assert_rc "a database others can read is refused" 6
assert_contains "saying what to do" "chmod 600" "$err"
export VGPU_STATE_DIR=$T_DIR/state

# ---- a database of schema version 6 (lent memory in the records, not in the totals) ----
# Written by the vgpu before version 7 (acct_v6.sql): two borrowers and a --mem 2G job on 2 GPUs.
# Migrated in place, its totals by hour and day are added up again with the lent memory: --totals
# gives the records' sums (bytes x seconds: GPU 0 1184952094 + 648461164 + 12599776 requested,
# 2699875173 + 810155112 borrowed; GPU 1 the pair's 648461164 requested). On the code before,
# --totals had no such figure (null).
export VGPU_STATE_DIR=$T_DIR/v6
mkdir -m 0700 "$VGPU_STATE_DIR"
sqlite3 "$VGPU_STATE_DIR/acct.db" <"$VGPU_SRC/tests/cli/acct_v6.sql"; chmod 600 "$VGPU_STATE_DIR/acct.db"
# its records end now (moved by version 6's own triggers), within any retention
sqlite3 "$VGPU_STATE_DIR/acct.db" "UPDATE jobs SET start_ns = start_ns + (strftime('%s','now') * 1000000000 -
  (SELECT max(end_ns) FROM jobs)), end_ns = end_ns + (strftime('%s','now') * 1000000000 - (SELECT max(end_ns) FROM jobs))"
lent_bytes() { jq -r "$1"' | "\(.mem_requested_gib_hours * 3600 * 1073741824 | round) \(.mem_borrowed_gib_hours * 3600 * 1073741824 | round)"'; }
run vgpu acct --totals --json
assert_rc "vgpu acct --totals reads a version 6 database" 0
assert_eq "its totals: the records' requested and borrowed byte-seconds per GPU" \
  "1846013034 3510030285 | 648461164 0" \
  "$(lent_bytes '.totals[0]' <<<"$out") | $(lent_bytes '.totals[1]' <<<"$out")"
assert_eq "... and the user's, over both GPUs" "2494474198 3510030285" "$(lent_bytes '.users[0]' <<<"$out")"
assert_eq "the schema is version 7, its records as they were (the lent one's 2699875173 B-s borrowed)" "7 2699875173" \
  "$(sqlite3 "$VGPU_STATE_DIR/acct.db" "SELECT value FROM meta WHERE key = 'schema_version'") $(vgpu acct --json --name lent \
     | jq -r '.jobs[0].gpus[0].mem_borrowed_gib_hours * 3600 * 1073741824 | round')"
assert_eq "its totals by day hold it (kept by the triggers, not added up from the records)" "2494474198|3510030285" \
  "$(sqlite3 "$VGPU_STATE_DIR/acct.db" "SELECT CAST(round(sum(mem_requested_byte_seconds)) AS INTEGER),
     CAST(round(sum(mem_borrowed_byte_seconds)) AS INTEGER) FROM totals_by_day")"
# A borrower's record written after the migration is added by version 7's triggers.
must vgpu run --name after --mem 1G:4G -- oversub_probe alloc 2G sleep 300
recs() { vgpu acct --json | jq -r '[.jobs[].gpus[]] | group_by(.uuid) | map("\(.[0].uuid) \([.[].mem_requested_gib_hours] | add * 3600 * 1073741824 | round) \([.[].mem_borrowed_gib_hours] | add * 3600 * 1073741824 | round)") | join(" ")'; }
tots() { vgpu acct --totals --json | jq -r '.totals | sort_by(.gpu_uuid) | map("\(.gpu_uuid) \(.mem_requested_gib_hours * 3600 * 1073741824 | round) \(.mem_borrowed_gib_hours * 3600 * 1073741824 | round)") | join(" ")'; }
assert_eq "... so --totals stays the records' sums on every GPU, the new one's borrowing in" "$(recs)" "$(tots)"
b=$(vgpu acct --json --name after | jq -r '.jobs[0].gpus[0].mem_borrowed_gib_hours * 3600 * 1073741824 | round')
check "... which borrowed ($b B-s)" test "${b:-0}" -gt 0
export VGPU_STATE_DIR=$T_DIR/state

# ---- two users: each reads their own records only ----
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  user_dirs
  NB=$(mktemp -d /tmp/vgpu-acct-nobody.XXXXXX); chown nobody "$NB"; chmod 0700 "$NB"; T_USER_DIRS+=("$NB")
  as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env VGPU_STATE_DIR="$NB" "$@"; }
  run as_nobody vgpu run --name nobodys -- true
  assert_rc "nobody runs a job" 0
  run as_nobody vgpu acct --json
  assert_eq "nobody's vgpu acct: nobody's job only" "nobodys:65534" \
    "$(printf '%s' "$out" | jq -r '[.jobs[] | "\(.name):\(.uid)"] | join(" ")')"
  run as_nobody vgpu acct --user root
  assert_rc "nobody's vgpu acct --user root: refused" 6
  run setpriv --reuid=nobody --regid=nogroup --clear-groups sqlite3 "$DB" "SELECT count(*) FROM jobs"
  check "nobody cannot open root's database" test "$rc" != 0
  run vgpu acct --json
  assert_not_contains "root's vgpu acct does not show nobody's job" "nobodys" "$out"
else
  skip "two users" "needs root and setpriv"
fi
done_testing
