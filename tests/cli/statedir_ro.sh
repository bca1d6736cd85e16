#!/usr/bin/env bash
# A state directory on a read-only file system (issue 36 N11): vgpu ps called an intact job file
# corrupt ("could not be read ... remove them"). Now the job is listed, read by copy, and ps says
# the directory is read-only; vgpu acct shows its records and says the same.
source "$(dirname "$0")/lib.sh"

if ! unshare -m true 2>/dev/null; then
  skip_all "unshare -m does not work here (needs root): no read-only bind mount"
fi
listed() { vgpu ps --json | jq -e --arg n "$1" 'any(.jobs[]; .name == $n and .state == "running")'; }
# ro CMD...: CMD with the state directory bound read-only over itself, in a mount namespace of its own.
ro() {
  unshare -m sh -c 'mount --bind "$VGPU_STATE_DIR" "$VGPU_STATE_DIR" && mount -o remount,bind,ro "$VGPU_STATE_DIR" &&
    exec "$@"' sh "$@"
}

vgpu run --name ro --mem 1G -- sh -c "wait_until 60 test -e '$T_DIR/stop'" & vr=$!
wait_until 10 listed ro
id=$(vgpu ps --json | jq -r '.jobs[] | select(.name == "ro") | .id')
run ro vgpu ps
assert_rc "vgpu ps on a read-only state directory: 0" 0
assert_contains "the job is listed" "$id" "$out"
assert_not_contains "its intact file is not called corrupt" "could not be read" "$err"
assert_contains "ps says the directory is read-only" "read-only file system" "$err"
run ro vgpu ps --json
assert_eq "--json lists it with its limit" "ro 1073741824" \
  "$(jq -r '.jobs[] | select(.id == "'"$id"'") | "\(.name) \(.gpus[0].mem_limit_bytes)"' <<<"$out")"
run ro vgpu limit "$id" --mem 2G
assert_rc "vgpu limit there fails (nothing can be written), not 'no job'" 1
assert_not_contains "and does not say there is no such job" "no job" "$err"
: >"$T_DIR/stop"; wait "$vr"

# vgpu acct there (issue 36 N11, its acct half): it read nothing and blamed the file's owner
# ("setting WAL mode: unable to open database file (check the file's owner and mode)"). Now it
# shows the records and says the file system is read-only.
run ro vgpu acct
assert_rc "vgpu acct on a read-only state directory: 0" 0
assert_contains "it shows the job's record" "$id" "$out"
assert_contains "it says the store is on a read-only file system" "read-only file system" "$err"
assert_not_contains "it does not blame the file's owner or mode" "owner" "$err"
run ro vgpu acct --totals --json
assert_eq "--totals --json adds it up: 1 job" "1" "$(jq -r '.users[0].jobs' <<<"$out")"
run ro vgpu acct --retention 5
assert_rc "--retention there fails (nothing can be written)" 1
assert_contains "saying the file system is read-only" "read-only file system" "$err"
assert_not_contains "not blaming the owner" "owner" "$err"

done_testing
