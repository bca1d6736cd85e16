#!/usr/bin/env bash
# The compute limiter on a real NVIDIA GPU (issue 8 targets), about 90 s in all:
#   - one saturating job at --core 10/30/50/70 for an elementwise loop, a 4096² matmul loop and
#     a CUDA-graph loop, over its first 5 s and over the whole run (CORE_SECONDS, default 5;
#     30 for the issue's second window): throughput relative to the uncapped run, and the
#     NVML per-process SM utilisation (nvidia-smi pmon) averaged over the run;
#   - the matmul loop synchronized only every 64 launches (as training loops run), at 30 and 70:
#     throughput, and no 1-second NVML sample more than 15 points above the cap;
#   - two jobs 30/70 (elementwise): their throughput shares;
#   - two jobs 30/70 against two uncapped processes (matmul, async, elementwise): the GPU time
#     lost to sharing (the sum of their throughputs);
#   - two jobs 50/50 soft, one idle: the busy one's throughput;
#   - the added cost per launch under budget (median, capped 90% vs an uncapped job).
# Prints one table; PASS/FAIL with the issue's ±5-point bands.
#   bash tests/gpu/core.sh [BUILD_DIR]      (needs nvcc and a GPU; GPU 0)
#   CORE_SECONDS=30 CORE_SECTIONS=single,async bash tests/gpu/core.sh   (the 30 s window, ~8 min)
# CORE_SECTIONS picks from single,async,pair,together,soft,rate (default: all); CORE_CAPS the caps
# of the single section (default "10 30 50 70"); CORE_RESULTS=FILE the table's file. The table goes to
# tests/gpu/RESULTS-core.md (5 s runs) or RESULTS-core-<N>s.md.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=$(cd "${1:-build}" && pwd) || exit 2
T=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
export PATH="$B:$B/tests/progs:$PATH" VGPU_STATE_DIR=$T/state
mkdir -m 0700 "$VGPU_STATE_DIR"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if ! "$NVCC" -O2 -o "$T/core_bench" tests/gpu/core_bench.cu 2>"$T/nvcc.err"; then
  echo "core.sh: SKIP: cannot compile tests/gpu/core_bench.cu: $(head -c 300 "$T/nvcc.err")"; exit 0
fi
W=${CORE_SECONDS:-5}
S=",${CORE_SECTIONS:-single,async,pair,together,soft,rate},"
want() { [[ $S == *",$1,"* ]]; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null) driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null)
main() {
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? 100 * a / b : 0) }'; }
verdict() { awk -v m="$1" -v t="$2" -v d="$3" 'BEGIN { x = m - t; if (x < 0) x = -x; print (x <= d ? "PASS" : "FAIL") }'; }
pass=0 fail=0
count() { [ "$1" = PASS ] && pass=$((pass + 1)) || fail=$((fail + 1)); }

# NVML per-process SM% of one command's processes, averaged over the run (nvidia-smi pmon).
pmon_run() { # outfile cmd...
  local out=$1; shift
  nvidia-smi pmon -i 0 -s u -d 1 >"$T/pmon" 2>/dev/null &
  local pm=$!
  "$@" >"$out" 2>&1
  kill $pm 2>/dev/null; wait $pm 2>/dev/null
  # lines: gpu pid type sm mem enc dec ... command; take rows of core_bench
  awk '$0 ~ /core_bench/ && $4 ~ /^[0-9]+$/ { s += $4; n++ } END { if (n) printf "%.0f", s / n; else printf "-" }' "$T/pmon"
  # the highest 1-second sample after the first two (for the unsynchronized workload)
  awk '$0 ~ /core_bench/ && $4 ~ /^[0-9]+$/ { if (++n > 2 && $4 > m) m = $4 } END { printf "%d", m }' "$T/pmon" > "$T/pmon.max"
}

# Warm up first: the GPU's clocks ramp up over the first seconds of load, and a baseline taken
# cold is low (every capped run then looks a few points too fast).
"$T/core_bench" matmul 4 >/dev/null
declare -A base
for m in elementwise matmul graph; do
  base[$m]=$(get "$("$T/core_bench" $m 3)" ips)
