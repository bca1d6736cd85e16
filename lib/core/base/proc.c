/* Processes: identity and liveness across PID namespaces (see vgpu/proc.h), and the parent
 * chain that attributes GPU processes to jobs. Everything comes from /proc.
 * libc only: linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434              /* the same number on every architecture */
#endif

/* Reads a small /proc file into buf (NUL-terminated). -1 with errno on failure. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    int err = errno;
    close(fd);
    if (n < 0) {
        errno = err;
        return -1;
    }
    buf[n] = '\0';
    return n;
}

/* Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
 * *field3 points at field 3 (the state). NULL when unparsable. */
static char *stat_fields(char *buf)
{
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p + 2 : NULL;
}

/* Field `want` (>= 3) of a /proc/PID/stat line, from stat_fields(). */
static const char *stat_field(const char *f3, int want)
{
    const char *p = f3;
    for (int field = 3; field < want && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p;
}

/* 1: read (start in *start), 0: no such process, -1: exists or unknown but unreadable.
 * pid 0: the caller (/proc/self: getpid() may be another process's pid in this /proc). */
static int stat_start(pid_t pid, uint64_t *start)
{
    char path[64], buf[1024];
    if (pid < 0)
        return 0;
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    if (read_small(path, buf, sizeof buf) < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : -1;
    char *f3 = stat_fields(buf);
    const char *f22 = f3 ? stat_field(f3, 22) : NULL;
    if (!f22)
        return -1;
    *start = strtoull(f22, NULL, 10);
    return 1;
}

uint64_t vgpu_proc_start_time(pid_t pid)
{
    uint64_t start = 0;
    return pid > 0 && stat_start(pid, &start) == 1 ? start : 0;
}

pid_t vgpu_proc_ppid(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (pid <= 0 || read_small(path, buf, sizeof buf) < 0)
        return 0;
    char *f3 = stat_fields(buf);
    const char *f4 = f3 ? stat_field(f3, 4) : NULL;
    return f4 ? (pid_t)strtol(f4, NULL, 10) : 0;
}

bool vgpu_proc_descends(pid_t pid, const pid_t *roots, unsigned nroots)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        for (unsigned i = 0; i < nroots; i++)
            if (roots[i] > 0 && roots[i] == pid)
                return true;
        pid = vgpu_proc_ppid(pid);
    }
    return false;
}

/* NSpid of /proc/PID/status (pid 0: self): the first and the last entry and how many. */
static int nspid(pid_t pid, pid_t *first, pid_t *last)
{
    char path[64], buf[4096];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    if (read_small(path, buf, sizeof buf) < 0)
        return 0;
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
        if (n == 0)
            *first = (pid_t)v;
        *last = (pid_t)v;
        n++;
        p = end;
    }
    return n;
}

int vgpu_proc_pidfd(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

pid_t vgpu_proc_host_pid(void)
{
    pid_t first = 0, last = 0;
    return nspid(0, &first, &last) > 0 && first > 0 ? first : getpid();
}

static uint32_t ns_of_path(const char *path)
{
    char buf[64];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long v;
    return sscanf(buf, "pid:[%lu]", &v) == 1 ? (uint32_t)v : 0;
}

uint32_t vgpu_proc_pidns(pid_t pid)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/ns/pid");
    return ns_of_path(path);
}

uint32_t vgpu_proc_view_ns(void)
{
    /* (pid << 32 | ns), 0 unknown; recomputed in a new process (fork), where it may differ. */
    static _Atomic uint64_t cached;
    static _Atomic pid_t cached_for;
    pid_t me = getpid();
    if (atomic_load_explicit(&cached_for, memory_order_acquire) == me)
        return (uint32_t)atomic_load_explicit(&cached, memory_order_relaxed);
    pid_t first = 0, last = 0;
    uint32_t ns;
    if (nspid(0, &first, &last) > 1)
        ns = ns_of_path("/proc/1/ns/pid");  /* pid 1 of /proc's namespace lives in it */
    else
        ns = vgpu_proc_pidns(0);
    atomic_store_explicit(&cached, ns, memory_order_relaxed);
    atomic_store_explicit(&cached_for, me, memory_order_release);
    return ns;
}

