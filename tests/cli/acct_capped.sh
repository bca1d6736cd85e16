#!/usr/bin/env bash
# A capped job's GPU time is what the schedule charged its leases, so a lease held idle is billed
# as GPU time, and it counts against the cap (issue 34 item 3). On the simulated GPU each client
# below runs requests of N kernels of K µs and then idles; its kernel time (requests x N x K) is
# the truth its record (gpu_time_source "schedule") must keep to:
#   - bursts of 100 ms then 0.9 s idle: each burst's last lease was held until the next burst
#     (the helper missed the grant's wake-up), billed 4.0 GPU-s for 0.4 s of kernels, and each
#     request took 1 s instead of 0.3;
#   - requests of 10 ms every 100 ms: each lease held idle to its deadline, 3x the kernel time;
#   - requests of 1 ms every 5 ms (16 % of the GPU, under a 30 % cap): held to 6 % and billed 30 %.
# Every lease is now given back once idle (limiter_keeper.c), so the bill follows the work, up to
# the idle time a lease must show before it goes back (0.2 ms, or a tenth of its work: sched.h).
. "$(dirname "$0")/lib.sh"

# name cap args... -> "requests busy gpu_seconds source kernel_s"
client() {
  local name=$1 cap=$2 s=$3 k=$4 i=$5 t=$6 o rec
  o=$(vgpu run --name "$name" $cap -- core_loop -m client -s "$s" -k "$k" -i "$i" -t "$t" 2>/dev/null | tail -n 1)
  records_settled
  rec=$(vgpu acct --json --name "$name" | jq -r '.jobs[0].gpus[0] | "\(.gpu_seconds) \(.gpu_time_source)"')
  local n b; n=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$o"); b=$(sed -n 's/.*busy=\([0-9.]*\).*/\1/p' <<<"$o")
  echo "${n:-0} ${b:-0} $rec $(awk -v n="${n:-0}" -v s="$s" -v k="$k" 'BEGIN { printf "%.3f", n * s * k / 1e6 }')"
}
bill_ok() { # desc "requests busy g src kernel" lo hi
  local n b g src kt; read -r n b g src kt <<<"$2"
  if [ "$src" = schedule ] && [ "$n" -gt 0 ] &&
     awk -v g="$g" -v t="$kt" -v lo="$3" -v hi="$4" 'BEGIN { exit !(t > 0 && g >= lo * t && g <= hi * t) }'; then
    ok "$1: $g GPU-s for $kt s of kernels ($n requests)"
  else not_ok "$1" "got $g GPU-s ($src) for $kt s of kernels in $n requests; want $3-$4x that from the schedule"; fi
}

if asan_small; then
  skip "bursts between long pauses are billed their kernel time" "$(timing_skipped)"
  skip "short requests are billed their kernel time" "$(timing_skipped)"
  skip "a light client under a cap above its use runs as fast as uncapped" "$(timing_skipped)"
  done_testing; exit 0
fi

r=$(client bursts "--core 30" 50 2000 900000 6)
bill_ok "bursts of 100 ms between pauses of 0.9 s, --core 30, are billed their kernel time" "$r" 0.9 1.25
n=$(cut -d' ' -f1 <<<"$r")
if [ "${n:-0}" -ge 5 ]; then ok "... and each burst is served at the cap (>= 5 requests in 6 s: $n)"
else not_ok "... and each burst is served at the cap" "$n requests in 6 s (a burst of 100 ms at 30 % takes 0.33 s)"; fi

bill_ok "requests of 10 ms every 100 ms, --core 30, are billed their kernel time" \
  "$(client mid "--core 30" 5 2000 90000 4)" 0.9 1.3

free=$(client light-free "" 1 1000 5000 3); capped=$(client light "--core 30" 1 1000 5000 3)
fb=$(cut -d' ' -f2 <<<"$free"); cb=$(cut -d' ' -f2 <<<"$capped")
if awk -v f="$fb" -v c="$cb" 'BEGIN { exit !(f > 0 && c >= 0.75 * f) }'; then
  ok "a light client (1 ms requests every 5 ms) under --core 30 runs as uncapped: busy $cb, uncapped $fb"
else not_ok "a light client under --core 30 runs as uncapped" "busy $cb capped, $fb uncapped: its idle time counted against its cap"; fi
# Each of its requests goes idle once, and its lease waits 0.2 ms (and the helper's look) before
# going back: a bound, not a tolerance.
bill_ok "... and is billed its kernel time plus at most 1 ms per request" "$capped" 0.9 2

done_testing
