#!/usr/bin/env bash
# The real-GPU gate (issue 34 item 6): one command, at most 9 minutes on one GPU, ONE table of the
# figures vgpu promises, each against its target and against the figure kept in
# tests/gpu/BASELINE.md. A figure worse than its baseline by more than its noise band is WORSE.
#   bash tests/gpu/regress.sh [BUILD_DIR]          (GPU 0, nothing else on it)
#   REGRESS_BASELINE=FILE   write this run's figures there as a new baseline (the lead does this
#                           only when figures got better)
#   REGRESS_P99_RUNS=N      client runs per p99 row (default 10), REGRESS_SKIP=a,b sections out:
#                           caps start launch p99 acct storm alloc
# Reuses the pieces: core.sh (caps, 30:70 pair), latency.sh's client and training loop, run.sh's
# allocation paths and container row, launch_toggle. Every step is bounded with timeout(1).
# Exit status: 0 when no row FAILs its target and none is WORSE.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-build}" && pwd) || exit 2
export PATH="$B:$B/tests/progs:$PATH"
unset LD_PRELOAD VGPU_REGION CUDA_VISIBLE_DEVICES
tmp=$(mktemp -d)
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$tmp"' EXIT
export VGPU_STATE_DIR=$tmp/state; mkdir -m 0700 "$VGPU_STATE_DIR"
export VGPU_MACHINE_DIR=$tmp/machine; mkdir -m 0755 "$VGPU_MACHINE_DIR"
command -v nvidia-smi >/dev/null || { echo "regress.sh: no nvidia-smi: is this a GPU machine?" >&2; exit 2; }
[ -x "$B/vgpu" ] && [ -x "$B/tests/progs/alloc_probe" ] || { echo "regress.sh: build first (make)" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "regress.sh: needs PyTorch with CUDA" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0) driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0)
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
skip() { [[ ",${REGRESS_SKIP:-}," == *",$1,"* ]]; }
T() { timeout "$@"; }
log() { printf '%s\n' "$*" >&2; }
med() { printf '%s\n' "$@" | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
BASE=$src/tests/gpu/BASELINE.md

# ---- rows: key | figure | target | baseline | verdict ----
# fig KEY VALUE UNIT LO HI BETTER BAND DETAIL: VALUE passes when LO <= VALUE <= HI ('-' = open);
# BETTER (lower/higher/closer:X) says which way is better, BAND the noise band (same unit): a
# value worse than the baseline's by more than BAND is WORSE.
rows=() keep=() bad=0
fig() {
  local key=$1 v=$2 unit=$3 lo=$4 hi=$5 better=$6 band=$7 detail=${8:-}
  local base; base=$(awk -F'|' -v k="$key" '{ gsub(/^ +| +$/, "", $2) } $2 == k { gsub(/ /, "", $3); print $3; exit }' "$BASE" 2>/dev/null)
  local verdict
  verdict=$(awk -v v="$v" -v lo="$lo" -v hi="$hi" -v b="${base:-}" -v better="$better" -v band="$band" 'BEGIN {
    if (v == "" || v == "?") { print "FAIL"; exit }
    ok = (lo == "-" || v + 0 >= lo + 0) && (hi == "-" || v + 0 <= hi + 0)
    worse = 0
    if (b != "" && b != "-") {
      if (better == "lower") worse = v - b > band
      else if (better == "higher") worse = b - v > band
      else { split(better, c, ":"); x = c[2] + 0; dv = v - x; db = b - x; if (dv < 0) dv = -dv; if (db < 0) db = -db; worse = dv - db > band }
    }
    print (ok ? "PASS" : "FAIL") (worse ? " WORSE" : "") }')
  local target="$lo..$hi"; [ "$lo" = - ] && target="<= $hi"; [ "$hi" = - ] && target=">= $lo"
  rows+=("| $key | $v $unit | $target | ${base:-none} | $verdict | $detail |")
  keep+=("| $key | $v | $band |")
  [[ $verdict == PASS ]] || bad=1
  log "$key: $v $unit ($target; baseline ${base:-none}) $verdict $detail"
}
info() { rows+=("| $1 | $2 | - | - | SKIP | $3 |"); log "$1: SKIP $3"; }

arb_pid=""
daemon_on() {
  "$B/vgpu" daemon 2>>"$tmp/daemon.log" & arb_pid=$!
  for _ in $(seq 100); do "$B/vgpu" daemon --check >/dev/null 2>&1 && return 0; sleep 0.05; done
  log "the arbiter did not start: $(cat "$tmp/daemon.log")"; return 1
}
daemon_off() { [ -n "$arb_pid" ] && kill "$arb_pid" 2>/dev/null && wait "$arb_pid" 2>/dev/null; arb_pid=""; }
t0=$(date +%s)
# Each section must find the GPU without processes: one left by an earlier section (the gate's
# own) shares the GPU with every figure after it. Those found are named, ended, and counted in
# a row of their own.
leftover=0 leftover_what=""
gpu_clean() { # section
  local pids; pids=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader -i 0 2>/dev/null | tr -dc '0-9\n')
  [ -z "$pids" ] && return 0
  local p; for p in $pids; do
    leftover=$((leftover + 1)); leftover_what+="${leftover_what:+; }before $1: $p $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-60)"
    log "regress.sh: before $1, pid $p still on the GPU: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120); ending it"
    kill "$p" 2>/dev/null
  done
  for _ in $(seq 50); do [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader -i 0 2>/dev/null)" ] && return 0; sleep 0.1; done
  for p in $pids; do kill -9 "$p" 2>/dev/null; done; sleep 1
}

