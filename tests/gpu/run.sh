#!/bin/bash
# Conformance suite of libvgpu.so on a real NVIDIA GPU (issue 3, "The real GPU"). One command:
#   bash tests/gpu/run.sh [BUILD_DIR]        (default build/; GPU 0; about 5 minutes)
#   ARBITER=1 bash tests/gpu/run.sh        the same, every job through the arbiter (vgpu daemon)
# needs: an NVIDIA GPU and driver, gcc and /usr/local/cuda/include/cuda.h (for launch_cost.c);
# python3 with torch / jax / cupy where present (each check is skipped, with the reason, when
# its framework is missing). vgpu, libvgpu.so and the test programs come from BUILD_DIR (built
# on any machine: alloc_probe binds to the real libcuda.so.1 at run time).
# Prints ONE table (check | result | detail) and writes it, with date, GPU and driver, to
# tests/gpu/RESULTS.md. Every check is bounded with timeout(1).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-build}" && pwd) || exit 2
export PATH="$B:$B/tests/progs:$PATH"
unset LD_PRELOAD VGPU_REGION CUDA_VISIBLE_DEVICES
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export VGPU_STATE_DIR=$tmp/state; mkdir -m 0700 "$VGPU_STATE_DIR"
# ARBITER=1: every job goes through the arbiter (vgpu daemon) of this run's machine-wide directory
# (latency.sh and tenants.sh start their own); without it, on this user's own schedule.
export VGPU_MACHINE_DIR=$tmp/machine; mkdir -m 0755 "$VGPU_MACHINE_DIR"
. "$src/tests/gpu/arbiter.lib"; arbiter_start || exit 1
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$tmp"' EXIT
LIMIT=4G LIMIT_B=$((4 << 30))
rows=()
row() { rows+=("| $1 | $2 | $3 |"); printf '%-34s %-5s %s\n' "$1" "$2" "$3" >&2; }
T() { timeout "${TMO:-180}" "$@"; }
have_py() { python3 -c "import $1" >/dev/null 2>&1; }
# RUN_SKIP=a,b leaves sections out: alloc, frameworks, core, list, mig, policy, launchproc, launch,
# latency, tenants, top (latency and tenants take about 2 minutes each; run them on their own).
# RUN_RESULTS=FILE writes the table there instead of tests/gpu/RESULTS.md (regress.sh does).
skip() { [[ ",${RUN_SKIP:-}," == *",$1,"* ]]; }

command -v nvidia-smi >/dev/null || { echo "run.sh: no nvidia-smi: is this a GPU machine?" >&2; exit 2; }
[ -x "$B/vgpu" ] && [ -f "$B/libvgpu.so" ] && [ -x "$B/tests/progs/alloc_probe" ] ||
  { echo "run.sh: build first (make) or give the build directory" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0)
# Every job runs on GPU 0 through `T vgpu run --gpu 0` (timeout(1) cannot run a shell function).

# ---- driver-API allocation paths: each filled to the refusal under a 4 GiB limit ----
if ! skip alloc; then
# While the process still holds everything, NVML's per-process usage (which includes the
# context) must not exceed the limit.
for path in "alloc 256M" "pitch 65536 4096" "managed 256M" "async 256M" "pool 256M" "vmm 256M" \
            "array 16384 4096" "array3d 256 256 1024" "mipmap 8192 8192 4"; do
  set -- $path; op=$1; shift
  steps=""; for i in $(seq 64); do steps="$steps $op $*"; done
  T vgpu run --gpu 0 --mem $LIMIT -- sh -c 'alloc_probe '"$steps"' sleep 3000 > "$0/p.out" 2>"$0/p.err" & p=$!; sleep 2.5
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | awk -F", " -v p=$p "\$1==p {print \$2}"
    wait $p' "$tmp" > "$tmp/nv" 2>/dev/null
  ok=$(grep -c "^$op rc=0" "$tmp/p.out"); refused=$(grep -c "^$op rc=2" "$tmp/p.out")
  other=$(grep "^$op rc=" "$tmp/p.out" | grep -vc "rc=[02]")
  used_mib=$(head -1 "$tmp/nv"); used_mib=${used_mib:-?}
  if [ "$refused" -gt 0 ] && [ "$other" = 0 ] && [ "$used_mib" != "?" ] && [ "$used_mib" -le $((LIMIT_B >> 20)) ]; then r=PASS; else r=FAIL; fi
  row "driver $op under $LIMIT" $r "$ok granted, then OUT_OF_MEMORY ($refused), other errors $other; NVML process ${used_mib} MiB of $((LIMIT_B >> 20))"
