#!/usr/bin/env bash
# Runs vgpu and a limited job on a real old glibc (by hand; not part of make test, because it
# downloads packages). It fetches Debian 11's libc6 (glibc 2.31, older than the 2.34 that moved
# dl* and pthread_* into libc) and libjson-c5 with apt-get download and a private source list
# (the machine's apt configuration is not touched), builds the simulated GPU and alloc_probe the
# way vgpu is built (glibc_compat.h, lib/compat/start.o), and runs under that glibc's loader:
#   1. vgpu --version
#   2. alloc_probe under `vgpu run --mem 1G`, libvgpu.so preloaded: 512 MiB granted, 1 B more refused
#   packaging/old-glibc-check.sh [BUILD_DIR]     (default build/, after make; Debian/Ubuntu, x86-64)
# Exit status 0 when both work, 1 when one does not, 2 when it could not set up.
set -u
cd "$(dirname "$0")/.." || exit 2
src=$(pwd)
build=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "old-glibc-check: no build directory '${1:-build}'; run make first" >&2; exit 2; }
[ -x "$build/vgpu" ] && [ -f "$build/obj/lib/compat/start.o" ] || { echo "old-glibc-check: run make first" >&2; exit 2; }
suite=${VGPU_OLD_SUITE:-bullseye}
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-oldglibc.XXXXXX")
trap 'rm -rf "$work"' EXIT
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1)
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/root"
echo "deb http://deb.debian.org/debian $suite main" > "$work/sources.list"
apt-get "${apt_opts[@]}" update >/dev/null 2>&1 || { echo "old-glibc-check: apt-get update for $suite failed" >&2; exit 2; }
for p in libc6 libjson-c5; do
  v=$(apt-cache "${apt_opts[@]}" madison "$p" | awk -v s="$suite" '$0 ~ s { print $3; exit }')
  [ -n "$v" ] || { echo "old-glibc-check: no $p in $suite" >&2; exit 2; }
  (cd "$work" && apt-get "${apt_opts[@]}" download "$p=$v" >/dev/null 2>&1) || { echo "old-glibc-check: download of $p=$v failed" >&2; exit 2; }
done
for d in "$work"/*.deb; do dpkg-deb -x "$d" "$work/root"; done
libdir=$work/root/lib/x86_64-linux-gnu
ldso=$libdir/ld-linux-x86-64.so.2
[ -x "$ldso" ] || { echo "old-glibc-check: no loader in the $suite libc6 (x86-64 only)" >&2; exit 2; }
old="$libdir:$work/root/usr/lib/x86_64-linux-gnu:$work/build/fakegpu"
echo "glibc: $("$ldso" --library-path "$libdir" "$libdir/libc.so.6" | head -n 1)"

# The simulated GPU and alloc_probe, built like vgpu so that they run there too.
CFLAGS="-O2 -g -include $src/lib/include/vgpu/glibc_compat.h" make --no-print-directory -s -C "$src" \
  BUILD="$work/build" "$work/build/fakegpu/libcuda.so.1" "$work/build/fakegpu/libnvidia-ml.so.1" >/dev/null ||
  { echo "old-glibc-check: building the simulated GPU failed" >&2; exit 2; }
cc -O2 -std=gnu11 -D_GNU_SOURCE -I"$src/lib/include" -include "$src/lib/include/vgpu/glibc_compat.h" \
  "$src/tests/progs/alloc_probe.c" "$build/obj/lib/compat/start.o" -o "$work/alloc_probe" \
  -L"$work/build/fakegpu" -l:libcuda.so.1 -l:libnvidia-ml.so.1 -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -lm ||
  { echo "old-glibc-check: building alloc_probe failed" >&2; exit 2; }

status=0
if v=$("$ldso" --library-path "$old" "$build/vgpu" --version 2>&1); then echo "ok: vgpu --version: $v"
else echo "FAIL: vgpu --version on $suite's glibc: $v"; status=1; fi
export VGPU_STATE_DIR=$work/state VGPU_FAKE_STATE=$work/fake.state
export VGPU_FAKE_SCENARIO=$src/tests/fakegpu/scenarios/h100.json
mkdir -m 0700 "$VGPU_STATE_DIR"
out=$(LD_LIBRARY_PATH=$build/fakegpu "$build/vgpu" run --mem 1G -- \
        "$ldso" --library-path "$old" "$work/alloc_probe" alloc 512M alloc 1 2>&1)
if [ "$(printf '%s\n' "$out" | grep '^alloc ' | paste -sd '|')" = "alloc rc=0 size=536870912|alloc rc=2 size=1" ]; then
  echo "ok: a job limited to 1 GiB on $suite's glibc got 512 MiB and was refused 1 B more"
else
  echo "FAIL: the limited job on $suite's glibc:"; printf '%s\n' "$out" | sed 's/^/  /'; status=1
fi
exit $status
