/* The soak's checker: every 10 ms, what must always hold (soak.c lists it). Test code, not
 * product. It only reads the job regions (mapped read-only) and the board, so it never
 * takes part in a job: it reaps nothing, and what it measures is what the jobs do. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "soak.h"
#include "vgpu/machinedir.h"
#include "vgpu/sched.h"

/* A reservation that read the old limit may still complete after `vgpu limit` lowered it:
 * at most one per process, each at most the largest piece a process asks for at once (a
 * context, 64 MiB on the soak's GPU, or a 96 MiB allocation). */
#define INFLIGHT_BOUND ((uint64_t)SOAK_SLOTS * 96 * SOAK_MIB)
#define INFLIGHT_GRACE_NS (200ULL * 1000000ULL)   /* how long such a reservation may take */
/* `vgpu run` walks its job's slots every 250 ms (VGPU_REGION_REAP_NS), and so does the next
 * allocation call of any of the job's processes after a period without a walk: 250 ms plus a
 * wakeup, and the rest of issue 11's second for a loaded machine. */
#define RECLAIM_BOUND_NS (1000ULL * 1000000ULL)
/* A process that was pid 1 of its own PID namespace: its death is proven by a reader in the job's
 * namespace that recorded its host pid while it lived (`vgpu run`'s walk, within a period of its
 * start; vgpu/proc.h, libvgpu(7)). One that ended before anyone saw it stays counted (an
 * over-count, never an under-count) for as long as the job: the documented limit, not checked
 * against a time. So the bound holds for those that lived this long after creating their context
 * (and so holding a slot); live usage dropped is checked for all. */
#define PIDNS_SEEN_NS (1000ULL * 1000000ULL)
#define STALL_NS SOAK_SEC
#define WARMUP_NS (2 * SOAK_SEC)

bool soak_slot_present(const struct job *j, pid_t pid, uint64_t start, uint32_t pidns)
{
    if (!j->use || pid <= 0)
        return false;
    for (unsigned i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *sl = &j->use->slot[i];
        uint64_t o = atomic_load(&sl->owner);
        uint32_t ns = atomic_load(&sl->pidns);
        if (vgpu_slot_state_of(o) == VGPU_SLOT_FREE || vgpu_slot_pid_of(o) != pid || (pidns && ns && ns != pidns))
            continue;
        if (atomic_load(&sl->start_time) == start || vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            return true;
    }
    return false;
}

static struct wproc *record_of(struct soak *s, pid_t pid)
{
    for (unsigned i = 0; i < s->nprocs; i++)
        if (s->procs[i].used && s->procs[i].alive && s->procs[i].pid == pid)
            return &s->procs[i];
    return NULL;
}

static void reap_children(struct soak *s, uint64_t now)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (soak_tool_pid(pid)) {
            soak_tool_exited(s, pid, st);
            continue;
        }
        bool job = false;
        for (unsigned k = 0; k < s->njobs; k++) {
            struct job *j = &s->jobs[k];
            if (j->run_pid != pid)
                continue;
            job = true;
            j->run_done = true;
            if (now < s->end_ns)
                soak_violation(s, V_WORKER_FAILED, "job %s's `vgpu run` ended during the soak (status 0x%x)",
                               j->name, st);
        }
        struct wproc *w = job ? NULL : record_of(s, pid);
        if (!w)
            continue;
        w->alive = false;
        w->died_ns = now;
        w->status = st;
        struct job *j = &s->jobs[w->job];
        int idx = (int)(w - s->procs);
        if (j->slot_proc[w->slot] == idx) {
            j->slot_proc[w->slot] = -1;
            j->slot_restart_at[w->slot] = now + (50 + soak_rnd(s, 250)) * 1000000ULL;
        }
        bool ending = w->termed || now >= s->end_ns;
        /* A SIGTERM that arrives before the worker installed its handler ends it by the signal. */
        bool expected = (ending && ((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                                    (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM))) ||
                        (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && w->killed) ||
                        /* unshare(1) exits 1 when its child dies by a signal (it cannot re-raise SIGKILL). */
                        (w->pidns && w->killed && WIFEXITED(st) && WEXITSTATUS(st) == 1);
        /* Exit 4: libvgpu.so charges a module load the device-wide change of free memory around it
         * (ctx.c load_end), which includes other processes' allocations meanwhile (issue 11 item 1),
         * and refused it at the limit. */
        if (!expected)
            soak_violation(s, V_WORKER_FAILED, "worker %d (job %s, %s%s) ended with status 0x%x%s%s", idx, j->name,
                           w->role == ROLE_LAUNCH ? "launch" : "alloc", w->pidns ? ", PID namespace" : "", st,
                           w->killed ? " after SIGKILL" : "",
                           WIFEXITED(st) && WEXITSTATUS(st) == 4
                               ? ": loading its module was refused with OUT_OF_MEMORY (charged the device-wide "
                                 "memory delta around the load, which other processes' allocations are part of)"
                               : " (see soak.log)");
    }
}

