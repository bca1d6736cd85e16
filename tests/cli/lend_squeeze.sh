# Borrowed memory gives way; it never kills (issue 37 item 2, decision 13's squeeze). A borrower
# (--mem REQUEST:LIMIT) whose borrowed pages hold room that another job's unmet request needs
# demotes them to host memory (lib/hook/squeeze.c, a look every 200 ms), runs on, and promotes
# them back once the room is there again; an allocation within its owner's request waits at most
# a second for that (lib/hook/giveway.c) and then fails naming the borrowers.
# Every owner here runs with VGPU_FAKE_NO_EVICT=1: the simulated driver then refuses an ordinary
# allocation that does not fit instead of evicting the borrower's managed pages (the real
# driver's safety net, which tests/cli/lend.sh exercises), so an owner gets its memory only when
# vgpu's squeeze gave it. On the code before (no squeeze, no wait), the owners' allocations failed
# at once and no byte was ever shown demoted: every "granted" and "demoted" row here failed.
# h100 scenario: 84,927,315,968 B usable (79.09 GiB), each process's context costs 512 MiB.
. "$(dirname "$0")/lib.sh"

G=1073741824
ctx=536870912
jq_job() { printf '%s' "$out" | jq -r --arg n "$1" ".jobs[] | select(.name == \$n and .state == \"running\") | $2"; }
demoted() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n and .state == "running") | .gpus[0].mem_demoted_bytes'; }
demoted_is() { [ "$(demoted "$1")" = "$2" ]; }
export -f demoted demoted_is
gpu_free() { nvml_probe | sed -n 's/^gpu=0 .* free=\([0-9]*\) .*/\1/p'; }
timed_ms() { printf '%s\n' "$1" | sed -n 's/^timed rc=0 size=[0-9]* ms=\([0-9]*\)$/\1/p'; }

# ---- one borrower at its LIMIT, one owner allocating its whole request ----
vgpu run --name lender --mem 2G:75G -- env VGPU_LOG=info oversub_probe alloc 1G alloc 70G hold >"$T_DIR/lender.out" 2>&1 &
lender=$!
if poll_until 10 grep -q holding "$T_DIR/lender.out"; then ok "a borrower holds 70 GiB past a 2 GiB request"; else not_ok "a borrower holds 70 GiB past a 2 GiB request" "$(cat "$T_DIR/lender.out")"; fi
f=$(gpu_free)
check "... prefetched onto the GPU: less than 10 GiB free ($f B)" test "${f:-0}" -gt 0 -a "${f:-$G}" -lt $((10 * G))
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner --mem 60G -- oversub_probe timed 59G hold >"$T_DIR/owner.out" 2>&1 &
owner=$!
poll_until 10 grep -q holding "$T_DIR/owner.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner.out")")
check "a job of --mem 60G gets 59 GiB (its request, less its context) within 1 s beside it (${ms:-no} ms)" \
  test -n "$ms" -a "${ms:-9999}" -lt 1000
check "the borrower is not killed" kill -0 "$lender"
run vgpu ps --json
assert_eq "vgpu ps --json: its 70 GiB allocation is demoted, its borrowed figure unchanged" \
  "$((70 * G)) $((G + ctx + 70 * G - 2 * G))" "$(jq_job lender '.gpus[0] | "\(.mem_demoted_bytes) \(.mem_borrowed_bytes)"')"
assert_eq "... the job's sum too" "$((70 * G))" "$(jq_job lender '.mem_demoted_bytes')"
run vgpu ps
assert_contains "vgpu ps: the demoted bytes on the borrower's line" "(limit 75 GiB, 70 GiB demoted)" "$out"
run vgpu metrics
assert_match "metrics: vgpu_job_mem_demoted_bytes" 'vgpu_job_mem_demoted_bytes\{[^}]*job_name="lender"[^}]*\} 75161927680' "$out"
run vgpu top --json -n 1
assert_eq "top --json: the demoted bytes" "$((70 * G))" \
  "$(printf '%s' "$out" | head -n 1 | jq -r '.jobs[] | select(.name == "lender") | .mem_demoted_bytes')"
assert_contains "the borrower said what it did (VGPU_LOG=info)" "demoted 70 GiB of borrowed memory on GPU 0 to host memory" \
  "$(cat "$T_DIR/lender.out")"
