/* Placement of jobs by memory: the choice (a pure function) and the ledger of promises and the
 * --wait queue in the machine-wide directory (see vgpu/placement.h). */
#include "vgpu/placement.h"

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
#include "vgpu/gpu.h"
#include "vgpu/machinedir.h"
#include "vgpu/region.h"
#include "vgpu/topology.h"
#include "vgpu/units.h"

int vgpu_place_policy_parse(const char *s)
{
    if (!strcmp(s, "binpack"))
        return VGPU_PLACE_BINPACK;
    if (!strcmp(s, "spread"))
        return VGPU_PLACE_SPREAD;
    return -1;
}

static uint64_t room(const struct vgpu_place_cand *c)
{
    return c->promised >= c->total ? 0 : c->total - c->promised;
}

int vgpu_place_choose(const struct vgpu_place_cand *c, unsigned n, uint64_t want, enum vgpu_place_policy pol,
                      bool overcommit)
{
    int best = -1;
    for (unsigned i = 0; i < n; i++) {
        uint64_t r = room(&c[i]);
        if (r < want)
            continue;
        if (best < 0)
            best = (int)i;
        else if (pol == VGPU_PLACE_BINPACK ? r < room(&c[best]) : r > room(&c[best]))
            best = (int)i;
    }
    if (best >= 0 || !overcommit)
        return best;
    /* Overcommitted: the one where it hurts least, among those large enough to hold the job at
     * all (a smaller GPU with less promised would fail the job outright). */
    for (unsigned i = 0; i < n; i++) {
        if (c[i].total < want)
            continue;
        int64_t li = (int64_t)c[i].total - (int64_t)c[i].promised;
        if (best < 0 || li > (int64_t)c[best].total - (int64_t)c[best].promised)
            best = (int)i;
    }
    return best;
}

/* A group grown from a seed: each step adds the candidate nearest to the group so far, then
 * the one the policy prefers, then the lowest position. Returns its farthest closeness. */
static int grow(const struct vgpu_place_cand *c, unsigned n, const bool *ok, enum vgpu_place_policy pol,
                unsigned count, const uint8_t *near, unsigned seed, unsigned *g)
{
    unsigned have = 1;
    int worst = 0;
    g[0] = seed;
    while (have < count) {
        int best = -1, best_far = 0;
        for (unsigned j = 0; j < n; j++) {
            bool in = !ok[j];
            for (unsigned k = 0; k < have && !in; k++)
                in = g[k] == j;
            if (in)
                continue;
            int far = 0;
            for (unsigned k = 0; k < have && near; k++)
                if (near[g[k] * n + j] > far)
                    far = near[g[k] * n + j];
            if (best < 0 || far < best_far ||
                (far == best_far && (pol == VGPU_PLACE_BINPACK ? room(&c[j]) < room(&c[best])
                                                               : room(&c[j]) > room(&c[best])))) {
                best = (int)j;
                best_far = far;
            }
        }
        if (best < 0)
            return -1;
        g[have++] = (unsigned)best;
        if (best_far > worst)
            worst = best_far;
    }
    return worst;
}

static uint64_t group_room(const struct vgpu_place_cand *c, const unsigned *g, unsigned count)
{
    uint64_t s = 0;
    for (unsigned k = 0; k < count; k++)
        s += room(&c[g[k]]);
    return s;
}

static void sort_picks(unsigned *g, unsigned count)
{
    for (unsigned i = 1; i < count; i++)
        for (unsigned j = i; j > 0 && g[j - 1] > g[j]; j--) {
            unsigned t = g[j];
            g[j] = g[j - 1];
            g[j - 1] = t;
        }
}

