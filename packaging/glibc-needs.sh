#!/usr/bin/env bash
# Which glibc an ELF file needs: the newest GLIBC_x.y among the versions it requires
# (objdump -T lists each undefined symbol with the version it is bound to).
#   packaging/glibc-needs.sh FILE               prints e.g. "2.17"
#   packaging/glibc-needs.sh --list FILE        prints "VERSION SYMBOL" for every versioned symbol
#   packaging/glibc-needs.sh --max FLOOR FILE   prints "FILE needs glibc >= X (floor FLOOR)", and
#                                               the symbols above FLOOR with a warning if any
# Used by the Makefile after each link and by tests/cli/glibc.sh. Exit status 2 on bad use.
set -u
mode=need floor=
case "${1:-}" in
  --list) mode=list; shift ;;
  --max) mode=max; floor=${2:-}; shift 2 || true ;;
esac
file=${1:-}
if [ -z "$file" ] || [ ! -f "$file" ] || { [ "$mode" = max ] && [ -z "$floor" ]; }; then
  echo "usage: packaging/glibc-needs.sh [--list | --max FLOOR] FILE (an ELF file that exists)" >&2
  exit 2
fi
syms=$(objdump -T "$file" 2>/dev/null) || { echo "glibc-needs: objdump -T $file failed (is it an ELF file?)" >&2; exit 2; }

# "VERSION SYMBOL" for each GLIBC_x.y reference (an *UND* symbol: what the file needs, not what it
# defines); the version column may be "(GLIBC_2.2.5)".
list=$(printf '%s\n' "$syms" | awk '/\*UND\*/ { for (i = 1; i < NF; i++) if ($i ~ /^\(?GLIBC_[0-9.]+\)?$/) { v = $i; gsub(/[()]|GLIBC_/, "", v); print v, $NF } }' | sort -u -V)
newest=$(printf '%s\n' "$list" | awk 'NF { print $1 }' | sort -V | tail -n 1)

case $mode in
  list) printf '%s\n' "$list" ;;
  need) echo "${newest:-none}" ;;
  max)
    echo "$file needs glibc >= ${newest:-any} (floor $floor)"
    above=$(printf '%s\n' "$list" | awk -v f="$floor" 'NF { print }' | while read -r v s; do
      [ "$(printf '%s\n%s\n' "$v" "$floor" | sort -V | tail -n 1)" != "$floor" ] && echo "  $s@GLIBC_$v"; done)
    if [ -n "$above" ]; then
      echo "WARNING: $file needs symbols newer than glibc $floor; bind them in lib/include/vgpu/glibc_compat.h:"
      printf '%s\n' "$above"
    fi ;;
esac
exit 0
