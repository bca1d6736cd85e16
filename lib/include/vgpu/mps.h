/* Talking to the MPS control daemon (nvidia-cuda-mps-control), reference/nvml.md §16.
 *
 * The control program is both the daemon (`-d`) and its client: each command is one run with
 * the command on stdin, and the reply is what it prints. Its exit status says little: it is 0
 * for unknown commands ("Unknown command \"x\"") and for "Server N not found"; it is 1 with
 * "Cannot find MPS control daemon process" when no daemon listens on the pipe directory, and
 * 1 with "An instance of this daemon is already running" for a second `-d`. So replies are
 * parsed, not statuses trusted.
 *
 * The daemon is found by its pipe directory (CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps),
 * which holds `control` (socket), `control_privileged`, `control_lock`, `log` (fifo) and
 * `nvidia-cuda-mps-control.pid` (the daemon's pid, no newline; removed on quit).
 * vgpu-side code (not used by libvgpu.so). */
#ifndef VGPU_MPS_H
#define VGPU_MPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

#define VGPU_MPS_DEFAULT_PIPE_DIR "/tmp/nvidia-mps"
#define VGPU_MPS_DEFAULT_LOG_DIR  "/var/log/nvidia-mps"
#define VGPU_MPS_PID_FILE         "nvidia-cuda-mps-control.pid"

/* $VGPU_MPS_CONTROL, else "nvidia-cuda-mps-control" on PATH. */
const char *vgpu_mps_control_path(void);
/* $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps. */
const char *vgpu_mps_default_pipe_dir(void);
/* $CUDA_MPS_LOG_DIRECTORY, else /var/log/nvidia-mps. */
const char *vgpu_mps_default_log_dir(void);

/* The control daemon's pid from the pipe directory's pid file, when that process is alive;
 * 0 otherwise. */
pid_t vgpu_mps_daemon_pid(const char *pipe_dir);

/* Sends one command to the daemon of pipe_dir and returns its reply (stdout, trailing
 * whitespace removed) in reply. -1 with e set when the program cannot be run, when no daemon
 * answers (VGPU_EXIT_NOT_FOUND, with how to start one), or when the daemon does not know the
 * command (VGPU_EXIT_FAIL: the control daemon is older than this command). */
int vgpu_mps_cmd(const char *pipe_dir, const char *cmd, char *reply, size_t len, struct vgpu_err *e);

/* ---- replies ---------------------------------------------------------------------------------- */

/* Pids, one a line (get_server_list, get_client_list): count (0 for an empty reply), or -1
 * when a line is not a pid (an error text). */
int vgpu_mps_parse_pids(const char *text, pid_t *pids, int max);
/* "30.0" -> 30.0 (get/set_*active_thread_percentage): 0, or -1 when not a percentage. */
int vgpu_mps_parse_percent(const char *text, double *pct);
/* "2G", "512M", "1536K", "" (unset -> *bytes = 0) from *_pinned_mem_limit: 0, or -1. */
int vgpu_mps_parse_size(const char *text, uint64_t *bytes);
/* The form the daemon accepts: whole GiB as "NG", else whole MiB as "NM" (rounded down;
 * at least 1M). */
void vgpu_mps_format_size(uint64_t bytes, char *buf, size_t len);
/* True for replies that are an error text rather than a value: "Unknown command ...",
 * "Server N not found", "Cannot find MPS control daemon process", "... failed ...". */
bool vgpu_mps_reply_is_error(const char *text);

#endif
