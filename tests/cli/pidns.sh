# Processes of a job in another PID namespace (a container: `vgpu run -- unshare -pf
# --mount-proc PROG`): their liveness is judged in their own namespace, so a live process's
# usage is never dropped, and a dead one's is reclaimed. The simulated GPU reports host pids.
. "$(dirname "$0")/lib.sh"

if ! unshare -pf --mount-proc true 2>/dev/null; then
  skip "PID namespaces" "unshare -pf --mount-proc does not work here (needs root or user namespaces)"
  done_testing; exit 0
fi

# The children of a process (not pgrep: it hangs under the sanitizer preload of make asan).
children() { cat "/proc/$1/task/$1/children" 2>/dev/null | tr ' ' '\n' | sed '/^$/d'; }
job_used() { vgpu ps --json | jq '.jobs[-1].gpus[0].mem_used_bytes'; }
job_nvml() { vgpu ps --json | jq '.jobs[-1].gpus[0].nvml_used_bytes'; }
# 3 GiB + the fake's 512 MiB context.
held=$((3 * 1073741824 + 536870912))

# Whatever happens, no process of this test outlives it (unshare --kill-child takes the
# process in the namespace with it).
trap 'kill -KILL $(cat "$T_DIR/unshare.pid" "$T_DIR/unshare2.pid" "$T_DIR/unshare3.pid" 2>/dev/null) 2>/dev/null; t_cleanup' EXIT
mkfifo "$T_DIR/go"
vgpu run --name ns --mem 4G -- sh -c '
  unshare -pf --kill-child --mount-proc alloc_probe alloc 3G hold > "$0/inner" 2>&1 & echo $! > "$0/unshare.pid"
  read x < "$0/go"
  alloc_probe alloc 1G > "$0/second" 2>&1
  echo done > "$0/second.done"
  read x < "$0/go"' "$T_DIR" > "$T_DIR/job.out" 2>&1 &
runner=$!
if poll_until 20 grep -q holding "$T_DIR/inner"; then ok "a process of the job in its own PID namespace allocated 3 GiB"
else not_ok "a process of the job in its own PID namespace allocated 3 GiB" "$(cat "$T_DIR/inner" "$T_DIR/job.out")"; fi

assert_eq "vgpu ps counts its memory" "$held" "$(job_used)"
assert_eq "... and again: no reader reaped it as dead" "$held" "$(job_used)"
inner_host=$(children "$(cat "$T_DIR/unshare.pid")" | head -n1)
assert_eq "vgpu ps --json shows its host pid" "$inner_host" \
  "$(vgpu ps --json | jq '.jobs[-1].processes[] | select(.pid == 1) | .host_pid')"
assert_eq "the driver's view (NVML, by host pid) counts it too" "$held" "$(job_nvml)"

timeout 10 sh -c 'echo go > "$0/go"' "$T_DIR"
poll_until 20 grep -q done "$T_DIR/second.done" || not_ok "the second process ran" "$(cat "$T_DIR/job.out")"
assert_contains "a second process of the job (host namespace) is refused what would pass 4 GiB" \
  "alloc rc=2" "$(cat "$T_DIR/second")"
assert_eq "after it ended, the job holds what the process in the namespace holds" "$held" "$(job_used)"

# The process in the namespace dies: its usage is reclaimed (the namespace is gone with it).
kill -KILL "$inner_host"
job_used_is() { [ "$(job_used)" = "$1" ]; }
poll_until 10 job_used_is 0
u=$(job_used)
assert_eq "a killed process in a PID namespace has its usage reclaimed" 0 "$u"
timeout 10 sh -c 'echo go > "$0/go"' "$T_DIR"
wait "$runner"

# A job whose only process is in a container, and no reader comes: `vgpu run` itself walks the
# job every 250 ms, records the process's host pid while it lives, and so proves it dead once it
# is gone. (Before, only the job's own allocation calls reaped: its usage stayed counted.) Read
# from the region as `vgpu ps` would, but without reaping (region_sampler).
mkfifo "$T_DIR/go3"
vgpu run --name lone --mem 4G -- sh -c '
  echo "$VGPU_REGION" > "$0/lone.region"
  unshare -pf --kill-child --mount-proc alloc_probe alloc 1G hold > "$0/inner3" 2>&1 & echo $! > "$0/unshare3.pid"
  wait
  read x < "$0/go3"' "$T_DIR" > "$T_DIR/job3.out" 2>&1 &