#define NVML_ROUNDING (2ULL << 20)   /* NVML reports process memory in 2 MiB pages */

static void check_memory(struct soak *s, struct job *j, uint64_t now)
{
    uint64_t l1 = atomic_load(&j->hdr->dev[0].mem_limit);
    uint64_t used = atomic_load(&j->use->dev[0].used);
    uint64_t l2 = atomic_load(&j->hdr->dev[0].mem_limit);
    uint64_t limit = l1 > l2 ? l1 : l2;   /* a raise between the two loads is not an overrun */
    s->st.checks++;
    if (l2 && (!j->last_limit || l2 < j->last_limit)) {
        /* Lowered: nothing already granted is taken away (vgpu-limit(1)), and a reservation that
         * read the old limit just before the change may still complete. */
        uint64_t ceiling = (used > l2 ? used : l2) + INFLIGHT_BOUND;
        if (ceiling > j->allow)
            j->allow = ceiling;
        j->lowered_ns = now;
    }
    j->last_limit = l2;
    if (!limit || used <= limit) {
        if (now - j->lowered_ns > INFLIGHT_GRACE_NS)
            j->allow = 0;
        j->over_reported = false;
        return;
    }
    /* The overrun the design allows without a lowered limit: memory the driver already gave that
     * NVML shows and libvgpu.so charges after the fact (vgpu_acct_force in nvml.c's
     * reconciliation: a context's or a module's growth, NVML's 2 MiB page rounding), bounded
     * by one NVML rounding unit per process of the job. Seen once in the sanitized soak: 1 MiB
     * over a 1 GiB limit with four processes. */
    if (!j->allow) {
        unsigned procs = 0;
        for (unsigned i = 0; i < VGPU_REGION_MAX_SLOTS; i++)
            procs += vgpu_slot_state_of(atomic_load(&j->use->slot[i].owner)) != VGPU_SLOT_FREE;
        if (used - limit <= (uint64_t)procs * NVML_ROUNDING) {
            if (!j->over_reported)
                s->st.overrun_episodes++;
            j->over_reported = true;
            if (used - limit > s->st.overrun_max)
                s->st.overrun_max = used - limit;
            return;
        }
    }
    if (j->allow && used <= j->allow) {
        if (!j->over_reported)
            s->st.overrun_episodes++;
        j->over_reported = true;
        if (used - limit > s->st.overrun_max)
            s->st.overrun_max = used - limit;
        /* Past the grace, no reservation can succeed while the usage is over the limit: from
         * now on it may only fall. */
        if (now - j->lowered_ns > INFLIGHT_GRACE_NS)
            j->allow = used;
        return;
    }
    if (j->allow || !j->over_reported) {
        /* Who holds what: pid:MiB of every slot in use. */
        char who[400] = "";
        size_t at = 0;
        for (unsigned i = 0; i < VGPU_REGION_MAX_SLOTS && at < sizeof who - 24; i++) {
            uint64_t o = atomic_load(&j->use->slot[i].owner);
            if (vgpu_slot_state_of(o) != VGPU_SLOT_FREE)
                at += (size_t)snprintf(who + at, sizeof who - at, " %d:%llu", (int)vgpu_slot_pid_of(o),
                                       (unsigned long long)(atomic_load(&j->use->slot[i].used[0]) / SOAK_MIB));
        }
        /* What can put a job past its limit, besides a lowered limit: a charge libvgpu.so forces
         * for memory the driver already gave (lib/hook/acct.c vgpu_acct_force), e.g. when NVML
         * shows a process more than it was charged because its context was measured as a
         * device-wide NVML delta while other processes freed memory (issue 11 item 1), or after
         * its slot was reaped while it ran (item 3). */
        soak_violation(s, V_OVER_LIMIT, "job %s uses %llu bytes, over its limit of %llu (%s)%s; slots (pid:MiB):%s",
                       j->name, (unsigned long long)used, (unsigned long long)limit,
                       j->allow ? "past the allowed ceiling after a lowered limit"
                                : "no limit lowered lately: a charge forced past the limit",
                       j->drops ? ", after live processes' usage was dropped (see live_dropped)" : "", who);
    }
    j->allow = 0;
    j->over_reported = true;
}

