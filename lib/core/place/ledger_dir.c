/* The placement ledger in the caller's own state directory (ledger.h), for when no arbiter
 * answers: placement then counts this user's jobs only, and nobody else can write what it reads.
 *   place.lock      flock'd around every decision (concurrent `vgpu run` calls of the user)
 *   queue.seq       the last --wait ticket
 *   promises/PID.START, queue/TICKET.PID.START   one file per `vgpu run`, created O_EXCL
 * Entries of dead processes (pid gone or start time changed) are dropped by whoever looks next,
 * so a kill -9 never leaks a promise; an entry whose job's command still runs is kept
 * (vgpu/holder.h). Everything is opened relative to the directory's
 * descriptor, O_NOFOLLOW, and parsed strictly. */
#include "ledger.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/holder.h"
#include "vgpu/proc.h"
#include "vgpu/statedir.h"

static bool alive(pid_t pid, unsigned long long st)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return false;
    unsigned long long now = vgpu_proc_start_time(pid);
    return now == 0 ? true : now == st;  /* /proc hidden: trust kill() */
}

static void proc_name(pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%llu", (int)pid, (unsigned long long)vgpu_proc_start_time(pid));
}

static void own_name(char *buf, size_t len)
{
    proc_name(getpid(), buf, len);
}

static int open_dir(const char *statedir, struct vgpu_err *e)
{
    int fd = open(statedir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot open %s: %s", statedir, strerror(errno));
        return -1;
    }
    if (vgpu_statedir_check_fd(fd, statedir, e) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void ledger_dir_close(struct ledger *l)
{
    int *fds[] = { &l->lock, &l->promises, &l->queue, &l->dir };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);   /* closing the lock's descriptor drops the flock */
        *fds[i] = -1;
    }
}

/* Opens the ledger and takes its lock (bounded: 10 s, then an error). */
int ledger_dir_open(const char *statedir, struct ledger *l, struct vgpu_err *e)
{
    l->arb = false;
    l->dir = l->promises = l->queue = l->lock = -1;
    if ((l->dir = open_dir(statedir, e)) < 0)
        return -1;
    if ((l->promises = vgpu_statedir_sub(l->dir, statedir, "promises", true, e)) < 0 ||
        (l->queue = vgpu_statedir_sub(l->dir, statedir, "queue", true, e)) < 0)
        goto fail;
    l->lock = openat(l->dir, "place.lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    struct stat st;
    if (l->lock < 0 || fstat(l->lock, &st) != 0 || !S_ISREG(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot use %s/place.lock: %s", statedir,
                     l->lock < 0 ? strerror(errno) : "not a regular file");
        goto fail;
    }
    for (int tries = 0;; tries++) {
        if (flock(l->lock, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot lock %s/place.lock: %s", statedir, strerror(errno));
            goto fail;
        }
        if (tries >= 1000) {
            vgpu_err_set(e, VGPU_EXIT_BUSY, "placement: %s/place.lock has been held for 10 s by another of your "
                         "processes (fuser -v it to see which); try again, or use --gpu", statedir);
            goto fail;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
fail:
    ledger_dir_close(l);
    return -1;
}

/* Parses "PID.START" (promises) or "TICKET.PID.START" (queue). */
static bool parse_entry(const char *name, bool ticketed, unsigned long long *ticket, pid_t *pid,
                        unsigned long long *st)
{
    char *end;
    const char *s = name;
    if (*s < '0' || *s > '9')
        return false;
    if (ticketed) {
        *ticket = strtoull(s, &end, 10);
        if (end == s || *end != '.')
            return false;
        s = end + 1;
    }
    long p = strtol(s, &end, 10);
    if (end == s || *end != '.' || p <= 0 || p > INT32_MAX)
        return false;
    *pid = (pid_t)p;
    s = end + 1;
    *st = strtoull(s, &end, 10);
    return end != s && !*end;
}

/* Reads one promise file (at most 4 KiB of "UUID BYTES" lines) and adds its bytes on uuid. */
static uint64_t read_promise(int dfd, const char *name, const char *uuid)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    char buf[4097];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    uint64_t sum = 0;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *sp = strchr(line, ' '), *end;
        if (!sp)
            continue;
        *sp = 0;
        errno = 0;
        unsigned long long b = strtoull(sp + 1, &end, 10);
        if (errno || end == sp + 1 || *end || strcmp(line, uuid))
            continue;
        sum = sum + b < sum ? UINT64_MAX : sum + b;   /* saturate: garbage never wraps to little */
    }
    return sum;
}

/* Sums live promises on uuid; removes dead entries. */
static uint64_t sum_promises(const struct ledger *l, const char *uuid)
{
    int fd = dup(l->promises);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(d);   /* a dup shares the offset of the last listing */
    uint64_t sum = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long st, tk;
        if (!parse_entry(de->d_name, false, &tk, &pid, &st))
            continue;
        if (!alive(pid, st) && !vgpu_holder_alive(l->promises, de->d_name)) {
            unlinkat(l->promises, de->d_name, 0);
            continue;
        }
        uint64_t b = read_promise(l->promises, de->d_name, uuid);
        sum = sum + b < sum ? UINT64_MAX : sum + b;
    }
    closedir(d);
    return sum;
}

/* How many live entries are ahead of ticket (dead ones are removed). */
static unsigned queue_ahead(const struct ledger *l, unsigned long long ticket)
{
    int fd = dup(l->queue);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(d);
    unsigned ahead = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long st, tk;
        if (!parse_entry(de->d_name, true, &tk, &pid, &st))
            continue;
        if (!alive(pid, st)) {
            unlinkat(l->queue, de->d_name, 0);
            continue;
        }
        if (ticket == 0 || tk < ticket)
            ahead++;
    }
    closedir(d);
    return ahead;
}