# ---- caps 30/50: elementwise, matmul, graph; the 30:70 pair (core.sh) ----
if ! skip caps; then
  gpu_clean caps
  CORE_SECTIONS=single,pair CORE_CAPS="30 50" CORE_RESULTS=$tmp/core.md T 150 bash "$src/tests/gpu/core.sh" "$B" > "$tmp/core" 2>&1
  cat "$tmp/core" >&2
  for m in elementwise matmul graph; do for n in 30 50; do
    v=$(awk -v m=$m -v n="$n%" '$1 == m && $2 == n { sub(/%/, "", $6); print $6 }' "$tmp/core")
    fig "cap $n % $m (% of uncapped)" "${v:-?}" % $((n - 5)) $((n + 5)) "closer:$n" 2 "whole 5 s run"
  done; done
  pa=$(sed -n 's/^pair 30:70 (elementwise) *\([0-9.]*\)% : \([0-9.]*\)%.*/\1/p' "$tmp/core")
  pb=$(sed -n 's/^pair 30:70 (elementwise) *\([0-9.]*\)% : \([0-9.]*\)%.*/\2/p' "$tmp/core")
  fig "pair 30:70, the 30 job (elementwise)" "${pa:-?}" % 25 35 closer:30 2
  fig "pair 30:70, the 70 job (elementwise)" "${pb:-?}" % 65 75 closer:70 2
fi

# ---- job start against bare: a context and 1 MiB, interleaved rounds, medians ----
start_rows() { # suffix
  local bare=() mem=() core=() i
  alloc_probe alloc 1M >/dev/null 2>&1   # the driver loaded once, outside the figures
  for i in 1 2 3 4 5 6 7; do
    bare+=("$(ms alloc_probe alloc 1M)")
    mem+=("$(ms vgpu run --gpu 0 --mem 4096M -- alloc_probe alloc 1M)")
    core+=("$(ms vgpu run --gpu 0 --mem 4096M --core 50 -- alloc_probe alloc 1M)")
  done
  local b m c; b=$(med "${bare[@]}") m=$(med "${mem[@]}") c=$(med "${core[@]}")
  fig "job start, --mem$1 (% over bare)" "$(awk -v a="$m" -v b="$b" 'BEGIN { printf "%.1f", 100 * (a - b) / b }')" % - 10 lower 5 \
    "medians: bare $b ms, vgpu run $m ms (7 rounds)"
  fig "job start, --mem --core 50$1 (% over bare)" "$(awk -v a="$c" -v b="$b" 'BEGIN { printf "%.1f", 100 * (a - b) / b }')" % - 10 lower 5 \
    "medians: bare $b ms, vgpu run $c ms"
}
ms() { local a z; a=$(date +%s%N); T 30 "$@" >/dev/null 2>&1; z=$(date +%s%N); echo $(( (z - a) / 1000000 )); }
# Where a job's start goes (not gated: a timeline for the next fix): vgpu run with no CUDA at all,
# the library alone (preloaded, no job), vgpu run recording before it returns (the order before
# the finisher), vgpu run without the GPU list kept from the job before (VGPU_GPU_CACHE_S=0: NVML
# loaded before the command), and NVML's initialisation by itself; interleaved, medians of 7.
start_parts() {
  local t=() v=() l=() f=() n=() k=() i
  for i in 1 2 3 4 5 6 7; do
    t+=("$(ms true)")
    v+=("$(ms vgpu run --gpu 0 --mem 4096M -- true)")
    k+=("$(ms env VGPU_GPU_CACHE_S=0 vgpu run --gpu 0 --mem 4096M -- alloc_probe alloc 1M)")
    l+=("$(ms env LD_PRELOAD="$B/libvgpu.so" alloc_probe alloc 1M)")
    f+=("$(ms env VGPU_RUN_FINISH_NOW=1 vgpu run --gpu 0 --mem 4096M -- alloc_probe alloc 1M)")
    n+=("$(ms python3 -c 'import ctypes; n = ctypes.CDLL("libnvidia-ml.so.1"); assert n.nvmlInit_v2() == 0; n.nvmlShutdown()')")
  done
  info "job start parts (ms, medians of 7)" "-" "true $(med "${t[@]}"), vgpu run -- true $(med "${v[@]}"), library preloaded alone $(med "${l[@]}"), vgpu run recording before it returns $(med "${f[@]}"), vgpu run loading NVML before the command (no kept GPU list) $(med "${k[@]}"), python3 + nvmlInit $(med "${n[@]}")"
}
if ! skip start; then
  gpu_clean start
  start_rows ""
  start_parts
  daemon_on && start_rows " through the daemon"; daemon_off
