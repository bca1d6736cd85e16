/* sched.c: the per-GPU scheduler file of the compute limiter (see vgpu/sched.h for the model).
 *
 * Everything shared is a single atomic word or a value whose brief inconsistency costs at most
 * one lease of accuracy (a job's credit and its timestamp are written by the lease holder of
 * that job only, so they never race with each other in practice). No lock, so a process killed
 * anywhere leaves nothing held: a lease outlives its holder by at most its deadline + grace. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"

/* ---- arithmetic ------------------------------------------------------------------------------ */

uint64_t vgpu_sched_quantum(unsigned cap)
{
    if (cap > 100)
        cap = 100;
    return VGPU_SCHED_PERIOD_NS * cap / 100;
}

static int64_t accrue(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now)
{
    if (now > credit_t) {
        uint64_t dt = now - credit_t;
        if (dt > 1000 * VGPU_SCHED_PERIOD_NS) /* 50 s: beyond any debt or burst; avoids overflow */
            dt = 1000 * VGPU_SCHED_PERIOD_NS;
        credit += (int64_t)(dt * cap / 100);
    }
    return credit;
}

int64_t vgpu_sched_credit_at(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now)
{
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    credit = accrue(credit, credit_t, cap, now);
    return credit > burst ? burst : credit;
}

int64_t vgpu_sched_settle(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now, uint64_t used,
                          bool borrowed)
{
    /* The credit the job had when the lease began is at most the burst already; what accrued
     * while it ran is not idle time and is not clamped away. */
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    int64_t c = vgpu_sched_charge(accrue(credit, credit_t, cap, now), used, borrowed);
    return c > burst ? burst : c;
}

int64_t vgpu_sched_charge(int64_t credit_now, uint64_t used, bool borrowed)
{
    int64_t u = used > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)used;
    int64_t c = credit_now - u;
    if (borrowed) {
        /* Idle time nobody wanted is free: it may use up what the job had, never more. */
        int64_t floor = credit_now < 0 ? credit_now : 0;
        if (c < floor)
            c = floor;
    }
    /* Bound the debt of one runaway lease to a few seconds of waiting for a 1% job. */
    int64_t min = -(int64_t)(40 * VGPU_SCHED_PERIOD_NS);
    return c < min ? min : c;
}

uint64_t vgpu_sched_eligible_at(int64_t credit, uint64_t credit_t, unsigned cap)
{
    int64_t q = (int64_t)vgpu_sched_quantum(cap);
    if (credit >= q || cap == 0)
        return cap == 0 ? UINT64_MAX : credit_t;
    return credit_t + (uint64_t)(q - credit) * 100 / cap;
}

/* Orders entitled candidates: >0 when a goes before b. */
static int before(const struct vgpu_sched_cand *a, const struct vgpu_sched_cand *b, uint64_t now)
{
    uint64_t sa = a->eligible_at > a->want_since ? a->eligible_at : a->want_since;
    uint64_t sb = b->eligible_at > b->want_since ? b->eligible_at : b->want_since;
    bool starve_a = now > sa && now - sa > VGPU_SCHED_STARVE_NS;
    bool starve_b = now > sb && now - sb > VGPU_SCHED_STARVE_NS;
    if (starve_a != starve_b)
        return starve_a ? 1 : -1;
    if (a->prio != b->prio)
        return a->prio > b->prio ? 1 : -1;
    /* credit / quantum, compared without division: credit_a * cap_b vs credit_b * cap_a */
    __int128 ra = (__int128)a->credit * (b->cap ? b->cap : 1);
    __int128 rb = (__int128)b->credit * (a->cap ? a->cap : 1);
    if (ra != rb)
        return ra > rb ? 1 : -1;
    if (a->want_since != b->want_since)
        return a->want_since < b->want_since ? 1 : -1;
    return 0;
}

