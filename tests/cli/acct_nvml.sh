#!/usr/bin/env bash
# The accounting record's NVML measurements (issue 28): the GPU time of an uncapped job, from
# NVML's per-process utilisation samples, against the simulated GPU's exact busy time; each
# GPU's energy, from NVML's energy counter, apportioned by GPU-time share (per-process samples
# for uncapped jobs, the schedule's time over the GPU's busy time for capped ones); and a GPU without
# the counter, whose energy is unknown (null), never 0.
source "$(dirname "$0")/lib.sh"

# The simulated GPU's truth: its busy time (ns) and energy counter (mJ) since it was made.
sim() { fakegpu-ctl show | jq -r ".gpus[0].$1"; }
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }'; }
# The simulated H100 (tests/fakegpu/common/models.c): 71 W idle, up to half of the 629 W span to
# its 700 W limit while busy, so its energy is 71 W x time + 314.5 W x busy time.
expected_j() { awk -v t="$1" -v b="$2" 'BEGIN { printf "%.3f", 71 * t + 314.5 * b }'; }

# ---- an uncapped job busy 40 % of 3 s ----
b0=$(sim busy_ns)
must vgpu run --name alone -- fakegpu-ctl busy 0 3 40
truth=$(awk -v a="$b0" -v b="$(sim busy_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
run vgpu acct --json --name alone
g=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_seconds')
if within "$g" "$truth" 5; then ok "an uncapped job: $g GPU-seconds, the simulated GPU was busy $truth s (±5 %)"
else not_ok "an uncapped job's GPU-seconds within 5 % of the simulated GPU's busy time $truth s" "$out"; fi
assert_eq "its GPU time comes from NVML's per-process samples" "nvml" \
  "$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_time_source')"
dur=$(printf '%s' "$out" | jq -r '.jobs[0].duration_seconds')
e=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].energy_joules'); want=$(expected_j "$dur" "$truth")
if within "$e" "$want" 5; then ok "alone on the GPU it gets the GPU's energy over its life: $e J (expected $want J, ±5 %)"
else not_ok "its energy within 5 % of $want J" "$out"; fi

