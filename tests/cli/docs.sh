# Every command has its man page, its completion entries and a --help text, and the committed
# completion scripts are exactly what the command table generates (so they cannot drift).
. "$(dirname "$0")/lib.sh"

cmds=$(vgpu completion --complete 1 vgpu | grep -vx help)
[ -n "$cmds" ] && ok "the command table lists commands" || not_ok "the command table lists commands"
for c in $cmds; do
  run vgpu "$c" --help
  # Aliases print their command's usage.
  if [ $rc -ne 0 ] || ! grep -q '^usage: vgpu ' <<<"$out"; then
    not_ok "vgpu $c --help prints a usage" "rc=$rc out=${out:0:300} err=${err:0:300}"; continue
  fi
  name=$(sed -n '1s/^usage: vgpu \([a-z-]*\).*/\1/p' <<<"$out")
  [ "$name" != "$c" ] && continue  # an alias: checked under its command
  ok "vgpu $c --help prints a usage"
  # Every line fits 90 columns (issue 36 L1: daemon's was 154, shell's 127). In characters, not bytes.
  wide=$(LC_ALL=C.UTF-8 wc -L <<<"$out")
  if [ "$wide" -le 90 ]; then ok "vgpu $c --help: no line wider than 90 columns"
  else not_ok "vgpu $c --help: no line wider than 90 columns" "$(awk 'length($0) > 90' <<<"$out")"; fi
  # Commands for users are in section 1, the daemon root runs in section 8.
  sec=1; [ -f "$VGPU_SRC/man/vgpu-$c.8" ] && sec=8
  [ -f "$VGPU_SRC/man/vgpu-$c.$sec" ] && ok "man/vgpu-$c.$sec exists" || not_ok "man/vgpu-$c.1 exists"
  grep -q "complete -F _vgpu .*\bvgpu-$c\b" "$VGPU_SRC/completions/vgpu.bash" \
    && ok "bash completion names vgpu-$c" || not_ok "bash completion names vgpu-$c"
  head -n 1 "$VGPU_SRC/completions/_vgpu" | grep -q "\bvgpu-$c\b" \
    && ok "zsh completion names vgpu-$c" || not_ok "zsh completion names vgpu-$c"
  sed 's/\\-/-/g' "$VGPU_SRC/man/vgpu.1" | grep -q "vgpu-$c \?($sec)" \
    && ok "vgpu(1) refers to vgpu-$c($sec)" || not_ok "vgpu(1) refers to vgpu-$c($sec)"
  grep -q "vgpu $c" "$VGPU_SRC/README.md" && ok "README mentions vgpu $c" || not_ok "README mentions vgpu $c"
done

run vgpu help
wide=$(LC_ALL=C.UTF-8 wc -L <<<"$out")
[ "$wide" -le 90 ] && ok "vgpu help: no line wider than 90 columns" || not_ok "vgpu help: no line wider than 90 columns" "$(awk 'length($0) > 90' <<<"$out")"

run vgpu completion bash
assert_eq "completions/vgpu.bash is what 'vgpu completion bash' generates" "$(cat "$VGPU_SRC/completions/vgpu.bash")" "$out"
run vgpu completion zsh
assert_eq "completions/_vgpu is what 'vgpu completion zsh' generates" "$(cat "$VGPU_SRC/completions/_vgpu")" "$out"
done_testing
