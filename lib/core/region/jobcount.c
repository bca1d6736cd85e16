/* The split count: how many jobs run on each GPU (vgpu/jobcount.h): every user's, counted by the
 * arbiter when one answers; else this user's own, in its state directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/holder.h"
#include "vgpu/jobcount.h"
#include "vgpu/machinedir.h"
#include "vgpu/policy.h"
#include "vgpu/proc.h"
#include "vgpu/statedir.h"

static char my_entry[64];   /* our jobcount/PID.START while registered */

/* What to do about an errno, for messages: running out of descriptors has its own fix. */
static const char *remedy(int err)
{
    return err == EMFILE || err == ENFILE ? "; raise the open-file limit (ulimit -n)" : vgpu_statedir_errno_hint(err);
}

int vgpu_jobcount_parse(const char *text, const char *what, unsigned *n, struct vgpu_err *e)
{
    char *end;
    errno = 0;
    unsigned long v = text[0] >= '0' && text[0] <= '9' ? strtoul(text, &end, 10) : 0;
    if (text[0] < '0' || text[0] > '9' || *end || errno || v < 1 || v > VGPU_MAX_JOBS_LIMIT) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s '%s': give a whole number of jobs from 1 to %d", what, text,
                     VGPU_MAX_JOBS_LIMIT);
        return -1;
    }
    *n = (unsigned)v;
    return 0;
}

int vgpu_jobcount_policy(unsigned *max, struct vgpu_err *e)
{
    struct vgpu_policy p;
    int rc = vgpu_policy_read(&p, e);
    *max = p.max_jobs_per_gpu;
    return rc;
}

/* "PID.START" → pid and start time. */
static bool parse_name(const char *name, pid_t *pid, unsigned long long *start)
{
    char *end;
    if (name[0] < '1' || name[0] > '9')
        return false;
    errno = 0;
    unsigned long p = strtoul(name, &end, 10);
    if (errno || *end != '.' || p > 0x7fffffff || end[1] < '0' || end[1] > '9')
        return false;
    unsigned long long s = strtoull(end + 1, &end, 10);
    if (errno || *end)
        return false;
    *pid = (pid_t)p;
    *start = s;
    return true;
}

/* Does entry `name` (open at dfd) list uuid? Reads at most 8 KiB of untrusted text. */
static bool entry_has(int dfd, const char *name, const char *uuid)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st;
    char buf[8193];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    size_t ul = strlen(uuid);
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len == ul && memcmp(line, uuid, ul) == 0)
            return true;
        if (!nl)
            break;
        line = nl + 1;
    }
    return false;
}

/* Live entries on uuid; dead ones are removed (where the sticky bit lets us). */
static int count_on(int dfd, const char *uuid)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d);
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long start;
        if (!parse_name(de->d_name, &pid, &start))
            continue;
        if (vgpu_proc_start_time(pid) != start && !vgpu_holder_alive(dfd, de->d_name)) {
            (void)unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (entry_has(dfd, de->d_name, uuid))
            count++;
    }
    closedir(d);
    return count;
}

/* jobcount/ in the caller's own state directory: without the arbiter, the count is of this
 * user's jobs only (no directory that every user writes: DESIGN.md decision 10). */
static char shown[4200];

static int open_dir(bool create, struct vgpu_err *e)
{
    char sd[4096];
    if (vgpu_statedir(sd, sizeof sd, create, e) < 0)
        return -1;
    int top = open(sd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "job count: cannot open %s: %s", sd, strerror(errno));
        return -1;
    }
    if (vgpu_statedir_check_fd(top, sd, e) != 0) {
        close(top);
        return -1;
    }
    int d = vgpu_statedir_sub(top, sd, "jobcount", create, e);
    close(top);
    snprintf(shown, sizeof shown, "%s/jobcount", sd);
    return d;
}

