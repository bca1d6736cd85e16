# vgpu cdi generate: a CDI spec that validates against the CDI schema, and whose container edits,
# applied to a process in new mount and PID namespaces (as a container engine would), hold the
# limits with a per-container state.
. "$(dirname "$0")/lib.sh"

py=/usr/bin/python3     # Debian's python, where python3-jsonschema installs
out_dir=$T_DIR/cdi
mkdir -p "$out_dir"

run vgpu cdi generate --gpu 0 --mem 4G --core 30 --output "$out_dir"
assert_rc "generate --output writes the spec" 0
spec=$out_dir/vgpu.dev-gpu_mem-4GiB-core-30.json
assert_eq "... named vendor-class_name.json after the limits, path on stdout" "$spec" "$out"
assert_eq "... readable by the engine (0644)" 644 "$(stat -c %a "$spec" 2>/dev/null)"
check "... as JSON" jq -e . "$spec"
assert_eq "cdiVersion is the lowest its fields need: 0.4.0 (the tmpfs mount's type), which podman 4.3 reads" \
  0.4.0 "$(jq -r .cdiVersion "$spec")"
assert_eq "... no annotations unless asked (they need 0.6.0)" "null null" \
  "$(jq -r '"\(.annotations) \(.devices[0].annotations)"' "$spec")"
assert_eq "kind vgpu.dev/gpu" vgpu.dev/gpu "$(jq -r .kind "$spec")"
assert_eq "one device, named after the limits" mem-4GiB-core-30 "$(jq -r '.devices[].name' "$spec")"
env_of=$(jq -r '.devices[0].containerEdits.env[]' "$spec")
assert_contains "the device preloads libvgpu.so" "LD_PRELOAD=/usr/lib/vgpu/libvgpu.so" "$env_of"
assert_contains "... with the memory limit (HAMi's form, which libvgpu.so reads)" "CUDA_DEVICE_MEMORY_LIMIT_0=4096m" "$env_of"
assert_contains "... and the core limit" "CUDA_DEVICE_SM_LIMIT_0=30" "$env_of"
assert_contains "... and the per-container state" "CUDA_DEVICE_MEMORY_SHARED_CACHE=/run/vgpu/" "$env_of"
assert_eq "libvgpu.so is mounted read-only from the host" "$VGPU_BUILD/libvgpu.so ro" \
  "$(jq -r '.devices[0].containerEdits.mounts[] | select(.containerPath=="/usr/lib/vgpu/libvgpu.so") | "\(.hostPath) \(.options[0])"' "$spec")"
assert_eq "the state is a tmpfs of the container's own" tmpfs \
  "$(jq -r '.devices[0].containerEdits.mounts[] | select(.containerPath=="/run/vgpu") | .type' "$spec")"

# The schema: Debian's python3-jsonschema (DEB_PACKAGES); tests/cdi/spec.schema.json is written from
# the CDI SPEC.md and is stricter than upstream's (unknown fields refused, as CDI loaders do). With
# VGPU_CDI_SCHEMA_DIR=<container-device-interface>/schema it is also checked against upstream's.
if $py -c 'import jsonschema' 2>/dev/null; then
  run $py "$VGPU_SRC/tests/cdi/validate.py" "$VGPU_SRC/tests/cdi/spec.schema.json" "$spec" ${VGPU_CDI_SCHEMA_DIR:+"$VGPU_CDI_SCHEMA_DIR"}
  assert_eq "the spec validates against the CDI schema${VGPU_CDI_SCHEMA_DIR:+ (and the upstream one)}" valid "$out"
  jq '.devices[0].containerEdits.devices = []' "$spec" > "$T_DIR/bad.json"
  run $py "$VGPU_SRC/tests/cdi/validate.py" "$VGPU_SRC/tests/cdi/spec.schema.json" "$T_DIR/bad.json"
  assert_rc "... and the schema check can fail (an unknown field is refused)" 1
