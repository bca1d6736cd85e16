# Placement in vgpu run: --mem without --gpu chooses a GPU or MIG instance by memory not yet
# promised (binpack, spread), capacity exhaustion, --overcommit, --wait order, 20 concurrent runs.
. "$(dirname "$0")/lib.sh"
export VGPU_FAKE_ROOT=1

use_scenario mixed   # GPU 0, 1: H100 80GB; GPU 2: A100 40GB
a100=$(vgpu list --json | jq -r '.gpus[2].uuid')
h0=$(vgpu list --json | jq -r '.gpus[0].uuid')
h1=$(vgpu list --json | jq -r '.gpus[1].uuid')

vgpu run --mem 30G -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$0"; sleep 30' "$T_DIR/j1" &
j1=$!
wait_until 20 test -s "$T_DIR/j1"
assert_eq "binpack: the fullest GPU that fits (the A100)" "$a100" "$(cat "$T_DIR/j1")"
run vgpu run --mem 8G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "binpack: fills the A100 further" "$a100" "$out"
run vgpu run --mem 20G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "binpack: what does not fit goes to an H100" "$h0" "$out"
vgpu run --mem 20G --place spread -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$0"; sleep 30' "$T_DIR/j2" &
j2=$!
wait_until 20 test -s "$T_DIR/j2"
assert_eq "spread: the emptiest GPU" "$h0" "$(cat "$T_DIR/j2")"
run vgpu run --mem 20G --place spread -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "spread: next the other H100" "$h1" "$out"
run vgpu run --mem 90G --wait -- true
assert_rc "larger than every GPU: fails at once, even with --wait" 125
assert_contains "... naming each GPU's size" "larger than every GPU: GPU 0 (79.65 GiB), GPU 1 (79.65 GiB), GPU 2 (40 GiB)" "$err"
vgpu run --mem 70G --place spread -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$0"; sleep 30' "$T_DIR/j3" &
j3=$!
wait_until 20 test -s "$T_DIR/j3"
run vgpu run --mem 65G -- true
assert_rc "65G fits nowhere now" 125
assert_contains "... listing what each GPU has left" "GPU 2 ($a100): 10 GiB left of 40 GiB" "$err"
assert_contains "... and the H100 with a job" "59.65 GiB left" "$err"
run vgpu run --mem 65G --overcommit -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_rc "--overcommit: runs anyway" 0
assert_eq "... on the GPU with the most room" "$h0" "$out"
kill $j3; wait $j3 2>/dev/null
run vgpu run --gpu 2 --mem 20G -- true
assert_rc "--gpu over the GPU's unpromised memory: refused" 125
assert_contains "... says what is left" "10 GiB of its 40 GiB" "$err"
run vgpu run --gpu 2 --mem 20G --overcommit -- true
assert_rc "--gpu with --overcommit: allowed" 0
run vgpu run --mem 4G --place binpak -- true
assert_rc "unknown policy" 125
assert_contains "... suggests" "binpack" "$err"
run vgpu run --gpu 0 --wait -- true
assert_rc "--wait without --mem placement: usage" 125
kill $j1 $j2 2>/dev/null; wait $j1 $j2 2>/dev/null
run vgpu run --mem 30G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "promises of ended jobs are released" "$a100" "$out"

# A job killed with SIGKILL (vgpu run and its command) leaves a promise file behind; the next
# placement drops it. (A command that outlives its killed vgpu run holds it: run_killed.sh.)
vgpu run --mem 35G -- sh -c 'echo up >"$0"; exec sleep 30' "$T_DIR/k" &
k=$!
wait_until 20 test -s "$T_DIR/k"
kc=$(cat /proc/$k/task/$k/children 2>/dev/null)
kill -9 $k $kc; wait $k 2>/dev/null
for c in $kc; do wait_until 10 sh -c "! kill -0 $c 2>/dev/null"; done
run vgpu run --mem 35G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_eq "a dead job's promise is reclaimed" "$a100" "$out"

# ---- 20 concurrent vgpu run on one H100 (79.65 GiB): exactly 19 of 4 GiB fit ----
# Each placed job runs until all 20 runs are placed or refused, so all overlap however slow the
# machine.
use_scenario h100
for i in $(seq 20); do
  ( vgpu run --mem 4G -- sh -c 'echo up >"$0.up"; wait_until 120 test -e "$1"' "$T_DIR/c$i" "$T_DIR/go" \
      >/dev/null 2>"$T_DIR/c$i.err"; echo $? >"$T_DIR/c$i.rc" ) &
done
settled() { [ $(( $(ls "$T_DIR"/c*.up 2>/dev/null | wc -l) + $(ls "$T_DIR"/c*.rc 2>/dev/null | wc -l) )) -ge 20 ]; }
wait_until 60 settled
touch "$T_DIR/go"
wait
okc=0 failc=0
for i in $(seq 20); do
  case $(cat "$T_DIR/c$i.rc") in 0) okc=$((okc + 1)) ;; 125) failc=$((failc + 1)) ;; esac
done
assert_eq "20 concurrent runs: 19 placed, 1 refused" "19 1" "$okc $failc"

# ---- --wait: first come, first served ----
# The big job holds its 60 GiB until both others are queued behind it.
vgpu run --mem 60G -- sh -c 'echo up >"$0"; wait_until 120 test -e "$0.go"' "$T_DIR/big" &
big=$!
wait_until 20 test -s "$T_DIR/big"
: >"$T_DIR/order"
vgpu run --mem 30G --wait -- sh -c 'echo B >>"$0"' "$T_DIR/order" 2>"$T_DIR/b.err" &
b=$!
wait_until 20 grep -q "place 1 in the queue" "$T_DIR/b.err"
vgpu run --mem 10G --wait -- sh -c 'echo C >>"$0"' "$T_DIR/order" 2>"$T_DIR/c.err" &
c=$!
wait_until 20 grep -q "place 2 in the queue" "$T_DIR/c.err"
assert_eq "a waiting job blocks later ones that would fit (FIFO)" "" "$(cat "$T_DIR/order")"
touch "$T_DIR/big.go"
wait $big $b $c
assert_eq "--wait: served in arrival order" "B C" "$(tr '\n' ' ' <"$T_DIR/order" | sed 's/ $//')"
assert_contains "--wait shows the place in the queue" "place 1 in the queue" "$(cat "$T_DIR/b.err")"
assert_contains "... second in line" "place 2 in the queue" "$(cat "$T_DIR/c.err")"

# ---- MIG instances are placement targets ----
use_scenario h100
must vgpu mig enable
must vgpu mig create 3g.40gb,2g.20gb
run vgpu run --mem 15G -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
assert_match "binpack into the smaller MIG instance" '^MIG-' "$out"
small=$(vgpu mig list --json | jq -r '.gpus[0].gpu_instances[] | select(.profile=="2g.20gb") | .compute_instances[0].uuid')
assert_eq "... the 2g.20gb one" "$small" "$out"
done_testing
