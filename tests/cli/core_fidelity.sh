#!/usr/bin/env bash
# The compute limiter under the simulated GPU's scheduling model (issue 18 item 1): contexts
# time-slice, streams of one context overlap. Shares are measured
# from the fake's exact busy-time accounting (fakegpu-ctl show: the time each process had a
# kernel running), over a window after the start, and must hold the caps within ±5 points.
source "$(dirname "$0")/lib.sh"

K=2000   # µs per kernel

# busy_ns of a pid on GPU 0 (0 when it has no record)
busy_of() { # pid
  fakegpu-ctl show | jq -r --argjson p "$1" '[.gpus[0].processes[] | select(.pid == $p) | .busy_ns] | add // 0'
}
now_ns() { date +%s%N; }
# share of a pid over a window: start_ns start_busy -> now, in integer percent
share() { # pid t0 b0
  local t1 b1
  t1=$(now_ns); b1=$(busy_of "$1")
  awk -v b0="$3" -v b1="$b1" -v t0="$2" -v t1="$t1" 'BEGIN { printf "%d", (b1 - b0) * 100 / (t1 - t0) + 0.5 }'
}
in_band() { # desc value lo hi detail
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2%)"; else not_ok "$1" "got $2%, want $3..$4: $5"; fi
}

# Two jobs, 30 and 60, each with four overlapping streams (four launches, then a synchronize
# of all four): leases stay exclusive, so each job's busy time follows its cap.
pair() { # label core_loop-args...
  local label=$1; shift
  rm -f "$T_DIR/a.pid" "$T_DIR/b.pid"
  vgpu run --core 30 -- sh -c "echo \$\$ >$T_DIR/a.pid; exec core_loop $* -t 4" >"$T_DIR/a.out" 2>&1 &
  local ja=$!
  vgpu run --core 60 -- sh -c "echo \$\$ >$T_DIR/b.pid; exec core_loop $* -t 4" >"$T_DIR/b.out" 2>&1 &
  local jb=$!
  if ! wait_until 5 test -s "$T_DIR/a.pid" || ! wait_until 5 test -s "$T_DIR/b.pid"; then
    not_ok "$label: both jobs started" "$(cat "$T_DIR/a.out" "$T_DIR/b.out")"; wait; return
  fi
  local pa pb; pa=$(cat "$T_DIR/a.pid"); pb=$(cat "$T_DIR/b.pid")
  sleep 1     # the subject: leases settle before the measured window (not a synchronization)
  local t0 a0 b0; t0=$(now_ns); a0=$(busy_of "$pa"); b0=$(busy_of "$pb")
  sleep 2     # the measured window itself
  local sa sb; sa=$(share "$pa" "$t0" "$a0"); sb=$(share "$pb" "$t0" "$b0")
  wait $ja; local ra=$?; wait $jb; local rb=$?
  if [ $ra = 0 ] && [ $rb = 0 ]; then ok "$label: both jobs ran"; else not_ok "$label: both jobs ran" "rc $ra $rb: $(cat "$T_DIR/a.out" "$T_DIR/b.out")"; fi
  in_band "$label: the 30% job's busy time" "$sa" 25 35 "$(cat "$T_DIR/a.out")"
  in_band "$label: the 60% job's busy time" "$sb" 55 65 "$(cat "$T_DIR/b.out")"
}

pair "30/60, four overlapping streams" -m streams -s 4 -k $K
# Unsynchronized loops (one synchronize per 100000 launches: never, in 4 s). The limiter's
# pacing keeps a few launches in flight, far from the default push buffer (1024); a push buffer
# small enough to fill (a launch blocking in the driver) lets kernels escape their lease: see
# core_pushbuf.sh, a known failure.
pair "30/60, unsynchronized" -s 100000 -k $K

# One unsynchronized job alone at --core 30: held at its cap in each of two 1 s windows, not in
# bursts.
rm -f "$T_DIR/a.pid"
vgpu run --core 30 -- sh -c "echo \$\$ >$T_DIR/a.pid; exec core_loop -s 100000 -k 5000 -t 3.5" >"$T_DIR/a.out" 2>&1 &
j=$!
if wait_until 5 test -s "$T_DIR/a.pid"; then
  p=$(cat "$T_DIR/a.pid")
  sleep 0.8   # the subject: the first leases settle before the 1 s windows
  worst=""
  for w in 1 2; do
    t0=$(now_ns); b0=$(busy_of "$p"); sleep 1   # one measured 1 s window
    s=$(share "$p" "$t0" "$b0"); worst="$worst $s"
  done
  wait $j
  lo=$(printf '%s\n' $worst | sort -n | head -n1); hi=$(printf '%s\n' $worst | sort -n | tail -n1)
  in_band "unsynchronized job at --core 30: lowest 1 s window" "$lo" 25 35 "windows:$worst"
  in_band "unsynchronized job at --core 30: highest 1 s window" "$hi" 25 35 "windows:$worst"
else
  not_ok "unsynchronized job started" "$(cat "$T_DIR/a.out")"; wait $j
fi

done_testing