kill "$owner"; wait "$owner" 2>/dev/null
if poll_until 5 demoted_is lender 0; then ok "the owner ended: the borrower's memory is promoted back within 5 s"; else not_ok "the owner ended: the borrower's memory is promoted back within 5 s" "$(demoted lender)"; fi
f=$(gpu_free)
check "... resident on the GPU again: less than 10 GiB free ($f B)" test "${f:-0}" -gt 0 -a "${f:-$G}" -lt $((10 * G))

# ---- 20 trials: each owner granted within 1 s, the borrower promoted back between them ----
# 20, not the issue's 100: a trial waits for the promotion after its owner (1 s of room, then a
# look), about 2 s each on this 2-CPU machine; 100 would hold the suite for minutes.
granted=0 promoted=0 worst=0 fails=""
for i in $(seq 1 20); do
  o=$(VGPU_FAKE_NO_EVICT=1 vgpu run --mem 60G -- oversub_probe timed 59G 2>&1)
  ms=$(timed_ms "$(printf '%s\n' "$o" | grep '^timed ')")
  if [ -n "$ms" ] && [ "$ms" -lt 1000 ]; then granted=$((granted + 1)); [ "$ms" -gt "$worst" ] && worst=$ms
  else fails="$fails trial $i: $o;"; fi
  if poll_until 5 demoted_is lender 0; then promoted=$((promoted + 1)); else fails="$fails trial $i: not promoted back ($(demoted lender));"; fi
done
if [ "$granted $promoted" = "20 20" ]; then ok "20 owners of 20 granted their whole request within 1 s (the slowest: $worst ms), the borrower promoted back after each"
else not_ok "20 owners of 20 granted their whole request within 1 s, the borrower promoted back after each" "granted $granted, promoted $promoted:$fails"; fi
check "the borrower ran through all of them" kill -0 "$lender"
kill "$lender"; wait "$lender" 2>/dev/null

# ---- two borrowers and one owner ----
vgpu run --name b1 --mem 1G:40G -- oversub_probe alloc 35G hold >"$T_DIR/b1.out" 2>&1 &
b1=$!
vgpu run --name b2 --mem 1G:40G -- oversub_probe alloc 20G alloc 15G hold >"$T_DIR/b2.out" 2>&1 &
b2=$!
poll_until 10 grep -q holding "$T_DIR/b1.out"; poll_until 10 grep -q holding "$T_DIR/b2.out"
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner2 --mem 50G -- oversub_probe timed 49G hold >"$T_DIR/owner2.out" 2>&1 &
owner2=$!
poll_until 10 grep -q holding "$T_DIR/owner2.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner2.out")")
check "two borrowers of 35 GiB each: an owner's 49 GiB within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
check "... neither borrower killed" kill -0 "$b1" "$b2"
d1=$(demoted b1); d2=$(demoted b2)
# The owner needs about 49.5 - 8 GiB more than the GPU had free: more than either borrower holds,
# so both give way, and together no more than both hold.
check "... both demoted, together enough and no more than they hold (b1 $d1 B, b2 $d2 B)" \
  awk -v a="${d1:-0}" -v b="${d2:-0}" -v g="$G" 'BEGIN { exit !(a > 0 && b > 0 && a + b >= 41 * g && a + b <= 70 * g) }'
kill "$owner2"; wait "$owner2" 2>/dev/null
if poll_until 5 demoted_is b1 0 && poll_until 5 demoted_is b2 0; then ok "... both promoted back once the owner ended"; else not_ok "... both promoted back once the owner ended" "b1 $(demoted b1) b2 $(demoted b2)"; fi
kill "$b1" "$b2"; wait "$b1" "$b2" 2>/dev/null

