# An admin's memory limit holds against a job that forges its own usage (issue 25 item 6). A
# --user job's user can write its usage file, so it can zero the counter the library checks and
# allocate past its limit (alloc_probe's step "forge"); vgpu run, root, checks the job's memory as
# NVML reports it per process and acts when it stays over for 2 s: --over-limit kill (default),
# stop or warn. An honest job at its limit is never touched.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the jobs run as nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"

user_dirs
cd "$T_DIR" || exit 1    # a 0700 directory of root's: the jobs must not need it
now_ms() { date +%s%3N; }
# The field of a job in root's vgpu ps --json.
job_field() { vgpu ps --json | jq -r --arg j "$1" ".jobs[] | select(.id == \$j) | $2"; }
job_of() { vgpu ps --json | jq -r --arg p "$1" '.jobs[] | select(.creator_pid == ($p | tonumber)) | .id'; }
# The job's (first) process, as root sees it.
probe_of() { job_field "$1" '.processes[0].host_pid // empty'; }
proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
# Each forge zeroes the job's counter, and the next 900 MiB fit again: 512 MiB of context,
# 256 MiB, then 3 x 900 MiB (3.4 GiB) under a 1 GiB limit.
FORGE=(alloc 256M forge alloc 900M forge alloc 900M forge alloc 900M)
allocs_done() { [ "$(grep -c 'alloc rc=' "$1")" -ge 4 ]; }

# ---- bad input ----
run vgpu run --over-limit kill -- true
assert_rc "--over-limit without --user: 125" 125
assert_contains "... says it applies to --user jobs" "--over-limit applies to jobs started with --user" "$err"
run vgpu run --user nobody --over-limit pause -- true
assert_rc "--over-limit pause: 125" 125
assert_contains "... names the words it takes" "kill" "$err"

# ---- an honest job at its limit, watched all along: never touched ----
vgpu run --user nobody --mem 1G --name honest -- alloc_probe fill 16M hold >"$T_DIR/honest.out" 2>"$T_DIR/honest.err" &
honest=$!
wait_until 30 grep -q holding "$T_DIR/honest.out"
honest_id=$(job_of "$honest")
assert_contains "the honest job filled its limit (and no more)" "fill rc=2" "$(cat "$T_DIR/honest.out")"

# ---- the forging job, default policy: killed within ~3 s of passing its limit ----
# It ends by itself after 8 s if nothing kills it (before the watch, it did: status 0).
vgpu run --user nobody --mem 1G -- alloc_probe "${FORGE[@]}" sleep 8000 >"$T_DIR/kill.out" 2>"$T_DIR/kill.err" &
forger=$!
wait_until 30 allocs_done "$T_DIR/kill.out"
t0=$(now_ms)
kill_id=$(job_of "$forger")
wait "$forger"; krc=$?
t1=$(now_ms)
out=$(cat "$T_DIR/kill.out")
assert_eq "the forging job did allocate past its limit (the library was fooled)" 4 "$(grep -c 'alloc rc=0' <<<"$out")"
assert_eq "vgpu run dies by the job's SIGKILL (137)" 137 "$krc"
elapsed=$((t1 - t0))
# Over from its first sample (within 500 ms), acted on at the first sample 2 s after that.
if [ "$elapsed" -ge 1900 ] && [ "$elapsed" -le 3500 ]; then ok "killed 2 to 3.5 s after passing its limit (${elapsed} ms)"
else not_ok "killed 2 to 3.5 s after passing its limit" "${elapsed} ms"; fi
err=$(cat "$T_DIR/kill.err")
assert_contains "vgpu run says why" "is over its memory limit on GPU 0:" "$err"
assert_contains "... and what it did" "killed (--over-limit kill): killed 1 process (SIGKILL)" "$err"
assert_eq "vgpu ps records it: killed, by SIGKILL, under policy kill" "killed SIGKILL kill" \
  "$(job_field "$kill_id" '"\(.over_limit) \(.exit_signal) \(.over_limit_policy)"')"
assert_match "... with the reason" "^GPU 0: 3\.[0-9]+ GiB used \(NVML\) over its limit of 1 GiB for 2 s: killed \(--over-limit kill\)$" \
  "$(job_field "$kill_id" .over_limit_reason)"
run vgpu ps
assert_contains "vgpu ps's table says it under the job" "! over its memory limit: GPU 0:" "$out"
run setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR vgpu ps --json
assert_eq "the job's user sees the record too" "killed" \
  "$(jq -r --arg j "$kill_id" '.jobs[] | select(.id == $j) | .over_limit' <<<"$out")"

# ---- --over-limit warn: said, left running ----
vgpu run --user nobody --mem 1G --over-limit warn -- alloc_probe "${FORGE[@]}" hold \
  >"$T_DIR/warn.out" 2>"$T_DIR/warn.err" &
warner=$!
wait_until 30 grep -q holding "$T_DIR/warn.out"
warn_id=$(job_of "$warner")
wait_until 10 grep -q "over its memory limit" "$T_DIR/warn.err"
assert_contains "warn: vgpu run says so" "warned (--over-limit warn); it keeps running" "$(cat "$T_DIR/warn.err")"
pid=$(probe_of "$warn_id")
check "warn: the job keeps running" kill -0 "$warner"
assert_match "warn: its process is not stopped" "^[RS]$" "$(proc_state "$pid")"
assert_eq "warn: vgpu ps records it" "warned running" "$(job_field "$warn_id" '"\(.over_limit) \(.state)"')"
kill "$warner"; wait "$warner" 2>/dev/null

# ---- --over-limit stop: its processes are stopped ----
vgpu run --user nobody --mem 1G --over-limit stop -- alloc_probe "${FORGE[@]}" hold \
  >"$T_DIR/stop.out" 2>"$T_DIR/stop.err" &
stopper=$!
wait_until 30 grep -q holding "$T_DIR/stop.out"
stop_id=$(job_of "$stopper")
pid=$(probe_of "$stop_id")
wait_until 10 grep -q "over its memory limit" "$T_DIR/stop.err"
assert_contains "stop: vgpu run says so, and how to go on" "stopped 1 process (SIGSTOP); resume them with kill -CONT" \
  "$(cat "$T_DIR/stop.err")"
assert_eq "stop: the job's process is stopped" T "$(proc_state "$pid")"
assert_eq "stop: vgpu ps records it" "stopped stop" "$(job_field "$stop_id" '"\(.over_limit) \(.over_limit_policy)"')"
kill -KILL "$pid"; kill "$stopper" 2>/dev/null; wait "$stopper" 2>/dev/null

# ---- the honest job, after all that ----
check "the honest job still runs" kill -0 "$honest"
assert_eq "... and was never found over its limit" "null kill" \
  "$(job_field "$honest_id" '"\(.over_limit) \(.over_limit_policy)"')"
assert_not_contains "... and vgpu run said nothing of it" "over its memory limit" "$(cat "$T_DIR/honest.err")"
kill "$honest"; wait "$honest" 2>/dev/null

# A job of root's own is not watched (its limits are its user's own business).
run vgpu run --mem 1G -- true
assert_eq "a job without --user has no policy" "null" "$(vgpu ps --json | jq -r '.jobs[-1].over_limit_policy')"

done_testing