done
base[async]=${base[matmul]}
F=$(( W < 5 ? W : 5 ))
printf '%-12s %5s %10s %10s %10s %10s %8s  %s\n' workload cap "unc it/s" "cap it/s" "% first ${F}s" "% ${W}s" "NVML sm%" verdict
for m in elementwise matmul graph; do
  want single || break
  for n in ${CORE_CAPS:-10 30 50 70}; do
    sm=$(pmon_run "$T/o" vgpu run --gpu 0 --core $n -- "$T/core_bench" $m "$W" "$F")
    ips=$(get "$(cat "$T/o")" ips); p=$(pct "$ips" "${base[$m]}")
    ipsf=$(get "$(cat "$T/o")" ips_first); pf=$(pct "$ipsf" "${base[$m]}")
    v=$(verdict "$p" $n 5); [ "$(verdict "$pf" $n 5)" = PASS ] || v=FAIL; count "$v"
    printf '%-12s %4d%% %10s %10s %9s%% %9s%% %8s  %s\n' $m $n "${base[$m]}" "$ips" "$pf" "$p" "$sm" "$v"
  done
done
# Unsynchronized matmul loop: the whole run within ±5 points, and no 1-second NVML sample far
# above the cap (queued work must not run in bursts at 100%).
for n in 30 70; do
  want async || break
  sm=$(pmon_run "$T/o" vgpu run --gpu 0 --core $n -- "$T/core_bench" async "$W" "$F")
  ips=$(get "$(cat "$T/o")" ips); p=$(pct "$ips" "${base[async]}"); mx=$(cat "$T/pmon.max")
  v=$(verdict "$p" $n 5); [ "${mx:-100}" -le $((n + 15)) ] || v=FAIL; count "$v"
  printf '%-12s %4d%% %10s %10s %10s %9s%% %8s  %s (highest 1 s sample %s%%)\n' async $n "${base[async]}" "$ips" "-" "$p" "$sm" "$v" "$mx"
