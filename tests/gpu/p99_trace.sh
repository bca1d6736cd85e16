#!/usr/bin/env bash
# Why a run's p99 blew up (issue 34 item 2): the inference client of latency.sh beside --core 70
# training, as regress.sh's p99 rows run them, with every process's lease trace (VGPU_LEASE_TRACE)
# and each request's end, latency and launch time, then tests/gpu/slow_requests.py on each run:
# for every request slower than P99_SLOW_MS (default 1.1), the client's and the training job's
# lease events in the 8 ms before it and during it, on one clock (CLOCK_MONOTONIC).
#   bash tests/gpu/p99_trace.sh [BUILD_DIR] [OUT_DIR]
#   P99_ROWS="hard soft"  hard: client --core 30, training --core 70; soft: client --core 30
#                         --priority high --core-policy soft, training --core 70 --priority low
#   P99_RUNS=8            client runs of 2.5 s (after 0.5 s of warm-up) per row
#   ARBITER=1             through vgpu daemon (tests/gpu/arbiter.lib), as regress.sh's daemon rows
# OUT_DIR (default a temporary one, removed) keeps the traces: ROW/train/lease.PID and
# ROW/cN/{lease.PID,req.txt}.
set -u
cd "$(dirname "$0")/../.." || exit 2
src=$(pwd)
B=$(cd "${1:-build}" && pwd) || exit 2
T=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
O=${2:-$T/out}; mkdir -p "$O" || exit 2
export PATH="$B:$PATH" VGPU_STATE_DIR=$T/state VGPU_MACHINE_DIR=$T/machine
mkdir -m 0700 "$VGPU_STATE_DIR"; mkdir -m 0755 "$VGPU_MACHINE_DIR"
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "p99_trace.sh: SKIP: no PyTorch with CUDA"; exit 0; }
. "$src/tests/gpu/arbiter.lib"; arbiter_start || exit 1
sed -n "/^cat > \"\$T\/train.py\" <<'PY'/,/^PY/p" tests/gpu/latency.sh | sed '1d;$d' > "$T/train.py"
cat > "$T/client.py" <<'PY'
import sys, time, torch
secs, warm, dump = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
for _ in range(50): c = a @ b
torch.cuda.synchronize()
lat, rec = [], []
t0 = time.perf_counter()
while time.perf_counter() - t0 < warm + secs:
    s = time.perf_counter()
    for _ in range(8): c = a @ b
    l = time.perf_counter()
    torch.cuda.synchronize()
    e = time.perf_counter()
    if s - t0 >= warm:
        lat.append(e - s); rec.append((time.monotonic_ns(), int((e - s) * 1e9), int((l - s) * 1e9)))
    time.sleep(0.005)
with open(dump, "w") as f:
    for r in rec: f.write("%d %d %d\n" % r)
lat.sort(); n = len(lat)
print(f"requests={n} p50_ms={lat[n//2]*1e3:.2f} p99_ms={lat[(n*99)//100]*1e3:.2f} max_ms={lat[-1]*1e3:.2f}")
PY
R=${P99_RUNS:-8}
for row in ${P99_ROWS:-hard soft}; do
  case $row in
    hard) to="--core 70" co="--core 30" ;;
    soft) to="--core 70 --priority low" co="--core 30 --priority high --core-policy soft" ;;
    *) echo "p99_trace.sh: P99_ROWS: hard or soft, not '$row'" >&2; exit 2 ;;
  esac
  mkdir -p "$O/$row/train"
  # Training must end by itself: its trace is written at exit, which a SIGTERM would skip.
  VGPU_LEASE_TRACE=$O/$row/train timeout 300 vgpu run --gpu 0 $to -- python3 "$T/train.py" $((4 * R + 6)) \
    > "$O/$row/train.out" 2>&1 & tr=$!
  sleep 3
  for i in $(seq "$R"); do
    mkdir -p "$O/$row/c$i"
    out=$(VGPU_LEASE_TRACE=$O/$row/c$i timeout 30 vgpu run --gpu 0 $co -- python3 "$T/client.py" 2.5 0.5 "$O/$row/c$i/req.txt" 2>&1 | tail -n 1)
    echo "$row run $i: $out"
  done
  wait "$tr"
  for i in $(seq "$R"); do
    python3 "$src/tests/gpu/slow_requests.py" "$O/$row/train" "$O/$row/c$i" "${P99_SLOW_MS:-1.1}" | sed "s/^/$row run $i: /"
  done
done
