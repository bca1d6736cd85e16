# The job's limits page is mapped from a read-only descriptor (issue 12 item 2): a process of the
# job that tries to make the library's mapping of it writable with mprotect is refused, and its
# limit holds. The usage part stays writable: the job still accounts.
. "$(dirname "$0")/lib.sh"

run vgpu run --mem 1G -- limits_poke 2048
assert_rc "the poking program runs" 0
assert_contains "it found the library's mapping of the limits page" "mapped=1" "$out"
assert_contains "mprotect(PROT_WRITE) on the limits page is refused" "mprotect=EACCES" "$out"
assert_contains "the limit was not raised: 2 GiB under 1 GiB is OUT_OF_MEMORY" "poked=0 alloc rc=2" "$out"

# Accounting into the usage part still works: a 256 MiB allocation is charged (context + 256 MiB).
run vgpu run --mem 1G -- alloc_probe alloc 256M meminfo
assert_contains "the job's processes still account their usage" "used=805306368" "$out"

done_testing
