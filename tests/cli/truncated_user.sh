# truncated_launch.sh for a job of vgpu run --user (root only): its region is two files, root's
# limits page (.region) and the user's usage (.usage), mapped apart; either one truncated while
# the job only launches kernels under --core must not kill it, nor free it from its GPU time limit.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the job runs as nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"

user_dirs
io=$(mktemp -d /tmp/vgpu-user-io.XXXXXX); chmod 1777 "$io"   # the job's output
trap 'rm -rf "$io"; t_cleanup' EXIT
cd "$T_DIR" || exit 1

for which in region usage; do
  f=$io/$which
  vgpu run --user nobody --core 30 -- sh -c 'echo "region=$VGPU_REGION"; exec bus_probe init launchuntil "$0.go" launch 2000 2000' "$f" \
    >"$f" 2>"$f.err" &
  p=$!
  wait_until 20 grep -q launching "$f"
  reg=$(sed -n 's/^region=//p' "$f")
  [ $which = usage ] && reg=${reg%.region}.usage
  truncate -s 0 "$reg"; touch "$f.go"
  wait $p; rc=$?
  out=$(cat "$f") err=$(cat "$f.err")
  assert_rc "--user nobody --core 30, its .$which truncated while it launches: it lives on, exit 0" 0
  share=$(sed -n 's/^launch rc=0 .*share=\([0-9.]*\)$/\1/p' <<<"$out")
  if [ -n "$share" ] && awk -v s="$share" 'BEGIN { exit !(s >= 0.12 && s <= 0.45) }'; then
    ok "--user nobody --core 30, .$which truncated: still limited afterwards (share $share)"
  else
    not_ok "--user nobody --core 30, .$which truncated: still limited afterwards" "share '$share', want 0.12..0.45; out: $out; err: ${err:0:600}"
  fi
  assert_eq "--user nobody --core 30, .$which truncated: the damage is said once" 1 \
    "$(grep -c 'the job region is damaged' <<<"$err")"
  assert_contains "... naming the file" "$(basename "$reg")" "$err"
done

# Root's tools against a job of another user that damages its own usage file over and over
# (issue 25 item 5): root reads it by pread into a copy of its own, never by mapping it, so
# nothing nobody does to its file can kill root's vgpu ps, top, metrics or list with SIGBUS.
# Each round runs every reader once; before the fix about 1 in 20 died.
vgpu run --user nobody -- sh -c 'exec bus_probe flap "${VGPU_REGION%.region}.usage" "$0"' "$io/flap.stop" \
  >"$io/flap" 2>&1 &
flapper=$!
wait_until 20 grep -q flapping "$io/flap"
died=""
for i in $(seq 1 120); do
  for c in "ps" "ps --json" "top --once" "top --json --once" "metrics" "list --json"; do
    vgpu $c >/dev/null 2>"$T_DIR/reader.err"; s=$?
    [ $s -ge 128 ] && died="$died $c:$s"
  done
done
touch "$io/flap.stop"; wait $flapper
assert_eq "120 rounds of root's ps, top, metrics and list beside nobody's flapping usage file: none killed by a signal" \
  "" "$died"
assert_contains "... while the job kept damaging its file all along" "flap rounds=" "$(cat "$io/flap")"

done_testing
