/* procs.c: processes on the simulated GPUs: their memory, their contexts, their kernels on the
 * device timelines, and the reaping of dead ones. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_internal.h"

/* Reads /proc/PID/stat once: its start time (field 22, 0 when unreadable) and whether it is a
 * zombie (state Z or X). Plain read(2): this runs for every known process at every reap. */
static unsigned long long stat_of(pid_t pid, bool *zombie)
{
    char path[64], buf[1024];
    *zombie = false;
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* The command name (field 2) may contain spaces: start after its ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    *zombie = p[2] == 'Z' || p[2] == 'X';
    unsigned long long start = 0;
    int field = 2;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field == 22)
        sscanf(p, "%llu", &start);
    return start;
}

unsigned long long fs_proc_start_time(pid_t pid)
{
    bool zombie;
    return pid > 0 ? stat_of(pid, &zombie) : 0;
}

/* ---- PID namespaces: NVML reports host pids ----
 * A process in a container knows only its own pid (with --mount-proc, its /proc shows nothing
 * else). It records that, its namespace and its start time; the host pid is its NSpid's first
 * entry when its /proc is the host's, else the first reader on the host that looks finds it
 * (the driver, which lives on the host, always knows it). */

unsigned fs_proc_pidns(pid_t pid)
{
    char path[64], buf[64];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/ns/pid");
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long v = 0;
    return sscanf(buf, "pid:[%lu]", &v) == 1 ? (unsigned)v : 0;
}

/* NSpid of /proc/PID/status (0: self): the number of entries, the first and the last. */
static int nspid_of(pid_t pid, pid_t *first, pid_t *last)
{
    char path[64], buf[4096];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = 0;
    char *p = strstr(buf, "\nNSpid:");
    if (!p)
        return 0;
    p += 7;
    int n = 0;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (!n)
            *first = (pid_t)v;
        *last = (pid_t)v;
        n++;
        p = end;
    }
    return n;
}

/* This process: its namespace, its start time, and its host pid (0 when it cannot know). */
struct self_id {
    pid_t pid, host_pid;
    unsigned pidns;
    unsigned view_ns;                    /* the namespace whose pids its /proc shows (0: unknown) */
    bool host_proc;                      /* that is the host's */
    unsigned long long start;
};

static const struct self_id *self_id(void)
{
    static __thread struct self_id me;
    if (me.pid == getpid())
        return &me;
    struct self_id n = { .pid = getpid() };
    bool zombie;
    n.start = stat_of(0, &zombie);
    n.pidns = fs_proc_pidns(0);
    unsigned host = fs_state()->host_pidns;
    pid_t first = 0, last = 0;
    n.view_ns = n.pidns;
    if (!host || n.pidns == host) {
        n.host_pid = n.pid;
        n.host_proc = true;
    } else if (nspid_of(0, &first, &last) > 1) {
        n.host_pid = first;              /* a /proc mounted by the host (unshare -p without --mount-proc) */
        n.host_proc = true;
        n.view_ns = host;
    }
    me = n;
    return &me;
}

static bool own_proc(void)
{
    const struct self_id *me = self_id();
    return me->view_ns == me->pidns;
}

/* A walk of /proc (from the host) for (pidns, ns_pid, start): 1 found (*host set), 0 proven
 * gone, -1 cannot tell (a candidate's namespace could not be read). */
static int resolve(const struct fs_proc *p, pid_t *host)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *de;
    while (rc != 1 && (de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        pid_t first = 0, last = 0;
        if (nspid_of((pid_t)pid, &first, &last) < 2 || last != p->ns_pid)
            continue;
        bool zombie;
        if (stat_of((pid_t)pid, &zombie) != p->start_time || zombie)
            continue;
        unsigned ns = fs_proc_pidns((pid_t)pid);
        if (!ns)
            rc = -1;
        else if (ns == p->pidns) {
            *host = (pid_t)pid;
            rc = 1;
        }
    }
    closedir(d);
    return rc;
}

/* Whether the record's process lives, judged where it can be: in its own namespace, or from the
 * host (which sees every namespace). A reader that can see neither keeps it, as the driver does
 * while the process lives. Resolves host pids on the way. */
static bool proc_alive(pid_t pid, unsigned long long start_time, bool own);

/* The driver lives on the host and always knows a process's host pid; this simulator knows it
 * only when a reader on the host looks. So every process on the host that uses NVML looks for
 * records still unresolved, every 10 ms, in a thread of its own (started at nvmlInit): a
 * process in a container sees its own pid in NVML's list within 10 ms of its first context,
 * as long as any process on the host (vgpu run, vgpu daemon) has NVML open. */
