# vgpu top reads a GPU process's /proc entry once, and again only when something says it may
# have changed (cmd/top/host.c): the process exited (its pid may now be another's) or its
# parent exited (it has a new parent). These are the changes that must still show, at a refresh
# interval (-d), where what was read is kept: CPU % and SM % go on moving, a process reparented when
# its parent exits stops counting as its old job's, and a pid taken by a new process shows the
# new process.
. "$(dirname "$0")/lib.sh"

top_pid() { # FILE PID: the newest complete sample's entry for PID (JSON), or nothing
  tail -n 2 "$1" | jq -c --argjson p "$2" 'select(.processes) | .processes[] | select(.pid == $p)' 2>/dev/null | tail -n 1
}
export -f top_pid
lines_gt() { test "$(wc -l < "$1")" -gt "$2"; }   # FILE N: more than N samples written
export -f lines_gt

# CPU %: a process busy on the CPU (6 s, then asleep) against one asleep, at a 0.3 s refresh.
# What top shows is compared with what the process really had: its own CPU clock (/proc stat
# utime + stime) over the same refreshes. On a machine busy with other work it gets far less
# than a core (a fixed "over 50 %" failed beside a CPU hog).
alloc_probe alloc 64M churn 6000 hold > "$T_DIR/busy.out" 2>&1 & busy=$!
alloc_probe alloc 64M hold > "$T_DIR/idle.out" 2>&1 & idle=$!
wait_until 20 grep -q holding "$T_DIR/idle.out"
vgpu top --json -d 0.3 -n 200 > "$T_DIR/cpu.jsonl" 2>&1 & top1=$!
tck=$(getconf CLK_TCK)
# busy_shown: the mean of top's CPU % of the busy process over the samples written since
# cpu_mark is over 5 and at least half the CPU share it had meanwhile ($shown and $had).
cpu_mark() { c_line=$(wc -l < "$T_DIR/cpu.jsonl"); c_at=${EPOCHREALTIME/./}; c_ticks=$(awk '{ print $14 + $15 }' "/proc/$busy/stat"); }
busy_shown() {
  local now=${EPOCHREALTIME/./} t; t=$(awk '{ print $14 + $15 }' "/proc/$busy/stat")
  had=$(( (t - c_ticks) * 100000000 / tck / (now - c_at > 0 ? now - c_at : 1) ))
  shown=$(tail -n +$((c_line + 1)) "$T_DIR/cpu.jsonl" | jq -s --argjson p "$busy" \
    '[.[] | select(.processes) | .processes[] | select(.pid == $p) | .cpu_percent] | if length > 0 then add / length | floor else empty end' 2>/dev/null)
  [ -n "$shown" ] && [ "$shown" -gt 5 ] && [ $((shown * 2)) -ge "$had" ]
}
n0=$(wc -l < "$T_DIR/cpu.jsonl"); cpu_mark
wait_until 10 lines_gt "$T_DIR/cpu.jsonl" $((n0 + 1))
if poll_until 20 busy_shown; then ok "a process busy on the CPU shows it ($shown %, it had $had % of a CPU)"
else not_ok "a process busy on the CPU shows it, refresh after refresh" "top: ${shown:-none} %, it had $had % of a CPU"; fi
n0=$(wc -l < "$T_DIR/cpu.jsonl"); cpu_mark
wait_until 10 lines_gt "$T_DIR/cpu.jsonl" $((n0 + 2))
if busy_shown; then ok "... still, three refreshes later ($shown %, it had $had %)"
else not_ok "... still, three refreshes later" "top: ${shown:-none} %, it had $had % of a CPU"; fi
assert_eq "a process asleep shows under 5 %" true "$(top_pid "$T_DIR/cpu.jsonl" "$idle" | jq '.cpu_percent < 5')"
wait_until 20 grep -q holding "$T_DIR/busy.out"   # done with the CPU (a stopped process could hold the simulator's lock)
stopped_ok() { top_pid "$1" "$2" | jq -e '.cpu_percent < 5' >/dev/null; }
export -f stopped_ok
if poll_until 10 stopped_ok "$T_DIR/cpu.jsonl" "$busy"; then ok "the busy process, asleep now, drops under 5 %"
else not_ok "the busy process, asleep now, drops under 5 %" "$(top_pid "$T_DIR/cpu.jsonl" "$busy")"; fi
kill -KILL "$busy" "$idle" "$top1" 2>/dev/null
wait "$busy" "$idle" "$top1" 2>/dev/null

# SM %: NVML's per-process samples, asked with a buffer kept between refreshes. A process
# saturating the GPU shows it refresh after refresh; an idle one shows 0 (not N/A). The loop
# keeps 64 kernels queued (no limiter here), so a busy CPU does not leave the GPU idle.
core_loop -t 20 -s 64 -k 2700 > /dev/null 2>&1 & loop=$!
alloc_probe alloc 64M hold > "$T_DIR/idle2.out" 2>&1 & idle=$!
wait_until 20 grep -q holding "$T_DIR/idle2.out"
vgpu top --json -d 0.3 -n 200 > "$T_DIR/sm.jsonl" 2>&1 & top4=$!
sm_busy() { top_pid "$1" "$2" | jq -e '.sm_percent > 50' >/dev/null; }
export -f sm_busy
if poll_until 20 sm_busy "$T_DIR/sm.jsonl" "$loop"; then ok "a process saturating the GPU shows its SM %"
else not_ok "a process saturating the GPU shows its SM %" "$(top_pid "$T_DIR/sm.jsonl" "$loop")"; fi
n0=$(wc -l < "$T_DIR/sm.jsonl")
wait_until 10 lines_gt "$T_DIR/sm.jsonl" $((n0 + 2))
assert_eq "... still, three refreshes later" true "$(top_pid "$T_DIR/sm.jsonl" "$loop" | jq '.sm_percent > 50')"
assert_eq "an idle process shows 0 %" 0 "$(top_pid "$T_DIR/sm.jsonl" "$idle" | jq '.sm_percent')"
kill -KILL "$loop" "$idle" "$top4" 2>/dev/null
wait "$loop" "$idle" "$top4" 2>/dev/null

