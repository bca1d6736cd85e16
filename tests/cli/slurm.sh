# The Slurm plugin (spank_vgpu.so) on a real one-node Slurm on localhost with the simulated GPU:
# srun/sbatch options, site maxima, gres/shard shares, and the tasks' jobs in vgpu ps. Run by
# `make test-slurm` (VGPU_TEST_SLURM=1); `make test` skips it, because it needs root and Debian's
# Slurm packages (SLURM_PACKAGES in the Makefile), and starts daemons.
. "$(dirname "$0")/lib.sh"
. "$VGPU_SRC/tests/slurm/cluster.sh"

pkgs=${VGPU_SLURM_PACKAGES:-libslurm-dev slurmctld slurmd slurm-client munge}
plugin=$VGPU_BUILD/slurm/spank_vgpu.so
[ "${VGPU_TEST_SLURM:-}" = 1 ] || skip_all "a real Slurm: run it with make test-slurm"
[ "$(id -u)" -eq 0 ] || skip_all "make test-slurm starts slurmd and slurmctld: it needs root"
for c in munged slurmctld slurmd srun sbatch scontrol sinfo; do
  command -v $c >/dev/null || skip_all "$c is missing: install the packages $pkgs (sudo make deps)"
done
[ -f "$plugin" ] || skip_all "$plugin is not built: make slurm (needs libslurm-dev)"

# The tasks of nobody below load the library, the simulated GPU and the programs: copies it can
# read (public_bin), not the checkout's, which may be in a 0700 home directory (issue 27).
public_bin
export VGPU_NVML_LIB=$U_BIN/libnvidia-ml.so.1
slurm_up "$T_DIR/slurm" "$plugin" "shards_per_gpu=4 max_mem=60G max_core=90 library=$U_BIN/libvgpu.so" ||
  skip_all "Slurm did not start here: $slurm_why"
ok "a one-node Slurm is up, with the plugin in plugstack.conf"
total=$(vgpu list --json | jq '.gpus[0].mem_total_bytes')
S() { timeout 60 "$@"; }   # no Slurm command may hang the test

# --- limits of srun's options, enforced in the task -------------------------------------------------
run S srun --gres=gpu:1 --vgpu-mem=4G --vgpu-core=30 alloc_probe meminfo alloc 5G
assert_rc "srun --vgpu-mem=4G --vgpu-core=30 runs" 0
assert_contains "the task sees 4 GiB" "total=4294967296" "$out"
assert_contains "... and cannot allocate 5 GiB" "alloc rc=2" "$out"
assert_contains "... refused by its vgpu job, named after the Slurm job and step" "job slurm-" "$err"

run S srun --gres=gpu:1 sh -c 'alloc_probe meminfo'
assert_contains "without options, the site's max_mem is the limit" "total=64424509440" "$out"

# --- vgpu ps shows the task's job with the Slurm ids, while it runs ------------------------------
S srun --gres=gpu:1 --vgpu-mem=6G --vgpu-core=40 --vgpu-policy=soft alloc_probe alloc 1G hold > "$T_DIR/hold.out" 2>&1 &
held=$!
jobs_json() { vgpu ps --json | jq -c '[.jobs[] | select(.name | startswith("slurm-"))]'; }
slurm_wait 30 sh -c 'vgpu ps --json | jq -e "[.jobs[] | select(.name|startswith(\"slurm-\")) | select(.gpus[0].mem_used_bytes >= 1073741824)] | length == 1"'
js=$(jobs_json)
assert_match "vgpu ps shows the task as job slurm-JOB.0.0" '"name":"slurm-[0-9]+\.0\.0"' "$js"
assert_eq "... with its memory limit" 6442450944 "$(jq '.[0].gpus[0].mem_limit_bytes' <<<"$js")"
assert_eq "... its core limit" 40 "$(jq '.[0].gpus[0].core_limit_percent' <<<"$js")"
assert_eq "... and its policy" '"soft"' "$(jq '.[0].gpus[0].core_policy' <<<"$js")"
slurm_job=$(jq -r '.[0].name' <<<"$js" | sed 's/^slurm-\([0-9]*\)\..*/\1/')
assert_match "... whose job id is Slurm's" "^$slurm_job\$" "$(squeue -h -o %A 2>/dev/null | head -1)"
run vgpu metrics
assert_contains "vgpu metrics labels it with hpc_job" "hpc_job=\"$slurm_job\"" "$out"
scancel "$slurm_job" 2>/dev/null; wait $held 2>/dev/null

# --- gres/shard: two jobs on one GPU, each with its share --------------------------------------------
shard_pids=
for i in 1 2; do
  S srun --gres=shard:2 alloc_probe alloc 1G hold > "$T_DIR/shard$i.out" 2>&1 &
  shard_pids="$shard_pids $!"
done
slurm_wait 40 sh -c 'vgpu ps --json | jq -e "[.jobs[] | select(.name|startswith(\"slurm-\")) | select(.state != \"exited\") | select(.gpus[0].mem_used_bytes >= 1073741824)] | length == 2"'
js=$(vgpu ps --json | jq -c '[.jobs[] | select(.name|startswith("slurm-")) | select(.gpus[0].mem_used_bytes >= 1073741824)]')
assert_eq "two jobs of 2 shards (of 4) share the GPU at once" 2 "$(jq length <<<"$js")"
half=$(( total / 2 / 1048576 * 1048576 ))
assert_eq "... each capped at half its memory" "$half $half" "$(jq -r '[.[].gpus[0].mem_limit_bytes] | join(" ")' <<<"$js")"
assert_eq "... and half its time" "50 50" "$(jq -r '[.[].gpus[0].core_limit_percent] | join(" ")' <<<"$js")"
scancel -u root 2>/dev/null; wait $shard_pids 2>/dev/null   # not the daemons

