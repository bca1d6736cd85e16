/* The soak's chaos loop: SIGKILLs (and now and then SIGTERMs) processes at random points (half of
 * them aimed at a worker in a burst of allocation calls, when one is), starts
 * new ones (some in a new PID namespace), changes limits live with `vgpu limit`, and looks at
 * the jobs with `vgpu ps --json` as users do. Test code, not product. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "soak.h"

#define KILL_EVERY_MS  150      /* one kill (or graceful end) every 150 ms on average */
#define LIMIT_EVERY_MS 700      /* one `vgpu limit` every 0.7 s on average */
#define PS_EVERY_NS    (2 * SOAK_SEC)

static bool chance(struct soak *s, unsigned every_ms)
{
    return soak_rnd(s, every_ms) < SOAK_TICK_NS / 1000000;
}

static int live_launchers(const struct soak *s, const struct job *j)
{
    int n = 0;
    for (int sl = 0; sl < SOAK_SLOTS; sl++) {
        int p = j->slot_proc[sl];
        n += p >= 0 && s->procs[p].alive && s->procs[p].role == ROLE_LAUNCH &&
             atomic_load(&s->board->proc[p].phase) == 1;
    }
    return n;
}

/* A worker in a burst of allocations, or -1. */
static int bursting(struct soak *s)
{
    unsigned off = (unsigned)soak_rnd(s, s->njobs * SOAK_SLOTS);
    for (unsigned i = 0; i < s->njobs * SOAK_SLOTS; i++) {
        unsigned k = (off + i) % (s->njobs * SOAK_SLOTS);
        int p = s->jobs[k / SOAK_SLOTS].slot_proc[k % SOAK_SLOTS];
        if (p >= 0 && s->procs[p].alive && atomic_load(&s->board->proc[p].in_burst))
            return p;
    }
    return -1;
}

static void kill_one(struct soak *s)
{
    /* Half the kills aim at a worker inside its allocation calls, when one is. */
    int p = soak_rnd(s, 2) ? bursting(s) : -1;
    if (p < 0) {
        const struct job *rj = &s->jobs[soak_rnd(s, s->njobs)];
        p = rj->slot_proc[soak_rnd(s, SOAK_SLOTS)];
    }
    if (p < 0)
        return;
    struct job *j = &s->jobs[s->procs[p].job];
    struct wproc *w = &s->procs[p];
    if (!w->alive || w->killed || w->termed)
        return;
    /* A share-checked job keeps one launcher working, so that it saturates its cap. */
    if (j->share_checked && w->role == ROLE_LAUNCH && live_launchers(s, j) < 2)
        return;
    if (!w->target)
        w->target = soak_ns_child(w->pid);
    if (!w->target)
        return;                         /* unshare has not started it yet */
    if (soak_rnd(s, 10) == 0) {
        w->termed = true;
        s->st.terms++;
        kill(w->target, SIGTERM);
        return;
    }
    bool in_alloc = atomic_load(&s->board->proc[p].in_alloc) != 0;
    w->killed = true;
    kill(w->target, SIGKILL);
    s->st.kills++;
    s->st.kills_in_alloc += in_alloc;
    s->st.kills_pidns += w->pidns;
}

static void change_limit(struct soak *s)
{
    struct job *j = &s->jobs[soak_rnd(s, s->njobs)];
    if (!j->change_mem && !j->change_core)
        return;
    bool core = j->change_core && (!j->change_mem || soak_rnd(s, 2));
    char val[32];
    if (core) {
        static const unsigned caps[] = { 10, 15 };
        snprintf(val, sizeof val, "%u", caps[soak_rnd(s, 2)]);
    } else {
        static const unsigned mib[] = { 512, 768, 1024 };
        snprintf(val, sizeof val, "%uM", mib[soak_rnd(s, 3)]);
    }
    char *argv[] = { (char *)s->users[j->user].vgpu, "limit", j->name, core ? "--core" : "--mem", val, NULL };
    soak_run_tool(s, &s->users[j->user], argv);
    s->st.limit_changes++;
    if (core)
        s->st.core_changes++;
    else
        s->st.mem_changes++;
}

void soak_chaos_tick(struct soak *s, uint64_t now)
{
    for (unsigned k = 0; k < s->njobs; k++) {
        struct job *j = &s->jobs[k];
        for (int sl = 0; sl < SOAK_SLOTS; sl++)
            if (j->slot_proc[sl] < 0 && now >= j->slot_restart_at[sl])
                soak_start_worker(s, j, sl, j->pidns && !s->no_pidns && soak_rnd(s, 100) < 35);
    }
    if (chance(s, KILL_EVERY_MS))
        kill_one(s);
    if (chance(s, LIMIT_EVERY_MS))
        change_limit(s);
    static uint64_t next_ps;
    if (now >= next_ps) {
        next_ps = now + PS_EVERY_NS / s->nusers;
        static unsigned turn;
        const struct user *u = &s->users[turn++ % s->nusers];
        char *argv[] = { (char *)u->vgpu, "ps", "--json", NULL };
        soak_run_tool(s, u, argv);
        s->st.ps_runs++;
    }
}
