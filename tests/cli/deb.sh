# make deb (issue 19): a Debian package built by dpkg-buildpackage and debhelper that holds what
# `make install PREFIX=/usr` installs (man pages compressed, plus the Debian docs), lintian clean,
# needs glibc 2.17 even with Debian's hardening flags, and works: unpacked, its vgpu lists the
# simulated GPU and runs a limited job through its own libvgpu.so. In CI (CI=true, as root, with
# no vgpu package installed) it is also installed with dpkg -i, used, and purged without a trace.
. "$(dirname "$0")/lib.sh"
# The package is built without sanitizers, from the same sources: the plain suite checks it.
[ -n "${VGPU_TEST_PRELOAD:-}" ] && skip_all "under the sanitizers (make asan): the package is an unsanitized build, checked by make test"
if ! command -v dh >/dev/null || ! command -v dpkg-buildpackage >/dev/null; then
  run make --no-print-directory -s -C "$VGPU_SRC" BUILD="$T_DIR/b" deb
  [ "$rc" != 0 ] && case $err in *"apt-get install debhelper"*) skip_all "debhelper is not installed (sudo make deps); make deb says so" ;; esac
  not_ok "make deb without debhelper says what to install" "rc=$rc; $err"; done_testing; exit 0
fi
version=$(sed -n 's/^VERSION *:= *//p' "$VGPU_SRC/Makefile")
arch=$(dpkg --print-architecture)
run make --no-print-directory -s -C "$VGPU_SRC" BUILD="$T_DIR/b" deb
assert_rc "make deb exits 0" 0
deb=$T_DIR/b/deb/vgpu_${version}_$arch.deb
check "make deb wrote build/deb/vgpu_${version}_$arch.deb" test -f "$deb"

# The file list: exactly what make install puts under /usr, man pages gzipped, plus the
# changelog, copyright and lintian overrides of the Debian package.
run make --no-print-directory -s -C "$VGPU_SRC" BUILD="$VGPU_BUILD" DESTDIR="$T_DIR/inst" PREFIX=/usr install
assert_rc "make install DESTDIR=... PREFIX=/usr exits 0" 0
want=$( (cd "$T_DIR/inst" && find . -type f -o -type l) | sed -E 's|^(\./usr/share/man/.*)$|\1.gz|';
        printf '%s\n' ./usr/share/doc/vgpu/changelog.gz ./usr/share/doc/vgpu/copyright ./usr/share/lintian/overrides/vgpu)
have=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }')
assert_eq "the package holds what make install installs (dpkg-deb -c)" "$(printf '%s\n' "$want" | sort)" \
  "$(printf '%s\n' "$have" | sort)"
list=$(dpkg-deb -c "$deb")
assert_match "vgpu is executable" '^-rwxr-xr-x root/root .* \./usr/bin/vgpu$' "$list"
assert_match "libvgpu.so is in /usr/lib/vgpu" '^-rw-r--r-- root/root .* \./usr/lib/vgpu/libvgpu\.so$' "$list"
assert_match "vgpu-run is a link to vgpu" '^lrwxrwxrwx root/root .* \./usr/bin/vgpu-run -> vgpu$' "$list"
assert_match "the tmpfiles.d entry is in /usr/lib/tmpfiles.d" '\./usr/lib/tmpfiles\.d/vgpu\.conf$' "$list"
assert_match "the zsh and bash completions" 'vendor-completions/_vgpu$' "$list"
assert_match "the arbiter's systemd unit" '\./usr/lib/systemd/system/vgpu-daemon\.service$' "$list"
assert_match "... and its man page, in section 8" '\./usr/share/man/man8/vgpu-daemon\.8(\.gz)?$' "$list"
assert_eq "Depends: glibc 2.17, what the binaries need" "libc6 (>= 2.17)" "$(dpkg-deb -f "$deb" Depends)"
assert_eq "Version is the Makefile's" "$version" "$(dpkg-deb -f "$deb" Version)"

