/* sched.c: the machine-wide per-GPU schedule of the compute limiter (see vgpu/sched.h).
 *
 * Everything shared is a single atomic word or a value whose brief inconsistency costs at most
 * one lease of accuracy (a job's credit and its timestamp are written by the lease holder of
 * that job only, so they never race with each other in practice). No lock, so a process killed
 * anywhere leaves nothing held: a lease outlives its holder by at most its deadline + grace.
 * Every user may write the segment, so every value read from it is validated or clamped here
 * (the ld_* readers) before it is used: garbage costs accuracy, never a crash or a long wait. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/machinedir.h"
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
    /* Bound the debt of runaway leases (a 10% job waits at most 2 s to repay it). */
    int64_t min = -(int64_t)VGPU_SCHED_DEBT_NS;
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

static uint64_t own_pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

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

/* A process entry is dead when its pid, in our own PID namespace, is gone or reused. An entry
 * of another namespace cannot be judged by pid: it is dead once it has not polled for a minute
 * (a process that never waits holds an entry for nothing). */
static bool proc_dead(const struct vgpu_sched_proc *p, uint64_t now, uint64_t myns)
{
    uint64_t pid = atomic_load(&p->pid);
    if (!pid)
        return false;
    uint64_t ns = atomic_load(&p->pidns);
    if (ns && myns && ns != myns) {
        uint64_t polled = atomic_load(&p->polled);
        return now > polled && now - polled > 60 * 1000000000ULL;
    }
    return pid > (uint64_t)INT32_MAX || !vgpu_sched_alive((pid_t)pid, atomic_load(&p->start));
}

/* ---- validated reads of the shared segment ------------------------------------------------------- */

static unsigned ld_cap(const struct vgpu_sched_job *j)
{
    unsigned c = atomic_load(&j->cap);
    return c > 100 ? 100 : c;
}

static int ld_prio(const struct vgpu_sched_job *j)
{
    int p = atomic_load(&j->prio);
    return p > 0 ? VGPU_PRIO_HIGH : p < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
}

/* A job's credit and its time, clamped to what the arithmetic can produce: [-debt, burst], and a
 * time not in the future (which would freeze the credit). */
static void ld_credit(const struct vgpu_sched_job *j, unsigned cap, uint64_t now, int64_t *credit, uint64_t *t)
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

static const struct vgpu_sched_job *ld_job_of(const struct vgpu_sched_file *f, unsigned proc)
{
    if (proc >= VGPU_SCHED_MAX_PROCS)
        return NULL;
    unsigned jn = atomic_load(&f->procs[proc].job);
    return jn < VGPU_SCHED_MAX_JOBS ? &f->jobs[jn] : NULL;
}

uint64_t vgpu_sched_deadline(struct vgpu_sched *s, uint64_t lease)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t end = atomic_load(&f->lease_end), start = atomic_load(&f->lease_start);
    if (atomic_load(&f->lease) != lease || end < start || end - start > VGPU_SCHED_MAX_LEASE_NS)
        return 0;
    return end;
}

/* ---- the segment ----------------------------------------------------------------------------------- */

static uint64_t dir_hash(void)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (const char *p = vgpu_machinedir_path(); *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static void stamp(struct vgpu_sched_file *f)
{
    /* A fresh segment is all zeroes: whoever comes first stamps it (the layout needs no other
     * initialisation, so two processes stamping at once is harmless). */
    if (atomic_load(&f->magic) == 0) {
        f->version = VGPU_SCHED_VERSION;
        f->size = (uint32_t)sizeof *f;
        f->dirhash = dir_hash();
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&f->magic, &zero, VGPU_SCHED_MAGIC);
    }
}

static bool layout_ok(const struct vgpu_sched_file *f)
{
    return atomic_load(&f->magic) == VGPU_SCHED_MAGIC && f->version == VGPU_SCHED_VERSION && f->size == sizeof *f;
}

int vgpu_sched_open_path(struct vgpu_sched *s, const char *path, struct vgpu_err *e)
{
    s->f = NULL;
    s->fd = -1;
    s->shmid = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL, "cannot open %s: %s", path,
                     strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "%s is not a regular file of yours that only you may write", path);
        close(fd);
        return -1;
    }
    if ((size_t)st.st_size < sizeof(struct vgpu_sched_file) &&
        ftruncate(fd, (off_t)sizeof(struct vgpu_sched_file)) != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot size %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    stamp(m);
    if (!layout_ok(m)) {
        munmap(m, sizeof(struct vgpu_sched_file));
        close(fd);
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is not a vgpu scheduler file of this version; remove it "
                     "when no capped job runs on that GPU", path);
        return -1;
    }
    s->f = m;
    s->fd = fd;
    return 0;
}

