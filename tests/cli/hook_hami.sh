# libvgpu.so with HAMi-core's variables (no VGPU_REGION): strict sizes and percents, the traps
# of HAMi-core's parser rejected loudly (then no limit, said on stderr), one shared cache file
# = one job shared by its processes.
. "$(dirname "$0")/lib.sh"

lib=$VGPU_BUILD/libvgpu.so
n=0
hami() {   # hami VALUE STEPS...: CUDA_DEVICE_MEMORY_LIMIT=VALUE, a fresh cache file
  n=$((n + 1))
  local v=$1; shift
  run env CUDA_DEVICE_MEMORY_LIMIT="$v" CUDA_DEVICE_MEMORY_SHARED_CACHE="$T_DIR/cache.$n" \
    LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" alloc_probe "$@"
}
total_of() { printf '%s\n' "$out" | sed -n 's/^meminfo .*total=\([0-9]*\).*/\1/p' | head -1; }

hami 4096m meminfo
assert_eq "HAMi's device-plugin form 4096m is 4 GiB" 4294967296 "$(total_of)"
assert_eq "... and no message" "" "$err"
hami 1Gi meminfo
assert_eq "1Gi is 1 GiB (HAMi-core: 1 byte)" 1073741824 "$(total_of)"
hami 1024MB meminfo
assert_eq "1024MB is 1 GiB (binary, documented; HAMi-core: 1024 bytes)" 1073741824 "$(total_of)"
hami 010g meminfo
assert_eq "010g is ten GiB, never octal" 10737418240 "$(total_of)"
hami 1.5g meminfo
assert_eq "1.5g is 1.5 GiB (HAMi-core: 1 GiB)" 1610612736 "$(total_of)"
hami 0 meminfo
assert_eq "0 means no limit, as in HAMi" 84927315968 "$(total_of)"
assert_eq "... quietly" "" "$err"

for bad in 0x40000000 -1G 1e9 "4 G" 4X 99999999999999999999 1.0000000001K; do
  hami "$bad" meminfo alloc 2G
  assert_contains "'$bad' is rejected, quoting the value" "'$bad'" "$err"
  assert_contains "... loudly: the process runs WITHOUT limits" "WITHOUT GPU memory or compute limits" "$err"
  assert_eq "... and indeed has none" 84927315968 "$(total_of)"
done

run env CUDA_DEVICE_SM_LIMIT=50g CUDA_DEVICE_MEMORY_LIMIT=2G CUDA_DEVICE_MEMORY_SHARED_CACHE="$T_DIR/sm" \
  LD_PRELOAD="$lib" alloc_probe meminfo
assert_contains "CUDA_DEVICE_SM_LIMIT=50g is not a percent" "CUDA_DEVICE_SM_LIMIT: '50g'" "$err"
assert_eq "... so the memory limit is not applied either (never a silently partial limit)" 84927315968 "$(total_of)"

run env CUDA_DEVICE_MEMORY_LIMIT=8G CUDA_DEVICE_MEMORY_LIMIT_0=1G CUDA_DEVICE_MEMORY_SHARED_CACHE="$T_DIR/perdev" \
  LD_PRELOAD="$lib" alloc_probe meminfo alloc 600M
assert_eq "CUDA_DEVICE_MEMORY_LIMIT_0 overrides the global value for device 0" 1073741824 "$(total_of)"
assert_contains "... and is enforced with OUT_OF_MEMORY" "alloc rc=2" "$out"

# One cache file is one job: two processes share its limit.
cache=$T_DIR/shared
run sh -c 'CUDA_DEVICE_MEMORY_LIMIT=2G CUDA_DEVICE_MEMORY_SHARED_CACHE="$0" LD_PRELOAD="$1" alloc_probe alloc 1G hold > "$2/a" 2>&1 &
  wait_until 20 grep -q holding "$2/a"
  CUDA_DEVICE_MEMORY_LIMIT=2G CUDA_DEVICE_MEMORY_SHARED_CACHE="$0" LD_PRELOAD="$1" alloc_probe meminfo alloc 100M; kill $!' \
  "$cache" "$lib" "$T_DIR"
assert_contains "a second process sees the first one's usage (two contexts + 1 GiB)" "meminfo rc=0 free=0 total=2147483648" "$out"
assert_contains "... and cannot pass the shared limit" "alloc rc=2" "$out"
assert_eq "the shared cache is created 0600" 600 "$(stat -c %a "$cache")"

run env CUDA_DEVICE_MEMORY_LIMIT=1G CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" LD_PRELOAD="$lib" alloc_probe meminfo
assert_contains "a different limit than the cache's is an error naming both" "says 2 GiB" "$err"
assert_eq "... the cache's limit holds (it is the job's record)" 2147483648 "$(total_of)"

printf 'garbage' > "$T_DIR/corrupt"; chmod 600 "$T_DIR/corrupt"
run env CUDA_DEVICE_MEMORY_LIMIT=1G CUDA_DEVICE_MEMORY_SHARED_CACHE="$T_DIR/corrupt" LD_PRELOAD="$lib" alloc_probe meminfo
assert_contains "a corrupt cache file is reported" "cannot use the shared cache" "$err"
assert_eq "... and the program still runs (unlimited), never exits" "0" "$rc"

run env VGPU_REGION="$T_DIR/no-such-region" LD_PRELOAD="$lib" alloc_probe meminfo
assert_contains "a bad VGPU_REGION is reported loudly" "runs WITHOUT GPU limits" "$err"
assert_eq "... and the program still runs" "0" "$rc"
done_testing
