# Debian's podman resolves the specs of `vgpu cdi generate` (issue 29): `podman run --rootfs DIR
# --device vgpu.dev/gpu=NAME` with a stand-in OCI runtime that records the bundle's config.json at
# `create` and exits (a container cannot really start in this sandbox: crun may not set rlimits).
# The recorded config is what the engine made of the spec. Run by `make test-engines`
# (VGPU_TEST_ENGINES=1); `make test` skips it, because it needs root and Debian's podman.
. "$(dirname "$0")/lib.sh"

[ "${VGPU_TEST_ENGINES:-}" = 1 ] || skip_all "a real podman: run it with make test-engines"
[ "$(id -u)" -eq 0 ] || skip_all "podman 4.3 reads specs only from /etc/cdi and /var/run/cdi (no option for another directory): it needs root"
command -v podman >/dev/null || skip_all "podman is missing: install ${VGPU_ENGINE_PACKAGES:-podman} (sudo make deps-engines)"
unshare --mount true 2>/dev/null || skip_all "unshare --mount fails here: the test shows podman its own spec directory in a mount namespace"

# The spec directory podman reads: /var/run/cdi (= /run/cdi), bind-mounted from $specs in a mount
# namespace of podman's own, so that no spec of this machine is seen or touched; /etc/cdi, when
# there is one, is hidden behind an empty directory. /run/cdi is created when missing (a mount
# point is needed) and removed at the end.
specs=$T_DIR/specs empty=$T_DIR/empty rec=$T_DIR/rec
mkdir -p "$specs" "$empty" "$rec" "$T_DIR/rootfs/bin" "$T_DIR/podman"
made_run_cdi=
[ -d /run/cdi ] || { mkdir /run/cdi && made_run_cdi=1; }
engine_cleanup() { [ -n "$made_run_cdi" ] && rmdir /run/cdi 2>/dev/null; t_cleanup; }
trap engine_cleanup EXIT

# The stand-in runtime: at create, keep the bundle's config.json and fail (so podman stops there);
# answer anything else (delete, kill) with success.
stub=$T_DIR/stub-runtime
cat > "$stub" <<EOF
#!/bin/sh
bundle= prev=
for a in "\$@"; do
  case "\$prev" in --bundle|-b) bundle=\$a ;; esac
  prev=\$a
done
for a in "\$@"; do
  if [ "\$a" = create ]; then
    cp "\$bundle/config.json" "$rec/config.json" || exit 2
    echo "stand-in runtime: config recorded, not starting" >&2
    exit 1
  fi
done
exit 0
EOF
chmod +x "$stub"

podman_run() {  # podman_run ARGS...: podman run ARGS --rootfs ROOTFS /bin/true, as the stub sees it
  rm -f "$rec/config.json"
  timeout 60 unshare --mount bash -c '
    mount --make-rprivate / && mount --bind "$0" /run/cdi || exit 99
    if [ -d /etc/cdi ]; then mount --bind "$1" /etc/cdi || exit 99; fi
    shift
    exec podman --runtime "$STUB" --root "$PROOT/root" --runroot "$PROOT/run" --cgroup-manager cgroupfs \
      --events-backend file run --rm --network none "$@"' \
    "$specs" "$empty" "$@" --rootfs "$T_DIR/rootfs" /bin/true
}
export STUB=$stub PROOT=$T_DIR/podman

# The effective environment: the runtime sets process.env in order, so a later entry wins.
effective() {  # effective NAME: NAME's value as the container's process gets it
  jq -r --arg n "$1" '[.process.env[] | select(startswith($n + "="))] | last // "" | sub("^[^=]*="; "")' "$rec/config.json"
}
mount_of() {  # mount_of DEST: "source type options,..." of the recorded mount at DEST
  jq -r --arg d "$1" '.mounts[] | select(.destination == $d) | "\(.source) \(.type // "bind") \(.options | join(","))"' "$rec/config.json"
}

resolved() {  # resolved LABEL DEVICE: podman ran the stub with the device's edits applied
  local label=$1 dev=$2
  run podman_run --env LD_PRELOAD=/own.so --device "vgpu.dev/gpu=$dev"
  if [ -f "$rec/config.json" ]; then ok "$label: podman resolves vgpu.dev/gpu=$dev"; else
    not_ok "$label: podman resolves vgpu.dev/gpu=$dev" "rc=$rc $out $err"; return 1; fi
}

lib=$VGPU_BUILD/libvgpu.so
podman_version=$(podman --version 2>/dev/null | sed 's/.* //')