static int lock_dir(int dfd, struct vgpu_err *e)
{
    int fd = openat(dfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int err = errno;
        vgpu_err_set(e, VGPU_EXIT_STATE, "job count: cannot use %s/.lock: %s%s", shown,
                     fd < 0 ? strerror(err) : "not a regular file", fd < 0 ? remedy(err) : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* Bounded: a holder that never lets go is a broken machine, said so, not a hang. */
    for (int i = 0; i < 300; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
    }
    vgpu_err_set(e, VGPU_EXIT_STATE, "job count: %s/.lock has been held for 30 s by another of your processes "
                 "(fuser -v it to see which); try again", shown);
    close(fd);
    return -1;
}

static int write_entry(int dfd, const char *const *uuids, unsigned n, struct vgpu_err *e)
{
    char name[64];
    snprintf(name, sizeof name, "%d.%llu", (int)getpid(), (unsigned long long)vgpu_proc_start_time(getpid()));
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    for (unsigned i = 0; ok && i < n; i++)
        ok = dprintf(fd, "%s\n", uuids[i]) > 0;
    if (fd >= 0 && close(fd) < 0)
        ok = false;
    if (!ok) {
        int err = errno;
        vgpu_err_set(e, VGPU_EXIT_STATE, "job count: cannot write %s/%s: %s%s", shown, name,
                     strerror(err), remedy(err));
        (void)unlinkat(dfd, name, 0);
        return -1;
    }
    snprintf(my_entry, sizeof my_entry, "%s", name);
    return 0;
}

static bool counted_arb;   /* registered with the arbiter (cmd/daemon/place.c) rather than in jobcount/ */
static struct vgpu_arb_gpu_bytes counted_on_gpus[64];
static unsigned ncounted;
static uint32_t counted_gen;   /* the connection it was counted on */

#define ARB_MAX_GPUS 64

static unsigned pack(struct vgpu_arb_gpu_bytes *g, const char *const *uuids, unsigned n)
{
    n = n < ARB_MAX_GPUS ? n : ARB_MAX_GPUS;
    for (unsigned i = 0; i < n; i++) {
        memset(&g[i], 0, sizeof g[i]);
        snprintf(g[i].uuid, sizeof g[i].uuid, "%s", uuids[i]);
    }
    return n;
}

/* One try through the arbiter, which counts every user's jobs and reads root's policy itself:
 * 0 counted; 1 a GPU is full (*full, *count, *limit); 2 no arbiter; -1 refused (e). */
static int enter_arb(const char *const *uuids, unsigned n, unsigned max, int *full, unsigned *count,
                     unsigned *limit, struct vgpu_err *e)
{
    struct vgpu_arb_gpu_bytes g[ARB_MAX_GPUS];
    n = pack(g, uuids, n);
    uint64_t a[4] = { max };
    struct vgpu_arb_rep r;
    /* patient: a daemon that has just started counts the running jobs first (cmd/daemon/place.c) */
    int64_t rc = vgpu_arb_call_patient(VGPU_ARB_JC_ENTER, a, g, n * sizeof *g, NULL, 0, NULL, &r);
    if (rc == -EPIPE)
        return 2;
    if (rc == -EBUSY && r.v[0] < n) {
        *full = (int)r.v[0];
        *count = (unsigned)(r.v[1] & 0xffffffffu);
        *limit = (unsigned)(r.v[1] >> 32);
        return 1;
    }
    if (rc < 0) {
        vgpu_err_set(e, rc == -EDQUOT ? VGPU_EXIT_NO_CAPACITY : VGPU_EXIT_STATE, "job count: the arbiter refused: %s",
                     r.msg[0] ? r.msg : strerror((int)-rc));
        return -1;
    }
    counted_arb = true;
    memcpy(counted_on_gpus, g, n * sizeof *g);
    ncounted = n;
    counted_gen = vgpu_arb_gen();
    return 0;
}

void vgpu_jobcount_keep(void)
{
    if (!counted_arb)
        return;
    uint32_t g = vgpu_arb_probe();
    if (!g || g == counted_gen)
        return;
    uint64_t a[4] = { 0, 1 };
    if (vgpu_arb_call_data(VGPU_ARB_JC_ENTER, a, counted_on_gpus, ncounted * sizeof *counted_on_gpus, NULL, 0, NULL,
                           NULL) == 0)
        counted_gen = g;
}

/* One try in our own jobcount/ (no arbiter): the same answers. */
static int enter_dir(const char *const *uuids, unsigned n, unsigned max, int *full, unsigned *count,
                     unsigned *limit, struct vgpu_err *e)
{
    unsigned policy;
    if (vgpu_jobcount_policy(&policy, e) < 0)
        return -1;
    *limit = max && policy ? (max < policy ? max : policy) : (max ? max : policy);
    struct vgpu_err de;
    int dfd = open_dir(true, &de);
    if (dfd < 0) {
        if (!*limit)
            return 0;                   /* nothing to enforce, nowhere to be counted */
        *e = de;
        return -1;
    }
    int lock = lock_dir(dfd, e);
    if (lock < 0) {
        close(dfd);
        return -1;
    }
    *full = -1;
    for (unsigned i = 0; *limit && i < n && *full < 0; i++) {
        int c = count_on(dfd, uuids[i]);
        *count = c < 0 ? 0 : (unsigned)c;
        if (*count >= *limit)
            *full = (int)i;
    }
    int rc = *full >= 0 ? 1 : write_entry(dfd, uuids, n, e);
    close(lock);
    close(dfd);
    return rc;
}

int vgpu_jobcount_enter(const char *const *uuids, unsigned n, unsigned max, bool wait, struct vgpu_err *e)
{
    for (bool said = false;;) {
        int full = -1;
        unsigned count = 0, limit = 0;
        int rc = enter_arb(uuids, n, max, &full, &count, &limit, e);
        if (rc == 2)
            rc = enter_dir(uuids, n, max, &full, &count, &limit, e);
        if (rc <= 0)
            return rc;
        if (!wait) {
            vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "GPU %s already runs %u job%s, the most allowed (%s %u); try later, "
                         "or add --wait", uuids[full], count, count == 1 ? "" : "s",
                         max && max == limit ? "--max-jobs" : "root's max-jobs-per-gpu policy", limit);
            return -1;
        }
        if (!said) {
            vgpu_warn("waiting: GPU %s runs %u jobs, the most allowed (%u)", uuids[full], count, limit);
            said = true;
        }
        nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
    }
}

int vgpu_jobcount_adopt(pid_t from, struct vgpu_err *e)
{
    if (counted_arb) {
        uint64_t a[4] = { (uint64_t)from };
        struct vgpu_arb_rep r;
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_PL_ADOPT, a, NULL, 0, NULL, 0, NULL, &r);
        counted_gen = vgpu_arb_gen();
        if (rc < 0) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "job count: the arbiter could not hand the job's place over: %s",
                         rc == -EPIPE ? "it went away" : r.msg[0] ? r.msg : strerror((int)-rc));
            return -1;
        }
        return 0;
    }
    if (!my_entry[0])
        return 0;                       /* the caller was not registered: nothing to take over */
    int dfd = open_dir(false, e);
    if (dfd < 0)
        return -1;
    char mine[64];
    snprintf(mine, sizeof mine, "%d.%llu", (int)getpid(), (unsigned long long)vgpu_proc_start_time(getpid()));
    (void)from;
    int rc = renameat(dfd, my_entry, dfd, mine);
    if (rc < 0)
        vgpu_err_set(e, VGPU_EXIT_STATE, "job count: cannot take over %s/%s: %s", shown,
                     my_entry, strerror(errno));
    else
        snprintf(my_entry, sizeof my_entry, "%s", mine);
    close(dfd);
    return rc;
}

