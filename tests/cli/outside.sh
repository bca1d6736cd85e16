# GPU processes of a job that leave the limiter (a child that unsets LD_PRELOAD) are not hidden:
# vgpu ps counts their NVML memory in the job, flags it, and the job's own allocations are
# refused while the whole job is over its limit. A child that changes CUDA_VISIBLE_DEVICES
# cannot use a GPU the job was not given.
. "$(dirname "$0")/lib.sh"

GiB=1073741824 ctx=536870912

# No GPU process of this test outlives it, whatever fails.
trap 'kill -KILL $(cat "$T_DIR/outside.pid" 2>/dev/null) 2>/dev/null; t_cleanup' EXIT
mkfifo "$T_DIR/go"
vgpu run --name out --mem 4G -- sh -c '
  env -u LD_PRELOAD alloc_probe alloc 3G hold > "$0/outside" 2>&1 & echo $! > "$0/outside.pid"
  read x < "$0/go"
  alloc_probe alloc 256M > "$0/second" 2>&1
  echo done >> "$0/second"
  read x < "$0/go"' "$T_DIR" > "$T_DIR/job.out" 2>&1 &
runner=$!
if poll_until 20 grep -q holding "$T_DIR/outside"; then ok "a child without LD_PRELOAD holds 3 GiB"
else not_ok "a child without LD_PRELOAD holds 3 GiB" "$(cat "$T_DIR/outside" "$T_DIR/job.out")"; fi
opid=$(cat "$T_DIR/outside.pid")

run vgpu ps --json
assert_eq "the limiter accounts none of it" 0 "$(printf '%s' "$out" | jq '.jobs[-1].gpus[0].mem_used_bytes')"
assert_eq "ps --json: the job's memory outside the limiter" $((3 * GiB + ctx)) "$(printf '%s' "$out" | jq '.jobs[-1].outside_bytes')"
assert_eq "ps --json: per GPU" $((3 * GiB + ctx)) "$(printf '%s' "$out" | jq '.jobs[-1].gpus[0].outside_bytes')"
assert_eq "ps --json: the process, by pid" "$opid $((3 * GiB + ctx)) 0" \
  "$(printf '%s' "$out" | jq -r '.jobs[-1].outside_processes[0] | "\(.pid) \(.used_bytes) \(.job_index)"')"
assert_eq "the job's NVML figure includes it" $((3 * GiB + ctx)) "$(printf '%s' "$out" | jq '.jobs[-1].gpus[0].nvml_used_bytes')"
run vgpu ps
assert_contains "ps flags the job" "! 3.50 GiB outside the limiter (pid $opid)" "$out"
run vgpu top --once --json
assert_eq "top --json: the job's memory outside the limiter" "$((3 * GiB + ctx)) 1" \
  "$(printf '%s' "$out" | jq -r '.jobs[-1] | "\(.outside_bytes) \(.outside_processes)"')"
assert_eq "top --json: the process is the job's, outside the limiter" "true" \
  "$(printf '%s' "$out" | jq -r --argjson p "$opid" --arg j "$(vgpu ps -q | tail -n1)" \
     '.processes[] | select(.pid == $p) | .job == $j and .outside_limiter')"
assert_eq "top --json: in the job's NVML figure" $((3 * GiB + ctx)) "$(printf '%s' "$out" | jq '.jobs[-1].nvml_used_bytes')"
run env COLUMNS=200 vgpu top --once
assert_contains "top flags the job" "! 3.50 GiB outside the limiter (pid $opid)" "$out"

timeout 10 sh -c 'echo go > "$0/go"' "$T_DIR"
if poll_until 20 grep -q done "$T_DIR/second"; then ok "the second process ran"
else not_ok "the second process ran" "$(cat "$T_DIR/job.out")"; fi
assert_not_contains "a process under the limiter gets its context (3.5 + 0.5 GiB fit in 4)" "failed" "$(cat "$T_DIR/second")"
assert_contains "... but not 256 MiB more: the job as a whole would pass its limit" "alloc rc=2" "$(cat "$T_DIR/second")"
assert_contains "the refusal names the memory outside the limiter" "outside the limiter (pid $opid" "$(cat "$T_DIR/second")"
kill -KILL "$opid"
timeout 10 sh -c 'echo go > "$0/go"' "$T_DIR"
wait "$runner"

# Without vgpu ps: the job's processes measure it themselves (NVML, when they allocate).
vgpu run --mem 2G -- sh -c '
  env -u LD_PRELOAD alloc_probe alloc 1G hold > "$0/outside2" 2>&1 & p=$!
  wait_until 20 grep -q holding "$0/outside2"
  alloc_probe alloc 512M
  kill -KILL $p' "$T_DIR" > "$T_DIR/job2.out" 2>&1
assert_contains "the hook alone learns of the memory outside and refuses 512 MiB (1.5 + 0.5 + 0.5 > 2 GiB)" \
  "alloc rc=2" "$(cat "$T_DIR/job2.out")"

