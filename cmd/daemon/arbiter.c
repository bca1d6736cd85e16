/* What each request to the arbiter may do (vgpu/arbiter.h): the same operations of vgpu/sched.h a
 * client would have performed on a shared segment, performed here on the daemon's own mapping,
 * after checking that what they name is the client's: a process entry it attached, a job of its
 * user, a lease one of its entries holds. Times are the daemon's clock; a client's own reading is
 * believed only within a small tolerance (ARB_SKEW_NS), so lying about time gains nothing worth
 * having. */
#include "daemon/arbiter.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/proc.h"
#include "vgpu/region.h"

#define ARB_SKEW_NS 200000ULL   /* a client's clock reading, believed this far behind ours */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A client's time `t`, as believed: between ARB_SKEW_NS before `now` and now. */
static uint64_t believed(uint64_t t, uint64_t now)
{
    return t > now ? now : now - t > ARB_SKEW_NS ? now - ARB_SKEW_NS : t;
}

int arb_refuse(struct arbiter *a, struct vgpu_arb_rep *r, int err, const char *why)
{
    a->refused++;
    r->rc = -err;
    size_t n = strlen(why);
    if (n >= sizeof r->msg)
        n = sizeof r->msg - 1;
    memcpy(r->msg, why, n);
    r->msg[n] = 0;
    return 0;
}

static bool uuid_ok(const char *u, size_t cap)
{
    size_t n = strnlen(u, cap);
    if (n == 0 || n >= cap || (strncmp(u, "GPU-", 4) && strncmp(u, "MIG-", 4)))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)u[i]) && u[i] != '-' && u[i] != '/')
            return false;
    return true;
}

static int find_or_add_gpu(struct arbiter *a, const char *uuid, struct vgpu_err *e)
{
    for (unsigned i = 0; i < a->ngpus; i++)
        if (!strcmp(a->gpus[i]->uuid, uuid))
            return (int)i;
    if (a->ngpus >= VGPU_ARB_MAX_GPUS) {
        vgpu_err_set(e, 1, "the arbiter serves %d GPUs at most", VGPU_ARB_MAX_GPUS);
        return -1;
    }
    struct arb_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        vgpu_err_set(e, 1, "out of memory");
        return -1;
    }
    if (vgpu_sched_create_memfd(&g->s, &g->ro_fd, e) != 0) {
        free(g);
        return -1;
    }
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    a->gpus[a->ngpus] = g;
    return (int)a->ngpus++;
}

static bool owns_proc(const struct arb_gpu *g, const struct arb_client *c, int proc)
{
    return proc >= 0 && proc < VGPU_SCHED_MAX_PROCS && g->proc_client[proc] == c->id;
}

/* The entry that holds `lease`, when it is one of the client's. */
static int own_holder(const struct arb_gpu *g, const struct arb_client *c, uint64_t lease)
{
    unsigned h = vgpu_lease_holder(lease);
    return h && owns_proc(g, c, (int)h - 1) ? (int)h - 1 : -1;
}

static bool has_any_proc(const struct arb_gpu *g, const struct arb_client *c)
{
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
        if (g->proc_client[i] == c->id)
            return true;
    return false;
}

/* Job entries of `uid` that are in use (a process in them, or used lately). */
static unsigned user_jobs(const struct arb_gpu *g, uid_t uid, uint64_t now)
{
    unsigned n = 0;
    for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
        const struct vgpu_sched_job *e = &g->s.f->jobs[j];
        if (!atomic_load(&e->key) || g->job_uid[j] != uid)
            continue;
        bool procs = false;
        for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS && !procs; p++)
            procs = g->proc_client[p] && atomic_load(&g->s.f->procs[p].job) == j;
        uint64_t seen = atomic_load(&e->seen_ns);
        n += procs || (seen <= now && now - seen < VGPU_SCHED_JOB_IDLE_NS);   /* its entry is not free yet */
    }
    return n;
}

static unsigned user_procs(const struct arb_gpu *g, uid_t uid)
{
    unsigned n = 0;
    for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++)
        n += g->proc_client[p] && g->proc_uid[p] == uid;
    return n;
}

/* The cap, policy and priority an administrator set for this GPU in a job's limits file that
 * root owns (vgpu run --user): those hold whatever the job's process says. false when the file
 * is not such a file or names no limit for this GPU. */
