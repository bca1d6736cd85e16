#!/usr/bin/env bash
# Accounting records are sanity-bounded before they are stored (issue 36 N13), in both stores, and
# a job of several GPUs counts once in a user's jobs (issue 36, "Counting").
#  - A job whose region is damaged while it runs (random bytes over its memory limit, its core
#    limit and its memory integral): before, its record kept a limit of 1.8e19 B, 1753356997 % and
#    1.1 million GiB-hours for 1 s (tests/cli/acct_v4.sql holds one, written by the old vgpu run).
#    Now each is cut to what its GPU allows (its memory, 100 %, its memory x the duration), and
#    the record says so: NOTE "bounded: ...", "bounded" in --json and --csv.
#  - A database of schema version 4 (acct_v4.sql) is migrated in place to version 5: its records
#    read back, the damaged one bounded as a record of unknown GPU memory (1 PiB).
#  - The daemon bounds what it is sent by the memory NVML gives the GPU here, whatever the sender
#    says (acct_forge --garbage: 1.8e19 B, 1753333957 %, 1.2 million GiB-hours, an end before the
#    start).
#  - A 2-GPU job: --totals' line "all" of the user, --json's users[].jobs, --csv's user_jobs and
#    vgpu_user_jobs_total count it once (before: once per GPU, 2).
source "$(dirname "$0")/lib.sh"
command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
command -v jq >/dev/null || skip_all "needs jq"

GIB=1073741824
PIB=1125899906842624
# The job's own region, damaged from inside the job (the job's user may write its own region, as
# vgpu-security(7) says): memory limit (offset 848 of dev[0] in the version 1 header), core limit
# (856) and the memory integral (880); region.c asserts the layout.
damage='poke() { printf "$3" | env -u LD_PRELOAD dd of="$1" bs=1 seek="$2" conv=notrunc status=none; };
  poke "$VGPU_REGION" 848 "\xff\xff\xff\xff\xff\xff\xff\xf9"; poke "$VGPU_REGION" 856 "\xc5\x1a\x82\x68";
  poke "$VGPU_REGION" 880 "\x00\x00\x00\x00\x00\x00\x00\x3c"'
gpu_mem=$(vgpu list --json 2>/dev/null | jq -r '.gpus[0].mem_total_bytes')
job() { jq -c --arg n "$2" '.jobs[] | select(.name == $n)' <<<"$1"; }
# "LIMIT CORE BOUNDED" of job NAME's first GPU in vgpu acct --json, and whether its GiB-hours fit
# MEM bytes over its duration + 1 s
figures() { # json name mem
  job "$1" "$2" | jq -r --argjson m "$3" --argjson g $GIB '"\(.gpus[0].mem_limit_bytes) \(.gpus[0].core_limit_percent)'\
' \(.bounded | join("+")) \(.gpus[0].mem_gib_hours <= $m / $g * (.duration_seconds + 1) / 3600)"'
}

# ---- the user's own store: a damaged region's record ----
run vgpu run --mem 4G --core 30 --name damaged -- bash -c "$damage"
assert_rc "a job that damages its own region ends" 0
run vgpu run --mem 4G --core 30 --name honest -- true
run vgpu acct --json
assert_eq "its record is cut to the GPU's memory and 100 %, its GiB-hours to the memory x its duration, and says so" \
  "$gpu_mem 100 mem_limit+core_limit+mem_gib_hours true" "$(figures "$out" damaged "$gpu_mem")"
assert_eq "an honest record is stored as it was, bounded by nothing" "4294967296 30  true" \
  "$(figures "$out" honest "$gpu_mem")"
assert_eq "the store holds the bounded figures (bounded = 2|4|32)" "$gpu_mem 100 38" \
  "$(sqlite3 -separator ' ' "$VGPU_STATE_DIR/acct.db" "SELECT g.mem_limit_bytes, g.core_limit, j.bounded FROM jobs j
     JOIN job_gpus g ON g.job_id = j.id WHERE j.name = 'damaged'")"
