/* vgpu run --detach: the caller waits for the job's id, the supervisor sends it (vgpu-run(1)). */
#ifndef VGPU_CMD_RUN_DETACH_H
#define VGPU_CMD_RUN_DETACH_H

#include <sys/types.h>
#include "vgpu/log.h"
#include "vgpu/region.h"

/* The caller's side: prints the job id the supervisor (its child) sends, and returns 0; or the
 * supervisor's status when it failed (it said why on the shared stderr). */
int vgpu_run_detach_wait(pid_t supervisor, int sock);
/* The supervisor's side, once the job exists: its I/O to the job's log, then the id to the
 * caller. 0, or -1 with e set. */
int vgpu_run_detach_io(const struct vgpu_region *r, int sock, struct vgpu_err *e);

#endif
