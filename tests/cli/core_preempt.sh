#!/usr/bin/env bash
# Preemption under the simulated GPU's time-slicing model (issue 18 item 1): a --core 70 job
# saturates the GPU with 20 ms kernels (two in flight under the pacing fences); a --core 30
# inference client (one 8 ms kernel per request, 30 ms apart: under its cap, so its credit stays
# near its burst and it preempts) runs beside it. While the preempted holder drains, its queued
# work and the client's kernels share the GPU; the schedule splits that overlap half and half
# (vgpu_sched_charge_from, vgpu_sched_preempted_at). Before, the holder paid all of it: charged
# 79 % of the wall time for 59-61 % used, kept well under its 70 % cap with the GPU a quarter idle.
source "$(dirname "$0")/lib.sh"

# The jobs run until they are stopped once measured: a job that ended inside the window made its
# share negative ("used -35 %": its busy time read 0 after its end).
ref=$(cpu_ref 2000)   # the reference for the caps, measured now with the GPU idle
vgpu run --core 70 --name holder -- sh -c "echo \$\$ >$T_DIR/a.pid; exec core_loop -k 20000 -s 20 -t 60" >"$T_DIR/a.out" 2>&1 & ra=$!
vgpu run --core 30 -- sh -c "echo \$\$ >$T_DIR/b.pid; exec core_loop -m client -k 8000 -s 1 -i 30000 -t 60" >"$T_DIR/b.out" 2>&1 & rb=$!
if wait_until 5 test -s "$T_DIR/a.pid" && wait_until 5 test -s "$T_DIR/b.pid"; then
  pa=$(cat "$T_DIR/a.pid"); pb=$(cat "$T_DIR/b.pid")
  # The leases settle before the measured window: each job has had about 1 s at its cap (the
  # client, under its cap, about 0.25 s of its 8 ms kernels).
  wait_busy 30 "$pa:700" "$pb:200"
  charged() { vgpu ps --json | jq -r --arg n "$1" '[.. | objects | select(.name? == $n)][0] | [.. | .gpu_time_ns? // empty] | add // 0'; }
  # The charge is read just before each snapshot, so both windows are as long on any machine.
  c0=$(charged holder); w0=$(fake_snap)
  sleep 2.5   # the measured window itself
  c1=$(charged holder); w1=$(fake_snap)
  uuid=$(fakegpu-ctl show | jq -r '.gpus[0].uuid')
  peek=$(sched_peek "$uuid")
  kill $ra $rb; wait
  sa=$(fake_busy_pct "$w0" "$w1" "$pa"); sb=$(fake_busy_pct "$w0" "$w1" "$pb")
  n=$(printf '%s\n' "$peek" | tr ' ' '\n' | sed -n 's/^preemptions=//p')
  if [ "${n:-0}" -ge 5 ]; then ok "the client preempts the holder ($n preemptions)"; else not_ok "preemptions" "$peek"; fi
  share_ok "the client stays under its cap" "$sb" 0 35 "snapshots $w0 / $w1"
  cap_ok "the saturating --core 70 job keeps its cap next to a preempting client" "$sa" 70 "$ref" \
    "client $sb%; snapshots $w0 / $w1"
  # What the limiter charged the holder (the region's gpu_time_ns) against what it used, within
  # 7 points: the holder's share of each overlap follows the client's busy time as the client's
  # helper thread sees it (every 0.2 ms, later on a loaded machine); 6-7 points over were seen
  # under ASan on a busy 2-core machine. Paying all of it, the holder was charged 79 % for 60 %.
  dt=$(( ${w1%% *} - ${w0%% *} ))
  sc=$(( (c1 - c0) / 10 / (dt > 0 ? dt : 1) ))
  share_ok "the holder is charged the GPU time it used (charged $sc% of the wall time, used $sa%)" "$(( sc - sa + 50 ))" 43 57 \
    "charged-used+50 points"
else
  not_ok "both jobs started" "$(cat "$T_DIR/a.out" "$T_DIR/b.out")"; kill $ra $rb 2>/dev/null; wait
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
ref=$(cpu_ref 2000)   # the reference for the cap, measured now with the GPU idle (lib.sh)
vgpu run --core 70 --name train -- core_loop -k 2700 -s 64 -t 5.5 -d 0.5 >"$T_DIR/t.out" 2>&1 &
training() { sched_peek "$UUID_P" | grep -q ' jobs=1 .*held=1'; }
wait_until 20 training
vgpu run --core 30 -- core_loop -m client -k 60 -s 8 -i 5000 -t 4 >"$T_DIR/c.out" 2>&1
wait
share=$(sed -n 's/.*late_share=\([0-9.]*\).*/\1/p' "$T_DIR/t.out")
busy=$(sed -n 's/.*busy=\([0-9.]*\).*/\1/p' "$T_DIR/c.out")
# At least 0.70 of as much as an uncapped loop got just before (less 0.05, and the client's own
# time), at most 0.75: beside a CPU hog it got 0.518 with an uncapped loop at 68 %.
if awk -v s="${share:-9}" -v b="${busy:-0}" -v r="$ref" 'BEGIN { exit !(s <= 0.75 && s >= 0.70 * r / 100 - 0.05 - b) }'; then
  ok "beside a client, long-kernel training keeps its cap ($share of the GPU, client $busy, reference $ref %; $(grep -o 'p99_ms=[0-9.]*' "$T_DIR/c.out"))"
else
  not_ok "long-kernel training keeps its cap" "share ${share:-?} (want 0.70 x $ref % - 0.05 - client..0.75); $(cat "$T_DIR/t.out" "$T_DIR/c.out")"
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
