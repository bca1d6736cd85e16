# vgpu mode/timeslice/mps --json against man/vgpu-json.7, key by key (the checker is
# tests/cli/jsondoc.lib, as in json_doc.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jsondoc.lib"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
P=$T_DIR/pipe
run vgpu mode get --json;                        check_doc "vgpu mode get --json" "$out"
VGPU_FAKE_ROOT=1 run vgpu mode set prohibited --json; check_doc "vgpu mode set --json" "$out"
run vgpu timeslice get --json;                   check_doc "vgpu timeslice get --json" "$out"
VGPU_FAKE_ROOT=0 run vgpu timeslice set short --json; check_doc "vgpu timeslice set --json" "$out"
run vgpu mps status --pipe-dir "$P" --json;      check_doc "vgpu mps status --json" "$out"
run vgpu mps stop --pipe-dir "$P" --json;        check_doc "vgpu mps stop --json" "$out"
run vgpu mps start --pipe-dir "$P" --log-dir "$T_DIR/log" --gpu 0 --json; check_doc "vgpu mps start --json" "$out"
run vgpu mps set --core 40 --mem 1G --json;      check_doc "vgpu mps set --json" "$out"
CUDA_MPS_PIPE_DIRECTORY=$P LD_PRELOAD=$VGPU_BUILD/fakegpu/libcuda.so.1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20 sleep 20 &
client=$!
# one_client: vgpu mps status lists the client ($out is kept: wait_until runs it in this shell)
one_client() { run vgpu mps status --json; [ "$(jq '.servers[0].clients | length' <<<"$out")" = 1 ]; }
wait_until 20 one_client
check_doc "vgpu mps status --json" "$out"
run vgpu mps stop --json;                        check_doc "vgpu mps stop --json" "$out"
kill $client 2>/dev/null; wait $client 2>/dev/null || true
done_testing
