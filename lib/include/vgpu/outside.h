/* GPU processes of a job that are outside the limiter (lib/core/gpu/outside.c).
 *
 * A child that unsets LD_PRELOAD, a static binary, a library loaded with RTLD_DEEPBIND: they
 * use the GPU without libvgpu.so, so nothing of theirs is in the job region. vgpu cannot stop
 * them, but it does not hide them: every process in NVML's list of a job GPU that descends
 * from the job (its `vgpu run` process or one of its processes, by /proc PPid chains) and is
 * not one of the job's processes under the limiter is the job's memory "outside the limiter".
 * Readers (vgpu ps, vgpu top) and the job's own processes (at most once a second, when they
 * allocate) record the sum per device in the region (outside_bytes), and reservations count it
 * against the limit: while the job as a whole is over its limit, its own allocations fail.
 * libc only (linked into libvgpu.so). */
#ifndef VGPU_OUTSIDE_H
#define VGPU_OUTSIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu/region.h"

#define VGPU_OUTSIDE_MAX_PIDS 8

struct vgpu_outside {
    uint64_t bytes;                     /* sum of their NVML used memory */
    unsigned count;                     /* how many processes (may exceed VGPU_OUTSIDE_MAX_PIDS) */
    pid_t pid[VGPU_OUTSIDE_MAX_PIDS];   /* host pids, in NVML's order */
    uint64_t pid_bytes[VGPU_OUTSIDE_MAX_PIDS];
};

/* From one job device's NVML process list (pids[i] with bytes[i], as NVML reports them: host
 * pids), the job's processes outside the limiter. false (and nothing found) when the caller
 * cannot tell: its /proc does not show the pids NVML reports (it lives in another PID namespace
 * than the job's creator); then it must not record anything. Reads /proc only for pids that
 * are not the job's known processes. */
bool vgpu_outside_find(const struct vgpu_region *r, const unsigned *pids, const uint64_t *bytes, unsigned n,
                       struct vgpu_outside *out);

/* Parents read from /proc during one pass over many jobs (vgpu top, vgpu ps): each pid's parent
 * is read once per pass instead of once per job. Zero-initialise it; reset it at the start of
 * each pass (a pid's parent changes when it is reparented, and pids are reused); free it at the
 * end. */
struct vgpu_outside_memo {
    struct { pid_t pid, ppid; } *e;     /* sorted by pid */
    size_t n, cap;
};
void vgpu_outside_memo_reset(struct vgpu_outside_memo *m);
void vgpu_outside_memo_free(struct vgpu_outside_memo *m);
/* Records a parent the caller read anyway (vgpu top reads /proc/PID/stat for CPU %). */
void vgpu_outside_memo_put(struct vgpu_outside_memo *m, pid_t pid, pid_t ppid);
/* vgpu_outside_find with the parents of `memo` (NULL: none kept). */
bool vgpu_outside_find_memo(const struct vgpu_region *r, const unsigned *pids, const uint64_t *bytes, unsigned n,
                            struct vgpu_outside_memo *memo, struct vgpu_outside *out);

#endif
