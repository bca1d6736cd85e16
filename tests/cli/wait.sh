# vgpu run --detach and vgpu wait: a background job prints only its id and returns at once, its
# output goes to a 0600 log, its placement promise lasts as long as the job; vgpu wait returns
# the job's status (also for a while after it ended), times out with 124, and says 8 for no job.
. "$(dirname "$0")/lib.sh"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
job_json() { # ID -> the job's object in vgpu ps --json (empty when not listed)
  vgpu ps --json | jq -c --arg id "$1" '.jobs[] | select(.id == $id)'
}

# --detach returns at once, printing the id only, while the job runs (until $T_DIR/end exists:
# it must still run when --timeout is tried on it, however slow the machine).
t0=$(now_ms)
run vgpu run --detach -- wait_until 120 test -e "$T_DIR/end"
t1=$(now_ms)
assert_rc "--detach: 0 once the job exists" 0
long=$out
assert_match "--detach prints the job id, one line, nothing else" '^[0-9a-f]{12}$' "$out"
assert_eq "--detach prints nothing on stderr" "" "$err"
check "--detach returns at once ($((t1 - t0)) ms), not when the command ends" test $((t1 - t0)) -lt 2500
t0=$(now_ms)
second=$(vgpu run -d wait_until 120 test -e "$T_DIR/end" 2>&1)
t1=$(now_ms)
check "the supervisor keeps neither stdout nor stderr of the caller ($((t1 - t0)) ms)" test $((t1 - t0)) -lt 2500
run vgpu ps -q
assert_contains "the detached job is listed by vgpu ps -q" "$long" "$out"
assert_eq "it runs" "running" "$(job_json "$long" | jq -r .state)"
sup=$(job_json "$long" | jq -r .creator_pid)
check "the supervisor is alive" kill -0 "$sup"
if [ -r "/proc/$sup/stat" ]; then
  sid=$(sed 's/.*) //' "/proc/$sup/stat" | cut -d' ' -f4)
  assert_eq "the supervisor leads its own session (setsid)" "$sup" "$sid"
  assert_eq "the supervisor's stdin is /dev/null" "/dev/null" "$(readlink "/proc/$sup/fd/0")"
  assert_eq "the supervisor's stdout is the job's log" "$VGPU_STATE_DIR/jobs/$long.log" "$(readlink "/proc/$sup/fd/1")"
else
  skip "the supervisor leads its own session (setsid)" "no /proc"
fi

# --timeout on a job that goes on.
t0=$(now_ms)
run vgpu wait --timeout 0.3 "$long"
t1=$(now_ms)
assert_rc "wait --timeout 0.3 on a long job: 124" 124
check "the timeout is kept ($((t1 - t0)) ms)" test $((t1 - t0)) -lt 2500
assert_contains "the timeout says so" "timed out" "$err"
# Whitespace around the number is refused, as every other option's numbers are (strtod alone
# skips leading blanks: " 0.2" and a tab before it waited and timed out).
for v in " 0.2" "0.2 " $'\t0.2' $'0.2\n'; do
  run vgpu wait --timeout "$v" "$long"
  assert_rc "wait --timeout '$(printf '%q' "$v")' exits 2" 2
  assert_contains "... naming the accepted form" "above 0 and at most" "$err"
done

# The command's output goes to the log, 0600; its stdin is /dev/null.
run vgpu run -d -- sh -c 'echo out; echo err >&2; readlink /proc/self/fd/0; cat; exit 7'
id=$out
run vgpu wait "$id"
assert_rc "vgpu wait returns the command's exit status" 7
log=$VGPU_STATE_DIR/jobs/$id.log
check "the log is beside the region" test -f "$log"
assert_eq "the log is 0600" "600" "$(stat -c %a "$log")"
assert_eq "the log has the command's stdout and stderr, stdin is /dev/null" "out err /dev/null" "$(tr '\n' ' ' < "$log" | sed 's/ $//')"
assert_eq "ps --json names the log" "$log" "$(job_json "$id" | jq -r .log)"
fg=$(vgpu run sh -c 'basename "$VGPU_REGION" .region')
assert_eq "ps --json: a job run in the foreground has no log" "null" "$(job_json "$fg" | jq -r .log)"

# The status is kept after the job ended.
run vgpu wait "$id"
assert_rc "vgpu wait after the job ended still gets its status" 7
assert_eq "ps --json shows the ended job" "exited 7 null 0" "$(job_json "$id" | jq -r '"\(.state) \(.exit_code) \(.exit_signal) \(.mem_used_bytes)"')"
run vgpu ps
assert_contains "the table shows how it ended" "exited 7" "$out"
run vgpu wait "${id:0:5}"
assert_rc "an ended job is found by an id prefix" 7

