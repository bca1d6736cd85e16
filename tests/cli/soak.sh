#!/usr/bin/env bash
# The soak (issue 11, tests/soak/soak.c): 2 users x 4 jobs x 4 processes allocating, freeing and
# launching on one simulated GPU while a chaos loop SIGKILLs them (inside allocation calls too),
# starts new ones (some in a new PID namespace) and changes limits live; checked every 10 ms.
# One TAP line per kind of check. 18 s in `make test`; `make soak SOAK_SECONDS=N` runs it longer
# (VGPU_SOAK_SECONDS), and prints the whole table (VGPU_TEST_VERBOSE=1).
source "$(dirname "$0")/lib.sh"

seconds=${VGPU_SOAK_SECONDS:-18}
# Contexts of 64 MiB, so that 4 processes' contexts fit in the smallest limit (512 MiB) with room
# to allocate.
sed 's/"context_overhead": [0-9]*/"context_overhead": 67108864/' \
  "$VGPU_SRC/tests/fakegpu/scenarios/h100.json" > "$T_DIR/soak-gpu.json"
export VGPU_FAKE_SCENARIO=$T_DIR/soak-gpu.json
rm -f "$VGPU_FAKE_STATE"

# The second user needs its own copies of the programs where it can read them, its own state
# directory and simulated-GPU state (the fake GPU has no shared two-user mode), and a way into
# this directory (for the board the workers report to).
other=()
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
  chmod 711 "$T_DIR"
  bin=$T_DIR/bin nb=$T_DIR/nobody
  mkdir -m 0755 "$bin"; mkdir -m 0700 "$nb"; chown nobody "$nb"
  cp "$VGPU_BUILD/vgpu" "$VGPU_BUILD/libvgpu.so" "$VGPU_BUILD/tests/soak/soak_worker" \
     "$VGPU_BUILD/fakegpu/libcuda.so.1" "$VGPU_BUILD/fakegpu/libnvidia-ml.so.1" "$bin/"
  cp "$VGPU_FAKE_SCENARIO" "$bin/scenario.json"; chmod -R a+rX "$bin"
  other=(--user nobody --user-bin "$bin" --user-dir "$nb")
fi
pidns=1 nopidns=()
unshare --pid --fork --mount-proc true 2>/dev/null || { pidns=0; nopidns=(--no-pidns); }

mkdir -m 0755 "$T_DIR/soak"
"$VGPU_BUILD/tests/soak/soak" --dir "$T_DIR/soak" --vgpu "$VGPU_BUILD/vgpu" \
  --worker "$VGPU_BUILD/tests/soak/soak_worker" --seconds "$seconds" ${VGPU_SOAK_SEED:+--seed "$VGPU_SOAK_SEED"} ${VGPU_SOAK_ARGS:-} \
  "${other[@]}" "${nopidns[@]}" >"$T_DIR/soak.out" 2>&1
rc=$?
report=$(cat "$T_DIR/soak.out")
[ "${VGPU_TEST_VERBOSE:-0}" = 1 ] && printf '%s\n' "$report" | sed 's/^/# /'

row() { printf '%s\n' "$report" | sed -n "s/^  $1 *\([0-9][0-9]*\).*/\1/p" | head -n 1; }
violations() { printf '%s\n' "$report" | sed -n "s/^  violation $1 *\([0-9][0-9]*\)$/\1/p"; }
detail() { { printf '%s\n' "$report" | grep -E "violation $1:"; grep -E 'soak|error' "$T_DIR/soak/soak.log" 2>/dev/null | head -n 10; } | head -n 30; }

if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
  not_ok "the soak ran" "exit status $rc: $report"$'\n'"$(tail -n 20 "$T_DIR/soak/soak.log" 2>/dev/null)"
  echo "1..$T_N"; exit 0
fi
ok "the soak ran ($seconds s)"
if [ ${#other[@]} -gt 0 ]; then
  assert_contains "... with jobs of two users on one GPU" "2 users x 4 jobs x 4 processes" "$report"
else
  skip "... with jobs of two users on one GPU" "not root, or no user 'nobody' or no setpriv"
fi

# Something happened: operations, kills (some inside allocation calls), starts, limit changes.
ops=$(row operations) kills=$(row kills) starts=$(row starts) changes=$(row 'limit changes') checks=$(row checks)
in_alloc=$(printf '%s\n' "$report" | sed -n 's/.*SIGKILL; \([0-9]*\) inside an allocation call.*/\1/p')
ns_starts=$(printf '%s\n' "$report" | sed -n 's/.*(\([0-9]*\) in a new PID namespace).*/\1/p')
if [ "${ops:-0}" -ge 1000 ] && [ "${kills:-0}" -ge $((seconds * 3)) ] && [ "${starts:-0}" -ge 32 ] && \
   [ "${changes:-0}" -ge $((seconds / 2)) ] && [ "${checks:-0}" -ge 1000 ]; then
  ok "chaos: $ops operations, $kills kills, $starts starts, $changes limit changes, $checks checks"
else
  not_ok "chaos: enough operations (1000), kills ($((seconds * 3))), starts (32), limit changes ($((seconds / 2))) and checks (1000)" \
    "$(printf '%s\n' "$report" | grep -E '^  [a-z]')"
fi
if [ "${in_alloc:-0}" -ge 1 ]; then ok "... some kills inside an allocation call ($in_alloc)"
else not_ok "... some kills inside an allocation call" "$report"; fi
if [ $pidns = 0 ]; then
  skip "... some processes in a new PID namespace" "unshare --pid --fork --mount-proc is not allowed here"
elif [ "${ns_starts:-0}" -ge 1 ]; then ok "... some processes in a new PID namespace ($ns_starts)"
else not_ok "... some processes in a new PID namespace" "$report"; fi

check_kind() { # kind description
  local n; n=$(violations "$1")
  if [ "$n" = 0 ]; then ok "$2"; else not_ok "$2" "${n:-no count} violations: $(detail "$1")"; fi
}
check_kind over_limit "no job's accounted usage passed its limit (beyond the allowed overrun after a lowered limit)"
reclaim_s=1; asan_small && reclaim_s=2   # tests/soak/check.c: the instrumented reclaimers' bound
check_kind reclaim_late "a dead process's usage was reclaimed within $reclaim_s s (one alone in its PID namespace: over-counted until proven dead, libvgpu(7))"
check_kind stall "no live process went a second without progress"
check_kind live_dropped "no live process's usage was dropped (processes in PID namespaces included)"
check_kind share "saturating capped jobs held their caps within 5 points over 10 s windows"
check_kind leftover "nothing was left after the last job ended (job files, promises, schedule)"
check_kind worker_failed "no worker or job failed"
check_kind tool_failed "vgpu limit and vgpu ps never failed"
windows=$(printf '%s\n' "$report" | sed -n 's/^  share soak-u[0-9]-steady *\([0-9]*\) windows.*/\1/p' | paste -sd+ | bc)
if [ "${windows:-0}" -ge 1 ]; then ok "... the steady jobs' shares were checked ($windows windows)"
else not_ok "... the steady jobs' shares were checked" "$report"; fi
assert_eq "the soak exits 0 when nothing was violated, 1 otherwise" \
  "$([ "$(printf '%s\n' "$report" | sed -n 's/^total violations //p')" = 0 ] && echo 0 || echo 1)" "$rc"

done_testing