fi

# ---- launch cost in one process (run.sh's rows) ----
if ! skip launch; then
  gpu_clean launch
  pin=""; command -v taskset >/dev/null && [ "$(nproc)" -gt 2 ] && pin="taskset -c 2"
  out=$(T 60 $pin vgpu run --gpu 0 --mem 4G -- launch_toggle -r -n 20000 2>&1 | tail -n 1)
  # The median of the paired differences, not their mean: three runs on the H200 (2026-12-02)
  # gave means of 36.4, 34.5 and -18.6 ns with 95 % intervals of +-101..116 ns (a few pairs hit
  # by preemption dominate it), so the mean could never show a 20 ns target; the medians were
  # 15.1, 6.9 and 13.8 ns, each within +-3..5 ns.
  fig "launch cost, no core limit, in-process (ns)" "$(get "$out" median_ns)" ns - 20 lower 5 "$out"
  out=$(T 60 $pin vgpu run --gpu 0 --core 50 -- launch_toggle -n 6000 -c 50 2>&1 | tail -n 1)
  fig "launch cost under --core 50, in-process (ns)" "$(get "$out" median_ns)" ns - 100 lower 20 "$out"
fi

# ---- the inference client's p99 beside --core 70 training, REGRESS_P99_RUNS runs each ----
if ! skip p99; then
  gpu_clean p99
  sed -n "/^cat > \"\$T\/client.py\" <<'PY'/,/^PY/p" "$src/tests/gpu/latency.sh" | sed '1d;$d' > "$tmp/client.py"
  sed -n "/^cat > \"\$T\/train.py\" <<'PY'/,/^PY/p" "$src/tests/gpu/latency.sh" | sed '1d;$d' > "$tmp/train.py"
  # Each client run: 2.5 s of requests after 0.5 s of warm-up (its first leases, the clocks), so
  # a run's p99 is its steady state's (the first gate had the 4th-worst request of a 2 s run,
  # which the warm-up dominated). Training runs until the row ends and must still run when each
  # client run starts and ends: a client run beside no training is not counted (the first gate's
  # 10th runs, at 34 ms, came after training had ended).
  R=${REGRESS_P99_RUNS:-10} S=2.5 W=0.5
  p99_row() { # label training-opts client-opts
    local p99s=() i out lost=0
    # timeout itself in the background, not the function T: `T ... &` runs T in a subshell, so $!
    # was that subshell, `kill $tr` killed only it, and each row's training ran on its 390 s
    # beside the later rows and the accounting section (2026-12-02: the soft rows' client at p50
    # 1.64 ms against 0.75, one bare matmul timed at 0.39 ms against 0.20).
    timeout 400 vgpu run --gpu 0 $2 -- python3 "$tmp/train.py" 390 > "$tmp/train.out" 2>&1 & local tr=$!
    sleep 3   # training's cuBLAS set up and its clocks up before the first client run
    for i in $(seq "$R"); do
      kill -0 "$tr" 2>/dev/null || { lost=$((lost + 1)); continue; }
      out=$(T 30 vgpu run --gpu 0 $3 -- python3 "$tmp/client.py" $S $W 2>&1 | tail -n 1)
      if kill -0 "$tr" 2>/dev/null; then p99s+=("$(get "$out" p99_ms)"); else lost=$((lost + 1)); fi
      log "  $1 run $i: $out"
    done
    kill "$tr" 2>/dev/null; wait "$tr" 2>/dev/null
    local s; s=$(printf '%s
' "${p99s[@]}" | grep -v '^$' | sort -n)
    local mn mx; mn=$(head -n 1 <<<"$s") mx=$(tail -n 1 <<<"$s")
    [ "$lost" -gt 0 ] && mx="?"   # a run without training beside it: the row is not measured
    fig "client p99, worst of $R runs, $1 (ms)" "${mx:-?}" ms - 1.1 lower 0.1 \
      "p99 min/median/max $mn/$(med "${p99s[@]}")/$(tail -n 1 <<<"$s") ms over $(grep -c . <<<"$s") runs$([ "$lost" -gt 0 ] && echo "; $lost runs without training beside them")"
  }
  p99_row "hard caps" "--core 70" "--core 30"
  p99_row "high priority + soft" "--core 70 --priority low" "--core 30 --priority high --core-policy soft"
  if daemon_on; then
    p99_row "hard caps, daemon" "--core 70" "--core 30"
    p99_row "high priority + soft, daemon" "--core 70 --priority low" "--core 30 --priority high --core-policy soft"
  fi
  daemon_off
fi

# ---- accounting: busy / bursty x uncapped / --core 30; truth = matmuls x one bare matmul ----
if ! skip acct; then
  gpu_clean acct
  cat > "$tmp/mm.py" <<'PY'
import sys, time, torch
secs, busy = float(sys.argv[1]), float(sys.argv[2])   # busy: seconds of work per second (1 = always)
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
y = x @ x; torch.cuda.synchronize()
E = lambda: torch.cuda.Event(enable_timing=True)
n, t, ev = 0, time.time(), 0.0
while time.time() - t < secs:
    s = time.time()
    while time.time() - s < busy:
        a, b = E(), E(); a.record()
        for _ in range(50): y = x @ x
        b.record(); b.synchronize()
        n += 50; ev += a.elapsed_time(b) / 1000
    if busy < 1: time.sleep(1 - busy)
print(f"matmuls={n} event_s={ev:.6f}")
PY
  # The truth. An uncapped job's is its own: CUDA events around each 50 matmuls, which nothing
  # holds back, time exactly the GPU's work whatever its clocks. A capped job's events would time
  # the limiter's holds too, so its truth is its count times one matmul's bare time in its rhythm,
  # bursts of 15 ms every 50 ms (a --core 30 job's turns): a GPU that idles between bursts runs
  # them at higher clocks, 0.174 ms a matmul against 0.202 back to back on an H200 (12-02: 0.863x,
  # the same at a 10 % duty), which is what the busy --core 30 row's 0.874 was. (Bursty uncapped,
  # 100 ms every second, read 1.080 by the 15 ms figure: its own events settle what it took.)
  cat > "$tmp/cal.py" <<'PY'
import time, torch
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): y = x @ x
E = lambda: torch.cuda.Event(enable_timing=True)
a, b = E(), E()
torch.cuda.synchronize(); a.record()
for _ in range(5000): y = x @ x
b.record(); b.synchronize(); per = a.elapsed_time(b) / 5000
tot, n, k = 0.0, 0, max(1, int(15 / per))
for _ in range(60):
    a, b = E(), E(); a.record()
    for _ in range(k): y = x @ x
    b.record(); b.synchronize(); tot += a.elapsed_time(b); n += k
    time.sleep(0.035)
