/* sched.c: the machine-wide per-GPU schedule of the compute limiter (see vgpu/sched.h): the shared
 * segment, its job and process entries, and their liveness. The arithmetic is sched_math.c, the
 * lease (acquire, preempt, release, charge) sched_lease.c.
 *
 * Everything shared is a single atomic word or a value whose brief inconsistency costs at most
 * one lease of accuracy (a job's credit and its timestamp are written by the lease holder of
 * that job only, so they never race with each other in practice). No lock, so a process killed
 * anywhere leaves nothing held: a lease outlives its holder by at most its deadline + grace.
 * Every user may write the segment, so every value read from it is validated or clamped here
 * (the ld_* readers of sched_internal.h) before it is used: garbage costs accuracy, never a crash or a long wait. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/machinedir.h"
#include "vgpu/proc.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"
#include "sched_internal.h"

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
 * of another namespace is judged in that namespace (vgpu_proc_liveness: a walk of our /proc for
 * its namespace): alive there, it is kept however long it has not polled (a process of a
 * container that holds no lease and does not wait, between two bursts of work); proven dead, it
 * goes. When we cannot see its namespace (we live in another container), it is dead once it has
 * not polled for a minute: a process that never waits holds an entry for nothing, and an entry
 * we could never free would keep the segment forever. */
static bool proc_dead(const struct vgpu_sched_proc *p, uint64_t now, uint64_t myns)
{
    uint64_t pid = atomic_load(&p->pid);
    if (!pid)
        return false;
    uint64_t ns = atomic_load(&p->pidns);
    if (pid > (uint64_t)INT32_MAX)
        return true;
    if (ns && myns && ns != myns) {
        struct vgpu_proc_id id = { .pid = (pid_t)pid, .pidns = (uint32_t)ns, .start = atomic_load(&p->start) };
        enum vgpu_liveness l = ns <= UINT32_MAX ? vgpu_proc_liveness(&id, NULL) : VGPU_PROC_UNKNOWN;
        if (l != VGPU_PROC_UNKNOWN)
            return l == VGPU_PROC_DEAD;
        uint64_t polled = atomic_load(&p->polled);
        return now > polled && now - polled > 60 * 1000000000ULL;
    }
    return !vgpu_sched_alive((pid_t)pid, atomic_load(&p->start));
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

static void init_closed(struct vgpu_sched *s);

int vgpu_sched_open_path(struct vgpu_sched *s, const char *path, struct vgpu_err *e)
{
    init_closed(s);
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

int vgpu_sched_key(const char *machinedir, const char *uuid, unsigned uid, unsigned attempt)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    char num[2][16];
    snprintf(num[0], sizeof num[0], "%u", uid);
    snprintf(num[1], sizeof num[1], "%u", attempt);
    const char *parts[5] = { "vgpu-sched-v3", machinedir, uuid, num[0], num[1] };
    for (int k = 0; k < 5; k++) {
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

static void init_closed(struct vgpu_sched *s)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->shmid = -1;
    s->limits_fd = -1;
}

/* Through the arbiter: 1 opened, 0 no daemon answers, -1 refused (e set). */
static int open_remote(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e)
{
    struct vgpu_err ae = { 0 };
    uint32_t handle, gen;
    int fd;
    if (vgpu_arb_open(uuid, &handle, &fd, &gen, &ae) != 0) {
        if (ae.code == VGPU_EXIT_STATE)
            return 0;
        *e = ae;
        return -1;
    }
    /* Read-only: the daemon sent a descriptor opened O_RDONLY, so a writable shared mapping of it
     * is refused by the kernel, and the memfd is sealed against shrinking (no SIGBUS). */
    void *m = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map the arbiter's schedule of %s: %s", uuid, strerror(errno));
        return -1;
    }
    if (!layout_ok(m)) {
        munmap(m, sizeof(struct vgpu_sched_file));
        vgpu_err_set(e, VGPU_EXIT_STATE, "the arbiter's schedule of %s is of another version; restart vgpu daemon "
                     "with this vgpu", uuid);
        return -1;
    }
    s->f = m;
    s->remote = true;
    s->handle = handle;
    s->gen = gen;
    return 1;
}

/* This user's own segment of GPU `uuid` (no arbiter): 1 opened, 0 missing (!create), -1 error. A
 * segment under one of our keys that is not ours alone (another user made it first, to steer or
 * uncap our jobs) is passed over for the next key. */
static int open_own(struct vgpu_sched *s, const char *uuid, bool create, struct vgpu_err *e)
{
    uid_t me = geteuid();
    unsigned foreign = 0;
    /* Bounded: the segment may be removed by its last user between our get and our attach
     * (then it says so in `closing`, and we make a new one). */
    for (unsigned attempt = 0, tries = 0; attempt < VGPU_SCHED_KEY_ATTEMPTS && tries < 200; tries++) {
        int key = vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)me, attempt);
        int id = create ? shmget(key, sizeof(struct vgpu_sched_file), IPC_CREAT | IPC_EXCL | 0600) : -1;
        if (!create || (id < 0 && errno == EEXIST))
            id = shmget(key, 0, 0);
        if (id < 0) {
            if (!create && errno == ENOENT) {
                attempt++;      /* a later key may be ours (an earlier one was taken) */
                continue;
            }
            if (errno == ENOENT || errno == EIDRM)
                continue;
            if (errno == EACCES) {   /* someone else's, closed to us */
                foreign++;
                attempt++;
                continue;
            }
            vgpu_err_set(e, VGPU_EXIT_STATE, "cannot get the GPU-time schedule of %s (System V shared memory key "
                         "0x%08x): %s", uuid, (unsigned)key, strerror(errno));
            return -1;
        }
        struct shmid_ds ds;
        if (shmctl(id, IPC_STAT, &ds) != 0) {
            if (errno == EIDRM || errno == EINVAL)
                continue;
            foreign++;
            attempt++;
            continue;
        }
        if (ds.shm_segsz != sizeof(struct vgpu_sched_file) || ds.shm_perm.uid != me || ds.shm_perm.cuid != me ||
            (ds.shm_perm.mode & 0077)) {
            foreign++;
            attempt++;
            continue;
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
                         "the shared memory segment %d (key 0x%08x) holds no vgpu GPU-time schedule of this version; "
                         "when no capped job of yours runs on %s, remove it (ipcrm -m %d)", id, (unsigned)key, uuid,
                         id);
            return -1;
        }
        s->f = f;
        s->shmid = id;
        return 1;
    }
    if (!create && !foreign)
        return 0;
    vgpu_err_set(e, VGPU_EXIT_STATE,
                 foreign ? "every key of your GPU-time schedule of %s is taken by a segment that is not yours alone "
                           "(another user made it); root should remove them (ipcs -m; ipcrm -m ID), or run the "
                           "arbiter (vgpu daemon), which no user can steer"
                         : "the GPU-time schedule of %s kept disappearing while it was opened", uuid);
    return foreign && !create ? 0 : -1;
}