int vgpu_sched_pick(const struct vgpu_sched_cand *c, unsigned n, uint64_t now, bool *borrow, uint64_t *len)
{
    int best = -1;
    for (unsigned i = 0; i < n; i++) {
        if (c[i].cap == 0 || now < c[i].eligible_at)
            continue;
        if (best < 0 || before(&c[i], &c[best], now) > 0)
            best = (int)i;
    }
    if (best >= 0) {
        uint64_t q = vgpu_sched_quantum(c[best].cap);
        uint64_t l = c[best].credit > 0 ? (uint64_t)c[best].credit : 0;
        if (l > 2 * q)
            l = 2 * q;
        if (l < VGPU_SCHED_MIN_LEASE_NS)
            l = VGPU_SCHED_MIN_LEASE_NS;
        *borrow = false;
        *len = l;
        return best;
    }
    /* Nobody is entitled: a soft job may borrow, until the first one that will be. */
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        if (c[i].eligible_at < next)
            next = c[i].eligible_at;
    for (unsigned i = 0; i < n; i++) {
        if (!c[i].soft || c[i].cap == 0)
            continue;
        if (best < 0 || c[i].prio > c[best].prio ||
            (c[i].prio == c[best].prio && c[i].want_since < c[best].want_since))
            best = (int)i;
    }
    if (best < 0)
        return -1;
    uint64_t l = VGPU_SCHED_BORROW_NS;
    if (next != UINT64_MAX && next > now && next - now < l)
        l = next - now;
    if (l < VGPU_SCHED_MIN_LEASE_NS)
        l = VGPU_SCHED_MIN_LEASE_NS;
    *borrow = true;
    *len = l;
    return best;
}

/* ---- liveness ------------------------------------------------------------------------------------ */

static bool default_alive(pid_t pid, uint64_t start)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    uint64_t now = vgpu_proc_start_time(pid);
    return now != 0 && (start == 0 || now == start);
}
bool (*vgpu_sched_alive)(pid_t pid, uint64_t start) = default_alive;

/* ---- the file -------------------------------------------------------------------------------------- */

static int map_fd(struct vgpu_sched *s, int fd, const char *path, struct vgpu_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot stat %s: %s", path, strerror(errno));
        return -1;
    }
    if (st.st_mode & 022) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "%s is writable by others; remove it", path);
        return -1;
    }
    if ((size_t)st.st_size < sizeof(struct vgpu_sched_file) &&
        ftruncate(fd, (off_t)sizeof(struct vgpu_sched_file)) != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot size %s: %s", path, strerror(errno));
        return -1;
    }
    void *m = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map %s: %s", path, strerror(errno));
        return -1;
    }
    struct vgpu_sched_file *f = m;
    /* A fresh file is all zeroes: whoever comes first stamps it (the layout needs no other
     * initialisation, so two processes stamping at once is harmless). */
    uint64_t magic = atomic_load(&f->magic);
    if (magic == 0) {
        f->version = VGPU_SCHED_VERSION;
        f->size = (uint32_t)sizeof *f;
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&f->magic, &zero, VGPU_SCHED_MAGIC);
    } else if (magic != VGPU_SCHED_MAGIC || f->version != VGPU_SCHED_VERSION || f->size != sizeof *f) {
        munmap(m, sizeof *f);
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is not a vgpu scheduler file of this version; remove it "
                     "when no capped job runs on that GPU", path);
        return -1;
    }
    s->f = f;
    s->fd = fd;
    return 0;
}

int vgpu_sched_open_path(struct vgpu_sched *s, const char *path, struct vgpu_err *e)
{
    s->f = NULL;
    s->fd = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL, "cannot open %s: %s", path,
                     strerror(errno));
        return -1;
    }
    if (map_fd(s, fd, path, e) != 0) {
        close(fd);
        return -1;
    }
    return 0;
}

int vgpu_sched_open(struct vgpu_sched *s, const char *statedir, const char *uuid, struct vgpu_err *e)
{
    char dir[4096], path[4400];
    if (!uuid[0] || strchr(uuid, '/')) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "bad GPU UUID '%s' for the scheduler file", uuid);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s/sched", statedir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, uuid);
    return vgpu_sched_open_path(s, path, e);
}

void vgpu_sched_close(struct vgpu_sched *s)
{
    if (s->f)
        munmap(s->f, sizeof *s->f);
    if (s->fd >= 0)
        close(s->fd);
    s->f = NULL;
    s->fd = -1;
}

static bool job_has_procs(const struct vgpu_sched_file *f, unsigned job)
{
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
        if (atomic_load(&f->procs[i].pid) && atomic_load(&f->procs[i].job) == job)
            return true;
    return false;
}

