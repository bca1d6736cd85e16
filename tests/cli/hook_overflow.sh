# Sizes whose arithmetic does not fit in 64 bits (lib/hook/mem.c, lib/hook/vmm.c): the charge
# saturates, so a limit refuses them with CUDA_ERROR_OUT_OF_MEMORY (2), instead of wrapping to a
# few bytes that pass any limit; a bogus mip level count cannot spin the library.
. "$(dirname "$0")/lib.sh"

line() { printf '%s\n' "$out" | grep "^$1 " | head -n 1; }

# 2^62 floats a row: 2^64 bytes, which wrapped to a row of 0 bytes.
run vgpu run --mem 1G -- alloc_probe array3d 4611686018427387904 1 1 meminfo
assert_rc "an array of 2^64 bytes: the job runs" 0
assert_contains "an array of 2^64 bytes is refused by the 1G limit" "array3d rc=2" "$(line array3d)"
run vgpu run --mem 1G -- alloc_probe array 4611686018427387904 1
assert_contains "a 2D array of 2^64 bytes is refused too" "array rc=2" "$(line array)"

# A pitched width 100 bytes short of 2^64: rounding it up to 512 wrapped to 0.
run vgpu run --mem 1G -- alloc_probe pitch 18446744073709551516 2
assert_contains "a pitched allocation with a width near 2^64 is refused" "pitch rc=2" "$(line pitch)"

# 4 billion mip levels: the driver refuses them (INVALID_VALUE, 1); the library must not spend
# minutes summing them first.
start=$(date +%s)
run timeout 20 vgpu run --mem 1G -- alloc_probe mipmap 64 64 4294967295
assert_contains "4 billion mip levels reach the driver, which refuses them" "mipmap rc=1" "$(line mipmap)"
took=$(( $(date +%s) - start ))
if [ "$took" -lt 10 ]; then ok "and that takes no time (${took} s)"; else not_ok "4 billion mip levels took ${took} s"; fi

# Ordinary sizes are charged as before.
run vgpu run --mem 1G -- alloc_probe pitch 1000 1000 array3d 1024 1024 1 mipmap 256 256 9 meminfo
assert_contains "an ordinary pitched allocation succeeds" "pitch rc=0" "$(line pitch)"
assert_contains "an ordinary array succeeds" "array3d rc=0" "$(line array3d)"
assert_contains "an ordinary mipmapped array succeeds" "mipmap rc=0" "$(line mipmap)"

done_testing
