#!/usr/bin/env bash
# Jobs that span GPUs (issue 26) on the simulated GPU: its NVML topology (tests/progs/topo_probe),
# its collectives (a "collective_us" kernel spins, busy, until its peers on the other GPUs have
# started, as NCCL's do), and --core on a
# job of several GPUs: one process round robin over 2 GPUs, 2- and 4-rank collective jobs, the
# same beside a single-GPU job.
#
# The --core checks are what a job of several GPUs needs of the limiter (DESIGN.md decision 11):
# it is not paced, so no thread or rank waits at one GPU's fence while its work for another GPU,
# or a collective's peer, waits behind it (lib/hook/limiter.c, "Jobs of several GPUs"). Before
# that: 16/32 % per GPU at --core 30/50 round robin, 38/34 % of the rate for 2/4 ranks. And its
# turns on its GPUs open and close together (lib/hook/gang.c), so that no turn ends between two
# ranks' launches of one collective. Before that: 13 % at --core 50 with -j 200 below.
#
# Shares are relative to the uncapped run of the same program on the same machine (as in
# core_limit.sh), so the load of this 2-core machine cancels out. The collective job has the
# shape of issue 26's NCCL job (a 256 MiB all-reduce, ~1 ms on NVLink, and 8 matmuls of ~2.7 ms
# a step) with the CPU up to 4 steps ahead (-s 4), as a training loop that reads its loss only
# now and then.
source "$(dirname "$0")/lib.sh"
use_scenario h100x8

field() { # line key
  printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}
ratio() { # value baseline: integer percent
  awk -v v="$1" -v b="$2" 'BEGIN { printf "%d", (b > 0 ? 100 * v / b + 0.5 : 0) }'
}
in_band() { # desc value lo hi detail
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2%)"; else not_ok "$1" "got $2%, want $3..$4: $5"; fi
}
# gang [RANKS]: whether the shares can be measured here. Before a job's GPUs kept one clock
# (gang.c), 4 rank processes on 2 CPUs measured 42-43 % beside a neighbour and once 13 % alone (a
# rank that waited for a CPU missed its turn on every GPU of the job); since, 48-51 % in 3 runs of
# 4 on 2 CPUs, with the sanitized suite running beside them. Under ASan, 4 instrumented ranks and
# a neighbour on 2 CPUs still cannot keep the simulated GPU's time, nor could 2 ranks beside a
# single-GPU job (3 busy processes: 39 % in CI's make asan). gang N: N busy processes at once,
# more than 2 of them under ASan only where there is a CPU for each.
gang() { [ "${1:-2}" -le 2 ] || [ "${VGPU_ASAN:-0}" != 1 ] || [ "$(nproc)" -ge "${1:-2}" ]; }
GANG_WHY="more busy processes than the $(nproc) CPUs under ASan: the simulated collectives cannot keep time (measured without ASan, and on machines with a CPU for each)"

# -s 1: a host synchronize every step, as multi.py's loop; -j 200: each compute kernel takes
# 2.5-2.9 ms, so the two GPUs' steps never end at exactly the same time, as on real GPUs. With
# kernels of exactly equal length (and -s 4) the ranks' turns stayed in step by themselves and
# the job kept 51 % at --core 50; with -j 200 and turns that end on each GPU on its own, 13 %
# (the real H200s: 4 %): a turn ended between two ranks' launches of one collective (gang.c).
SHAPE="-c 1000 -k 2700 -K 8 -s 1 -j 200"

# ---- the simulated GPU's topology (tests/fakegpu/scenarios/h100x8.json) ----
run topo_probe
assert_rc "topo_probe reads NVML's topology" 0
assert_contains "GPUs 0 and 1: one PCIe switch, NVLink" "0 1 ancestor=10 nvlink=0 read=0" "$out"
assert_contains "GPUs 0 and 2: one CPU, NVLink" "0 2 ancestor=40 nvlink=0 read=0" "$out"
assert_contains "GPUs 3 and 4: across CPUs, no NVLink (NOT_SUPPORTED), no P2P reads" "3 4 ancestor=50 nvlink=5 read=1" "$out"
assert_contains "each GPU has 18 active NVLinks" "7 links=18" "$out"
assert_contains "... and link 18 is an invalid argument" "7 link18=2" "$out"
use_scenario h100
run topo_probe
assert_contains "a GPU of no island: NvLinkState NOT_SUPPORTED" "0 links=unsupported" "$out"
use_scenario h100x8

