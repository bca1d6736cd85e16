/* What each request to the arbiter may do (vgpu/arbiter.h): the same operations of vgpu/sched.h a
 * client would have performed on a shared segment, performed here on the daemon's own mapping,
 * after checking that what they name is the client's: a process entry it attached, a job of its
 * user, a lease one of its entries holds. Times are the daemon's clock; a client's own reading is
 * believed only within a small tolerance (ARB_SKEW_NS), so lying about time gains nothing worth
 * having. */
#include "daemon/server.h"

#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/proc.h"
#include "vgpu/region.h"

#define ARB_SKEW_NS 200000ULL   /* a client's clock reading, believed this far behind ours */
/* A job none of whose processes is left: its entry (and its debt) is kept for a second more, for
 * the job's next process, then is free for anyone. Kept for VGPU_SCHED_JOB_IDLE_NS, a user who
 * makes and drops entries could hold the whole table with them. */
#define ARB_LEFT_JOB_NS 1000000000ULL

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
    if (!arb_gpus_known(a, uuid, e))   /* gpus.c: a GPU of the machine's, never one a request made up */
        return -1;
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

static uint64_t key_secret;
static pthread_once_t key_secret_once = PTHREAD_ONCE_INIT;

static void make_key_secret(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) {
        /* No entropy source: a clock and pid make a secret a reader cannot guess in practice
         * (it still sees only products of it). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^ now_ns();
    }
    key_secret = s | 1;
}

uint64_t arb_user_key(uint64_t key, uid_t uid)
{
    /* Both the scheduling and the accounting thread call this: the secret is made once. */
    pthread_once(&key_secret_once, make_key_secret);
    uint64_t k = (key ^ ((uint64_t)uid * 0x9e3779b97f4a7c15ULL)) * 1099511628211ULL;
    k = (k ^ key_secret) * 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k ? k : 1;
}

/* Writes job entry `j`'s cap for a job held to a fair share: called at its JOB and at each of its
 * ACQUIREs, since the share changes as other jobs come and go. Shares are per login (with its
 * subordinate uids, as the quotas count), then per job of the login: one user's four uncapped jobs
 * had four shares against another user's one. */
static void fair_share(struct arb_gpu *g, int j, uint64_t now)
{
    const struct vgpu_sched_job *e = &g->s.f->jobs[j];
    uint32_t login[VGPU_SCHED_MAX_JOBS];
    for (unsigned k = 0; k < VGPU_SCHED_MAX_JOBS; k++)
        login[k] = (uint32_t)g->job_login[k];
    unsigned fair = vgpu_sched_fair_cap(&g->s, (unsigned)j, login);
    if (atomic_load(&e->cap) != fair)
        vgpu_sched_job(&g->s, atomic_load(&e->key), fair, true, atomic_load(&e->prio), now);
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
    int kept = -1;   /* the job's entry, when it has one already */
    for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS && kept < 0; j++)
        if (atomic_load(&g->s.f->jobs[j].key) == key)
            kept = (int)j;
    bool admin = false;
    if (kept >= 0 && g->admin_set[kept]) {
        /* The administrator's limits hold for the job's life, whatever a later request says. */
        cap = g->admin_cap[kept];
        soft = g->admin_soft[kept];
        prio = g->admin_prio[kept];
        admin = true;
    } else {
        admin = c->uid != 0 && admin_limits(fd, g->uuid, &cap, &soft, &prio);
    }
    unsigned asked_cap = cap;
    bool asked_soft = soft;
    /* Priority is a right, not a wish: the job's word is what it asks, the policy what it gets
     * (an administrator's --user limits are root's word already). */
    if (!admin)
        prio = arb_granted_prio(c->uid, prio);
    /* An uncapped job that is not background preempts only within a fair share: its cap is
     * that share, soft (it still uses what nobody else wants). Uncapped high once held
     * another user's --core 30 job at 2 % of the GPU. */
    bool fair = cap == 0 && prio != VGPU_PRIO_LOW;
    if (fair) {
        cap = 100;
        soft = true;
    }
    bool known = kept >= 0;
    const char *full = known ? NULL : arb_quota_job(a, g, c, now);   /* quota.c */
    if (full)
        return arb_refuse(a, r, EDQUOT, full);
    int j = vgpu_sched_job(&g->s, key, cap, soft, prio, now);
    if (j < 0)
        return arb_refuse(a, r, ENOSPC, "the GPU's schedule is full");
    g->job_uid[j] = c->uid;
    g->job_login[j] = arb_login_of(a, c->uid);
    if (!known)
        arb_debt_apply(g, (unsigned)j, now);   /* debts.c: no fresh turn for a new key */
    g->admin_set[j] = admin;
    if (admin) {
        g->admin_cap[j] = (uint8_t)asked_cap;
        g->admin_soft[j] = asked_soft;
        g->admin_prio[j] = (int8_t)prio;
    }
    g->fair_share[j] = fair;
    if (fair)
        fair_share(g, j, now);
    r->rc = j;
    return 0;
}

