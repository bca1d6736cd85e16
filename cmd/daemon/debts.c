/* What a login's ended jobs still owe on a GPU (issue 35, "job-key cycling"). A job whose last
 * process leaves keeps its debt but no credit (vgpu_sched_forfeit), and its entry stays a second
 * (ARB_LEFT_JOB_NS) for the job's next process. A new job, though, started with one quantum of
 * credit: a client that ended its job after each lease and came back under a new job key had its
 * overrun forgotten and a fresh turn every time. So the debt moves to the login: the credit the
 * ended job would have now (its debt, repaid at its cap's rate since it ended) is what the login's
 * next new job on this GPU starts with, at most the quantum any new job gets, for ARB_DEBT_KEEP_NS
 * after the end. A new job of a login with nothing recorded starts with its quantum as before. */
#include "daemon/server.h"

/* Long enough to outlast any debt the lease rules let a job run up (one lease's overrun, repaid
 * within a few seconds even at a 1 % cap), short enough for the table to stay small. */
#define ARB_DEBT_KEEP_NS 10000000000ULL

static bool alive(const struct arb_debt *d, uint64_t now)
{
    return d->at && d->at <= now && now - d->at < ARB_DEBT_KEEP_NS;
}

/* The credit a record stands at now, as its job's entry would (accrued at the job's cap, at most
 * its burst). */
static int64_t standing(const struct arb_debt *d, uint64_t now)
{
    return vgpu_sched_credit_at(d->credit, d->credit_t, d->cap, now);
}

void arb_debt_keep(struct arb_gpu *g, unsigned j, uint64_t now)
{
    const struct vgpu_sched_job *e = &g->s.f->jobs[j];
    if (atomic_load(&e->soft) & VGPU_SCHED_UNCAPPED)
        return;   /* an uncapped class has no budget: nothing owed */
    int64_t credit = vgpu_sched_credit_at(atomic_load(&e->credit), atomic_load(&e->credit_t), atomic_load(&e->cap), now);
    uid_t login = g->job_login[j];
    struct arb_debt *own = NULL, *free_one = NULL, *oldest = &g->debts[0];
    for (unsigned i = 0; i < ARB_DEBTS; i++) {
        struct arb_debt *d = &g->debts[i];
        if (alive(d, now) && d->login == login)
            own = d;
        else if (!alive(d, now) && !free_one)
            free_one = d;
        if (d->at < oldest->at)
            oldest = d;
    }
    /* Every record live and none the login's: the oldest goes (one login has one record, so
     * that takes ARB_DEBTS logins ending jobs within ARB_DEBT_KEEP_NS). */
    struct arb_debt *slot = own ? own : free_one ? free_one : oldest;
    unsigned cap = atomic_load(&e->cap);
    if (own && standing(own, now) < credit) {
        credit = standing(own, now);   /* the login owed more already (another job of its): that holds */
        cap = own->cap;
    }
    *slot = (struct arb_debt){ .login = login, .cap = cap, .credit = credit, .credit_t = now, .at = now };
}

void arb_debt_apply(struct arb_gpu *g, unsigned j, uint64_t now)
{
    uid_t login = g->job_login[j];
    for (unsigned i = 0; i < ARB_DEBTS; i++) {
        const struct arb_debt *d = &g->debts[i];
        if (!alive(d, now) || d->login != login)
            continue;
        struct vgpu_sched_job *e = &g->s.f->jobs[j];
        int64_t start = standing(d, now), quantum = (int64_t)vgpu_sched_quantum(atomic_load(&e->cap));
        if (start > quantum)
            start = quantum;
        atomic_store(&e->credit, start);
        atomic_store(&e->credit_t, now);
        return;
    }
}
