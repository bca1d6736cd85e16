# Every command's --json output against man/vgpu-json.7, key by key: each key the output has is
# documented under that command, and each documented key that is not marked optional is there.
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
    grep -q "^$(printf '%s' "$k" | sed 's/[][.]/\\&/g')	" <<<"$docs" || undocumented="$undocumented $k"
  done
  while IFS=$'\t' read -r k opt; do
    [ "$opt" = required ] || continue
    grep -qxF -- "$k" <<<"$keys" || missing="$missing $k"
  done <<<"$docs"
  [ -z "$undocumented" ] && ok "$heading: every key is documented" || not_ok "$heading: every key is documented" "undocumented:$undocumented"
  [ -z "$missing" ] && ok "$heading: every documented key is present" || not_ok "$heading: every documented key is present" "missing:$missing"
  assert_eq "$heading: schema is 1" 1 "$(jq -r '.schema' <<<"$json" | head -n 1)"
}

run vgpu list --json
check_doc "vgpu list --json" "$out"

# Every command that takes --json has a section.
for c in $(vgpu completion --complete 1 vgpu | grep -vx help); do
  if vgpu completion --complete 2 vgpu "$c" -- | grep -qx -- --json; then
    grep -q "^\.SS vgpu $c" "$doc" && ok "vgpu $c --json is documented" || not_ok "vgpu $c --json is documented in vgpu-json(7)"
  fi
done