static int open_any(struct vgpu_sched *s, const char *uuid, bool create, struct vgpu_err *e)
{
    init_closed(s);
    if (!uuid[0] || strlen(uuid) > 95) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "bad GPU UUID '%s' for the GPU-time schedule", uuid);
        return -1;
    }
    int r = open_remote(s, uuid, e);
    return r != 0 ? r : open_own(s, uuid, create, e);
}

int vgpu_sched_open(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e)
{
    return open_any(s, uuid, true, e) == 1 ? 0 : -1;
}

int vgpu_sched_open_existing(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e)
{
    return open_any(s, uuid, false, e);
}

bool vgpu_sched_lost(struct vgpu_sched *s)
{
    return s->remote && (s->lost || vgpu_arb_gen() != s->gen);
}

int vgpu_sched_create_memfd(struct vgpu_sched *s, int *ro_fd, struct vgpu_err *e)
{
    init_closed(s);
    int fd = (int)syscall(SYS_memfd_create, "vgpu-sched", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "memfd_create: %s", strerror(errno));
        return -1;
    }
    /* Sealed at its size, so no mapping of it can ever be cut short (SIGBUS); clients get a
     * descriptor opened read-only, which cannot be mapped writable. */
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (ftruncate(fd, (off_t)sizeof(struct vgpu_sched_file)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        (*ro_fd = open(self, O_RDONLY | O_CLOEXEC)) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot make a sealed schedule: %s", strerror(errno));
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map a schedule: %s", strerror(errno));
        close(*ro_fd);
        close(fd);
        return -1;
    }
    stamp(m);
    s->f = m;
    s->fd = fd;
    return 0;
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
    init_closed(s);
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
        if (id < 0 || ds.shm_segsz != sizeof(struct vgpu_sched_file))
            continue;
        /* Our own schedules only (vgpu_sched_open makes them 0600); root also sweeps the 0666 ones
         * of versions before the arbiter. */
        bool ours = ds.shm_perm.uid == geteuid() && ds.shm_perm.cuid == geteuid() && !(ds.shm_perm.mode & 0077);
        bool legacy = geteuid() == 0 && (ds.shm_perm.mode & 0666) == 0666;
        if (!ours && !legacy)
            continue;
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
    if (s->remote) {
        /* Asked at every turn: only a change (vgpu limit) is worth the daemon's answer. */
        if (s->job_known && s->job_key == key && s->job_cap == cap && s->job_soft == soft && s->job_prio == prio)
            return s->job_index;
        uint64_t a[4] = { key, cap, soft, (uint64_t)(int64_t)prio };
        int64_t rc = vgpu_arb_call(s->gen, VGPU_ARB_JOB, s->handle, -1, a, s->limits_fd, NULL);
        s->lost |= rc == -EPIPE;
        if (rc < 0 || rc >= VGPU_SCHED_MAX_JOBS)
            return -1;
        s->job_known = true;
        s->job_key = key;
        s->job_cap = cap;
        s->job_soft = soft;
        s->job_prio = prio;
        s->job_index = (int)rc;
        return (int)rc;
    }
    struct vgpu_sched_file *f = s->f;
    /* No cap of its own, but a priority: a class of its own (vgpu/sched.h, "Uncapped priority
     * classes"); its entry reads 100 % to everything that only knows caps. */
    bool uncapped = cap == 0 && prio != VGPU_PRIO_NORMAL;
    if (cap == 0 || cap > 100)
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
    atomic_store(&j->soft, uncapped ? VGPU_SCHED_SOFT | VGPU_SCHED_UNCAPPED : soft ? VGPU_SCHED_SOFT : 0u);
    atomic_store(&j->prio, prio);
    atomic_store(&j->seen_ns, now);
    return idx;
}

