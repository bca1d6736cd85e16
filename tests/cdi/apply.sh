#!/usr/bin/env bash
# tests/cdi/apply.sh SPEC CMD...: applies the first device's container edits of a CDI spec to CMD as
# an engine does (env replaced, mounts made), then runs it. For tests/cli/cdi.sh, run inside
# `unshare --mount --pid --fork` as root; T_DIR is the test's scratch directory. The image's
# /usr/lib, /usr/local and /etc become overlays (so that mount points can be made there without
# touching the host's files), /run a fresh tmpfs; a spec that mounts anywhere else is refused.
set -e
spec=$1; shift
mount --make-rprivate /
mkdir -p "$T_DIR/ovl" && mount -t tmpfs ovl "$T_DIR/ovl"
for d in /usr/lib /usr/local /etc; do
  o=$T_DIR/ovl/$(echo "$d" | tr / _)
  mkdir -p "$o/u" "$o/w"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$o/u,workdir=$o/w" "$d"
done
mount -t tmpfs run /run
n=$(jq '.devices[0].containerEdits.mounts | length' "$spec")
for i in $(seq 0 $((n - 1))); do
  m=$(jq -c ".devices[0].containerEdits.mounts[$i]" "$spec")
  host=$(jq -r .hostPath <<<"$m"); ctr=$(jq -r .containerPath <<<"$m"); type=$(jq -r '.type // "bind"' <<<"$m")
  case $ctr in
    /usr/lib/*|/usr/local/*|/etc/*|/run/*) ;;
    *) echo "apply.sh: refusing to mount on $ctr (only under /usr/lib, /usr/local, /etc and /run)" >&2; exit 1 ;;
  esac
  opts=$(jq -r '(.options // []) | map(select(. != "bind" and . != "rw")) | join(",")' <<<"$m")
  if [ "$type" = tmpfs ]; then
    mkdir -p "$ctr"; mount -t tmpfs ${opts:+-o "$opts"} "$host" "$ctr"
  else
    if [ -d "$host" ]; then mkdir -p "$ctr"; else mkdir -p "$(dirname "$ctr")"; [ -e "$ctr" ] || : > "$ctr"; fi
    mount --bind "$host" "$ctr"
    [ -z "$opts" ] || mount -o "remount,bind,$opts" "$ctr"
  fi
done
mapfile -t envs < <(jq -r '.devices[0].containerEdits.env // [] | .[]' "$spec")
# Under the sanitizers (tests/run.sh, VGPU_ASAN=1) their runtimes must come first in LD_PRELOAD.
san=()
if [ -n "${VGPU_TEST_PRELOAD:-}" ]; then
  pre=LD_PRELOAD=$VGPU_TEST_PRELOAD
  for i in "${!envs[@]}"; do
    case ${envs[$i]} in LD_PRELOAD=*) pre="$pre:${envs[$i]#LD_PRELOAD=}"; unset "envs[$i]" ;; esac
  done
  san=("$pre" "ASAN_OPTIONS=${ASAN_OPTIONS:-}" "UBSAN_OPTIONS=${UBSAN_OPTIONS:-}")
fi
# The simulated GPU stands in for NVIDIA's own device.
exec env -i PATH="$PATH" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" VGPU_FAKE_SCENARIO="$VGPU_FAKE_SCENARIO" \
  VGPU_FAKE_STATE="$VGPU_FAKE_STATE" VGPU_FAKE_LIBDIR="$VGPU_FAKE_LIBDIR" "${envs[@]}" "${san[@]}" "$@"
