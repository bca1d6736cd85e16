# libvgpu.so and the job region under concurrency: 16 processes of one job racing to allocate
# never pass the limit at any sampled instant; processes killed with SIGKILL (while holding
# memory, or in the middle of allocating) have their usage reclaimed.
. "$(dirname "$0")/lib.sh"

# A GPU whose contexts cost 16 MiB, so that 16 processes' contexts do not fill the job.
sed 's/"context_overhead": [0-9]*/"context_overhead": 16777216/' \
  "$VGPU_SRC/tests/fakegpu/scenarios/h100.json" > "$T_DIR/small-ctx.json"
export VGPU_FAKE_SCENARIO=$T_DIR/small-ctx.json
rm -f "$VGPU_FAKE_STATE"

# All 16 create their contexts, then fill at once on "go"; each holds what it got until "done",
# once all have filled, and the sampler watches the region the whole time.
cat > "$T_DIR/race.sh" <<'EOF'
export d=$1
region_sampler "$VGPU_REGION" 0 60000 "$d/done" > "$d/sample" &
for i in $(seq 16); do alloc_probe await "$d/go" fill 48M await "$d/done" > "$d/race.$i" 2>&1 & done
count() { [ "$(cat "$d"/race.* | grep -c "$1")" -ge 16 ]; }
export -f count   # for the wait_until command
wait_until 60 count '^awaiting$\|failed: 2$' && touch "$d/go"
wait_until 60 count '^fill rc=\|failed: 2$'
touch "$d/done"
wait
EOF
run vgpu run --mem 2G -- bash "$T_DIR/race.sh" "$T_DIR"
sample=$(cat "$T_DIR/sample")
max=$(printf '%s' "$sample" | sed -n 's/.*max=\([0-9]*\).*/\1/p')
limit=$(printf '%s' "$sample" | sed -n 's/.*limit=\([0-9]*\).*/\1/p')
assert_eq "the sampler read the job's 2 GiB limit" 2147483648 "$limit"
if [ -n "$max" ] && [ "$max" -le "$limit" ] && [ "$max" -gt 1073741824 ]; then
  ok "16 racing processes: the job's usage never passed the limit (max $max of $limit)"
else
  not_ok "16 racing processes: the job's usage never passed the limit" "$sample"
fi
refused=$(cat "$T_DIR"/race.* | grep -Ec 'fill rc=2|cuDevicePrimaryCtxRetain.* failed: 2$')
assert_eq "every racing process ended with OUT_OF_MEMORY (allocation or context), never another error" 16 "$refused"
total=$(cat "$T_DIR"/race.* | sed -n 's/.*count=//p' | paste -sd+ | bc)
# Each process's context (16 MiB) is charged once, so the pieces granted fill the job to within
# one piece: fewer means contexts were over-charged (one process charged for the others'
# contexts created at the same moment), more means the limit was passed.
nctx=$(cat "$T_DIR"/race.* | grep -c '^fill rc=')
filled=$((nctx * 16777216 + total * 50331648))
if [ "$filled" -le 2147483648 ] && [ "$filled" -gt $((2147483648 - 50331648)) ]; then
  ok "the job filled to within one 48 MiB piece of 2 GiB ($nctx contexts of 16 MiB, $total pieces)"
else
  not_ok "the job filled to within one 48 MiB piece of 2 GiB" "$nctx contexts, $total pieces: $filled bytes"
fi

# SIGKILL while holding memory: the next process of the job reclaims it.
run vgpu run --mem 1G -- sh -c '
  alloc_probe alloc 256M hold > "$0/held" 2>&1 & p=$!
  wait_until 30 grep -q holding "$0/held"
  region_sampler "$VGPU_REGION" 0 1
  kill -KILL $p; wait $p 2>/dev/null
  wait_until 10 sh -c "alloc_probe meminfo | grep -q used=16777216"
  alloc_probe meminfo
  region_sampler "$VGPU_REGION" 0 1' "$T_DIR"
assert_contains "a process holding 256 MiB (+16 MiB context) is counted" "last=285212672" "$out"
assert_contains "after SIGKILL (reclaimed within 10 s; soak.sh bounds the time), the next process of the job sees only its own context" "used=16777216" "$out"
assert_contains "... and after it exits the job holds nothing" "last=0 limit=1073741824" "$out"

# SIGKILL in the middle of allocating and freeing, several times: nothing leaks for good.
run vgpu run --mem 1G -- sh -c '
  for k in 1 2 3 4 5; do
    alloc_probe churn 5000 > /dev/null 2>&1 & p=$!
    # Not a synchronization: the kill lands at an arbitrary moment of its life, on purpose.
    sleep 0.3; kill -KILL $p; wait $p 2>/dev/null
  done
  vgpu ps >/dev/null 2>&1
  alloc_probe alloc 1000M meminfo' "$T_DIR"
assert_contains "after 5 processes killed mid-allocation, the whole limit is usable again" "alloc rc=0 size=1048576000" "$out"

# A forked child is a process of the job with its own slot: it shares the limit, and what it
# held is given back when it exits.
export VGPU_FAKE_SCENARIO=$VGPU_SRC/tests/fakegpu/scenarios/h100.json
rm -f "$VGPU_FAKE_STATE"
run vgpu run --mem 1G -- alloc_probe alloc 100M fork alloc 100M meminfo alloc 400M
assert_contains "the child's allocation is charged to the job (context + 2 x 100 MiB)" "meminfo rc=0 free=327155712 total=1073741824 used=746586112" "$out"
assert_contains "the child cannot pass the job's limit" "alloc rc=2 size=419430400" "$out"
assert_match "the child's messages carry its own pid" "vgpu\[[0-9]+\]: warning: job" "$err"
assert_contains "after the child exits its usage is given back" "parent rc=0 free=432013312 total=1073741824 used=641728512" "$out"
done_testing
