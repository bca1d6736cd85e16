/* sched_internal.h: validated reads of the shared schedule segment, for sched.c and
 * sched_lease.c. Every user may write the segment, so every value read from it is clamped here
 * before it is used: garbage costs accuracy, never a crash or a long wait. */
#ifndef VGPU_CORE_SCHED_INTERNAL_H
#define VGPU_CORE_SCHED_INTERNAL_H

#include "vgpu/sched.h"

static inline unsigned ld_cap(const struct vgpu_sched_job *j)
{
    unsigned c = atomic_load(&j->cap);
    return c > 100 ? 100 : c;
}

static inline int ld_prio(const struct vgpu_sched_job *j)
{
    int p = atomic_load(&j->prio);
    return p > 0 ? VGPU_PRIO_HIGH : p < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
}

/* An uncapped priority class (vgpu/sched.h, "Uncapped priority classes"): only with a priority
 * other than normal (a garbage flag on a normal job changes nothing). */
static inline bool ld_uncapped(const struct vgpu_sched_job *j)
{
    return (atomic_load(&j->soft) & VGPU_SCHED_UNCAPPED) && ld_prio(j) != VGPU_PRIO_NORMAL;
}

/* Background: uncapped low priority, never entitled; it runs on what others leave. */
static inline bool ld_background(const struct vgpu_sched_job *j)
{
    return ld_uncapped(j) && ld_prio(j) == VGPU_PRIO_LOW;
}

/* A job's credit and its time, clamped to what the arithmetic can produce: [-debt, burst], and a
 * time not in the future (which would freeze the credit). */
static inline void ld_credit(const struct vgpu_sched_job *j, unsigned cap, uint64_t now, int64_t *credit, uint64_t *t)
{
    int64_t c = atomic_load(&j->credit);
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    if (c > burst)
        c = burst;
    if (c < -(int64_t)VGPU_SCHED_DEBT_NS)
        c = -(int64_t)VGPU_SCHED_DEBT_NS;
    uint64_t ct = atomic_load(&j->credit_t);
    *credit = c;
    *t = ct > now ? now : ct;
}

static inline const struct vgpu_sched_job *ld_job_of(const struct vgpu_sched_file *f, unsigned proc)
{
    if (proc >= VGPU_SCHED_MAX_PROCS)
        return NULL;
    unsigned jn = atomic_load(&f->procs[proc].job);
    return jn < VGPU_SCHED_MAX_JOBS ? &f->jobs[jn] : NULL;
}

/* A waiter of job `w` may preempt a holder of job `h` whose lease began at `start`
 * (sched_lease.c); `new_work`: its work arrived during that lease; `request`: and its last lease
 * was given back idle. */
bool vgpu_sched_outranks(const struct vgpu_sched_job *w, const struct vgpu_sched_job *h, uint64_t start,
                         uint64_t now, bool new_work, bool request);
/* Job `j`, holding a lease since `start` (or not: start = now), is under its cap: its credit, less
 * the lease not yet settled, is near its burst (one and a half quanta). */
bool vgpu_sched_under_cap(const struct vgpu_sched_job *j, uint64_t start, uint64_t now);
/* Job `j`'s credit at `now`, less the lease held since `start` (not settled yet); *quantum its
 * quantum. */
int64_t vgpu_sched_credit_now(const struct vgpu_sched_job *j, uint64_t start, uint64_t now, int64_t *quantum);

#endif