int vgpu_place_choose_group(const struct vgpu_place_cand *c, unsigned n, uint64_t want, enum vgpu_place_policy pol,
                            bool overcommit, unsigned count, const uint8_t *near, unsigned *pick)
{
    if (count <= 1) {
        int one = vgpu_place_choose(c, n, want, pol, overcommit);
        if (one < 0)
            return -1;
        pick[0] = (unsigned)one;
        return 0;
    }
    if (count > n || n > VGPU_PLACE_MAX_CANDS)
        return -1;
    bool ok[VGPU_PLACE_MAX_CANDS];
    unsigned fit = 0;
    for (unsigned i = 0; i < n; i++)
        fit += (ok[i] = room(&c[i]) >= want);
    if (fit < count) {
        if (!overcommit)
            return -1;
        /* Overcommitted: those large enough at all, the most room left first (spread). */
        fit = 0;
        for (unsigned i = 0; i < n; i++)
            fit += (ok[i] = c[i].total >= want);
        if (fit < count)
            return -1;
        pol = VGPU_PLACE_SPREAD;
    }
    int best = -1;
    uint64_t best_room = 0;
    unsigned g[VGPU_PLACE_MAX_CANDS];
    for (unsigned seed = 0; seed < n; seed++) {
        if (!ok[seed])
            continue;
        int far = grow(c, n, ok, pol, count, near, seed, g);
        if (far < 0)
            continue;
        uint64_t r = group_room(c, g, count);
        sort_picks(g, count);
        bool better = best < 0 || far < best ||
                      (far == best && (pol == VGPU_PLACE_BINPACK ? r < best_room : r > best_room));
        if (!better && far == best && r == best_room)
            for (unsigned k = 0; k < count; k++)
                if (g[k] != pick[k]) {
                    better = g[k] < pick[k];
                    break;
                }
        if (better) {
            best = far;
            best_room = r;
            memcpy(pick, g, count * sizeof *g);
        }
    }
    return best;
}

/* ---- liveness ---------------------------------------------------------------------------- */

static bool alive(pid_t pid, unsigned long long st)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return false;
    unsigned long long now = vgpu_proc_start_time(pid);
    return now == 0 ? true : now == st;  /* /proc hidden: trust kill() */
}

/* The uid a live process runs as (the owner of /proc/PID), or -1. */
static long proc_uid(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    return stat(path, &st) == 0 ? (long)st.st_uid : -1;
}

/* ---- the ledger ------------------------------------------------------------------------------
 * In the machine-wide directory (vgpu/machinedir.h), so that every user's promises count:
 *   place.lock      flock'd around every decision (opened read-only: anyone may lock it)
 *   queue.seq       the last --wait ticket (read and rewritten under the lock)
 *   promises/PID.START, queue/TICKET.PID.START   one file per `vgpu run`, created O_EXCL
 * Everything is opened relative to the directory's descriptor, O_NOFOLLOW, and what others wrote
 * is parsed strictly: a promise counts only when its file belongs to the user its process runs
 * as (or root), so nobody can promise memory in another user's name. When the machine-wide
 * directory does not exist and we are not root (nobody created it), the ledger falls back to the
 * caller's state directory, and says so once: placement then sees only the caller's jobs. */

struct ledger {
    int dir, promises, queue, lock;
};

static void ledger_close(struct ledger *l)
{
    int *fds[] = { &l->lock, &l->promises, &l->queue, &l->dir };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);   /* closing the lock's descriptor drops the flock */
        *fds[i] = -1;
    }
}

static int open_fallback(const char *statedir, struct vgpu_err *e)
{
    int fd = open(statedir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot open %s: %s", statedir, strerror(errno));
        return -1;
    }
    return fd;
}

static int ledger_dir(const char *statedir, struct vgpu_err *e)
{
    struct vgpu_err me = { 0 };
    int fd = vgpu_machinedir_open(true, &me);
    if (fd >= 0)
        return fd;
    if (me.code == VGPU_EXIT_STATE && geteuid() != 0 && strstr(me.msg, "does not exist")) {
        static bool said;
        if (!said)
            vgpu_warn("%s; placement sees only your own jobs", me.msg);
        said = true;
        return open_fallback(statedir, e);
    }
    *e = me;
    return -1;
}

