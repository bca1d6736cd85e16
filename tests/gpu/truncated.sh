#!/usr/bin/env bash
# A job's region truncated under a PyTorch process that only launches kernels, on a real GPU
# (issue 12 item 3; tests/cli/truncated_launch.sh is the same on the simulated GPU). Run by the
# lead on the GPU:
#   bash tests/gpu/truncated.sh [BUILD_DIR]          (GPU 0, about 1 minute; needs python3 + torch)
# For --mem 4G and for --mem 4G --core 30: a matmul loop starts, the region is truncated to 0
# bytes once it runs, and the loop goes on for 4 s. The process must exit 0 (it died by SIGBUS
# before: exit 135), say once that the region is damaged, and under --core 30 keep using about
# 30 % of the GPU afterwards (its matmuls per second against an unlimited run; wide band: the
# first second of a capped job may run ahead). Prints TAP.
set -u
B=$(cd "${1:-build}" && pwd) || exit 2
export PATH="$B:$B/tests/progs:$PATH"
unset LD_PRELOAD VGPU_REGION CUDA_VISIBLE_DEVICES
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VGPU_STATE_DIR=$tmp/state; mkdir -m 0700 "$VGPU_STATE_DIR"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | head -n 20 | sed 's/^/#   /'; }
command -v nvidia-smi >/dev/null || { echo "1..0 # SKIP no nvidia-smi"; exit 0; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "1..0 # SKIP no torch with CUDA"; exit 0; }

# Writes VGPU_REGION to $1 once warm, then matmuls for 4 s; prints "rate=N" (matmuls per second).
cat >"$tmp/loop.py" <<'PY'
import os, sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
for _ in range(10):
    y = x @ x
torch.cuda.synchronize()
open(sys.argv[1], "w").write(os.environ.get("VGPU_REGION", ""))
t0, n = time.time(), 0
while time.time() - t0 < 4:
    y = x @ x
    n += 1
    if n % 8 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
print("rate=%.1f" % (n / (time.time() - t0)))
PY

rate() { sed -n 's/^rate=//p' <<<"$1"; }
base=$(timeout 120 vgpu run --gpu 0 --mem 4G -- python3 "$tmp/loop.py" "$tmp/base.ready" 2>/dev/null)
for args in "--mem 4G" "--mem 4G --core 30"; do
  f=$tmp/ready.${args// /_}
  timeout 120 vgpu run --gpu 0 $args -- python3 "$tmp/loop.py" "$f" >"$tmp/out" 2>"$tmp/err" &
  p=$!
  for _ in $(seq 600); do [ -s "$f" ] && break; sleep 0.1; done
  if [ -s "$f" ]; then truncate -s 0 "$(cat "$f")"; fi
  wait $p; rc=$?
  out=$(cat "$tmp/out") err=$(cat "$tmp/err")
  if [ "$rc" = 0 ] && [ -n "$(rate "$out")" ]; then ok "$args, region truncated while it launches: exit 0 ($(rate "$out") matmuls/s)"
  else not_ok "$args, region truncated while it launches: exit 0" "exit $rc; out: $out; err: ${err:0:800}"; fi
  c=$(grep -c 'the job region is damaged' <<<"$err")
  if [ "$c" = 1 ]; then ok "$args: the damage is said once"; else not_ok "$args: the damage is said once" "$c times: ${err:0:800}"; fi
  if [ "$args" != "--mem 4G" ]; then
    share=$(awk -v a="$(rate "$out")" -v b="$(rate "$base")" 'BEGIN { if (b > 0 && a != "") printf "%d", 100 * a / b; else print -1 }')
    if [ "$share" -ge 15 ] && [ "$share" -le 45 ]; then ok "$args: still limited after the truncation ($share % of unlimited)"
    else not_ok "$args: still limited after the truncation" "$share % of unlimited (base: $base; out: $out)"; fi
  fi
done
echo "1..$n"
