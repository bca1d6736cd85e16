/* vgpu top's host facts about GPU processes: CPU %, user, command and parent, from /proc and
 * the kernel, carried from one sample to the next (sampler thread only).
 *
 * Cost. Reading /proc/PID/stat for CPU % and the parent was the larger half of vgpu top's own
 * work with 300 GPU processes (4-5 us each: the kernel formats 52 fields). A process's start
 * time, user and command never change, and its parent changes only when the parent exits
 * (the children are then reparented), so /proc is read once per process, and again only when
 * something says it may have changed:
 *   - each process read is watched through a pidfd, and so is its parent (one per distinct
 *     parent); one poll(2) per sample over all of them says which have exited;
 *   - a process whose pidfd fired is gone: its pid, if listed again, is another process, read
 *     afresh; a process whose parent's pidfd fired has a new parent: read again;
 *   - CPU time comes from the process's CPU clock (clock_gettime on its pid: the same sum of
 *     its threads' run time that /proc/PID/stat shows in ticks, ten times cheaper). The pid is
 *     the process the pidfd watches: it cannot be reused before the pidfd fires.
 * Where pids cannot be trusted to name the same processes as /proc (a /proc of another PID
 * namespace), where pidfds are missing (before Linux 5.3, or refused), for a single sample
 * (--once), and past TOP_HOST_FDS descriptors, /proc/PID/stat is read every sample as before. */
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/proc.h"


/* Per-process host facts carried between samples: CPU time for CPU %, the user and command
 * (read once per (pid, start time)), and the parent. */
struct top_cpu_ent {
    pid_t pid, ppid;
    unsigned long long start;
    uint64_t cpu_ns;                    /* CPU time at at_ms */
    bool cpu_clock;                     /* cpu_ns came from the CPU clock (else /proc's ticks) */
    uint64_t at_ms;
    uid_t uid;
    char user[32];
    char cmd[160];
    bool seen;
    bool stale;                         /* it or its parent exited: read /proc again */
    int pidfd;                          /* -1: not watched (read /proc every sample) */
};

/* A parent of watched processes, watched once however many children it has. */
struct top_parent {
    pid_t pid;
    int fd;
    bool exited, used;
};

/* At most this many descriptors (pidfds of processes and parents) are kept open. */
#define TOP_HOST_FDS 512

/* ---- /proc ---- */

/* Parses /proc/PID/stat from fd (at offset 0): utime+stime and start time (fields 14, 15, 22),
 * and the parent (4). */
static bool parse_stat_fd(int fd, unsigned long long *ticks, unsigned long long *start, pid_t *ppid)
{
    char buf[1024];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = 0;
    char *p = strrchr(buf, ')');   /* the command may hold spaces and parentheses */
    if (!p)
        return false;
    p += 2;
    unsigned long long ut = 0, st = 0, start_t = 0;
    /* after ")": field 3 is state; utime is field 14, stime 15, starttime 22 */
    int field = 3;
    for (char *tok = p; tok && *tok; field++) {
        if (field == 4 && ppid)
            *ppid = (pid_t)strtol(tok, NULL, 10);
        else if (field == 14)
            ut = strtoull(tok, NULL, 10);
        else if (field == 15)
            st = strtoull(tok, NULL, 10);
        else if (field == 22) {
            start_t = strtoull(tok, NULL, 10);
            break;
        }
        tok = strchr(tok, ' ');
        if (tok)
            tok++;
    }
    if (ticks)
        *ticks = ut + st;
    if (start)
        *start = start_t;
    return field == 22;
}

static int open_stat(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    return open(path, O_RDONLY | O_CLOEXEC);
}

bool top_proc_start(pid_t pid, unsigned long long *start)
{
    int fd = open_stat(pid);
    if (fd < 0)
        return false;
    bool ok = parse_stat_fd(fd, NULL, start, NULL);
    close(fd);
    return ok;
}

int top_signal_checked(pid_t pid, unsigned long long start, int sig)
{
    unsigned long long now_start;
    if (pid <= 0)
        return -EINVAL;
    if (!top_proc_start(pid, &now_start) || (start && now_start != start))
        return -ESRCH;   /* gone, or the pid now belongs to another process */
    if (kill(pid, sig) < 0)
        return -errno;
    return 0;
}