int vgpu_sched_key(const char *machinedir, const char *uuid)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    const char *parts[3] = { "vgpu-sched-v2", machinedir, uuid };
    for (int k = 0; k < 3; k++) {
        for (const char *p = parts[k]; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        h = (h ^ 0xffu) * 16777619u;   /* separator */
    }
    int key = (int)(h & 0x7fffffff);
    return key == IPC_PRIVATE ? 1 : key;
}

static void pause_1ms(void)
{
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
}

int vgpu_sched_open(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e)
{
    s->f = NULL;
    s->fd = -1;
    s->shmid = -1;
    if (!uuid[0] || strlen(uuid) > 95) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "bad GPU UUID '%s' for the GPU-time schedule", uuid);
        return -1;
    }
    int key = vgpu_sched_key(vgpu_machinedir_path(), uuid);
    /* Bounded: the segment may be removed by its last user between our get and our attach
     * (then it says so in `closing`, and we make a new one). */
    for (int attempt = 0; attempt < 200; attempt++) {
        int id = shmget(key, sizeof(struct vgpu_sched_file), IPC_CREAT | IPC_EXCL | 0666);
        if (id < 0 && errno == EEXIST)
            id = shmget(key, 0, 0);
        if (id < 0) {
            if (errno == ENOENT || errno == EIDRM)
                continue;
            vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_STATE,
                         "cannot get the GPU-time schedule of %s (System V shared memory key 0x%08x): %s", uuid,
                         (unsigned)key, strerror(errno));
            return -1;
        }
        struct shmid_ds ds;
        if (shmctl(id, IPC_STAT, &ds) != 0) {
            if (errno == EIDRM || errno == EINVAL)
                continue;
            vgpu_err_set(e, VGPU_EXIT_PERMISSION, "cannot use the GPU-time schedule of %s (shared memory id %d): %s; "
                         "its owner or root should remove it (ipcrm -m %d)", uuid, id, strerror(errno), id);
            return -1;
        }
        if (ds.shm_segsz != sizeof(struct vgpu_sched_file) || (ds.shm_perm.mode & 0666) != 0666) {
            vgpu_err_set(e, VGPU_EXIT_STATE,
                         "the shared memory segment %d (key 0x%08x, owner uid %u, mode %03o, %zu bytes) is not a "
                         "vgpu GPU-time schedule of this version that every user may use; when no capped job runs "
                         "on %s, its owner or root should remove it (ipcrm -m %d)", id, (unsigned)key,
                         (unsigned)ds.shm_perm.uid, (unsigned)(ds.shm_perm.mode & 0777), (size_t)ds.shm_segsz, uuid,
                         id);
            return -1;
        }
        void *m = shmat(id, NULL, 0);
        if (m == (void *)-1) {
            if (errno == EIDRM || errno == EINVAL)
                continue;
            vgpu_err_set(e, VGPU_EXIT_STATE, "cannot attach the GPU-time schedule of %s (shared memory id %d): %s",
                         uuid, id, strerror(errno));
            return -1;
        }
        struct vgpu_sched_file *f = m;
        if (atomic_load(&f->closing)) {   /* its last user is removing it */
            shmdt(m);
            pause_1ms();
            continue;
        }
        stamp(f);
        if (!layout_ok(f)) {
            shmdt(m);
            vgpu_err_set(e, VGPU_EXIT_STATE,
                         "the shared memory segment %d (key 0x%08x, owner uid %u) holds no vgpu GPU-time schedule of "
                         "this version; when no capped job runs on %s, its owner or root should remove it "
                         "(ipcrm -m %d)", id, (unsigned)key, (unsigned)ds.shm_perm.uid, uuid, id);
            return -1;
        }
        s->f = f;
        s->shmid = id;
        return 0;
    }
    vgpu_err_set(e, VGPU_EXIT_STATE, "the GPU-time schedule of %s kept disappearing while it was opened", uuid);
    return -1;
}

static bool any_proc(struct vgpu_sched_file *f, uint64_t now)
{
    uint64_t myns = own_pidns();
    bool any = false;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        struct vgpu_sched_proc *p = &f->procs[i];
        uint64_t cur = atomic_load(&p->pid);
        if (!cur)
            continue;
        if (proc_dead(p, now, myns))
            atomic_compare_exchange_strong(&p->pid, &cur, 0);
        else
            any = true;
    }
    return any;
}

