#!/usr/bin/env bash
# Preemption under the simulated GPU's time-slicing model (issue 18 item 1): a --core 70 job
# saturates the GPU with 20 ms kernels (two in flight under the pacing fences); a --core 30
# inference client (one 8 ms kernel per request, 30 ms apart: under its cap, so its credit stays
# near its burst and it preempts) runs beside it. While the preempted holder drains, its queued
# work and the client's kernels share the GPU; the schedule splits that overlap half and half
# (vgpu_sched_charge_from, vgpu_sched_preempted_at). Before, the holder paid all of it: charged
# 79 % of the wall time for 59-61 % used, kept well under its 70 % cap with the GPU a quarter idle.
source "$(dirname "$0")/lib.sh"

busy_of() { fakegpu-ctl show | jq -r --argjson p "$1" '[.gpus[0].processes[] | select(.pid == $p) | .busy_ns] | add // 0'; }
in_band() { # desc value lo hi detail
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2%)"; else not_ok "$1" "got $2%, want $3..$4: $5"; fi
}

vgpu run --core 70 --name holder -- sh -c "echo \$\$ >$T_DIR/a.pid; exec core_loop -k 20000 -s 20 -t 4" >"$T_DIR/a.out" 2>&1 &
vgpu run --core 30 -- sh -c "echo \$\$ >$T_DIR/b.pid; exec core_loop -m client -k 8000 -s 1 -i 30000 -t 4" >"$T_DIR/b.out" 2>&1 &
if wait_until 5 test -s "$T_DIR/a.pid" && wait_until 5 test -s "$T_DIR/b.pid"; then
  pa=$(cat "$T_DIR/a.pid"); pb=$(cat "$T_DIR/b.pid")
  sleep 1     # the subject: leases settle before the measured window (not a synchronization)
  charged() { vgpu ps --json | jq -r --arg n "$1" '[.. | objects | select(.name? == $n)][0] | [.. | .gpu_time_ns? // empty] | add // 0'; }
  t0=$(date +%s%N); a0=$(busy_of "$pa"); b0=$(busy_of "$pb"); c0=$(charged holder)
  sleep 2.5   # the measured window itself
  t1=$(date +%s%N); a1=$(busy_of "$pa"); b1=$(busy_of "$pb"); c1=$(charged holder)
  uuid=$(fakegpu-ctl show | jq -r '.gpus[0].uuid')
  peek=$(sched_peek "$uuid")
  wait
  sa=$(( (a1 - a0) * 100 / (t1 - t0) )); sb=$(( (b1 - b0) * 100 / (t1 - t0) ))
  n=$(printf '%s\n' "$peek" | tr ' ' '\n' | sed -n 's/^preemptions=//p')
  if [ "${n:-0}" -ge 5 ]; then ok "the client preempts the holder ($n preemptions)"; else not_ok "preemptions" "$peek"; fi
  in_band "the client stays under its cap" "$sb" 0 35 "$(cat "$T_DIR/b.out")"
  in_band "the saturating --core 70 job keeps its cap next to a preempting client" "$sa" 65 75 \
    "client $sb%; $(cat "$T_DIR/a.out" "$T_DIR/b.out")"
  # What the limiter charged the holder (the region's gpu_time_ns) against what it used, within
  # 7 points: the holder's share of each overlap follows the client's busy time as the client's
  # helper thread sees it (every 0.2 ms, later on a loaded machine); 6-7 points over were seen
  # under ASan on a busy 2-core machine. Paying all of it, the holder was charged 79 % for 60 %.
  sc=$(( (c1 - c0) * 100 / (t1 - t0) ))
  in_band "the holder is charged the GPU time it used (charged $sc% of the wall time, used $sa%)" "$(( sc - sa + 50 ))" 43 57 \
    "charged-used+50 points"
else
  not_ok "both jobs started" "$(cat "$T_DIR/a.out" "$T_DIR/b.out")"; wait
fi

