# How a JOB argument is looked up (vgpu-limit(1)): an exact id, else a name, else a unique start
# of an id. An exact id always reaches its job; a key that is one job's name and the start of
# another job's id is an error, not a silent pick.
. "$(dirname "$0")/lib.sh"

start_job() { # NAME OUTFILE
  vgpu run --name "$1" --mem 2G -- alloc_probe hold >"$2" 2>&1 &
  poll_until 10 grep -q holding "$2" || not_ok "job $1 starts" "$(cat "$2")"
}
id_of() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n) | .id'; }
limit_of() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n) | .gpus[0].mem_limit_bytes'; }

start_job first "$T_DIR/first.out"
a=$(id_of first)
assert_match "the first job has an id" '^[0-9a-f]{12}$' "$a"
p=${a:0:4}
start_job "$p" "$T_DIR/second.out"
b=$(id_of "$p")

# A job named after another job's id could never be reached by its name: an exact id wins, so
# vgpu limit NAME would change the other job. Refused (issue 27).
run vgpu run --name "$a" --mem 2G -- true
assert_rc "--name the id of a running job: refused (125)" 125
assert_contains "the error says it is a job's id" "is the id of a running job" "$err"
assert_contains "and what to do" "choose another name" "$err"
assert_eq "no job got that name" "" "$(id_of "$a")"

run vgpu limit "$p" --mem 1G
assert_rc "a name that is also the start of another job's id: 2" 2
assert_contains "the error says it is ambiguous" "ambiguous" "$err"
assert_contains "it names the job with that id" "$a" "$err"
assert_eq "nothing was changed" "2147483648 2147483648" "$(limit_of first) $(limit_of "$p")"

run vgpu limit "$a" --mem 1G
assert_rc "an exact id: 0" 0
assert_eq "the exact id reached its own job" "1073741824 2147483648" "$(limit_of first) $(limit_of "$p")"

# An empty word names no job: a usage error (2), not "no such job" (8).
run vgpu limit "" --mem 1G
assert_rc "vgpu limit '' exits 2" 2
assert_contains "... saying the job is empty" "the job is empty" "$err"

# Not found: the running jobs are listed first, and the ended ones counted, never cut silently.
must vgpu run --name ended-one -- true
run vgpu limit nosuch --mem 1G
assert_rc "an unknown job: 8" 8
assert_contains "the running jobs are listed" "running: $a (first), $b ($p)" "$err"
assert_match "the ended one is counted, not listed" "1 ended job kept for vgpu wait" "$err"
assert_not_contains "the ended one is not listed" "ended-one" "$err"
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18; do
  vgpu run --name "many-job-number-$i" --mem 1G -- alloc_probe hold >"$T_DIR/many$i.out" 2>&1 &
done
running_at_least() { [ "$(vgpu ps --json | jq '[.jobs[] | select(.state == "running")] | length')" -ge "$1" ]; }
wait_until 30 running_at_least 20
run vgpu limit nosuch --mem 1G
assert_match "a long list says how many more are left out" ", and [0-9]+ more" "$err"

run vgpu limit "$b" --mem 1500M
assert_rc "the second job by its full id: 0" 0
assert_eq "it reached the second job" "1572864000" "$(limit_of "$p")"

kill $(jobs -p) 2>/dev/null
wait 2>/dev/null

done_testing
