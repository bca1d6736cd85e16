#!/usr/bin/env bash
# make bench: runs every bench/*.sh (except this one) with the build directory, in name order.
# Each prints its own table; a benchmark that fails is reported and the others still run.
#   bash bench/run.sh [BUILD_DIR] [FILTER]
set -u
cd "$(dirname "$0")/.." || exit 2
build=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "bench/run.sh: no build directory '${1:-build}'; run make first" >&2; exit 2; }
filter=${2:-}
rc=0
for b in bench/*.sh; do
  [ "$(basename "$b")" = run.sh ] && continue
  [ -n "$filter" ] && [[ $b != *$filter* ]] && continue
  echo "== $(basename "$b" .sh)"
  VGPU_SRC=$PWD VGPU_BUILD=$build bash "$b" || { echo "bench/run.sh: $b failed" >&2; rc=1; }
  echo
done
exit $rc
