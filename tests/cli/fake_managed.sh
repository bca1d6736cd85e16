# The simulated GPU's managed memory (issue 18, item 8): resident pages, migration on prefetch
# and launch, oversubscription, and eviction when another allocation needs the room. Runs the
# fake driver directly (no vgpu): on the fake of before, managed memory was charged in full at
# allocation, so every assertion about residency failed.
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
done_testing
