# The man pages as a reader sees them: every page renders without a groff warning, no page
# hides text behind a stray \" (a groff comment, even inside a macro's quoted argument), and
# key sentences come out whole (issue 13: vgpu-top(1) stopped at "null for N/A, and",
# vgpu-json(7) read "The contract, which  at the top", vgpu-ps(1) showed "jobs : [...]").
. "$(dirname "$0")/lib.sh"

# groff is C++ and not ours: under make asan the sanitizer runtimes preloaded into every test
# process report groff's own new/delete mismatch, so it runs without them.
groff() { env -u LD_PRELOAD groff "$@"; }
man() { env -u LD_PRELOAD man "$@"; }
if type -P groff >/dev/null; then
  render() { groff -man -Tutf8 -P-cbou -rLL=2000n -rHY=0 "$1" 2>/dev/null | sed 's/\xe2\x80\x90/-/g; s/\xe2\x88\x92/-/g'; }
elif type -P man >/dev/null; then
  render() { MANWIDTH=2000 man -l "$1" 2>/dev/null | col -b; }
else
  skip "man page rendering" "neither groff nor man is installed"; done_testing; exit 0
fi

for page in "$VGPU_SRC"/man/*.[0-9]; do
  name=$(basename "$page")
  # A comment is a line that starts with .\" (or '\"); anywhere else \" swallows the rest of the line.
  bad=$(grep -n '\\"' "$page" | grep -vE "^[0-9]+:[.']\\\\\"")
  [ -z "$bad" ] && ok "$name: no \\\" outside a comment line" || not_ok "$name: no \\\" outside a comment line" "$bad"
  if type -P groff >/dev/null; then
    warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
    [ -z "$warn" ] && ok "$name: groff renders it without a warning" || not_ok "$name: groff renders it without a warning" "$warn"
  fi
  text=$(render "$page")
  assert_contains "$name: has its NAME section" "NAME" "$text"
done

sentence() { # page text
  local text; text=$(render "$VGPU_SRC/man/$1")
  assert_contains "$1 reads: $2" "$2" "$text"
}
sentence vgpu-top.1 'numbers with the unit in the key, null for N/A, and "schema": 1.'
sentence vgpu-json.7 'The contract, named by "schema": 1 at the top of every document:'
sentence vgpu-ps.1 '{"schema": 1, "jobs": [...]}'
sentence vgpu.1 'Leading zeros are decimal, never octal: 010G is 10 GiB.'
sentence vgpu.1 'must be at least 1048576 (1 MiB)'
sentence vgpu-run.1 'A number without a unit is bytes and must be at least 1048576 (1 MiB)'

# vgpu-top(1)'s EXAMPLES: the --json example into a pipe streams (issue 36 L18: `vgpu top --json -d 5
# | jq` printed one line and exited, as top does into a pipe without -n). Its vgpu top part runs
# here as written, with -d made short, into a pipe.
ex=$(render "$VGPU_SRC/man/vgpu-top.1" | sed -n '/^EXAMPLES/,/^SEE ALSO/p' | grep -m1 'vgpu top --json.*|')
ex=${ex#"${ex%%[! ]*}"}
if [ -z "$ex" ]; then not_ok "vgpu-top(1) EXAMPLES has a vgpu top --json example into a pipe"
else
  read -ra words <<<"${ex%%|*}"
  for i in "${!words[@]}"; do
    case ${words[$i]} in -d|--delay) words[$((i + 1))]=0.1 ;; esac
  done
  lines=$("${words[@]}" 2>/dev/null | cat)
  n=$(grep -c '^{"schema":1,' <<<"$lines")
  [ "$n" -gt 1 ] && ok "vgpu-top(1)'s example '${ex%%|*}| ...' streams into a pipe ($n JSON lines at -d 0.1)" \
    || not_ok "vgpu-top(1)'s example '${ex%%|*}| ...' streams into a pipe" "$n JSON lines at -d 0.1: ${lines:0:300}"
  if type -P jq >/dev/null; then
    filt=${ex#*| jq -c }; filt=${filt#\'}; filt=${filt%\'*}
    jq -c "$filt" <<<"$lines" >/dev/null 2>&1 && ok "... and its jq filter reads those lines" \
      || not_ok "... and its jq filter reads those lines" "filter: $filt"
  fi
fi

# vgpu(1)'s EXIT STATUS names every status of lib/include/vgpu/exitcode.h (124 was left out).
status_text=$(render "$VGPU_SRC/man/vgpu.1" | sed -n '/^EXIT STATUS/,/^ENVIRONMENT/p')
for code in $(sed -n 's/^ *VGPU_EXIT_[A-Z_]* *= *\([0-9]*\),.*/\1/p' "$VGPU_SRC/lib/include/vgpu/exitcode.h"); do
  printf '%s\n' "$status_text" | grep -qE "(^|[^0-9])$code([^0-9]|$)" && ok "vgpu(1) EXIT STATUS names $code" \
    || not_ok "vgpu(1) EXIT STATUS names $code"
done
done_testing