static bool admin_limits(int fd, const char *uuid, unsigned *cap, bool *soft, int *prio)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
        return false;
    static struct vgpu_region_header h;   /* one page: not on the stack */
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || atomic_load(&h.magic) != VGPU_REGION_MAGIC ||
        h.version != VGPU_REGION_VERSION)
        return false;
    unsigned n = h.device_count < VGPU_REGION_MAX_DEVICES ? h.device_count : VGPU_REGION_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        if (strncmp(h.dev[i].uuid, uuid, sizeof h.dev[i].uuid) != 0)
            continue;
        unsigned c = atomic_load(&h.dev[i].core_limit);
        int p = atomic_load(&h.dev[i].priority);
        if ((c == 0 && p == 0) || c >= 100)
            return false;   /* no cap of the administrator's here: the job's own word (fair share) */
        *cap = c;   /* 0: the administrator's uncapped class (a priority, no cap) */
        *soft = atomic_load(&h.dev[i].core_policy) == VGPU_CORE_SOFT;
        *prio = p > 0 ? VGPU_PRIO_HIGH : p < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
        return true;
    }
    return false;
}

uint64_t arb_user_key(uint64_t key, uid_t uid)
{
    uint64_t k = (key ^ ((uint64_t)uid * 0x9e3779b97f4a7c15ULL)) * 1099511628211ULL;
    return k ? k : 1;
}

static int do_job(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q, int fd,
                  struct vgpu_arb_rep *r)
{
    uint64_t now = now_ns(), key = arb_user_key(q->a[0], c->uid);
    bool soft = q->a[2] != 0;
    int64_t p = (int64_t)q->a[3];
    int prio = p > 0 ? VGPU_PRIO_HIGH : p < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
    /* Cap 0 with a priority: an uncapped class (vgpu/sched.h, "Uncapped priority classes"). */
    unsigned cap = q->a[1] <= 100 && (q->a[1] >= 1 || prio != VGPU_PRIO_NORMAL) ? (unsigned)q->a[1] : 100;
    if (c->uid != 0)
        admin_limits(fd, g->uuid, &cap, &soft, &prio);
    bool known = false;
    for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS && !known; j++)
        known = atomic_load(&g->s.f->jobs[j].key) == key;
    if (!known && c->uid != 0 && user_jobs(g, c->uid, now) >= VGPU_ARB_USER_JOBS)
        return arb_refuse(a, r, EDQUOT, "your user already has the most jobs a user may have in one GPU's schedule (8)");
    int j = vgpu_sched_job(&g->s, key, cap, soft, prio, now);
    if (j < 0)
        return arb_refuse(a, r, ENOSPC, "the GPU's schedule is full");
    g->job_uid[j] = c->uid;
    r->rc = j;
    return 0;
}

static int do_attach(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q,
                     struct vgpu_arb_rep *r)
{
    uint64_t j = q->a[0];
    if (j >= VGPU_SCHED_MAX_JOBS || !atomic_load(&g->s.f->jobs[j].key) || g->job_uid[j] != c->uid)
        return arb_refuse(a, r, EPERM, "that job entry is not your user's");
    if (c->uid != 0 && user_procs(g, c->uid) >= VGPU_ARB_USER_PROCS)
        return arb_refuse(a, r, EDQUOT, "your user already has the most processes a user may have in one GPU's schedule (64)");
    uint64_t start = vgpu_proc_start_time(c->pid);
    int p = vgpu_sched_attach(&g->s, (unsigned)j, c->pid, start);
    if (p < 0)
        return arb_refuse(a, r, ENOSPC, "the GPU's schedule is full");
    g->proc_client[p] = c->id;
    g->proc_uid[p] = c->uid;
    r->rc = p;
    return 0;
}

static int do_acquire(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q,
                      struct vgpu_arb_rep *r)
{
    if (!owns_proc(g, c, q->proc))
        return arb_refuse(a, r, EPERM, "not your process entry");
    uint64_t now = now_ns(), lease, end;
    if (!vgpu_sched_try_acquire(&g->s, q->proc, now, &lease, &end)) {
        r->rc = 0;
        return 0;
    }
    g->grant_at[q->proc] = now;
    uint64_t ov = atomic_load(&g->s.f->overlap_until);
    g->grant_preempted[q->proc] = ov > now;   /* a holder we took the lease from still drains */
    r->rc = 1;
    r->v[0] = lease;
    r->v[1] = end;
    return 0;
}