# ---- the simulated GPU's collectives ----
run collective -n 2 -t 2 $SHAPE
base2=$(field "$out" steps_per_s)
share2=$(field "$out" min_share)
assert_match "2 ranks (processes) run collective steps uncapped" '^mode=ranks ranks=2 steps=[0-9]+ ' "$out"
# A step is 1 ms + 8 x 2.7 ms = 22.6 ms: alone, the ranks keep their GPUs busy with it.
in_band "uncapped, each GPU's useful share is nearly all of it" "$(ratio "$(field "$out" min_share)" 1)" 85 100 "$out"
run collective -n 2 -t 2 -p threads $SHAPE
in_band "2 ranks as threads of one process: the same rate" "$(ratio "$(field "$out" steps_per_s)" "$base2")" 85 115 "$out / $base2"
run collective -n 4 -t 2 $SHAPE
base4=$(field "$out" steps_per_s)
share4=$(field "$out" min_share)
assert_match "4 ranks run" '^mode=ranks ranks=4 steps=[0-9]+ ' "$out"

# A peer held back holds the collective: GPU 1 shared half and half with a busy process, so
# rank 1 runs at half speed; rank 0 waits for it in its collective, busy all the while.
fakegpu-ctl busy 1 30 100 >/dev/null &
busy_pid=$!
# "BUSY_NS NOW_NS" of GPU $1: its processes' busy time and the simulator's clock of that reading.
gpu_busy_ns() { fakegpu-ctl show | jq -r --argjson g "$1" '"\([.gpus[$g].processes[].busy_ns] | add // 0) \(.now_ns)"'; }
ranks_on_gpu0() { fakegpu-ctl show | jq -e '[.gpus[0].processes[] | select(.busy_ns > 0)] | length >= 1'; }
collective -n 2 -t 3 $SHAPE >"$T_DIR/held.out" 2>&1 &
cpid=$!
if wait_until 30 ranks_on_gpu0; then
  sleep 0.3                 # (the measurement window, not synchronization)
  read -r a ta <<<"$(gpu_busy_ns 0)"
  sleep 1.5
  read -r b tb <<<"$(gpu_busy_ns 0)"
  busy0=$(awk -v a="$a" -v b="$b" -v t="$((tb - ta))" 'BEGIN { printf "%d", 100 * (b - a) / t + 0.5 }')
  in_band "rank 0 spins in its collective while rank 1 is held: GPU 0 stays busy" "$busy0" 90 102 "busy_ns $a -> $b over $(((tb - ta) / 1000)) us"
fi
wait "$cpid"
held=$(cat "$T_DIR/held.out")
kill "$busy_pid" 2>/dev/null; wait "$busy_pid" 2>/dev/null
in_band "... and the job runs at rank 1's pace" "$(ratio "$(field "$held" steps_per_s)" "$base2")" 35 65 "$held / $base2"
in_band "... so rank 0's useful share is about half" "$(ratio "$(field "$held" share0)" 1)" 35 65 "$held"

# rr: PyTorch's shape on the H200 (8 matmuls of ~0.35 ms a GPU per step, then a synchronize of
# each), and its first matmul on GPU 1 14 ms after GPU 0's (-w): each GPU's turns kept that offset
# for the whole run, and the thread, held on whichever GPU was between turns, kept 82 % of its rate
# at --core 90 (80 % here) until the job's GPUs opened and closed their turns together (gang.c).
RR_SHAPE="-k 350 -K 8 -j 50 -w 14000"
run collective -m rr -n 2 -t 2 $RR_SHAPE
rr_base=$(field "$out" min_share)
assert_match "one thread round robin over 2 GPUs" '^mode=rr ranks=2 steps=[0-9]+ .*share1=' "$out"

# ---- --core on a job of several GPUs (gang turns) ----
for c in 30 50 90; do
  if gang; then
    run vgpu run --gpu 0,1 --core $c collective -m rr -n 2 -t 3 $RR_SHAPE
    for g in 0 1; do
      in_band "one process on 2 GPUs at --core $c: GPU $g at its cap" \
        "$(ratio "$(field "$out" share$g)" "$rr_base")" $((c - 5)) $((c + 5)) "$out / $rr_base"
    done
  else
    skip "one process on 2 GPUs at --core $c: each GPU at its cap" "$GANG_WHY"
  fi