# --- --gpu, --core, --mem SIZE, --output: the full device --------------------------------------
run vgpu cdi generate --gpu 0 --mem 4G --core 30 --output "$specs"
assert_rc "generate --gpu 0 --mem 4G --core 30 --output" 0
spec=$specs/vgpu.dev-gpu_mem-4GiB-core-30.json
assert_eq "... cdiVersion 0.4.0" 0.4.0 "$(jq -r .cdiVersion "$spec" 2>/dev/null)"
run vgpu cdi validate "$spec"
assert_rc "... which vgpu cdi validate accepts" 0
if resolved "--gpu 0 --mem 4G --core 30 (podman $podman_version)" mem-4GiB-core-30; then
  assert_eq "the container's LD_PRELOAD is libvgpu.so" /usr/lib/vgpu/libvgpu.so "$(effective LD_PRELOAD)"
  assert_eq "... replacing the container's own (--env LD_PRELOAD=/own.so): the spec's entry comes last" \
    "/usr/lib/vgpu/libvgpu.so" "$(jq -r '[.process.env[] | select(startswith("LD_PRELOAD="))] | last' "$rec/config.json" | sed 's/^LD_PRELOAD=//')"
  assert_eq "the memory limit" 4096m "$(effective CUDA_DEVICE_MEMORY_LIMIT_0)"
  assert_eq "the core limit" 30 "$(effective CUDA_DEVICE_SM_LIMIT_0)"
  assert_eq "the per-container state" /run/vgpu/container.region "$(effective CUDA_DEVICE_MEMORY_SHARED_CACHE)"
  m=$(mount_of /usr/lib/vgpu/libvgpu.so)
  assert_match "libvgpu.so is bind-mounted from the host's" "^$lib bind " "$m"
  assert_match "... read-only" "(^| |,)ro(,|$)" "$m"
  assert_match "a tmpfs of the container's own at /run/vgpu" "^tmpfs tmpfs .*mode=1777" "$(mount_of /run/vgpu)"
  m=$(mount_of /run/vgpu-machine)
  assert_match "the machine-wide directory at /run/vgpu-machine" "^$VGPU_MACHINE_DIR bind " "$m"
  assert_match "... read-write: the schedules are written there and the arbiter's socket (arbiter.sock) is reached there" \
    "(^| |,)rw(,|$)" "$m"
fi

# --- PCT%, to standard output ---------------------------------------------------------------------
run vgpu cdi generate --mem 50%
assert_rc "generate --mem 50% (to standard output)" 0
half=$(printf '%s' "$out" | jq -r '.devices[0].name')
printf '%s\n' "$out" > "$specs/vgpu.dev-gpu_$half.json"
total=$(vgpu list --json | jq '.gpus[0].mem_total_bytes')
if resolved "--mem 50%" "$half"; then
  want=$(( total / 2 ))
  lim=$(effective CUDA_DEVICE_MEMORY_LIMIT_0)
  case $lim in *m) lim=$(( ${lim%m} * 1048576 )) ;; esac
  assert_eq "... half the GPU's memory" "$want" "$lim"
  assert_eq "... and no core limit" "" "$(effective CUDA_DEVICE_SM_LIMIT_0)"
fi

# --- --core alone ----------------------------------------------------------------------------------
run vgpu cdi generate --core 25 --output "$specs"
assert_rc "generate --core 25" 0
if resolved "--core 25" core-25; then
  assert_eq "... the core limit" 25 "$(effective CUDA_DEVICE_SM_LIMIT_0)"
  assert_eq "... and no memory limit" "" "$(effective CUDA_DEVICE_MEMORY_LIMIT_0)"
fi

# --- --name: one starting with a digit needs 0.5.0, the highest podman 4.3 reads -----------------
run vgpu cdi generate --name 7g --mem 7G --output "$specs"
assert_rc "generate --name 7g --mem 7G" 0
assert_eq "... cdiVersion 0.5.0" 0.5.0 "$(jq -r .cdiVersion "$specs/vgpu.dev-gpu_7g.json" 2>/dev/null)"
if resolved "--name 7g" 7g; then
  assert_eq "... the memory limit" 7168m "$(effective CUDA_DEVICE_MEMORY_LIMIT_0)"
fi

# --- why the lowest version: podman 4.3 (CDI library 0.5) refuses a 0.6.0 spec ------------------
run vgpu cdi generate --name annotated --mem 4G --annotations --output "$specs"
assert_rc "generate --annotations writes a 0.6.0 spec" 0
case $podman_version in
  4.[0-7].*)
    run podman_run --device vgpu.dev/gpu=annotated
    if [ ! -f "$rec/config.json" ] && [ "$rc" -ne 0 ]; then ok "... which podman $podman_version cannot resolve"; else
      not_ok "... which podman $podman_version cannot resolve" "rc=$rc; $err"; fi
    assert_contains "... saying so" "unresolvable CDI devices" "$err" ;;
  *) skip "... which podman 4.3 cannot resolve" "podman here is $podman_version, not one with a CDI 0.5 library"
     skip "... saying so" "podman $podman_version" ;;
esac
rm -f "$specs/vgpu.dev-gpu_annotated.json"
# The pinned version is the way back: the same device without annotations, pinned to 0.5.0.
run vgpu cdi generate --name pinned --mem 4G --cdi-version 0.5.0 --output "$specs"
assert_rc "generate --cdi-version 0.5.0" 0
resolved "--cdi-version 0.5.0" pinned

# --- a spec naming a missing library is refused by vgpu cdi validate -----------------------------
jq --arg p "$T_DIR/moved/libvgpu.so" '(.devices[0].containerEdits.mounts[] |
  select(.containerPath == "/usr/lib/vgpu/libvgpu.so") | .hostPath) = $p' "$spec" > "$T_DIR/missing.json"
run vgpu cdi validate "$T_DIR/missing.json"
assert_rc "vgpu cdi validate refuses a spec whose library is missing" 1
assert_contains "... naming it" "$T_DIR/moved/libvgpu.so: cannot read it" "$err"

# Every spec podman read is valid to vgpu cdi validate too.
for f in "$specs"/*.json; do
  run vgpu cdi validate "$f"
  assert_rc "vgpu cdi validate accepts $(basename "$f")" 0
done

done_testing
