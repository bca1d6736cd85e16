# packaging/slurm/vgpu-task-prolog, Slurm's TaskProlog alternative to the plugin: given a task's
# environment it prints the "export" lines slurmstepd applies; applied, they limit the task.
. "$(dirname "$0")/lib.sh"

prolog=$VGPU_SRC/packaging/slurm/vgpu-task-prolog
tp() { run env VGPU=vgpu VGPU_LIBRARY="$VGPU_BUILD/libvgpu.so" VGPU_TASK_PROLOG_CONF=/nonexistent \
        SLURM_JOB_ID=12 SLURM_STEP_ID=0 SLURM_PROCID=1 "$@" sh "$prolog"; }
total=$(vgpu list --json | jq '.gpus[0].mem_total_bytes')

tp VGPU_SHARDS_PER_GPU=4 SLURM_SHARDS_ON_NODE=1 CUDA_VISIBLE_DEVICES=0
assert_rc "a task with 1 of 4 shards" 0
quarter=$(( total / 4 / 1048576 * 1048576 ))
assert_contains "... gets a quarter of the GPU's memory" "export CUDA_DEVICE_MEMORY_LIMIT_0=$quarter" "$out"
assert_contains "... and of its time" "export CUDA_DEVICE_SM_LIMIT_0=25" "$out"
assert_contains "... its own region file in the state directory" \
  "export CUDA_DEVICE_MEMORY_SHARED_CACHE=$VGPU_STATE_DIR/slurm/12.0.1.region" "$out"
assert_contains "... and libvgpu.so preloaded" "export LD_PRELOAD=$VGPU_BUILD/libvgpu.so" "$out"
assert_eq "... quietly" "" "$err"

# Applied as slurmstepd does (each "export NAME=value" line sets NAME to the rest of the line), the
# limit holds. Under the sanitizers their runtimes go first (tests/run.sh's VGPU_TEST_PRELOAD).
vars=()
while IFS= read -r line; do
  case $line in export\ *=*) vars+=("${line#export }") ;; esac
done <<<"$out"
if [ -n "${VGPU_TEST_PRELOAD:-}" ]; then
  for i in "${!vars[@]}"; do
    case ${vars[$i]} in LD_PRELOAD=*) vars[$i]="LD_PRELOAD=$VGPU_TEST_PRELOAD:${vars[$i]#LD_PRELOAD=}" ;; esac
  done
  vars+=("ASAN_OPTIONS=$ASAN_OPTIONS" "UBSAN_OPTIONS=$UBSAN_OPTIONS")
fi
run env -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" VGPU_FAKE_SCENARIO="$VGPU_FAKE_SCENARIO" \
  VGPU_FAKE_STATE="$VGPU_FAKE_STATE" VGPU_FAKE_LIBDIR="$VGPU_FAKE_LIBDIR" "${vars[@]}" \
  alloc_probe meminfo alloc $((quarter + 1048576))
assert_contains "the task sees its quarter" "total=$quarter" "$out${err:+ (stderr: $err)}"
assert_contains "... and cannot allocate more" "alloc rc=2" "$out"

tp VGPU_DEFAULT_MEM=2G VGPU_DEFAULT_CORE=30 CUDA_VISIBLE_DEVICES=0
assert_contains "without shards, the site's defaults" $'export CUDA_DEVICE_MEMORY_LIMIT_0=2G\nexport CUDA_DEVICE_SM_LIMIT_0=30' "$out"
tp VGPU_DEFAULT_MEM=2G
assert_eq "a task without GPUs is left alone" "" "$out"
tp VGPU_SHARDS_PER_GPU=4 SLURM_SHARDS_ON_NODE=8 CUDA_VISIBLE_DEVICES=0
assert_eq "more shards than the GPU has: left alone" "" "$out"
assert_contains "... saying why (slurmd's log)" "more than VGPU_SHARDS_PER_GPU=4" "$err"
assert_rc "... and never failing the task" 0
tp VGPU_SHARDS_PER_GPU=4 SLURM_SHARDS_ON_NODE=4 CUDA_VISIBLE_DEVICES=0
assert_not_contains "all 4 shards: no time cap" "SM_LIMIT" "$out"

done_testing
