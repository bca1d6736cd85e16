/* What 'vgpu mps start' records about the daemon it started (STATE_DIR/mps.json), so that
 * 'vgpu mps stop|status|set' and 'vgpu run --mps' find its pipe directory; and the pieces of
 * 'vgpu mps' that 'vgpu run --mps' shares. */
#ifndef VGPU_CMD_MPSREC_H
#define VGPU_CMD_MPSREC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

#define VGPU_MPS_REC_GPUS 16

struct vgpu_mps_rec {
    char pipe_dir[4096];
    char log_dir[4096];
    pid_t daemon_pid;
    bool all_gpus;                               /* started without --gpu */
    unsigned ngpus;
    char gpus[VGPU_MPS_REC_GPUS][96];            /* UUIDs, in the daemon's device order */
};

/* The state directory (created when missing); "." when it cannot be had (the error is then
 * reported by whoever writes). */
const char *vgpu_mps_state_dir(void);
int vgpu_mps_rec_load(struct vgpu_mps_rec *rec, struct vgpu_err *e);
int vgpu_mps_rec_save(const struct vgpu_mps_rec *rec, struct vgpu_err *e);
void vgpu_mps_rec_remove(void);

/* Prints 'vgpu mps status' for the live daemon of pipe_dir. rec: the record when it is this
 * daemon's, else NULL. ndev: device indexes to ask pinned limits for. Returns the exit code. */
int vgpu_mps_show_status(const char *pipe_dir, const struct vgpu_mps_rec *rec, unsigned ndev, bool json);

/* For 'vgpu run --mps': finds the daemon ($CUDA_MPS_PIPE_DIRECTORY, the record, or
 * /tmp/nvidia-mps), checks that it serves the job's GPUs (uuids[0..ndev)), and sets this
 * process's environment so that the job becomes its client: CUDA_MPS_PIPE_DIRECTORY;
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE when core_pct (0 = none); CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * "0=SIZE,1=SIZE..." from mem[d] (job device d; 0 = none). Warns when the daemon serves a user
 * other than job_uid (the job's, vgpu run --user's or the caller's) now: MPS makes the job wait.
 * 0, or -1 with e set (no daemon: how to start one). */
int vgpu_mps_client_setup(const char *const *uuids, const uint64_t *mem, unsigned ndev, unsigned core_pct,
                          uid_t job_uid, struct vgpu_err *e);

#endif
