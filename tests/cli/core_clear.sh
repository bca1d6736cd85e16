#!/usr/bin/env bash
# Keeping clear (vgpu/sched.h; issue 17): an inference client beside a training job, in the shape
# the H200 measured (tests/gpu/latency.sh). Training: 2.4 ms kernels, synchronized every 64
# launches, --core 70. Client: requests of 8 kernels of 60 us and a synchronize, 5 ms idle
# between them, --core 30. The simulated GPU time-slices contexts in 2 ms slices, so a request
# that arrives while the training job has kernels queued waits for them; on the H200 it waited
# for the whole kernel. Before keeping clear: p50 1.05 ms, p99 2.5 ms here in both rows; the
# client alone takes about 0.5 ms. Now the training job gives the lease back before a request is
# due and queues nothing until it has come: p50 0.6 ms, p99 about 1.0-1.2 ms, and the training
# job still gets 68 % (70 % minus what the client used, within 5 points). Checked at p50
# (0.85 ms: the code before is at 1.05 from p50 on, now 0.62-0.67), and at p90 against a blow-up
# only (2 ms): at p99 (the 10th slowest request of 1000), a CI machine busy with a build for a
# moment failed the run (2.15 ms); a p90 bound of 1 ms failed beside a CPU hog on one of 2 cores
# (p50 0.64, p90 1.01), and p90 reads 0.80-0.96 in most runs here but 1.31 in one of nine.
source "$(dirname "$0")/lib.sh"

field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
ms100() { awk -v v="$1" 'BEGIN { printf "%d", 100 * v + 0.5 }'; }   # ms -> hundredths
in_band() { # desc value lo hi detail
  timing_skipped "$1" "$2" && return 0
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2)"; else not_ok "$1" "got $2, want $3..$4: $5"; fi
}

UUID=GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91   # GPU 0 of h100.json
training_holds() { case $(sched_peek $UUID) in *held=1*) return 0 ;; esac; return 1; }

row() { # label p50-bound p90-bound (hundredths of a ms) train-prefix... :: client-prefix...
  local label=$1 bound50=$2 bound=$3; shift 3
  local tp=() cp=()
  while [ "$1" != :: ]; do tp+=("$1"); shift; done; shift
  cp=("$@")
  local tr="$T_DIR/trace.${label// /_}"
  mkdir -p "$tr"
  VGPU_LEASE_TRACE=$tr "${tp[@]}" core_loop -k 2400 -s 64 -t 8 >"$T_DIR/train" 2>&1 &
  local t=$!
  wait_until 20 training_holds   # the client starts beside a training job that has the GPU
  mkdir -p "$tr.client"
  local out; out=$(VGPU_LEASE_TRACE=$tr.client "${cp[@]}" core_loop -m client -k 60 -s 8 -i 5000 -t 6 2>&1)
  wait $t
  local train; train=$(cat "$T_DIR/train")
  local clears; clears=$(cat "$tr"/lease.* 2>/dev/null | grep -c '^clear ')
  in_band "$label: client p50 in hundredths of a ms" "$(ms100 "$(field "$out" p50_ms)")" 1 "$bound50" \
    "$out; training: $train; $clears clears"
  in_band "$label: client p90 in hundredths of a ms" "$(ms100 "$(field "$out" p90_ms)")" 1 "$bound" \
    "$out; training: $train; $clears clears"
  local busy; busy=$(ms100 "$(field "$out" busy)")
  in_band "$label: the training job keeps 70 % minus what the client used, within 5 points" \
    "$(ms100 "$(field "$train" share)")" "$((65 - busy))" 75 "$train; client: $out"
  # The client's lease waits (from its first launch of a request until it holds the lease;
  # tests/gpu/handover.py), p99 in microseconds: bounded by the holder's pacing, not its lease.
  local waits; waits=$(python3 "$VGPU_SRC/tests/gpu/handover.py" "$tr.client" 2>&1 | grep 'lease waits')
  local lw99; lw99=$(printf '%s\n' "$waits" | sed -n 's/.* p99 \([0-9]*\) us.*/\1/p')
  in_band "$label: client lease waits p99 in us" "${lw99:-999999}" 0 1000 "$waits; client: $out"
  if [ "$clears" -gt 0 ]; then ok "$label: the training job kept clear of requests ($clears times)"
  else not_ok "$label: the training job kept clear of requests" "no clear event in its lease trace"; fi
}

row "priority" 85 200 vgpu run --core 70 --priority low -- :: vgpu run --core 30 --priority high --core-policy soft --
row "equal priority" 85 200 vgpu run --core 70 -- :: vgpu run --core 30 --

# A client that now and then comes back late (issue 34): every 7th idle is 1.2 ms longer, as a
# sleep woken late. On an H200 one request in ~400 came back 0.97 ms after the return the training
# job kept clear for, and found a 2.7 ms kernel queued 0.1 ms before it (2.83 ms for a 0.8 ms
# request). The training job now keeps clear on until the client's late bound while the client
# is due and not back. Here, before: the late requests' p90 read 2.54-2.56 ms (the p99 of all 2.55);
# now 0.62 (p99 1.07-1.10), the training job at 67 % either way. Bounded at 2 ms, as the p90 rows
# above: a run beside a loaded suite read 1.28 (its p90 of all requests too).
late_row() { # label train-prefix... :: client-prefix...
  local label=$1; shift
  local tp=() cp=()
  while [ "$1" != :: ]; do tp+=("$1"); shift; done; shift
  cp=("$@")
  "${tp[@]}" core_loop -k 2400 -s 64 -t 8 >"$T_DIR/train" 2>&1 &
  local t=$!
  wait_until 20 training_holds
  local out; out=$("${cp[@]}" core_loop -m client -k 60 -s 8 -i 5000 -l 1200:7 -t 6 2>&1)
  wait $t
  echo "# $label, late returns: $out"
  in_band "$label, late returns: the late requests' p90 in hundredths of a ms" \
    "$(ms100 "$(field "$out" late_p90_ms)")" 1 200 "$out; training: $(cat "$T_DIR/train")"
}
late_row "equal priority" vgpu run --core 70 -- :: vgpu run --core 30 --
late_row "priority" vgpu run --core 70 --priority low -- :: vgpu run --core 30 --priority high --core-policy soft --
done_testing
