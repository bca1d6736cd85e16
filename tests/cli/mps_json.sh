# vgpu mode/timeslice/mps --json against man/vgpu-json.7, key by key (the checker of json_doc.sh).
. "$(dirname "$0")/lib.sh"
doc=$VGPU_SRC/man/vgpu-json.7

# documented_keys "vgpu list --json" -> "path<TAB>optional?" lines
documented_keys() {
  awk -v want=".SS $1" '
    $0 == want { on = 1; next }
    /^\.S[SH] / { on = 0 }
    on && prev == ".TP" && $1 == ".B" { key = $2; getline desc; opt = (desc ~ /optional/) ? "optional" : "required"; print key "\t" opt }
    { prev = $0 }' "$doc"
}

# output_keys JSON... -> every key path, array indexes written as []
output_keys() {
  jq -r 'paths | map(if type == "number" then "[]" else . end) | join(".") | gsub("\\.\\[\\]"; "[]")' | sort -u
}

check_doc() { # heading json-text
  local heading=$1 json=$2 keys docs k
  if ! jq -e . >/dev/null 2>&1 <<<"$json"; then not_ok "$heading: output is JSON" "${json:0:500}"; return; fi
  docs=$(documented_keys "$heading")
  if [ -z "$docs" ]; then not_ok "$heading is documented in vgpu-json(7)"; return; fi
  keys=$(output_keys <<<"$json" | grep -v '^$')
  local undocumented="" missing=""
  for k in $keys; do
    case $k in *"[]") continue ;; esac  # an array's elements: documented with the array
    awk -F'\t' -v k="$k" '$1 == k { f = 1 } END { exit !f }' <<<"$docs" || undocumented="$undocumented $k"
  done
  while IFS=$'\t' read -r k opt; do
    [ "$opt" = required ] || continue
    grep -qxF -- "$k" <<<"$keys" || missing="$missing $k"
  done <<<"$docs"
  [ -z "$undocumented" ] && ok "$heading: every key is documented" || not_ok "$heading: every key is documented" "undocumented:$undocumented"
  [ -z "$missing" ] && ok "$heading: every documented key is present" || not_ok "$heading: every documented key is present" "missing:$missing"
  assert_eq "$heading: schema is 1" 1 "$(jq -r '.schema' <<<"$json" | head -n 1)"
}

unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
P=$T_DIR/pipe
run vgpu mode get --json;                        check_doc "vgpu mode get --json" "$out"
VGPU_FAKE_ROOT=1 run vgpu mode set prohibited --json; check_doc "vgpu mode set --json" "$out"
run vgpu timeslice get --json;                   check_doc "vgpu timeslice get --json" "$out"
VGPU_FAKE_ROOT=0 run vgpu timeslice set short --json; check_doc "vgpu timeslice set --json" "$out"
run vgpu mps status --pipe-dir "$P" --json;      check_doc "vgpu mps status --json" "$out"
run vgpu mps stop --pipe-dir "$P" --json;        check_doc "vgpu mps stop --json" "$out"
run vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0 --json; check_doc "vgpu mps start --json" "$out"
run vgpu mps set --core 40 --mem 1G --json;      check_doc "vgpu mps set --json" "$out"
CUDA_MPS_PIPE_DIRECTORY=$P LD_PRELOAD=$VGPU_BUILD/fakegpu/libcuda.so.1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20 sleep 20 &
client=$!
for _ in $(seq 50); do run vgpu mps status --json; [ "$(jq '.servers[0].clients | length' <<<"$out")" = 1 ] && break; sleep 0.1; done
check_doc "vgpu mps status --json" "$out"
run vgpu mps stop --json;                        check_doc "vgpu mps stop --json" "$out"
kill $client 2>/dev/null; wait $client 2>/dev/null || true