done
T vgpu run --gpu 0 --mem $LIMIT -- alloc_probe meminfo totalmem > "$tmp/mi" 2>&1
if grep -q "total=$LIMIT_B" "$tmp/mi" && grep -q "bytes=$LIMIT_B" "$tmp/mi"; then r=PASS; else r=FAIL; fi
row "cuMemGetInfo / cuDeviceTotalMem" $r "$(tr '\n' ' ' < "$tmp/mi")"
fi


# ---- two processes, one limit ----
if ! skip alloc; then
T vgpu run --gpu 0 --mem $LIMIT -- sh -c 'alloc_probe alloc 2500M sleep 4000 > "$0/a" 2>&1 & sleep 2; alloc_probe alloc 2500M > "$0/b" 2>&1; wait' "$tmp"
if grep -q "alloc rc=0" "$tmp/a" && grep -q "alloc rc=2" "$tmp/b"; then r=PASS; else r=FAIL; fi
row "two-process job shares the limit" $r "first: $(head -1 "$tmp/a"); second: $(grep '^alloc' "$tmp/b")"
fi


# ---- a process in a container (its own PID namespace and /proc) ----
# It cannot see its host pid, the pid NVML lists it by: it waits for vgpu run's walk to record it,
# then measures its context by its own NVML figure (libvgpu(7)), not by the device-wide growth.
if ! skip alloc; then
if unshare -pf --mount-proc true 2>/dev/null; then
  T vgpu run --gpu 0 --mem $LIMIT -- sh -c 'unshare -pf --kill-child --mount-proc env VGPU_LOG=debug alloc_probe alloc 1G sleep 4000 > "$0/c.out" 2>"$0/c.err" & sleep 3
    vgpu ps --json > "$0/c.json"; wait' "$tmp" > /dev/null 2>&1
  used=$(jq '.jobs[-1].gpus[0].mem_used_bytes // empty' "$tmp/c.json" 2>/dev/null)
  nv=$(jq '.jobs[-1].gpus[0].nvml_used_bytes // empty' "$tmp/c.json" 2>/dev/null)
  ctx=$(sed -n 's/.*context on GPU [0-9]*: \([0-9]*\) bytes.*/\1/p' "$tmp/c.err" | head -n 1)
  delta=$(grep -c "device-wide delta" "$tmp/c.err")
  if grep -q "alloc rc=0" "$tmp/c.out" && [ -n "$used" ] && [ -n "$nv" ] && [ "$delta" = 0 ] && [ -n "$ctx" ] &&
     [ $(( used > nv ? used - nv : nv - used )) -le $((2 << 20)) ]; then r=PASS; else r=FAIL; fi
  # What the library said of its context and its host pid, for the next fix (stderr: the log).
  [ "$r" = FAIL ] && grep -iE "context|host pid|delta|nvml" "$tmp/c.err" | head -12 | sed 's/^/container row: /' >&2
  row "container process's context" $r "charged $(( ${ctx:-0} >> 20 )) MiB by its own NVML figure (device-wide measurements: $delta); job ${used:-?} B, NVML ${nv:-?} B"
else
  row "container process's context" SKIP "unshare -pf --mount-proc is not allowed here"
fi
fi