int vgpu_jobcount_hold(pid_t command)
{
    if (counted_arb || !my_entry[0])
        return 0;                       /* the arbiter's count goes with vgpu run's connection */
    struct vgpu_err e;
    int dfd = open_dir(false, &e);
    if (dfd < 0)
        return -1;
    int rc = vgpu_holder_add(dfd, my_entry, command);
    close(dfd);
    return rc;
}

void vgpu_jobcount_leave(void)
{
    if (counted_arb)
        vgpu_arb_call_data(VGPU_ARB_JC_LEAVE, NULL, NULL, 0, NULL, 0, NULL, NULL);
    counted_arb = false;
    if (!my_entry[0])
        return;
    struct vgpu_err e;
    int dfd = open_dir(false, &e);
    if (dfd >= 0) {
        (void)unlinkat(dfd, my_entry, 0);
        close(dfd);
    }
    my_entry[0] = 0;
}

int vgpu_jobcount_count(const char *uuid)
{
    struct vgpu_arb_gpu_bytes g;
    pack(&g, &uuid, 1);
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_JC_COUNT, NULL, &g, sizeof g, NULL, 0, NULL, NULL);
    if (rc >= 0)
        return (int)rc;
    struct vgpu_err e;
    int dfd = open_dir(false, &e);
    if (dfd < 0)
        return -1;
    int n = count_on(dfd, uuid);
    close(dfd);
    return n;
}