static void read_cmdline(pid_t pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0) {
        out[0] = 0;
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, out + 1, len - 3);
            close(fd);
            if (n > 0) {
                out[0] = '[';
                if (out[n] == '\n')
                    n--;
                out[n + 1] = ']';
                out[n + 2] = 0;
            }
        }
        return;
    }
    out[n] = 0;
    while (n > 0 && out[n - 1] == 0)
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (out[i] == 0)
            out[i] = ' ';
    top_sanitize(out);
}


/* The process's CPU time (all its threads, those gone included), in ns: its CPU clock,
 * MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) as clock_getcpuclockid(3) makes it, without the
 * extra system call glibc spends checking that the pid exists. */
static bool cpu_clock(pid_t pid, uint64_t *ns)
{
    struct timespec ts;
    clockid_t c = (clockid_t)((~(unsigned)pid << 3) | 2u);
    if (clock_gettime(c, &ts) != 0)
        return false;
    *ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    return true;
}

/* ---- the tables ---- */

/* s->cpu and s->par are kept sorted by pid (each entry starts with its pid): a lookup per
 * process per sample, a scan made it grow with the square of the processes. Where pid is, or
 * would be inserted, among n entries of `size` bytes. */
static size_t pid_pos(const void *base, size_t n, size_t size, pid_t pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        pid_t at;
        memcpy(&at, (const char *)base + mid * size, sizeof at);
        if (at < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

_Static_assert(offsetof(struct top_cpu_ent, pid) == 0 && offsetof(struct top_parent, pid) == 0,
               "pid_pos reads the pid at the start of each entry");

static size_t cpu_pos(const struct top_sampler *s, pid_t pid)
{
    return pid_pos(s->cpu, s->ncpu, sizeof *s->cpu, pid);
}

static struct top_cpu_ent *cpu_find(struct top_sampler *s, pid_t pid)
{
    size_t at = cpu_pos(s, pid);
    return at < s->ncpu && s->cpu[at].pid == pid ? &s->cpu[at] : NULL;
}

static void cpu_unwatch(struct top_sampler *s, struct top_cpu_ent *e)
{
    if (e->pidfd >= 0) {
        close(e->pidfd);
        e->pidfd = -1;
        s->nfds--;
    }
}

static size_t par_pos(const struct top_sampler *s, pid_t pid)
{
    return pid_pos(s->par, s->npar, sizeof *s->par, pid);
}

static struct top_parent *par_find(struct top_sampler *s, pid_t pid)
{
    size_t at = par_pos(s, pid);
    return at < s->npar && s->par[at].pid == pid ? &s->par[at] : NULL;
}

/* Watches ppid (a pidfd opened now, or the one already open while that process has not
 * exited). The caller checks afterwards that its child still has that parent: then this
 * pidfd is that parent's, not that of a process that took its pid. */
static bool par_watch(struct top_sampler *s, pid_t ppid)
{
    struct top_parent *p = par_find(s, ppid);
    if (p && !p->exited)
        return true;
    if (s->nfds >= TOP_HOST_FDS)
        return false;
    int fd = vgpu_proc_pidfd(ppid);
    if (fd < 0)
        return false;
    if (p) {                            /* an exited parent whose pid was taken again */
        close(p->fd);
        p->fd = fd;
        p->exited = false;
        return true;
    }
    if (s->npar == s->par_cap) {
        size_t cap = s->par_cap ? s->par_cap * 2 : 16;
        struct top_parent *n = realloc(s->par, cap * sizeof *n);
        if (!n) {
            close(fd);
            return false;
        }
        s->par = n;
        s->par_cap = cap;
    }
    size_t at = par_pos(s, ppid);
    memmove(&s->par[at + 1], &s->par[at], (s->npar - at) * sizeof *s->par);
    s->npar++;
    s->par[at] = (struct top_parent){ .pid = ppid, .fd = fd };
    s->nfds++;
    return true;
}

/* Starts watching e (just read from /proc through statfd, with parent ppid): its pidfd, and its
 * parent's. Both are checked against the process: statfd still reads (a kept /proc/PID/stat
 * descriptor fails once its process has gone), so the pidfd opened before is of this process;
 * and the parent it shows then is still ppid, so the parent's pidfd is of its parent. */
static void cpu_watch(struct top_sampler *s, struct top_cpu_ent *e, int statfd)
{
    if (s->fast <= 0 || s->no_kept_fds || s->nfds + 2 > TOP_HOST_FDS)
        return;
    int fd = vgpu_proc_pidfd(e->pid);
    if (fd < 0) {
        if (errno == ENOSYS || errno == EPERM || errno == EACCES)
            s->fast = 0;                /* no pidfds here (old kernel, seccomp): as before */
        return;
    }
    unsigned long long start = 0;
    pid_t ppid = -1;
    if ((e->ppid > 1 && !par_watch(s, e->ppid)) || !parse_stat_fd(statfd, NULL, &start, &ppid) ||
        start != e->start || ppid != e->ppid) {
        close(fd);
        return;                         /* read again next sample */
    }
    e->pidfd = fd;
    s->nfds++;
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

void top_host_poll(struct top_sampler *s)
{
    size_t n = 0, want = s->ncpu + s->npar;
    if (!want)
        return;
    if (want > s->pfd_cap) {
        struct pollfd *p = realloc(s->pfd, want * sizeof *p);
        if (!p) {
            for (size_t i = 0; i < s->ncpu; i++)
                s->cpu[i].stale = true;    /* cannot tell: read them all */
            return;
        }
        s->pfd = p;
        s->pfd_cap = want;
    }
    for (size_t i = 0; i < s->ncpu; i++)
        if (s->cpu[i].pidfd >= 0)
            s->pfd[n++] = (struct pollfd){ .fd = s->cpu[i].pidfd, .events = POLLIN };
    for (size_t i = 0; i < s->npar; i++)
        if (!s->par[i].exited)
            s->pfd[n++] = (struct pollfd){ .fd = s->par[i].fd, .events = POLLIN };
    if (!n)
        return;
    int ready = poll(s->pfd, (nfds_t)n, 0);
    if (ready == 0)
        return;
    if (ready < 0) {
        for (size_t i = 0; i < s->ncpu; i++)
            s->cpu[i].stale = true;
        return;
    }
    /* pidfds that fired, in the order they were put in (the tables' order, by pid) */
    size_t k = 0;
    pid_t gone_par[64];
    size_t ngone_par = 0;
    bool many_par = false;
    for (size_t i = 0; i < s->ncpu; i++)
        if (s->cpu[i].pidfd >= 0 && s->pfd[k++].revents)
            s->cpu[i].stale = true;
    for (size_t i = 0; i < s->npar; i++) {
        if (s->par[i].exited)
            continue;
        if (s->pfd[k++].revents) {
            s->par[i].exited = true;
            if (ngone_par < sizeof gone_par / sizeof gone_par[0])
                gone_par[ngone_par++] = s->par[i].pid;
            else
                many_par = true;
        }
    }
    /* the children of an exited parent have been given another one */
    if (ngone_par || many_par)
        for (size_t i = 0; i < s->ncpu; i++) {
            pid_t pp = s->cpu[i].ppid;
            if (many_par || bsearch(&pp, gone_par, ngone_par, sizeof pp, cmp_pid))
                s->cpu[i].stale = true;
        }
}

/* Fills the host side of a process: user, command, CPU %, and its parent for the job reader. */
void top_host_facts(struct top_sampler *s, struct top_proc *p, uint64_t mono_ms)
{
    unsigned long long ticks = 0, start;
    uint64_t cpu_ns = 0;
    bool clocked = false;
    pid_t ppid = 0;
    struct top_cpu_ent *e = cpu_find(s, p->pid);
    int statfd = -1;
    if (e && e->pidfd >= 0 && !e->stale && cpu_clock(p->pid, &cpu_ns)) {
        /* watched, and neither it nor its parent has exited: nothing else can have changed */
        start = e->start;
        ppid = e->ppid;
        clocked = true;
    } else {
        if (e)
            cpu_unwatch(s, e);
        statfd = open_stat(p->pid);
        if (statfd < 0 || !parse_stat_fd(statfd, &ticks, &start, &ppid)) {
            if (statfd >= 0)
                close(statfd);
            snprintf(p->user, sizeof p->user, "?");
            snprintf(p->cmd, sizeof p->cmd, "(no such process on this host)");
            return;
        }
        clocked = s->fast > 0 && cpu_clock(p->pid, &cpu_ns);
    }
    p->start = start;
    top_jobs_note_parent(p->pid, ppid);   /* the job reader's parent chains start here */
    if (e && e->start != start)
        e->user[0] = e->cmd[0] = 0, e->at_ms = 0;
    if (!e) {
        if (s->ncpu == s->cpu_cap) {
            size_t cap = s->cpu_cap ? s->cpu_cap * 2 : 64;
            struct top_cpu_ent *n = realloc(s->cpu, cap * sizeof *n);
            if (!n) {
                close(statfd);
                return;
            }
            s->cpu = n;
            s->cpu_cap = cap;
        }
        size_t at = cpu_pos(s, p->pid);
        memmove(&s->cpu[at + 1], &s->cpu[at], (s->ncpu - at) * sizeof *s->cpu);
        s->ncpu++;
        e = &s->cpu[at];
        memset(e, 0, sizeof *e);
        e->pid = p->pid;
        e->pidfd = -1;
    }
    if (!e->cmd[0] || e->start != start) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d", (int)p->pid);
        e->uid = stat(path, &st) == 0 ? st.st_uid : (uid_t)-1;
        top_owner_name(e->uid, e->user, sizeof e->user);
        read_cmdline(p->pid, e->cmd, sizeof e->cmd);
        if (!e->cmd[0])
            snprintf(e->cmd, sizeof e->cmd, "?");
    }
    double tck = (double)(s->clk_tck > 0 ? s->clk_tck : 100);
    if (!clocked)
        cpu_ns = (uint64_t)((double)ticks / tck * 1e9);
    if (e->at_ms && e->start == start && e->cpu_clock == clocked && mono_ms > e->at_ms && cpu_ns >= e->cpu_ns) {
        p->cpu_pct = (double)(cpu_ns - e->cpu_ns) / 1e6 / (double)(mono_ms - e->at_ms) * 100.0;
    } else {
        /* first sight: the lifetime average, as ps(1) shows it */
        /* mono_ms is CLOCK_BOOTTIME, start is in ticks since boot */
        double age_ms = (double)mono_ms - (double)start / tck * 1000.0;
        double used_ms = clocked ? (double)cpu_ns / 1e6 : (double)ticks / tck * 1000.0;
        p->cpu_pct = age_ms > 0 ? used_ms / age_ms * 100.0 : 0;
    }
    if (p->cpu_pct < 0)
        p->cpu_pct = 0;
    p->valid |= TOP_PV_CPU;
    e->start = start;
    e->ppid = ppid;
    e->cpu_ns = cpu_ns;
    e->cpu_clock = clocked;
    e->at_ms = mono_ms;
    e->seen = true;
    if (statfd >= 0) {
        e->stale = false;
        cpu_watch(s, e, statfd);
        close(statfd);
    }
    p->uid = e->uid;
    snprintf(p->user, sizeof p->user, "%s", e->user);
    snprintf(p->cmd, sizeof p->cmd, "%s", e->cmd);
}

/* Forgets processes not seen in this sample, and parents no watched process has. */
void top_host_sweep(struct top_sampler *s)
{
    size_t o = 0;
    for (size_t i = 0; i < s->ncpu; i++) {
        if (s->cpu[i].seen) {
            s->cpu[i].seen = false;
            s->cpu[o++] = s->cpu[i];
        } else {
            cpu_unwatch(s, &s->cpu[i]);
        }
    }
    s->ncpu = o;
    for (size_t i = 0; i < s->npar; i++)
        s->par[i].used = false;
    for (size_t i = 0; i < s->ncpu; i++) {
        struct top_parent *p;
        if (s->cpu[i].pidfd >= 0 && (p = par_find(s, s->cpu[i].ppid)))
            p->used = true;
    }
    o = 0;
    for (size_t i = 0; i < s->npar; i++) {
        if (s->par[i].used && !s->par[i].exited) {
            s->par[o++] = s->par[i];
        } else {
            close(s->par[i].fd);
            s->nfds--;
        }
    }
    s->npar = o;
}

void top_host_init(struct top_sampler *s)
{
    /* pids name the processes of /proc only when /proc is of our own PID namespace */
    uint32_t view = vgpu_proc_view_ns();
    s->fast = view && view == vgpu_proc_pidns(0) ? 1 : 0;
}

void top_host_fini(struct top_sampler *s)
{
    for (size_t i = 0; i < s->ncpu; i++)
        cpu_unwatch(s, &s->cpu[i]);
    for (size_t i = 0; i < s->npar; i++)
        close(s->par[i].fd);
    free(s->cpu);
    free(s->par);
    free(s->pfd);
    s->cpu = NULL;
    s->par = NULL;
    s->pfd = NULL;
    s->ncpu = s->npar = s->nfds = 0;
}