done
# vgpu ps and vgpu top show each GPU's share of a job of several GPUs (its cap holds on each).
vgpu run --name rr2 --gpu 0,1 --core 50 collective -m rr -n 2 -t 6 >/dev/null 2>&1 &
rrj=$!
ps_shares() { vgpu ps | grep -E '^[^ ]+ +rr2 .* [0-9]+%,[0-9]+% '; }
wait_until 10 ps_shares
assert_match "vgpu ps: GPU% lists each GPU of a 2-GPU job" ' [0-9]+%,[0-9]+% ' "$(vgpu ps | grep ' rr2 ')"
per=$(vgpu top --json -n 2 -d 1 | tail -n 1 | jq -c '.jobs[] | select(.name == "rr2") | .gpu_time_percent_per_gpu')
assert_match "vgpu top --json: gpu_time_percent_per_gpu has a share for each GPU" '^\[[0-9.]+,[0-9.]+\]$' "$per"
# The first frame has no measure of the limiter's yet (NVML's samples): still the mean over the
# job's GPUs, not their sum (issue 36 N6: "94/50%").
first=$(vgpu top --json -n 1 | jq '[.jobs[] | select(.name == "rr2") | .gpu_time_percent][0] // empty')
in_band "vgpu top --json, first line: a 2-GPU job's share is the mean of its GPUs'" "${first%.*}" 0 60 "$first"
# The same on --once's screen, the job's GPU-TIME/CORE cell (with the sum it read 96/50%).
row=$(vgpu top --once 2>/dev/null | grep -E '^rr2 ')
once=$(sed -nE 's|^rr2 .* ([0-9]+)(\.[0-9]+)?/50% .*|\1|p' <<<"$row")
in_band "vgpu top --once: a 2-GPU job's share is the mean of its GPUs'" "${once:--1}" 0 60 "$row"
wait $rrj
for n in 2 4; do
  if gang $n; then
    gpus=$(seq -s, 0 $((n - 1)))
    base=$base2; [ "$n" = 4 ] && base=$base4
    run vgpu run --gpu "$gpus" --core 50 collective -n $n -t 3 $SHAPE
    # The defect this row guards gave 13 %. Under ASan, 2 instrumented ranks on 2 CPUs lose a few
    # points more to the CPU (44 % in CI's make asan): 40 there.
    low=45; [ "${VGPU_ASAN:-0}" = 1 ] && low=40
    in_band "a $n-rank collective job at --core 50 keeps $low % of its uncapped rate" \
      "$(ratio "$(field "$out" steps_per_s)" "$base")" $low 100 "$out / $base"
    if [ "$n" = 2 ]; then
      run vgpu run --gpu "$gpus" --core 90 collective -n $n -t 3 $SHAPE
      in_band "a $n-rank collective job at --core 90 keeps 85 % of its uncapped rate" \
        "$(ratio "$(field "$out" steps_per_s)" "$base")" 85 100 "$out / $base"
    fi
  else
    skip "a $n-rank collective job at --core 50 keeps 45 % of its uncapped rate" "$GANG_WHY"
  fi
