#!/usr/bin/env bash
# Memory that is lent, not left idle (issue 37, its Targets): vgpu run --mem REQUEST:LIMIT on a
# real GPU, two PyTorch jobs and a mixed run. Run by the lead on one H200 (139 GiB):
#   bash tests/gpu/lend.sh [BUILD_DIR]          (GPU 0, at most 5 minutes, ~10 GiB host RAM)
# Skips (TAP "1..0 # SKIP", exit 0) without a GPU, without PyTorch on CUDA, on a GPU under
# 130 GiB, or when `vgpu run --help` has no REQUEST (--mem REQUEST:LIMIT not built yet).
# Every step runs under timeout(1); the steps' limits add up to less than 5 minutes, and a step
# that would start past LEND_BUDGET_S (default 290) seconds is skipped, saying so.
# Prints TAP, one line per target, then one table.
#
#  1. B alone: `--mem 100G`, 90 x 1 GiB tensors (the allocations timed), then 4096^3 fp32
#     matmuls for 12 s: B's speed alone.
#  2. A and B: A `--mem 20G:120G` on 100 x 1 GiB tensors (80 GiB of them borrowed), a pass over
#     all of them per step, each step's end time written down; once A has run 8 s, B starts as in
#     1. Targets: B's allocations all succeed within 1 s; B runs at >= 95 % of its speed alone;
#     A is never killed (exit 0, its result printed); A stops 12 s after B ends, and it was back
#     to >= 90 % of its alone speed (3) within 10 s of B's end (a 2 s window of its steps).
#  3. A alone, `--mem 20G:120G`, the same number of steps as in 2: its speed alone, and the same
#     result as in 2 (identical bytes: the steps are elementwise, the result a hash of samples).
#  4. A alone, `--mem 120G` (all its memory requested): A in 3 runs at >= 95 % of this speed;
#     the same result again.
#  5. The mixed run: a service (`--mem 40G`, 36 GiB, matmuls) and two notebook-like jobs that
#     burst (each allocates up to 60 GiB in 1 GiB tensors until it is refused, works 3 s, frees
#     all, idles 2 s) for 30 s, once with `--mem 20G:80G` (borrowing) and once with `--mem 20G`
#     (the requests as hard limits). Memory in use on the GPU (nvidia-smi, every 0.5 s),
#     integrated over the 30 s: lending reaches >= 1.4x the hard limits, and no job failed.
set -u
B=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "Bail out! no build directory ${1:-build}"; exit 2; }
export PATH="$B:$PATH"
unset LD_PRELOAD VGPU_REGION CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | head -n 20 | sed 's/^/#   /'; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "1..0 # SKIP no GPU (nvidia-smi finds none)"; exit 0; }
[ -x "$B/vgpu" ] && [ -f "$B/libvgpu.so" ] || { echo "Bail out! build first (make): no $B/vgpu"; exit 2; }
timeout 30 vgpu run --help 2>&1 | grep -q REQUEST || { echo "1..0 # SKIP vgpu run has no --mem REQUEST:LIMIT (issue 37) in this build"; exit 0; }
timeout 60 python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1 || { echo "1..0 # SKIP PyTorch with CUDA is not importable"; exit 0; }
total_mib=$(timeout 30 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
[ "${total_mib:-0}" -ge 133120 ] || { echo "1..0 # SKIP GPU 0 has ${total_mib:-?} MiB: the jobs are sized for an H200 (139 GiB)"; exit 0; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export VGPU_STATE_DIR=$tmp/state VGPU_MACHINE_DIR=$tmp/machine
mkdir -m 0700 "$VGPU_STATE_DIR"; mkdir -m 0755 "$VGPU_MACHINE_DIR"
# Borrowed memory is served as managed memory, which PyTorch's expandable segments (VMM) cannot
# be: a borrowing job sets them off (vgpu-run(1), "Borrowed memory").
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${LEND_BUDGET_S:-290}
# step SECONDS: true when a step of at most SECONDS still ends within the budget.
step() { [ $(( $(date +%s) - start + $1 )) -le "$budget" ]; }
now() { date +%s.%N; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | tail -n 1; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b <= 0) print ""; else printf "%.1f", 100 * a / b }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a >= b) }'; }
table=()
row() { table+=("| $1 | $2 | ${3:-?} | $4 |"); }
verdict() { if ge "$1" "$2"; then echo met; else echo "NOT met"; fi; }