/* Opens the ledger and takes its lock: bounded, since anyone may hold it (10 s, then an error). */
static int ledger_open(const char *statedir, struct ledger *l, struct vgpu_err *e)
{
    l->dir = l->promises = l->queue = l->lock = -1;
    if ((l->dir = ledger_dir(statedir, e)) < 0)
        return -1;
    if ((l->promises = vgpu_machinedir_sub(l->dir, "promises", e)) < 0 ||
        (l->queue = vgpu_machinedir_sub(l->dir, "queue", e)) < 0)
        goto fail;
    l->lock = openat(l->dir, "place.lock", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    struct stat st;
    if (l->lock < 0 || fstat(l->lock, &st) != 0 || !S_ISREG(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot use %s/place.lock: %s", vgpu_machinedir_path(),
                     l->lock < 0 ? strerror(errno) : "not a regular file");
        goto fail;
    }
    for (int tries = 0;; tries++) {
        if (flock(l->lock, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot lock %s/place.lock: %s", vgpu_machinedir_path(),
                         strerror(errno));
            goto fail;
        }
        if (tries >= 1000) {
            vgpu_err_set(e, VGPU_EXIT_BUSY, "placement: %s/place.lock has been held for 10 s by another process "
                         "(fuser -v it to see which); try again, or use --gpu", vgpu_machinedir_path());
            goto fail;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
fail:
    ledger_close(l);
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
static uint64_t read_promise(int dfd, const char *name, pid_t pid, const char *uuid)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    long owner = proc_uid(pid);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || owner < 0 || (st.st_uid != 0 && (long)st.st_uid != owner)) {
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

/* Sums live promises on uuid (NULL: none); removes dead entries it may remove. */
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
        if (!alive(pid, st)) {
            unlinkat(l->promises, de->d_name, 0);   /* another user's: the sticky bit says no; skipped */
            continue;
        }
        if (!uuid)
            continue;
        uint64_t b = read_promise(l->promises, de->d_name, pid, uuid);
        sum = sum + b < sum ? UINT64_MAX : sum + b;
    }
    closedir(d);
    return sum;
}

uint64_t vgpu_place_promised(const char *statedir, const char *uuid)
{
    struct vgpu_err e;
    struct ledger l;
    if (ledger_open(statedir, &l, &e) < 0)
        return 0;
    uint64_t s = sum_promises(&l, uuid);
    ledger_close(&l);
    return s;
}

static void proc_name(pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%llu", (int)pid, (unsigned long long)vgpu_proc_start_time(pid));
}

static void own_name(char *buf, size_t len)
{
    proc_name(getpid(), buf, len);
}

/* Writes this process's promise file, "UUID BYTES" lines (under the lock). A file of ours that is
 * there already (a reserve after a place) is extended. */
static int write_promise(const struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n,
                         struct vgpu_err *e)
{
    char name[64];
    own_name(name, sizeof name);
    int fd = openat(l->promises, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        fd = openat(l->promises, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
            close(fd);
            fd = -1;
            errno = EPERM;
        }
    }
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot write %s/promises/%s: %s", vgpu_machinedir_path(), name,
                     strerror(errno));
        return -1;
    }
    fchmod(fd, 0644);   /* others must read it to count it; the umask may have hidden it */
    for (unsigned i = 0; i < n; i++)
        dprintf(fd, "%s %" PRIu64 "\n", uuids[i], bytes[i]);
    if (close(fd) < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot write %s/promises/%s: %s", vgpu_machinedir_path(), name,
                     strerror(errno));
        return -1;
    }
    return 0;
}

void vgpu_place_release(const char *statedir)
{
    char name[64];
    struct vgpu_err e;
    own_name(name, sizeof name);
    int dfd = ledger_dir(statedir, &e);
    if (dfd < 0)
        return;
    int pfd = openat(dfd, "promises", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0) {
        unlinkat(pfd, name, 0);
        close(pfd);
    }
    close(dfd);
}

