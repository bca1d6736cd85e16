# vgpu run places a job by the GPU list of the arbiter that runs, instead of loading NVML itself
# (issue 34 item 1): NVML's initialisation and first attach were ~20 ms of every job's start on
# an H200. The list is the daemon's NVML read again at the request (at most 20 ms before), so a
# GPU lost since the daemon started is refused as before. On the code before, vgpu run always
# loaded NVML: with a 2 s nvmlInit in its process it took over 2 s with the daemon too (row 1).
source "$(dirname "$0")/lib.sh"
use_scenario h100x2

ms_of() { local a z; a=$(date +%s%3N); "$@" >"$T_DIR/.out" 2>"$T_DIR/.err"; rc=$?; z=$(date +%s%3N); ms=$((z - a)); }

daemon_start || { not_ok "the arbiter starts" "$(cat "$T_DIR/daemon.log")"; done_testing; }
uuid1=$(vgpu list --json | jq -r '.gpus[1].uuid')

ms_of env VGPU_FAKE_FAIL=slow=nvmlInit_v2:2000 VGPU_LOG=debug vgpu run --mem 1G -- true
if [ "$rc" = 0 ] && [ "$ms" -lt 1500 ]; then ok "through the daemon, a job starts without vgpu run's own NVML (nvmlInit 2 s there; $ms ms)"
else not_ok "through the daemon, a job starts without vgpu run's own NVML" "rc $rc, $ms ms: $(cat "$T_DIR/.err")"; fi
check "... vgpu run says it placed by the arbiter's list" grep -q "placing by the arbiter's list of" "$T_DIR/.err"
check "... and where it placed the job (a GPU NVML lists)" grep -q "placed on GPU [0-9] (GPU-" "$T_DIR/.err"

ms_of vgpu run --gpu 1 --mem 1G -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
assert_eq "--gpu 1 by the arbiter's list is NVML's GPU 1" "$uuid1" "$(cat "$T_DIR/.out")"

# A GPU lost after the daemon read its list: a job started 20 ms later at most sees it (the
# list is read again unless it was read in the last 20 ms: the rate limit of a flood).
fakegpu-ctl lose 1 >/dev/null
lost_at=$(date +%s%3N)
refused() { ms_of vgpu run --gpu 1 --mem 1G -- true; [ "$rc" != 0 ]; }
poll_until 2 refused
after=$(( $(date +%s%3N) - lost_at ))
if [ "$rc" != 0 ] && grep -q "GPU 1 is lost" "$T_DIR/.err" && [ "$after" -lt 1000 ]; then
  ok "a GPU lost since the daemon started is refused by name (exit $rc, $after ms after it was lost)"
else not_ok "a GPU lost since the daemon started is refused by name within 1 s" "rc $rc after $after ms: $(cat "$T_DIR/.err")"; fi
ms_of vgpu run --mem 1G -- true
if [ "$rc" = 0 ] && ! grep -q "placed on GPU 1 " "$T_DIR/.err"; then ok "... and placement chooses among the others"
else not_ok "... and placement chooses among the others" "rc $rc: $(cat "$T_DIR/.err")"; fi
fakegpu-ctl find 1 >/dev/null

# --oversubscribe needs each GPU's memory in use now, so it asks NVML itself, as does a job
# without a daemon: the slow nvmlInit shows in both (the control for row 1).
ms_of env VGPU_FAKE_FAIL=slow=nvmlInit_v2:2000 vgpu run --mem 1G --oversubscribe -- true
if [ "$ms" -ge 2000 ]; then ok "--oversubscribe asks NVML itself ($ms ms with a 2 s nvmlInit)"
else not_ok "--oversubscribe asks NVML itself" "rc $rc, $ms ms: $(cat "$T_DIR/.err")"; fi
daemon_stop
ms_of env VGPU_FAKE_FAIL=slow=nvmlInit_v2:2000 vgpu run --mem 1G -- true
if [ "$rc" = 0 ] && [ "$ms" -ge 2000 ]; then ok "without a daemon vgpu run asks NVML ($ms ms with a 2 s nvmlInit)"
else not_ok "without a daemon vgpu run asks NVML" "rc $rc, $ms ms: $(cat "$T_DIR/.err")"; fi
done_testing