void vgpu_sched_retire(struct vgpu_sched *s)
{
    if (s->f && s->shmid >= 0) {
        struct vgpu_sched_file *f = s->f;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        /* The last user of a schedule nobody is in removes it, so nothing is left when the last
         * job ends. `closing` first: whoever attaches after our count sees it and makes a new
         * segment instead of joining one that is going away; whoever attached before is counted. */
        if (!any_proc(f, now)) {
            atomic_store(&f->closing, 1);
            /* Not by the attach count: processes that retired at exit keep the segment mapped
             * until they are gone, and two leaving together each counted the other. Whoever
             * attached meanwhile has an entry (seen here), or checks after attaching
             * (vgpu_sched_removed) and opens the schedule anew. */
            bool removed = !any_proc(f, now) && shmctl(s->shmid, IPC_RMID, NULL) == 0;
            if (!removed)
                atomic_store(&f->closing, 0);
        }
    }
}

void vgpu_sched_close(struct vgpu_sched *s)
{
    vgpu_sched_retire(s);
    if (s->f && s->shmid >= 0) {
        shmdt(s->f);
    } else if (s->f) {
        munmap(s->f, sizeof *s->f);
    }
    if (s->fd >= 0)
        close(s->fd);
    s->f = NULL;
    s->fd = -1;
    s->shmid = -1;
}

unsigned vgpu_sched_sweep(void)
{
    struct shm_info info;
    int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
    unsigned removed = 0;
    uint64_t mine = dir_hash();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    for (int idx = 0; idx <= max; idx++) {
        struct shmid_ds ds;
        int id = shmctl(idx, SHM_STAT, &ds);
        if (id < 0 || ds.shm_segsz != sizeof(struct vgpu_sched_file) || (ds.shm_perm.mode & 0666) != 0666)
            continue;
        if (ds.shm_perm.uid != geteuid() && ds.shm_perm.cuid != geteuid() && geteuid() != 0)
            continue;   /* we could not remove it anyway */
        struct vgpu_sched_file *f = shmat(id, NULL, 0);
        if (f == (void *)-1)
            continue;
        if (layout_ok(f) && f->dirhash == mine && !any_proc(f, now)) {
            atomic_store(&f->closing, 1);
            if (!any_proc(f, now) && shmctl(id, IPC_RMID, NULL) == 0)
                removed++;
            else
                atomic_store(&f->closing, 0);
        }
        shmdt(f);
    }
    return removed;
}

bool vgpu_sched_removed(struct vgpu_sched *s)
{
    struct shmid_ds ds;
    if (!s->f || s->shmid < 0)
        return false;
    if (shmctl(s->shmid, IPC_STAT, &ds) != 0)
        return errno == EIDRM || errno == EINVAL;
    return (ds.shm_perm.mode & SHM_DEST) != 0;
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
        uint64_t seen = atomic_load(&j->seen_ns);
        bool stale = k && (seen > now || now - seen > VGPU_SCHED_JOB_IDLE_NS) && !job_has_procs(f, i);
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
    unsigned old = ld_cap(j);
    int64_t c;
    uint64_t ct;
    ld_credit(j, old, now, &c, &ct);
    if (old != cap) {
        /* Rebase, so the time before the change accrues at the old rate (within the new burst). */
        int64_t rebased = vgpu_sched_credit_at(c, ct, old, now), burst = 2 * (int64_t)vgpu_sched_quantum(cap);
        atomic_store(&j->credit, rebased > burst ? burst : rebased);
        atomic_store(&j->credit_t, now);
        atomic_store(&j->cap, cap);
    } else if (c != atomic_load(&j->credit) || ct != atomic_load(&j->credit_t)) {
        /* Repair what another process wrote out of range (damaged or hostile). */
        atomic_store(&j->credit, c);
        atomic_store(&j->credit_t, ct);
    }
    atomic_store(&j->soft, soft ? 1u : 0u);
    atomic_store(&j->prio, prio);
    atomic_store(&j->seen_ns, now);
    return idx;
}