# --- sbatch: the options reach the batch step ------------------------------------------------------
run S sbatch --parsable --gres=gpu:1 --vgpu-mem=2G -o "$T_DIR/batch.out" --wrap 'alloc_probe meminfo'
assert_rc "sbatch --vgpu-mem=2G is accepted" 0
slurm_wait 40 grep -q meminfo "$T_DIR/batch.out"
assert_contains "... and its batch step sees 2 GiB" "total=2147483648" "$(cat "$T_DIR/batch.out" 2>/dev/null)"

# --- the site's maxima and bad values are refused before anything runs -----------------------------
run S srun --gres=gpu:1 --vgpu-mem=70G true
[ "$rc" -ne 0 ] && ok "--vgpu-mem above max_mem is refused" || not_ok "--vgpu-mem above max_mem is refused" "rc=$rc"
assert_contains "... saying the maximum" "above this site's maximum, 60G" "$err"
run S srun --gres=gpu:1 --vgpu-core=95 true
assert_contains "--vgpu-core above max_core is refused" "above this site's maximum, 90" "$err"
run S srun --gres=gpu:1 --vgpu-policy=fast true
assert_contains "a bad --vgpu-policy is refused, saying the choices" "give hard or soft" "$err"
run S srun --vgpu-mem=4G true
[ "$rc" -ne 0 ] && ok "--vgpu-mem without GPUs fails the task" || not_ok "--vgpu-mem without GPUs fails the task" "rc=$rc"
assert_contains "... saying how to ask for GPUs" "--gres=gpu:N or --gres=shard:N" "$err"

# --- a task cannot raise its own limit (issue 16) ------------------------------------------------------
# slurmstepd runs as root: the plugin makes each task's limits root's file (the split layout of vgpu
# run --user), which the task's user reads and cannot write, mprotect or change with vgpu limit.
chmod 0711 "$T_DIR"                                  # the machine directory inside, for nobody
[ -f "$VGPU_FAKE_STATE" ] && chmod 0666 "$VGPU_FAKE_STATE"   # the simulated GPU, for nobody
ud=$(mktemp -d /tmp/vgpu-slurm-user.XXXXXX); chmod 1777 "$ud"
run S sbatch --parsable --uid=nobody --gid=nogroup --chdir=/tmp --gres=gpu:1 --vgpu-mem=2G -o "$ud/u.out" --wrap '
  unset VGPU_STATE_DIR XDG_RUNTIME_DIR
  id -un
  limits_poke 3072
  printf x | dd of="$VGPU_REGION" bs=1 seek=800 conv=notrunc 2>&1 | head -n 1
  vgpu limit "$(vgpu ps -q | head -n 1)" --mem 8G 2>&1; echo "limit rc=$?"'
assert_rc "sbatch --uid=nobody --vgpu-mem=2G is accepted" 0
slurm_wait 40 grep -q "limit rc=" "$ud/u.out"
uout=$(cat "$ud/u.out" 2>/dev/null)
assert_contains "the task runs as nobody" "nobody" "$uout"
assert_contains "the task cannot mprotect its limits writable" "mprotect=EACCES" "$uout"
assert_contains "... nor allocate 3 GiB under 2 GiB" "poked=0 alloc rc=2" "$uout"
assert_contains "... nor write its region file" "Permission denied" "$uout"
assert_contains "... and vgpu limit as the task's user is refused (6)" "limit rc=6" "$uout"
assert_contains "... saying root set the limits" "limits were set by root" "$uout"
rm -rf "$ud"

# --- the TaskProlog alternative, on a Slurm without the plugin --------------------------------------
slurm_down
printf '%s\n' VGPU_SHARDS_PER_GPU=4 "VGPU_LIBRARY=$U_BIN/libvgpu.so" "VGPU=$U_BIN/vgpu" > "$T_DIR/tp.conf"
# slurmstepd runs the TaskProlog with the task's environment, where VGPU_TASK_PROLOG_CONF points at it.
if SLURM_EXTRA_CONF="TaskProlog=$VGPU_SRC/packaging/slurm/vgpu-task-prolog" slurm_up "$T_DIR/slurm2" - ""; then
  run S srun --gres=shard:1 --export=ALL,VGPU_TASK_PROLOG_CONF="$T_DIR/tp.conf" alloc_probe meminfo alloc 30G
  quarter=$(( total / 4 / 1048576 * 1048576 ))
  assert_contains "TaskProlog: a task of 1 shard of 4 sees a quarter of the GPU" "total=$quarter" "$out"
  assert_contains "... and cannot allocate more" "alloc rc=2" "$out"
else
  not_ok "TaskProlog: a Slurm without the plugin starts" "$slurm_why"
fi

# The TaskProlog runs as the task's user: its limits stay the user's (vgpu-slurm(7)).

done_testing