static void resolve_pending(void)
{
    struct fs_state *st = fs_state();
    /* One resolver a period on the whole machine, whichever gets there first. */
    unsigned long long now = fs_now_ns(), last = __atomic_load_n(&st->resolver_ns, __ATOMIC_RELAXED);
    if (now - last < 10000000ULL ||
        !__atomic_compare_exchange_n(&st->resolver_ns, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    fs_lock();
    for (unsigned g = 0; g < st->ngpus; g++)
        for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
            struct fs_proc *p = &st->gpu[g].procs[i];
            if (!p->used || p->resolved || now < p->resolve_after_ns)
                continue;
            pid_t host = 0;
            int rc = resolve(p, &host);
            if (rc == 1) {
                p->pid = host;
                p->resolved = true;
            } else if (rc == 0) {
                fs_proc_end(g, i);       /* proven gone: reaped, as fs_reap_gpu does */
            } else {
                p->resolve_after_ns = now + 200000000ULL;   /* a walk of /proc: not every 10 ms */
            }
        }
    fs_unlock();
}

static void *resolver(void *arg)
{
    (void)arg;
    for (;;) {
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
        resolve_pending();
    }
    return NULL;
}

void fs_start_resolver(void)
{
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    static pid_t started_in;
    const struct self_id *me = self_id();
    if (!me->host_proc || me->view_ns != fs_state()->host_pidns)
        return;                          /* not on the host: it could not resolve anything */
    pthread_mutex_lock(&once);
    if (started_in != getpid()) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, resolver, NULL) == 0)
            started_in = getpid();
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&once);
}

/* me: self_id(), asked once per reap by the caller (it costs a getpid(2), and a reap looks at
 * every record of a GPU: two per record were most of the simulator's system calls in vgpu top). */
static bool record_alive(struct fs_proc *p, const struct self_id *me)
{
    bool own = me->view_ns == me->pidns;
    if (!p->pidns || p->pidns == me->view_ns)
        return proc_alive(p->ns_pid, p->start_time, own);
    if (!me->host_proc)
        return true;
    if (p->resolved)
        return proc_alive(p->pid, p->start_time, own);
    pid_t host = 0;
    int rc = resolve(p, &host);
    if (rc == 1) {
        p->pid = host;
        p->resolved = true;
    }
    return rc != 0;
}
static bool own_proc(void);

bool fs_proc_alive(pid_t pid, unsigned long long start_time)
{
    return proc_alive(pid, start_time, own_proc());
}

/* own: /proc shows our own namespace (own_proc()). */
static bool proc_alive(pid_t pid, unsigned long long start_time, bool own)
{
    /* kill(2) takes pids of our own namespace: a shortcut only when /proc shows that one. */
    if (own && kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    /* kill(2) cannot tell a zombie, or a new process that got the pid, from the process: /proc
     * can, but reading it for hundreds of processes at every query costs milliseconds (a real
     * driver knows at once). So a process found alive by /proc is believed for 5 s, as long
     * as its pid exists (kill above). */
    enum { CACHE = 512 };
    static __thread struct { pid_t pid; unsigned long long start; uint64_t at; } seen[CACHE];
    unsigned h = (unsigned)pid % CACHE;
    uint64_t now = fs_now_ns();
    if (seen[h].pid == pid && seen[h].start == start_time && now - seen[h].at < 5000000000ULL)
        return true;
    /* A zombie still has its /proc entry; the driver frees its memory at exit, so treat a
     * zombie as gone too. */
    bool zombie;
    bool alive = stat_of(pid, &zombie) == start_time && !zombie;
    if (alive) {
        seen[h].pid = pid;
        seen[h].start = start_time;
        seen[h].at = now;
    }
    return alive;
}

void fs_proc_end(unsigned gpu, unsigned idx)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    struct fs_proc *p = &g->procs[idx];
    fs_drop_work(gpu, idx);          /* brings its busy time up to now first */
    if (p->busy_ns) {
        /* Freed with its busy time, a process that ended between two reads of a test (core_preempt:
         * "used -35 %") looked as if its busy time had gone down to 0. */
        g->ended[g->ended_head] = (struct fs_ended){ .pid = p->pid, .gi = p->gi, .busy_ns = p->busy_ns,
                                                     .ended_ns = fs_now_ns() };
        g->ended_head = (g->ended_head + 1) % FS_MAX_ENDED;
    }
    memset(p, 0, sizeof *p);
}