# ---- the jobs ----
# A: 100 x 1 GiB fp32 tensors, each element its own value, each step one elementwise pass over
# all of them (one kernel a tensor, memory-bound: every byte read and written, ~50 ms a step on
# an H200), its end time appended to STEPFILE; runs until STOPFILE exists or STEPS steps are
# done; prints steps= and result= (a hash of samples of every tensor: a page lost or mixed up
# on its way to the host and back changes it).
cat >"$tmp/a.py" <<'EOF'
import hashlib, os, sys, time, torch
stepfile, stopfile, steps_max = sys.argv[1], sys.argv[2], int(sys.argv[3])
ts = [torch.arange(1 << 28, dtype=torch.float32, device="cuda").mul_(1e-6).add_(i) for i in range(100)]
torch.cuda.synchronize()
print("ready", flush=True)
steps = 0
with open(stepfile, "w", buffering=1) as f:
    while (steps_max == 0 and not os.path.exists(stopfile)) or (steps_max and steps < steps_max):
        for t in ts:
            t.mul_(0.999)
        torch.cuda.synchronize()
        steps += 1
        f.write("%.6f\n" % time.time())
h = hashlib.sha256()
for t in ts:
    h.update(t[:: 1 << 12].cpu().numpy().tobytes())
print("steps=%d result=%s" % (steps, h.hexdigest()[:32]), flush=True)
EOF
# B: N x 1 GiB tensors (the allocation phase timed), then 4096^3 fp32 matmuls for SECONDS.
cat >"$tmp/b.py" <<'EOF'
import sys, time, torch
n, seconds = int(sys.argv[1]), float(sys.argv[2])
x = torch.randn(4096, 4096, device="cuda"); y = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
t0 = time.time(); worst = 0.0; held = []
for i in range(n):
    t1 = time.time()
    held.append(torch.ones(1 << 28, device="cuda"))
    torch.cuda.synchronize()
    worst = max(worst, time.time() - t1)
alloc_s = time.time() - t0
for _ in range(10):
    z = x @ y
torch.cuda.synchronize()
t = time.time(); k = 0
while time.time() - t < seconds:
    for _ in range(8):
        z = x @ y
    torch.cuda.synchronize()
    k += 8
print("alloc_s=%.3f alloc_worst_s=%.3f rate=%.2f" % (alloc_s, worst, k / (time.time() - t)), flush=True)
EOF
# A notebook: for SECONDS, bursts (1 GiB tensors up to MAX GiB until one is refused, 3 s of
# passes over them, all freed) and 2 s idle, starting after OFFSET s; never fails for memory.
cat >"$tmp/nb.py" <<'EOF'
import sys, time, torch
gib, seconds, offset = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
end = time.time() + seconds; time.sleep(offset); bursts = 0; peak = 0
while time.time() < end - 1:
    held = []
    try:
        while len(held) < gib:
            held.append(torch.ones(1 << 28, device="cuda"))
    except torch.cuda.OutOfMemoryError:
        pass
    peak = max(peak, len(held)); t = time.time()
    while time.time() - t < 3 and time.time() < end:
        for h in held:
            h.mul_(1.0001)
        torch.cuda.synchronize()
    del held; torch.cuda.empty_cache(); bursts += 1
    time.sleep(max(0.0, min(2.0, end - time.time())))
