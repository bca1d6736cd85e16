#!/usr/bin/env bash
# tests/cdi/apply.sh SPEC CMD...: applies the first device's container edits of a CDI spec to CMD as
# an engine does (env replaced, mounts made), then runs it. For tests/cli/cdi.sh, run inside
# `unshare --mount --pid --fork` as root: the image's /usr/lib becomes an overlay (so that
# /usr/lib/vgpu can be made), /run a fresh tmpfs; T_DIR is the test's scratch directory.
set -e
spec=$1; shift
mount --make-rprivate /
mkdir -p "$T_DIR/ovl" && mount -t tmpfs ovl "$T_DIR/ovl" && mkdir "$T_DIR/ovl/u" "$T_DIR/ovl/w"
mount -t overlay overlay -o "lowerdir=/usr/lib,upperdir=$T_DIR/ovl/u,workdir=$T_DIR/ovl/w" /usr/lib
mount -t tmpfs run /run
n=$(jq '.devices[0].containerEdits.mounts | length' "$spec")
for i in $(seq 0 $((n - 1))); do
  m=$(jq -c ".devices[0].containerEdits.mounts[$i]" "$spec")
  host=$(jq -r .hostPath <<<"$m"); ctr=$(jq -r .containerPath <<<"$m"); type=$(jq -r '.type // "bind"' <<<"$m")
  opts=$(jq -r '.options | map(select(. != "bind" and . != "rw")) | join(",")' <<<"$m")
  if [ "$type" = tmpfs ]; then
    mkdir -p "$ctr"; mount -t tmpfs -o "$opts" "$host" "$ctr"
  else
    if [ -d "$host" ]; then mkdir -p "$ctr"; else mkdir -p "$(dirname "$ctr")"; : > "$ctr"; fi
    mount --bind "$host" "$ctr"
    mount -o "remount,bind,$opts" "$ctr"
  fi
done
mapfile -t envs < <(jq -r '.devices[0].containerEdits.env[]' "$spec")
# The simulated GPU stands in for NVIDIA's own device.
exec env -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" VGPU_FAKE_SCENARIO="$VGPU_FAKE_SCENARIO" \
  VGPU_FAKE_STATE="$VGPU_FAKE_STATE" VGPU_FAKE_LIBDIR="$VGPU_FAKE_LIBDIR" "${envs[@]}" "$@"
