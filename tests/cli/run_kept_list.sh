# vgpu run without an arbiter starts a job from the GPU list NVML gave an earlier job while the
# driver shows the same GPUs (vgpu/gpu_cache.h, issue 34 item 1): NVML's initialisation was
# ~20 ms of every job's start on an H200. The driver's /proc files are a directory of this
# script's (VGPU_NVIDIA_PROC), made as the driver makes them. On the code before, vgpu run always
# loaded NVML: with a 2 s nvmlInit it took over 2 s every time (row 2).
source "$(dirname "$0")/lib.sh"

ms_of() { local a z; a=$(date +%s%3N); "$@" >"$T_DIR/.out" 2>"$T_DIR/.err"; rc=$?; z=$(date +%s%3N); ms=$((z - a)); }
proc=$T_DIR/proc-nvidia
uuid=$(vgpu list --json | jq -r '.gpus[0].uuid') bus=$(vgpu list --json | jq -r '.gpus[0].pci_bus_id')
mkdir -p "$proc/gpus/$bus" "$proc/capabilities/mig"
printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\n' >"$proc/version"
printf 'Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t 0\n' \
  "$uuid" "$bus" >"$proc/gpus/$bus/information"
export VGPU_NVIDIA_PROC=$proc
kept=$VGPU_STATE_DIR/gpus.cache
# The file's header: magic(8) entry_size(4) count(4) fingerprint(8) written_s(8, CLOCK_BOOTTIME) boot_id.
# Python, not dd: dd dies under make asan's preloaded runtimes (an aligned_alloc it makes).
patch_kept() { python3 - "$kept" "$@" <<'PY'
import struct, sys, time
path, what, arg = sys.argv[1:4]
with open(path, 'r+b') as f:
    if what == 'boot':
        f.seek(32); f.write(arg.encode())
    else:   # 'age': written_s ARG seconds ago
        f.seek(24); f.write(struct.pack('<Q', max(0, int(time.clock_gettime(time.CLOCK_BOOTTIME)) - int(arg))))
PY
}

must vgpu run --mem 1G -- true
check "a job that asked NVML keeps the GPU list, 0600" test "$(stat -c %a "$kept" 2>/dev/null)" = 600

ms_of env VGPU_FAKE_FAIL=slow=nvmlInit_v2:2000 VGPU_LOG=debug vgpu run --mem 50% -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
if [ "$rc" = 0 ] && [ "$ms" -lt 1500 ]; then ok "the next job starts without NVML (nvmlInit 2 s there; $ms ms)"
else not_ok "the next job starts without NVML" "rc $rc, $ms ms: $(cat "$T_DIR/.err")"; fi
check "... vgpu run says it placed by the kept list" grep -q "placing by the GPU list kept" "$T_DIR/.err"
assert_eq "... on the GPU the list names" "$uuid" "$(cat "$T_DIR/.out")"
run vgpu acct --json
assert_contains "... and its record names that GPU" "$uuid" "$out"

# A change in the driver's files: NVML is asked again (and the list kept anew).
printf 'Device Minor: \t 1\n' >>"$proc/gpus/$bus/information"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_contains "a GPU whose /proc information changed: NVML is asked" "the driver's GPUs changed since" "$err"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_contains "... and the list NVML gave is kept for the next job" "placing by the GPU list kept" "$err"
mkdir "$proc/capabilities/gpu0"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_contains "a MIG capability made or destroyed (capabilities/ changed): NVML is asked" "the driver's GPUs changed since" "$err"

# A damaged file, one from another boot, one too old: NVML is asked, the job runs, a good list
# is written over it.
must vgpu run --mem 1G -- true
head -c 100 /dev/urandom >"$kept"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_rc "a damaged kept list: the job runs" 0
assert_contains "... NVML is asked, saying why" "damaged or from another vgpu" "$err"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_contains "... and a good list replaces it" "placing by the GPU list kept" "$err"
must patch_kept boot 00000000-0000-0000-0000-000000000000
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_contains "a list from another boot is not used" "from another boot" "$err"
must vgpu run --mem 1G -- true
must patch_kept age 30
run env VGPU_LOG=debug VGPU_GPU_CACHE_S=5 vgpu run --mem 1G -- true
assert_contains "a list older than VGPU_GPU_CACHE_S is not used" "too old" "$err"
rm -f "$kept"
run env VGPU_GPU_CACHE_S=0 vgpu run --mem 1G -- true
check "VGPU_GPU_CACHE_S=0: no list is kept" test ! -e "$kept"

# The check while the command runs: a GPU lost after the list was kept. The job was set up from
# the list (it says so), the list is forgotten, and the next job is refused by NVML's answer.
must vgpu run --mem 1G -- true
fakegpu-ctl lose 0 >/dev/null
run vgpu run --mem 1G -- sleep 0.6
assert_contains "a GPU lost since the list was kept: said while the job runs" "out of date: $uuid is lost now" "$err"
check "... and the list is forgotten" test ! -e "$kept"
run vgpu run --mem 1G -- true
if [ "$rc" != 0 ] && grep -q "GPU 0 is lost" <<<"$err"; then ok "... so the next job is refused by NVML's answer (exit $rc)"
else not_ok "... so the next job is refused by NVML's answer" "rc $rc: $err"; fi
check "... and a list with a lost GPU is not kept" test ! -e "$kept"
fakegpu-ctl find 0 >/dev/null

# A list that agrees is kept again by the check: its age starts over.
must vgpu run --mem 1G -- true
must patch_kept age 30
run env VGPU_LOG=debug vgpu run --mem 1G -- sleep 0.6
# 30 s, or 31 where a second turned between the patch and the look (CI's make test).
assert_match "a list 30 s old is used" "placing by the GPU list kept 3[01] s ago" "$err"
run env VGPU_LOG=debug vgpu run --mem 1G -- true
assert_match "a list the check found right is kept again (its age starts over)" "placing by the GPU list kept [0-9] s ago" "$err"

# vgpu mig forgets it; without the driver's /proc files none is kept.
must vgpu run --mem 1G -- true
run vgpu mig enable --gpu 0
check "vgpu mig enable forgets the kept list" test ! -e "$kept"
run vgpu mig disable --gpu 0
rm -f "$kept"
VGPU_NVIDIA_PROC=$T_DIR/none run vgpu run --mem 1G -- true
check "without the driver's /proc files no list is kept" test ! -e "$kept"
done_testing
