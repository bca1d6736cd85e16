# The simulated GPU shared by two users (VGPU_FAKE_SHARED): root and nobody see one machine,
# as they would see one real GPU; the state file is 0666 in a sticky 1777 directory.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  skip_all "two users share the simulated GPU: needs root and setpriv"
fi
# The build directory may not be reachable by nobody: a world-readable copy of what it runs.
bin=$(mktemp -d /tmp/vgpu-shared-bin.XXXXXX); chmod 0755 "$bin"
cp -r "$VGPU_BUILD/fakegpu" "$VGPU_BUILD/tests/progs" "$bin/"
chmod -R a+rX "$bin"
name=test-$$-$RANDOM
# A directory the simulated GPU creates itself (as root, the first user here), to check its mode.
export VGPU_FAKE_SHARED_DIR=$VGPU_FAKE_SHARED_DIR/sub
dir=$VGPU_FAKE_SHARED_DIR
trap 'rm -rf "$bin"; rm -f "$dir/$name.state"; t_cleanup' EXIT
export VGPU_FAKE_SHARED=$name
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/ \
    LD_LIBRARY_PATH="$bin/fakegpu" VGPU_FAKE_SHARED="$name" VGPU_FAKE_SCENARIO="$VGPU_FAKE_SCENARIO" \
    PATH="$bin/fakegpu:$bin/progs:/usr/bin:/bin" "$@"
}
v2used() { printf '%s' "$1" | sed -n 's/.*v2used=\([0-9]*\).*/\1/p'; }

# root holds 1 GiB on GPU 0 (each holder also has a context: CTX bytes in this scenario).
CTX=536870912
exec 3< <(LD_LIBRARY_PATH="$bin/fakegpu" "$bin/fakegpu/fakegpu-ctl" hold 0 1073741824)
read -r -t 10 ready <&3
assert_match "root holds 1 GiB on the shared simulated GPU" '^ready [0-9]+$' "$ready"
root_holder=${ready#ready }
assert_eq "the state is one file, mode 0666" "666" "$(stat -c %a "$dir/$name.state")"
assert_eq "in a sticky directory of mode 1777" "1777" "$(stat -c %a "$dir")"

run as_nobody nvml_probe
assert_rc "nobody's NVML client starts on the shared GPU" 0
assert_eq "nobody sees root's 1 GiB" $((1073741824 + CTX)) "$(v2used "$out")"

# nobody holds 512 MiB; root sees both.
exec 4< <(as_nobody fakegpu-ctl hold 0 536870912)
read -r -t 10 ready4 <&4
assert_match "nobody holds 512 MiB" '^ready [0-9]+$' "$ready4"
run env LD_LIBRARY_PATH="$bin/fakegpu" "$bin/progs/nvml_probe"
assert_eq "root sees both users' memory" $((1073741824 + 536870912 + 2 * CTX)) "$(v2used "$out")"
nobody_holder=${ready4#ready }
kill -KILL "$nobody_holder"
nobody_sees() { [ "$(v2used "$(as_nobody nvml_probe)")" = "$1" ]; }
poll_until 10 nobody_sees $((1073741824 + CTX))
assert_eq "nobody's killed process is reaped by nobody's reader" $((1073741824 + CTX)) "$(v2used "$(as_nobody nvml_probe)")"
kill -KILL "$root_holder"
poll_until 10 nobody_sees 0
assert_eq "root's killed process is reaped by nobody's reader too" 0 "$(v2used "$(as_nobody nvml_probe)")"

run env VGPU_FAKE_SHARED=../etc nvml_probe
assert_contains "a shared name with a slash is refused, saying why" "is not a name" "$err"

done_testing
