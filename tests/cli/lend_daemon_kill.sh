# Borrowed memory gives way with the arbiter killed mid-demotion (issue 37 item 6): the squeeze
# is each borrower's own (lib/hook/squeeze.c reads the other jobs' unmet requests from their
# regions), so `kill -9` of vgpu daemon while a borrower moves 100 GiB to the host must not stop
# the move, kill the borrower, or leave the owner without its memory; a daemon started again
# finds both jobs as they are, and the borrower's memory comes back once the owner ends.
# h200 scenario: managed memory moves at the H200's measured rates (100 GiB to the host ~7 s),
# so the kill lands mid-move. Owners run with VGPU_FAKE_NO_EVICT=1, as in lend_squeeze.sh: they
# get memory only when vgpu's squeeze gave it.
. "$(dirname "$0")/lib.sh"

G=1073741824
use_scenario h200
daemon_start
demoted() { vgpu ps --json | jq -r --arg n "$1" '.jobs[] | select(.name == $n and .state == "running") | .gpus[0].mem_demoted_bytes'; }
demoted_is() { [ "$(demoted "$1")" = "$2" ]; }
timed_ms() { printf '%s\n' "$1" | sed -n 's/^timed rc=0 size=[0-9]* ms=\([0-9]*\)$/\1/p'; }

vgpu run --name lender --mem 2G:120G -- env VGPU_LOG=info oversub_probe alloc 100G hold >"$T_DIR/lender.out" 2>&1 &
lender=$!
if poll_until 20 grep -q holding "$T_DIR/lender.out"; then ok "through the daemon: a borrower holds 100 GiB past a 2 GiB request"
else not_ok "through the daemon: a borrower holds 100 GiB past a 2 GiB request" "$(cat "$T_DIR/lender.out")"; fi
VGPU_FAKE_NO_EVICT=1 vgpu run --name owner --mem 100G -- oversub_probe timed 99G hold >"$T_DIR/owner.out" 2>&1 &
owner=$!
poll_until 10 grep -q "demoted 100 GiB" "$T_DIR/lender.out"
kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
check "the daemon is gone while the borrower demotes" sh -c '! vgpu daemon --check'
poll_until 10 grep -q holding "$T_DIR/owner.out"
ms=$(timed_ms "$(grep '^timed ' "$T_DIR/owner.out")")
check "the owner got its 99 GiB within 1 s all the same (${ms:-no} ms)" test -n "$ms" -a "${ms:-9999}" -lt 1000
check "the borrower is not killed" kill -0 "$lender"
check "... and its whole 100 GiB is shown demoted" demoted_is lender $((100 * G))
daemon_start
check "a daemon started again answers" vgpu daemon --check
run vgpu ps --json
assert_eq "... both jobs are listed running" "lender owner" \
  "$(printf '%s' "$out" | jq -r '[.jobs[] | select(.state == "running") | .name] | sort | join(" ")')"
kill "$owner"; wait "$owner" 2>/dev/null
if poll_until 15 demoted_is lender 0; then ok "the owner ended: the borrower's memory is promoted back"
else not_ok "the owner ended: the borrower's memory is promoted back" "demoted $(demoted lender)"; fi
check "... the borrower still runs" kill -0 "$lender"
kill "$lender"; wait "$lender" 2>/dev/null
daemon_stop

done_testing