/* A live worker of the job past its context creation: its next allocation call may reap. */
/* Under make asan (VGPU_ASAN=1) on fewer than 4 CPUs: every process of the soak is instrumented,
 * and scheduling sets some bounds (see check_live and check_reclaim). */
static bool asan_small(void)
{
    const char *a = getenv("VGPU_ASAN");
    return a && !strcmp(a, "1") && sysconf(_SC_NPROCESSORS_ONLN) < 4;
}

static void check_reclaim(struct soak *s, struct wproc *w, uint64_t now)
{
    const struct soak_proc *b = &s->board->proc[w - s->procs];
    struct job *j = &s->jobs[w->job];
    s->st.checks++;
    if (!soak_slot_present(j, atomic_load(&b->pid), atomic_load(&b->start_ticks), atomic_load(&b->pidns))) {
        uint64_t lat = now - w->died_ns;
        w->reclaimed = true;
        s->st.reclaims++;
        s->st.reclaim_sum_ns += lat;
        if (lat > s->st.reclaim_max_ns)
            s->st.reclaim_max_ns = lat;
        return;
    }
    bool bounded = !w->pidns || (w->live_ns && w->died_ns - w->live_ns >= PIDNS_SEEN_NS);
    /* Under make asan on fewer than 4 CPUs the reclaimers (the job's other processes, listings)
     * are instrumented too: a slot of a dead PID-namespace worker was reclaimed in 1096 ms there.
     * 2 s there, as the stall bounds are widened (check_live); 1 s elsewhere. */
    uint64_t reclaim_bound = asan_small() ? 2 * RECLAIM_BOUND_NS : RECLAIM_BOUND_NS;
    if (now - w->died_ns > reclaim_bound && bounded && !w->late_reported) {
        w->late_reported = true;
        soak_violation(s, V_RECLAIM_LATE, "job %s: the slot of dead worker %d (pid %d%s) still holds usage %llu ms "
                       "after it died", j->name, (int)(w - s->procs), (int)atomic_load(&b->pid),
                       w->pidns ? " in its PID namespace" : "", (unsigned long long)((now - w->died_ns) / 1000000));
    }
}

/* How long task pid has waited on a run queue for a CPU (ns): /proc/PID/schedstat's second
 * field. 0 when it cannot be read (no CONFIG_SCHED_INFO, the task gone): nothing is excused. */
static uint64_t runq_wait_ns(pid_t pid)
{
    char path[64];
    unsigned long long run = 0, wait = 0;
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &run, &wait) != 2)
        wait = 0;
    fclose(f);
    return wait;
}