int vgpu_sched_job(struct vgpu_sched *s, uint64_t key, unsigned cap, bool soft, int prio, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    if (cap > 100)
        cap = 100;
    int idx = -1;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS && idx < 0; i++)
        if (atomic_load(&f->jobs[i].key) == key)
            idx = (int)i;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS && idx < 0; i++) {
        struct vgpu_sched_job *j = &f->jobs[i];
        uint64_t k = atomic_load(&j->key);
        bool stale = k && now > atomic_load(&j->seen_ns) + VGPU_SCHED_JOB_IDLE_NS && !job_has_procs(f, i);
        if ((k == 0 || stale) && atomic_compare_exchange_strong(&j->key, &k, key)) {
            /* A new job may run at once: its first turn is one quantum. */
            atomic_store(&j->cap, cap);
            atomic_store(&j->credit, (int64_t)vgpu_sched_quantum(cap));
            atomic_store(&j->credit_t, now);
            atomic_store(&j->used_ns, 0);
            idx = (int)i;
        }
    }
    if (idx < 0)
        return -1;
    struct vgpu_sched_job *j = &f->jobs[idx];
    unsigned old = atomic_load(&j->cap);
    if (old != cap) {
        /* Rebase, so the time before the change accrues at the old rate. */
        int64_t c = vgpu_sched_credit_at(atomic_load(&j->credit), atomic_load(&j->credit_t), old, now);
        atomic_store(&j->credit, c);
        atomic_store(&j->credit_t, now);
        atomic_store(&j->cap, cap);
    }
    atomic_store(&j->soft, soft ? 1u : 0u);
    atomic_store(&j->prio, prio);
    atomic_store(&j->seen_ns, now);
    return idx;
}

int vgpu_sched_attach(struct vgpu_sched *s, unsigned job, pid_t pid, uint64_t start)
{
    struct vgpu_sched_file *f = s->f;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
            struct vgpu_sched_proc *p = &f->procs[i];
            uint64_t cur = atomic_load(&p->pid);
            if (cur == (uint64_t)pid && atomic_load(&p->start) == start && atomic_load(&p->job) == job)
                return (int)i;   /* already ours (a re-attach after a failed detach) */
            if (cur != 0)
                continue;
            if (atomic_compare_exchange_strong(&p->pid, &cur, (uint64_t)pid)) {
                atomic_store(&p->start, start);
                atomic_store(&p->job, job);
                atomic_store(&p->want_since, 0);
                atomic_store(&p->polled, 0);
                return (int)i;
            }
        }
        /* Full: reclaim the entries of dead processes, then try once more. */
        for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
            struct vgpu_sched_proc *p = &f->procs[i];
            uint64_t cur = atomic_load(&p->pid);
            if (cur && !vgpu_sched_alive((pid_t)cur, atomic_load(&p->start)))
                atomic_compare_exchange_strong(&p->pid, &cur, 0);
        }
    }
    return -1;
}

void vgpu_sched_detach(struct vgpu_sched *s, int proc)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return;
    struct vgpu_sched_proc *p = &s->f->procs[proc];
    atomic_store(&p->want_since, 0);
    uint64_t lease = atomic_load(&s->f->lease);
    if (vgpu_lease_holder(lease) == (unsigned)proc + 1)
        vgpu_sched_release(s, lease, 0, 0);
    atomic_store(&p->pid, 0);
}

static void wake_all(struct vgpu_sched_file *f)
{
    atomic_fetch_add(&f->seq, 1);
    syscall(SYS_futex, &f->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Frees the lease of a holder that is past its deadline + grace (dead, stopped, or idle). */
static void revoke_overdue(struct vgpu_sched_file *f, uint64_t now)
{
    uint64_t lease = atomic_load(&f->lease);
    if (!vgpu_lease_holder(lease) || now < atomic_load(&f->lease_end) + VGPU_SCHED_GRACE_NS)
        return;
    uint64_t freed = lease & ~(uint64_t)0xffff;
    if (atomic_compare_exchange_strong(&f->lease, &lease, freed))
        wake_all(f);
}

bool vgpu_sched_try_acquire(struct vgpu_sched *s, int proc, uint64_t now, uint64_t *lease_out, uint64_t *end)
{
    struct vgpu_sched_file *f = s->f;
    struct vgpu_sched_proc *me = &f->procs[proc];
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&me->want_since, &zero, now);
    atomic_store(&me->polled, now);

    revoke_overdue(f, now);
    uint64_t lease = atomic_load(&f->lease);
    if (vgpu_lease_holder(lease))
        return false;

    /* Everyone who waits, as the picker sees them; absent waiters are passed over. */
    struct vgpu_sched_cand c[VGPU_SCHED_MAX_PROCS];
    unsigned who[VGPU_SCHED_MAX_PROCS], n = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        struct vgpu_sched_proc *p = &f->procs[i];
        uint64_t ws = atomic_load(&p->want_since);
        if (!ws || !atomic_load(&p->pid))
            continue;
        uint64_t polled = atomic_load(&p->polled);
        if ((int)i != proc && now > polled && now - polled > VGPU_SCHED_ABSENT_NS)
            continue;
        unsigned jn = atomic_load(&p->job);
        if (jn >= VGPU_SCHED_MAX_JOBS)
            continue;
        struct vgpu_sched_job *j = &f->jobs[jn];
        unsigned cap = atomic_load(&j->cap);
        int64_t cr = atomic_load(&j->credit);
        uint64_t ct = atomic_load(&j->credit_t);
        c[n] = (struct vgpu_sched_cand){
            .job = jn, .cap = cap, .soft = atomic_load(&j->soft) != 0, .prio = atomic_load(&j->prio),
            .credit = vgpu_sched_credit_at(cr, ct, cap, now), .want_since = ws,
            .eligible_at = vgpu_sched_eligible_at(cr, ct, cap),
        };
        who[n++] = i;
    }
    bool borrow = false;
    uint64_t len = 0;
    int w = vgpu_sched_pick(c, n, now, &borrow, &len);
    if (w < 0 || who[w] != (unsigned)proc)
        return false;
    uint64_t granted = ((vgpu_lease_gen(lease) + 1) << 16) | (uint64_t)(proc + 1);
    /* Deadline first, so nobody sees the new lease with the old deadline and revokes it. */
    atomic_store(&f->lease_end, now + len);
    atomic_store(&f->lease_start, now);
    if (!atomic_compare_exchange_strong(&f->lease, &lease, granted))
        return false;
    atomic_store(&f->lease_end, now + len);
    atomic_store(&f->lease_start, now);
    atomic_store(&f->borrowed, borrow ? 1u : 0u);
    atomic_store(&me->want_since, 0);
    *lease_out = granted;
    *end = now + len;
    return true;
}