static int do_attach(struct arbiter *a, struct arb_gpu *g, struct arb_client *c, const struct vgpu_arb_req *q,
                     struct vgpu_arb_rep *r)
{
    uint64_t j = q->a[0];
    if (j >= VGPU_SCHED_MAX_JOBS || !atomic_load(&g->s.f->jobs[j].key) || g->job_uid[j] != c->uid)
        return arb_refuse(a, r, EPERM, "that job entry is not your user's");
    const char *full = arb_quota_proc(a, g, c);   /* quota.c */
    if (full)
        return arb_refuse(a, r, EDQUOT, full);
    uint64_t start = vgpu_proc_start_time(c->pid);
    int p = vgpu_sched_attach(&g->s, (unsigned)j, c->pid, start);
    if (p < 0)
        return arb_refuse(a, r, ENOSPC, "the GPU's schedule is full");
    g->proc_client[p] = c->id;
    g->proc_uid[p] = c->uid;
    r->rc = p;
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
        /* Preempted: all of it up to the preemption, and at least half the overlap after it
         * (vgpu_sched_used_preempted); half of it all when the moment is not known. */
        uint64_t tp = g->taken_at[proc];
        least = tp >= start && tp <= t ? (tp - start) + (t - tp) / 2 : wall / 2;
    } else if (g->grant_preempted[proc]) {
        uint64_t ov_end = g->drained_at > start ? g->drained_at : start + VGPU_SCHED_OVERLAP_NS;
        least = t > ov_end ? t - ov_end : 0;
    } else {
        least = wall;
    }
    return used < least ? least : used > wall ? wall : used;
}

/* Every end of a lease comes here, however it ends: a RELEASE (the client's `used`, believed
 * within charge()'s bounds), the daemon revoking an overdue lease, a DETACH, a closed
 * connection, a new grant to an entry whose last lease was taken from it and never given back
 * (used 0: the floor). The lease is charged once: a later RELEASE of it is charged nothing.
 * Before, only RELEASE charged, and ending each lease another way held it 75 % of the time for
 * free. Returns whether the lease was still current (given back now). */
static bool end_lease(struct arbiter *a, unsigned gi, int proc, uint64_t used, uint64_t t)
{
    struct arb_gpu *g = a->gpus[gi];
    uint64_t lease = g->grant_lease[proc];
    if (!lease)
        return false;
    uint64_t ns = charge(g, proc, lease, used, t);
    /* Kept apart for the job's accounting record too (charged.c): what the job reports there is
     * checked against it. */
    arb_charged_add(a, gi, atomic_load(&g->s.f->procs[proc].job), ns, used);
    bool current = vgpu_sched_release(&g->s, lease, ns, t);
    g->grant_lease[proc] = 0;
    g->grant_at[proc] = 0;
    g->taken_at[proc] = 0;
    return current;
}