int vgpu_place_adopt(const char *statedir, pid_t from, struct vgpu_err *e)
{
    char theirs[64], mine[64];
    struct ledger l;
    if (ledger_open(statedir, &l, e) < 0)
        return -1;
    proc_name(from, theirs, sizeof theirs);
    own_name(mine, sizeof mine);
    /* Under the lock, so no placement sees the promise twice or not at all. */
    int rc = renameat(l.promises, theirs, l.promises, mine);
    if (rc < 0)
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot take over the promise %s/promises/%s (was its vgpu run "
                     "killed?): %s", vgpu_machinedir_path(), theirs, strerror(errno));
    ledger_close(&l);
    return rc;
}

/* ---- candidates ------------------------------------------------------------------------------ */

struct cands {
    unsigned n;
    unsigned pos[VGPU_MAX_GPUS];
    struct vgpu_place_cand c[VGPU_MAX_GPUS];
    uint8_t near[VGPU_MAX_GPUS * VGPU_MAX_GPUS];   /* by candidate, from the topology */
};

static void fill_cands(const struct ledger *l, const struct vgpu_gpu_list *list, struct cands *out)
{
    struct vgpu_gpu_sel sel;
    struct vgpu_err e;
    out->n = 0;
    if (vgpu_gpus_select_default(list, NULL, &sel, &e) < 0)
        return;
    for (unsigned k = 0; k < sel.count; k++) {
        const struct vgpu_gpu *g = &list->gpu[sel.pos[k]];
        if (!g->uuid[0] || !g->mem_total)
            continue;
        out->pos[out->n] = sel.pos[k];
        out->c[out->n].total = g->mem_total;
        out->c[out->n].promised = sum_promises(l, g->uuid);
        out->n++;
    }
}

static const uint8_t *cands_near(struct cands *cs, const struct vgpu_topology *topo)
{
    if (!topo)
        return NULL;
    for (unsigned i = 0; i < cs->n; i++)
        for (unsigned j = 0; j < cs->n; j++)
            cs->near[i * cs->n + j] = topo->near[cs->pos[i]][cs->pos[j]];
    return cs->near;
}

/* "0", or "0/gi1/ci0" for a MIG device. */
static void gpu_label(const struct vgpu_gpu *g, char *buf, size_t len)
{
    if (g->is_mig)
        snprintf(buf, len, "%u/gi%u/ci%u", g->index, g->mig_gi, g->mig_ci);
    else
        snprintf(buf, len, "%u", g->index);
}

static void describe_left(const struct vgpu_gpu_list *list, const struct cands *cs, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < cs->n && used + 1 < len; i++) {
        const struct vgpu_gpu *g = &list->gpu[cs->pos[i]];
        char a[32], b[32], idx[32];
        uint64_t left = room(&cs->c[i]);
        gpu_label(g, idx, sizeof idx);
        int k = snprintf(buf + used, len - used, "\n    GPU %s (%s): %s left of %s", idx, g->uuid,
                         vgpu_format_size(left, a, sizeof a), vgpu_format_size(cs->c[i].total, b, sizeof b));
        if (k < 0)
            break;
        used += (size_t)k;
        if (used >= len)
            used = len - 1;
    }
}

/* "GPU 0 (79.65 GiB)" or "every GPU: GPU 0 (40 GiB), GPU 1 (80 GiB)". */
static void describe_totals(const struct vgpu_gpu_list *list, const struct cands *cs, uint64_t want, char *buf,
                            size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", cs->n > 1 ? "every GPU: " : "");
    for (unsigned i = 0; i < cs->n && used + 1 < len; i++) {
        const struct vgpu_gpu *g = &list->gpu[cs->pos[i]];
        char t[64], idx[32];
        gpu_label(g, idx, sizeof idx);
        int k = snprintf(buf + used, len - used, "%sGPU %s (%s)", i ? ", " : "", idx,
                         vgpu_format_size_near(cs->c[i].total, want, t, sizeof t));
        if (k < 0)
            break;
        used += (size_t)k;
        if (used >= len)
            used = len - 1;
    }
}

/* ---- the queue ---------------------------------------------------------------------------------- */

/* The next ticket, under the lock. queue.seq may hold anything another user wrote: garbage reads
 * as 0 (tickets then restart; the order among those already waiting may be off, nothing more). */