static void check_live(struct soak *s, struct wproc *w, uint64_t now)
{
    const struct soak_proc *b = &s->board->proc[w - s->procs];
    struct job *j = &s->jobs[w->job];
    uint64_t hb = atomic_load(&b->hb_ns), ref = hb ? hb : w->spawned_ns;
    uint64_t gap = now > ref ? now - ref : 0;
    s->st.checks += 2;
    if (!w->live_ns && atomic_load(&b->phase) == 1)
        w->live_ns = now;
    if (gap > s->st.hb_gap_max_ns)
        s->st.hb_gap_max_ns = gap;
    /* Under make asan on fewer than 4 CPUs every process of the soak is instrumented, and its
     * scheduling is the bound: there a worker that has not reached its main (unshare, exec, the
     * loader, the library's constructor) took 1003-1085 ms, and launch workers between operations
     * 1008-1042 ms. There the bounds are 3 s to start and 2 s between beats: a hang still fails. */
    uint64_t bound = !asan_small() ? STALL_NS : !hb ? 3 * STALL_NS : 2 * STALL_NS;
    /* On a busy machine (a CPU hog beside the suite) a worker ready to run may wait for a CPU:
     * 1005 ms between operations once. The time it waited on a run queue since its last beat is
     * the machine's, not vgpu's, and is not counted; a worker that sleeps on a lock, or spins,
     * does not wait on a run queue, so a hang or a livelock is still caught. */
    pid_t tp = w->target ? w->target : w->pid;
    if (hb != w->hb_seen || tp != w->wait_pid) {
        w->hb_seen = hb;
        w->wait_pid = tp;
        w->wait_at_hb = hb ? runq_wait_ns(tp) : 0;   /* not started: its wait since it was made */
    }
    uint64_t waited = 0;
    if (gap > bound) {
        uint64_t wn = runq_wait_ns(tp);
        waited = wn > w->wait_at_hb ? wn - w->wait_at_hb : 0;
    }
    if (gap > bound + waited && !w->stall_reported) {
        w->stall_reported = true;
        soak_violation(s, V_STALL, "worker %d (job %s, %s%s) has not made progress for %llu ms, %llu ms of it "
                       "waiting for a CPU (%s)",
                       (int)(w - s->procs), j->name, w->role == ROLE_LAUNCH ? "launch" : "alloc",
                       w->pidns ? ", PID namespace" : "", (unsigned long long)(gap / 1000000),
                       (unsigned long long)(waited / 1000000),
                       !hb ? "not started yet" : atomic_load(&b->phase) == 0 ? "creating its context"
                       : atomic_load(&b->in_alloc) ? "inside an allocation call" : "between operations");
    }
    unsigned drop = atomic_load(&b->drop_kind);
    if (drop != SOAK_DROP_NONE && !w->drop_reported) {
        w->drop_reported = true;
        j->drops++;
        soak_violation(s, V_LIVE_DROPPED, "job %s: live worker %d (pid %d%s) holds %llu bytes but its slot %s",
                       j->name, (int)(w - s->procs), (int)atomic_load(&b->pid),
                       w->pidns ? " in a new PID namespace" : "", (unsigned long long)atomic_load(&b->drop_held),
                       drop == SOAK_DROP_NO_SLOT ? "was reaped while it ran" : "charges less");
    }
}

void soak_check_tick(struct soak *s, uint64_t now)
{
    s->st.check_rounds++;
    reap_children(s, now);
    for (unsigned k = 0; k < s->njobs; k++)
        if (s->jobs[k].hdr)
            check_memory(s, &s->jobs[k], now);
    for (unsigned i = 0; i < s->nprocs; i++) {
        struct wproc *w = &s->procs[i];
        if (!w->used)
            continue;
        if (w->alive)
            check_live(s, w, now);
        else if (!w->reclaimed)
            check_reclaim(s, w, now);
    }
    /* A capped job is saturating while one of its launchers is working. */
    for (unsigned k = 0; k < s->njobs; k++) {
        struct job *j = &s->jobs[k];
        bool working = false;
        for (int sl = 0; sl < SOAK_SLOTS && !working; sl++) {
            int p = j->slot_proc[sl];
            working = p >= 0 && s->procs[p].alive && s->procs[p].role == ROLE_LAUNCH &&
                      atomic_load(&s->board->proc[p].phase) == 1 && atomic_load(&s->board->proc[p].launches) > 0;
        }
        if (!working)
            j->unsat_since_sample = true;
    }
}

/* Once a second: the capped jobs' GPU time, and the 10 s windows that end now. */
void soak_share_sample(struct soak *s, uint64_t now)
{
    for (unsigned k = 0; k < s->njobs; k++) {
        struct job *j = &s->jobs[k];
        if (!j->hdr || !j->core)
            continue;
        if (j->ngt == SOAK_MAX_WINDOWS) {
            unsigned keep = 11;
            memmove(j->gt, j->gt + j->ngt - keep, keep * sizeof j->gt[0]);
            memmove(j->gt_t, j->gt_t + j->ngt - keep, keep * sizeof j->gt_t[0]);
            memmove(j->gt_cap, j->gt_cap + j->ngt - keep, keep * sizeof j->gt_cap[0]);
            memmove(j->gt_sat, j->gt_sat + j->ngt - keep, keep * sizeof j->gt_sat[0]);
            j->ngt = keep;
        }
        unsigned n = j->ngt++;
        j->gt[n] = atomic_load(&j->use->dev[0].gpu_time_ns);
        j->gt_t[n] = now;
        j->gt_cap[n] = atomic_load(&j->hdr->dev[0].core_limit);
        j->gt_sat[n] = !j->unsat_since_sample;
        j->unsat_since_sample = false;
        if (n < 10 || j->gt_t[n - 10] < s->t0 + WARMUP_NS)
            continue;
        bool valid = true;
        for (unsigned i = n - 10; i <= n && valid; i++)
            valid = j->gt_cap[i] == j->gt_cap[n] && (i == n - 10 || j->gt_sat[i]);
        if (!valid || !j->gt_cap[n] || j->gt_cap[n] >= 100)
            continue;
        double share = 100.0 * (double)(j->gt[n] - j->gt[n - 10]) / (double)(j->gt_t[n] - j->gt_t[n - 10]);
        double off = share - (double)j->gt_cap[n];
        if (!j->windows || share < j->share_min)
            j->share_min = share;
        if (!j->windows || share > j->share_max)
            j->share_max = share;
        if (!j->windows || j->gt_cap[n] < j->cap_min)
            j->cap_min = j->gt_cap[n];
        if (!j->windows || j->gt_cap[n] > j->cap_max)
            j->cap_max = j->gt_cap[n];
        if ((off < 0 ? -off : off) > j->off_max)
            j->off_max = off < 0 ? -off : off;
        j->windows++;
        s->st.checks++;
        if (off > 5.0 || off < -5.0)
            soak_violation(s, V_SHARE, "job %s (--core %u): %.1f%% of the GPU's time over the 10 s to %.0f s",
                           j->name, j->gt_cap[n], share, (double)(now - s->t0) / 1e9);
    }
}