runner=$!
poll_until 20 grep -q holding "$T_DIR/inner3" || not_ok "a lone process in a PID namespace ran" "$(cat "$T_DIR/inner3" "$T_DIR/job3.out")"
region_used() { region_sampler "$(cat "$T_DIR/lone.region")" 0 1 | sed -n 's/.* last=\([0-9]*\).*/\1/p'; }
region_used_is() { [ "$(region_used)" = "$1" ]; }
assert_eq "a lone process in a PID namespace is counted" $((1073741824 + 536870912)) "$(region_used)"
# vgpu run's walk must have seen it alive (it records the host pid then): no reader did.
lone=$(children "$(cat "$T_DIR/unshare3.pid")" | head -n1)
host_pid_recorded() { region_sampler "$(cat "$T_DIR/lone.region")" 0 1 | grep -Eq "host_pids=([0-9]+,)*$1(,|\$)"; }
wait_until 10 host_pid_recorded "$lone"
kill -KILL "$lone"
t0=${EPOCHREALTIME/./}
poll_until 5 region_used_is 0
t1=${EPOCHREALTIME/./}
if region_used_is 0; then ok "... and reclaimed by vgpu run with no reader and no other process ($(( (t1 - t0) / 1000 )) ms)"
else not_ok "... and reclaimed by vgpu run with no reader and no other process" "used $(region_used) 5 s after the kill"; fi
timeout 10 sh -c 'echo go > "$0/go3"' "$T_DIR"
wait "$runner"

# A container process's context is charged what NVML shows for that process, not what the whole
# GPU grew by meanwhile: another process on the GPU (not in the job) ends while the context is
# created (2 s here), so the device-wide delta is 512 MiB less 1.5 GiB: nothing. The process
# waits for `vgpu run`'s walk to find its host pid (the pid NVML reports) before it measures.
# Before, it was charged 0 bytes for its context, and 2600 MiB more passed --mem 3G.
fakegpu-ctl hold 0 $((1024 * 1048576)) 60 > "$T_DIR/holder" 2>&1 &
holder=$!
poll_until 20 grep -q ready "$T_DIR/holder" || not_ok "a process outside the job holds 1.5 GiB" "$(cat "$T_DIR/holder")"
VGPU_FAKE_CTX_CREATE_MS=2000 vgpu run --name ctxns --mem 3G -- \
  unshare -pf --kill-child --mount-proc alloc_probe alloc 2600M hold > "$T_DIR/inner4" 2>&1 &
runner=$!
# The holder ends once the container process has begun creating its context (the first of the
# fake's four steps is charged at once, the rest over the next 1.5 s).
ctx_begun() { fakegpu-ctl show | jq -e --argjson h "$holder" 'any(.gpus[0].processes[]; .pid != $h and .memory > 0)'; }
wait_until 20 ctx_begun
kill -TERM $holder; wait $holder 2>/dev/null   # an orderly exit: its memory is freed at once
poll_until 20 grep -q "alloc rc=\|holding" "$T_DIR/inner4"
assert_contains "a container process charged its own context (512 MiB) is refused what would pass --mem 3G" \
  "alloc rc=2" "$(cat "$T_DIR/inner4")"
kill -KILL $(children $runner) 2>/dev/null
wait "$runner" 2>/dev/null

# The same where NVML gives pids of the caller's own namespace, as driver 580 does (an H200 listed
# unshare's child to itself as pid 1): the process finds itself by its own pid, not by the host pid
# vgpu run's walk recorded. Before, it found nothing at either, fell back to the device-wide delta
# (nothing, as the holder ended), and 2600 MiB more passed --mem 3G.
fakegpu-ctl hold 0 $((1024 * 1048576)) 60 > "$T_DIR/holder" 2>&1 &
holder=$!
poll_until 20 grep -q ready "$T_DIR/holder" || not_ok "a process outside the job holds 1.5 GiB" "$(cat "$T_DIR/holder")"
VGPU_FAKE_NVML_PIDS=caller VGPU_FAKE_CTX_CREATE_MS=2000 vgpu run --name ctxns2 --mem 3G -- \
  unshare -pf --kill-child --mount-proc alloc_probe alloc 2600M hold > "$T_DIR/inner5" 2>&1 &
runner=$!
wait_until 20 ctx_begun
kill -TERM $holder; wait $holder 2>/dev/null
poll_until 20 grep -q "alloc rc=\|holding" "$T_DIR/inner5"
assert_contains "NVML of the caller's pids: the container process is charged its own context, refused past --mem 3G" \
  "alloc rc=2" "$(cat "$T_DIR/inner5")"
kill -KILL $(children $runner) 2>/dev/null
wait "$runner" 2>/dev/null

# unshare -pf without --mount-proc: the process sees the host's /proc (NSpid has two entries).
vgpu run --mem 4G -- unshare -pf --kill-child alloc_probe alloc 1G hold > "$T_DIR/inner2" 2>&1 &
runner=$!
poll_until 20 grep -q holding "$T_DIR/inner2" || not_ok "a process in a PID namespace without its own /proc ran" "$(cat "$T_DIR/inner2")"
children $runner > "$T_DIR/unshare2.pid"
assert_eq "without --mount-proc too, vgpu ps counts its memory" $((1073741824 + 536870912)) "$(job_used)"
kill -KILL "$(children "$(cat "$T_DIR/unshare2.pid")" | head -n1)"
wait "$runner" 2>/dev/null
true

done_testing