# ---- nvidia-smi inside the job ----
if ! skip alloc; then
T vgpu run --gpu 0 --mem $LIMIT -- nvidia-smi --query-gpu=index,memory.total,memory.used,memory.free --format=csv,noheader,nounits > "$tmp/smi" 2>&1
lines=$(grep -c . "$tmp/smi"); tot=$(awk -F", " 'NR==1 {print $2}' "$tmp/smi")
if [ "$lines" = 1 ] && [ "$tot" = $((LIMIT_B >> 20)) ]; then r=PASS; else r=FAIL; fi
row "nvidia-smi in the job" $r "$(tr '\n' ';' < "$tmp/smi") (one GPU, total $((LIMIT_B >> 20)) MiB expected)"
fi


# ---- PyTorch ----
if ! skip frameworks; then
if have_py torch; then
  T vgpu run --gpu 0 --mem $LIMIT -- python3 -c '
import torch
f, t = torch.cuda.mem_get_info()
print("total", t)
a = torch.randn(2048, 2048, device="cuda"); b = (a @ a).sum().item(); print("work ok")
try:
    x = torch.empty(5 << 30, dtype=torch.uint8, device="cuda"); print("no OOM")
except torch.OutOfMemoryError:
    print("OOM raised")' > "$tmp/pt" 2>&1
  if grep -q "total $LIMIT_B" "$tmp/pt" && grep -q "work ok" "$tmp/pt" && grep -q "OOM raised" "$tmp/pt"; then r=PASS; else r=FAIL; fi
  row "PyTorch mem_get_info / OOM / work" $r "$(tr '\n' ' ' < "$tmp/pt" | tail -c 300)"
  bench='import torch,time
a=torch.randn(4096,4096,device="cuda");b=torch.randn(4096,4096,device="cuda")
for _ in range(20): c=a@b
torch.cuda.synchronize();t=time.time();n=0
while time.time()-t<5: c=a@b;n+=1
torch.cuda.synchronize();print(n/(time.time()-t))'
  # Three interleaved pairs, the median of their ratios: the GPU slows as it warms up (371 it/s
  # bare first, 362 a minute later), so one bare run followed by one hooked run read as a 2 %
  # loss that interleaving showed to be none.
  ratios="" pairs=""
  for k in 1 2 3; do
    bare=$(T python3 -c "$bench" 2>/dev/null | tail -1); hooked=$(T vgpu run --gpu 0 -- python3 -c "$bench" 2>/dev/null | tail -1)
    ratios="$ratios $(python3 -c "print(f'{$hooked/$bare:.4f}')" 2>/dev/null || echo 0)"
    pairs="$pairs ${bare%.*}/${hooked%.*}"
  done
  ratio=$(printf '%s\n' $ratios | sort -n | sed -n 2p)
  r=$(python3 -c "print('PASS' if $ratio >= 0.99 else 'FAIL')" 2>/dev/null || echo FAIL)
  row "PyTorch 4096^2 matmul, no limit" $r "bare/with libvgpu it/s:$pairs; median ratio $ratio (target >= 0.99)"
else
  row "PyTorch" SKIP "python3 cannot import torch"
fi
fi


# ---- JAX: default preallocation takes its share of the slice ----
if ! skip frameworks; then
if have_py jax; then
  T vgpu run --gpu 0 --mem $LIMIT -- python3 -c '
import jax, jax.numpy as jnp
x = jnp.ones((1024, 1024)).sum().block_until_ready()
print("bytes_limit", jax.devices()[0].memory_stats()["bytes_limit"])' > "$tmp/jax" 2>&1
  lim=$(sed -n 's/^bytes_limit //p' "$tmp/jax")
  if [ -n "$lim" ] && [ "$lim" -le "$LIMIT_B" ] && [ "$lim" -gt $((LIMIT_B / 4)) ]; then r=PASS; else r=FAIL; fi
  row "JAX preallocation within the slice" $r "bytes_limit ${lim:-?} of $LIMIT_B; $(tail -c 200 "$tmp/jax" | tr '\n' ' ')"
else
  row "JAX" SKIP "python3 cannot import jax"
