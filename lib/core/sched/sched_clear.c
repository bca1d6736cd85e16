/* sched_clear.c: keeping clear of a job expected back (vgpu/sched.h, "Keeping clear"), and the
 * spilling marks of jobs (limiter.c, "fair share"). A service
 * between requests publishes when it expects its next one; a holder it would preempt then queues
 * no work that would still run at that moment. The guesses are read from a segment every user
 * may write: each is validated (vgpu_sched_clear_until believes none further ahead than
 * VGPU_SCHED_CLEAR_AHEAD_NS), and a holder keeps clear only while it is not under its own cap, so
 * a garbage guess costs it nothing it is owed. */
#include "vgpu/arbiter.h"
#include "sched_internal.h"
#include "vgpu/proc.h"

void vgpu_sched_expect(struct vgpu_sched *s, int proc, uint64_t back_at, uint64_t gap, uint64_t late)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return;
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_EXPECT, s->handle, proc, back_at, gap, late);
        return;
    }
    struct vgpu_sched_job *j = (struct vgpu_sched_job *)ld_job_of(s->f, (unsigned)proc);
    if (!j)
        return;
    /* The gap first: a reader that sees the new time with the old gap is off by one guess only. */
    atomic_store(&j->back_gap, vgpu_sched_back_word(gap, late));
    atomic_store(&j->back_at, back_at);
}

uint64_t vgpu_sched_keep_clear(struct vgpu_sched *s, int proc, uint64_t now, uint64_t work_ns, uint64_t new_ns)
{
    struct vgpu_sched_file *f = s->f;
    if (!f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return 0;
    const struct vgpu_sched_job *mine = ld_job_of(f, (unsigned)proc);
    if (!mine)
        return 0;
    uint64_t start = atomic_load(&f->lease_start);
    if (start > now)
        start = now;
    /* How late its work may end after a return: the usual slack, more once the holder is under
     * its own cap (it has been getting less than it is owed, keeping clear), and none at all
     * once its credit is at its burst (it is losing what it is owed): it goes ahead. */
    int64_t q, credit = vgpu_sched_credit_now(mine, start, now, &q);
    /* Background (uncapped low) owes nobody and is owed nothing: it keeps clear with the usual
     * slack, whatever its credit reads. */
    bool background = ld_background(mine);
    if (!background && credit >= 2 * q - (int64_t)VGPU_SCHED_MIN_LEASE_NS)
        return 0;
    uint64_t tol = !background && credit >= 2 * q - q / 2 ? VGPU_SCHED_CLEAR_LATE_NS : VGPU_SCHED_CLEAR_TOL_NS;
    /* Short intervals stop close to the return at little cost: the slack is at most a quarter of
     * the new interval (a request of 0.8 ms beside 0.5 ms intervals waited 0.4 ms more, p50 1.1
     * against 0.9 alone on the simulated GPU, with 0.5 ms of slack). */
    if (tol > new_ns / 4 * (tol == VGPU_SCHED_CLEAR_LATE_NS ? 2 : 1))
        tol = new_ns / 4 * (tol == VGPU_SCHED_CLEAR_LATE_NS ? 2 : 1);
    uint64_t soonest = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++) {
        const struct vgpu_sched_job *j = &f->jobs[i];
        if (j == mine || !atomic_load(&j->key))
            continue;
        /* A late return is waited for by a capped holder only: background fills the GPU's idle
         * time, and waiting out each late return cost it 2-8 points of its rate beside a service
         * 10 ms apart on a busy machine (core_recipe.sh: 0.81-0.87 against 0.89). */
        uint64_t word = atomic_load(&j->back_gap);
        uint64_t until = vgpu_sched_clear_until(now, work_ns, new_ns, atomic_load(&j->back_at), vgpu_sched_back_gap(word),
                                                background ? 0 : vgpu_sched_back_late(word), tol);
        /* Its return is a request: new work after a lease it gave back idle. */
        if (until && (!soonest || until < soonest) && vgpu_sched_outranks(j, mine, start, now, true, true))
            soonest = until;
    }
    /* Never past the moment our credit reaches the burst while we wait (it accrues at the cap's
     * rate): a guess always 100 ms ahead, written by someone hostile, would otherwise let us run
     * a millisecond in a hundred. */
    unsigned cap = ld_cap(mine);
    uint64_t fill = cap ? (uint64_t)(2 * q - credit) * 100 / cap : 0;
    if (background)
        fill = VGPU_SCHED_CLEAR_AHEAD_NS;   /* nothing owed to lose; any job may preempt it anyway */
    if (soonest > now + fill)
        soonest = now + fill;
    return soonest;
}

/* ---- spilling jobs (a spilling job's fair share, limiter.c) ----------------------------------------- */

void vgpu_sched_set_spilling(struct vgpu_sched *s, int job, bool spilling)
{
    if (s->f && job >= 0 && job < VGPU_SCHED_MAX_JOBS &&
        atomic_load_explicit(&s->f->jobs[job].spilling, memory_order_relaxed) != (spilling ? 1u : 0u)) {
        if (s->remote)
            vgpu_arb_send(s->gen, VGPU_ARB_SPILLING, s->handle, -1, (uint64_t)job, spilling, 0);
        else
            atomic_store(&s->f->jobs[job].spilling, spilling ? 1u : 0u);
    }
}

bool vgpu_sched_pid_spilling(struct vgpu_sched *s, pid_t pid)
{
    struct vgpu_sched_file *f = s->f;
    if (!f || pid <= 0)
        return false;
    uint32_t view = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        uint64_t p = atomic_load(&f->procs[i].pid);
        const struct vgpu_sched_job *j = p ? ld_job_of(f, i) : NULL;
        if (!j || atomic_load(&j->spilling) != 1)
            continue;
        /* An entry records the pid its process sees for itself. In a container (another PID
         * namespace) that pid means nothing here, and NVML reports the host's: find the process
         * in our view (vgpu/proc.h). Where we cannot see its namespace (we are the container),
         * its pid is taken as NVML's, as the host's processes' are. */
        uint64_t ns = atomic_load(&f->procs[i].pidns);
        if (ns && !view)
            view = vgpu_proc_view_ns();
        pid_t here = (pid_t)p;
        if (ns && ns != view) {
            struct vgpu_proc_id id = { .pid = (pid_t)p, .pidns = (uint32_t)ns,
                                       .start = atomic_load(&f->procs[i].start) };
            pid_t seen = 0;
            enum vgpu_liveness l = vgpu_proc_liveness(&id, &seen);
            if (l == VGPU_PROC_DEAD)
                continue;
            if (l == VGPU_PROC_ALIVE && seen > 0)
                here = seen;
        }
        if (here == pid)
            return true;
    }
    return false;
}