int vgpu_sched_attach(struct vgpu_sched *s, unsigned job, pid_t pid, uint64_t start)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t myns = own_pidns();
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
            struct vgpu_sched_proc *p = &f->procs[i];
            uint64_t cur = atomic_load(&p->pid);
            if (cur == (uint64_t)pid && atomic_load(&p->start) == start && atomic_load(&p->job) == job &&
                atomic_load(&p->pidns) == myns)
                return (int)i;   /* already ours (a re-attach after a failed detach) */
            if (cur != 0)
                continue;
            if (atomic_compare_exchange_strong(&p->pid, &cur, (uint64_t)pid)) {
                atomic_store(&p->start, start);
                atomic_store(&p->job, job);
                atomic_store(&p->pidns, myns);
                atomic_store(&p->released, 0);
                atomic_store(&p->held_out, 0u);
                atomic_store(&p->want_since, 0);
                atomic_store(&p->polled, 0);
                return (int)i;
            }
        }
        /* Full: reclaim the entries of dead processes, then try once more. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        any_proc(f, (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
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

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void wake_all(struct vgpu_sched_file *f)
{
    atomic_fetch_add(&f->seq, 1);
    futex_wake(&f->seq);
}

/* Frees the lease of a holder that is past its deadline + grace (dead, stopped, or idle), or
 * whose lease word or deadline no valid grant could have written. */
static void revoke_overdue(struct vgpu_sched_file *f, uint64_t now)
{
    uint64_t lease = atomic_load(&f->lease);
    unsigned h = vgpu_lease_holder(lease);
    if (!h)
        return;
    uint64_t end = atomic_load(&f->lease_end), start = atomic_load(&f->lease_start);
    bool invalid = h > VGPU_SCHED_MAX_PROCS || end < start || end - start > VGPU_SCHED_MAX_LEASE_NS ||
                   start > now + VGPU_SCHED_MAX_LEASE_NS || !atomic_load(&f->procs[h - 1].pid);
    if (!invalid && now < end + VGPU_SCHED_GRACE_NS)
        return;
    /* A holder past its deadline that said it is draining (vgpu_sched_draining) is waiting for
     * the work it queued, however long its kernels: believed for VGPU_SCHED_OVERLAP_NS. Taking
     * the lease from it then made the next job overlap the drain, pay for it, and wait to be
     * eligible again with the GPU idle (H100, 15 ms kernels: 17 % of the time). */
    uint64_t ov = atomic_load(&f->overlap_until);
    if (!invalid && ov > now && ov - now <= VGPU_SCHED_OVERLAP_NS)
        return;
    uint64_t freed = lease & ~(uint64_t)0xffff;
    if (atomic_compare_exchange_strong(&f->lease, &lease, freed))
        wake_all(f);
}

void vgpu_sched_note_end(struct vgpu_sched *s, int proc, bool held_out, uint64_t now)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return;
    atomic_store(&s->f->procs[proc].held_out, held_out ? 1u : 0u);
    atomic_store(&s->f->procs[proc].released, now);
}

void vgpu_sched_want_from(struct vgpu_sched *s, int proc, uint64_t t)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS || !t)
        return;
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&s->f->procs[proc].want_since, &zero, t);
}

void vgpu_sched_draining(struct vgpu_sched *s, uint64_t lease, uint64_t now)
{
    if (atomic_load(&s->f->lease) == lease)
        atomic_store(&s->f->overlap_until, now + VGPU_SCHED_OVERLAP_NS);
}

/* A waiter of another job: take the lease from the holder at once (entitled, and with higher
 * priority or credit near its burst), or ask it to give the lease back once idle (see
 * vgpu/sched.h). true when the lease is now ours (*lease_out, *end). */