static int do_acquire(struct arbiter *a, unsigned gi, struct arb_client *c, const struct vgpu_arb_req *q,
                      struct vgpu_arb_rep *r)
{
    struct arb_gpu *g = a->gpus[gi];
    if (!owns_proc(g, c, q->proc))
        return arb_refuse(a, r, EPERM, "not your process entry");
    uint64_t now = now_ns(), lease = atomic_load(&g->s.f->lease), end;
    /* An overdue lease is revoked here, charged first (try_acquire would only free it). */
    unsigned h = vgpu_lease_holder(lease);
    if (h && h <= VGPU_SCHED_MAX_PROCS && g->grant_lease[h - 1] == lease && vgpu_sched_overdue(&g->s, now))
        end_lease(a, gi, (int)h - 1, 0, now);
    unsigned jn = atomic_load(&g->s.f->procs[q->proc].job);
    if (jn < VGPU_SCHED_MAX_JOBS && g->fair_share[jn])
        fair_share(g, (int)jn, now);
    /* A lease of ours taken by a preemptor and never given back: paid for before the next. */
    if (g->grant_lease[q->proc] && g->grant_lease[q->proc] != atomic_load(&g->s.f->lease))
        end_lease(a, gi, q->proc, 0, now);
    uint64_t before = atomic_load(&g->s.f->lease);
    unsigned hb = vgpu_lease_holder(before);
    if (!vgpu_sched_try_acquire(&g->s, q->proc, now, &lease, &end)) {
        r->rc = 0;
        return 0;
    }
    /* Taken from a holder whose lease is not charged yet: a preemption, charged from here on
     * as the overlap rules say (charge()). */
    if (hb && hb <= VGPU_SCHED_MAX_PROCS && (int)hb - 1 != q->proc && g->grant_lease[hb - 1] == before) {
        g->taken_at[hb - 1] = now;
        g->drainer = 0;   /* a new overlap begins: an earlier holder's late DRAINED must not end it */
    }
    if (g->grant_lease[q->proc])
        end_lease(a, gi, q->proc, 0, now);   /* cannot be current any more; defensive */
    g->grant_lease[q->proc] = lease;
    g->grant_at[q->proc] = now;
    uint64_t ov = atomic_load(&g->s.f->overlap_until);
    g->grant_preempted[q->proc] = ov > now;   /* a holder we took the lease from still drains */
    r->rc = 1;
    r->v[0] = lease;
    r->v[1] = end;
    return 0;
}

static int do_release(struct arbiter *a, unsigned gi, struct arb_client *c, const struct vgpu_arb_req *q,
                      struct vgpu_arb_rep *r)
{
    struct arb_gpu *g = a->gpus[gi];
    int h = own_holder(g, c, q->a[0]);
    if (h < 0)
        return arb_refuse(a, r, EPERM, "not a lease of yours");
    /* Charged already (revoked, or taken and paid for at the next grant): nothing more. */
    if (g->grant_lease[h] != q->a[0]) {
        r->rc = 0;
        g->drainer = (uint16_t)(h + 1);   /* its lease went: it says DRAINED next */
        return 0;
    }
    r->rc = end_lease(a, gi, h, q->a[1], believed(q->a[2], now_ns())) ? 1 : 0;
    /* Not current: the holder's work ran on past the preemption; it says DRAINED next. */
    g->drainer = r->rc ? 0 : (uint16_t)(h + 1);
    return 0;
}

/* Process entry `p` leaves (DETACH, or its connection closed): a lease it holds or was taken
 * from it is charged (end_lease), and when it was its job's last process, the job keeps its
 * debt but no credit (vgpu_sched_forfeit), and its entry is kept ARB_LEFT_JOB_NS more only. */
static void proc_left(struct arbiter *a, unsigned gi, int p, uint64_t now)
{
    struct arb_gpu *g = a->gpus[gi];
    end_lease(a, gi, p, 0, now);
    unsigned j = atomic_load(&g->s.f->procs[p].job);
    vgpu_sched_detach(&g->s, p);
    g->proc_client[p] = 0;
    if (g->drainer == p + 1)
        g->drainer = 0;
    if (j >= VGPU_SCHED_MAX_JOBS)
        return;
    for (unsigned o = 0; o < VGPU_SCHED_MAX_PROCS; o++)
        if (g->proc_client[o] && atomic_load(&g->s.f->procs[o].job) == j)
            return;
    vgpu_sched_forfeit(&g->s, j, now);
    arb_debt_keep(g, j, now);   /* debts.c: a new job key of the login's inherits what it owes */
    uint64_t idle_from = now + ARB_LEFT_JOB_NS - VGPU_SCHED_JOB_IDLE_NS;
    if (now > VGPU_SCHED_JOB_IDLE_NS && atomic_load(&g->s.f->jobs[j].seen_ns) > idle_from)
        atomic_store(&g->s.f->jobs[j].seen_ns, idle_from);
}

