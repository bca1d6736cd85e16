# vgpu run --user USER --mps (root only): the job runs as USER as a client of root's MPS daemon,
# with vgpu's limits (USER cannot raise them) and MPS's; the daemon serves USER's server and
# vgpu mps status names the job. A pipe directory USER cannot reach is refused (the client would
# run outside MPS, its --core not applied: with --mps vgpu's own GPU time limiter stays off), and
# a job that MPS will keep waiting (it serves one user at a time: reference/nvml.md §16) is said.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the job runs as nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

user_dirs
top=$(mktemp -d /tmp/vgpu-mps-pipe.XXXXXX); chmod 0755 "$top"
P=$top/pipe              # reachable by every user
Q=$T_DIR/pipe            # inside root's 0700 T_DIR: nobody cannot reach it
sups=()
trap 'kill "${sups[@]}" 2>/dev/null; for d in "$P" "$Q"; do vgpu mps stop --pipe-dir "$d" --force --timeout 2 >/dev/null 2>&1; done
  rm -rf "$top"; t_cleanup' EXIT
cd "$T_DIR" || exit 1
show='echo "id=$(id -u) pipe=$CUDA_MPS_PIPE_DIRECTORY pct=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE-unset} pin=${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT-unset}"'

run vgpu run --user nobody --mps -- true
assert_rc "--user --mps without a daemon: 125" 125
assert_contains "... saying how to start one" "vgpu mps start" "$err"

must vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0
run vgpu run --user nobody --mps --core 25 --mem 1536M -- sh -c "$show"
assert_rc "--user nobody --mps: runs (0)" 0
assert_eq "as nobody, a client of root's daemon with the job's limits" "id=65534 pipe=$P pct=25 pin=0=1536M" "$out"
run vgpu run --user nobody --mps --mem 1G -- alloc_probe alloc 256M alloc 1G
assert_contains "--user nobody --mps --mem 1G: 256 MiB fits" "alloc rc=0 size=268435456" "$out"
assert_contains "... 1 GiB more does not" "alloc rc=2 size=1073741824" "$out"

# A running job: MPS serves nobody's server, vgpu mps status names the job, vgpu ps lists it.
id=$(vgpu run -d --user nobody --mps --core 30 --mem 1G --name mpsnobody -- alloc_probe hold)
sups+=("$(vgpu ps --json | jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .creator_pid')")
served() { vgpu mps status --pipe-dir "$P" --json | jq -e --arg j "$id" \
  'any(.servers[]; .uid == 65534 and any(.clients[]; .job == $j and .active_thread_percent == 30))'; }
if poll_until 20 served; then ok "vgpu mps status: nobody's server has the job's client, at 30 %"
else not_ok "vgpu mps status: nobody's server has the job's client, at 30 %" "$(vgpu mps status --pipe-dir "$P" 2>&1)"; fi
run vgpu ps --json
assert_eq "vgpu ps lists it as nobody's" nobody "$(jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .owner' <<<"$out")"

# MPS serves one user at a time: a job of another user waits; vgpu run says so, and runs it.
run vgpu run --user nobody --mps -- true
assert_rc "another job of the same user: 0" 0
assert_not_contains "... nothing said about waiting" "one user at a time" "$err"
run vgpu run --mps -- true
assert_rc "root's job while nobody's server runs: it still starts (0)" 0
assert_contains "... saying it waits for nobody's clients" "serves uid 65534" "$err"
assert_contains "... and why" "one user at a time" "$err"
kill "${sups[@]}" 2>/dev/null; sups=()

# A pipe directory nobody cannot reach: refused, saying why; root's own job there runs.
must vgpu mps start --pipe-dir "$Q" --log-dir "$T_DIR/log2" --gpu 0
run vgpu run --user nobody --mps --core 25 -- true
assert_rc "--user nobody --mps, pipe directory out of nobody's reach: 125" 125
assert_contains "... saying nobody cannot reach it" "nobody cannot reach the MPS pipe directory $Q" "$err"
assert_contains "... and what would happen" "outside MPS" "$err"
run vgpu run --mps --core 25 -- true
assert_rc "root's own --mps job on it: 0" 0

done_testing