void vgpu_proc_self(struct vgpu_proc_id *id)
{
    memset(id, 0, sizeof *id);
    id->pid = getpid();
    id->pidns = vgpu_proc_pidns(0);
    if (stat_start(0, &id->start) != 1)
        id->start = 0;
    pid_t first = 0, last = 0;
    if (nspid(0, &first, &last) > 1) {
        id->host_pid = first;
        id->host_ns = vgpu_proc_view_ns();
        if (!id->host_ns)
            id->host_pid = 0;
    } else {
        id->host_pid = id->pid;
        id->host_ns = id->pidns;
    }
}

/* The process `pid` of the caller's view, expected to have started at `start`. */
static enum vgpu_liveness direct(pid_t pid, uint64_t start)
{
    uint64_t now = 0;
    int rc = stat_start(pid, &now);
    if (rc == 0)
        return VGPU_PROC_DEAD;
    if (rc < 0 || start == 0)
        return VGPU_PROC_UNKNOWN;
    return now == start ? VGPU_PROC_ALIVE : VGPU_PROC_DEAD;
}

/* One walk of /proc for the process (id->pidns, id->pid). */
static enum vgpu_liveness scan(const struct vgpu_proc_id *id, uint32_t view, pid_t *view_pid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return VGPU_PROC_UNKNOWN;
    bool seen_ns = false, blind = false;
    enum vgpu_liveness found = VGPU_PROC_DEAD;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long p = strtol(de->d_name, &end, 10);
        if (*end || p <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/ns/pid", p);
        uint32_t ns = ns_of_path(path);
        pid_t first = 0, last = 0;
        if (!ns) {
            /* Another user's process, or one we may not trace (EACCES), or one that just
             * ended. It could be ours only if its innermost pid and its start time are. */
            uint64_t st = 0;
            if (errno != ENOENT && errno != ESRCH && nspid((pid_t)p, &first, &last) > 1 && last == id->pid &&
                (stat_start((pid_t)p, &st) != 1 || !id->start || st == id->start))
                blind = true;
            continue;
        }
        if (ns != id->pidns)
            continue;
        seen_ns = true;
        if (nspid((pid_t)p, &first, &last) == 0 || last != id->pid)
            continue;
        found = direct((pid_t)p, id->start);
        if (found != VGPU_PROC_DEAD && view_pid)
            *view_pid = (pid_t)p;
        break;
    }
    closedir(d);
    if (found != VGPU_PROC_DEAD)
        return found;
    /* Not found: proof only when the namespace is in view (a process of it was seen, or it was
     * resolved in this view before: an ancestor namespace sees all of its descendants). */
    if (!blind && (seen_ns || (id->host_ns && id->host_ns == view)))
        return VGPU_PROC_DEAD;
    return VGPU_PROC_UNKNOWN;
}

enum vgpu_liveness vgpu_proc_liveness(const struct vgpu_proc_id *id, pid_t *view_pid)
{
    if (view_pid)
        *view_pid = 0;
    if (!id || id->pid <= 0)
        return VGPU_PROC_UNKNOWN;
    uint32_t view = vgpu_proc_view_ns();
    if (!id->pidns || id->pidns == view) {
        enum vgpu_liveness l = direct(id->pid, id->start);
        if (l == VGPU_PROC_ALIVE && view_pid)
            *view_pid = id->pid;
        return l;
    }
    if (view && id->host_pid > 0 && id->host_ns == view && direct(id->host_pid, id->start) == VGPU_PROC_ALIVE &&
        vgpu_proc_pidns(id->host_pid) == id->pidns) {
        if (view_pid)
            *view_pid = id->host_pid;
        return VGPU_PROC_ALIVE;
    }
    return scan(id, view, view_pid);
}
