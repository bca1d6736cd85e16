#!/usr/bin/env bash
# Inference beside training on a real GPU (issue 17), the measurement of reference/latency.md:
#   client:   each request is 8 matmuls of 1024x1024 and a synchronize, 5 ms idle between
#             requests, LAT_SECONDS (default 15) s;
#   training: 4096x4096 matmuls, synchronized only every 64 launches, started 4 s earlier.
# Rows: the client alone; beside training with the driver's plain time-slicing; under vgpu with
# training --core 70 and client --core 30; the same with client --priority high --core-policy soft
# and training --priority low; the recipe of vgpu-run(1): client --priority high beside training
# --priority low, no --core (target: p50 within 1.3x alone, training >= 85 % of alone in every
# window). Per row: request p50/p99/max and requests served, and the
# training job's throughput in each 1 s window as a share of its throughput alone.
# Targets (PASS/FAIL): client p99 beside capped training <= plain time-slicing's p99 (and at
# most 2.0 ms); with --priority high p99 <= 1.5 ms and p50 <= 1.2x alone; training within 5
# points of 70 % minus what the client used, in every full 1 s window.
# Last line: "latency.sh: N PASS, N FAIL".
# LAT_TRACE=DIR keeps each vgpu row's lease traces (VGPU_LEASE_TRACE) in DIR/ROW for handover.py.
#   bash tests/gpu/latency.sh [BUILD_DIR]
set -u
cd "$(dirname "$0")/../.." || exit 2
B=$(cd "${1:-build}" && pwd) || exit 2
T=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
export PATH="$B:$PATH" VGPU_STATE_DIR=$T/state VGPU_MACHINE_DIR=$T/machine
mkdir -m 0700 "$VGPU_STATE_DIR"; mkdir -m 0755 "$VGPU_MACHINE_DIR"
. "$(dirname "$0")/arbiter.lib"; arbiter_start || exit 1
S=${LAT_SECONDS:-15}
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "latency.sh: SKIP: no PyTorch with CUDA"; echo "latency.sh: 0 PASS, 0 FAIL"; exit 0; }

cat > "$T/client.py" <<'PY'
import sys, time, torch
secs = float(sys.argv[1])
warm = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0   # requests in the first WARM s not counted
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
for _ in range(50): c = a @ b
torch.cuda.synchronize()
lat = []
t0 = time.perf_counter()
while time.perf_counter() - t0 < warm + secs:
    s = time.perf_counter()
    for _ in range(8): c = a @ b
    torch.cuda.synchronize()
    if s - t0 >= warm: lat.append(time.perf_counter() - s)
    time.sleep(0.005)
t0 += warm
lat.sort(); n = len(lat)
busy = sum(lat) / (time.perf_counter() - t0)
print(f"requests={n} p50_ms={lat[n//2]*1e3:.2f} p99_ms={lat[(n*99)//100]*1e3:.2f} max_ms={lat[-1]*1e3:.2f} busy={busy:.3f}")
PY
cat > "$T/train.py" <<'PY'
import sys, time, torch
secs = float(sys.argv[1])
a = torch.randn(4096, 4096, device="cuda"); b = torch.randn(4096, 4096, device="cuda")
for _ in range(10): c = a @ b
torch.cuda.synchronize()
t0 = time.perf_counter(); win = t0; n = 0; rates = []
while time.perf_counter() - t0 < secs:
    for _ in range(64): c = a @ b
    n += 64
    torch.cuda.synchronize()
    t = time.perf_counter()
    if t - win >= 1.0:
        rates.append(n / (t - win)); n = 0; win = t
print("rates=" + ",".join(f"{r:.1f}" for r in rates))
PY
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
pass=0 fail=0
mark() { if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi; }