# The parent. P, a GPU process that left the limiter, is its job's while its parent Q
# descends from the job. Q exits and stays a zombie (the job's main process never reaps it):
# P is given another parent, outside the job, and is no longer the job's; the zombie Q still
# names its own parent, so a parent kept from before Q exited would keep P in the job.
mkfifo "$T_DIR/go"
vgpu run --name rp --mem 4G -- sh -c '
  sh -c "env -u LD_PRELOAD alloc_probe alloc 1G hold > \"\$0/p.out\" 2>&1 & echo \$! > \"\$0/p.pid\"; echo \$\$ > \"\$0/q.pid\"; read x < \"\$0/go\"" "$0" &
  exec sleep 600' "$T_DIR" > "$T_DIR/job.out" 2>&1 &
runner=$!
wait_until 20 grep -q holding "$T_DIR/p.out"
p=$(cat "$T_DIR/p.pid") q=$(cat "$T_DIR/q.pid")
vgpu top --json -d 0.3 -n 300 > "$T_DIR/rp.jsonl" 2>&1 & top2=$!
outside_is() { top_pid "$1" "$2" | jq -e --argjson v "$3" '.outside_limiter == $v' >/dev/null; }
export -f outside_is
if poll_until 20 outside_is "$T_DIR/rp.jsonl" "$p" true; then ok "P, outside the limiter, is its job's"
else not_ok "P, outside the limiter, is its job's" "$(top_pid "$T_DIR/rp.jsonl" "$p")"; fi
n0=$(wc -l < "$T_DIR/rp.jsonl")
wait_until 10 lines_gt "$T_DIR/rp.jsonl" $((n0 + 2))   # P is well known by now
timeout 10 sh -c 'echo go > "$0/go"' "$T_DIR"
wait_until 10 sh -c 'grep -q "^State:.Z" /proc/$0/status' "$q"
assert_eq "Q exited and is a zombie" Z "$(awk '/^State:/ { print $2 }' "/proc/$q/status")"
if poll_until 10 outside_is "$T_DIR/rp.jsonl" "$p" false; then ok "P, reparented out of the job, is no longer its job's"
else not_ok "P, reparented out of the job, is no longer its job's" "$(top_pid "$T_DIR/rp.jsonl" "$p"; grep PPid "/proc/$p/status")"; fi
kill -KILL "$p" "$top2" 2>/dev/null
kill "$runner" 2>/dev/null                # vgpu run passes the signal on to the job
wait "$top2" "$runner" 2>/dev/null

# The pid. X exits and Y, a new process, is given X's pid before the next refresh (root:
# /proc/sys/kernel/ns_last_pid). vgpu top shows Y's command, not X's.
if [ -w /proc/sys/kernel/ns_last_pid ]; then
  bash -c 'exec -a pid_reuse_x alloc_probe alloc 64M hold' > "$T_DIR/x.out" 2>&1 & x=$!
  wait_until 20 grep -q holding "$T_DIR/x.out"
  vgpu top --json -d 3 -n 30 > "$T_DIR/pid.jsonl" 2>&1 & top3=$!
  cmd_is() { top_pid "$1" "$2" | jq -e --arg c "$3" '.command | startswith($c)' >/dev/null; }
  export -f cmd_is
  wait_until 20 cmd_is "$T_DIR/pid.jsonl" "$x" pid_reuse_x
  y=
  for try in 1 2 3 4 5 6 7 8 9 10; do
    # just after a refresh, so that X's end and Y's start fall between two
    n0=$(wc -l < "$T_DIR/pid.jsonl")
    wait_until 10 lines_gt "$T_DIR/pid.jsonl" "$n0"
    kill -KILL "$x"; wait "$x" 2>/dev/null
    echo $((x - 1)) > /proc/sys/kernel/ns_last_pid
    bash -c 'exec -a pid_reuse_y alloc_probe alloc 64M hold' > "$T_DIR/y.out" 2>&1 & y=$!
    [ "$y" = "$x" ] && break
    x=$y                                # another process took it: Y is the next X
    wait_until 20 grep -q holding "$T_DIR/y.out"
    mv "$T_DIR/y.out" "$T_DIR/x.out"
    wait_until 20 cmd_is "$T_DIR/pid.jsonl" "$x" pid_reuse_y
    y=
  done
  if [ -n "$y" ]; then
    wait_until 20 grep -q holding "$T_DIR/y.out"
    ok "Y has X's pid ($y)"
    n0=$(wc -l < "$T_DIR/pid.jsonl")
    wait_until 10 lines_gt "$T_DIR/pid.jsonl" "$n0"
    if poll_until 10 cmd_is "$T_DIR/pid.jsonl" "$y" pid_reuse_y; then ok "the pid shows Y's command, not X's"
    else not_ok "the pid shows Y's command, not X's" "$(top_pid "$T_DIR/pid.jsonl" "$y")"; fi
  else
    skip "Y has X's pid" "other processes took the pid ten times"
    skip "the pid shows Y's command, not X's" "no reused pid"
  fi
  kill -KILL "$y" "$x" "$top3" 2>/dev/null
  wait 2>/dev/null
else
  skip "Y has X's pid" "needs root (/proc/sys/kernel/ns_last_pid)"
  skip "the pid shows Y's command, not X's" "needs root"
fi

done_testing
