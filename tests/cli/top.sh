# vgpu top in batch mode: --once text, --once --json field by field, the JSON Lines stream,
# the no-driver banner (jobs still shown), options and exit statuses.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jsondoc.lib"

run vgpu top --help
assert_rc "--help exits 0" 0
assert_contains "--help prints the usage" "usage: vgpu top" "$out"
run vgpu top -d 0
assert_rc "-d 0 is refused" 2
run vgpu top -d abc
assert_rc "-d abc is refused" 2
for d in 1e0 ' 1' 0x1 +1; do
  run vgpu top --once -d "$d"
  assert_rc "-d '$d' is refused: plain decimals, as wait --timeout" 2
done
run vgpu top -n 0
assert_rc "-n 0 is refused" 2
run vgpu top -n 99999999999999999999
assert_rc "-n 99999999999999999999 is refused" 2
assert_contains "... as too many, not as less than 1" "at most" "$err"
# --json without a terminal (stdin /dev/null, stdout a pipe): one refresh and exit, as the text
# does; it streamed until killed. timeout only bounds a failure.
run timeout 20 vgpu top --json </dev/null
assert_rc "--json without a terminal exits by itself" 0
assert_eq "... after one JSON line" 1 "$(printf '%s\n' "$out" | grep -c '"schema"')"
run timeout 20 vgpu top --json -n 2 -d 0.1 </dev/null
assert_eq "... and streams -n N lines when asked" 2 "$(printf '%s\n' "$out" | grep -c '"schema"')"
run vgpu top --bogus
assert_rc "an unknown option is refused" 2

# No library: the banner says so, the job table is still there, exit 3 in batch mode.
run env VGPU_NVML_LIB=/nonexistent/libnvidia-ml.so.1 vgpu top --once
assert_rc "no library: exit 3" 3
assert_contains "no library: banner" "No GPU data (NVML library not found)" "$out"
assert_contains "no library: jobs table still shown" "JOB " "$out"
assert_contains "no library: reason on stderr" "cannot load" "$err"
run env VGPU_NVML_LIB=/nonexistent/libnvidia-ml.so.1 vgpu top --once --json
assert_eq "no library: JSON status" "no_library" "$(jq -r .nvml.status <<<"$out")"
assert_match "no library: JSON message has dlerror" "nonexistent" "$(jq -r .nvml.message <<<"$out")"
assert_eq "no library: gpus is empty" "0" "$(jq '.gpus | length' <<<"$out")"
# Without a terminal, vgpu top behaves as --once.
run env VGPU_NVML_LIB=/nonexistent/libnvidia-ml.so.1 vgpu top </dev/null
assert_contains "no terminal: a snapshot" "vgpu top - " "$out"

# Driver not loaded / no GPU (failure injection of the simulated GPU), when it has them.
for f in driver_not_loaded:4:"driver not loaded" no_gpus:5:"no GPU found"; do
  IFS=: read -r knob code text <<<"$f"
  run env VGPU_FAKE_FAIL=nvml_init=$knob vgpu top --once
  if [ "$rc" = "$code" ]; then
    assert_contains "$knob: banner" "$text" "$out"
  else
    skip "$knob: banner" "the simulated GPU does not inject $knob (rc=$rc)"
  fi
done

# On the simulated GPU.
run vgpu list
if [ "$rc" != 0 ]; then
  # The simulated GPU is always there: its NVML failing is a failure, not a reason to skip.
  not_ok "vgpu list works on the simulated GPU" "${err:0:800}"
  done_testing; exit 1
