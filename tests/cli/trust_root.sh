# Root never loads, runs or works in what another user can change (issue 25 item 4,
# vgpu-security(7)): sudo -E keeps VGPU_* variables, so each path they name must be root's, and
# no one else may write it or a directory above it (a sticky one like /tmp excepted), links
# and their targets included. Otherwise the command is refused, naming the culprit, and
# nothing of the other user's runs.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the files belong to nobody)"
command -v cc >/dev/null || skip_all "needs a C compiler (a library with a constructor)"

nb=$(mktemp -d /tmp/vgpu-trust-nobody.XXXXXX); chown nobody:nogroup "$nb"; chmod 0755 "$nb"
mark=$(mktemp -d /tmp/vgpu-trust-mark.XXXXXX); chmod 1777 "$mark"
trap 'rm -rf "$nb" "$mark"; t_cleanup' EXIT
ok_dir=$T_DIR/ok; mkdir -m 0755 "$ok_dir"

# A library whose constructor leaves a mark, and a program that does the same.
printf '#include <stdio.h>\n__attribute__((constructor)) static void c(void) { FILE *f = fopen("%s/" MARK, "w"); if (f) fclose(f); }\n' \
  "$mark" >"$T_DIR/evil.c"
cc -shared -fPIC -DMARK='"lib"' -o "$ok_dir/evil.so" "$T_DIR/evil.c" || skip_all "cannot build a shared library"
printf '#!/bin/sh\n: >"%s/prog"\necho marked\n' "$mark" >"$ok_dir/evil.sh"; chmod 0755 "$ok_dir/evil.sh"
cp "$ok_dir/evil.so" "$ok_dir/evil.sh" "$VGPU_BUILD/libvgpu.so" "$nb/"; chown nobody:nogroup "$nb"/*

refused() { # desc needle
  assert_rc "$1: refused (6)" 6
  assert_contains "$1: says why, naming the culprit" "$2" "$err"
  assert_eq "$1: nothing of nobody's ran" "" "$(ls "$mark")"
  rm -f "$mark"/*
}

run env VGPU_NVML_LIB="$nb/evil.so" vgpu ps
refused "VGPU_NVML_LIB=nobody's library, vgpu ps" "refusing VGPU_NVML_LIB=$nb/evil.so as root: $nb belongs to another user (owner uid $(id -u nobody)"
run env VGPU_NVIDIA_SMI="$nb/evil.sh" vgpu timeslice get
refused "VGPU_NVIDIA_SMI=nobody's script, vgpu timeslice" "refusing VGPU_NVIDIA_SMI=$nb/evil.sh"
run env VGPU_MPS_CONTROL="$nb/evil.sh" vgpu mps start --pipe-dir "$T_DIR/pipe" --log-dir "$T_DIR/log"
refused "VGPU_MPS_CONTROL=nobody's script, vgpu mps start" "refusing VGPU_MPS_CONTROL=$nb/evil.sh"
run env VGPU_LIBRARY="$nb/libvgpu.so" vgpu run -- true
assert_rc "VGPU_LIBRARY=nobody's copy, vgpu run: refused (125)" 125
assert_contains "... saying why" "refusing VGPU_LIBRARY=$nb/libvgpu.so as root" "$err"
run env VGPU_MACHINE_DIR="$nb/machine" vgpu ps
refused "VGPU_MACHINE_DIR under nobody's directory" "refusing VGPU_MACHINE_DIR=$nb/machine"
run env VGPU_NVIDIA_PROC="$nb/proc" vgpu ps
refused "VGPU_NVIDIA_PROC under nobody's directory (the kept GPU list's check), vgpu ps" "refusing VGPU_NVIDIA_PROC=$nb/proc"

# A group-writable directory above a root-owned library.
gw=$T_DIR/gw; mkdir -m 0775 "$gw"; cp "$ok_dir/evil.so" "$gw/"
run env VGPU_NVML_LIB="$gw/evil.so" vgpu ps
refused "a group-writable directory above it" "$gw is writable by its group (owner uid 0, mode 0775)"
assert_contains "... and says what to do" "chmod go-w $gw" "$err"
# A world-writable directory that is not sticky.
ww=$T_DIR/ww; mkdir -m 0777 "$ww"; cp "$ok_dir/evil.so" "$ww/"
run env VGPU_NVML_LIB="$ww/evil.so" vgpu ps
refused "a world-writable directory above it" "$ww is writable by others"
# The file itself group-writable.
cp "$ok_dir/evil.so" "$ok_dir/gw.so"; chmod 0664 "$ok_dir/gw.so"
run env VGPU_NVML_LIB="$ok_dir/gw.so" vgpu ps
refused "a group-writable library" "$ok_dir/gw.so is writable by its group"
# Links: root's link to nobody's file; nobody's link (in sticky /tmp) to root's file.
ln -s "$nb/evil.so" "$ok_dir/link.so"
run env VGPU_NVML_LIB="$ok_dir/link.so" vgpu ps
refused "root's symbolic link to nobody's library" "$nb belongs to another user"
nlink=/tmp/vgpu-trust-link.$$; setpriv --reuid=nobody --regid=nogroup --clear-groups ln -s "$ok_dir/evil.so" "$nlink"
run env VGPU_NVML_LIB="$nlink" vgpu ps
rm -f "$nlink"
refused "nobody's symbolic link to root's library" "$nlink (a symbolic link) belongs to another user"

# The same, root's along the whole path, are used: a sticky /tmp above is fine.
run env VGPU_NVML_LIB="$ok_dir/evil.so" vgpu ps
assert_eq "VGPU_NVML_LIB=root's library: loaded" "lib" "$(ls "$mark")"; rm -f "$mark"/*
run env VGPU_NVIDIA_SMI="$ok_dir/evil.sh" vgpu timeslice get
assert_eq "VGPU_NVIDIA_SMI=root's script: run" "prog" "$(ls "$mark")"; rm -f "$mark"/*
ln -s "$ok_dir/evil.so" "$ok_dir/good-link.so"
run env VGPU_NVML_LIB="$ok_dir/good-link.so" vgpu ps
assert_eq "root's link to root's library: loaded" "lib" "$(ls "$mark")"; rm -f "$mark"/*
tmp_ok=$(mktemp -d /tmp/vgpu-trust-ok.XXXXXX); chmod 0755 "$tmp_ok"; cp "$VGPU_BUILD/libvgpu.so" "$tmp_ok/"
run env VGPU_LIBRARY="$tmp_ok/libvgpu.so" vgpu run -- true
rm -rf "$tmp_ok"
assert_rc "VGPU_LIBRARY=root's copy under sticky /tmp: vgpu run works (0)" 0
run env VGPU_MACHINE_DIR="$T_DIR/machine2" vgpu ps
assert_rc "VGPU_MACHINE_DIR of root's (not there yet): vgpu ps works (0)" 0

# Not root: a user may load their own files. (Its programs from a copy nobody can reach: the
# checkout may be in a 0700 home directory.)
public_bin
run setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR VGPU_NVML_LIB="$nb/evil.so" \
  VGPU_STATE_DIR="$nb/state" VGPU_MACHINE_DIR="$nb/machine" vgpu ps
assert_eq "nobody's own vgpu ps loads nobody's library" "lib" "$(ls "$mark")"

done_testing