# ---- the order of giving way: the lower priority first, then the one that borrows more ----
# (issue 37 item 4.) Two borrowers of 30 GiB each leave ~17 GiB free; an owner of 30 GiB needs
# ~13 GiB more, which either can cover: only the first in the order gives way. On the code before
# (each borrower demoted what was missing, whoever it was) both demoted their 30 GiB.
order_case() { # desc first-args second-args first-name second-name
  vgpu run --name "$4" $2 -- oversub_probe alloc "$6" hold >"$T_DIR/$4.out" 2>&1 &
  local p1=$!
  vgpu run --name "$5" $3 -- oversub_probe alloc "$7" hold >"$T_DIR/$5.out" 2>&1 &
  local p2=$!
  poll_until 10 grep -q holding "$T_DIR/$4.out"; poll_until 10 grep -q holding "$T_DIR/$5.out"
  VGPU_FAKE_NO_EVICT=1 vgpu run --name owner5 --mem 30G -- oversub_probe timed 29G hold >"$T_DIR/owner5.out" 2>&1 &
  local po=$!
  poll_until 10 grep -q holding "$T_DIR/owner5.out"
  ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner5.out")")
  check "$1: the owner's 29 GiB within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
  poll_until 5 bash -c '[ "$(demoted "$1")" != 0 ]' _ "$4"
  local d1 d2; d1=$(demoted "$4"); d2=$(demoted "$5")
  check "... $4 gave way ($d1 B demoted), $5 did not ($d2 B)" test "${d1:-0}" -ge $((13 * G)) -a "${d2:-x}" = 0
  check "... neither killed" kill -0 "$p1" "$p2"
  kill "$po"; wait "$po" 2>/dev/null
  if poll_until 5 demoted_is "$4" 0; then ok "... $4 promoted back once the owner ended"; else not_ok "... $4 promoted back once the owner ended" "$(demoted "$4")"; fi
  kill "$p1" "$p2"; wait "$p1" "$p2" 2>/dev/null
}
order_case "a --priority low borrower and a normal one" "--mem 1G:40G --priority low" "--mem 1G:40G" low norm 30G 30G
order_case "two borrowers of one priority" "--mem 1G:50G" "--mem 1G:50G" big small 40G 20G

# A borrower ahead in the order that does not give way (stopped here; starved of CPU, or another
# user lying to the arbiter about what it borrows): the one behind gives after the shortfall
# lasted half a second, so the owner still gets its request within 1 s. Before, the owner waited
# its second for the stopped one and failed.
vgpu run --name stuck --mem 1G:40G --priority low -- sh -c 'oversub_probe alloc 30G hold & echo "pid $!"; wait' \
  >"$T_DIR/stuck.out" 2>&1 &
stuck=$!
vgpu run --name behind --mem 1G:40G -- oversub_probe alloc 30G hold >"$T_DIR/behind.out" 2>&1 &
behind=$!
poll_until 10 grep -q holding "$T_DIR/stuck.out"; poll_until 10 grep -q holding "$T_DIR/behind.out"
spid=$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$T_DIR/stuck.out")
[ -n "$spid" ] && kill -STOP "$spid"
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner6 --mem 30G -- oversub_probe timed 29G hold >"$T_DIR/owner6.out" 2>&1 &
owner6=$!
poll_until 10 grep -q -e holding -e '^timed' "$T_DIR/owner6.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner6.out")")
check "the first in the order stopped: the owner's 29 GiB within 1 s all the same (${ms:-no} ms)" \
  test -n "$ms" -a "${ms:-9999}" -lt 1000
d2=$(demoted behind)
check "... the borrower behind it gave way ($d2 B demoted)" test "${d2:-0}" -ge $((13 * G))
[ -n "$spid" ] && kill -CONT "$spid"
kill "$owner6" "$stuck" "$behind" 2>/dev/null; wait "$owner6" "$stuck" "$behind" 2>/dev/null

# ---- a borrower killed mid-demotion leaves nothing held ----
# The h200 model moves managed memory at its measured rates: 100 GiB to the host takes ~7 s of
# the demoting stream, so a SIGKILL right after the borrower said it demoted lands mid-move. The
# job outlives the process (its shell sleeps on), so its region must give the process's share back.
use_scenario h200
# (The shell says the borrower's pid, as pgrep hangs under make asan's preloaded sanitizers, and
# waits for it, so that it does not stay a zombie, which vgpu cannot tell from a live process.)
vgpu run --name victim --mem 2G:120G -- sh -c 'env VGPU_LOG=info oversub_probe alloc 100G hold & echo "pid $!"; wait; exec sleep 1000' \
  >"$T_DIR/victim.out" 2>&1 &
