#!/usr/bin/env bash
# vgpu top on a real GPU: runs a limited PyTorch job (--mem 4G --core 50), takes `vgpu top --once`
# and `--once --json` while it runs, checks the job and its process are shown against their
# limits, and appends the snapshot to tests/gpu/RESULTS.md (or to $TOP_SNAPSHOT).
#   bash tests/gpu/top.sh [BUILD]
set -u
build=$(cd "${1:-build}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
vgpu=$build/vgpu
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "ok - # SKIP no PyTorch with CUDA"; exit 0; }

"$vgpu" run --name topcheck --mem 4G --core 50 -- python3 -c '
import torch, time
x = torch.randn(8192, 8192, device="cuda")
t = time.time()
while time.time() - t < 25:
    y = x @ x
torch.cuda.synchronize()
' & job=$!
sleep 10
snap=$("$vgpu" top --once 2>&1); rc=$?
json=$("$vgpu" top --once --json 2>/dev/null)
wait $job
[ $rc = 0 ] && ok "vgpu top --once exits 0" || bad "vgpu top --once exits 0 (rc=$rc)"
grep -q "topcheck" <<<"$snap" && ok "the job is shown" || bad "the job is shown"
[ "$(jq '.jobs[] | select(.name == "topcheck") | .mem_limit_bytes' <<<"$json")" = $((4 << 30)) ] \
  && ok "JSON: memory limit 4 GiB" || bad "JSON: memory limit 4 GiB"
[ "$(jq '.jobs[] | select(.name == "topcheck") | .core_limit_percent' <<<"$json")" = 50 ] \
  && ok "JSON: core limit 50%" || bad "JSON: core limit 50%"
share=$(jq '.jobs[] | select(.name == "topcheck") | .gpu_time_percent // 999 | floor' <<<"$json")
[ "$share" -le 65 ] && ok "the unsynchronized PyTorch loop is held near its 50% cap (${share}%)" \
  || bad "the unsynchronized PyTorch loop is held near its 50% cap (${share}%)"
jq -e '[.processes[] | select(.job != null)] | length > 0' <<<"$json" >/dev/null \
  && ok "the job's process is joined to it" || bad "the job's process is joined to it"
jq -e '.gpus[0].temperature_celsius | type == "number"' <<<"$json" >/dev/null \
  && ok "temperature is read" || bad "temperature is read"
{
  echo
  echo "## vgpu top --once with a limited PyTorch job ($(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1))"
  echo
  echo '```'
  echo "$snap"
  echo '```'
} >>"${TOP_SNAPSHOT:-$src/tests/gpu/RESULTS.md}"
exit $fail
