#!/usr/bin/env bash
# The state directory is used only when nobody else can swap what is in it (vgpu/statedir.h,
# vgpu-security(7)): root refuses another user's directory; a symlinked jobs/ or lib/ is refused,
# never followed; a directory above it that others may rename entries in is refused.
. "$(dirname "$0")/lib.sh"

as_root=false
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && as_root=true
nobody_uid=$(id -u nobody 2>/dev/null || echo 65534)

# ---- a state directory another user owns -------------------------------------------------------
if $as_root; then
  mkdir -m 0700 "$T_DIR/alice"
  chown nobody "$T_DIR/alice"
  run env VGPU_STATE_DIR="$T_DIR/alice" vgpu run true
  assert_rc "root refuses a state directory another user owns: vgpu run 125" 125
  assert_contains "the refusal says whose directory it is" "belongs to uid $nobody_uid" "$err"
  assert_contains "the refusal says what to do" "unset VGPU_STATE_DIR" "$err"
  run env VGPU_STATE_DIR="$T_DIR/alice" vgpu ps
  assert_rc "root's vgpu ps refuses it too: 6" 6
  assert_eq "nothing was created in it" "" "$(ls -A "$T_DIR/alice")"

  # Root's own directory below a user's directory: the user could rename it away.
  mkdir -m 0755 "$T_DIR/home"
  chown nobody "$T_DIR/home"
  mkdir -m 0700 "$T_DIR/home/state"
  run env VGPU_STATE_DIR="$T_DIR/home/state" vgpu run true
  assert_rc "root refuses a state directory inside a user's directory: 125" 125
  assert_contains "the refusal names the directory above" "$T_DIR/home" "$err"
else
  skip "root refuses a state directory another user owns" "needs root and setpriv"
fi

# ---- a directory above it that others may write -----------------------------------------------
mkdir -m 0700 "$T_DIR/shared"
chmod 0777 "$T_DIR/shared"
mkdir -m 0700 "$T_DIR/shared/state"
run env VGPU_STATE_DIR="$T_DIR/shared/state" vgpu run true
assert_rc "a state directory inside a world-writable, non-sticky directory: 125" 125
assert_contains "the refusal says why" "without the sticky bit" "$err"
chmod 1777 "$T_DIR/shared"
run env VGPU_STATE_DIR="$T_DIR/shared/state" vgpu run true
assert_rc "the same inside a sticky directory (like /tmp) is fine: 0" 0

# ---- jobs/ swapped for a symlink: never listed, never reaped through --------------------------
run env VGPU_EXITED_KEEP_S=3600 vgpu run --name old true
assert_rc "a job that ends: 0" 0
id=$(ls "$VGPU_STATE_DIR/jobs" | sed -n 's/\.region$//p')
mkdir -m 0700 "$T_DIR/elsewhere"
mv "$VGPU_STATE_DIR/jobs/$id.region" "$T_DIR/elsewhere/"
echo "not vgpu's" > "$T_DIR/elsewhere/$id.log"
rmdir "$VGPU_STATE_DIR/jobs"
ln -s "$T_DIR/elsewhere" "$VGPU_STATE_DIR/jobs"
run env VGPU_EXITED_KEEP_S=0 vgpu ps
assert_rc "vgpu ps refuses a jobs/ that is a symlink: 6" 6
assert_contains "the refusal says it is a symlink" "symlink" "$err"
check "the ended job's file behind the symlink is not removed" test -f "$T_DIR/elsewhere/$id.region"
check "the .log file behind the symlink is not removed" test -f "$T_DIR/elsewhere/$id.log"
run vgpu run true
assert_rc "vgpu run refuses a jobs/ that is a symlink: 125" 125
run vgpu limit "$id" --mem 1G
check "vgpu limit refuses it (non-zero)" test "$rc" -ne 0
rm "$VGPU_STATE_DIR/jobs"
mkdir -m 0700 "$VGPU_STATE_DIR/jobs"

# A symlink named like a job inside jobs/ is not opened.
ln -s "$T_DIR/elsewhere/$id.region" "$VGPU_STATE_DIR/jobs/$id.region"
run env VGPU_EXITED_KEEP_S=0 vgpu ps --json
assert_rc "vgpu ps with a symlink named like a job: 0" 0
assert_eq "the symlinked job is not listed" "0" "$(printf '%s' "$out" | jq '.jobs | length')"
check "and what it points at is not removed" test -f "$T_DIR/elsewhere/$id.region"
rm "$VGPU_STATE_DIR/jobs/$id.region"

# ---- lib/ swapped for a symlink: the embedded library is not written through it -----------------
mkdir -p "$T_DIR/bin"
cp "$VGPU_BUILD/vgpu" "$T_DIR/bin/vgpu"
mkdir -m 0700 "$T_DIR/otherlib"
rm -rf "$VGPU_STATE_DIR/lib"
ln -s "$T_DIR/otherlib" "$VGPU_STATE_DIR/lib"
# (env -u: under ASan the suite preloads the sanitizer runtimes into everything.)
run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run true
assert_rc "vgpu run refuses a lib/ that is a symlink: 125" 125
assert_contains "the refusal names lib/" "$VGPU_STATE_DIR/lib" "$err"
assert_eq "nothing was written through the symlink" "" "$(ls -A "$T_DIR/otherlib")"
rm "$VGPU_STATE_DIR/lib"

# A planted file or symlink under the library's name is replaced, not used or followed.
run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run sh -c 'echo "$LD_PRELOAD"'
assert_rc "the embedded library is unpacked: 0" 0
lib=$out
name=$(basename "$lib")
rm -f "$lib"
echo "planted" > "$T_DIR/planted.so"
ln -s "$T_DIR/planted.so" "$lib"
run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run sh -c 'echo "$LD_PRELOAD"'
assert_rc "a symlink under the library's name: 0" 0
check "the symlink was replaced by the real library" cmp "$lib" "$VGPU_BUILD/libvgpu.so"
assert_eq "the file it pointed at is untouched" "planted" "$(cat "$T_DIR/planted.so")"
check "the library is a regular file again" test ! -L "$VGPU_STATE_DIR/lib/$name"

# ---- the per-user fallback prefers /run/user/UID over /tmp ---------------------------------------
# Anyone can create /tmp/vgpu-UID first; /run/user/UID is created by the login manager for UID.
if $as_root && [ -d /run/user ] && [ ! -e "/run/user/$nobody_uid" ] && [ ! -e "/tmp/vgpu-$nobody_uid" ]; then
  mkdir -m 0700 "/run/user/$nobody_uid"
  chown nobody "/run/user/$nobody_uid"
  run setpriv --reuid=nobody --regid=nogroup --clear-groups \
    env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR -u LD_PRELOAD VGPU_FAKE_STATE="/run/user/$nobody_uid/fake" \
    "$VGPU_BUILD/vgpu" run true
  assert_rc "a user without XDG_RUNTIME_DIR runs a job: 0" 0
  check "its state directory is /run/user/UID/vgpu" test -d "/run/user/$nobody_uid/vgpu/jobs"
  check "not /tmp/vgpu-UID" test ! -e "/tmp/vgpu-$nobody_uid"
  rm -rf "/run/user/$nobody_uid" "/tmp/vgpu-$nobody_uid"
else
  skip "the per-user fallback prefers /run/user/UID" "needs root, /run/user, and no state of uid $nobody_uid"
fi

done_testing