static bool preempt_or_ask(struct vgpu_sched_file *f, int proc, uint64_t lease, uint64_t now, uint64_t *lease_out,
                           uint64_t *end)
{
    unsigned h = vgpu_lease_holder(lease) - 1;
    const struct vgpu_sched_job *mine = ld_job_of(f, (unsigned)proc), *theirs = ld_job_of(f, h);
    if (!mine || !theirs || mine == theirs)
        return false;   /* processes of one job share its turn */
    unsigned cap = ld_cap(mine);
    if (!cap)
        return false;
    int64_t cr;
    uint64_t ct;
    ld_credit(mine, cap, now, &cr, &ct);
    int64_t credit = vgpu_sched_credit_at(cr, ct, cap, now);
    int64_t q = (int64_t)vgpu_sched_quantum(cap);
    /* Only an entitled waiter preempts; anyone waiting asks the holder to give back a lease it is
     * not using (idle lease time is charged, and would be lost to everyone). "Under its cap" is
     * credit near the burst; a waiter under its cap preempts only a holder that is not (caps
     * adding up to more than 100 % leave two saturating jobs both under their caps: they would
     * take the lease from each other at every turn). */
    bool urgent = credit >= q && ld_prio(mine) > ld_prio(theirs);
    /* Under its cap, it preempts only with work that arrived during this lease (it began to
     * wait after the grant): a request of a service. A job that was already waiting when the
     * lease was granted is a saturating one kept to its cap; taking the lease from a holder
     * whose queue is full makes the two overlap for the whole drain (tens of ms with long
     * kernels), and two such jobs then take it from each other at every turn (on the H100, a
     * 30/70 pair of 15 ms kernels reached 75 % of the GPU together, every lease preempted). */
    uint64_t ws = atomic_load(&f->procs[proc].want_since);
    uint64_t rel = atomic_load(&f->procs[proc].released);
    bool saturating = atomic_load(&f->procs[proc].held_out) && ws < rel + VGPU_SCHED_NEW_WORK_NS;
    bool new_work = ws >= atomic_load(&f->lease_start) && !saturating;
    if (!urgent && new_work && credit >= q && credit >= 2 * q - q / 2 && ld_prio(mine) == ld_prio(theirs)) {
        unsigned hcap = ld_cap(theirs);
        int64_t hcr;
        uint64_t hct;
        ld_credit(theirs, hcap, now, &hcr, &hct);
        int64_t hq = (int64_t)vgpu_sched_quantum(hcap);
        uint64_t start = atomic_load(&f->lease_start);
        int64_t held = start < now ? (int64_t)(now - start) : 0;
        int64_t theirs_now = vgpu_sched_credit_at(hcr, hct, hcap, now) - held;   /* not settled yet */
        urgent = theirs_now < 2 * hq - hq / 2;
    }
    if (urgent) {
        /* The lease passes now; the holder sees it gone at its next launch (or its helper, woken
         * below), stops launching and charges its time until its queued work is done. That work
         * and ours share the GPU meanwhile under the driver's time-slicing: we wait no longer than
         * plain time-slicing would make us, and the holder is charged the overlap. */
        uint64_t len = credit > 2 * q ? (uint64_t)(2 * q) : (uint64_t)credit;
        if (len < VGPU_SCHED_MIN_LEASE_NS)
            len = VGPU_SCHED_MIN_LEASE_NS;
        uint64_t granted = ((vgpu_lease_gen(lease) + 1) << 16) | (uint64_t)(proc + 1);
        if (!atomic_compare_exchange_strong(&f->lease, &lease, granted))
            return false;
        atomic_store(&f->lease_start, now);
        atomic_store(&f->lease_end, now + len);
        atomic_store(&f->borrowed, 0u);
        /* The holder drains from now on: until it says when it finished, our lease is not
         * charged (vgpu_sched_charge_from); it pays the overlap. */
        atomic_store(&f->overlap_until, now + VGPU_SCHED_OVERLAP_NS);
        atomic_store(&f->procs[proc].want_since, 0);
        atomic_fetch_add(&f->preemptions, 1);
        *lease_out = granted;
        *end = now + len;
    } else {
        uint64_t w = atomic_load(&f->want_ns);
        if (w + VGPU_SCHED_IDLE_NS / 2 > now && w <= now)
            return false;   /* asked a moment ago: the holder is already looking */
        atomic_store(&f->want_ns, now);
    }
    atomic_fetch_add(&f->yield_seq, 1);
    futex_wake(&f->yield_seq);
    return urgent;
}

