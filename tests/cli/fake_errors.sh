#!/usr/bin/env bash
# The simulated GPU's errors (issue 18 item 9) and how vgpu's hook lives with them: the compute
# mode refuses contexts (EXCLUSIVE_PROCESS: a second process; PROHIBITED: all) with
# CUDA_ERROR_DEVICE_UNAVAILABLE; a kernel fault breaks its context (CUDA_ERROR_ILLEGAL_ADDRESS
# from then on, frees included) until it is reset, and the job's memory accounting must not keep
# what the broken context held; a fragmented device refuses a large allocation although the free
# total would fit, and the job is not charged for the failed allocation.
source "$(dirname "$0")/lib.sh"

G=$((1 << 30))

# ---- compute mode ----
VGPU_FAKE_ROOT=1 run nvidia-smi -i 0 -c EXCLUSIVE_PROCESS
assert_rc "the GPU goes EXCLUSIVE_PROCESS" 0
alloc_probe hold >"$T_DIR/holder" 2>&1 &
holder=$!
wait_until 20 grep -q holding "$T_DIR/holder"
run alloc_probe meminfo
assert_rc "EXCLUSIVE_PROCESS: a second process cannot create a context" 2
assert_contains "... CUDA_ERROR_DEVICE_UNAVAILABLE (46)" "failed: 46" "$err"
run vgpu run --mem 2G -- alloc_probe meminfo
assert_contains "... through vgpu's hook too" "failed: 46" "$err"
kill $holder; wait $holder 2>/dev/null
run alloc_probe meminfo
assert_rc "EXCLUSIVE_PROCESS: once the holder is gone, the next one gets the GPU" 0
VGPU_FAKE_ROOT=1 run nvidia-smi -i 0 -c PROHIBITED
run alloc_probe meminfo
assert_contains "PROHIBITED: no process gets a context" "failed: 46" "$err"
VGPU_FAKE_ROOT=1 run nvidia-smi -i 0 -c DEFAULT
run alloc_probe meminfo
assert_rc "DEFAULT again: contexts work" 0

# ---- sticky errors after a kernel fault ----
run alloc_probe alloc 1G fault free ctxreset alloc 1G
assert_contains "the fault kernel launches (asynchronously)" "fault rc=0 sync=700 after=700" "$out"
assert_contains "a broken context frees nothing: cuMemFree returns the sticky error" "free rc=700" "$out"
assert_contains "a reset gives a working context" "ctxreset rc=0 retain=0" "$out"
# Under a 3 GiB cap (the context's 512 MiB counts): 1 GiB held by the broken context, then a
# reset and 2 GiB. Fits only if the hook forgot what the broken context held.
run vgpu run --mem 3G -- alloc_probe alloc 1G fault free ctxreset alloc 2G meminfo
assert_rc "a job survives its sticky error" 0
assert_contains "the hook passes the sticky error on" "free rc=700" "$out"
assert_contains "after the reset the job may use its whole cap again" "alloc rc=0 size=$((2 * G))" "$out"
free=$(printf '%s\n' "$out" | sed -n 's/^meminfo rc=0 free=\([0-9]*\).*/\1/p')
assert_eq "the job's view: 3 GiB less the new context and the 2 GiB" $((3 * G - G / 2 - 2 * G)) "${free:-none}"

# ---- fragmentation ----
fakegpu-ctl hold 0 $((60 * G)) 30 >"$T_DIR/big" 2>&1 &
big=$!
wait_until 20 grep -q ready "$T_DIR/big"
# About 18.7 GiB stay free; fragmented at 50 %, one allocation gets at most about 9.1 GiB of it.
run alloc_probe meminfo alloc 10G
assert_contains "unfragmented: 10 GiB fit in the free memory" "alloc rc=0 size=$((10 * G))" "$out"
run fakegpu-ctl fragment 0 50
assert_rc "fakegpu-ctl fragment 0 50" 0
run alloc_probe meminfo alloc 10G alloc 3G
avail=$(printf '%s\n' "$out" | sed -n 's/^meminfo rc=0 free=\([0-9]*\).*/\1/p')
if [ "${avail:-0}" -gt $((10 * G)) ]; then ok "the free total would fit 10 GiB ($avail bytes)"; else not_ok "free total" "$out"; fi
assert_contains "fragmented: 10 GiB do not (CUDA_ERROR_OUT_OF_MEMORY)" "alloc rc=2 size=$((10 * G))" "$out"
assert_contains "fragmented: 3 GiB still do" "alloc rc=0 size=$((3 * G))" "$out"
run vgpu run --mem 14G -- alloc_probe alloc 10G alloc 3G meminfo
assert_contains "under the hook: the driver's refusal comes through" "alloc rc=2 size=$((10 * G))" "$out"
free=$(printf '%s\n' "$out" | sed -n 's/^meminfo rc=0 free=\([0-9]*\).*/\1/p')
assert_eq "the job is not charged for the refused 10 GiB" $((14 * G - G / 2 - 3 * G)) "${free:-none}"
run fakegpu-ctl fragment 0 100
assert_rc "fragment takes 0..99" 2
assert_contains "... and says so" "0..99" "$err"
fakegpu-ctl fragment 0 0
kill $big; wait $big 2>/dev/null

done_testing
