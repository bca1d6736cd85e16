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
start_job "$a" "$T_DIR/third.out"

run vgpu limit "$p" --mem 1G
assert_rc "a name that is also the start of another job's id: 2" 2
assert_contains "the error says it is ambiguous" "ambiguous" "$err"
assert_contains "it names the job with that id" "$a" "$err"
assert_eq "nothing was changed" "2147483648 2147483648" "$(limit_of first) $(limit_of "$p")"

run vgpu limit "$a" --mem 1G
assert_rc "an exact id, although another job has it as its name: 0" 0
assert_eq "the exact id reached its own job" "1073741824 2147483648" "$(limit_of first) $(limit_of "$a")"

b=$(id_of "$p")
run vgpu limit "$b" --mem 1500M
assert_rc "the second job by its full id: 0" 0
assert_eq "it reached the second job" "1572864000" "$(limit_of "$p")"

kill $(jobs -p) 2>/dev/null
wait 2>/dev/null

done_testing
