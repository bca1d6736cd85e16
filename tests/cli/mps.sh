# vgpu mps start|stop|status|set with the fake nvidia-cuda-mps-control (a real daemon process on
# a pipe directory, mirroring its state into the simulated GPU's state file).
. "$(dirname "$0")/lib.sh"
P=$T_DIR/pipe L=$T_DIR/log
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
daemon_pid() { cat "$P/nvidia-cuda-mps-control.pid" 2>/dev/null; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
not_alive() { ! alive "$1"; }
# Cleanup, not a test: the daemon is gone before its directory is removed.
stop_all() {
  local d; d=$(daemon_pid)
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control >/dev/null 2>&1
  [ -z "$d" ] || poll_until 10 not_alive "$d"
}
trap 'stop_all; t_cleanup' EXIT

run vgpu mps status --pipe-dir "$P"
assert_rc "status without a daemon exits 0" 0
assert_contains "status without a daemon says how to start one" "vgpu mps start" "$out"
run vgpu mps status --pipe-dir "$P" --json
assert_eq "status --json without a daemon: running false" false "$(jq -r .running <<<"$out")"
run vgpu mps set --core 30 --pipe-dir "$P"
assert_rc "set without a daemon: not found" 8
assert_contains "set without a daemon: how to start one" "vgpu mps start" "$err"
run vgpu mps stop --pipe-dir "$P"
assert_rc "stop without a daemon is a no-op" 0

run vgpu mps start --pipe-dir "$P" --log-dir "$L" --gpu 0
assert_rc "start" 0
assert_contains "start names the pipe directory" "$P" "$out"
pid=$(daemon_pid)
alive "$pid" && ok "the daemon runs" || not_ok "the daemon runs"
[ -S "$P/control" ] && ok "the control socket exists" || not_ok "the control socket exists"
assert_contains "the daemon got the GPU by UUID" "GPU-" "$(cat "$VGPU_STATE_DIR/mps.json")"
run vgpu mps start --pipe-dir "$P" --log-dir "$L"
assert_rc "a second start: busy" 7
assert_contains "a second start: says one runs" "already running" "$err"
assert_eq "a second start leaves the first alone" "$pid" "$(daemon_pid)"

# The other verbs find the daemon through the record, without --pipe-dir.
run vgpu mps status
assert_rc "status" 0
assert_contains "status shows the defaults" "active threads 100.0%" "$out"
assert_contains "status: no server yet" "No MPS server is running" "$out"
run vgpu mps set --core 25 --mem 2G
assert_rc "set --core --mem" 0
assert_contains "set reports the percentage" "25.0" "$out"
run vgpu mps status --json
assert_eq "status --json: default_active_thread_percent" 25 "$(jq -r '.default_active_thread_percent' <<<"$out")"
assert_eq "status --json: default pinned limit" 2147483648 "$(jq -r '.default_pinned_mem_limits[0].limit_bytes' <<<"$out")"
assert_eq "status --json: daemon pid" "$pid" "$(jq -r '.daemon_pid' <<<"$out")"
run vgpu mps set
assert_rc "set with nothing to set" 2
run vgpu mps set --core 0
assert_rc "set --core 0 is refused" 2
run vgpu mps set --core 101
assert_rc "set --core 101 is refused" 2

# A client: a process that maps libcuda.so.1 with the pipe directory in its environment.
CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20 CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G \
  LD_PRELOAD=$VGPU_BUILD/fakegpu/libcuda.so.1 sleep 30 &
client=$!
# servers N: vgpu mps status lists N servers ($out is kept: wait_until runs it in this shell)
servers() { run vgpu mps status --json; [ "$(jq '.servers | length' <<<"$out")" = "$1" ]; }
wait_until 20 servers 1
assert_eq "a server started for the client" 1 "$(jq '.servers | length' <<<"$out")"
assert_eq "the server took the default percentage" 25 "$(jq -r '.servers[0].active_thread_percent' <<<"$out")"
assert_eq "the server took the default pinned limit" 2147483648 "$(jq -r '.servers[0].pinned_mem_limits[0].limit_bytes' <<<"$out")"
assert_eq "the client is listed" "$client" "$(jq -r '.servers[0].clients[0].pid' <<<"$out")"
assert_eq "the client's own percentage" 20 "$(jq -r '.servers[0].clients[0].active_thread_percent' <<<"$out")"
assert_eq "the client's own pinned limit" "0=1G" "$(jq -r '.servers[0].clients[0].pinned_mem_limit' <<<"$out")"
server=$(jq -r '.servers[0].pid' <<<"$out")
run vgpu mps status
assert_match "status table lists the server" "^$server +[0-9]+ +ACTIVE +25.0%" "$out"
assert_match "status table lists the client" "^  $client +sleep +20 +0=1G" "$out"
run vgpu mps set --core 50
assert_contains "set with a running server says it keeps its limits" "running server keeps" "$out"

run vgpu mps stop
assert_rc "stop" 0
alive "$pid" && not_ok "the daemon is gone" || ok "the daemon is gone"
alive "$server" && not_ok "its server is gone" || ok "its server is gone"
[ -e "$P/nvidia-cuda-mps-control.pid" ] && not_ok "the pid file is gone" || ok "the pid file is gone"
[ -e "$VGPU_STATE_DIR/mps.json" ] && not_ok "the record is gone" || ok "the record is gone"
kill $client 2>/dev/null; wait $client 2>/dev/null

# --json of start and stop.
run vgpu mps start --pipe-dir "$P" --log-dir "$L" --json
assert_rc "start --json" 0
assert_eq "start --json: running" true "$(jq -r .running <<<"$out")"
assert_eq "start --json: pipe_dir" "$P" "$(jq -r .pipe_dir <<<"$out")"
run vgpu mps stop --json
assert_eq "stop --json: stopped" true "$(jq -r .stopped <<<"$out")"

# A start that fails half-way leaves nothing running.
for fault in deaf die exit; do
  VGPU_FAKE_MPS_FAULT=$fault run vgpu mps start --pipe-dir "$P" --log-dir "$L"
  assert_rc "start, daemon '$fault': fails" 1
  assert_contains "start, daemon '$fault': says nothing was left running" "nothing was left running" "$err"
  p=$(daemon_pid)
  alive "$p" && not_ok "start, daemon '$fault': no daemon left" "pid $p" || ok "start, daemon '$fault': no daemon left"
  [ -e "$VGPU_STATE_DIR/mps.json" ] && not_ok "start, daemon '$fault': no record" || ok "start, daemon '$fault': no record"
done
# No daemon or server of this pipe directory is left (plain /proc walk: pgrep hangs under ASan).
stray=""
for d in /proc/[0-9]*; do
  case $(cat "$d/comm" 2>/dev/null) in
    nvidia-cuda-mps*) tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qxF "CUDA_MPS_PIPE_DIRECTORY=$P" && stray="$stray ${d#/proc/}" ;;
  esac