print(f"per_mm_s={per / 1000:.9f} per_mm_duty_s={tot / n / 1000:.9f}")
PY
  cal=$(T 60 python3 "$tmp/cal.py" 2>&1 | tail -n 1)
  per_b2b=$(get "$cal" per_mm_s); per_duty=$(get "$cal" per_mm_duty_s)
  for shape in "busy 1" "bursty 0.1"; do for cap in "" "--core 30"; do
    set -- $shape; name="acct-$1${cap:+-capped}"
    out=$(T 60 vgpu run --gpu 0 --name "$name" $cap -- python3 "$tmp/mm.py" 8 "$2" 2>&1 | tail -n 1)
    n=$(get "$out" matmuls) ev=$(get "$out" event_s); rec=$(vgpu acct --json --name "$name" 2>/dev/null)
    g=$(jq -r '.jobs[0].gpus[0].gpu_seconds // empty' <<<"$rec"); srcn=$(jq -r '.jobs[0].gpus[0].gpu_time_source // empty' <<<"$rec")
    if [ -z "$cap" ]; then truth=$ev how="its own events ($n matmuls; x ${per_b2b:-?} s back to back: $(awk -v n="$n" -v p="$per_b2b" 'BEGIN { printf "%.2f", n * p }'))"
    else truth=$(awk -v n="$n" -v p="$per_duty" 'BEGIN { printf "%.6f", n * p }') how="$n matmuls x ${per_duty:-?} s"; fi
    r=$(awk -v g="$g" -v t="$truth" 'BEGIN { if (g != "" && t > 0) printf "%.3f", g / t; else print "?" }')
    fig "acct $1 ${cap:-uncapped} (recorded / truth)" "$r" x 0.95 1.05 closer:1 0.02 \
      "$g GPU-s ($srcn) for $truth: $how"
  done; done
