#!/usr/bin/env bash
# The daemon checks a capped job's GPU time against its own charges (cmd/daemon/charged.c, acct.c):
# the record of a job that ran capped on the daemon's schedule stores what the schedule charged
# it, whatever the job's user sends. nobody's honest capped job's figure agrees with the charge
# ("schedule"); nobody's hostile jobs, which try to send their record first saying 0 GPU-seconds
# (or no GPU at all), are refused (the daemon takes a job's record from its own vgpu run only,
# cmd/daemon/acct_jobs.c), and the record their vgpu run sends is stored.
# On the simulated GPU, --core 30 for 2 s of back-to-back 2 ms kernels is 0.6 GPU-seconds.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the other user is nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"
id nobody >/dev/null 2>&1 || skip_all "needs a user 'nobody'"

UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
user_dirs
ADIR=$(mktemp -d /tmp/vgpu-acctcharged.XXXXXX); chmod 0755 "$ADIR"
NSTATE=/tmp/vgpu-acct-charged-nobody-$$
daemon=""
trap 'kill $daemon 2>/dev/null; rm -rf "$ADIR" "$NSTATE"; t_cleanup' EXIT
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u XDG_RUNTIME_DIR VGPU_STATE_DIR=$NSTATE "$@"
}
vgpu daemon --acct-db "$ADIR/db/acct.db" 2>>"$T_DIR/daemon.log" &
daemon=$!
wait_until 20 vgpu daemon --check

LOOP="core_loop -t 2 -k 2000 -s 8"
# gpu_seconds and gpu_time_source of nobody's job NAME on GPU 0 of its record
rec() { as_nobody vgpu acct --json --name "$1" | jq -r '.jobs[0].gpus[0] | "\(.gpu_seconds) \(.gpu_time_source) \(.uuid)"'; }
near() { # desc "seconds source uuid" want_source
  local s src u; read -r s src u <<<"$2"
  if [ "$src $u" = "$3 $UUID" ] && awk -v g="$s" 'BEGIN { exit !(g >= 0.45 && g <= 0.75) }'; then ok "$1: $2"
  else not_ok "$1" "got '$2', want 0.6 ± 0.15 GPU-seconds from $3 on $UUID"; fi
}

# ---- an honest capped job: its own figure, within the tolerance of the charges ----
must as_nobody vgpu run --core 30 --name honest -- $LOOP
near "nobody's honest --core 30 job keeps the schedule's figure its vgpu run measured" "$(rec honest)" schedule

# ---- a job that sends its own record first, saying it used no GPU time ----
run as_nobody vgpu run --core 30 --name liar -- sh -c \
  "$LOOP >/dev/null && acct_forge --zero \"\$(basename \"\$VGPU_REGION\" .region)\" liar $UUID"
assert_contains "the hostile job's own record (0 GPU-seconds), sent first, is refused (EPERM)" "zero=-1" "$out"
near "... and its vgpu run's record is stored, with the schedule's charge" "$(rec liar)" schedule

# ---- ... or that leaves the GPU out of its record ----
run as_nobody vgpu run --core 30 --name nogpu -- sh -c \
  "$LOOP >/dev/null && acct_forge --zero \"\$(basename \"\$VGPU_REGION\" .region)\" nogpu"
assert_contains "a hostile record that names no GPU, sent first, is refused" "zero=-1" "$out"
near "... and its vgpu run's record is stored, with the charge" "$(rec nogpu)" schedule

# ---- a forged record of a job the schedule never saw keeps its word (nothing to check it by) ----
run as_nobody acct_forge --zero 0123456789ab ghost "$UUID"
assert_eq "a record of no scheduled job is stored as sent" "0 schedule" \
  "$(rec ghost | cut -d' ' -f1-2)"

done_testing