bool vgpu_sched_try_acquire(struct vgpu_sched *s, int proc, uint64_t now, uint64_t *lease_out, uint64_t *end)
{
    struct vgpu_sched_file *f = s->f;
    if (proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return false;
    struct vgpu_sched_proc *me = &f->procs[proc];
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&me->want_since, &zero, now);
    atomic_store(&me->polled, now);

    revoke_overdue(f, now);
    uint64_t lease = atomic_load(&f->lease);
    if (vgpu_lease_holder(lease))
        return preempt_or_ask(f, proc, lease, now, lease_out, end);

    /* Everyone who waits, as the picker sees them; absent waiters are passed over. */
    struct vgpu_sched_cand c[VGPU_SCHED_MAX_PROCS];
    unsigned who[VGPU_SCHED_MAX_PROCS], n = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        struct vgpu_sched_proc *p = &f->procs[i];
        uint64_t ws = atomic_load(&p->want_since);
        if (!ws || !atomic_load(&p->pid))
            continue;
        uint64_t polled = atomic_load(&p->polled);
        if ((int)i != proc && (polled > now || now - polled > VGPU_SCHED_ABSENT_NS))
            continue;
        const struct vgpu_sched_job *j = ld_job_of(f, i);
        if (!j)
            continue;
        unsigned cap = ld_cap(j);
        int64_t cr;
        uint64_t ct;
        ld_credit(j, cap, now, &cr, &ct);
        c[n] = (struct vgpu_sched_cand){
            .job = atomic_load(&p->job), .cap = cap, .soft = atomic_load(&j->soft) != 0, .prio = ld_prio(j),
            .credit = vgpu_sched_credit_at(cr, ct, cap, now), .want_since = ws > now ? now : ws,
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
    atomic_store(&f->lease_start, now);
    atomic_store(&f->lease_end, now + len);
    if (!atomic_compare_exchange_strong(&f->lease, &lease, granted))
        return false;
    atomic_store(&f->lease_start, now);
    atomic_store(&f->lease_end, now + len);
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
        unsigned cap = ld_cap(j);
        int64_t cr;
        uint64_t ct;
        ld_credit(j, cap, now, &cr, &ct);
        atomic_store(&j->credit, vgpu_sched_settle(cr, ct, cap, now, used, borrowed));
        atomic_store(&j->credit_t, now);
        atomic_fetch_add(&j->used_ns, used);
        atomic_store(&j->seen_ns, now);
    }
    uint64_t freed = lease & ~(uint64_t)0xffff;
    bool ok = atomic_compare_exchange_strong(&f->lease, &lease, freed);
    if (ok) {
        /* Drained: a "draining" mark of ours must not exempt the next holder's charge. */
        uint64_t ov = atomic_load(&f->overlap_until);
        if (now && ov > now)
            atomic_compare_exchange_strong(&f->overlap_until, &ov, now);
        wake_all(f);
    }
    return ok;
}

void vgpu_sched_unwant(struct vgpu_sched *s, int proc)
{
    if (s->f && proc >= 0 && proc < VGPU_SCHED_MAX_PROCS)
        atomic_store(&s->f->procs[proc].want_since, 0);
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t max_ns)
{
    if (max_ns < 20000)
        max_ns = 20000;
    struct timespec ts = { (time_t)(max_ns / 1000000000ULL), (long)(max_ns % 1000000000ULL) };
    /* The word may have changed between our look and now: the futex returns at once then. */
    syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
}

void vgpu_sched_wait(struct vgpu_sched *s, uint64_t max_ns)
{
    futex_wait(&s->f->seq, atomic_load(&s->f->seq), max_ns);
}

void vgpu_sched_drained(struct vgpu_sched *s, uint64_t now)
{
    atomic_store(&s->f->overlap_until, now);
}

uint64_t vgpu_sched_charge_from(struct vgpu_sched *s, uint64_t start, uint64_t now, bool preempted)
{
    uint64_t ov = atomic_load(&s->f->overlap_until);
    if (preempted || ov <= start)
        return start;
    if (ov > now)   /* still draining (or garbage, not believed): half of the time so far */
        return ov - now <= VGPU_SCHED_OVERLAP_NS ? start + (now - start) / 2 : start;
    return start + (ov - start) / 2;
}

uint64_t vgpu_sched_preempted_at(struct vgpu_sched *s, uint64_t start, uint64_t now)
{
    uint64_t t = atomic_load(&s->f->lease_start);
    return t > start && t <= now ? t : start;
}

bool vgpu_sched_wanted(struct vgpu_sched *s, uint64_t since)
{
    uint64_t w = atomic_load(&s->f->want_ns);
    return w > since;
}

void vgpu_sched_wait_yield(struct vgpu_sched *s, uint32_t *seen, uint64_t max_ns)
{
    uint32_t cur = atomic_load(&s->f->yield_seq);
    if (cur == *seen)
        futex_wait(&s->f->yield_seq, cur, max_ns);
    *seen = atomic_load(&s->f->yield_seq);
}

uint64_t vgpu_sched_retry_in(struct vgpu_sched *s, int proc, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t wait = 5000000ULL;   /* 5 ms: below VGPU_SCHED_ABSENT_NS */
    const struct vgpu_sched_job *j = ld_job_of(f, (unsigned)proc);
    if (j) {
        unsigned cap = ld_cap(j);
        int64_t cr;
        uint64_t ct;
        ld_credit(j, cap, now, &cr, &ct);
        uint64_t at = vgpu_sched_eligible_at(cr, ct, cap);
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
