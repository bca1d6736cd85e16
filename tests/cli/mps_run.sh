# vgpu run --mps: the job becomes an MPS client (environment), is a vgpu job like any other,
# and fails clearly without a daemon.
. "$(dirname "$0")/lib.sh"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
P=$T_DIR/pipe
trap 'vgpu mps stop --pipe-dir "$P" --force --timeout 2 >/dev/null 2>&1; t_cleanup' EXIT
show='echo "pipe=$CUDA_MPS_PIPE_DIRECTORY pct=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE-unset} pin=${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT-unset}"'

VGPU_STATE_DIR=$T_DIR/other run vgpu run --mps -- true
assert_rc "no daemon: vgpu run's own error" 125
assert_contains "no daemon: says how to start one" "vgpu mps start" "$err"

run vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0
assert_rc "start the daemon" 0
run vgpu run --mps --core 25 --mem 1536M -- sh -c "$show"
assert_rc "run --mps" 0
assert_eq "the job is a client of the daemon with its limits" "pipe=$P pct=25 pin=0=1536M" "$out"
run vgpu run --mps --mem 2G -- sh -c "$show"
assert_eq "without --core: no percentage" "pipe=$P pct=unset pin=0=2G" "$out"
run vgpu run --mps -- sh -c "$show"
assert_eq "without limits: only the pipe directory" "pipe=$P pct=unset pin=unset" "$out"
run vgpu run --core 25 -- sh -c "$show"
assert_eq "without --mps nothing of MPS" "pipe= pct=unset pin=unset" "$out"
run vgpu run --mps --core 25 --core-policy soft -- true
assert_rc "--core-policy with --mps is refused" 125
assert_contains "and says why" "active thread percentage" "$err"

# The job is a vgpu job like any other: vgpu ps lists it.
# (It runs until killed below, so that a slow machine cannot see it end first.)
vgpu run --mps --core 30 --mem 1G --name mpsjob -- sleep 120 &
listed() { run vgpu ps; case $out in *mpsjob*) return 0 ;; esac; return 1; }   # keeps $out
wait_until 20 listed
assert_contains "vgpu ps lists the MPS job" "mpsjob" "$out"
run vgpu ps --json
assert_eq "its memory limit is vgpu's too" 1073741824 \
  "$(jq -r '[.. | objects | select(.name? == "mpsjob")][0] | [.. | .mem_limit_bytes? // empty][0]' <<<"$out")"
kill %1 2>/dev/null; wait 2>/dev/null

# A daemon started for another GPU does not serve the job.
cat >"$T_DIR/two.json" <<'J'
{ "gpus": [ { "model": "h100-80gb", "uuid": "GPU-11111111-2222-4333-8444-555555555555" },
            { "model": "h100-80gb", "uuid": "GPU-66666666-7777-4888-9999-000000000000" } ] }
J
vgpu mps stop >/dev/null
export VGPU_FAKE_SCENARIO=$T_DIR/two.json; rm -f "$VGPU_FAKE_STATE"
run vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0
run vgpu run --mps --gpu 1 -- true
assert_rc "a GPU the daemon does not serve: refused" 125
assert_contains "and says which" "does not serve GPU-66666666" "$err"
run vgpu run --mps --gpu 1,0 --mem 1G -- sh -c "$show"
assert_rc "two GPUs, one not served: refused" 125
done_testing
