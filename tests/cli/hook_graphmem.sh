# Graph memory and stream-ordered frees at the job's limit (issue 11 part 6, issue 18 items 6-7):
# memory-allocation nodes (cuGraphAddMemAllocNode, cuGraphAddNode, stream capture of
# cuMemAllocAsync) are refused with CUDA_ERROR_OUT_OF_MEMORY at the limit, from node creation,
# instantiation with upload, or launch; the simulated GPU keeps graph memory in use until the
# free node runs, and cuMemFreeAsync memory until its stream gets there.
# h100 scenario: a context costs 512 MiB, so a 1 GiB job has 512 MiB for graphs. Modules cost
# nothing here (VGPU_FAKE_MODULE_BYTES=0), so the figures are the context and the graphs alone.
. "$(dirname "$0")/lib.sh"

export VGPU_FAKE_MODULE_BYTES=0
MIB=1048576
probe() { run vgpu run --mem 1G -- graph_probe "$@"; }
line() { printf '%s\n' "$out" | grep -E "^$1 " | sed -n "${2:-1}p"; }

LIM="used=1073741824 limit=1073741824"
probe leak 256M 16 region
assert_eq "256 MiB allocation nodes, each in its own graph, launched and never freed, stop at 1 GiB" \
  "leak count=2 rc=2 stage=add" "$(line leak)"
assert_eq "... with the job charged its limit exactly (context + 2 graphs), never more" "region $LIM" "$(line region)"
assert_match "... and the refusal names cuGraphAddMemAllocNode" \
  "cuGraphAddMemAllocNode of 256 MiB on GPU 0 refused with CUDA_ERROR_OUT_OF_MEMORY" "$err"

probe leaklate 256M 4 region
assert_eq "graphs built while memory was free are refused at launch" \
  "leaklate built=4 count=2 rc=2 stage=launch" "$(line leaklate)"
assert_eq "... and the refused launch took nothing" "region $LIM" "$(line region)"
assert_match "... the refusal names cuGraphLaunch" "cuGraphLaunch of 256 MiB on GPU 0 refused" "$err"

probe leaklatev2 256M 4 region
assert_eq "the same with graphs instantiated by the CUDA 11 cuGraphInstantiate_v2" \
  "leaklatev2 built=4 count=2 rc=2 stage=launch" "$(line leaklatev2)"
assert_eq "... charged the limit exactly" "region $LIM" "$(line region)"

probe addnode 256M 16 region
assert_eq "cuGraphAddNode(MEM_ALLOC) nodes stop at the limit too" "addnode count=2 rc=2 stage=add" "$(line addnode)"
assert_eq "... charged the limit exactly" "region $LIM" "$(line region)"

probe capture 256M 16 region
assert_eq "graphs made by stream capture of cuMemAllocAsync stop at the limit" \
  "capture count=2 rc=2 stage=add" "$(line capture)"
assert_eq "... charged the limit exactly" "region $LIM" "$(line region)"

probe upload 256M 4 region
assert_eq "cuGraphInstantiateWithParams with FLAG_UPLOAD is refused at the limit" \
  "upload built=4 count=2 rc=2 stage=instantiate" "$(line upload 2)"
assert_eq "... reporting CUDA_GRAPH_INSTANTIATE_ERROR" "upload result_out=1" "$(line upload 1)"
assert_eq "... charged the limit exactly" "region $LIM" "$(line region)"

probe cycle 500M 10 region
assert_eq "a graph that frees its own 500 MiB relaunches within the limit (the memory comes back in stream order)" \
  "cycle count=10 rc=0" "$(line cycle)"
assert_eq "... charged once" "region used=$((1012 * MIB)) limit=1073741824" "$(line region)"

# The simulated GPU: graph memory stays in use until the free node runs. (The kernels before the
# frees run 1 s, so a loaded machine cannot reach the free before the probe looks.)
probe pending 256M 1000 region meminfo
assert_eq "graph memory is in use after cuGraphLaunch until the stream runs the free node" \
  "pending launched=$((256 * MIB)) synced=0" "$(line pending)"
assert_eq "... and charged in the job region meanwhile" "region used=$((768 * MIB)) limit=1073741824" "$(line region)"

# cuMemFreeAsync: the memory stays in use until the stream gets there, so an allocation on
# another stream meanwhile grows the pool, and the job is charged for both.
probe asyncfree 200M 1000 region meminfo sync trim region meminfo
assert_eq "an allocation on another stream before the free ran grows the pool" \
  "asyncfree rc=0 reserved=$((400 * MIB))" "$(line asyncfree)"
assert_contains "... and the job is charged the pool's 400 MiB" "used=$((912 * MIB))" "$(line meminfo 1)"
assert_eq "... in the job region too (read before the job's own view)" "region used=$((912 * MIB)) limit=1073741824" \
  "$(line region 1)"
assert_contains "after synchronize and trim, only the live allocation is charged" "used=$((712 * MIB))" "$(line meminfo 2)"
assert_eq "... in the job region too" "region used=$((712 * MIB)) limit=1073741824" "$(line region 2)"
probe asyncfree 300M 1000 region
assert_eq "... and at the limit that allocation is refused: the freed memory is not back yet" \
  "asyncfree rc=2 reserved=$((300 * MIB))" "$(line asyncfree)"
assert_eq "... the job never passes its limit" "region used=$((812 * MIB)) limit=1073741824" "$(line region)"

# cuMemFreeAsync also frees cuMemAlloc memory: its charge is given back, so the whole limit can
# be allocated that way again and again.
probe linearasync 500M linearasync 500M linearasync 500M region
assert_eq "cuMemAlloc memory freed with cuMemFreeAsync is given back (3 x 500 MiB in a 1 GiB job)" \
  "linearasync rc=0|linearasync rc=0|linearasync rc=0" "$(printf '%s\n' "$out" | grep '^linearasync' | paste -sd'|')"
assert_eq "... and the job holds only its context" "region used=$((512 * MIB)) limit=1073741824" "$(line region)"

done_testing