# Killed by a signal: 128+N.
run vgpu run -d sh -c 'kill -TERM $$'
run vgpu wait "$out"
assert_rc "a job killed by SIGTERM: 143" 143
run vgpu run -d sh -c 'kill -KILL $$'
kid=$out
run vgpu wait "$kid"
assert_rc "a job killed by SIGKILL: 137" 137
assert_eq "ps --json names the signal" "exited null SIGKILL" "$(job_json "$kid" | jq -r '"\(.state) \(.exit_code) \(.exit_signal)"')"
run vgpu ps
assert_contains "the table says killed SIGKILL" "killed SIGKILL" "$out"
# Signals sent to the detached vgpu run go on to the command.
run vgpu run -d sleep 30
sid=$out
kill -TERM "$(job_json "$sid" | jq -r .creator_pid)"
run vgpu wait --timeout 5 "$sid"
assert_rc "SIGTERM to the detached vgpu run reaches the command: 143" 143

# Several jobs: the status of the last one given.
# (b's sleep is no synchronization: b usually ends last, so "the last given" is not "the last
# to end" in the other order; either way the status is the last given's.)
a=$(vgpu run -d sh -c 'exit 3') b=$(vgpu run -d sh -c 'sleep 0.3; exit 5')
run vgpu wait "$a" "$b"
assert_rc "several jobs: the status of the last" 5
run vgpu wait "$b" "$a"
assert_rc "several jobs, the other order: the status of the last" 3

# No such job.
run vgpu wait nosuch
assert_rc "wait for no such job: 8" 8
assert_contains "no such job says so" "no job 'nosuch'" "$err"
run vgpu wait
assert_rc "wait without a job: 2" 2
# A mistyped JOB beside a good one: said at once, with 8, whatever the good one gives.
good=$(vgpu run -d sh -c 'exit 0')
run vgpu wait typo "$good"
assert_rc "wait typo GOOD: 8, not the good job's 0" 8
assert_contains "... naming the typo" "no job 'typo'" "$err"
run vgpu wait "$good" typo
assert_rc "wait GOOD typo: 8" 8
run vgpu wait ''
assert_rc "an empty JOB (an unset variable) is bad usage: 2, not 8" 2
assert_contains "... saying it is empty" "JOB is empty" "$err"

# A name may be reused once its job has ended; the name then means the new job.
run vgpu run --name reuse sh -c 'exit 2'
assert_rc "a named job ends" 2
run vgpu run -d --name reuse sh -c 'wait_until 60 test -e "$0"; exit 4' "$T_DIR/reuse.end"
assert_rc "--name of an ended job may be reused" 0
run vgpu run --name reuse true
assert_rc "but not while the new one runs: 125" 125
touch "$T_DIR/reuse.end"
run vgpu wait reuse
assert_rc "the name means the job that has not ended" 4
run vgpu wait reuse
assert_rc "among ended jobs, the name means the newest" 4

# Errors before the job exists exit 125 and print no id.
run vgpu run -d --mem 1000G true
assert_rc "--detach with --mem larger than the GPU: 125" 125
assert_eq "no id is printed" "" "$out"
assert_contains "the error says why" "larger than" "$err"
run vgpu run -d --frob true
assert_rc "--detach with a bad option: 125" 125
assert_eq "no id for a bad option" "" "$out"
run vgpu run -d --name 'bad name' true
assert_rc "--detach with a bad name: 125" 125
run vgpu run -d
assert_rc "--detach without a command: 125" 125
run env VGPU_NVML_LIB=$T_DIR/none.so vgpu run -d true
assert_rc "--detach without NVML: 125" 125
assert_eq "no id without NVML" "" "$out"
# A command that cannot be run is the job's status, as in the foreground.
run vgpu run -d no-such-command-here
assert_rc "--detach of a missing command makes a job" 0
nid=$out
run vgpu wait "$nid"
assert_rc "its status is 127" 127
assert_contains "the log says why" "no-such-command-here" "$(cat "$VGPU_STATE_DIR/jobs/$nid.log")"

# The placement promise is held by the detached supervisor for as long as the job runs.
run vgpu run -d --mem 60G sleep 30
pid=$out
run vgpu run --mem 60G true
assert_rc "the detached job's memory stays promised" 125
assert_contains "a second 60G job does not fit" "not promised" "$err"
sup=$(job_json "$pid" | jq -r .creator_pid)
check "the promise belongs to the supervisor" sh -c "ls '$VGPU_STATE_DIR/promises' | grep -q '^$sup\\.'"
kill -TERM "$sup"
run vgpu wait --timeout 5 "$pid"
assert_rc "the placed job ends" 143
run vgpu run --mem 60G true
assert_rc "its promise is given back when it ends" 0

touch "$T_DIR/end"
run vgpu wait --timeout 10 "$long" "$second"
assert_rc "the first jobs end once told, with status 0" 0

# After the keep time an ended job is gone, with its log (VGPU_EXITED_KEEP_S shortens it).
run env VGPU_EXITED_KEEP_S=0 vgpu wait "$id"
assert_rc "wait for a job ended longer ago than the keep time: 8" 8
assert_contains "the message says how long a status is kept" "kept for 60 seconds" "$err"
check "its region is removed" test ! -e "$VGPU_STATE_DIR/jobs/$id.region"
check "its log is removed with it" test ! -e "$log"
done_testing
