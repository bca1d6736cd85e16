/* What one login may hold in one GPU's schedule (issue 35, "no resource one user can exhaust"):
 * at most VGPU_ARB_USER_JOBS job entries and VGPU_ARB_USER_PROCS process entries, counted over
 * the login's subordinate uids too (logins.c), and never the last ARB_ROOT_JOBS / ARB_ROOT_PROCS
 * entries of the table, which only root takes: four users' containers filled the 32-entry table
 * and root's next job ran uncapped. */
#include "daemon/server.h"

#include <stdio.h>

/* Whether job entry j is in use (a process in it, or used lately: its entry is not free yet). */
static bool job_in_use(const struct arb_gpu *g, unsigned j, uint64_t now)
{
    const struct vgpu_sched_job *e = &g->s.f->jobs[j];
    if (!atomic_load(&e->key))
        return false;
    for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++)
        if (g->proc_client[p] && atomic_load(&g->s.f->procs[p].job) == j)
            return true;
    uint64_t seen = atomic_load(&e->seen_ns);
    return seen <= now && now - seen < VGPU_SCHED_JOB_IDLE_NS;
}

const char *arb_quota_job(struct arbiter *a, const struct arb_gpu *g, const struct arb_client *c, uint64_t now)
{
    if (c->uid == 0)
        return NULL;
    static char why[160];
    uid_t login = arb_login_of(a, c->uid);
    unsigned mine = 0, others = 0;
    for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
        if (!job_in_use(g, j, now) || g->job_uid[j] == 0)
            continue;
        others++;
        mine += arb_login_of(a, g->job_uid[j]) == login;
    }
    if (mine >= VGPU_ARB_USER_JOBS) {
        snprintf(why, sizeof why, "your login (uid %u, with its subordinate uids) already has the most jobs a user "
                 "may have in one GPU's schedule (%d)", (unsigned)login, VGPU_ARB_USER_JOBS);
        return why;
    }
    if (others >= VGPU_SCHED_MAX_JOBS - ARB_ROOT_JOBS) {
        snprintf(why, sizeof why, "the GPU's schedule is full: its last %d of %d job entries are kept for root",
                 ARB_ROOT_JOBS, VGPU_SCHED_MAX_JOBS);
        return why;
    }
    return NULL;
}

const char *arb_quota_proc(struct arbiter *a, const struct arb_gpu *g, const struct arb_client *c)
{
    if (c->uid == 0)
        return NULL;
    static char why[160];
    uid_t login = arb_login_of(a, c->uid);
    unsigned mine = 0, others = 0;
    for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++) {
        if (!g->proc_client[p] || g->proc_uid[p] == 0)
            continue;
        others++;
        mine += arb_login_of(a, g->proc_uid[p]) == login;
    }
    if (mine >= VGPU_ARB_USER_PROCS) {
        snprintf(why, sizeof why, "your login (uid %u, with its subordinate uids) already has the most processes a "
                 "user may have in one GPU's schedule (%d)", (unsigned)login, VGPU_ARB_USER_PROCS);
        return why;
    }
    if (others >= VGPU_SCHED_MAX_PROCS - ARB_ROOT_PROCS) {
        snprintf(why, sizeof why, "the GPU's schedule is full: its last %d of %d process entries are kept for root",
                 ARB_ROOT_PROCS, VGPU_SCHED_MAX_PROCS);
        return why;
    }
    return NULL;
}