static void leftover_dir(struct soak *s, const char *dir, const char *what)
{
    DIR *d = opendir(dir);
    if (!d)
        return;                         /* never made: nothing in it */
    struct dirent *e;
    unsigned n = 0;
    char names[512] = "";
    size_t used = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        if (used < sizeof names - 1)
            used += (size_t)snprintf(names + used, sizeof names - used, " %s", e->d_name);
    }
    closedir(d);
    s->st.checks++;
    if (n)
        soak_violation(s, V_LEFTOVER, "%u %s left in %s:%s", n, what, dir, names);
}

void soak_final_checks(struct soak *s)
{
    char path[1200];
    /* Without the arbiter, placement is kept in each user's state directory (lib/core/place/ledger.h). */
    for (unsigned u = 0; u < s->nusers; u++) {
        snprintf(path, sizeof path, "%s/jobs", s->users[u].statedir);
        leftover_dir(s, path, "job files");
        snprintf(path, sizeof path, "%s/promises", s->users[u].statedir);
        leftover_dir(s, path, "placement promises");
        snprintf(path, sizeof path, "%s/queue", s->users[u].statedir);
        leftover_dir(s, path, "placement queue entries");
    }
    for (unsigned k = 0; k < s->njobs; k++) {
        const char *uuid = s->jobs[k].uuid;
        bool seen = false;
        for (unsigned i = 0; i < k && !seen; i++)
            seen = !strcmp(s->jobs[i].uuid, uuid);
        if (seen || !uuid[0])
            continue;
        /* Without the arbiter each user has a schedule of its own (vgpu/sched.h). */
        for (unsigned u = 0; u < s->nusers; u++) {
        s->st.checks++;
        int key = vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)s->users[u].uid, 0);
        int id = shmget(key, 0, 0);
        if (id < 0)
            continue;
        unsigned procs = 0, jobs = 0;
        /* Who left it: the last process to attach or detach (a process detaches when it exits). */
        struct shmid_ds ds;
        char last[200] = "";
        if (shmctl(id, IPC_STAT, &ds) == 0) {
            const struct wproc *lw = NULL;
            for (unsigned i = 0; i < s->nprocs && !lw; i++)
                if (s->procs[i].used && (s->procs[i].target == ds.shm_lpid || s->procs[i].pid == ds.shm_lpid))
                    lw = &s->procs[i];
            snprintf(last, sizeof last, "; %lu attached, the last to detach was pid %d%s%s", (unsigned long)ds.shm_nattch,
                     (int)ds.shm_lpid, lw ? (lw->killed ? ", a worker SIGKILLed" : ", a worker that ended normally") : "",
                     lw && lw->killed ? (lw->died_ns + SOAK_SEC / 2 > s->end_ns ? " just before the end" : " earlier") : "");
        }
        const struct vgpu_sched_file *f = shmat(id, NULL, SHM_RDONLY);
        if (f != (void *)-1) {
            for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
                procs += atomic_load(&f->procs[i].pid) != 0;
            for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++)
                jobs += atomic_load(&f->jobs[i].key) != 0;
            shmdt(f);
        }
        soak_violation(s, V_LEFTOVER, "the GPU-time schedule of %s is still there (key 0x%08x, %u job and %u "
                       "process entries%s)", uuid, (unsigned)key, jobs, procs, last);
        }
    }
}