run vgpu acct --name damaged
assert_contains "the table's NOTE says what was cut" "bounded: memory limit, core limit, GiB-hours" "$out"
run vgpu acct --csv
assert_eq "--csv's last column 'bounded' says it too" "bounded mem_limit+core_limit+mem_gib_hours" \
  "$(printf '%s\n' "$out" | awk -F, 'NR == 1 { print $NF } $2 == "damaged" { print $NF }' | paste -sd' ')"
run vgpu acct --totals --json
check "--totals adds up the bounded GiB-hours (at most 2 x 80 GiB x (1 s + 1 s) here)" \
  awk -v h="$(jq '[.totals[].mem_gib_hours] | add' <<<"$out")" 'BEGIN { exit !(h < 0.1) }'

# ---- a 2-GPU job counts once in its user's jobs ----
use_scenario h100x8
export VGPU_STATE_DIR=$T_DIR/pair
mkdir -m 0700 "$VGPU_STATE_DIR"
must vgpu run --gpu 0,1 --name pair -- true
must vgpu run --gpu 0 --name single -- true
run vgpu acct --totals --json
assert_eq "--totals --json: each GPU's row counts the jobs that used it (2 and 1)" "2 1" \
  "$(jq -r '[.totals[].jobs] | join(" ")' <<<"$out")"
assert_eq "... and users[] counts the user's 2 jobs once each, over 2 GPUs" "root 2 2" \
  "$(jq -r '.users[] | "\(.user) \(.jobs) \(.gpus)"' <<<"$out")"
run vgpu acct --totals
assert_match "the table's line 'all' under the user's GPUs says 2 jobs" "^root +all +\(2 GPUs; each job once\) +2 " \
  "$(grep ' all ' <<<"$out")"
run vgpu acct --totals --csv
assert_eq "--csv's user_jobs add up to 2" "user_jobs 2" \
  "$(awk -F, 'NR == 1 { print $NF } NR > 1 { s += $NF } END { print s }' <<<"$out" | paste -sd' ')"
run vgpu acct --totals --json --gpu 1
assert_eq "with --gpu 1, the pair counts at GPU 1, the first of its GPUs the filter keeps" "1 1" \
  "$(jq -r '"\(.totals[0].jobs) \(.users[0].jobs)"' <<<"$out")"
run vgpu metrics
assert_match "vgpu_user_jobs_total counts the user's 2 jobs, the 2-GPU one once" \
  '^vgpu_user_jobs_total\{user="root",Hostname="[^"]*"\} 2$' "$(grep '^vgpu_user_jobs_total{' <<<"$out")"
assert_eq "vgpu_user_gpu_jobs_total keeps each GPU's count (2 on GPU 0, 1 on GPU 1)" "2 1" \
  "$(grep '^vgpu_user_gpu_jobs_total{' <<<"$out" | awk '{ print $NF }' | paste -sd' ')"

# ---- a database of version 4 is migrated in place ----
export VGPU_STATE_DIR=$T_DIR/v4
mkdir -m 0700 "$VGPU_STATE_DIR"
sqlite3 "$VGPU_STATE_DIR/acct.db" <"$VGPU_SRC/tests/cli/acct_v4.sql"; chmod 600 "$VGPU_STATE_DIR/acct.db"
# its records end now (the fixture's times, moved by version 4's own triggers), within any retention
sqlite3 "$VGPU_STATE_DIR/acct.db" "UPDATE jobs SET start_ns = start_ns + (strftime('%s','now') * 1000000000 -
  (SELECT max(end_ns) FROM jobs)), end_ns = end_ns + (strftime('%s','now') * 1000000000 - (SELECT max(end_ns) FROM jobs))"