alone_rate=$(python3 "$T/train.py" 3 | sed -n 's/^rates=//p' | tr ',' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
printf '| %s | %s | %s | %s | %s | %s | %s |\n' setup p50_ms p99_ms max_ms requests "training share per 1 s window (of alone)" verdict
printf '|---|---|---|---|---|---|---|\n'
run_row() { # label "train prefix" "client prefix" key
  local label=$1 tp=$2 cp=$3 trp=""
  if [ -n "${LAT_TRACE:-}" ] && [ "${tp#vgpu}" != "$tp" ]; then
    mkdir -p "$LAT_TRACE/$4"; export VGPU_LEASE_TRACE=$LAT_TRACE/$4
  else
    unset VGPU_LEASE_TRACE
  fi
  if [ -n "$tp" ]; then
    [ "$tp" = plain ] && tp=""
    $tp python3 "$T/train.py" $((S + 6)) > "$T/train.out" 2>&1 &
    trp=$!; sleep 4
  fi
  $cp python3 "$T/client.py" "$S" > "$T/client.out" 2>&1
  local out; out=$(tail -n 1 "$T/client.out")
  local shares="-"
  if [ -n "$trp" ]; then
    wait "$trp"
    shares=$(sed -n 's/^rates=//p' "$T/train.out" | tr ',' '\n' | awk -v a="$alone_rate" 'NR > 4 && NR <= 4 + '"$S"' { printf "%s%.0f", (n++ ? " " : ""), 100 * $1 / a }')
  fi
  eval "R_${4}_p50=$(get "$out" p50_ms) R_${4}_p99=$(get "$out" p99_ms) R_${4}_busy=$(get "$out" busy) R_${4}_shares='$shares'"
  ROW_OUT="$out"
  ROW_SHARES="$shares"
}
verdict_row() { # label key verdict
  local k=$2
  local p50 p99; eval "p50=\${R_${k}_p50:-?} p99=\${R_${k}_p99:-?}"
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$p50" "$p99" "$(get "$ROW_OUT" max_ms)" "$(get "$ROW_OUT" requests)" "$ROW_SHARES" "$3"
}
run_row "client alone" "" "" alone; verdict_row "client alone" alone "(reference)"
# The same alone under vgpu: what the limiter itself adds to a request (its lease, given back
# idle between requests and taken again by the next one).
run_row "client alone under vgpu --core 30 --priority high" "" "vgpu run --gpu 0 --core 30 --priority high --core-policy soft --" valone
verdict_row "client alone under vgpu --core 30 --priority high" valone "(reference)"
run_row "beside training, plain time-slicing" plain "" plain; verdict_row "beside training, plain time-slicing" plain "(reference)"
run_row "vgpu: training --core 70, client --core 30" "vgpu run --gpu 0 --core 70 --" "vgpu run --gpu 0 --core 30 --" capped
# training within 5 points of 70 minus the client's GPU use, in every window
win_ok() { # shares busy
  printf '%s\n' $1 | awk -v busy="$2" 'BEGIN { ok = 1; n = 0 } { n++; if ($1 < 65 - 100 * busy || $1 > 75) ok = 0 } END { print (ok && n > 0 ? "PASS" : "FAIL") }'
}
v=$(awk -v p="$R_capped_p99" -v q="${R_plain_p99:-2.0}" 'BEGIN { print (p != "" && p <= q + 0.05 && p <= 2.0 ? "PASS" : "FAIL") }')
w=$(win_ok "$R_capped_shares" "${R_capped_busy:-0}")
mark "$v"; mark "$w"
verdict_row "vgpu: training --core 70, client --core 30" capped "p99 $v; training windows $w"
run_row "vgpu: + client --priority high soft, training low" "vgpu run --gpu 0 --core 70 --priority low --" \
  "vgpu run --gpu 0 --core 30 --priority high --core-policy soft --" high
v=$(awk -v p="$R_high_p99" -v m="$R_high_p50" -v a="$R_alone_p50" 'BEGIN { print (p != "" && p <= 1.5 && m <= 1.2 * a ? "PASS" : "FAIL") }')
w=$(win_ok "$R_high_shares" "${R_high_busy:-0}")
mark "$v"; mark "$w"
verdict_row "vgpu: + client --priority high soft, training low" high "p99/p50 $v; training windows $w"
# The recipe (issue 27): no --core at all, --priority high beside --priority low (vgpu-run(1)).
# Targets: client p50 within 1.3x alone, and training at least 85 % of what can run between the
# client's requests without delaying one: whole training kernels (one matmul, 1/alone_rate s)
# that fit in the client's 5 ms idle gap, per request period. With 4096^2 matmuls of 2.7 ms that
# is one per 5.6 ms, 48 % of alone (H200, 2026-11-28: 46 % measured, p50 1.3x); a kernel cannot be
# stopped, so more training means a later request. (The simulated GPU's row, tests/cli/core_recipe.sh,
# has 10 ms gaps: 90 % of alone.)
run_row "vgpu: client --priority high, training --priority low (no --core)" "vgpu run --gpu 0 --priority low --" \
  "vgpu run --gpu 0 --priority high --" recipe
v=$(awk -v m="$R_recipe_p50" -v a="$R_alone_p50" 'BEGIN { print (m != "" && m <= 1.3 * a ? "PASS" : "FAIL") }')
bound=$(awk -v r="$alone_rate" -v a="$R_alone_p50" 'BEGIN { k = 1000 / r; print int(100 * int(5 / k) * k / (5 + a)) }')
# (every window the client spans but its last, which it may leave early)
w=$(printf '%s\n' $R_recipe_shares | head -n -1 | awk -v b="$bound" 'BEGIN { ok = 1; n = 0 } { n++; if ($1 < 0.85 * b) ok = 0 } END { print (ok && n > 0 ? "PASS" : "FAIL") }')
mark "$v"; mark "$w"
verdict_row "vgpu: client --priority high, training --priority low (no --core)" recipe "p50 $v; training windows $w (bound ${bound} %)"
echo
echo "training alone: ${alone_rate} matmuls/s; client busy fraction beside capped training: ${R_capped_busy:-?}"
echo "latency.sh: $pass PASS, $fail FAIL"