# CUDA_VISIBLE_DEVICES changed by a child: ordinals are mapped to the job's GPUs by UUID.
use_scenario mixed
gpu1=$(vgpu list --json | jq -r '.gpus[1].uuid')
gpu0=$(vgpu list --json | jq -r '.gpus[0].uuid')
run vgpu run --gpu 0 --mem 1G -- env CUDA_VISIBLE_DEVICES="$gpu1" alloc_probe alloc 256M
assert_contains "a context on a GPU that is not the job's is refused with OUT_OF_MEMORY" "cuDevicePrimaryCtxRetain(&ctx, dev) failed: 2" "$err"
assert_contains "... saying why" "is not one of the job's GPUs" "$err"
run vgpu run --gpu 0 --mem 1G -- env CUDA_VISIBLE_DEVICES="$gpu1,$gpu0" ALLOC_PROBE_DEVICE=1 alloc_probe alloc 768M
assert_contains "the job's GPU under another ordinal is still limited (768 MiB + 512 MiB context > 1 GiB)" \
  "alloc rc=2" "$out"
run vgpu run --gpu 0 --mem 1G -- env CUDA_VISIBLE_DEVICES="$gpu1,$gpu0" ALLOC_PROBE_DEVICE=1 alloc_probe alloc 256M meminfo
assert_contains "... and its view is the job's slice" "total=1073741824" "$out"

# Another user (nobody) on the same simulated GPU (VGPU_FAKE_SHARED): its job's child outside
# the limiter is found by nobody's own vgpu ps and counted against nobody's limit.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  public_bin; bin=$U_BIN
  use_scenario h100
  nb=$(mktemp -d /tmp/vgpu-outside-nobody.XXXXXX); chown nobody:nogroup "$nb"; chmod 0700 "$nb"
  shared=outside-$$-$RANDOM
  trap 'kill -KILL $(cat "$T_DIR/outside.pid" "$nb/outside.pid" 2>/dev/null) 2>/dev/null; rm -rf "$nb"
        rm -f "$VGPU_FAKE_SHARED_DIR/$shared.state"; t_cleanup' EXIT
  as_nobody() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups env -i HOME=/ PATH="$bin:/usr/bin:/bin" \
      LD_PRELOAD="${VGPU_TEST_PRELOAD:-}" ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
      LD_LIBRARY_PATH="$bin" VGPU_FAKE_SHARED="$shared" VGPU_FAKE_SHARED_DIR="$VGPU_FAKE_SHARED_DIR" VGPU_FAKE_SCENARIO="$VGPU_FAKE_SCENARIO" \
      VGPU_STATE_DIR="$nb/state" VGPU_LIBRARY="$bin/libvgpu.so" "$@"
  }
  as_nobody sh -c 'mkdir -m 0700 "$0/state" && mkfifo "$0/go"' "$nb"
  as_nobody vgpu run --mem 2G -- sh -c '
    env -u LD_PRELOAD alloc_probe alloc 1G hold > "$0/outside" 2>&1 & echo $! > "$0/outside.pid"
    read x < "$0/go"
    alloc_probe alloc 512M > "$0/second" 2>&1; echo done >> "$0/second"
    kill -KILL $(cat "$0/outside.pid")' "$nb" > "$T_DIR/nobody.out" 2>&1 &
  runner=$!
  # One TAP line whatever happens (ok or not ok): the plan is the same in every run.
  if poll_until 20 grep -q holding "$nb/outside"; then ok "nobody's child without LD_PRELOAD holds 1 GiB"
  else not_ok "nobody's child without LD_PRELOAD holds 1 GiB" "$(cat "$T_DIR/nobody.out")"; fi
  run as_nobody vgpu ps --json
  assert_eq "nobody's vgpu ps finds nobody's memory outside the limiter" $((GiB + ctx)) \
    "$(printf '%s' "$out" | jq '.jobs[-1].outside_bytes')"
  run env LD_LIBRARY_PATH="$bin" VGPU_FAKE_SHARED="$shared" VGPU_FAKE_SHARED_DIR="$VGPU_FAKE_SHARED_DIR" "$bin/vgpu" top --once --json
  assert_eq "root's vgpu top sees nobody's process on the shared GPU" "$(cat "$nb/outside.pid" || echo none)" \
    "$(printf '%s' "$out" | jq --argjson p "$(cat "$nb/outside.pid")" '.processes[] | select(.pid == $p) | .pid')"
  timeout 10 sh -c 'echo go > "$0/go"' "$nb"
  if poll_until 20 grep -q done "$nb/second"; then ok "nobody's second process ran"
  else not_ok "nobody's second process ran" "$(cat "$T_DIR/nobody.out")"; fi
  assert_contains "nobody's job is refused what would pass its limit (1.5 + 0.5 + 0.5 > 2 GiB)" "alloc rc=2" \
    "$(cat "$nb/second")"
  wait "$runner"
else
  for t in 1 2 3 4 5; do skip "another user's job outside the limiter ($t of 5)" "needs root and setpriv"; done
fi

done_testing