void vgpu_sched_forfeit(struct vgpu_sched *s, unsigned job, uint64_t now)
{
    if (!s->f || s->remote || job >= VGPU_SCHED_MAX_JOBS)
        return;
    struct vgpu_sched_job *j = &s->f->jobs[job];
    if (ld_uncapped(j))
        return;   /* owes nothing and is owed nothing: its credit is its burst by definition */
    unsigned cap = ld_cap(j);
    int64_t c;
    uint64_t ct;
    ld_credit(j, cap, now, &c, &ct);
    int64_t at = vgpu_sched_credit_at(c, ct, cap, now);
    atomic_store(&j->credit, at < 0 ? at : 0);
    atomic_store(&j->credit_t, now);
}

unsigned vgpu_sched_fair_cap(struct vgpu_sched *s, unsigned job, const uint32_t *owner)
{
    const struct vgpu_sched_file *f = s->f;
    if (job >= VGPU_SCHED_MAX_JOBS)
        return 100;
    bool live[VGPU_SCHED_MAX_JOBS] = { false };
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        unsigned j = atomic_load(&f->procs[i].job);
        if (atomic_load(&f->procs[i].pid) && j < VGPU_SCHED_MAX_JOBS)
            live[j] = true;
    }
    /* Shares go to owners first, then to each owner's jobs: four jobs of one user get one share
     * between them, not four against another user's one. */
    unsigned counted[VGPU_SCHED_MAX_JOBS], owners = 0, mine = 0;
    for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
        if (!(live[j] || j == job) || !atomic_load(&f->jobs[j].key) || ld_background(&f->jobs[j]))
            continue;
        uint32_t o = owner ? owner[j] : j;
        mine += o == (owner ? owner[job] : job);
        bool seen = false;
        for (unsigned k = 0; k < owners && !seen; k++)
            seen = counted[k] == o;
        if (!seen)
            counted[owners++] = o;
    }
    unsigned share = owners > 1 ? 100 / owners : 100;
    share = mine > 1 ? share / mine : share;
    return share ? share : 1;
}

int vgpu_sched_attach(struct vgpu_sched *s, unsigned job, pid_t pid, uint64_t start)
{
    if (s->remote) {   /* the daemon attaches the calling process itself, as it sees it */
        uint64_t a[4] = { job, 0, 0, 0 };
        int64_t rc = vgpu_arb_call(s->gen, VGPU_ARB_ATTACH, s->handle, -1, a, -1, NULL);
        s->lost |= rc == -EPIPE;
        return rc < 0 || rc >= VGPU_SCHED_MAX_PROCS ? -1 : (int)rc;
    }
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
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_DETACH, s->handle, proc, 0, 0, 0);
        return;
    }
    struct vgpu_sched_proc *p = &s->f->procs[proc];
    atomic_store(&p->want_since, 0);
    uint64_t lease = atomic_load(&s->f->lease);
    if (vgpu_lease_holder(lease) == (unsigned)proc + 1)
        vgpu_sched_release(s, lease, 0, 0);
    atomic_store(&p->pid, 0);
}