# ---- bursts between pauses: 100 ms of kernels each second. Its samples come a second apart:
# the window (200 ms here) taken from their gaps could read 1 s, and each sample stood for the
# windows since the last read that found one, not the last read (reads that find nothing did not
# count): 0.77 to 3.0 GPU-s recorded for 0.6 s of kernels. Now the window comes from the GPU's own
# samples and every read counts (nvml_sample.c). ----
b0=$(sim busy_ns)
must vgpu run --name bursts -- core_loop -m client -s 50 -k 2000 -i 900000 -t 6
truth=$(awk -v a="$b0" -v b="$(sim busy_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
run vgpu acct --json --name bursts
g=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_seconds')
if within "$g" "$truth" 10; then ok "an uncapped job of bursts between pauses: $g GPU-seconds, the GPU was busy $truth s (±10 %)"
else not_ok "an uncapped job of bursts: GPU-seconds within 10 % of the simulated GPU's busy time $truth s" "$out"; fi

# ---- two uncapped jobs at once: each its own processes' time, the energy split by share ----
b0=$(sim busy_ns); e0=$(sim energy_mj)
vgpu run --name small -- fakegpu-ctl busy 0 3 20 & p1=$!
vgpu run --name big -- fakegpu-ctl busy 0 3 60 & p2=$!
wait "$p1"; r1=$?; wait "$p2"; r2=$?
assert_eq "both ran" "0 0" "$r1 $r2"
truth=$(awk -v a="$b0" -v b="$(sim busy_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
de=$(awk -v a="$e0" -v b="$(sim energy_mj)" 'BEGIN { printf "%.3f", (b - a) / 1e3 }')
run vgpu acct --json --since -1h
gs=$(printf '%s' "$out" | jq -r '[.jobs[] | select(.name == "small") | .gpus[0].gpu_seconds][0]')
gb=$(printf '%s' "$out" | jq -r '[.jobs[] | select(.name == "big") | .gpus[0].gpu_seconds][0]')
sum=$(awk -v a="$gs" -v b="$gb" 'BEGIN { print a + b }')
if within "$sum" "$truth" 5; then ok "two jobs: $gs + $gb GPU-seconds, the GPU was busy $truth s (±5 %)"
else not_ok "two jobs' GPU-seconds add up to the busy time $truth s" "$out"; fi
check "the one busy 60 % used about three times the GPU time of the one busy 20 % ($gb, $gs)" \
  awk -v s="$gs" -v b="$gb" 'BEGIN { exit !(b > s * 2.5 && b < s * 3.5) }'
es=$(printf '%s' "$out" | jq -r '[.jobs[] | select(.name == "small") | .gpus[0].energy_joules][0]')
eb=$(printf '%s' "$out" | jq -r '[.jobs[] | select(.name == "big") | .gpus[0].energy_joules][0]')
# Under ASan on fewer than 4 CPUs (CI's make asan) both splits are measured, not asserted: there
# the two uncapped jobs' split once came out 2.87 for a GPU-time ratio near 3, and the two capped
# jobs' schedule charged 3.7 % more GPU time than the simulated GPU was busy (with a CPU hog here:
# 1413 J billed of 1362 J drawn), while without ASan, hog or not, 98 % of it.
timing_skipped "their energy is split by GPU-time share and adds up to no more than the GPU's" "$es J, $eb J of $de J" ||
check "their energy is split by GPU-time share ($es J, $eb J) and adds up to no more than the GPU's ($de J)" \
  awk -v s="$es" -v b="$eb" -v gs="$gs" -v gb="$gb" -v d="$de" \
  'BEGIN { r = (b / s) / (gb / gs); exit !(r > 0.95 && r < 1.05 && s + b <= d * 1.01 && s + b > d * 0.8) }'

# ---- capped jobs: the schedule's GPU time over the GPU's busy time (NVML's device samples) ----
# A --core 30 job alone gets the GPU's energy over its life, idle power included, as an
# uncapped one does (its mean power times the job's GPU time gave a third of it). Counted from
# vgpu run's first look at NVML, 200 ms in: never more than the GPU's energy over the job's life,
# and the head it misses (about 30 J: idle, and the start of the job's work) is 5 % of 4 s.
between() { awk -v a="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(a >= lo && a <= hi) }'; }
b0=$(sim busy_ns)
must vgpu run --core 30 --name capped-alone -- core_loop -t 4 -k 2000 -s 8
truth=$(awk -v a="$b0" -v b="$(sim busy_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
run vgpu acct --json --name capped-alone
assert_eq "a --core 30 job: its GPU time from the schedule" "schedule" \
  "$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_time_source')"
dur=$(printf '%s' "$out" | jq -r '.jobs[0].duration_seconds')
e=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].energy_joules'); want=$(expected_j "$dur" "$truth")
if between "$e" "$(awk -v w="$want" 'BEGIN { print w * 0.92 }')" "$(awk -v w="$want" 'BEGIN { print w * 1.01 }')"
then ok "a --core 30 job alone gets the GPU's energy over its life: $e J (expected $want J, -8 % to +1 %)"
else not_ok "a --core 30 job alone: energy within -8 % and +1 % of $want J (busy $truth s of $dur s)" "$out"; fi

# Two capped jobs at once: the energy in the ratio of their GPU times, together the GPU's.
e0=$(sim energy_mj)
vgpu run --core 30 --name capped-small -- core_loop -t 4 -k 2000 -s 8 & p1=$!
vgpu run --core 60 --name capped-big -- core_loop -t 4 -k 2000 -s 8 & p2=$!
wait "$p1"; r1=$?; wait "$p2"; r2=$?
assert_eq "both capped jobs ran" "0 0" "$r1 $r2"
de=$(awk -v a="$e0" -v b="$(sim energy_mj)" 'BEGIN { printf "%.3f", (b - a) / 1e3 }')
run vgpu acct --json --since -1h
pick() { printf '%s' "$out" | jq -r "[.jobs[] | select(.name == \"$1\") | .gpus[0].$2][0]"; }
gs=$(pick capped-small gpu_seconds); gb=$(pick capped-big gpu_seconds)
es=$(pick capped-small energy_joules); eb=$(pick capped-big energy_joules)
check "--core 30 and --core 60 at once: energy in the ratio of their GPU times ($es J for $gs s, $eb J for $gb s)" \
  awk -v s="$es" -v b="$eb" -v gs="$gs" -v gb="$gb" 'BEGIN { r = (b / s) / (gb / gs); exit !(gs > 0 && r > 0.95 && r < 1.05) }'
timing_skipped "together no more than the GPU's energy over their runs, and most of it" "$es + $eb J of $de J" ||
check "together ($es + $eb J) no more than the GPU's energy over their runs ($de J), and most of it" \
  awk -v s="$es" -v b="$eb" -v d="$de" 'BEGIN { exit !(s + b <= d * 1.01 && s + b > d * 0.9) }'

# ---- a job that never used the GPU: no GPU time measured, no energy ----
must vgpu run --name nothing -- true
assert_eq "a job that never used a GPU: not measured (null, none), energy null" "null none null" \
  "$(vgpu acct --json --name nothing | jq -r '.jobs[0].gpus[0] | "\(.gpu_seconds) \(.gpu_time_source) \(.energy_joules)"')"

# ---- bytes migrated by an oversubscribed job: the link's bytes while it had memory off the GPU ----
# As oversub_migration.sh: a holder leaves room for the job's context and 1.5 GiB; the job spills
# two 1 GiB buffers and a kernel every 20 ms makes both resident (about 2 GiB over the link a step).
use_scenario h100
G=1073741824; ctx=536870912
pcie() { fakegpu-ctl show | jq -r '.gpus[0] | .pcie_tx_bytes + .pcie_rx_bytes'; }
fakegpu-ctl hold 0 $((84927315968 - 3 * ctx - 3 * G / 2)) 120 >"$T_DIR/hold.out" 2>&1 & holder=$!
wait_until 10 grep -q ready "$T_DIR/hold.out"
l0=$(pcie)
must vgpu run --name churn --mem 8G --oversubscribe=1G -- oversub_probe alloc 1G alloc 1G churn 1500
moved=$(( $(pcie) - l0 ))
must vgpu run --name plain -- oversub_probe alloc 64M upload
kill "$holder"; wait "$holder" 2>/dev/null
run vgpu acct --json --name churn
m=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].migrated_bytes')
# What crossed the link before the job spilled and before vgpu run's first look (200 ms) is not
# its migration: at least 80 % of the link's bytes, never more than all of them.
if [ "$m" != null ] && awk -v m="$m" -v t="$moved" 'BEGIN { exit !(t > 0 && m <= t && m >= t * 0.8) }'
then ok "an oversubscribed job: $m bytes migrated (the link moved $moved during its run)"
else not_ok "an oversubscribed job's bytes migrated: 80-100 % of the link's $moved" "$out"; fi
assert_eq "a job without --oversubscribe: migrated_bytes null" null \
  "$(vgpu acct --json --name plain | jq -r '.jobs[0].gpus[0].migrated_bytes')"
run vgpu acct --csv --name churn
assert_eq "--csv: its column migrated_bytes (before 'bounded', the last)" "migrated_bytes $m" \
  "$(printf '%s\n' "$out" | awk -F, 'NR == 1 { h = $(NF - 1) } NR == 2 { print h, $(NF - 1) }')"

# ---- another sampling period, and a GPU without an energy counter ----
jq '.sample_period_ms = 500 | .gpus[0].energy_counter = false' "$T_SCENARIOS/h100.json" >"$T_DIR/noenergy.json"
export VGPU_FAKE_SCENARIO=$T_DIR/noenergy.json; rm -f "$VGPU_FAKE_STATE"
assert_eq "the simulated GPU has no energy counter" "null" "$(sim energy_mj)"
b0=$(sim busy_ns)
must vgpu run --name slow-samples -- fakegpu-ctl busy 0 3 50
truth=$(awk -v a="$b0" -v b="$(sim busy_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
run vgpu acct --json --name slow-samples
g=$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].gpu_seconds')
if within "$g" "$truth" 5; then ok "0.5 s sampling windows: $g GPU-seconds, busy $truth s (±5 %)"
else not_ok "0.5 s sampling windows: within 5 % of $truth s" "$out"; fi
assert_eq "no energy counter: energy unknown (null), never 0" "null" \
  "$(printf '%s' "$out" | jq -r '.jobs[0].gpus[0].energy_joules')"
run vgpu acct --totals --json --name slow-samples
assert_eq "--totals: energy unknown there too" "null" "$(printf '%s' "$out" | jq -r '.totals[0].energy_joules')"
done_testing
