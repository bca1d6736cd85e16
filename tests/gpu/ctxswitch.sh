#!/usr/bin/env bash
# What a request pays for sharing the GPU at all, with no scheduler (issue 17's p50 target): the
# latency client of latency.sh alone, then beside a job that runs one 4096x4096 matmul (about
# 2.5 ms) right after each request ends, told through a pipe. That kernel is done 2.5 ms before
# the next request comes, so the request finds the GPU idle: what it pays over alone is the
# switch from the other job's context to its own.
#   bash tests/gpu/ctxswitch.sh        (GPU 0; about 20 s; needs PyTorch with CUDA)
set -u
T=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "ctxswitch.sh: SKIP: no PyTorch with CUDA"; exit 0; }
cat > "$T/client.py" <<'PY'
import os, sys, time, torch
pipe = os.open(sys.argv[2], os.O_WRONLY) if len(sys.argv) > 2 else None
a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
for _ in range(50): c = a @ b
torch.cuda.synchronize()
lat = []; t0 = time.perf_counter()
while time.perf_counter() - t0 < float(sys.argv[1]):
    s = time.perf_counter()
    for _ in range(8): c = a @ b
    torch.cuda.synchronize(); lat.append(time.perf_counter() - s)
    if pipe is not None: os.write(pipe, b"x")
    time.sleep(0.005)
lat.sort(); n = len(lat)
print("requests=%d p10_ms=%.3f p50_ms=%.3f p99_ms=%.3f" % (n, lat[n // 10] * 1e3, lat[n // 2] * 1e3, lat[n * 99 // 100] * 1e3))
PY
cat > "$T/after.py" <<'PY'
import os, sys, torch
a = torch.randn(4096, 4096, device="cuda"); b = torch.randn(4096, 4096, device="cuda")
c = a @ b; torch.cuda.synchronize()
pipe = os.open(sys.argv[1], os.O_RDONLY)
while os.read(pipe, 1):
    c = a @ b; torch.cuda.synchronize()
PY
echo "alone: $(python3 "$T/client.py" 8)"
mkfifo "$T/p"
python3 "$T/after.py" "$T/p" &
echo "beside a job whose 2.5 ms kernel ends 2.5 ms before each request: $(python3 "$T/client.py" 8 "$T/p")"
wait
