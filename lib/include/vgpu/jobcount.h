/* The split count (issue 15): at most N jobs on one GPU, machine-wide, so that oversubscription
 * cannot pile unlimited jobs on a GPU.
 *
 * In the machine-wide directory (vgpu/machinedir.h, DESIGN.md decision 10):
 *   policy                  root's settings, read strictly: owned by root, a regular file, mode
 *                           0644 exactly; lines "max-jobs-per-gpu N" (1..1000), '#' comments and
 *                           blank lines; anything else is an error naming the line.
 *   jobcount/PID.START      one file per running `vgpu run` (0644, O_EXCL): its GPUs' UUIDs, one
 *                           a line. Entries of dead processes are ignored and removed by whoever
 *                           looks next; a kill -9 never holds a count.
 *   jobcount/.lock          flock around every count-and-register, so two `vgpu run` calls
 *                           cannot both take the last place.
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
/* Removes this process's registration (the job ended). */
void vgpu_jobcount_leave(void);
/* How many running jobs are registered on the GPU with this UUID (-1: cannot be read). */
int vgpu_jobcount_count(const char *uuid);

#endif
