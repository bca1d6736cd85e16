#!/usr/bin/env bash
# Debian packages the build and the tests need.
#   deps.sh check PKG...    fail with the exact install line when one is missing
#   deps.sh auto PKG...     install the missing ones when root, else behave like check
#   deps.sh install PKG...  install the missing ones (root), or print the line to run
set -u
mode=$1; shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { [ "$mode" = install ] && echo "vgpu: all build and test packages are installed"; exit 0; }
line="apt-get install -y ${missing[*]}"
if [ "$mode" != check ] && [ "$(id -u)" -eq 0 ]; then
  echo "vgpu: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || { echo "vgpu: apt-get update failed" >&2; exit 1; }
  apt-get install -y -qq "${missing[@]}" >/dev/null || { echo "vgpu: $line failed" >&2; exit 1; }
  exit 0
fi
echo "vgpu: missing packages: ${missing[*]}" >&2
echo "vgpu: install them with:  sudo $line   (or run 'sudo make deps')" >&2
[ "$mode" = install ] && exit 1
exit 1
