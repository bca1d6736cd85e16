# A job of many processes (issue 14, item 5): vgpu ps and vgpu top show all of them, and the
# job region's slot bound covers them. slot_fill gives the job processes that hold a slot, as
# processes of the job that have used CUDA do. vgpu ps listed at most 256 of a job's processes
# (and summed NVML's figure over those alone).
. "$(dirname "$0")/lib.sh"

n=300
ready=$T_DIR/ready
setsid vgpu run --name many -- slot_fill $n "$ready" </dev/null >/dev/null 2>"$T_DIR/run.err" &
group=$!
if poll_until 60 test -s "$ready"; then ok "the job's $n processes took their slots"; else not_ok "the job's $n processes took their slots" "$(cat "$T_DIR/run.err")"; fi
assert_eq "every one has a slot" "$n" "$(awk '{ print $1 }' "$ready" 2>/dev/null)"

run vgpu ps --json
assert_rc "ps --json: 0" 0
assert_eq "ps lists all $n processes" "$n" "$(jq '.jobs[0].processes | length' <<<"$out")"
assert_eq "with distinct pids" "$n" "$(jq '[.jobs[0].processes[].pid] | unique | length' <<<"$out")"
run vgpu top --once --json
assert_rc "top --once --json: 0" 0
assert_eq "top counts all $n processes" "$n" "$(jq '.jobs[0].processes' <<<"$out")"

# The processes end: the job's slots are reaped and the job goes (its vgpu run ends with them).
kill -- -"$group" 2>/dev/null
job_gone() { ! kill -0 "$group" 2>/dev/null; }
if poll_until 10 job_gone; then ok "the job ended"; else not_ok "the job ended"; fi
no_running_job() { [ "$(vgpu ps --json | jq '.jobs | map(select(.state == "running")) | length')" = 0 ]; }
poll_until 10 no_running_job
run vgpu ps --json
assert_eq "no running job is left" "0" "$(jq '.jobs | map(select(.state == "running")) | length' <<<"$out")"
done_testing