else
  skip "the spec validates against the CDI schema" "python3-jsonschema is not installed (make deps)"
  skip "... and the schema check can fail" "python3-jsonschema is not installed"
fi

# The version: the lowest the fields need, a pinned one, and fields a pinned one cannot carry.
run vgpu cdi generate --mem 4G --name 4g
assert_eq "a name starting with a digit needs 0.5.0" 0.5.0 "$(printf '%s' "$out" | jq -r .cdiVersion)"
run vgpu cdi generate --mem 4G --annotations
assert_eq "--annotations: 0.6.0" 0.6.0 "$(printf '%s' "$out" | jq -r .cdiVersion)"
assert_eq "... with the exact limit in the device's annotations" 4294967296 \
  "$(printf '%s' "$out" | jq -r '.devices[0].annotations["vgpu.dev/memory-limit-bytes"]')"
run vgpu cdi generate --mem 4G --cdi-version 1.1.0
assert_eq "--cdi-version 1.1.0 pins it" 1.1.0 "$(printf '%s' "$out" | jq -r .cdiVersion)"
run vgpu cdi generate --mem 4G --cdi-version v0.5.0
assert_eq "... v0.5.0 is 0.5.0" 0.5.0 "$(printf '%s' "$out" | jq -r .cdiVersion)"
run vgpu cdi generate --mem 4G --annotations --cdi-version 0.5.0
assert_rc "--cdi-version 0.5.0 with --annotations is refused" 2
assert_contains "... naming the field and the version that added it" \
  "cannot carry the spec's \"annotations\" (added in CDI 0.6.0)" "$err"
assert_contains "... and the version it needs" "this spec needs 0.6.0 or later" "$err"
run vgpu cdi generate --cdi-version 0.3.0
assert_rc "--cdi-version 0.3.0 cannot carry the tmpfs mount" 2
assert_contains "... saying so" "the tmpfs mount at /run/vgpu has a \"type\" (added in CDI 0.4.0)" "$err"
run vgpu cdi generate --cdi-version 2.0
assert_rc "an unknown --cdi-version is a usage error" 2
assert_contains "... listing the versions" "0.3.0, 0.4.0" "$err"

# --library must be this vgpu's libvgpu.so: every container would preload it (issue 27 item 8).
for bad in /etc/passwd /bin/sh "$T_DIR"; do
  run vgpu cdi generate --library "$bad"
  assert_rc "--library $bad is refused" 2
done
run vgpu cdi generate --library /etc/passwd
assert_contains "... saying what was wrong (not ELF)" "--library /etc/passwd is not libvgpu.so: it is not an ELF shared library" "$err"
run vgpu cdi generate --library /bin/sh
assert_contains "... another program or library: no vgpu note" "it has no vgpu version note" "$err"
run vgpu cdi generate --library "$T_DIR/none.so"
assert_contains "... a missing file, saying so" "No such file or directory" "$err"

