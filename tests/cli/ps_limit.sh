# vgpu ps and vgpu limit: listing, JSON, live limit changes, reaping, permissions.
. "$(dirname "$0")/lib.sh"

run vgpu ps
assert_rc "ps with no jobs: 0" 0
assert_contains "ps prints a header" "MEM LIMIT" "$out"
run vgpu ps --json
assert_eq "ps --json with no jobs" "1 0" "$(printf '%s' "$out" | jq -r '"\(.schema) \(.jobs | length)"')"

# A job that waits until told to end.
fifo=$T_DIR/go; mkfifo "$fifo"
vgpu run --name web --mem 2G --core 40 sh -c "read x < $fifo" &
runner=$!
has_job() { [ -n "$(ls "$VGPU_STATE_DIR/jobs" 2>/dev/null)" ]; }
wait_until 20 has_job
run vgpu ps --json
assert_rc "ps --json: 0" 0
assert_eq "one job" "1" "$(printf '%s' "$out" | jq '.jobs | length')"
id=$(printf '%s' "$out" | jq -r '.jobs[0].id')
assert_match "the id is 12 hex digits" '^[0-9a-f]{12}$' "$id"
assert_eq "name" "web" "$(printf '%s' "$out" | jq -r '.jobs[0].name')"
assert_eq "owner" "root" "$(printf '%s' "$out" | jq -r '.jobs[0].owner')"
assert_eq "limit in bytes" "2147483648" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].mem_limit_bytes')"
assert_eq "used in bytes" "0" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].mem_used_bytes')"
assert_eq "core limit" "40" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].core_limit_percent')"
assert_eq "the driver's view: 0 (the job's process has no context)" 0 "$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].nvml_used_bytes')"
run vgpu ps
assert_contains "the table shows the job" "$id" "$out"
assert_contains "the table shows the limit" "2G" "$out"
run vgpu ps -q
assert_eq "ps -q prints the id only" "$id" "$out"

run vgpu limit web --mem 1G
assert_rc "limit by name: 0" 0
assert_contains "limit says what changed" "memory limit 1 GiB (was 2 GiB)" "$out"
run vgpu ps --json
assert_eq "the new limit is live" "1073741824" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].mem_limit_bytes')"
run vgpu limit "${id:0:6}" --mem 50%
assert_rc "limit by id prefix and percent: 0" 0
run vgpu limit "$id" --core none --mem none
assert_rc "limit removing both limits: 0" 0
run vgpu ps --json
assert_eq "no memory limit is null" "null" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].mem_limit_bytes')"
assert_eq "no core limit is null" "null" "$(printf '%s' "$out" | jq '.jobs[0].gpus[0].core_limit_percent')"
run vgpu limit web --mem 10T
assert_rc "limit larger than the GPU: 2" 2
run vgpu limit web --mem 4Q
assert_rc "limit with a bad size: 2" 2
assert_contains "the bad size is quoted" "'4Q'" "$err"
run vgpu limit web --mem 1G --gpu 3
assert_rc "limit for a GPU the job lacks: 2" 2
run vgpu limit web
assert_rc "limit with nothing to change: 2" 2
run vgpu limit nosuchjob --mem 1G
assert_rc "limit of an unknown job: 8" 8
assert_contains "an unknown job lists the jobs" "web" "$err"

# Another user can neither read nor change the job.
# The clone may sit where that user cannot go (/root is 0700, and a root shell in a container
# starts there): what they run is copied to a directory of the test's own that they can reach.
other_user_can_run() {
  mkdir -p "$T_DIR/other" && cp "$VGPU_BUILD/vgpu" "$T_DIR/other/vgpu" && cp -r "$VGPU_BUILD/fakegpu" "$T_DIR/other/" &&
    chmod -R a+rX "$T_DIR/other" && chmod 0711 "$T_DIR" &&
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$T_DIR/other/vgpu" --version >/dev/null 2>&1
}
if ! command -v setpriv >/dev/null || [ "$(id -u)" != 0 ]; then
  skip "limit of another user's job: 6" "needs root and setpriv"
elif ! other_user_can_run; then
  skip "limit of another user's job: 6" "user nobody cannot run a copy of vgpu in $T_DIR (is ${TMPDIR:-/tmp} reachable by other users?)"
else
  chmod 0755 "$VGPU_STATE_DIR" "$VGPU_STATE_DIR/jobs"
  as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env VGPU_STATE_DIR="$VGPU_STATE_DIR" LD_LIBRARY_PATH="$T_DIR/other/fakegpu" VGPU_FAKE_LIBDIR="$T_DIR/other/fakegpu" "$@"; }
  run as_nobody "$T_DIR/other/vgpu" limit "$id" --mem 1G
  assert_rc "limit of another user's job: 6" 6
  assert_contains "the permission error says whose job it is" "only its owner or root" "$err"
  run as_nobody "$T_DIR/other/vgpu" ps --json
  assert_rc "ps as another user: 0" 0
  assert_eq "another user's job is not shown" "0" "$(printf '%s' "$out" | jq '.jobs | length')"
  run as_nobody cat "$VGPU_STATE_DIR/jobs/$id.region"
  check "another user cannot read the region file" test "$rc" -ne 0
  chmod 0700 "$T_DIR" "$VGPU_STATE_DIR" "$VGPU_STATE_DIR/jobs"
fi

echo > "$fifo"
wait "$runner"
rc=$?
assert_eq "the job ends with its command's status" "0" "$rc"
run vgpu ps --json
assert_eq "an ended job is listed as exited, with its status, for a while" "$id exited 0" \
  "$(printf '%s' "$out" | jq -r '.jobs[] | "\(.id) \(.state) \(.exit_code)"')"
run vgpu ps
assert_contains "the table shows how it ended" "exited 0" "$out"
run vgpu limit "$id" --mem 1G
assert_rc "limit of an ended job: 8" 8
run env VGPU_EXITED_KEEP_S=0 vgpu ps -q
assert_eq "an ended job is gone once its time is up" "" "$out"

# A job whose vgpu run was SIGKILLed is removed by the next reader.
vgpu run sh -c "echo \$\$ > $T_DIR/cmdpid; exec sleep 30" &
runner=$!
wait_until 20 test -s "$T_DIR/cmdpid"
kill -KILL "$runner"; wait "$runner" 2>/dev/null
kill -KILL "$(cat "$T_DIR/cmdpid")"
gone() { [ ! -e "/proc/$1" ]; }   # the orphan is reaped by init: wait until it is
wait_until 20 gone "$(cat "$T_DIR/cmdpid")"
run vgpu ps -q
assert_eq "a job whose vgpu run was killed, with no live process, is removed" "" "$out"
done_testing