fi
run vgpu top --once
assert_rc "--once exits 0" 0
assert_contains "--once shows the GPU" "NVIDIA" "$out"
assert_contains "--once shows the detail line" "PCIe" "$out"
run vgpu top --once --json
assert_rc "--once --json exits 0" 0
j=$out
assert_eq "schema 1" 1 "$(jq .schema <<<"$j")"
assert_eq "status ok" ok "$(jq -r .nvml.status <<<"$j")"
assert_eq "one GPU" 1 "$(jq '[.gpus[] | select(.is_mig_device | not)] | length' <<<"$j")"
assert_eq "memory total is a number" number "$(jq -r '.gpus[0].mem_total_bytes | type' <<<"$j")"
assert_eq "memory total matches vgpu list" "$(vgpu list --json | jq .gpus[0].mem_total_bytes)" "$(jq .gpus[0].mem_total_bytes <<<"$j")"
assert_eq "uuid matches vgpu list" "$(vgpu list --json | jq -r .gpus[0].uuid)" "$(jq -r .gpus[0].uuid <<<"$j")"
# The idle H100 of the simulated GPU's model (tests/fakegpu/README.md): known values, not types.
for kv in util_gpu_percent=0 temperature_celsius=33 power_draw_milliwatts=71000 clock_sm_mhz=345 pcie_link_gen=5; do
  k=${kv%=*}
  assert_eq "$k of the idle GPU" "${kv#*=}" "$(jq -r ".gpus[0].$k" <<<"$j")"
done
# Streaming: -n 2 --json gives two lines, each a document.
run vgpu top --json -n 2 -d 0.1
assert_eq "stream: two lines" 2 "$(printf '%s\n' "$out" | wc -l)"
assert_eq "stream: each line is a document" "1 1" "$(printf '%s\n' "$out" | jq -c .schema | tr '\n' ' ' | sed 's/ $//')"
# --gpu selection
run vgpu top --once --gpu 7
assert_rc "--gpu with an unknown GPU: exit 2" 2

# Two limited jobs: shown with their limits, processes joined to them.
vgpu run --name top-a --mem 4G --core 30 -- sleep 120 >/dev/null 2>&1 &
vgpu run --name top-b --mem 2G -- sleep 120 >/dev/null 2>&1 &
top_lists() { vgpu top --once --json | jq -e --arg n "$1" '[.jobs[] | select(.name == $n)] | length == 1'; }
if wait_until 20 top_lists top-a && wait_until 20 top_lists top-b; then
  run vgpu top --once
  assert_match "job a: memory limit" "top-a .* 0B/4G" "$out"
  assert_match "job a: core limit" "top-a .*/30%" "$out"
  assert_match "job b: memory limit" "top-b .* 0B/2G" "$out"
  run vgpu top --once --json
  assert_eq "JSON: job a's limit" $((4 << 30)) "$(jq '.jobs[] | select(.name == "top-a") | .mem_limit_bytes' <<<"$out")"
  assert_eq "JSON: job b's core limit is null" null "$(jq '.jobs[] | select(.name == "top-b") | .core_limit_percent' <<<"$out")"
  assert_eq "JSON: job a's core limit" 30 "$(jq '.jobs[] | select(.name == "top-a") | .core_limit_percent' <<<"$out")"
  assert_eq "JSON: job a's core policy" hard "$(jq -r '.jobs[] | select(.name == "top-a") | .core_policy' <<<"$out")"
  assert_eq "JSON: job b's core policy is null" null "$(jq '.jobs[] | select(.name == "top-b") | .core_policy' <<<"$out")"
  assert_eq "JSON: owner_uid is the caller's" "$(id -u)" "$(jq '.jobs[] | select(.name == "top-a") | .owner_uid' <<<"$out")"
  check_doc "vgpu top --json" "$out"
  # A job with no name: null in JSON (the screen shows its id).
  # Its process holds its context (512 MiB) and core_loop's module (2 MiB: tests/fakegpu/README.md).
  vgpu run --mem 1G -- core_loop -t 120 >/dev/null 2>&1 &
  unnamed_nvml() { vgpu top --once --json | jq -e '[.jobs[] | select(.name == null)][0].nvml_used_bytes == 538968064'; }
  wait_until 20 unnamed_nvml
  run vgpu top --once --json
  assert_eq "JSON: a job without a name has name null" 1 "$(jq '[.jobs[] | select(.name == null)] | length' <<<"$out")"
  assert_eq "JSON: a job with processes has nvml_used_bytes (its context and module)" 538968064 \
    "$(jq -r '[.jobs[] | select(.name == null)][0].nvml_used_bytes' <<<"$out")"
  check_doc "vgpu top --json" "$out"
fi
done_testing
