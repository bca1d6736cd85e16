# Running out (issue 12, item 6): a full file system under the state directory, no file
# descriptors left, every process slot of a region taken. Each gives a clear error or degrades
# the documented way (vgpu-security(7)), and never damages another job.
. "$(dirname "$0")/lib.sh"

# ---- a full file system under the state directory ------------------------------------------------
tiny=$T_DIR/tiny
mkdir -p "$tiny"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=512k,mode=0700 tmpfs "$tiny" 2>/dev/null; then
  trap 'kill $holder 2>/dev/null; wait 2>/dev/null; umount "$tiny" 2>/dev/null; t_cleanup' EXIT
  export VGPU_STATE_DIR=$tiny/state
  # A job that fits, started before the file system fills up.
  vgpu run --name first --mem 1G -- alloc_probe alloc 10M hold >"$T_DIR/first.out" 2>&1 &
  holder=$!
  if poll_until 10 grep -q holding "$T_DIR/first.out"; then ok "a job starts while there is room"; else not_ok "a job starts while there is room" "$(cat "$T_DIR/first.out")"; fi
  run vgpu ps --json
  before=$(printf '%s' "$out" | jq -r '.jobs[] | "\(.name) \(.state) \(.gpus[0].mem_used_bytes) \(.gpus[0].mem_limit_bytes)"')
  assert_match "the first job is listed with its usage" "^first running [0-9]+ 1073741824$" "$before"
  dd if=/dev/zero of="$tiny/fill" bs=4k count=1000 2>/dev/null
  run vgpu run --mem 1G -- alloc_probe alloc 10M
  assert_rc "vgpu run on a full file system: 125 (not SIGBUS, 135)" 125
  assert_contains "it says the file system is full" "file system is full" "$err"
  assert_eq "it leaves no file behind" "1" "$(ls -A "$VGPU_STATE_DIR/jobs" | wc -l)"
  run vgpu ps --json
  assert_eq "the job started before is intact (state, usage, limit)" "$before" \
    "$(printf '%s' "$out" | jq -r '.jobs[] | "\(.name) \(.state) \(.gpus[0].mem_used_bytes) \(.gpus[0].mem_limit_bytes)"')"
  # The library carried inside vgpu cannot be unpacked either.
  mkdir -p "$T_DIR/bin"
  cp "$VGPU_BUILD/vgpu" "$T_DIR/bin/vgpu"
  run env -u LD_PRELOAD "$T_DIR/bin/vgpu" run true
  assert_rc "unpacking the library on a full file system: 125" 125
  assert_contains "it says the file system may be full" "file system full" "$err"
  assert_eq "and leaves no partial library" "" "$(ls -A "$VGPU_STATE_DIR/lib")"
  rm -f "$tiny/fill"
  run vgpu run --mem 1G -- alloc_probe alloc 10M
  assert_rc "once there is room again, jobs run: 0" 0
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  holder=
  export VGPU_STATE_DIR=$T_DIR/state
else
  skip "a full file system under the state directory" "needs root and a tmpfs mount"
fi

# ---- every process slot of the job region taken ---------------------------------------------------
# slot_fill's 1024 processes take every slot (VGPU_REGION_MAX_SLOTS); a process of the job that then
# reaches the GPU cannot be counted, so it is refused the GPU, saying why. It ran "NOT limited"
# before (issue 35): a 2 GiB allocation under --mem 1G succeeded.
n=1024
vgpu run --name full --mem 1G -- bash -c 'slot_fill '$n' "$1" & f=$!
  wait_until 120 test -s "$1" || exit 1
  alloc_probe alloc 2G; echo "probe=$?"; kill $f' _ "$T_DIR/slots.ready" >"$T_DIR/full.out" 2>"$T_DIR/full.err"
assert_eq "slot_fill's $n processes hold every slot" "$n" "$(awk '{ print $1 }' "$T_DIR/slots.ready" 2>/dev/null)"
full_out=$(cat "$T_DIR/full.out") full_err=$(cat "$T_DIR/full.err")
assert_not_contains "a process that finds no slot is not run unlimited: its 2 GiB under --mem 1G fails" \
  "alloc rc=0" "$full_out"
assert_not_contains "... nor says NOT limited" "NOT limited" "$full_err"
assert_contains "it is refused the GPU, and says so" "could not be limited, so it is refused the GPU" "$full_err"
assert_contains "... saying why and what to do" "End idle processes of the job" "$full_err"

# ---- no file descriptors left --------------------------------------------------------------------
run bash -c 'ulimit -n 4; exec vgpu run true'
assert_rc "vgpu run without file descriptors: 125" 125
assert_contains "it says why" "Too many open files" "$err"
assert_contains "and what to do" "ulimit -n" "$err"

done_testing