done
if want pair; then
vgpu run --gpu 0 --core 30 -- "$T/core_bench" elementwise "$W" >"$T/a" 2>&1 &
vgpu run --gpu 0 --core 70 -- "$T/core_bench" elementwise "$W" >"$T/b" 2>&1; wait
pa=$(pct "$(get "$(cat "$T/a")" ips)" "${base[elementwise]}") pb=$(pct "$(get "$(cat "$T/b")" ips)" "${base[elementwise]}")
va=$(verdict "$pa" 30 5) vb=$(verdict "$pb" 70 5); count "$va"; count "$vb"
printf 'pair 30:70 (elementwise)   %s%% : %s%%   %s %s\n' "$pa" "$pb" "$va" "$vb"
fi
# No GPU time lost to sharing (issue 14): two saturating jobs capped 30 and 70 reach together at
# least what two uncapped processes reach when the driver time-slices them (within 1 point),
# and each stays within ±5 of its cap.
if want together; then
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
for m in matmul async elementwise; do
  "$T/core_bench" $m "$W" >"$T/u1" 2>&1 & "$T/core_bench" $m "$W" >"$T/u2" 2>&1; wait
  ut=$(awk -v a="$(get "$(cat "$T/u1")" ips)" -v b="$(get "$(cat "$T/u2")" ips)" -v c="${base[$m]}" 'BEGIN { printf "%.1f", 100 * (a + b) / c }')
  rm -rf "$T/trace"; mkdir "$T/trace"
  VGPU_LEASE_TRACE=$T/trace vgpu run --gpu 0 --core 30 -- "$T/core_bench" $m "$W" >"$T/a" 2>&1 &
  VGPU_LEASE_TRACE=$T/trace vgpu run --gpu 0 --core 70 -- "$T/core_bench" $m "$W" >"$T/b" 2>&1 &
  # The GPU time the schedule charged the two jobs over the middle half of the run, and its
  # preemptions and yields: a charge near 100 % with less throughput is time lost inside leases
  # (overlap, pacing); a lower charge is time lost between them (handover gaps).
  sleep "$(awk -v w="$W" 'BEGIN { print w / 4 }')"; p1=$(sched_peek "$uuid" 2>/dev/null); t1=$(date +%s%N)
  sleep "$(awk -v w="$W" 'BEGIN { print w / 2 }')"; p2=$(sched_peek "$uuid" 2>/dev/null); t2=$(date +%s%N)
  wait
  charged=$(printf '%s\n%s\n' "$p1" "$p2" | awk -v dt=$((t2 - t1)) -F'[ =]' '/^exists/ { n++; pre[n] = $12; yi[n] = $14 }
    /^job=/ { u[n] += $6 } END { printf "charged %.1f%%, %d preemptions, %d yields", 100 * (u[2] - u[1]) / dt, pre[2] - pre[1], yi[2] - yi[1] }')
  pa=$(pct "$(get "$(cat "$T/a")" ips)" "${base[$m]}") pb=$(pct "$(get "$(cat "$T/b")" ips)" "${base[$m]}")
  vt=$(awk -v a="$pa" -v b="$pb" -v u="$ut" 'BEGIN { print (a + b >= u - 1 ? "PASS" : "FAIL") }')
  [ "$(verdict "$pa" 30 5)" = PASS ] && [ "$(verdict "$pb" 70 5)" = PASS ] || vt=FAIL; count "$vt"
  printf 'together %-11s 30:70 %s%% + %s%% = %s%%, two uncapped %s%% (%s)   %s\n' $m "$pa" "$pb" \
    "$(awk -v a="$pa" -v b="$pb" 'BEGIN { printf "%.1f", a + b }')" "$ut" "$charged" "$vt"
  python3 tests/gpu/handover.py "$T/trace" 2>&1 | sed 's/^/    /' 
done
fi
if want soft; then
vgpu run --gpu 0 --core 50 --core-policy soft -- sleep $((W + 1)) &
ps_=$(pct "$(get "$(vgpu run --gpu 0 --core 50 --core-policy soft -- "$T/core_bench" elementwise "$W")" ips)" "${base[elementwise]}")
wait
vs=$(awk -v p="$ps_" 'BEGIN { print (p >= 90 ? "PASS" : "FAIL") }'); count "$vs"
printf 'soft 50/50, peer idle      busy job %s%% (>= 90)   %s\n' "$ps_" "$vs"
fi
if want rate; then
# Launch cost: nine back-to-back pairs of 1 s runs (uncapped, then capped at 90%), and the
# median of the nine paired differences: single runs differ by a few hundred ns from one to the
# next, whatever the library does.
us=() cs=() ds=()
for _ in 1 2 3 4 5 6 7 8 9; do
  u=$(get "$(vgpu run --gpu 0 -- "$T/core_bench" rate 1)" p50_ns)
  c=$(get "$(vgpu run --gpu 0 --core 90 -- "$T/core_bench" rate 1)" p50_ns)
  us+=("$u"); cs+=("$c"); ds+=("$(awk -v c="$c" -v u="$u" 'BEGIN { printf "%.0f", c - u }')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
d=$(median "${ds[@]}")
vo=$(awk -v d="$d" 'BEGIN { print (d < 200 ? "PASS" : "FAIL") }'); count "$vo"
printf 'launch cost under budget: median paired difference %+d ns (< 200), medians uncapped %s ns, capped %s ns; differences %s   %s\n' \
  "$d" "$(median "${us[@]}")" "$(median "${cs[@]}")" "${ds[*]}" "$vo"
fi
echo "core.sh: $pass PASS, $fail FAIL (first ${F} s and whole ${W} s of each run; sections ${S:1:-1})"
}
# The table goes to the terminal and, with the date, GPU and driver, to tests/gpu/RESULTS-core.md.
main | tee "$T/table"
{ echo "# Compute limiter on a real GPU"; echo
  echo "Latest run of \`bash tests/gpu/core.sh\`: $(date -u +%Y-%m-%d), $gpu, driver $driver."; echo
  echo '```'; cat "$T/table"; echo '```'; } > "${CORE_RESULTS:-tests/gpu/RESULTS-core$([ "$W" = 5 ] || echo "-${W}s").md}"
grep -q 'core.sh: [0-9]* PASS, 0 FAIL' "$T/table"
