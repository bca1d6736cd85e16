#!/usr/bin/env bash
# A spilling job's fair share of GPU time (issue 15 item 6; libvgpu(7), "Virtual device memory").
# A job with --oversubscribe and no --core of its own, once it has memory spilled off the GPU, is
# held to 100 / (1 + the busy processes outside it) percent of the GPU's time, a hard cap: its
# kernels wait for page faults inside its own time slices, and on an H200 a job beside two
# spilling jobs kept 86 % of its throughput (206 % with --core 33 on each of them). Here a
# spilling job (2 GiB on a 1 GiB device share, saturating with 1 ms kernels) beside a job that
# keeps the GPU busy 40 % of the time (2 ms of work, 3 ms idle): time-slicing gave the spilling
# job 66 %. Held to half, it gets about 33 %: its leases are charged their wall time, and the busy
# job, which is not in the schedule, runs inside them too (as beside any unscheduled process).
# Alone, without spilling, or with --core 100, it is not held.
source "$(dirname "$0")/lib.sh"

field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
pct() { awk -v s="$(field "$1" share)" 'BEGIN { printf "%d", 100 * s + 0.5 }'; }
# Lease grants in the traces of DIR, and how many came more than 3.5 s after the first: "N LATE".
grants() {
  cat "$1"/lease.* 2>/dev/null | awk '$1 == "grant" { print $3 }' | sort -n |
    awk '{ n++; if (n == 1) f = $1; else if ($1 > f + 3500000000) l++ } END { print n + 0, l + 0 }'
}
in_band() { # desc value lo hi detail
  if [ "$2" -ge "$3" ] && [ "$2" -le "$4" ]; then ok "$1 ($2)"; else not_ok "$1" "got $2, want $3..$4: $5"; fi
}

run vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 2048 -k 1000 -s 8 -t 2
in_band "a spilling job alone is not held (its share of the GPU, %)" "$(pct "$out")" 90 100 "$out $err"

# Beside a job that keeps the GPU 40 % busy. The count is redone once a second from NVML's samples
# of the last second, so the busy job is seen within about 2 s of starting, whenever it started:
# the window measured starts after that (-d 2).
vgpu run --mem 4G -- core_loop -m client -k 1000 -s 2 -i 3000 -t 13 >"$T_DIR/busy" 2>&1 &
b=$!
run vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 2048 -k 1000 -s 8 -t 5 -d 2
late=$(awk -v s="$(field "$out" late_share)" 'BEGIN { printf "%d", 100 * s + 0.5 }')
in_band "a spilling job beside a busy one is held to at most half the GPU (%, after its first 2 s)" "$late" 20 52 "$out $err"
run vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 512 -k 1000 -s 8 -t 3 -d 1.5
late=$(awk -v s="$(field "$out" late_share)" 'BEGIN { printf "%d", 100 * s + 0.5 }')
in_band "an oversubscribed job that does not spill is not held (%)" "$late" 56 100 "$out $err"
run vgpu run --mem 3G --oversubscribe=1G --core 100 -- core_loop -a 2048 -k 1000 -s 8 -t 3 -d 1.5
late=$(awk -v s="$(field "$out" late_share)" 'BEGIN { printf "%d", 100 * s + 0.5 }')
in_band "--core 100 opts a spilling job out of its fair share (%)" "$late" 56 100 "$out $err"
wait $b
busy=$(awk -v s="$(field "$(cat "$T_DIR/busy")" busy)" 'BEGIN { printf "%d", 100 * s + 0.5 }')
in_band "the busy job gets about its 40 %" "$busy" 30 45 "$(cat "$T_DIR/busy")"

# Two spilling jobs side by side, nothing else: neither is held for long. Each is held at first
# (the other one looks like any busy process), joins the GPU's schedule and marks itself there as
# spilling; from then on each sees that the only one busy beside it spills too, and they
# time-slice freely (held, they would take turns and lose the overlap of one's page faults with
# the other's work). So the lease grants of their schedule stop within about 2 s; the check
# allows 3.5 s.
mkdir "$T_DIR/tr"
VGPU_LEASE_TRACE=$T_DIR/tr vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 2048 -k 1000 -s 8 -t 6 >"$T_DIR/s1" 2>&1 &
s1=$!
VGPU_LEASE_TRACE=$T_DIR/tr vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 2048 -k 1000 -s 8 -t 6 >"$T_DIR/s2" 2>&1
wait $s1
read -r first late < <(grants "$T_DIR/tr")
if [ "$first" -gt 0 ] && [ "$late" = 0 ]; then ok "two spilling jobs side by side stop taking turns ($first grants, all in the first 3.5 s)"
else not_ok "two spilling jobs side by side stop taking turns" "$first grants, $late of them after 3.5 s; $(cat "$T_DIR/s1" "$T_DIR/s2")"; fi

# The same with one of them in a container (`unshare -pf --mount-proc`): NVML reports its host
# pid, while its entry in the schedule holds the pid it sees for itself (1). The job on the host
# finds it through /proc; the one in the container, which cannot see the host's processes, takes
# the host job's entry as NVML's pid. Before, the host job took the container job for a busy job
# that does not spill, and the two kept taking turns.
if unshare -pf --mount-proc true 2>/dev/null; then
  mkdir "$T_DIR/tr2"
  VGPU_LEASE_TRACE=$T_DIR/tr2 vgpu run --mem 3G --oversubscribe=1G -- \
    unshare -pf --kill-child --mount-proc core_loop -a 2048 -k 1000 -s 8 -t 6 >"$T_DIR/c1" 2>&1 &
  c1=$!
  VGPU_LEASE_TRACE=$T_DIR/tr2 vgpu run --mem 3G --oversubscribe=1G -- core_loop -a 2048 -k 1000 -s 8 -t 6 >"$T_DIR/c2" 2>&1
  wait $c1
  read -r first late < <(grants "$T_DIR/tr2")
  if [ "$first" -gt 0 ] && [ "$late" = 0 ]; then
    ok "... also when one of them is in a container ($first grants, all in the first 3.5 s)"
  else
    not_ok "... also when one of them is in a container" "$first grants, $late of them after 3.5 s; $(cat "$T_DIR/c1" "$T_DIR/c2")"
  fi
else
  skip "... also when one of them is in a container" "unshare -pf --mount-proc does not work here"
fi
done_testing