print("bursts=%d peak_gib=%d" % (bursts, peak), flush=True)
EOF
# The service: GIB GiB held, matmuls for SECONDS.
cat >"$tmp/svc.py" <<'EOF'
import sys, time, torch
gib, seconds = int(sys.argv[1]), float(sys.argv[2])
held = [torch.ones(1 << 28, device="cuda") for _ in range(gib)]
x = torch.randn(4096, 4096, device="cuda")
t = time.time()
while time.time() - t < seconds:
    z = x @ x
    torch.cuda.synchronize()
print("held_gib=%d" % len(held), flush=True)
EOF
# rate_window STEPFILE FROM TO: A's steps per second with ends in [FROM, TO).
rate_window() { awk -v a="$2" -v b="$3" '$1 >= a && $1 < b { k++ } END { if (b > a) printf "%.3f", k / (b - a) }' "$1"; }
# A's steady rate over a whole step file, its first 3 steps left out (warm-up).
rate_all() { awk 'NR == 3 { t0 = $1 } NR > 3 { k++; t1 = $1 } END { if (t1 > t0) printf "%.3f", k / (t1 - t0) }' "$1"; }
# wait_file FILE TEXT SECONDS
wait_file() { timeout "$3" bash -c 'until grep -q "$1" "$0" 2>/dev/null; do sleep 0.1; done' "$1" "$2"; }

# ---- 1. B alone ----
b_alone=""
if step 30; then
  timeout 30 vgpu run --gpu 0 --mem 100G -- python3 "$tmp/b.py" 90 12 >"$tmp/b-alone" 2>&1
  b_alone=$(field rate <"$tmp/b-alone")
  [ -n "$b_alone" ] && ok "B alone: $b_alone matmuls/s, allocations $(field alloc_s <"$tmp/b-alone") s" || not_ok "B alone runs" "$(tail -n 5 "$tmp/b-alone")"
else skip "B alone" "past the budget"; fi

# ---- 2. A and B ----
a_steps="" a_res="" tb_end=""
if step 90; then
  timeout 90 vgpu run --gpu 0 --name lendA --mem 20G:120G -- python3 "$tmp/a.py" "$tmp/a-mixed.steps" "$tmp/a.stop" 0 >"$tmp/a-mixed" 2>&1 &
  apid=$!; pids+=("$apid")
  if wait_file "$tmp/a-mixed" '^ready' 40 && sleep 8; then   # (a measurement window, not a synchronisation)
    timeout 45 vgpu run --gpu 0 --name lendB --mem 100G -- python3 "$tmp/b.py" 90 12 >"$tmp/b-mixed" 2>&1
    tb_end=$(now)
    sleep 12                                                 # A's 12 s after B (measured, not waited on)
  else not_ok "A starts with --mem 20G:120G and 100 GiB of tensors" "$(tail -n 5 "$tmp/a-mixed")"; fi
  touch "$tmp/a.stop"; wait "$apid"; arc=$?
  a_steps=$(field steps <"$tmp/a-mixed"); a_res=$(field result <"$tmp/a-mixed")
  if [ "$arc" = 0 ] && [ -n "$a_res" ]; then ok "A was never killed (exit 0, $a_steps steps, result $a_res)"
  else not_ok "A was never killed" "exit status $arc: $(tail -n 5 "$tmp/a-mixed")"; fi
  if [ -n "$tb_end" ]; then
    alloc=$(field alloc_s <"$tmp/b-mixed"); b_mixed=$(field rate <"$tmp/b-mixed")
    if ge 1 "$alloc"; then ok "B's allocations (90 GiB) beside A succeed within 1 s ($alloc s, worst $(field alloc_worst_s <"$tmp/b-mixed") s)"
    else not_ok "B's allocations (90 GiB) beside A succeed within 1 s" "$(tail -n 5 "$tmp/b-mixed")"; fi
    row "B's allocations beside A" "<= 1 s" "$alloc s" "$(ge 1 "$alloc" && echo met || echo "NOT met")"
    bp=$(pct "$b_mixed" "$b_alone")
    if ge "$bp" 95; then ok "B runs at >= 95 % of its speed alone ($bp %: $b_mixed against $b_alone matmuls/s)"
    else not_ok "B runs at >= 95 % of its speed alone" "${bp:-?} %: ${b_mixed:-?} against ${b_alone:-?} matmuls/s"; fi
    row "B beside A / B alone" ">= 95 %" "$bp %" "$(verdict "$bp" 95)"
  fi
