# The simulated GPU's managed memory (issue 18, item 8): resident pages, migration on prefetch
# and launch, oversubscription, and eviction when another allocation needs the room. Runs the
# fake driver directly (no vgpu): on the fake of before, managed memory was charged in full at
# allocation, so every assertion about residency failed.
# Issue 37 (from "Migration costs time" on): on the h200 scenario, migration takes the time it
# took on an H200, prefetches are copies in stream order, advice works per 2 MiB range as the
# driver's did, and a process killed mid-migration leaves nothing charged. On the fake of before
# every migration was instant and advice applied to a whole allocation: those assertions failed.
# h100 scenario: 84,927,315,968 B usable, and each process's context costs 512 MiB.
. "$(dirname "$0")/lib.sh"

line() { printf '%s\n' "$out" | grep -E "^$1 " | sed -n "${2:-1}p"; }
total=84927315968
ctx=536870912
free0=$((total - ctx))
mod=2097152     # each `launch` loads the probe's module, which costs 2 MiB on the fake

run oversub_probe meminfo managed 120G meminfo prefetch meminfo evict meminfo launch meminfo ismanaged freeall meminfo
assert_eq "a managed allocation larger than the device succeeds" "managed rc=0 size=128849018880" "$(line managed)"
assert_eq "it takes no device memory until its pages are resident" "meminfo rc=0 free=$free0 total=$total" "$(line meminfo 2)"
assert_eq "a prefetch to the device fills the device, no more" "meminfo rc=0 free=0 total=$total" "$(line meminfo 3)"
assert_eq "a prefetch to the CPU gives the device memory back" "meminfo rc=0 free=$free0 total=$total" "$(line meminfo 4)"
assert_eq "a kernel's page faults migrate the pages in again" "meminfo rc=0 free=0 total=$total" "$(line meminfo 5)"
assert_eq "the pointer is managed" "ismanaged rc=0 v=1" "$(line ismanaged)"
assert_eq "freeing it gives the resident pages back" "meminfo rc=0 free=$((free0 - mod)) total=$total" "$(line meminfo 6)"

run oversub_probe managed 4G launch meminfo managed 4G launch meminfo
assert_eq "resident memory is counted in 2 MiB pages as it migrates" \
  "meminfo rc=0 free=$((free0 - 4 * 1073741824 - mod)) total=$total" "$(line meminfo 1)"
assert_eq "a second allocation migrates in beside the first" \
  "meminfo rc=0 free=$((free0 - 8 * 1073741824 - 2 * mod)) total=$total" "$(line meminfo 2)"

# Another process's ordinary allocation evicts resident managed pages instead of failing.
oversub_probe managed 100G launch meminfo hold >"$T_DIR/holder.out" 2>&1 &
holder=$!
if poll_until 10 grep -q holding "$T_DIR/holder.out"; then ok "a process fills the device with managed pages"; else not_ok "a process fills the device with managed pages" "$(cat "$T_DIR/holder.out")"; fi
assert_contains "... leaving nothing free" "meminfo rc=0 free=0 " "$(cat "$T_DIR/holder.out")"
run oversub_probe alloc 60G meminfo
assert_eq "cuMemAlloc beside it evicts managed pages instead of failing" "alloc rc=0 size=64424509440" "$(line alloc)"
kill "$holder"; wait "$holder" 2>/dev/null

run oversub_probe mapped 1G meminfo free
assert_eq "mapped host memory: cuMemHostAlloc(DEVICEMAP) + cuMemHostGetDevicePointer_v2" "mapped rc=0 size=1073741824" "$(line mapped)"
assert_eq "mapped host memory takes no device memory" "meminfo rc=0 free=$free0 total=$total" "$(line meminfo)"

# ---- Issue 37: migration costs time (scenarios/h200.json: an H200's rates, README.md "Managed
# memory's time": a kernel's faults 6.3 GB/s, a prefetch to the device 50 GB/s, 262 GB/s for
# pages never touched, to the host 15.5 GB/s). Lower bounds are the simulated times (a
# synchronize never returns before the work's end); upper bounds leave room for a loaded machine.
use_scenario h200
G=1073741824
total=150109880320          # the H200's 150,754,820,096 B less its 644,939,776 B reserve
free0=$((total - ctx))
secs() { line "$1" "${2:-1}" | sed -n 's/.* s=\([0-9.]*\).*/\1/p'; }
# A synchronize's wait counted from the prefetch call before it: a loaded machine's delay between
# the two calls shortens the wait, not this.
since() { line sync "$1" | sed -n 's/.* since=\([0-9.]*\).*/\1/p'; }
within() { # DESC SECONDS LO HI
  # uvm_probe prints milliseconds: a wait of 0.0164 s reads 0.016, so LO is held less half of one.
  if [ -n "$2" ] && awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo - 0.0005 && v <= hi) }'; then ok "$1 ($2 s)"
  else not_ok "$1" "took ${2:-nothing} s, want $3..$4 s; output: $out"; fi
}
gpu0() { fakegpu-ctl show | jq -r ".gpus[0].$1"; }
ns_to_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }

