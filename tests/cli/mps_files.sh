# vgpu mps and the files it reads in a pipe directory anyone may have created first
# (/tmp/nvidia-mps by default): a planted pid file never makes vgpu signal a process that is not
# the file owner's, and a pid file that is a symlink or a FIFO is not followed or waited on.
. "$(dirname "$0")/lib.sh"
P=$T_DIR/pipe
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
mkdir -m 0755 "$P"
sleep 300 &
victim=$!

if [ "$(id -u)" = 0 ]; then
  # A user's file naming one of root's processes: root's stop --force must not kill it.
  echo "$victim" > "$P/nvidia-cuda-mps-control.pid"
  chown nobody "$P/nvidia-cuda-mps-control.pid" "$P"
  run vgpu mps stop --pipe-dir "$P" --timeout 1 --force
  assert_rc "stop with a planted pid file: nothing to stop, 0" 0
  check "the process the planted file names is not killed" kill -0 "$victim"
  assert_contains "the planted file is reported" "does not run as the file's owner" "$err"
  chown root "$P"
  rm -f "$P/nvidia-cuda-mps-control.pid"
else
  skip "stop with a planted pid file" "needs root"
fi

# A symlink to a real pid file is not followed.
echo "$victim" > "$T_DIR/real.pid"
ln -s "$T_DIR/real.pid" "$P/nvidia-cuda-mps-control.pid"
run vgpu mps stop --pipe-dir "$P" --timeout 1 --force
assert_rc "stop with a symlinked pid file: nothing to stop, 0" 0
check "the process behind the symlink is not killed" kill -0 "$victim"
rm -f "$P/nvidia-cuda-mps-control.pid"

# A FIFO does not block vgpu mps status.
mkfifo "$P/nvidia-cuda-mps-control.pid"
run timeout 10 vgpu mps status --pipe-dir "$P"
assert_rc "status with a FIFO as the pid file: not running, 0" 0
assert_contains "it says no daemon runs" "No MPS control daemon" "$out"

kill "$victim"

done_testing