done
[ -z "$stray" ] && ok "no stray daemons" || not_ok "no stray daemons" "pids:$stray"

VGPU_MPS_CONTROL=$T_DIR/none run vgpu mps start --pipe-dir "$P"
assert_rc "control program missing: exit status 3" 3
assert_contains "control program missing: names VGPU_MPS_CONTROL" "VGPU_MPS_CONTROL" "$err"
run vgpu mps start --gpu 5 --pipe-dir "$P"
assert_rc "start on an unknown GPU" 2
run vgpu mps stop --gpu 0
assert_rc "--gpu belongs to start" 2
run vgpu mps status --core 5
assert_rc "--core belongs to set" 2
run vgpu mps restart
assert_rc "unknown verb" 2
for t in ' 5' +5 -0; do
  run vgpu mps stop --pipe-dir "$P" --timeout "$t"
  assert_rc "stop --timeout '$t' is refused: whole seconds, digits only" 2
done

# An empty --pipe-dir is the daemon's machine-wide default (/tmp/nvidia-mps): refused before any
# control program runs. A spy stands in for it, so that a vgpu that does run it starts nothing.
printf '#!/bin/sh\necho "$*" >>"%s/spy.ran"\nexit 1\n' "$T_DIR" >"$T_DIR/spy"; chmod +x "$T_DIR/spy"
for verb in start stop status; do
  run env VGPU_MPS_CONTROL="$T_DIR/spy" vgpu mps $verb --pipe-dir ''
  assert_rc "$verb --pipe-dir '': bad usage" 2
  assert_contains "$verb --pipe-dir '': says why" "not an empty string" "$err"
done
run env VGPU_MPS_CONTROL="$T_DIR/spy" vgpu mps set --core 20 --pipe-dir ''
assert_rc "set --pipe-dir '': bad usage" 2
run env VGPU_MPS_CONTROL="$T_DIR/spy" vgpu mps start --pipe-dir "$P" --log-dir ''
assert_rc "start --log-dir '': bad usage" 2
[ ! -e "$T_DIR/spy.ran" ] && ok "an empty directory runs no control program" \
  || not_ok "an empty directory runs no control program" "it ran: $(cat "$T_DIR/spy.ran")"

# The control program's own behaviour (what vgpu relies on).
run sh -c "echo bogus_cmd | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control"
assert_contains "fake control: no daemon" "Cannot find MPS control daemon process" "$out"
assert_rc "fake control: no daemon exits 1" 1
CUDA_MPS_PIPE_DIRECTORY=$P CUDA_MPS_LOG_DIRECTORY=$L nvidia-cuda-mps-control -d
run sh -c "echo bogus_cmd | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control"
assert_eq "fake control: unknown command text" 'Unknown command "bogus_cmd"' "$out"
assert_rc "fake control: unknown command exits 0" 0
run sh -c "echo set_default_active_thread_percentage 150 | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control"
assert_eq "fake control: percentages are clamped" "100.0" "$out"
run sh -c "echo set_default_device_pinned_mem_limit 0 1536M | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control; echo get_default_device_pinned_mem_limit 0 | CUDA_MPS_PIPE_DIRECTORY=$P nvidia-cuda-mps-control"
assert_eq "fake control: limits read back in whole G" "1G" "$out"
run vgpu mps stop --pipe-dir "$P"
assert_rc "stop a daemon vgpu did not start" 0
done_testing
