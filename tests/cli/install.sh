# make install with PREFIX and DESTDIR: every piece lands where bash-completion, zsh and man look,
# the vgpu-CMD links work, and the installed vgpu preloads the installed libvgpu.so.
. "$(dirname "$0")/lib.sh"
root=$T_DIR/root
run make --no-print-directory -s -C "$VGPU_SRC" BUILD="$VGPU_BUILD" DESTDIR="$root" PREFIX=/opt/vgpu install
assert_rc "make install DESTDIR=... PREFIX=/opt/vgpu exits 0" 0
p=$root/opt/vgpu
check "bin/vgpu is executable" test -x "$p/bin/vgpu"
check "libvgpu.so is in lib/vgpu" test -f "$p/lib/vgpu/libvgpu.so"
check "vgpu(1) is installed" test -f "$p/share/man/man1/vgpu.1"
check "vgpu-json(7) is installed" test -f "$p/share/man/man7/vgpu-json.7"
check "the bash completion is installed" test -f "$p/share/bash-completion/completions/vgpu"
check "the zsh completion is installed" test -f "$p/share/zsh/vendor-completions/_vgpu"
check "the tmpfiles.d entry for /run/vgpu-machine is installed" grep -qx "d /run/vgpu-machine 0755 root root -" "$p/lib/tmpfiles.d/vgpu.conf"
check "... and one for the arbiter's directory, root's 0755" grep -qx "d /run/vgpu-machine/arbiter 0755 root root -" "$p/lib/tmpfiles.d/vgpu.conf"
check "the arbiter's systemd unit runs the installed vgpu" grep -qx "ExecStart=/opt/vgpu/bin/vgpu daemon" "$p/lib/systemd/system/vgpu-daemon.service"
for c in $(vgpu completion --complete 1 vgpu | grep -vx help); do
  name=$(vgpu "$c" --help 2>/dev/null | sed -n '1s/^usage: vgpu \([a-z-]*\).*/\1/p')
  [ "$name" = "$c" ] || continue   # aliases have no page or link of their own
  [ -L "$p/bin/vgpu-$c" ] && { [ -f "$p/share/man/man1/vgpu-$c.1" ] || [ -f "$p/share/man/man8/vgpu-$c.8" ]; } &&
    ok "vgpu-$c: link and man page" \
    || not_ok "vgpu-$c: link and man page"
done
# bash-completion loads a completion by the command's name, the first time it is completed: a
# vgpu-CMD link gets one in a fresh shell, before vgpu was ever completed.
bc=/usr/share/bash-completion/bash_completion
if [ -r "$bc" ]; then
  for c in run top; do
    check "vgpu-$c has its bash completion file (a link to vgpu's)" test -L "$p/share/bash-completion/completions/vgpu-$c"
    run env -u LD_PRELOAD XDG_DATA_DIRS="$p/share" PATH="$p/bin:$PATH" bash --norc -c \
      ". $bc; __load_completion vgpu-$c; complete -p vgpu-$c"
    assert_contains "a fresh bash loads vgpu-$c's completion by its own name" "-F _vgpu" "$out"
  done
else
  skip "bash-completion loads vgpu-CMD's completion" "bash-completion is not installed"
fi
run "$p/bin/vgpu-list" --json
assert_rc "the installed vgpu-list link runs list" 0
run "$p/bin/vgpu" run sh -c 'echo "${LD_PRELOAD%% *}"'
assert_eq "the installed vgpu preloads the installed libvgpu.so" "$p/lib/vgpu/libvgpu.so" "$out"
run make --no-print-directory -s -C "$VGPU_SRC" BUILD="$VGPU_BUILD" DESTDIR="$root" PREFIX=/opt/vgpu uninstall
assert_rc "make uninstall exits 0" 0
left=$(find "$root" -type f -o -type l)
assert_eq "make uninstall leaves no file behind" "" "$left"
done_testing