busy0=$(gpu0 busy_ns)
run uvm_probe managed 4G launch launch
busy1=$(gpu0 busy_ns)
within "a kernel whose page faults migrate 4 GiB in runs 4 GiB / 6.3 GB/s longer" "$(secs launch 1)" 0.681 4
within "... the next one, its pages resident, does not" "$(secs launch 2)" 0 0.3
within "... the faulting kernel is busy time on the GPU (NVML, fakegpu-ctl show)" "$(ns_to_s "$busy0" "$busy1")" 0.682 4

rx0=$(gpu0 pcie_rx_bytes); tx0=$(gpu0 pcie_tx_bytes); busy0=$(gpu0 busy_ns)
run uvm_probe managed 4G prefetch gpu sync prefetch host sync prefetch gpu sync launch
rx1=$(gpu0 pcie_rx_bytes); tx1=$(gpu0 pcie_tx_bytes); busy1=$(gpu0 busy_ns)
within "cuMemPrefetchAsync returns before the pages have moved" "$(secs 'prefetch gpu' 2)" 0 0.3
within "cuStreamSynchronize after a prefetch of 4 GiB never touched waits 4 GiB / 262 GB/s" "$(since 1)" 0.0163 1
within "... after a prefetch of 4 GiB to the host, 4 GiB / 15.5 GB/s" "$(since 2)" 0.277 2
within "... after a prefetch of 4 GiB of data back to the device, 4 GiB / 50 GB/s" "$(since 3)" 0.0858 1
within "a kernel on prefetched pages does not fault" "$(secs launch)" 0 0.3
within "prefetches are copies, not kernels: no busy time (only the 1 ms kernel's)" "$(ns_to_s "$busy0" "$busy1")" 0.001 0.05
assert_eq "... and the link counted them: 8 GiB in, 4 GiB out" "$((8 * G)) $((4 * G))" "$((rx1 - rx0)) $((tx1 - tx0))"

run uvm_probe managed 4G prefetch gpu sync advise cpu prefetch host launch
within "a kernel queued behind a prefetch on its stream waits for it (4 GiB / 15.5 GB/s)" "$(secs launch)" 0.277 2

# Advice, as the driver honours it (measured on the H200: a range preferred on the CPU and
# prefetched to the host is read over the link, not migrated, and stays so after UNSET).
tx0=$(gpu0 pcie_tx_bytes)
run uvm_probe managed 4G prefetch gpu sync meminfo advise cpu prefetch host sync meminfo launch meminfo \
  advise unset launch meminfo prefetch gpu sync launch meminfo
tx1=$(gpu0 pcie_tx_bytes)
assert_eq "prefetched to the device: 4 GiB resident" "meminfo rc=0 free=$((free0 - mod - 4 * G)) total=$total" "$(line meminfo 1)"
assert_eq "SET_PREFERRED_LOCATION CPU + a prefetch to the host: off the device, uncharged" \
  "meminfo rc=0 free=$((free0 - mod)) total=$total" "$(line meminfo 2)"
assert_eq "... counted once in the link's tx bytes" "$((4 * G))" "$((tx1 - tx0))"
within "... a kernel then reads them where they are: no fault migration" "$(secs launch 1)" 0 0.3
assert_eq "... and they stay on the host" "meminfo rc=0 free=$((free0 - mod)) total=$total" "$(line meminfo 3)"
within "after UNSET a kernel still reads them remotely (the device had mapped them)" "$(secs launch 2)" 0 0.3
assert_eq "... and they stay on the host" "meminfo rc=0 free=$((free0 - mod)) total=$total" "$(line meminfo 4)"
within "a prefetch to the device brings them back (4 GiB / 50 GB/s)" "$(since 3)" 0.0858 1
assert_eq "... resident again" "meminfo rc=0 free=$((free0 - mod - 4 * G)) total=$total" "$(line meminfo 5)"

run uvm_probe managed 4G advise cpu advise unset launch meminfo
within "UNSET before any kernel mapped them: a kernel migrates them by its faults again" "$(secs launch)" 0.681 4
assert_eq "... all 4 GiB" "meminfo rc=0 free=$((free0 - mod - 4 * G)) total=$total" "$(line meminfo)"

run uvm_probe managed 4G advise cpu 0 2G launch meminfo
within "advice on half an allocation: a kernel migrates the other half (2 GiB / 6.3 GB/s)" "$(secs launch)" 0.340 3
assert_eq "... and only that half is resident" "meminfo rc=0 free=$((free0 - mod - 2 * G)) total=$total" "$(line meminfo)"
run uvm_probe managed 4G prefetch gpu 0 1G sync prefetch gpu 0 1G sync meminfo
assert_eq "prefetching the same 1 GiB twice makes 1 GiB resident, not 2" \
  "meminfo rc=0 free=$((free0 - mod - G)) total=$total" "$(line meminfo)"