root=$T_DIR/root
dpkg-deb -x "$deb" "$root"
assert_eq "the tmpfiles.d entry makes /run/vgpu-machine sticky and world-writable, userjobs/ and arbiter/ root's 0755" \
  "d /run/vgpu-machine 0755 root root -|d /run/vgpu-machine/userjobs 0755 root root -|d /run/vgpu-machine/arbiter 0755 root root -" \
  "$(grep -v '^#' "$root/usr/lib/tmpfiles.d/vgpu.conf" | paste -sd '|')"
for f in usr/bin/vgpu usr/lib/vgpu/libvgpu.so; do
  # The package is built with dpkg-buildflags' hardening (fortify): still nothing above 2.17.
  assert_eq "$f in the package needs nothing newer than glibc 2.17" "" \
    "$(bash "$VGPU_SRC/packaging/glibc-needs.sh" --list "$root/$f" |
       while read -r v s; do [ "$(printf '%s\n2.17\n' "$v" | sort -V | tail -n 1)" != 2.17 ] && echo "$s@GLIBC_$v"; done)"
done
if command -v lintian >/dev/null; then
  run lintian "$T_DIR/b/deb/vgpu_${version}_$arch.changes"
  assert_eq "lintian: no error or warning (debian/vgpu.lintian-overrides explains the rest)" "" \
    "$(printf '%s\n' "$out" | grep -E '^[EW]: ')"
else
  skip "lintian" "lintian is not installed (sudo make deps)"
fi

# Unpacked, it works: its vgpu reads the simulated GPU and preloads its own library.
run "$root/usr/bin/vgpu" --version
assert_eq "the packaged vgpu runs" "vgpu $version" "$out"
run "$root/usr/bin/vgpu" list --json
assert_rc "the packaged vgpu lists the simulated GPU" 0
assert_contains "... its UUID" "GPU-" "$out"
run "$root/usr/bin/vgpu" run sh -c 'echo "${LD_PRELOAD%% *}"'
assert_eq "the packaged vgpu preloads the packaged libvgpu.so" "$root/usr/lib/vgpu/libvgpu.so" "$out"
run "$root/usr/bin/vgpu" run --mem 1G -- alloc_probe alloc 512M alloc 1
assert_eq "a limited job through the packaged library: up to the limit, then OUT_OF_MEMORY" \
  "alloc rc=0 size=536870912|alloc rc=2 size=1" "$(printf '%s\n' "$out" | grep '^alloc ' | paste -sd '|')"

# Installed for real, in CI only: it changes the machine.
if [ "${CI:-}" != true ] || [ "$(id -u)" != 0 ]; then
  skip "dpkg -i, use, dpkg --purge" "installs into the system only in CI (CI=true, as root)"
elif dpkg-query -W -f='${Status}' vgpu 2>/dev/null | grep -q 'installed'; then
  skip "dpkg -i, use, dpkg --purge" "a vgpu package is installed already; it is left alone"
else
  run dpkg -i "$deb"
  assert_rc "dpkg -i installs it" 0
  run /usr/bin/vgpu --version
  assert_eq "installed: vgpu --version" "vgpu $version" "$out"
  run /usr/bin/vgpu list --json
  assert_contains "installed: vgpu list on the simulated GPU" "GPU-" "$out"
  run /usr/bin/vgpu run --mem 1G -- alloc_probe alloc 512M alloc 1
  assert_eq "installed: a limited job through /usr/lib/vgpu/libvgpu.so" \
    "alloc rc=0 size=536870912|alloc rc=2 size=1" "$(printf '%s\n' "$out" | grep '^alloc ' | paste -sd '|')"
  run dpkg --purge vgpu
  assert_rc "dpkg --purge removes it" 0
  left=$(printf '%s\n' "$have" | sed 's|^\.||' | while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done)
  assert_eq "nothing of the package is left behind" "" "$left"
  check "its directory /usr/lib/vgpu is gone" test ! -e /usr/lib/vgpu
  check "dpkg no longer knows it" sh -c '! dpkg-query -W -f="\${Status}" vgpu 2>/dev/null | grep -q installed'
fi
done_testing