fi
fi


# ---- CuPy memory pool ----
if ! skip frameworks; then
if have_py cupy; then
  T vgpu run --gpu 0 --mem $LIMIT -- python3 -c '
import cupy
f, t = cupy.cuda.runtime.memGetInfo(); print("total", t)
keep = [cupy.empty(512 << 20, dtype=cupy.uint8) for _ in range(4)]; print("pool ok", cupy.get_default_memory_pool().total_bytes())
try:
    cupy.empty(3 << 30, dtype=cupy.uint8); print("no OOM")
except cupy.cuda.memory.OutOfMemoryError:
    print("OOM raised")' > "$tmp/cp" 2>&1
  if grep -q "total $LIMIT_B" "$tmp/cp" && grep -q "pool ok" "$tmp/cp" && grep -q "OOM raised" "$tmp/cp"; then r=PASS; else r=FAIL; fi
  row "CuPy pool under the limit" $r "$(tr '\n' ' ' < "$tmp/cp" | tail -c 300)"
else
  row "CuPy" SKIP "python3 cannot import cupy"
fi
fi


# ---- compute limiter (--core): its own table in tests/gpu/RESULTS-core.md (about 100 s) ----
if ! skip core; then
T bash "$src/tests/gpu/core.sh" "$B" > "$tmp/core" 2>&1; cat "$tmp/core" >&2; row "compute limiter (core.sh)" "$(grep -q 'core.sh: [0-9]* PASS, 0 FAIL' "$tmp/core" && echo PASS || echo FAIL)" "$(tail -n 1 "$tmp/core")"
fi


# ---- vgpu list field by field against nvidia-smi --query-gpu ----
if ! skip list; then
T bash "$src/tests/gpu/list.sh" "$B" > "$tmp/list" 2>&1; cat "$tmp/list" >&2; row "vgpu list vs nvidia-smi (list.sh)" "$(grep -q '^not ok' "$tmp/list" && echo FAIL || echo PASS)" "$(tail -n 1 "$tmp/list")"
fi


# ---- vgpu mig, read-only verbs only (status, profiles, list, export) vs nvidia-smi mig -lgip ----
if ! skip mig; then
T bash "$src/tests/gpu/mig.sh" "$B" > "$tmp/mig" 2>&1; cat "$tmp/mig" >&2; row "vgpu mig read-only (mig.sh)" "$(grep -q '^not ok' "$tmp/mig" && echo FAIL || echo PASS)" "$(tail -n 1 "$tmp/mig")"
fi


# ---- driver policies: timeslice/mode read-only vs nvidia-smi; MPS start, a --mps --core 25 PyTorch job, stop ----
if ! skip policy; then
T bash "$src/tests/gpu/policy.sh" "$B" > "$tmp/policy" 2>&1; cat "$tmp/policy" >&2; row "timeslice, mode, MPS (policy.sh)" "$(grep -q '^not ok' "$tmp/policy" && echo FAIL || echo PASS)" "$(grep -o 'SMS [0-9]* TFLOPS [0-9.]*' "$tmp/policy" | paste -sd' ' | sed 's/^/baseline, then --mps --core 25: /'); $(tail -n 1 "$tmp/policy")"
fi


# ---- kernel-launch cost with and without the library (no limit) ----
if ! skip launchproc; then
# Between processes (launch.sh): separate processes differ by about ±600 ns per launch, so this
# row is shown for reference only (INFO); the verdict is the in-process row after it, which
# compares the launch through libvgpu.so with the driver's own cuLaunchKernel in one process.
T bash "$src/tests/gpu/launch.sh" "$B" > "$tmp/launch" 2>&1; cat "$tmp/launch" >&2
row "kernel launch cost, no limit, between processes (launch.sh)" INFO "$(tail -n 1 "$tmp/launch" | cut -d' ' -f2-)"
fi