# Another process's cuMemAlloc evicts resident pages within 1 s; the holder's next kernel
# faults them back (slow); a prefetch back instead restores its speed. 100 GiB resident leave
# 42,196,729,856 B free; the allocating process needs 54,226,059,264 B (50 GiB, its context and
# its module), so 12,029,329,408 B are evicted: 1.909 s of faults, 0.241 s of prefetch.
uvm_probe managed 100G prefetch gpu sync launch say ready await "$T_DIR/go1" launch meminfo say faulted \
  await "$T_DIR/go2" prefetch gpu sync launch meminfo say done >"$T_DIR/holder.out" 2>&1 &
holder=$!
wait_until 20 grep -q '^ready' "$T_DIR/holder.out"
run uvm_probe alloc 50G
assert_eq "another process's cuMemAlloc beside 100 GiB of resident managed pages succeeds" "alloc rc=0" "$(line alloc | cut -d' ' -f1-2)"
within "... within 1 s" "$(secs alloc)" 0 1
touch "$T_DIR/go1"
wait_until 20 grep -q '^faulted' "$T_DIR/holder.out"
out=$(cat "$T_DIR/holder.out")
within "the holder's next kernel faults the evicted 12 GB back (12 GB / 6.3 GB/s)" "$(secs launch 2)" 1.909 8
assert_eq "... all of them" "meminfo rc=0 free=$((free0 - mod - 100 * G)) total=$total" "$(line meminfo 1)"
run uvm_probe alloc 50G
touch "$T_DIR/go2"
wait_until 20 grep -q '^done' "$T_DIR/holder.out"
out=$(cat "$T_DIR/holder.out")
within "evicted again, a prefetch brings them back at 50 GB/s" "$(since 2)" 0.240 2
within "... and the next kernel runs at device speed again" "$(secs launch 3)" 0 0.3
wait "$holder"

# A process killed mid-prefetch or mid-migration leaves nothing charged (its record is reaped,
# its queued work dropped); the GPU's busy time stays consistent.
gone() { [ "$(fakegpu-ctl show | jq '[.gpus[0].processes[]] | length')" = 0 ] && [ "$(gpu0 memory_used)" = 0 ]; }
charged() { [ "$(fakegpu-ctl show | jq --argjson p "$1" '[.gpus[0].processes[] | select(.pid == $p) | .memory] | add // 0')" -ge "$2" ]; }
uvm_probe managed 40G prefetch gpu sync advise cpu prefetch host say moving sync >"$T_DIR/kill1.out" 2>&1 &
victim=$!
wait_until 20 grep -q '^moving' "$T_DIR/kill1.out"
kill -9 "$victim"; wait "$victim" 2>/dev/null
assert_not_contains "killed while its 40 GiB prefetch to the host was in flight (2.8 s)" "sync rc=" \
  "$(sed -n '/^moving/,$p' "$T_DIR/kill1.out")"
if poll_until 5 gone; then ok "... then nothing of it is charged on the GPU"; else not_ok "... then nothing of it is charged on the GPU" "$(fakegpu-ctl show | jq -c '.gpus[0] | {memory_used, processes}')"; fi
busy0=$(gpu0 busy_ns); t0=$(fakegpu-ctl show | jq .now_ns)
uvm_probe managed 20G prefetch gpu sync prefetch host sync say faulting launch >"$T_DIR/kill2.out" 2>&1 &
victim=$!
wait_until 20 grep -q '^faulting' "$T_DIR/kill2.out"
wait_until 5 charged "$victim" $((20 * G))
kill -9 "$victim"; wait "$victim" 2>/dev/null
assert_not_contains "killed while its kernel faulted 20 GiB in (3.4 s)" "launch rc=0" "$(cat "$T_DIR/kill2.out")"
if poll_until 5 gone; then ok "... then nothing of it is charged on the GPU"; else not_ok "... then nothing of it is charged on the GPU" "$(fakegpu-ctl show | jq -c '.gpus[0] | {memory_used, processes}')"; fi
busy1=$(gpu0 busy_ns); t1=$(fakegpu-ctl show | jq .now_ns)
within "... the GPU's busy time grew, by no more than the time that passed" "$(ns_to_s "$busy0" "$busy1")" 0.001 "$(ns_to_s "$t0" "$t1")"
run uvm_probe alloc $((free0 - mod))
assert_eq "... and another process gets the whole GPU" "alloc rc=0" "$(line alloc | cut -d' ' -f1-2)"

# A scenario's rate must be a number of GB/s, 0 or more: else the simulated GPU does not start.
printf '{"gpus": [{"model": "h200", "uvm_fault_gbps": -1}]}\n' >"$T_DIR/bad.json"
VGPU_FAKE_SCENARIO=$T_DIR/bad.json VGPU_FAKE_STATE=$T_DIR/bad.state run fakegpu-ctl show
assert_rc "a negative uvm_fault_gbps: the simulated GPU refuses the scenario" 2
assert_contains "... saying which key and what it must be" "GPU 0: uvm_fault_gbps must be a number of GB/s from 0 (no time) to 100000, not -1" "$err"
done_testing