victim=$!
if poll_until 20 grep -q holding "$T_DIR/victim.out"; then ok "h200: a borrower holds 100 GiB"; else not_ok "h200: a borrower holds 100 GiB" "$(cat "$T_DIR/victim.out")"; fi
vpid=$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$T_DIR/victim.out")
fake_held() { fakegpu-ctl show | jq --argjson p "${vpid:-0}" '[.gpus[0].processes[]? | select(.pid == $p) | .memory] | add // 0'; }
held=$(fake_held)
check "... its process holds it on the simulated GPU ($held B)" test "$held" -gt $((90 * G))
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner3 --mem 100G -- oversub_probe timed 99G hold >"$T_DIR/owner3.out" 2>&1 &
owner3=$!
poll_until 10 grep -q "demoted 100 GiB" "$T_DIR/victim.out"
[ -n "$vpid" ] && kill -9 "$vpid"
poll_until 10 grep -q holding "$T_DIR/owner3.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner3.out")")
check "the owner got its 99 GiB within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
used_of() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n and .state == "running") | .gpus[0] | "\(.mem_used_bytes) \(.mem_borrowed_bytes) \(.mem_demoted_bytes)"'; }
used_is() { [ "$(used_of "$1")" = "$2" ]; }
if poll_until 5 used_is victim "0 0 0"; then ok "the borrower killed mid-demotion: its job, still running, holds nothing (used, borrowed, demoted)"
else not_ok "the borrower killed mid-demotion: its job, still running, holds nothing (used, borrowed, demoted)" "$(used_of victim)"; fi
assert_eq "... and the simulated GPU has nothing of its process" "0" "$(fake_held)"
kill "$owner3" "$victim" ${vpid:+"$vpid"} 2>/dev/null; wait "$owner3" "$victim" 2>/dev/null

# ---- vgpu limit shrinking a request below use ----
use_scenario h100
vgpu run --name shrink --mem 8G:75G -- oversub_probe alloc 6G alloc 60G hold >"$T_DIR/shrink.out" 2>&1 &
shrink=$!
poll_until 10 grep -q holding "$T_DIR/shrink.out"
run vgpu limit shrink --mem 2G:
assert_rc "vgpu limit lowers the request to 2 GiB, below the 66.5 GiB in use" 0
run vgpu ps --json
assert_eq "... the job runs on, everything past 2 GiB now borrowed" "$((6 * G + ctx + 60 * G - 2 * G))" \
  "$(jq_job shrink '.gpus[0].mem_borrowed_bytes')"
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner4 --mem 70G -- oversub_probe timed 69G hold >"$T_DIR/owner4.out" 2>&1 &
owner4=$!
poll_until 10 grep -q holding "$T_DIR/owner4.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner4.out")")
check "an owner of the room it freed gets 69 GiB within 1 s (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
check "... the shrunk job is not killed" kill -0 "$shrink"
assert_eq "... it demoted its 60 GiB of managed memory; its 6 GiB of device memory stays" "$((60 * G))" "$(demoted shrink)"
kill "$owner4"; wait "$owner4" 2>/dev/null
kill "$shrink"; wait "$shrink" 2>/dev/null

# ---- an owner whose room does not come: a bounded wait, then a clear error naming the borrower ----
# Managed memory the program allocated itself keeps the advice the program gave it (vgpu demotes
# only what it served from managed memory): with the driver's eviction off, nothing gives way.
vgpu run --name keeper --mem 2G:75G -- oversub_probe managed 70G prefetch hold >"$T_DIR/keeper.out" 2>&1 &
keeper=$!
poll_until 10 grep -q holding "$T_DIR/keeper.out"
VGPU_FAKE_NO_EVICT=1 run vgpu run --mem 20G -- oversub_probe timed 19G
ms=$(printf '%s\n' "$out" | sed -n 's/^timed rc=2 size=[0-9]* ms=\([0-9]*\)$/\1/p')
check "an owner whose borrower cannot give way fails with CUDA_ERROR_OUT_OF_MEMORY after about 1 s (${ms:-no} ms)" \
  test -n "$ms" -a "${ms:-0}" -ge 1000 -a "${ms:-9999}" -lt 3000
assert_contains "... saying it waited for borrowers, and naming the job" "other jobs still borrow" "$err"
assert_contains "... by name and id" "keeper (" "$err"
check "... the borrower is not killed" kill -0 "$keeper"
kill "$keeper"; wait "$keeper" 2>/dev/null

done_testing
