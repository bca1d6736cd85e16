"""mm_rate.py SECONDS: 4096x4096 fp32 matmuls on the current CUDA device, 8 between synchronizes,
for SECONDS after a warm-up; prints "rate=N" (matmuls per second). The plain job of
tests/gpu/oversub.sh and tenants.sh's HAMi-variable row."""
import sys
import time

import torch

a = torch.randn(4096, 4096, device="cuda")
b = torch.randn(4096, 4096, device="cuda")
for _ in range(10):
    c = a @ b
torch.cuda.synchronize()
t = time.time()
n = 0
while time.time() - t < float(sys.argv[1]):
    for _ in range(8):
        c = a @ b
    torch.cuda.synchronize()
    n += 8
print("rate=%.2f" % (n / (time.time() - t)))