# vgpu cdi validate: the version rules, the structure, and the library it preloads.
run vgpu cdi validate "$spec"
assert_rc "validate: a generated spec is valid" 0
assert_contains "... saying its version" "valid: cdiVersion 0.4.0, kind vgpu.dev/gpu, 1 device" "$out"
jq '.cdiVersion = "0.3.0"' "$spec" > "$T_DIR/v03.json"
run vgpu cdi validate "$T_DIR/v03.json"
assert_rc "validate: cdiVersion 0.3.0 with a mount type is refused" 1
assert_contains "... naming the field" "cdiVersion 0.3.0 cannot carry device mem-4GiB-core-30: the tmpfs mount" "$err"
jq '.devices[0].annotations = {"a": "b"}' "$spec" > "$T_DIR/ann.json"
run vgpu cdi validate "$T_DIR/ann.json"
assert_contains "validate: annotations under 0.4.0 are refused" "\"annotations\" (added in CDI 0.6.0)" "$err"
jq '.cdiVersion = "1.1.0"' "$spec" > "$T_DIR/v11.json"
run vgpu cdi validate "$T_DIR/v11.json"
assert_rc "validate: a higher version than needed is valid" 0
assert_contains "... noting the lower one more engines read" "0.4.0 would carry it too" "$out"
jq '.devices[0].containerEdits.devices = []' "$spec" > "$T_DIR/unk.json"
run vgpu cdi validate "$T_DIR/unk.json"
assert_contains "validate: an unknown field is refused" "unknown field \"devices\"" "$err"
jq '.cdiVersion = "0.9.0" | .kind = "vgpu"' "$spec" > "$T_DIR/kind.json"
run vgpu cdi validate "$T_DIR/kind.json"
assert_contains "validate: an unknown version is refused" "cdiVersion \"0.9.0\" is not a CDI version" "$err"
assert_contains "... and a kind that is not VENDOR/CLASS" "kind \"vgpu\" is not VENDOR/CLASS" "$err"
jq --arg p "$T_DIR/gone/libvgpu.so" '(.devices[0].containerEdits.mounts[] | select(.containerPath == "/usr/lib/vgpu/libvgpu.so") | .hostPath) = $p' "$spec" > "$T_DIR/gone.json"
run vgpu cdi validate "$T_DIR/gone.json"
assert_rc "validate: a spec whose preloaded library is missing is refused" 1
assert_contains "... naming it" "preloads /usr/lib/vgpu/libvgpu.so, mounted from $T_DIR/gone/libvgpu.so: cannot read it" "$err"
jq '(.devices[0].containerEdits.mounts[] | select(.containerPath == "/usr/lib/vgpu/libvgpu.so") | .hostPath) = "/etc/passwd"' "$spec" > "$T_DIR/passwd.json"
run vgpu cdi validate "$T_DIR/passwd.json"
assert_contains "validate: ... or not ELF" "mounted from /etc/passwd is not libvgpu.so: it is not an ELF shared library" "$err"
run vgpu cdi validate /etc/passwd
assert_rc "validate: a file that is not JSON" 1
assert_contains "... says so" "not JSON" "$err"
run vgpu cdi validate
assert_rc "validate without a file is a usage error" 2

run vgpu cdi generate --mem 50% --name half
assert_rc "PCT% of each GPU, with a chosen name, to stdout" 0
assert_eq "... the name is used" half "$(printf '%s' "$out" | jq -r '.devices[0].name')"
run vgpu cdi generate --mem 200G
assert_rc "a limit larger than the GPU is a usage error" 2
assert_contains "... saying how much the GPU has" "larger than GPU 0" "$err"
run vgpu cdi generate --name -bad
assert_rc "a name CDI refuses is a usage error" 2
assert_contains "... saying the rule" "a CDI device name is" "$err"
run vgpu cdi generate --name bad-
assert_rc "... so is one that does not end with a letter or digit" 2
run vgpu cdi generate --gpu 7
assert_rc "an unknown GPU is a usage error" 2
run vgpu cdi generat
assert_rc "an unknown verb is a usage error" 2
assert_contains "... suggesting the verb" "did you mean 'generate'" "$err"
run vgpu cdi validat x
assert_contains "... or validate" "did you mean 'validate'" "$err"
run vgpu cdi generate --output "$T_DIR/none"
assert_rc "a missing --output directory is an error" 1
assert_contains "... naming it" "$T_DIR/none" "$err"

# Apply the container edits as an engine does (env replaced, mounts made) to a process in new
# mount and PID namespaces: the image's /usr/lib is an overlay (so /usr/lib/vgpu can be made),
# /run a fresh tmpfs. Needs root and unshare(1).
apply_edits() {  # apply_edits SPEC CMD...: CMD in new mount and PID namespaces, with the spec's edits
  T_DIR=$T_DIR unshare --mount --pid --fork bash "$VGPU_SRC/tests/cdi/apply.sh" "$@"
}