void fs_reap_gpu(unsigned gpu)
{
    struct fs_state *st = fs_state();
    if (gpu >= st->ngpus)
        return;
    const struct self_id *me = self_id();
    for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
        struct fs_proc *p = &st->gpu[gpu].procs[i];
        if (p->used && !record_alive(p, me))
            fs_proc_end(gpu, i);     /* a dead process's queued work never runs */
    }
}

void fs_reap(void)
{
    for (unsigned g = 0; g < fs_state()->ngpus; g++)
        fs_reap_gpu(g);
}

struct fs_proc *fs_proc_get(unsigned gpu, pid_t pid, int gi, int ci, bool create)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    struct fs_proc *free_slot = NULL;
    const struct self_id *me = self_id();
    bool self = pid == me->pid;
    for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
        struct fs_proc *p = &g->procs[i];
        if (p->used && p->gi == gi && p->ci == ci &&
            (self ? p->ns_pid == pid && p->pidns == me->pidns : p->pid == pid))
            return p;
        if (!p->used && !free_slot)
            free_slot = p;
    }
    if (!create || !free_slot)
        return NULL;
    /* Records for other pids are made only by tests: they get that pid's start time. */
    free_slot->start_time = self ? me->start : fs_proc_start_time(pid);
    free_slot->used = true;
    free_slot->ns_pid = pid;
    free_slot->pidns = me->pidns;
    free_slot->resolved = !self || me->host_pid;
    free_slot->pid = !self ? pid : me->host_pid ? me->host_pid : FS_UNRESOLVED_PID + pid;
    free_slot->gi = gi;
    free_slot->ci = ci;
    return free_slot;
}

unsigned long long fs_place_total(unsigned gpu, int gi)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    if (gi < 0)
        return g->s.mem_total - g->s.mem_reserved;
    return g->s.profiles[g->gi[gi].profile].mem_mb * 1024ULL * 1024ULL;
}

unsigned long long fs_place_used(unsigned gpu, int gi)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    unsigned long long used = 0;
    for (unsigned i = 0; i < FS_MAX_PROCS; i++)
        if (g->procs[i].used && (gi < 0 || g->procs[i].gi == gi))
            used += g->procs[i].mem;
    return used;
}

/* Evicts resident managed pages of processes on the place until `need` more bytes are free (the
 * UVM driver gives way to the resource manager's allocations). Caller holds the lock. */
static void evict_managed(unsigned gpu, int gi, unsigned long long need)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    for (unsigned i = 0; i < FS_MAX_PROCS && need; i++) {
        struct fs_proc *p = &g->procs[i];
        if (!p->used || p->gi != gi || !p->managed)
            continue;
        unsigned long long take = p->managed < need ? p->managed : need;
        p->managed -= take;
        p->mem -= take;
        p->evicted += take;
        g->pcie_tx += take;   /* the pages go back to the host over the link */
        need -= take;
    }
}

void fs_pcie_count(unsigned gpu, unsigned long long tx, unsigned long long rx)
{
    if (!tx && !rx)
        return;
    fs_lock();
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    g->pcie_tx += tx;
    g->pcie_rx += rx;
    fs_unlock();
}

static unsigned long long managed_on_place(unsigned gpu, int gi)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    unsigned long long m = 0;
    for (unsigned i = 0; i < FS_MAX_PROCS; i++)
        if (g->procs[i].used && g->procs[i].gi == gi)
            m += g->procs[i].managed;
    return m;
}

/* VGPU_FAKE_NO_EVICT=1 (read by the allocating process): an ordinary allocation that does not
 * fit fails with OUT_OF_MEMORY instead of evicting other processes' resident managed pages, a
 * driver less kind than the H200's (tests/cli/lend_squeeze.sh: what is left is vgpu's own squeeze). */
static bool evicts(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("VGPU_FAKE_NO_EVICT");
        v = !(e && strcmp(e, "1") == 0);
    }
    return v;
}

bool fs_charge(unsigned gpu, int gi, int ci, unsigned long long bytes)
{
    bool ok = false;
    fs_lock();
    /* Dead processes matter only when the memory does not fit: reap then, not on every
     * allocation (reaping reads /proc for every record). */
    for (int attempt = 0; attempt < 2 && !ok; attempt++) {
        if (attempt == 1)
            fs_reap();
        unsigned long long total = fs_place_total(gpu, gi), used = fs_place_used(gpu, gi);
        /* Resident managed pages do not block an allocation: they are evicted to the host.
         * Counted only when the allocation does not fit otherwise (this is the hot path). */
        unsigned long long movable = (used <= total && bytes <= total - used) || !evicts() ? 0 : managed_on_place(gpu, gi);
        if (used <= total && bytes <= total - used + (movable < used ? movable : used)) {
            struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, true);
            if (p) {
                if (bytes > total - used)
                    evict_managed(gpu, gi, bytes - (total - used));
                p->mem += bytes;
                ok = true;
            }
        }
    }
    fs_unlock();
    return ok;
}