done
# Through the arbiter (root's vgpu daemon), which is killed mid-run and started again: the job's
# GPUs go on taking their turns together on the user's own schedule, then rejoin the new daemon,
# and the job keeps its rate; the round robin process keeps its cap on each GPU. One job at a
# time (two at once would share these 2 CPUs). Not under ASan on fewer than 4 CPUs: there every
# turn is a round trip to an instrumented daemon beside two instrumented ranks, and the 2-rank job
# measured 40 % through a kill, and once 23 % in 6 runs through the daemon with no kill (47 %
# in the other 5; without ASan 48-49 % in 4 of 4).
if [ "$(id -u)" = 0 ] && { [ "${VGPU_ASAN:-0}" != 1 ] || [ "$(nproc)" -ge 4 ]; }; then
  start_daemon() { vgpu daemon 2>>"$T_DIR/daemon.log" & dpid=$!; wait_until 20 vgpu daemon --check; }
  trap 'kill $dpid 2>/dev/null; t_cleanup' EXIT
  through_kill() { # out cmd...: runs cmd through the daemon, killed at 1.5 s, restarted at 2 s
    local out=$1; shift
    start_daemon
    "$@" >"$out" 2>&1 &
    local j=$!
    sleep 1.5
    kill -KILL $dpid; wait $dpid 2>/dev/null
    sleep 0.5
    start_daemon
    wait $j
    kill $dpid; wait $dpid 2>/dev/null
  }
  # The reference goes through the same kill and restart, uncapped: what the kill itself costs
  # (a lease lost with the daemon, the rejoin) is in both. Against an uncapped run without a
  # kill, measured earlier, CI's idle 2-core machine once fell below 45 %. The lower bound is 30:
  # the capped job's rejoin (its leases given back to the new daemon's schedule) costs it more
  # than the uncapped one's, most on a busy machine: 37 % and 43-44 % of the reference beside a
  # CPU hog on one of 2 cores, 48-51 % idle. A job that stopped at the kill for good would be
  # under 20 %; one let loose by it would be above 55 (the rr rows).
  through_kill "$T_DIR/arb_ref.out" vgpu run --gpu 0,1 collective -n 2 -t 4 $SHAPE
  arb_ref=$(field "$(cat "$T_DIR/arb_ref.out")" steps_per_s)
  through_kill "$T_DIR/arb.out" vgpu run --gpu 0,1 --core 50 collective -n 2 -t 4 $SHAPE
  arb=$(cat "$T_DIR/arb.out")
  assert_contains "through the arbiter: a 2-rank job at --core 50 was told the daemon went away" "arbiter (vgpu daemon) went away" "$arb"
  in_band "... and through the kill and restart it keeps 30 % of the rate of an uncapped job killed the same way" \
    "$(ratio "$(field "$arb" steps_per_s)" "$arb_ref")" 30 100 "$arb / $arb_ref (uncapped without a kill: $base2)"
  through_kill "$T_DIR/arb_rr_ref.out" vgpu run --gpu 0,1 collective -m rr -n 2 -t 4 $RR_SHAPE
  arb_rr_ref=$(field "$(cat "$T_DIR/arb_rr_ref.out")" min_share)
  through_kill "$T_DIR/arb_rr.out" vgpu run --gpu 0,1 --core 50 collective -m rr -n 2 -t 4 $RR_SHAPE
  arb_rr=$(cat "$T_DIR/arb_rr.out")
  assert_contains "... one process on 2 GPUs at --core 50 was told too" "arbiter (vgpu daemon) went away" "$arb_rr"
  # 30 as above: on an idle 2-CPU machine 46-47 % in 5 runs of 6 and 34 % in one (2026-12-02;
  # the code of the stop before measured the same way: 3 rows of 39 failed in 1 run of 3).
  for g in 0 1; do
    in_band "... and through the kill and restart GPU $g keeps its cap" \
      "$(ratio "$(field "$arb_rr" share$g)" "$arb_rr_ref")" 30 55 "$arb_rr / uncapped through the same kill: $arb_rr_ref"
  done
else
  skip "through the arbiter, killed mid-run: 2-GPU jobs keep their caps" \
    "needs root (vgpu daemon)$([ "${VGPU_ASAN:-0}" = 1 ] && echo ", and 4 CPUs under ASan (measured without ASan)")"
fi

# Beside a single-GPU job on GPU 0: each keeps its cap (the single job measured over the
# collective job's run, from 1.5 s on).
for n in 2 4; do
  if gang $((n + 1)); then
    gpus=$(seq -s, 0 $((n - 1)))
    run core_loop -t 1 -k 2000 -s 8
    single_base=$(field "$out" share)
    vgpu run --gpu 0 --core 50 core_loop -t 5 -d 1.5 -k 2000 -s 8 >"$T_DIR/single.out" 2>&1 &
    spid=$!
    run vgpu run --gpu "$gpus" --core 50 collective -n $n -t 3 $SHAPE
    wait "$spid"
    single=$(cat "$T_DIR/single.out")
    base=$share2; [ "$n" = 4 ] && base=$share4
    # n + 1 busy processes on 2 CPUs: 46-50 % in 7 runs of 9 on an idle machine, 40-41 % in 2
    # (2026-12-02), so the lower bound is 38; a job let loose is above 55 and still fails.
    for g in $(seq 0 $((n - 1))); do
      in_band "beside a single-GPU --core 50 job on GPU 0: the $n-rank job's GPU $g at its cap" \
        "$(ratio "$(field "$out" share$g)" "$base")" 38 55 "$out / $base"
    done
    in_band "... and the single-GPU job keeps its 50 %" "$(ratio "$(field "$single" late_share)" "$single_base")" 45 55 "$single / $single_base"
  else
    skip "beside a single-GPU --core 50 job: the $n-rank job and the single job each at their cap" "$GANG_WHY"
  fi
done

done_testing
