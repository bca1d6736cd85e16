# libvgpu.so and vgpu run where users are (issue 19): neither needs anything newer than
# GLIBC_2.17, the floor the Makefile, the README and vgpu(1) state, and the old-version bindings
# still work on this glibc. Every hook_*.sh test preloads this same build/libvgpu.so, so they
# show that it resolves and limits here; hook_alloc.sh is the one that checks limits path by path.
#
# By hand, on a real old glibc (Debian 11's 2.31: `apt-get download libc6=2.31-...` with a
# bullseye source list, then `dpkg-deb -x`), R=ROOT/lib/x86_64-linux-gnu:
#   $R/ld-linux-x86-64.so.2 --library-path $R build/vgpu --version
#   $R/ld-linux-x86-64.so.2 --library-path $R --preload build/libvgpu.so build/tests/progs/glibc_start
. "$(dirname "$0")/lib.sh"
needs() { bash "$VGPU_SRC/packaging/glibc-needs.sh" "$@"; }
newer_than() { # FLOOR FILE: the "VERSION SYMBOL" lines above FLOOR
  needs --list "$2" | while read -r v s; do
    [ "$(printf '%s\n%s\n' "$v" "$1" | sort -V | tail -n 1)" != "$1" ] && echo "$s@GLIBC_$v"
  done
}
floor=$(make --no-print-directory -s -C "$VGPU_SRC" -pn BUILD="$VGPU_BUILD" 2>/dev/null |
  sed -n 's/^LIBVGPU_GLIBC_FLOOR := //p' | head -n 1)
vfloor=$(make --no-print-directory -s -C "$VGPU_SRC" -pn BUILD="$VGPU_BUILD" 2>/dev/null |
  sed -n 's/^VGPU_GLIBC_FLOOR := //p' | head -n 1)
assert_eq "the Makefile's floor for libvgpu.so is 2.17 (issue 19)" "2.17" "$floor"
assert_eq "the Makefile's floor for vgpu is 2.17" "2.17" "$vfloor"

lib=$VGPU_BUILD/libvgpu.so
assert_eq "libvgpu.so needs no glibc symbol newer than $floor" "" "$(newer_than "$floor" "$lib")"
assert_eq "vgpu needs no glibc symbol newer than $vfloor" "" "$(newer_than "$vfloor" "$VGPU_BUILD/vgpu")"
assert_match "glibc-needs.sh reads the versions (libvgpu.so binds dlopen to GLIBC_2.2.5)" \
  '^2\.2\.5 dlopen$' "$(needs --list "$lib")"
# The check itself must be able to fail: on glibc >= 2.34 a program linked the ordinary way, as
# the test programs are, needs __libc_start_main@GLIBC_2.34.
host=$(getconf GNU_LIBC_VERSION | awk '{ print $2 }')
if [ "$(printf '%s\n%s\n' "$host" 2.34 | sort -V | head -n 1)" = 2.34 ]; then
  assert_contains "the check flags an ordinary program built here (alloc_probe)" "__libc_start_main@GLIBC_2.34" \
    "$(newer_than "$floor" "$VGPU_BUILD/tests/progs/alloc_probe")"
else
  skip "the check flags an ordinary program built here" "this glibc ($host) is older than 2.34"
fi

# Before 2.34, dlopen and pthread_create live in libdl.so.2 and libpthread.so.0: both files must
# name them, or an old loader finds no definition for the old versions.
for f in "$lib" "$VGPU_BUILD/vgpu"; do
  d=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  assert_contains "$(basename "$f") names libdl.so.2 (where old glibc keeps dl*)" "libdl.so.2" "$d"
  assert_contains "$(basename "$f") names libpthread.so.0 (where old glibc keeps pthread_*)" "libpthread.so.0" "$d"
done

# The same numbers in the docs, and printed by make.
assert_contains "the README states the glibc floor" "glibc $floor" "$(cat "$VGPU_SRC/README.md")"
assert_contains "vgpu(1) states the glibc floor" "glibc $floor" "$(cat "$VGPU_SRC/man/vgpu.1")"
run bash "$VGPU_SRC/packaging/glibc-needs.sh" --max "$floor" "$lib"
assert_match "the line make prints after linking libvgpu.so" "libvgpu\.so needs glibc >= 2\.[0-9.]+ \(floor $floor\)$" "$out"

# It still loads and works here: a program linked like vgpu (old-version bindings, lib/compat's
# start glue) runs its constructors, threads, dlopen, stat and destructors, with libvgpu.so
# preloaded; and vgpu itself runs.
prog=$VGPU_BUILD/tests/progs/glibc_start
assert_eq "the test program needs glibc <= $floor too" "" "$(newer_than "$floor" "$prog")"
run env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$prog" arg1
assert_rc "main's status is the exit status (7)" 7
assert_eq "constructors, threads, dl*, stat, atexit and destructors work under the preload" \
  "constructor argc=2 main argc=2 arg=arg1|thread rc=0 ok=1|dlsym getpid=found|stat=1 fstat=1|atexit|destructor" \
  "$(printf '%s\n' "$out" | paste -sd '|')"
run vgpu --version
assert_match "vgpu runs (its start glue calls the old __libc_start_main)" "^vgpu [0-9]+\.[0-9]+" "$out"
run vgpu run --mem 1G -- alloc_probe alloc 512M alloc 1
assert_match "a limited job through this libvgpu.so: up to the limit, then OUT_OF_MEMORY" \
  "alloc rc=0 size=536870912.alloc rc=2 size=1" "$(printf '%s\n' "$out" | paste -sd ' ')"
done_testing
