# The rate of migration of an oversubscribed job's spilled memory (issue 15, item 4): vgpu ps,
# vgpu top and their JSON read the GPU's PCIe byte counters (NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES,
# lib/core/gpu/migration.c) and give the jobs with memory off the device their share; the screen and
# the table say "migrating ..." only while it is high (100 MB/s); JSON says null where the
# driver has no counter, never 0. On the code before, no key migration_bytes_per_s existed and
# nothing said "migrating": every assertion on them failed.
# The simulated GPU counts managed pages migrating in and out, and host<->device copies
# (tests/fakegpu/README.md). Here a holder leaves room for the job's context and 1.5 GiB; the job
# spills two 1 GiB buffers (its device share, 1 GiB, is its context and no more) and launches a
# kernel every 20 ms, each of which makes both buffers resident: about 1 GiB in and 1 GiB out
# per step.
. "$(dirname "$0")/lib.sh"

G=1073741824
ctx=536870912

# The simulated GPU's counters: pages migrating in count as received, out as transmitted, copies
# between host and device memory as well; freeing resident pages moves nothing.
pcie() { fakegpu-ctl show | jq -r '.gpus[0] | "\(.pcie_tx_bytes) \(.pcie_rx_bytes)"'; }
assert_eq "fake: a fresh GPU has moved nothing" "0 0" "$(pcie)"
must oversub_probe managed 1G prefetch evict prefetch free
assert_eq "fake: prefetch, evict, prefetch of 1 GiB: 2 GiB in, 1 GiB out" "$G $((2 * G))" "$(pcie)"
must oversub_probe alloc 64M upload
assert_eq "fake: a 64 MiB copy to device memory counts too" "$G $((2 * G + 64 * 1048576))" "$(pcie)"

fakegpu-ctl hold 0 $((84927315968 - 3 * ctx - 3 * G / 2)) 120 >"$T_DIR/hold.out" 2>&1 &
wait_until 10 grep -q ready "$T_DIR/hold.out"
vgpu run --name mig --mem 8G --oversubscribe=1G -- oversub_probe alloc 1G alloc 1G churn 60000 >"$T_DIR/mig.out" 2>&1 &
mig=$!
# beside it: an oversubscribed job with nothing off the device, and a job without the option
vgpu run --name still --mem 4G --oversubscribe=2G -- oversub_probe hold >"$T_DIR/still.out" 2>&1 &
vgpu run --name plain --mem 4G -- oversub_probe hold >"$T_DIR/plain.out" 2>&1 &
wait_until 10 grep -q holding "$T_DIR/still.out"
wait_until 10 grep -q holding "$T_DIR/plain.out"
wait_until 10 sh -c "grep -c '^alloc rc=0' '$T_DIR/mig.out' | grep -qx 2"

rate() { printf '%s' "$out" | jq -r ".jobs[] | select(.name == \"$1\") | .migration_bytes_per_s"; }
high() { [ "$1" != null ] && [ "$1" -ge 100000000 ]; }

run vgpu ps --json
r=$(rate mig) rg=$(printf '%s' "$out" | jq -r '.jobs[] | select(.name == "mig") | .gpus[0].migration_bytes_per_s')
if high "$r" && [ "$r" = "$rg" ]; then ok "ps --json: the churning job migrates ($r B/s), per job and per GPU"
else not_ok "ps --json: the churning job migrates, per job and per GPU" "job $r, gpu $rg"; fi
assert_eq "ps --json: an oversubscribed job with nothing off the device gets none of it" 0 "$(rate still)"
assert_eq "ps --json: a job without --oversubscribe: null" null "$(rate plain)"
run vgpu ps
assert_match "vgpu ps says it under the job's row" "~ 2 GiB of [0-9.]+ GiB off the device \(at most 1 GiB on GPU 0\), migrating [0-9.]+ (GB|MB)/s" "$out"
assert_eq "... and only there" 1 "$(printf '%s\n' "$out" | grep -c migrating)"

run vgpu top --json -n 2 -d 0.5
r1=$(printf '%s\n' "$out" | sed -n 1p | jq -r '.jobs[] | select(.name == "mig") | .migration_bytes_per_s')
r2=$(printf '%s\n' "$out" | sed -n 2p | jq -r '.jobs[] | select(.name == "mig") | .migration_bytes_per_s')
if high "$r1" && high "$r2"; then ok "top --json: the first sample (a short window) and the next (the interval): $r1, $r2 B/s"
else not_ok "top --json: a rate in both samples" "$r1 $r2"; fi
assert_eq "top --json: the other jobs: 0 and null" "0 null" \
  "$(printf '%s\n' "$out" | sed -n 2p | jq -r '[(.jobs[] | select(.name == "still") | .migration_bytes_per_s), (.jobs[] | select(.name == "plain") | .migration_bytes_per_s)] | map(tostring) | join(" ")')"
run env COLUMNS=200 vgpu top --once
assert_match "the top snapshot flags it" "~ 2 GiB off the device, migrating [0-9.]+ (GB|MB)/s" "$out"

# A 32-bit counter wraps at 4 GiB, faster than top's interval at PCIe speed: the rate then comes
# from a window short enough (26 ms), in every sample.
run env VGPU_FAKE_PCIE_COUNTER=32 vgpu top --json -n 3 -d 0.2
rs=$(printf '%s\n' "$out" | jq -r '.jobs[] | select(.name == "mig") | .migration_bytes_per_s' | tr '\n' ' ')
case "$rs" in *null*|"") not_ok "32-bit counters: a rate in every sample" "$rs" ;; *) ok "32-bit counters: a rate in every sample ($rs)" ;; esac

# A driver without the counters (older than 550): null and no flag, never a made-up 0.
run env VGPU_FAKE_PCIE_COUNTER=none vgpu ps --json
assert_eq "no counter: ps --json says null for the oversubscribed jobs" "null null" "$(rate mig) $(rate still)"
run env VGPU_FAKE_PCIE_COUNTER=none vgpu top --json -n 1
assert_eq "no counter: top --json says null" null "$(rate mig)"
run env VGPU_FAKE_PCIE_COUNTER=none vgpu ps
assert_not_contains "no counter: no flag" migrating "$out"
kill "$mig"; wait "$mig" 2>/dev/null

# Memory off the device that does not move: a real 0, and no flag.
vgpu run --name idle --mem 8G --oversubscribe=1G -- oversub_probe alloc 1G alloc 1G launch launch hold >"$T_DIR/idle.out" 2>&1 &
wait_until 10 grep -q holding "$T_DIR/idle.out"
run vgpu ps --json
assert_eq "spilled memory at rest: 0 B/s" 0 "$(rate idle)"
run vgpu ps
assert_contains "... its off-device memory still shown" "~ 2 GiB of" "$out"
assert_not_contains "... without the flag" migrating "$out"
done_testing