int ledger_dir_look(struct ledger *l, const char *const *uuids, unsigned n, unsigned long long ticket, uint64_t *out,
                    unsigned *ahead)
{
    for (unsigned i = 0; i < n; i++)
        out[i] = sum_promises(l, uuids[i]);
    *ahead = queue_ahead(l, ticket);
    return 0;
}

/* Writes this process's promise file, "UUID BYTES" lines (under the lock). A file of ours that is
 * there already (a reserve after a place) is extended. */
int ledger_dir_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n,
                       struct vgpu_err *e)
{
    char name[64];
    own_name(name, sizeof name);
    int fd = openat(l->promises, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool made = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = openat(l->promises, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    bool ok = fd >= 0;
    for (unsigned i = 0; ok && i < n; i++)
        ok = dprintf(fd, "%s %" PRIu64 "\n", uuids[i], bytes[i]) > 0;
    if (fd >= 0 && close(fd) < 0)
        ok = false;
    if (!ok) {
        int err = errno;
        /* A promise half written would count less than was promised: none at all is honest
         * (the caller fails; what an earlier promise of ours wrote stays). */
        if (made)
            unlinkat(l->promises, name, 0);
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot write promises/%s: %s%s", name, strerror(err),
                     vgpu_statedir_errno_hint(err));
        return -1;
    }
    return 0;
}

static void queue_name(unsigned long long ticket, char *buf, size_t len)
{
    char name[64];
    own_name(name, sizeof name);
    snprintf(buf, len, "%020llu.%s", ticket, name);
}

/* The next ticket, under the lock, and our entry for it. */
unsigned long long ledger_dir_take_ticket(struct ledger *l)
{
    unsigned long long t = 0;
    int fd = openat(l->dir, "queue.seq", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
        buf[n] = 0;
        char *end;
        t = strtoull(buf, &end, 10);
        if (end == buf || (*end && *end != '\n') || t > (1ULL << 60))
            t = 0;   /* garbage: tickets restart (the order of those waiting may be off, nothing more) */
    }
    t++;
    int k = snprintf(buf, sizeof buf, "%020llu\n", t);
    (void)!pwrite(fd, buf, (size_t)k, 0);
    close(fd);
    char qname[128];
    queue_name(t, qname, sizeof qname);
    int q = openat(l->queue, qname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (q >= 0)
        close(q);
    return t;
}

void ledger_dir_leave_queue(struct ledger *l, unsigned long long ticket)
{
    char qname[128];
    queue_name(ticket, qname, sizeof qname);
    unlinkat(l->queue, qname, 0);
}

void ledger_dir_release(const char *statedir)
{
    char name[64];
    struct vgpu_err e;
    own_name(name, sizeof name);
    int dfd = open_dir(statedir, &e);
    if (dfd < 0)
        return;
    int pfd = openat(dfd, "promises", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0) {
        unlinkat(pfd, name, 0);
        close(pfd);
    }
    close(dfd);
}

int ledger_dir_hold(const char *statedir, pid_t command)
{
    char mine[64];
    struct ledger l;
    struct vgpu_err e;
    if (ledger_dir_open(statedir, &l, &e) < 0)
        return -1;
    own_name(mine, sizeof mine);
    int rc = vgpu_holder_add(l.promises, mine, command);
    ledger_dir_close(&l);
    return rc;
}

int ledger_dir_adopt(const char *statedir, pid_t from, struct vgpu_err *e)
{
    char theirs[64], mine[64];
    struct ledger l;
    if (ledger_dir_open(statedir, &l, e) < 0)
        return -1;
    proc_name(from, theirs, sizeof theirs);
    own_name(mine, sizeof mine);
    /* Under the lock, so no placement sees the promise twice or not at all. */
    int rc = renameat(l.promises, theirs, l.promises, mine);
    if (rc < 0)
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot take over the promise %s/promises/%s (was its vgpu run "
                     "killed?): %s", statedir, theirs, strerror(errno));
    ledger_dir_close(&l);
    return rc;
}