bool vgpu_sched_release(struct vgpu_sched *s, uint64_t lease, uint64_t used, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    unsigned holder = vgpu_lease_holder(lease);
    if (!holder || holder > VGPU_SCHED_MAX_PROCS)
        return false;
    bool borrowed = atomic_load(&f->borrowed) != 0;
    unsigned jn = atomic_load(&f->procs[holder - 1].job);
    if (now && jn < VGPU_SCHED_MAX_JOBS) {
        struct vgpu_sched_job *j = &f->jobs[jn];
        unsigned cap = atomic_load(&j->cap);
        atomic_store(&j->credit, vgpu_sched_settle(atomic_load(&j->credit), atomic_load(&j->credit_t), cap, now,
                                                   used, borrowed));
        atomic_store(&j->credit_t, now);
        atomic_fetch_add(&j->used_ns, used);
        atomic_store(&j->seen_ns, now);
    }
    uint64_t freed = lease & ~(uint64_t)0xffff;
    bool ok = atomic_compare_exchange_strong(&f->lease, &lease, freed);
    if (ok)
        wake_all(f);
    return ok;
}

void vgpu_sched_unwant(struct vgpu_sched *s, int proc)
{
    if (s->f && proc >= 0 && proc < VGPU_SCHED_MAX_PROCS)
        atomic_store(&s->f->procs[proc].want_since, 0);
}

void vgpu_sched_wait(struct vgpu_sched *s, uint64_t max_ns)
{
    struct vgpu_sched_file *f = s->f;
    uint32_t seq = atomic_load(&f->seq);
    if (max_ns < 20000)
        max_ns = 20000;
    struct timespec ts = { (time_t)(max_ns / 1000000000ULL), (long)(max_ns % 1000000000ULL) };
    /* The lease may have been freed between our look and now: the futex returns at once then. */
    syscall(SYS_futex, &f->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
}

uint64_t vgpu_sched_retry_in(struct vgpu_sched *s, int proc, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t wait = 5000000ULL;   /* 5 ms: below VGPU_SCHED_ABSENT_NS */
    unsigned jn = atomic_load(&f->procs[proc].job);
    if (jn < VGPU_SCHED_MAX_JOBS) {
        struct vgpu_sched_job *j = &f->jobs[jn];
        uint64_t at = vgpu_sched_eligible_at(atomic_load(&j->credit), atomic_load(&j->credit_t),
                                             atomic_load(&j->cap));
        if (at > now && at - now < wait)
            wait = at - now;
        else if (at <= now)
            wait = 1000000ULL;   /* entitled: someone else holds the lease; the futex wakes us */
    }
    uint64_t lease = atomic_load(&f->lease);
    if (vgpu_lease_holder(lease)) {
        uint64_t overdue = atomic_load(&f->lease_end) + VGPU_SCHED_GRACE_NS;
        if (overdue > now && overdue - now < wait)
            wait = overdue - now;
    }
    return wait;
}