run vgpu acct --json
assert_rc "vgpu acct reads a version 4 database" 0
assert_eq "its 3 records read back" "pair one damaged" "$(jq -r '[.jobs[].name] | join(" ")' <<<"$out")"
assert_eq "the damaged one is bounded as a record of unknown GPU memory (1 PiB), and says so" \
  "$PIB 100 mem_limit+core_limit+mem_gib_hours true" "$(figures "$out" damaged $PIB)"
assert_eq "the others are as they were" "4294967296 30 0.065808283 [] | null null 2 []" \
  "$(job "$out" one | jq -r '"\(.gpus[0].mem_limit_bytes) \(.gpus[0].core_limit_percent) \(.gpus[0].gpu_seconds) \(.bounded) |"')\
 $(job "$out" pair | jq -r '"\(.gpus[0].mem_limit_bytes) \(.gpus[0].core_limit_percent) \(.gpus | length) \(.bounded)"')"
assert_eq "the schema is version 7 now" 7 \
  "$(sqlite3 "$VGPU_STATE_DIR/acct.db" "SELECT value FROM meta WHERE key = 'schema_version'")"
run vgpu acct --totals --json
assert_eq "its totals: 3 jobs on GPU 0, 1 on GPU 1, and the user's 3 jobs counted once each" "3 1 | 3" \
  "$(jq -r '"\([.totals[].jobs] | join(" ")) | \(.users[0].jobs)"' <<<"$out")"
must vgpu run --name after -- true
assert_eq "and it takes new records" "pair one damaged after" "$(vgpu acct --json | jq -r '[.jobs[].name] | join(" ")')"

# ---- the daemon's database ----
if [ "$(id -u)" != 0 ]; then
  skip "the daemon bounds what it is sent" "needs root (vgpu daemon)"
  done_testing; exit 0
fi
use_scenario h100
UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
export VGPU_STATE_DIR=$T_DIR/state
ADIR=$(mktemp -d /tmp/vgpu-acctbounds.XXXXXX); chmod 0755 "$ADIR"
ADB=$ADIR/db/acct.db
daemon=""
trap 'kill $daemon 2>/dev/null; rm -rf "$ADIR"; t_cleanup' EXIT
vgpu daemon --acct-db "$ADB" 2>>"$T_DIR/daemon.log" &
daemon=$!
wait_until 20 vgpu daemon --check
run acct_forge --garbage a00000000001 a00000000002 "$UUID"
assert_eq "the daemon takes both forged records" "garbage=1,1" "$out"
run vgpu run --mem 4G --core 30 --name damaged2 -- bash -c "$damage"
run vgpu acct --json
assert_eq "the forged figures are cut to GPU 0's memory as NVML gives it here, 100 %, 4 GPU-seconds in 4 s" \
  "$gpu_mem 100 mem_limit+core_limit+gpu_seconds+mem_peak+mem_gib_hours true 4 $gpu_mem" \
  "$(figures "$(jq '{jobs: [.jobs[] | select(.id == "a00000000001")]}' <<<"$out")" garbage "$gpu_mem") $(jq -r '[.jobs[] | select(.id == "a00000000001")][0] |
     "\(.gpus[0].gpu_seconds) \(.gpus[0].mem_peak_bytes)"' <<<"$out")"
assert_eq "the record that ended before it started ends at its start, and says so" "0 end_time" \
  "$(jq -r '.jobs[] | select(.id == "a00000000002") | "\(.duration_seconds) \(.bounded | join("+"))"' <<<"$out")"
assert_eq "a damaged region's record reaches the daemon's database bounded" \
  "$gpu_mem 100 mem_limit+core_limit+mem_gib_hours true" "$(figures "$out" damaged2 "$gpu_mem")"
assert_eq "... as the database holds it" "$gpu_mem 100 38" \
  "$(sqlite3 -separator ' ' "$ADB" "SELECT g.mem_limit_bytes, g.core_limit, j.bounded FROM jobs j
     JOIN job_gpus g ON g.job_id = j.id WHERE j.name = 'damaged2'")"
done_testing
