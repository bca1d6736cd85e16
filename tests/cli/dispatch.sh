# The multi-call binary: dispatch, help, version, busybox-style links, unknown commands and
# options with suggestions, and the completion candidates.
. "$(dirname "$0")/lib.sh"

run vgpu --version
assert_rc "--version exits 0" 0
assert_match "--version prints the version" '^vgpu [0-9]+\.[0-9]+\.[0-9]+$' "$out"

run vgpu help
assert_rc "help exits 0" 0
assert_contains "help lists list" "list, ls" "$out"
assert_contains "help lists help" "help" "$out"

run vgpu
assert_rc "no command is a usage error" 2
assert_contains "no command prints the commands" "Commands:" "$err"

run vgpu help list
assert_rc "help list exits 0" 0
assert_contains "help list shows the usage" "usage: vgpu list" "$out"
assert_contains "help list points to the man page" "man vgpu-list" "$out"

run vgpu lst
assert_rc "unknown command exits 2" 2
assert_contains "unknown command suggests the closest" "did you mean 'list'" "$err"

run vgpu frobnicate
assert_rc "unrelated command exits 2" 2
assert_contains "unrelated command names itself" "'frobnicate' is not a vgpu command" "$err"

run vgpu help lsit
assert_rc "help of an unknown command exits 2" 2
assert_contains "help of an unknown command suggests" "did you mean 'list'" "$err"

run vgpu list --jsn
assert_rc "unknown option exits 2" 2
assert_contains "unknown option suggests the closest" "did you mean '--json'" "$err"

run vgpu list --gpu
assert_rc "missing option value exits 2" 2
assert_contains "missing option value is named" "'--gpu' needs a value" "$err"

run vgpu list --json=yes
assert_rc "value for a flag exits 2" 2
assert_contains "value for a flag is named" "takes no value" "$err"

run vgpu --versoin
assert_rc "unknown global option exits 2" 2
assert_contains "unknown global option suggests" "did you mean '--version'" "$err"

run vgpu-list --help
assert_rc "vgpu-list link runs list" 0
assert_contains "vgpu-list link shows list's usage" "usage: vgpu list" "$out"

ln -s "$VGPU_BUILD/vgpu" "$T_DIR/vgpu-nosuch"
run "$T_DIR/vgpu-nosuch"
assert_rc "link to an unknown command exits 2" 2
assert_contains "link to an unknown command names it" "'nosuch' is not a vgpu command" "$err"

run vgpu completion --complete 1 vgpu l
assert_contains "completion offers commands" "list" "$out"
run vgpu completion --complete 2 vgpu list --
assert_contains "completion offers options" "--json" "$out"
run vgpu completion --complete 3 vgpu list --gpu ""
assert_match "completion offers GPU indexes (0 on a line of its own)" '^0$' "$out"
assert_contains "completion offers GPU UUIDs" "GPU-" "$out"
run vgpu completion --complete 2 vgpu-list --gpu ""
assert_contains "completion works for vgpu-CMD links" "GPU-" "$out"
run vgpu completion fish
assert_rc "unknown shell exits 2" 2

if command -v bash >/dev/null && [ -f /usr/share/bash-completion/bash_completion ]; then
  res=$(bash -c '. /usr/share/bash-completion/bash_completion; . "$VGPU_SRC/completions/vgpu.bash";
        complete -p vgpu; COMP_WORDS=(vgpu list --j); COMP_CWORD=2; _vgpu; printf "%s\n" "${COMPREPLY[@]}"' 2>&1)
  assert_contains "bash: complete -p shows the vgpu function" "complete -F _vgpu" "$res"
  assert_contains "bash: the function completes --j to --json" "--json" "$res"
  # Through a vgpu-CMD link the script must ask vgpu itself, never run 'vgpu-run completion'.
  res=$(bash -c '. "$VGPU_SRC/completions/vgpu.bash";
        COMP_WORDS=(vgpu-run --me); COMP_CWORD=1; _vgpu; printf "%s\n" "${COMPREPLY[@]}"' 2>&1)
  assert_eq "bash: a vgpu-run link completes --me to --mem" "--mem" "$res"
  res=$(bash -c '. "$VGPU_SRC/completions/vgpu.bash";
        COMP_WORDS=(vgpu-list --gpu ""); COMP_CWORD=2; _vgpu; printf "%s\n" "${COMPREPLY[@]}"' 2>&1)
  assert_contains "bash: a vgpu-list link completes GPU UUIDs" "GPU-" "$res"
else
  skip "bash completion in bash" "bash-completion is not installed"
fi
if command -v zsh >/dev/null; then
  # +X loads the file now (a plain autoload defines a stub even when no file exists).
  res=$(zsh -f -c "fpath=($VGPU_SRC/completions \$fpath); autoload -U +X _vgpu && functions _vgpu" 2>&1)
  assert_contains "zsh: _vgpu loads from completions/_vgpu and asks vgpu" "completion --complete" "$res"
else
  skip "zsh completion" "zsh is not installed"
fi
done_testing