/* What a lease is charged: the client's measure, but never less than the sharing rules could
 * have made it (vgpu/sched.h, "The overlap of a preemption"): at least half its length when it
 * was preempted, else all of it outside the overlap with a holder it preempted. A client that
 * under-reports gains nothing beyond what those rules allow. */
static uint64_t charge(const struct arb_gpu *g, int proc, uint64_t lease, uint64_t used, uint64_t t)
{
    uint64_t start = g->grant_at[proc];
    uint64_t wall = t > start ? t - start : 0, least;
    if (atomic_load(&g->s.f->lease) != lease) {
        least = wall / 2;   /* preempted (or revoked) */
    } else if (g->grant_preempted[proc]) {
        uint64_t ov_end = g->drained_at > start ? g->drained_at : start + VGPU_SCHED_OVERLAP_NS;
        least = t > ov_end ? t - ov_end : 0;
    } else {
        least = wall;
    }
    return used < least ? least : used > wall ? wall : used;
}

static int do_release(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q,
                      struct vgpu_arb_rep *r)
{
    int h = own_holder(g, c, q->a[0]);
    if (h < 0)
        return arb_refuse(a, r, EPERM, "not a lease of yours");
    uint64_t t = believed(q->a[2], now_ns()), used = charge(g, h, q->a[0], q->a[1], t);
    /* Kept apart for the job's accounting record too (charged.c): what the job reports there is
     * checked against it. */
    arb_charged_add(a, q->gpu, atomic_load(&g->s.f->procs[h].job), used, q->a[1]);
    r->rc = vgpu_sched_release(&g->s, q->a[0], used, t) ? 1 : 0;
    g->grant_at[h] = 0;
    return 0;
}

/* Requests that get no reply: each is dropped when it names what is not the client's. */
static void do_silent(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q)
{
    uint64_t now = now_ns();
    bool mine = owns_proc(g, c, q->proc);
    switch (q->op) {
    case VGPU_ARB_DETACH:
        if (mine) {
            vgpu_sched_detach(&g->s, q->proc);
            g->proc_client[q->proc] = 0;
            return;
        }
        break;
    case VGPU_ARB_UNWANT:
        if (mine) {
            vgpu_sched_unwant(&g->s, q->proc);
            return;
        }
        break;
    case VGPU_ARB_WANT_FROM:
        if (mine) {
            /* Since when it waits: at most a second back (a launch that waited for its own lock). */
            uint64_t t = q->a[0] > now ? now : now - q->a[0] > 1000000000ULL ? now - 1000000000ULL : q->a[0];
            vgpu_sched_want_from(&g->s, q->proc, t);
            return;
        }
        break;
    case VGPU_ARB_NOTE_END:
        if (mine) {
            vgpu_sched_note_end(&g->s, q->proc, q->a[0] != 0, believed(q->a[1], now));
            return;
        }
        break;
    case VGPU_ARB_EXPECT:
        if (mine) {
            uint64_t back = q->a[0], gap = q->a[1];
            if (back && (back < now || back - now > VGPU_SCHED_CLEAR_AHEAD_NS || gap > VGPU_SCHED_CLEAR_AHEAD_NS))
                back = gap = 0;   /* not believable: no guess */
            vgpu_sched_expect(&g->s, q->proc, back, gap);
            return;
        }
        break;
    case VGPU_ARB_DRAINING:
        if (own_holder(g, c, q->a[0]) >= 0) {
            vgpu_sched_draining(&g->s, q->a[0], now);
            return;
        }
        break;
    case VGPU_ARB_DRAINED:
        if (has_any_proc(g, c)) {
            vgpu_sched_drained(&g->s, now);
            g->drained_at = now;
            return;
        }
        break;
    case VGPU_ARB_NOTE_BUSY:
        if (own_holder(g, c, q->a[0]) >= 0) {
            vgpu_sched_note_busy(&g->s, q->a[0], q->a[1], q->a[2] > now ? now : q->a[2]);
            return;
        }
        break;
    case VGPU_ARB_SPILLING:
        if (q->a[0] < VGPU_SCHED_MAX_JOBS && atomic_load(&g->s.f->jobs[q->a[0]].key) && g->job_uid[q->a[0]] == c->uid) {
            vgpu_sched_set_spilling(&g->s, (int)q->a[0], q->a[1] != 0);
            return;
        }
        break;
    case VGPU_ARB_YIELDED:
        if (has_any_proc(g, c)) {
            vgpu_sched_note_yield(&g->s);
            return;
        }
        break;
    default:
        break;
    }
    a->refused++;
}