static unsigned long long next_ticket(const struct ledger *l)
{
    unsigned long long t = 0;
    int fd = openat(l->dir, "queue.seq", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return 1;
    }
    if (st.st_uid == geteuid())
        fchmod(fd, 0666);   /* every user takes tickets */
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
        buf[n] = 0;
        char *end;
        t = strtoull(buf, &end, 10);
        if (end == buf || (*end && *end != '\n') || t > (1ULL << 60))
            t = 0;
    }
    t++;
    int k = snprintf(buf, sizeof buf, "%020llu\n", t);
    /* Unwritable (another user's file, made read-only): the ticket still orders this round. */
    (void)!pwrite(fd, buf, (size_t)k, 0);
    close(fd);
    return t;
}

/* How many live entries are ahead of ticket (dead ones are removed where we may). */
static unsigned queue_ahead(const struct ledger *l, unsigned long long ticket)
{
    int fd = dup(l->queue);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    rewinddir(d);   /* a dup shares the offset of the last listing */
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
        if (tk < ticket)
            ahead++;
    }
    closedir(d);
    return ahead;
}

static void queue_name(unsigned long long ticket, char *buf, size_t len)
{
    char name[64];
    own_name(name, sizeof name);
    snprintf(buf, len, "%020llu.%s", ticket, name);
}

/* Removes our queue entry (a ledger of our own, opened for the purpose when l is NULL). */
static void queue_leave(const char *statedir, const struct ledger *l, const char *qname)
{
    if (!qname[0])
        return;
    if (l) {
        unlinkat(l->queue, qname, 0);
        return;
    }
    struct vgpu_err e;
    struct ledger own;
    if (ledger_open(statedir, &own, &e) == 0) {
        unlinkat(own.queue, qname, 0);
        ledger_close(&own);
    }
}