# The H100's shape (tests/gpu/latency.sh): training kernels of 2.7 ms synchronized every 64, a
# client of 8 kernels of 60 us every 5 ms: a preempted holder's drain (two kernels) outlasts the
# client's request, and often its next one. Before, the client was charged half of every drain
# (four times what it used), paced each of its launches behind a fence (each waited for a time
# slice), and the training job, undercharged, ran 82-85 % under its 70 % cap (the client's p99
# was 7.7 ms, 2.5-3.2 after). The latency itself is measured on the GPU (tests/gpu/latency.sh)
# and in make bench (bench/latency.sh): on a loaded 2-core machine the fake's request latencies
# move by milliseconds from run to run, too much for a verdict here.
# The training job runs first, as in the GPU test: the client starts once training holds the
# GPU's schedule, and training's reported window (-d) starts about when the client does.
UUID_P=$(fakegpu-ctl show | jq -r '.gpus[0].uuid')
vgpu run --core 70 --name train -- core_loop -k 2700 -s 64 -t 5.5 -d 0.5 >"$T_DIR/t.out" 2>&1 &
training() { sched_peek "$UUID_P" | grep -q ' jobs=1 .*held=1'; }
wait_until 20 training
vgpu run --core 30 -- core_loop -m client -k 60 -s 8 -i 5000 -t 4 >"$T_DIR/c.out" 2>&1
wait
share=$(sed -n 's/.*late_share=\([0-9.]*\).*/\1/p' "$T_DIR/t.out")
busy=$(sed -n 's/.*busy=\([0-9.]*\).*/\1/p' "$T_DIR/c.out")
if awk -v s="${share:-9}" -v b="${busy:-0}" 'BEGIN { exit !(s <= 0.75 && s >= 0.65 - b) }'; then
  ok "beside a client, long-kernel training keeps its cap ($share of the GPU, client $busy; $(grep -o 'p99_ms=[0-9.]*' "$T_DIR/c.out"))"
else
  not_ok "long-kernel training keeps its cap" "share ${share:-?} (want 0.65-client..0.75); $(cat "$T_DIR/t.out" "$T_DIR/c.out")"
fi

# Two saturating --core 60 jobs (caps adding up to more than the GPU) whose loops pause 0.5 ms
# after every 8 ms of work, as a loop does when a loaded machine deschedules it between its
# synchronize and its next launch. A pause longer than VGPU_SCHED_IDLE_NS gave the lease back,
# which made the next launch new work that preempted the other job: they took the lease from
# each other at every turn (257-274 preemptions in 2.5 s). The pause must be long for the work
# done (vgpu_sched_idle_need). Some preemptions stay by design: each process's first work, and
# one after each lease a job did give back idle (its next want is a request, even if it began
# before the other's lease: libvgpu(7), "Preemption"); under ASan on a loaded CI machine, 16 idle
# give-backs gave 15. The bound, 40, is far from the ping-pong.
p0=$(sched_peek "$UUID_P" | tr ' ' '\n' | sed -n 's/^preemptions=//p')
vgpu run --core 60 -- core_loop -m client -k 1000 -s 8 -i 500 -t 3 >"$T_DIR/s1.out" 2>&1 & s1=$!
vgpu run --core 60 -- core_loop -m client -k 1000 -s 8 -i 500 -t 3 >"$T_DIR/s2.out" 2>&1 & s2=$!
# The schedule is kept while its jobs live: its count is read while both are in it, the last
# time seen before either ends (the runs themselves bound the loop).
peek=
while kill -0 "$s1" 2>/dev/null && kill -0 "$s2" 2>/dev/null; do
  p=$(sched_peek "$UUID_P"); case $p in *' jobs=2 '*) peek=$p ;; esac
  sleep 0.05
done
wait
p1=$(printf '%s\n' "$peek" | tr ' ' '\n' | sed -n 's/^preemptions=//p')
n=$(( ${p1:-0} - ${p0:-0} ))
if [ -z "$peek" ]; then not_ok "two saturating --core 60 jobs that pause between bursts do not preempt each other" \
  "the schedule never held both jobs: $(cat "$T_DIR/s1.out" "$T_DIR/s2.out")"
elif [ "$n" -le 40 ]; then ok "two saturating --core 60 jobs that pause between bursts do not preempt each other ($n preemptions)"
else not_ok "two saturating --core 60 jobs that pause between bursts do not preempt each other" "$n preemptions: $peek"; fi

done_testing
