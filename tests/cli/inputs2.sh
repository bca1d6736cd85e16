# Issue 36 item 2: inputs and messages outside accounting and the daemon. Each row's command
# and the answer a user expects; every check here failed before its fix.
. "$(dirname "$0")/lib.sh"

# --- L2: more GPUs than the machine has is said as such, not as memory that does not fit ------
run vgpu run --gpus 2 -- true
assert_rc "--gpus 2 on a machine of 1 GPU: 125" 125
assert_contains "... saying the machine has only 1 GPU" "--gpus 2: only 1 GPU (or MIG instance) on this machine" "$err"
assert_not_contains "... not that --mem 0 B does not fit" "--mem 0 B" "$err"

# --- N16: mixed models (two H100s, an A100): a job of several GPUs gets GPUs of one model ------
use_scenario mixed
for m in 40G 10G; do
  run vgpu run --gpus 2 --mem $m -- true
  assert_contains "--gpus 2 --mem $m on two free H100s and an A100: the H100s" "placed on GPUs 0, 1 (" "$err"
  assert_not_contains "... and not a mixed pair" "mixed models" "$err"
done
# Only a mixed group fits: it is placed, and said to be mixed.
run vgpu run --gpus 3 --mem 10G -- true
assert_rc "--gpus 3 on the mixed machine runs" 0
assert_contains "... saying the group mixes models, which" \
  "mixed models (NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-40GB)" "$err"
use_scenario h100

# --- L3: a word in the wrong case gets its suggestion (case is not an edit) -----------------
run vgpu run --priority HIGH -- true
assert_rc "--priority HIGH: 125" 125
assert_contains "... did you mean 'high'" "did you mean 'high'?" "$err"
run vgpu run --mem 1G --place Spread -- true
assert_contains "--place Spread: did you mean 'spread'" "did you mean 'spread'?" "$err"
run vgpu run --priority urgent -- true
assert_contains "--priority urgent (no near word): the list, no guess" "use low, normal or high" "$err"

# --- L10: vgpu cdi generate: an option given twice, and an empty --output ------------------
for pair in "--core|--core 30 --core 40" "--mem|--mem 1G --mem 2G" "--name|--name a --name b" \
            "--gpu|--gpu 0 --gpu 0" "--output|--output $T_DIR --output $T_DIR"; do
  opt=${pair%%|*} args=${pair#*|}
  # shellcheck disable=SC2086
  run vgpu cdi generate $args
  assert_rc "cdi generate $args: 2" 2
  assert_contains "... says $opt is given twice" "$opt is given twice" "$err"
  assert_eq "... and prints no spec" "" "$out"
done
run vgpu cdi generate --output ''
assert_rc "cdi generate --output '': 2" 2
assert_contains "... says --output needs a directory" "--output needs a directory" "$err"
assert_not_contains "... not 'No such file'" "No such file" "$err"

# --- L11: --oversubscribe's DEVICE_SIZE above --mem, --overcommit without --mem ----------------
for gpu in "" "--gpu 0"; do
  # shellcheck disable=SC2086
  run vgpu run $gpu --mem 4G --oversubscribe=8G -- true
  assert_rc "run ${gpu:-(placing)} --mem 4G --oversubscribe=8G: 125" 125
  assert_contains "... DEVICE_SIZE is more than --mem" "--oversubscribe=8G (8 GiB) is more than the job's --mem (4 GiB)" "$err"
done
run vgpu run --gpu 0 --mem 4G --oversubscribe=4G -- true
assert_rc "--mem 4G --oversubscribe=4G (all of it on the GPU): runs" 0
run vgpu run --overcommit -- true
assert_rc "--overcommit without --mem: 125" 125
assert_contains "... saying it needs --mem" "without --mem the job promises no memory" "$err"
run vgpu run --gpus 1 --overcommit -- true
assert_rc "--gpus 1 --overcommit without --mem: 125" 125
run vgpu run --mem 1G --overcommit -- true
assert_rc "--mem 1G --overcommit: runs" 0

# --- L22: one failing nvidia-smi is one error, not one for the list and one for the set -------
for smi in /bin/true "$T_DIR/no-such-nvidia-smi"; do
  run env VGPU_NVIDIA_SMI="$smi" vgpu timeslice set long
  assert_rc "timeslice set long with VGPU_NVIDIA_SMI=${smi##*/}: fails" "$( [ "$smi" = /bin/true ] && echo 1 || echo 3)"
  assert_eq "... with one error" 1 "$(grep -c 'error:' <<<"$err")"
done
run env VGPU_NVIDIA_SMI=/bin/true vgpu timeslice get
assert_eq "timeslice get with VGPU_NVIDIA_SMI=true: one error" 1 "$(grep -c 'error:' <<<"$err")"

# --- L23: a newline inside a quoted value is escaped, as a tab or ESC is; the message's own
# lines (the GPUs left, below) stay lines ---------------------------------------------------
for v in $'hi\ngh' $'a\tb' $'a\eb'; do
  run vgpu run --priority "$v" -- true
  assert_eq "--priority $(printf '%q' "$v"): the error is one line" 1 "$(wc -l <<<"$err")"
  assert_not_contains "... with no raw control byte" "$v" "$err"
done
run vgpu run --priority $'hi\ngh' -- true
assert_contains "... the newline written as \\n" "'hi\ngh'" "$err"
run vgpu limit $'x\ny' --core 30
assert_eq "vgpu limit with a job name holding a newline: one line" 1 "$(wc -l <<<"$err")"
vgpu run --name holder --mem 70G -- sleep 60 >/dev/null 2>&1 &
holder=$!
has_job() { [ "$(vgpu ps --json | jq '[.jobs[] | select(.name == "holder")] | length')" = 1 ]; }
wait_until 30 has_job
run vgpu run --mem 20G -- true
assert_contains "a list of what each GPU has left keeps its own lines" $'left:\n    GPU 0' "$err"
kill "$holder"; wait "$holder" 2>/dev/null

done_testing
