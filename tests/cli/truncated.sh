# A job region truncated while the job runs (issue 12 item 3) crashes nothing: not vgpu run (it
# died by SIGBUS, exit 135, although its command exited 0), not a process of the job under the
# library that allocates afterwards, not vgpu top --json or vgpu ps. The job's processes keep
# the limits they last saw and say so once.
. "$(dirname "$0")/lib.sh"

# vgpu run whose command truncates its own region, then exits 0 / 3.
for size in 0 100; do
  run vgpu run --mem 1G -- sh -c "truncate -s $size \"\$VGPU_REGION\"; exit 0"
  assert_rc "truncate -s $size under vgpu run: the command's status 0, no SIGBUS" 0
  assert_contains "truncate -s $size: vgpu run says the record is lost" "was truncated to $size bytes" "$err"
done
run vgpu run --mem 1G -- sh -c 'truncate -s 0 "$VGPU_REGION"; exit 3'
assert_rc "truncated, command exits 3: vgpu run exits 3" 3

# A process of the job allocates after the truncation: 256 MiB passes, 1200 MiB is still refused
# (the 1 GiB limit it last saw holds), and the damage is said once.
for size in 0 100; do
  # Truncated once the first allocation is in (alloc_probe then sleeps 600 ms before the next).
  run vgpu run --mem 1G -- sh -c "alloc_probe alloc 128M sleep 600 alloc 256M alloc 1200M meminfo >\"\$0\" & p=\$!
    wait_until 5 grep -q 'alloc rc=0 size=134217728' \"\$0\"; truncate -s $size \"\$VGPU_REGION\"; wait \$p; cat \"\$0\"" \
    "$T_DIR/probe.$size"
  assert_rc "truncate -s $size under a running process: it lives on, vgpu run exits 0" 0
  assert_contains "truncate -s $size: an allocation afterwards passes" "alloc rc=0 size=268435456" "$out"
  assert_contains "truncate -s $size: the last known limit still refuses 1200 MiB" "alloc rc=2 size=1258291200" "$out"
  assert_eq "truncate -s $size: the damage is said once" 1 "$(grep -c 'the job region is damaged' <<<"$err")"
  assert_contains "truncate -s $size: it says it keeps the limits it last saw" "keeps the limits it last saw (1 GiB" "$err"
done

# vgpu top --json and vgpu ps while a detached job's region is truncated.
id=$(vgpu run -d --mem 1G -- sleep 30)
sup=$(vgpu ps --json | jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .creator_pid')
trap 'kill "$sup" 2>/dev/null; t_cleanup' EXIT
vgpu top --json -d 0.2 -n 10 >"$T_DIR/top.out" 2>"$T_DIR/top.err" &
topp=$!
wait_until 10 grep -q "\"$id\"" "$T_DIR/top.out"   # a refresh showed the job (then truncate)
truncate -s 0 "$VGPU_STATE_DIR/jobs/$id.region"
wait $topp
rc=$?
out=$(cat "$T_DIR/top.out") err=$(cat "$T_DIR/top.err")
assert_rc "vgpu top --json lives through the truncation (exit 0)" 0
assert_eq "vgpu top --json printed every refresh" 10 "$(grep -c '"schema"' <<<"$out")"
assert_contains "vgpu top --json showed the job before the truncation" "\"$id\"" "$(head -n 2 <<<"$out")"
assert_not_contains "and not after it" "\"$id\"" "$(tail -n 2 <<<"$out")"
run vgpu ps --json
assert_rc "vgpu ps on the truncated region: exit 0" 0
assert_eq "vgpu ps lists it among the damaged jobs, not as a job (issue 36 N14)" "0 1" \
  "$(jq -r --arg i "$id" '"\(.jobs | map(select(.id == $i)) | length) \(.damaged_jobs | map(select(.id == $i)) | length)"' <<<"$out")"
assert_contains "and says it is truncated" "truncated" "$(jq -r --arg i "$id" '.damaged_jobs[] | select(.id == $i) | .why' <<<"$out")"
truncate -s 100 "$VGPU_STATE_DIR/jobs/$id.region"
run vgpu ps
assert_rc "vgpu ps on a 100-byte region: exit 0" 0
kill "$sup" 2>/dev/null

# vgpu wait, waiting on a job whose region is truncated meanwhile: status 11 and why, no SIGBUS.
id=$(vgpu run -d --mem 1G -- sleep 30)
sup=$(vgpu ps --json | jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .creator_pid')
vgpu wait --timeout 20 "$id" >"$T_DIR/wait.out" 2>"$T_DIR/wait.err" &
waiter=$!
# Truncated once vgpu wait has the region mapped (it is waiting on it), not after a guessed delay.
wait_until 10 grep -q "$id.region" "/proc/$waiter/maps"
truncate -s 0 "$VGPU_STATE_DIR/jobs/$id.region"
wait "$waiter"; rc=$?
err=$(cat "$T_DIR/wait.err")
assert_rc "vgpu wait on a region truncated while it waits: 11" 11
assert_contains "... saying the status is lost" "its exit status is lost" "$err"
kill "$sup" 2>/dev/null

done_testing