unsigned long long fs_charge_managed(unsigned gpu, int gi, int ci, unsigned long long bytes)
{
    unsigned long long got = 0;
    fs_lock();
    unsigned long long total = fs_place_total(gpu, gi), used = fs_place_used(gpu, gi);
    unsigned long long room = used < total ? total - used : 0;
    got = bytes < room ? bytes : room;
    struct fs_proc *p = got ? fs_proc_get(gpu, getpid(), gi, ci, true) : NULL;
    if (p) {
        p->mem += got;
        p->managed += got;
    } else {
        got = 0;
    }
    fs_unlock();
    return got;
}

void fs_uncharge_managed(unsigned gpu, int gi, int ci, unsigned long long bytes)
{
    fs_lock();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, false);
    if (p) {
        unsigned long long b = bytes < p->managed ? bytes : p->managed;
        p->managed -= b;
        p->mem = p->mem > b ? p->mem - b : 0;
    }
    fs_unlock();
}

unsigned long long fs_take_evicted(unsigned gpu, int gi, int ci)
{
    fs_lock();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, false);
    unsigned long long e = 0;
    if (p) {
        e = p->evicted;
        p->evicted = 0;
    }
    fs_unlock();
    return e;
}

static void drop_if_idle(unsigned gpu, struct fs_proc *p)
{
    if (p->mem == 0 && !p->attached)
        fs_proc_end(gpu, (unsigned)(p - fs_state()->gpu[gpu].procs));
}

void fs_uncharge(unsigned gpu, int gi, int ci, unsigned long long bytes)
{
    fs_lock();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, false);
    if (p) {
        p->mem = p->mem > bytes ? p->mem - bytes : 0;
        drop_if_idle(gpu, p);
    }
    fs_unlock();
}

void fs_attach(unsigned gpu, int gi, int ci, bool attached)
{
    fs_lock();
    fs_reap();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, attached);
    if (p) {
        if (attached && !p->attached)
            p->timeslice = fs_state()->gpu[gpu].timeslice;   /* contexts made from now on get it */
        p->attached = attached;
        drop_if_idle(gpu, p);
    }
    fs_unlock();
}

int fs_claim(unsigned gpu, int gi, int ci, unsigned mps_pct)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    int rc = 0;
    fs_lock();
    fs_reap_gpu(gpu);
    const struct self_id *me = self_id();
    if (g->compute_mode == 2) {              /* NVML_COMPUTEMODE_PROHIBITED */
        rc = -1;
    } else if (g->compute_mode == 3 && !mps_pct) {   /* EXCLUSIVE_PROCESS */
        for (unsigned i = 0; i < FS_MAX_PROCS && !rc; i++) {
            const struct fs_proc *p = &g->procs[i];
            if (p->used && p->attached && !(p->ns_pid == me->pid && p->pidns == me->pidns))
                rc = -1;
        }
    }
    if (!rc) {
        struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, true);
        if (p) {
            if (!p->attached)
                p->timeslice = g->timeslice;
            p->attached = true;
            p->mps_pct = mps_pct > 100 ? 100 : mps_pct;
        }
    }
    fs_unlock();
    return rc;
}

unsigned long long fs_largest_block(unsigned gpu, int gi)
{
    fs_lock();
    unsigned pct = fs_state()->gpu[gpu].fragment_pct;
    unsigned long long total = fs_place_total(gpu, gi), used = fs_place_used(gpu, gi);
    fs_unlock();
    if (!pct)
        return ~0ULL;
    unsigned long long free_b = used < total ? total - used : 0;
    unsigned long long block = free_b / 100 * (100 - (pct > 100 ? 100 : pct));
    return block > 2ULL * 1024 * 1024 ? block : 2ULL * 1024 * 1024;
}

void fs_release_self(void)
{
    struct fs_state *st = fs_state();
    if (!st)
        return;
    fs_lock();
    const struct self_id *me = self_id();
    for (unsigned g = 0; g < st->ngpus; g++)
        for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
            struct fs_proc *p = &st->gpu[g].procs[i];
            if (p->used && p->ns_pid == me->pid && p->pidns == me->pidns)
                fs_proc_end(g, i);
        }
    fs_unlock();
}

