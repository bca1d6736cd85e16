# The split count (issue 15, part 5): at most N jobs on one GPU, all users' jobs counted in the
# machine-wide directory; vgpu run --max-jobs N, and root's policy file (max-jobs-per-gpu N),
# read strictly. On the code before, --max-jobs did not exist and the policy was not read.
. "$(dirname "$0")/lib.sh"
use_scenario mixed   # three GPUs

hold() { # NAME ARGS...: a job that runs until killed; its output in $T_DIR/NAME.out
  local n=$1; shift
  vgpu run "$@" -- sh -c 'echo holding $$; exec sleep 60' >"$T_DIR/$n.out" 2>&1 &
}

hold first --gpu 0 --max-jobs 1
first=$!
if poll_until 10 grep -q holding "$T_DIR/first.out"; then ok "the first job on GPU 0 starts"; else not_ok "the first job on GPU 0 starts" "$(cat "$T_DIR/first.out")"; fi
run vgpu run --gpu 0 --max-jobs 1 -- true
assert_rc "a second job on GPU 0 with --max-jobs 1: exit 125" 125
assert_match "... and the message gives the count" "GPU GPU-[0-9a-f-]+ already runs 1 job, the most allowed \(--max-jobs 1\)" "$err"
run vgpu run --gpu 0 --max-jobs 2 -- true
assert_rc "with --max-jobs 2 it starts" 0
run vgpu run --gpu 1 --max-jobs 1 -- true
assert_rc "another GPU has its own count" 0

# Root's policy, for everyone.
printf '# split count\n\nmax-jobs-per-gpu 1\n' >"$VGPU_MACHINE_DIR/policy"
chmod 0644 "$VGPU_MACHINE_DIR/policy"
run vgpu run --gpu 0 -- true
assert_rc "root's max-jobs-per-gpu 1 refuses a second job without --max-jobs" 125
assert_contains "... naming the policy" "root's max-jobs-per-gpu policy 1" "$err"
run vgpu run --gpu 0 --max-jobs 5 -- true
assert_rc "--max-jobs cannot raise root's policy" 125
chmod 0666 "$VGPU_MACHINE_DIR/policy"
run vgpu run --gpu 1 -- true
assert_rc "a policy file others may write is refused, not ignored" 125
assert_contains "... saying what root must do" "mode 0644" "$err"
printf 'max-jobs-per-gpu 1\nmax-jobs 2\n' >"$VGPU_MACHINE_DIR/policy"; chmod 0644 "$VGPU_MACHINE_DIR/policy"
run vgpu run --gpu 1 -- true
assert_rc "a policy file with a bad line is refused" 125
assert_contains "... naming the line" "policy line 2: 'max-jobs 2'" "$err"
rm -f "$VGPU_MACHINE_DIR/policy"

# --wait: the job starts when the count allows.
vgpu run --gpu 0 --max-jobs 1 --wait -- echo second-ran >"$T_DIR/second.out" 2>&1 &
second=$!
if poll_until 10 grep -q "waiting: GPU" "$T_DIR/second.out"; then ok "--wait waits at the count"; else not_ok "--wait waits at the count" "$(cat "$T_DIR/second.out")"; fi
kill "$first"; wait "$first" 2>/dev/null
if poll_until 10 grep -q second-ran "$T_DIR/second.out"; then ok "... and starts once the first job is gone"; else not_ok "... and starts once the first job is gone" "$(cat "$T_DIR/second.out")"; fi
wait "$second"

# A vgpu run killed with SIGKILL holds no count once its command is gone too (while the command
# runs, it holds the count: run_killed.sh).
hold third --gpu 0 --max-jobs 1
third=$!
poll_until 10 grep -q holding "$T_DIR/third.out" || not_ok "a third job starts" "$(cat "$T_DIR/third.out")"
kill -9 "$third"; wait "$third" 2>/dev/null
orphan=$(sed -n 's/^holding \([0-9]*\)$/\1/p' "$T_DIR/third.out")
[ -n "$orphan" ] && kill "$orphan" 2>/dev/null   # its command outlives a SIGKILLed vgpu run
[ -n "$orphan" ] && wait_until 10 sh -c "! kill -0 $orphan 2>/dev/null"
run vgpu run --gpu 0 --max-jobs 1 -- true
assert_rc "a killed job's count is not held" 0

run vgpu run --max-jobs 0 -- true
assert_rc "--max-jobs 0: exit 125" 125
assert_contains "... saying the range" "give a whole number of jobs from 1 to 1000" "$err"
run vgpu run --max-jobs 2x -- true
assert_rc "--max-jobs 2x: exit 125" 125
done_testing
