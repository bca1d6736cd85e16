/* The split count (issue 15): at most N jobs on one GPU, so that oversubscription cannot pile
 * unlimited jobs on a GPU.
 *
 *   policy      root's settings, in the machine-wide directory (vgpu/machinedir.h), read strictly:
 *               owned by root, a regular file, mode 0644 exactly; lines "max-jobs-per-gpu N"
 *               (1..1000), '#' comments and blank lines; anything else is an error naming the line.
 *   the count   kept by the arbiter (vgpu daemon, cmd/daemon/place.c) for every user's jobs, each
 *               entry ending with the `vgpu run` connection that made it; the daemon reads root's
 *               policy itself. Without the arbiter, in the caller's state directory (this user's
 *               jobs only): jobcount/PID.START, one file per running `vgpu run` (its GPUs' UUIDs,
 *               a line each; entries of dead processes are removed by whoever looks next) and
 *               jobcount/.lock, flock'd around every count-and-register.
 * vgpu-side code. */
#ifndef VGPU_JOBCOUNT_H
#define VGPU_JOBCOUNT_H

#include <stdbool.h>
#include <sys/types.h>
#include "vgpu/log.h"

#define VGPU_MAX_JOBS_LIMIT 1000

/* "N" (1..VGPU_MAX_JOBS_LIMIT), decimal only. 0, or -1 with e (VGPU_EXIT_USAGE). */
int vgpu_jobcount_parse(const char *text, const char *what, unsigned *n, struct vgpu_err *e);

/* Root's max-jobs-per-gpu from <machinedir>/policy: *max = 0 when there is no policy file or
 * it sets none. A file that is not root's, writable by others, or has a bad line: -1 with e
 * (VGPU_EXIT_STATE, or VGPU_EXIT_PERMISSION), so a broken policy is never silently ignored. */
int vgpu_jobcount_policy(unsigned *max, struct vgpu_err *e);

/* Counts the jobs running on each of uuids[0..n) and registers this process on them, under the
 * lock. The limit is min(max, root's policy) (0: none). When a GPU is at the limit: with wait,
 * polls every 200 ms until there is room; else -1 with e (VGPU_EXIT_NO_CAPACITY) giving the
 * count. Without the machine-wide directory and without any limit: 0, not registered. */
int vgpu_jobcount_enter(const char *const *uuids, unsigned n, unsigned max, bool wait, struct vgpu_err *e);
/* Takes over the registration of process `from` (vgpu run --detach's caller). */
int vgpu_jobcount_adopt(pid_t from, struct vgpu_err *e);
/* While the job runs (every walk of vgpu run): a restarted arbiter counts this job again. */
void vgpu_jobcount_keep(void);
/* Removes this process's registration (the job ended). */
void vgpu_jobcount_leave(void);
/* Once the job's command runs: the entry in the state directory lasts as long as it does too
 * (vgpu/holder.h), so a killed vgpu run keeps its job's place. 0, or -1 (errno). */
int vgpu_jobcount_hold(pid_t command);
/* How many running jobs are registered on the GPU with this UUID (-1: cannot be read). */
int vgpu_jobcount_count(const char *uuid);

#endif
