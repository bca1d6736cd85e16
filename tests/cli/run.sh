# vgpu run: exit statuses like env(1), the job's environment (CUDA_VISIBLE_DEVICES by UUID,
# VGPU_REGION, LD_PRELOAD prepended), --mem parsing and checks, the embedded library.
. "$(dirname "$0")/lib.sh"

uuid=$(vgpu list --json | jq -r '.gpus[0].uuid')
total=$(vgpu list --json | jq -r '.gpus[0].mem_total_bytes')

run vgpu run true
assert_rc "a command that succeeds: 0" 0
run vgpu run sh -c 'exit 7'
assert_rc "the command's status is passed on" 7
run vgpu run -- sh -c 'exit 3'
assert_rc "-- ends the options" 3
run vgpu run no-such-command-here
assert_rc "a command not found: 127" 127
assert_contains "not found names the command" "no-such-command-here" "$err"
printf 'x\n' > "$T_DIR/notexec"; chmod 0644 "$T_DIR/notexec"
run vgpu run "$T_DIR/notexec"
assert_rc "a command that cannot be executed: 126" 126
run vgpu run
assert_rc "no command: 125" 125
run vgpu run --frob true
assert_rc "an unknown option: 125" 125
run bash -c 'vgpu run sh -c "kill -KILL \$\$"; echo "status $?"'
assert_contains "killed by SIGKILL: vgpu run dies by SIGKILL" "status 137" "$out"
run bash -c 'vgpu run sh -c "kill -TERM \$\$"; echo "status $?"'
assert_contains "killed by SIGTERM: vgpu run dies by SIGTERM" "status 143" "$out"
# The signal is sent once the command has set its trap (it says so in a file); then the command
# idles in its sleep loop until the signal ends it.
run bash -c 'vgpu run sh -c "trap \"exit 42\" USR1; : >\"\$0\"; while :; do sleep 0.05; done" "$0" & p=$!
  wait_until 20 test -e "$0"; kill -USR1 $p; wait $p; echo "status $?"' "$T_DIR/trapped"
assert_contains "SIGUSR1 sent to vgpu run is forwarded to the command" "status 42" "$out"
run vgpu run sh -c 'echo "$@"' sh -l --mem 4G
assert_eq "options after the command are the command's" "-l --mem 4G" "$out"

# The job's environment.
run vgpu run sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
assert_eq "CUDA_VISIBLE_DEVICES is the GPU's UUID" "$uuid" "$out"
run vgpu run --gpu 0 sh -c 'test -f "$VGPU_REGION" && echo "$VGPU_REGION"'
assert_rc "VGPU_REGION names an existing file" 0
region=$out
assert_match "the region lives in the state directory" "^$VGPU_STATE_DIR/jobs/[0-9a-f]{12}\\.region$" "$region"
id=$(basename "$region" .region)
run vgpu ps --json
assert_eq "an ended job is kept, exited, with its status" "exited 0" \
  "$(printf '%s' "$out" | jq -r --arg id "$id" '.jobs[] | select(.id == $id) | "\(.state) \(.exit_code)"')"
run env VGPU_EXITED_KEEP_S=0 vgpu ps -q
check "the region is removed by a listing once its time is up" test ! -e "$region"
run vgpu run sh -c 'stat -c %a "$VGPU_REGION"'
assert_eq "the region is 0600" "600" "$out"
run env LD_PRELOAD=libm.so.6 vgpu run sh -c 'echo "$LD_PRELOAD"'
assert_eq "LD_PRELOAD is prepended to, not replaced" "$VGPU_BUILD/libvgpu.so libm.so.6" "$out"
run env -u LD_PRELOAD vgpu run sh -c 'echo "$LD_PRELOAD"'
assert_eq "LD_PRELOAD is libvgpu.so beside the binary" "$VGPU_BUILD/libvgpu.so" "$out"
run env VGPU_LIBRARY=$T_DIR/missing.so vgpu run true
assert_rc "VGPU_LIBRARY must exist" 125
assert_contains "VGPU_LIBRARY missing is named" "missing.so" "$err"