if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! unshare --mount --pid --fork true 2>/dev/null; then
  for d in "a container's process sees the limit" "... which is enforced" "... in the container's own state" \
           "... nothing on the host's state" "a second container gets its own budget"; do
    skip "$d" "needs root and unshare(1) (new mount and PID namespaces)"
  done
else
  run apply_edits "$spec" sh -c 'echo "pid $$"; alloc_probe meminfo alloc 3G; alloc_probe alloc 1G alloc 3G; ls /run/vgpu'
  assert_contains "a container's process (pid 1 of its namespace) sees the limit" $'pid 1\nmeminfo rc=0 free=' "$out"
  assert_match "... 4 GiB in all" "meminfo rc=0 free=[0-9]+ total=4294967296" "$out"
  assert_contains "... which is enforced: once the first process has ended, 1 GiB then 3 GiB more is refused" \
    $'alloc rc=0 size=1073741824\nalloc rc=2 size=3221225472' "$out"
  assert_contains "... in the container's own state (the tmpfs)" "container.region" "$out"
  run ls "$VGPU_STATE_DIR/jobs"
  assert_not_contains "... nothing on the host's state" "region" "$out"
  run apply_edits "$spec" alloc_probe alloc 3500M
  assert_contains "a second container gets its own budget" "alloc rc=0" "$out"
fi

# HAMi's device plugin, unchanged (scale-out.md section 3, libvgpu(7)): the container edits its Allocate
# answers with, written as a CDI device: no LD_PRELOAD but /etc/ld.so.preload, the limits as
# CUDA_DEVICE_MEMORY_LIMIT_<i> in MiB and CUDA_DEVICE_SM_LIMIT, and the cache in a per-container
# host directory mounted at /usr/local/vgpu, beside the library.
hami=$T_DIR/hami
mkdir -p "$hami/containers/pod1_main"
echo /usr/local/vgpu/libvgpu.so > "$hami/ld.so.preload"
jq -n --arg lib "$VGPU_BUILD/libvgpu.so" --arg dir "$hami/containers/pod1_main" --arg pre "$hami/ld.so.preload" '{
  cdiVersion: "1.1.0", kind: "hami.example/gpu",
  devices: [{ name: "pod1-main", containerEdits: {
    env: ["CUDA_DEVICE_MEMORY_LIMIT_0=3072m", "CUDA_DEVICE_SM_LIMIT=30",
          "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/4b9a-cache.cache"],
    mounts: [{ hostPath: $dir, containerPath: "/usr/local/vgpu", options: ["rw", "bind"] },
             { hostPath: $lib, containerPath: "/usr/local/vgpu/libvgpu.so", options: ["ro", "bind"] },
             { hostPath: $pre, containerPath: "/etc/ld.so.preload", options: ["ro", "bind"] }] } }] }' > "$T_DIR/hami.json"
if [ "$(id -u)" -ne 0 ] || ! unshare --mount --pid --fork true 2>/dev/null; then
  for d in "HAMi's edits" "... enforced" "... the cache"; do skip "$d" "needs root and unshare(1)"; done
else
  run apply_edits "$T_DIR/hami.json" sh -c 'case "$LD_PRELOAD" in *libvgpu*) echo env-preload ;; *) echo no-env-preload ;; esac
    alloc_probe meminfo alloc 3G'
  assert_contains "HAMi's edits: libvgpu.so through /etc/ld.so.preload (not LD_PRELOAD) holds 3072m" \
    $'no-env-preload\nmeminfo rc=0 free=' "$out"
  assert_match "... of 3 GiB" "total=3221225472" "$out"
  assert_contains "... enforced" "alloc rc=2" "$out"
  check "... the cache is in the per-container host directory, where a host monitor reads it" \
    test -f "$hami/containers/pod1_main/4b9a-cache.cache"
fi

done_testing