/* Requests that get no reply: each is dropped when it names what is not the client's. */
static void do_silent(struct arbiter *a, unsigned gi, struct arb_client *c, const struct vgpu_arb_req *q)
{
    struct arb_gpu *g = a->gpus[gi];
    uint64_t now = now_ns();
    bool mine = owns_proc(g, c, q->proc);
    switch (q->op) {
    case VGPU_ARB_DETACH:
        if (mine) {
            proc_left(a, gi, q->proc, now);
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
            uint64_t back = q->a[0], gap = q->a[1], late = q->a[2];
            if (back && (back < now || back - now > VGPU_SCHED_CLEAR_AHEAD_NS || gap > VGPU_SCHED_CLEAR_AHEAD_NS))
                back = gap = late = 0;   /* not believable: no guess */
            vgpu_sched_expect(&g->s, q->proc, back, gap, late > gap ? gap : late);
            return;
        }
        break;
    case VGPU_ARB_DRAINING:
        /* Only the holder of the current lease drains (an old lease of its own is no lease). */
        if (own_holder(g, c, q->a[0]) >= 0 && q->a[0] == atomic_load(&g->s.f->lease)) {
            vgpu_sched_draining(&g->s, q->a[0], now);
            return;
        }
        break;
    case VGPU_ARB_DRAINED:
        /* Only from the holder whose RELEASE just found its lease gone, once. */
        if (g->drainer && owns_proc(g, c, g->drainer - 1)) {
            g->drainer = 0;
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

/* The requests of vgpu's commands, served beside the schedules (vgpu/arbiter.h's ranges): each
 * service answers its range (false: later, from a thread of its own) and forgets what a client
 * held when it goes. This file only dispatches to them; none of them calls back into it. */
static const struct arb_service {
    uint32_t first, last;
    bool (*handle)(struct arbiter *, struct arb_client *, const struct vgpu_arb_req *, const void *,
                   struct vgpu_arb_rep *, void *);
    void (*gone)(struct arbiter *, struct arb_client *);
} services[] = {
    { VGPU_ARB_PLACE_FIRST, VGPU_ARB_PLACE_LAST, arb_place_handle, arb_place_client_gone },
    { VGPU_ARB_LEND_FIRST, VGPU_ARB_LEND_LAST, arb_lend_handle, arb_lend_client_gone },
    { VGPU_ARB_ACCT_FIRST, VGPU_ARB_ACCT_LAST, arb_acct_handle, arb_acct_client_gone },
};

static const struct arb_service *service_of(uint32_t op)
{
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++)
        if (op >= services[i].first && op <= services[i].last)
            return &services[i];
    return NULL;
}

bool arb_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in, int passed_fd,
                struct vgpu_arb_rep *r, void *out, int *send_fd)
{
    memset(r, 0, sizeof *r);
    *send_fd = -1;
    a->requests++;
    const struct arb_service *svc = service_of(q->op);
    bool answered = (q->op >= VGPU_ARB_HELLO && q->op <= VGPU_ARB_RELEASE) || svc;
    if (svc) {
        if (!svc->handle(a, c, q, in, r, out)) {
            if (passed_fd >= 0)
                close(passed_fd);
            return false;   /* queued: the accounting thread answers it (acct_worker.c) */
        }
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
        case VGPU_ARB_ACQUIRE: do_acquire(a, q->gpu, c, q, r); break;
        case VGPU_ARB_RELEASE: do_release(a, q->gpu, c, q, r); break;
        default: do_silent(a, q->gpu, c, q); break;
        }
    }
    if (passed_fd >= 0)
        close(passed_fd);
    return answered;
}

void arb_client_gone(struct arbiter *a, struct arb_client *c)
{
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++)
        services[i].gone(a, c);
    uint64_t now = now_ns();
    for (unsigned i = 0; i < a->ngpus; i++)
        for (int p = 0; p < VGPU_SCHED_MAX_PROCS; p++)
            if (a->gpus[i]->proc_client[p] == c->id)
                proc_left(a, i, p, now);
}