bool arb_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in, int passed_fd,
                struct vgpu_arb_rep *r, void *out, int *send_fd)
{
    memset(r, 0, sizeof *r);
    *send_fd = -1;
    a->requests++;
    bool answered = (q->op >= VGPU_ARB_HELLO && q->op <= VGPU_ARB_RELEASE) ||
                    (q->op >= VGPU_ARB_PLACE_FIRST && q->op <= VGPU_ARB_ACCT_LAST);
    if (q->op >= VGPU_ARB_PLACE_FIRST && q->op <= VGPU_ARB_PLACE_LAST) {
        arb_place_handle(a, c, q, in, r, out);
    } else if (q->op >= VGPU_ARB_ACCT_FIRST && q->op <= VGPU_ARB_ACCT_LAST) {
        arb_acct_handle(a, c, q, in, r, out);
    } else if (q->op == VGPU_ARB_HELLO) {
        r->rc = VGPU_ARB_PROTO;
    } else if (q->op == VGPU_ARB_OPEN) {
        char uuid[sizeof q->uuid];
        memcpy(uuid, q->uuid, sizeof uuid);
        uuid[sizeof uuid - 1] = 0;
        struct vgpu_err e = { 0 };
        int i = uuid_ok(q->uuid, sizeof q->uuid) ? find_or_add_gpu(a, uuid, &e) : -1;
        if (i < 0) {
            arb_refuse(a, r, EINVAL, e.msg[0] ? e.msg : "not a GPU or MIG UUID");
        } else {
            c->opened[i] = true;
            r->rc = i;
            *send_fd = a->gpus[i]->ro_fd;
        }
    } else if (q->gpu >= a->ngpus || !c->opened[q->gpu]) {
        if (answered)
            arb_refuse(a, r, EINVAL, "that schedule was not opened on this connection");
        else
            a->refused++;
    } else {
        struct arb_gpu *g = a->gpus[q->gpu];
        switch (q->op) {
        case VGPU_ARB_JOB: do_job(a, g, c, q, passed_fd, r); break;
        case VGPU_ARB_ATTACH: do_attach(a, g, c, q, r); break;
        case VGPU_ARB_ACQUIRE: do_acquire(a, g, c, q, r); break;
        case VGPU_ARB_RELEASE: do_release(a, g, c, q, r); break;
        default: do_silent(a, g, c, q); break;
        }
    }
    if (passed_fd >= 0)
        close(passed_fd);
    return answered;
}

/* A job none of whose processes is left: its entry (and the credit in it) is kept for a second
 * more, for the job's next process, then is free for anyone. Kept for VGPU_SCHED_JOB_IDLE_NS, a
 * user who makes and drops entries could hold the whole table with them. */
#define ARB_LEFT_JOB_NS 1000000000ULL

void arb_client_gone(struct arbiter *a, struct arb_client *c)
{
    arb_place_client_gone(a, c);
    arb_acct_client_gone(a, c);
    uint64_t now = now_ns();
    for (unsigned i = 0; i < a->ngpus; i++) {
        struct arb_gpu *g = a->gpus[i];
        bool left[VGPU_SCHED_MAX_JOBS] = { false };
        for (int p = 0; p < VGPU_SCHED_MAX_PROCS; p++) {
            if (g->proc_client[p] != c->id)
                continue;
            unsigned j = atomic_load(&g->s.f->procs[p].job);
            if (j < VGPU_SCHED_MAX_JOBS)
                left[j] = true;
            vgpu_sched_detach(&g->s, p);   /* gives back a lease it held */
            g->proc_client[p] = 0;
            g->grant_at[p] = 0;
        }
        for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
            bool procs = false;
            for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS && left[j] && !procs; p++)
                procs = g->proc_client[p] && atomic_load(&g->s.f->procs[p].job) == j;
            uint64_t idle_from = now + ARB_LEFT_JOB_NS - VGPU_SCHED_JOB_IDLE_NS;
            if (left[j] && !procs && now > VGPU_SCHED_JOB_IDLE_NS && atomic_load(&g->s.f->jobs[j].seen_ns) > idle_from)
                atomic_store(&g->s.f->jobs[j].seen_ns, idle_from);
        }
    }
}