int vgpu_place(const char *statedir, const struct vgpu_gpu_list *list, const struct vgpu_place_req *req,
               unsigned *pos, struct vgpu_err *e)
{
    struct cands *cs = calloc(1, sizeof *cs);
    if (!cs) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    unsigned long long ticket = 0;
    char qname[128] = "";
    unsigned last_ahead = (unsigned)-1;
    bool announced = false;
    int rc = -1;
    unsigned count = req->count ? req->count : 1;
    char what[96], a0[32];
    if (count > 1)
        snprintf(what, sizeof what, "%u GPUs with %s each", count, vgpu_format_size(req->want, a0, sizeof a0));
    else
        snprintf(what, sizeof what, "%s", vgpu_format_size(req->want, a0, sizeof a0));
    for (;;) {
        struct ledger l;
        if (ledger_open(statedir, &l, e) < 0)
            break;
        unsigned ahead = ticket ? queue_ahead(&l, ticket) : queue_ahead(&l, (unsigned long long)-1);
        fill_cands(&l, list, cs);
        if (!cs->n) {
            ledger_close(&l);
            vgpu_err_set(e, VGPU_EXIT_NO_GPU, "placement: no GPU reports its memory, so none can be chosen; use --gpu");
            break;
        }
        /* A request no GPU could ever hold fails now: waiting for it would never end. */
        unsigned big_enough = 0;
        for (unsigned i = 0; i < cs->n; i++)
            big_enough += req->want <= cs->c[i].total;
        if (big_enough == 0) {
            char a[64], all[1500];
            describe_totals(list, cs, req->want, all, sizeof all);
            ledger_close(&l);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s is larger than %s; ask for at most the memory of one GPU",
                         vgpu_format_size_near(req->want, cs->c[0].total, a, sizeof a), all);
            break;
        }
        if (big_enough < count) {
            char a[32], all[1500];
            describe_totals(list, cs, req->want, all, sizeof all);
            ledger_close(&l);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--gpus %u: only %u GPU%s (or MIG instance%s) of this machine can hold "
                         "--mem %s at all (%s); ask for fewer GPUs or less memory", count, big_enough,
                         big_enough > 1 ? "s" : "", big_enough > 1 ? "s" : "", vgpu_format_size(req->want, a, sizeof a),
                         all);
            break;
        }
        /* First come, first served: while others wait, a newcomer queues behind them. */
        unsigned picks[VGPU_MAX_GPUS];
        int near = ahead == 0 ? vgpu_place_choose_group(cs->c, cs->n, req->want, req->policy, req->overcommit, count,
                                                        cands_near(cs, req->topo), picks)
                              : -1;
        if (near >= 0) {
            const char *u[VGPU_MAX_GPUS];
            uint64_t b[VGPU_MAX_GPUS];
            for (unsigned k = 0; k < count; k++) {
                u[k] = list->gpu[cs->pos[picks[k]]].uuid;
                b[k] = req->want;
            }
            int w = write_promise(&l, u, b, count, e);
            queue_leave(statedir, &l, qname);
            qname[0] = 0;
            ledger_close(&l);
            if (w == 0) {
                for (unsigned k = 0; k < count; k++)
                    pos[k] = cs->pos[picks[k]];
                rc = 0;
            }
            break;
        }
        if (!req->wait) {
            char left[1500], a[32];
            describe_left(list, cs, left, sizeof left);
            if (ahead)
                vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "%u job%s already wait%s for GPU memory (use --wait to queue "
                             "behind them); what each GPU has left:%s", ahead, ahead > 1 ? "s" : "",
                             ahead > 1 ? "" : "s", left);
            else if (count > 1)
                vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "no %u GPUs have %s each of memory not promised to running "
                             "jobs (use --wait to queue, or --overcommit); what each GPU has left:%s", count,
                             vgpu_format_size(req->want, a, sizeof a), left);
            else
                vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "no GPU has %s of memory not promised to running jobs "
                             "(use --wait to queue, or --overcommit); what each GPU has left:%s",
                             vgpu_format_size(req->want, a, sizeof a), left);
            ledger_close(&l);
            break;
        }
        if (!ticket) {
            ticket = next_ticket(&l);
            queue_name(ticket, qname, sizeof qname);
            int q = openat(l.queue, qname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (q >= 0)
                close(q);
            ahead = queue_ahead(&l, ticket);
        }
        ledger_close(&l);
        if (!req->quiet && ahead != last_ahead) {
            vgpu_log(announced ? VGPU_LOG_INFO : VGPU_LOG_WARN, "waiting for %s of GPU memory: place %u in the queue",
                     what, ahead + 1);
            announced = true;
            last_ahead = ahead;
        }
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (rc < 0)
        queue_leave(statedir, NULL, qname);
    free(cs);
    return rc;
}

int vgpu_place_reserve(const char *statedir, const struct vgpu_gpu_list *list, const unsigned *pos,
                       const uint64_t *bytes, unsigned n, bool overcommit, struct vgpu_err *e)
{
    struct ledger l;
    if (ledger_open(statedir, &l, e) < 0)
        return -1;
    const char *uuids[VGPU_MAX_GPUS];
    uint64_t b[VGPU_MAX_GPUS];
    unsigned m = 0;
    for (unsigned i = 0; i < n && m < VGPU_MAX_GPUS; i++) {
        const struct vgpu_gpu *g = &list->gpu[pos[i]];
        if (!bytes[i] || !g->uuid[0])
            continue;
        uint64_t promised = sum_promises(&l, g->uuid);
        if (!overcommit && g->mem_total && promised + bytes[i] > g->mem_total) {
            char a[32], lf[32], t[32];
            uint64_t left = promised >= g->mem_total ? 0 : g->mem_total - promised;
            vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY,
                         "GPU %u (%s) has %s of its %s not promised to running jobs, less than the %s asked; "
                         "wait for a job to end, or give --overcommit", g->index, g->uuid,
                         vgpu_format_size(left, lf, sizeof lf), vgpu_format_size(g->mem_total, t, sizeof t),
                         vgpu_format_size(bytes[i], a, sizeof a));
            ledger_close(&l);
            return -1;
        }
        uuids[m] = g->uuid;
        b[m++] = bytes[i];
    }
    int rc = m ? write_promise(&l, uuids, b, m, e) : 0;
    ledger_close(&l);
    return rc;
}