# --mem.
run vgpu run --mem 4G sh -c 'vgpu ps --json'
assert_eq "--mem 4G is the limit of the job's GPU" "4294967296" "$(printf '%s' "$out" | jq '(.jobs[] | select(.state == "running")).gpus[0].mem_limit_bytes')"
run vgpu run --mem 50% sh -c 'vgpu ps --json'
assert_eq "--mem 50% is half the GPU" "$((total / 2))" "$(printf '%s' "$out" | jq '(.jobs[] | select(.state == "running")).gpus[0].mem_limit_bytes')"
run vgpu run --mem 0:1G sh -c 'vgpu ps --json'
assert_eq "--mem IDX:SIZE" "1073741824" "$(printf '%s' "$out" | jq '(.jobs[] | select(.state == "running")).gpus[0].mem_limit_bytes')"
run vgpu run --mem 4X true
assert_rc "a bad size: 125" 125
assert_contains "a bad size is quoted" "'4X'" "$err"
run vgpu run --mem -1G true
assert_rc "a negative size: 125" 125
run vgpu run --mem 0 true
assert_rc "a zero limit: 125" 125
run vgpu run --mem 1000G true
assert_rc "a limit larger than the GPU: 125" 125
assert_contains "larger than the GPU says so" "larger than GPU 0" "$err"
run vgpu run --mem 101% true
assert_rc "more than 100%: 125" 125
run vgpu run --mem 3:1G true
assert_rc "--mem for a GPU the job does not have: 125" 125
assert_contains "the bad job GPU is named" "'3:1G'" "$err"
run vgpu run --mem 0:1G,0:2G true
assert_rc "--mem naming a GPU twice: 125" 125
run vgpu run --gpu 9 true
assert_rc "an unknown GPU: 125" 125
assert_contains "an unknown GPU lists the GPUs" "$uuid" "$err"
run vgpu run --core 30 sh -c 'vgpu ps --json'
assert_eq "--core is stored" "30" "$(printf '%s' "$out" | jq '(.jobs[] | select(.state == "running")).gpus[0].core_limit_percent')"
run vgpu run --core 0 true
assert_rc "--core 0: 125" 125
run vgpu run --name 'bad name' true
assert_rc "a bad name: 125" 125
run vgpu run --name twin sh -c 'vgpu run --name twin true'
assert_rc "a name already running: 125" 125
assert_contains "a taken name says so" "named 'twin' is running" "$err"
run env VGPU_NVML_LIB=$T_DIR/none.so vgpu run --mem 1G true
assert_rc "no NVML: 125" 125
assert_contains "no NVML says why --mem needs it" "total memory" "$err"

# The copy of libvgpu.so inside vgpu, when no library is installed beside it.
mkdir -p "$T_DIR/bin"
cp "$VGPU_BUILD/vgpu" "$T_DIR/bin/vgpu"
# (env -u: under ASan the suite preloads the sanitizer runtimes into everything.)
run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run sh -c 'echo "$LD_PRELOAD"'
assert_rc "the embedded library: the command runs" 0
assert_match "the embedded library is unpacked into the state directory" "^$VGPU_STATE_DIR/lib/libvgpu-[0-9a-f]{16}\\.so$" "$out"
lib=$out
check "the unpacked library is identical to build/libvgpu.so" cmp "$lib" "$VGPU_BUILD/libvgpu.so"
assert_eq "the unpacked library is 0500" "500" "$(stat -c %a "$lib")"
run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run sh -c 'echo "$LD_PRELOAD"'
assert_eq "a second run reuses the unpacked library" "$lib" "$out"
assert_eq "only one copy is unpacked" "1" "$(ls "$VGPU_STATE_DIR/lib" | wc -l)"

# The state directory must be safe.
mkdir -m 0777 "$T_DIR/open"
run env VGPU_STATE_DIR=$T_DIR/open vgpu run true
assert_rc "a world-writable state directory: 125" 125
assert_contains "a world-writable state directory is explained" "writable by group or others" "$err"
done_testing
