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

done_testing
