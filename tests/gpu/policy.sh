#!/usr/bin/env bash
# Driver policies on a real GPU: reads the time-slice policy and the compute mode (compared with
# nvidia-smi; never sets either), then starts MPS on its own pipe directory, runs a PyTorch job
# with 'vgpu run --mps --core 25' and reports the SM count it sees and its matmul throughput
# (next to the same job without MPS), and stops MPS again.
#   tests/gpu/policy.sh [BUILD_DIR]
. "$(dirname "$0")/tap.sh"

# ---- time-slice policy (read only) ----
out=$("$V" timeslice get 2>&1) && ok "vgpu timeslice get" || not_ok "vgpu timeslice get" "$out"
echo "$out" | sed 's/^/# /'
js=$("$V" timeslice get --json)
mine=$(jq -r '.gpus[0].timeslice' <<<"$js")
smi=$(nvidia-smi compute-policy -i 0 -l | awk '$2 == "0" && $3 == "Timeslice" { print tolower($4) }')
[ "$mine" = "$smi" ] && ok "GPU 0 time slice '$mine' as nvidia-smi compute-policy -l" || not_ok "time slice" "vgpu '$mine', nvidia-smi '$smi'"

# ---- compute mode (read only) ----
out=$("$V" mode get 2>&1) && ok "vgpu mode get" || not_ok "vgpu mode get" "$out"
echo "$out" | sed 's/^/# /'
mine=$("$V" mode get --json | jq -r '.gpus[0].compute_mode')
smi=$(nvidia-smi -i 0 --query-gpu=compute_mode --format=csv,noheader | tr 'A-Z_' 'a-z-')
[ "$mine" = "$smi" ] && ok "GPU 0 compute mode '$mine' as nvidia-smi" || not_ok "compute mode" "vgpu '$mine', nvidia-smi '$smi'"

# ---- MPS ----
if ! command -v nvidia-cuda-mps-control >/dev/null; then
  ok "MPS # SKIP nvidia-cuda-mps-control not installed"; echo "# $n tests, $fail failed"; [ $fail = 0 ]; exit
fi
tmp=$(mktemp -d /tmp/vgpu-gpu-policy.XXXXXX)
export VGPU_STATE_DIR=$tmp/state; mkdir -m 0700 "$VGPU_STATE_DIR"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
P=$tmp/pipe
cleanup() { "$V" mps stop --pipe-dir "$P" --force --timeout 5 >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
cat >"$tmp/job.py" <<'PY'
import time, torch
p = torch.cuda.get_device_properties(0)
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.float16); b = torch.randn(n, n, device="cuda", dtype=torch.float16)
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.time(); k = 20
for _ in range(k): a @ b
torch.cuda.synchronize(); dt = time.time() - t
print(f"SMS {p.multi_processor_count} TFLOPS {2 * n**3 * k / dt / 1e12:.1f}")
PY
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  base=$(python3 "$tmp/job.py" 2>&1 | grep '^SMS') && ok "baseline PyTorch job: $base" || not_ok "baseline PyTorch job" "$base"
fi
out=$("$V" mps start --gpu 0 --pipe-dir "$P" --log-dir "$tmp/log" 2>&1) && ok "vgpu mps start" || not_ok "vgpu mps start" "$out"
echo "$out" | sed 's/^/# /'
pid=$(cat "$P/nvidia-cuda-mps-control.pid" 2>/dev/null)
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && ok "the control daemon runs (pid $pid)" || not_ok "the control daemon runs"
out=$("$V" mps status 2>&1) && ok "vgpu mps status" || not_ok "vgpu mps status" "$out"
echo "$out" | sed 's/^/# /'
if python3 -c 'import torch' 2>/dev/null; then
  res=$("$V" run --mps --core 25 -- python3 "$tmp/job.py" 2>&1); rc=$?
  line=$(grep '^SMS' <<<"$res")
  [ $rc = 0 ] && [ -n "$line" ] && ok "vgpu run --mps --core 25 PyTorch job: $line" || not_ok "vgpu run --mps --core 25" "$res"
  sms=$(awk '{ print $2 }' <<<"$line")
  total=$(awk '{ print $2 }' <<<"${base:-SMS 0}")
  # MPS rounds pct x SMs down to whole TPCs (2 SMs): 25 % of 132 -> 32.
  want=$(( total * 25 / 100 / 2 * 2 ))
  [ "$total" -gt 0 ] && [ "$sms" = "$want" ] && ok "the MPS job sees $sms of $total SMs (25 %)" || not_ok "SM cap" "saw '$sms', want $want of $total"
else
  ok "vgpu run --mps # SKIP PyTorch not installed"
fi
out=$("$V" mps stop --pipe-dir "$P" 2>&1) && ok "vgpu mps stop" || not_ok "vgpu mps stop" "$out"
sleep 0.5
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && not_ok "the control daemon is gone" || ok "the control daemon is gone"
echo "# $n tests, $fail failed"
[ $fail = 0 ]