fi

# ---- the 8-process storm: 8 processes create their contexts at once under one limit ----
if ! skip storm; then
  gpu_clean storm
  T 90 vgpu run --gpu 0 --mem 8G -- sh -c 'for i in 1 2 3 4 5 6 7 8; do alloc_probe alloc 256M sleep 1500 > "$0/s.$i" 2>&1 & done; wait' "$tmp"
  ok=$(cat "$tmp"/s.* 2>/dev/null | grep -c '^alloc rc=0')
  fig "8-process storm under --mem 8G (started)" "$ok" "of 8" 8 - higher 0 "each a context and 256 MiB, at once"
fi

# ---- the allocation paths and the container process's context (run.sh's rows) ----
if ! skip alloc; then
  gpu_clean alloc
  RUN_SKIP=frameworks,core,list,mig,policy,launchproc,launch,latency,tenants,top RUN_RESULTS=$tmp/run.md T 240 bash "$src/tests/gpu/run.sh" "$B" > "$tmp/run" 2>&1
  np=$(grep -c '^| .* | PASS |' "$tmp/run"); nf=$(grep -c '^| .* | FAIL |' "$tmp/run")
  fig "allocation paths + container context (run.sh rows passing)" "$np" "of $((np + nf))" "$((np + nf))" - higher 0 \
    "$(grep '^| .* | FAIL |' "$tmp/run" | cut -d'|' -f2 | paste -sd';')"
  grep -E '^(\| |container row: )' "$tmp/run" >&2
fi

gpu_clean end
fig "GPU processes left running by a section" "$leftover" "" - 0 lower 0 "$leftover_what"
if [ "$ngpu" -lt 2 ]; then info "multi-GPU rows (gang turns, 2-rank collective)" "-" "one GPU here: tests/gpu/multi.sh needs two"; fi

table=$(printf '%s\n' "| figure | value | target | baseline | verdict | detail |" "|---|---|---|---|---|---|" "${rows[@]}")
echo
echo "regress.sh: $(date -u +%F), $gpu, driver $driver, $(( $(date +%s) - t0 )) s"
printf '%s\n' "$table"
if [ -n "${REGRESS_BASELINE:-}" ]; then
  { echo "# Real-GPU baseline (tests/gpu/regress.sh)"; echo
    echo "Run of \`bash tests/gpu/regress.sh\`: $(date -u +%F), $gpu, driver $driver. regress.sh reads the"
    echo "figure column; a figure worse than it by more than the band is WORSE. Replace it only when"
    echo "figures got better."; echo
    echo "| figure | value | band |"; echo "|---|---|---|"; printf '%s\n' "${keep[@]}"
    echo; echo "The run's table:"; echo; printf '%s\n' "$table"; } > "$REGRESS_BASELINE"
fi
exit $bad