else skip "A and B" "past the budget"; fi

# ---- 3. A alone, the same steps ----
a_alone=""
if [ -n "$a_steps" ] && step 60; then
  timeout 60 vgpu run --gpu 0 --mem 20G:120G -- python3 "$tmp/a.py" "$tmp/a-alone.steps" "$tmp/none" "$a_steps" >"$tmp/a-alone" 2>&1
  a_alone=$(rate_all "$tmp/a-alone.steps"); r=$(field result <"$tmp/a-alone")
  if [ -n "$r" ] && [ "$r" = "$a_res" ]; then ok "A's result beside B is identical to A's alone ($r, $a_steps steps)"
  else not_ok "A's result beside B is identical to A's alone" "beside B: ${a_res:-none}; alone: ${r:-none}: $(tail -n 3 "$tmp/a-alone")"; fi
  row "A's result beside B = alone" "identical" "$([ -n "$r" ] && [ "$r" = "$a_res" ] && echo identical || echo differs)" "$([ -n "$r" ] && [ "$r" = "$a_res" ] && echo met || echo "NOT met")"
  # Recovery: the first 2 s window after B's end in which A ran at >= 90 % of its alone speed.
  rec=""
  if [ -n "$tb_end" ] && [ -n "$a_alone" ]; then
    rec=$(awk -v s="$tb_end" -v want="$a_alone" 'BEGIN { for (d = 0; d <= 10; d += 0.25) print d }' | while read -r d; do
      a=$(awk -v s="$tb_end" -v d="$d" 'BEGIN { printf "%.6f", s + d }'); b=$(awk -v a="$a" 'BEGIN { printf "%.6f", a + 2 }')
      ge "$(rate_window "$tmp/a-mixed.steps" "$a" "$b")" "$(awk -v r="$a_alone" 'BEGIN { print 0.9 * r }')" && { echo "$d"; break; }
    done)
    if [ -n "$rec" ]; then ok "A back to >= 90 % of its alone speed ($a_alone steps/s) $rec s after B ended (within 10 s)"
    else not_ok "A back to >= 90 % of its alone speed within 10 s after B ended" "alone $a_alone steps/s; after B: $(rate_window "$tmp/a-mixed.steps" "$tb_end" "$(awk -v s="$tb_end" 'BEGIN { printf "%.6f", s + 12 }')") steps/s over 12 s"; fi
  fi
  row "A back to >= 90 % after B ends" "<= 10 s" "${rec:-never} s" "$([ -n "$rec" ] && echo met || echo "NOT met")"
else skip "A alone (--mem 20G:120G)" "${a_steps:+past the budget}${a_steps:-A did not run}"; fi

# ---- 4. A with all its memory requested ----
if [ -n "$a_steps" ] && step 60; then
  timeout 60 vgpu run --gpu 0 --mem 120G -- python3 "$tmp/a.py" "$tmp/a-req.steps" "$tmp/none" "$a_steps" >"$tmp/a-req" 2>&1
  a_req=$(rate_all "$tmp/a-req.steps"); r=$(field result <"$tmp/a-req"); ap=$(pct "$a_alone" "$a_req")
  if ge "$ap" 95; then ok "A alone with --mem 20G:120G runs at >= 95 % of --mem 120G ($ap %: $a_alone against $a_req steps/s)"
  else not_ok "A alone with --mem 20G:120G runs at >= 95 % of --mem 120G" "${ap:-?} %: ${a_alone:-?} against ${a_req:-?} steps/s"; fi
  [ -n "$r" ] && [ "$r" = "$a_res" ] && ok "... with the same result ($r)" || not_ok "... with the same result" "borrowing: ${a_res:-none}; requested: ${r:-none}"
  row "A 20G:120G / A 120G, alone" ">= 95 %" "$ap %" "$(verdict "$ap" 95)"
