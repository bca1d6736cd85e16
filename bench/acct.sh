#!/usr/bin/env bash
# Accounting (issue 28): what writing a record adds to a job's end, and vgpu acct --totals over
# 100 000 records (target < 200 ms; through the daemon also 1 000 000, with vgpu metrics: < 1 s), ending within 28 hours or spread over 390 days (the totals
# add up days: schema v4, lib/core/acct/store.c), on the simulated GPU. Prints a table.
#   VGPU_BUILD=build VGPU_SRC=. bash bench/acct.sh
set -u
B=${VGPU_BUILD:?}; S=${VGPU_SRC:?}
command -v sqlite3 >/dev/null || { echo "bench/acct.sh: needs sqlite3 (make deps)" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export PATH="$B:$B/fakegpu:$B/tests/progs:$PATH" LD_LIBRARY_PATH=$B/fakegpu VGPU_STATE_DIR=$T/state \
  VGPU_MACHINE_DIR=$T/machine VGPU_FAKE_STATE=$T/fake.state VGPU_FAKE_SCENARIO=$S/tests/fakegpu/scenarios/h100.json
mkdir -m 0700 "$T/state"; mkdir -m 1777 "$T/machine"
ms() { local a=${EPOCHREALTIME/./}; "$@" >/dev/null 2>&1; echo $(( (${EPOCHREALTIME/./} - a) )); }
med() { sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] / 1000 }'; }

# A record's cost at the job's end: vgpu run -- true with the record, against the same with the
# database unusable (a directory in its place: the open fails at once, nothing is written).
vgpu run -- true
for i in $(seq 20); do ms vgpu run -- true; done | med > "$T/with"
rm -f "$T/state/acct.db"*; mkdir "$T/state/acct.db"
for i in $(seq 20); do ms vgpu run -- true; done | med > "$T/without"
rm -rf "$T/state/acct.db" "$T/state/jobs"/*

# 100 000 records of 10 users on 8 GPUs, written as vgpu would (one job, then copies in SQL).
vgpu run --core 50 -- true
# fill DB [SPACING_S]: one job ending every SPACING_S seconds before the first (default 1: all
# in the last 28 hours; 337: over 390 days, the most days --totals adds up, schema v4).
fill() { sqlite3 "$1" "
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${N:-100000})
  INSERT INTO jobs SELECT printf('%012x', i), 'job' || i, 1000 + i % 10, 'user' || (i % 10), 'train',
    start_ns - i * ${2:-1} * 1000000000, end_ns - i * ${2:-1} * 1000000000, 0, 0, 0, 0, 0
    FROM n, (SELECT * FROM jobs LIMIT 1);
  INSERT INTO job_gpus SELECT j.id, 0, 'GPU-' || (abs(random()) % 8), abs(random()) % 8, 0, 50, 'hard', 0, 0,
    1000000000, 0, 1073741824, 3600.0, 'schedule', NULL, NULL FROM jobs j WHERE j.name LIKE 'job%';"; }
fill "$T/state/acct.db"
for i in $(seq 5); do ms vgpu acct --totals; done | med > "$T/totals"
for i in $(seq 5); do ms vgpu acct --totals --since -1d; done | med > "$T/totals_day"
rows=$(vgpu acct --totals --csv | tail -n +2 | wc -l)
rm -f "$T/state/acct.db"*
vgpu run --core 50 -- true
fill "$T/state/acct.db" 337
for i in $(seq 5); do ms vgpu acct --totals; done | med > "$T/totals_year"
for i in $(seq 5); do ms vgpu acct --totals --since -7d; done | med > "$T/totals_week"

# The same through the arbiter (root only: vgpu daemon --acct-db): a record sent to the daemon
# at the job's end, and --totals answered from its database (root's: every user's records).
if [ "$(id -u)" = 0 ]; then
  rm -rf "$T/state/acct.db"*
  mkdir -m 0700 "$T/adb"
  vgpu daemon --acct-db "$T/adb/acct.db" 2>/dev/null & dpid=$!
  for i in $(seq 100); do vgpu daemon --check >/dev/null 2>&1 && break; sleep 0.05; done
  vgpu run -- true
  for i in $(seq 20); do ms vgpu run -- true; done | med > "$T/with_daemon"
  vgpu run --core 50 -- true
  fill "$T/adb/acct.db"
  for i in $(seq 5); do ms vgpu acct --totals; done | med > "$T/totals_daemon"
  drows=$(vgpu acct --totals --csv | tail -n +2 | wc -l)
  kill "$dpid"; wait "$dpid" 2>/dev/null
  # 1 000 000 records over a year (one every 30 s), through the daemon's accounting thread: root's
  # --totals and vgpu metrics (issue 35: < 1 s).
  mkdir -m 0700 "$T/adb1m"
  vgpu daemon --acct-db "$T/adb1m/acct.db" 2>/dev/null & dpid=$!
  for i in $(seq 100); do vgpu daemon --check >/dev/null 2>&1 && break; sleep 0.05; done
  vgpu run --core 50 -- true
  N=1000000 fill "$T/adb1m/acct.db" 30
  for i in $(seq 5); do ms vgpu acct --totals; done | med > "$T/totals_1m"
  for i in $(seq 5); do ms vgpu metrics; done | med > "$T/metrics_1m"
  kill "$dpid"; wait "$dpid" 2>/dev/null
fi

printf '%-52s %12s %10s\n' "what" "median ms" "target"
printf '%-52s %12s %10s\n' "vgpu run -- true, with its record" "$(cat "$T/with")" ""
printf '%-52s %12s %10s\n' "vgpu run -- true, no database (open fails)" "$(cat "$T/without")" ""
printf '%-52s %12s %10s\n' "  => a record adds" "$(awk -v a="$(cat "$T/with")" -v b="$(cat "$T/without")" 'BEGIN { printf "%.2f", a - b }')" "< 5"
printf '%-52s %12s %10s\n' "vgpu acct --totals, 100 001 records ($rows rows)" "$(cat "$T/totals")" "< 200"
printf '%-52s %12s %10s\n' "vgpu acct --totals --since -1d (86 400 of them)" "$(cat "$T/totals_day")" ""
printf '%-52s %12s %10s\n' "vgpu acct --totals, 100 001 records over 390 days" "$(cat "$T/totals_year")" "< 200"
printf '%-52s %12s %10s\n' "vgpu acct --totals --since -7d (1 795 of them)" "$(cat "$T/totals_week")" ""
if [ -s "$T/totals_daemon" ]; then
  printf '%-52s %12s %10s\n' "vgpu run -- true, its record sent to the daemon" "$(cat "$T/with_daemon")" ""
  printf '%-52s %12s %10s\n' "vgpu acct --totals through the daemon ($drows rows)" "$(cat "$T/totals_daemon")" "< 200"
  printf '%-52s %12s %10s\n' "vgpu acct --totals, daemon, 1 000 001 records" "$(cat "$T/totals_1m")" "< 1000"
  printf '%-52s %12s %10s\n' "vgpu metrics, daemon, 1 000 001 records" "$(cat "$T/metrics_1m")" "< 1000"
fi