# ---- the limiter's added cost per launch under budget, inside one process (launch_toggle) ----
if ! skip launch; then
# Pinned to one CPU (as tests/gpu/launch_ab.sh): unpinned, the same tree gave +41/+22 ns for -r
# where pinned runs give +5.
pin=""; command -v taskset >/dev/null && [ "$(nproc)" -gt 2 ] && pin="taskset -c 2"
out=$(T $pin vgpu run --gpu 0 --mem $LIMIT -- launch_toggle -r -n 20000 2>&1 | tail -n 1)
v=$(printf '%s\n' "$out" | tr ' ' '\n' | awk -F= '$1 == "mean_ns" { m = $2 } $1 == "median_ns" { q = $2 }
    END { print (m != "" && m < 20 && q < 20 ? "PASS" : "FAIL") }')
row "launch cost, no core limit, in-process" "$v" "$out (libvgpu.so minus the driver's own; target: mean and median under 20 ns)"
for c in 90 50; do
  out=$(T $pin vgpu run --gpu 0 --core $c -- launch_toggle -n 6000 -c $c 2>&1 | tail -n 1)
  v=$(printf '%s\n' "$out" | tr ' ' '\n' | awk -F= '$1 == "mean_ns" { m = $2 } $1 == "ci95_ns" { h = $2 }
      $1 == "median_ci95" { split($2, x, /\.\./); q = x[2] } END { print (m != "" && m + h < 100 && q < 100 ? "PASS" : "FAIL") }')
  row "launch cost under --core $c, in-process" "$v" "$out (target: mean and median under 100 ns)"
done
fi

# ---- the machine-wide schedule: inference beside training (latency.sh), tenants (tenants.sh) ----
# (RUN_SKIP=latency,tenants leaves them out; see the top of this file.)
if ! skip latency; then
  T bash "$src/tests/gpu/latency.sh" "$B" > "$tmp/lat" 2>&1; cat "$tmp/lat" >&2; cp "$tmp/lat" "$src/tests/gpu/RESULTS-latency.md"
  row "inference beside training (latency.sh)" "$(grep -q 'latency.sh: [0-9]* PASS, 0 FAIL' "$tmp/lat" && echo PASS || echo FAIL)" "$(tail -n 1 "$tmp/lat"); table in RESULTS-latency.md"
fi
if [ -f "$src/tests/gpu/tenants.sh" ] && ! skip tenants; then
  T bash "$src/tests/gpu/tenants.sh" "$B" > "$tmp/ten" 2>&1; cat "$tmp/ten" >&2
  while IFS='|' read -r _ c r d _; do [ -n "$c" ] && row "$(echo $c)" "$(echo $r)" "$(echo $d)"; done < <(grep '^|' "$tmp/ten" | grep -v '^| check\|^|---')
fi

# ---- vgpu top with a limited PyTorch job; its --once snapshot goes under the table ----
if ! skip top; then
T env TOP_SNAPSHOT="$tmp/topsnap" bash "$src/tests/gpu/top.sh" "$B" > "$tmp/top" 2>&1; cat "$tmp/top" >&2
row "vgpu top, limited PyTorch job (top.sh)" "$(grep -q '^not ok' "$tmp/top" && echo FAIL || echo PASS)" \
  "$(grep -c '^ok' "$tmp/top") ok, $(grep -c '^not ok' "$tmp/top") not ok; snapshot below"
fi

table=$(printf '%s\n' "| check | result | detail |" "|---|---|---|" "${rows[@]}")
printf '%s\n' "$table"
{ echo "# vgpu on a real GPU"; echo
  echo "Latest run of \`${ARBITER:+ARBITER=$ARBITER }bash tests/gpu/run.sh\`: $(date -u +%Y-%m-%d), $gpu, driver $driver."; echo
  printf '%s\n' "$table"; } > "${RUN_RESULTS:-$src/tests/gpu/RESULTS.md}"
cat "$tmp/topsnap" >> "${RUN_RESULTS:-$src/tests/gpu/RESULTS.md}" 2>/dev/null
! printf '%s\n' "${rows[@]}" | grep -q '| FAIL |'