else skip "A alone (--mem 120G)" "past the budget or A did not run"; fi

# ---- 5. the mixed run: borrowing against the requests as hard limits ----
declare -A integral
for mode in lend hard; do
  if ! step 45; then skip "mixed run ($mode)" "past the budget"; continue; fi
  nbmem=$([ "$mode" = lend ] && echo 20G:80G || echo 20G)
  timeout 45 vgpu run --gpu 0 --mem 40G -- python3 "$tmp/svc.py" 36 34 >"$tmp/svc-$mode" 2>&1 &
  s1=$!; pids+=("$s1")
  timeout 45 vgpu run --gpu 0 --mem "$nbmem" -- python3 "$tmp/nb.py" 60 32 2 >"$tmp/nb1-$mode" 2>&1 &
  n1=$!; pids+=("$n1")
  timeout 45 vgpu run --gpu 0 --mem "$nbmem" -- python3 "$tmp/nb.py" 60 32 4.5 >"$tmp/nb2-$mode" 2>&1 &
  n2=$!; pids+=("$n2")
  # Sampling, not synchronisation: memory in use every 0.5 s for 30 s, once the jobs have started.
  timeout 40 bash -c 'sleep 3; for i in $(seq 60); do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0; sleep 0.5; done' >"$tmp/used-$mode" 2>/dev/null
  wait "$s1"; r1=$?; wait "$n1"; r2=$?; wait "$n2"; r3=$?
  integral[$mode]=$(awk '{ s += $1; k++ } END { if (k) printf "%.0f", s / k * 30 / 1024 }' "$tmp/used-$mode")   # GiB x s
  if [ "$r1$r2$r3" = 000 ] && grep -q held_gib "$tmp/svc-$mode" && grep -q bursts "$tmp/nb1-$mode" && grep -q bursts "$tmp/nb2-$mode"; then
    ok "mixed run ($mode, notebooks --mem $nbmem): no job failed; $(field peak_gib <"$tmp/nb1-$mode") and $(field peak_gib <"$tmp/nb2-$mode") GiB at their peaks; ${integral[$mode]} GiB x s in use"
  else not_ok "mixed run ($mode): no job failed" "exit $r1 $r2 $r3: $(tail -n 2 "$tmp/svc-$mode" "$tmp/nb1-$mode" "$tmp/nb2-$mode")"; fi
done
ratio=$(awk -v a="${integral[lend]:-}" -v b="${integral[hard]:-}" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b }')
if [ -n "$ratio" ]; then
  if ge "$ratio" 1.4; then ok "memory in use over the mixed run: lending ${integral[lend]} GiB x s, hard limits ${integral[hard]}: ${ratio}x >= 1.4x"
  else not_ok "memory in use over the mixed run: lending >= 1.4x the hard limits" "${integral[lend]} against ${integral[hard]} GiB x s: ${ratio}x"; fi
fi
row "memory in use, lending / hard limits" ">= 1.4x" "${ratio:-?}x" "$(verdict "$ratio" 1.4)"

echo "# | issue 37 target | wanted | measured | |"
echo "# |---|---|---|---|"
for r in "${table[@]}"; do echo "# $r"; done
echo "# (B alone ${b_alone:-?} matmuls/s; A alone ${a_alone:-?} steps/s; $(( $(date +%s) - start )) s in all)"
echo "1..$n"
[ "$fail" = 0 ]
