/* Placement of jobs by memory: the choice (a pure function) and the ledger of promises and the
 * --wait queue in the state directory (see vgpu/placement.h). */
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
#include "vgpu/region.h"
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
    /* Overcommitted: the one where it hurts least. */
    for (unsigned i = 0; i < n; i++) {
        int64_t li = (int64_t)c[i].total - (int64_t)c[i].promised;
        if (best < 0 || li > (int64_t)c[best].total - (int64_t)c[best].promised)
            best = (int)i;
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

/* ---- the ledger ------------------------------------------------------------------------------ */

static int lock_dir(const char *dir, struct vgpu_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/promises", dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        goto fail;
    snprintf(path, sizeof path, "%s/queue", dir);
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        goto fail;
    snprintf(path, sizeof path, "%s/place.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            close(fd);
            goto fail;
        }
    return fd;
fail:
    vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot use %s: %s", path, strerror(errno));
    return -1;
}

static void unlock_dir(int fd)
{
    if (fd >= 0)
        close(fd);  /* drops the flock */
}

/* Parses "PID.START" (promises) or "TICKET.PID.START" (queue). */
static bool parse_entry(const char *name, bool ticketed, unsigned long long *ticket, pid_t *pid,
                        unsigned long long *st)
{
    char *end;
    const char *s = name;
    if (ticketed) {
        *ticket = strtoull(s, &end, 10);
        if (end == s || *end != '.')
            return false;
        s = end + 1;
    }
    long p = strtol(s, &end, 10);
    if (end == s || *end != '.' || p <= 0)
        return false;
    *pid = (pid_t)p;
    s = end + 1;
    *st = strtoull(s, &end, 10);
    return end != s && !*end;
}

/* Sums live promises on uuid (NULL: none); removes dead entries. */
static uint64_t sum_promises(const char *dir, const char *uuid)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/promises", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    uint64_t sum = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long st, tk;
        if (!parse_entry(de->d_name, false, &tk, &pid, &st))
            continue;
        char f[4500];
        snprintf(f, sizeof f, "%s/%s", path, de->d_name);
        if (!alive(pid, st)) {
            unlink(f);
            continue;
        }
        if (!uuid)
            continue;
        FILE *fp = fopen(f, "r");
        if (!fp)
            continue;
        char u[128];
        unsigned long long b;
        while (fscanf(fp, "%127s %llu", u, &b) == 2)
            if (!strcmp(u, uuid))
                sum += b;
        fclose(fp);
    }
    closedir(d);
    return sum;
}

uint64_t vgpu_place_promised(const char *statedir, const char *uuid)
{
    struct vgpu_err e;
    int fd = lock_dir(statedir, &e);
    if (fd < 0)
        return 0;
    uint64_t s = sum_promises(statedir, uuid);
    unlock_dir(fd);
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

/* Appends "UUID BYTES" lines to this process's promise file (under the lock). */
static int write_promise(const char *dir, const char *const *uuids, const uint64_t *bytes, unsigned n,
                         struct vgpu_err *e)
{
    char name[64], path[4200];
    own_name(name, sizeof name);
    snprintf(path, sizeof path, "%s/promises/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        dprintf(fd, "%s %" PRIu64 "\n", uuids[i], bytes[i]);
    if (close(fd) < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void vgpu_place_release(const char *statedir)
{
    char name[64], path[4200];
    own_name(name, sizeof name);
    snprintf(path, sizeof path, "%s/promises/%s", statedir, name);
    unlink(path);
}

int vgpu_place_adopt(const char *statedir, pid_t from, struct vgpu_err *e)
{
    char theirs[64], mine[64], src[4200], dst[4200];
    int fd = lock_dir(statedir, e);
    if (fd < 0)
        return -1;
    proc_name(from, theirs, sizeof theirs);
    own_name(mine, sizeof mine);
    snprintf(src, sizeof src, "%s/promises/%s", statedir, theirs);
    snprintf(dst, sizeof dst, "%s/promises/%s", statedir, mine);
    /* Under the lock, so no placement sees the promise twice or not at all. */
    int rc = rename(src, dst);
    if (rc < 0)
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: cannot take over the promise %s (was its vgpu run killed?): %s",
                     src, strerror(errno));
    unlock_dir(fd);
    return rc;
}

/* ---- candidates ------------------------------------------------------------------------------ */

struct cands {
    unsigned n;
    unsigned pos[VGPU_MAX_GPUS];
    struct vgpu_place_cand c[VGPU_MAX_GPUS];
};

static void fill_cands(const char *dir, const struct vgpu_gpu_list *list, struct cands *out)
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
        out->c[out->n].promised = sum_promises(dir, g->uuid);
        out->n++;
    }
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
static void describe_totals(const struct vgpu_gpu_list *list, const struct cands *cs, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", cs->n > 1 ? "every GPU: " : "");
    for (unsigned i = 0; i < cs->n && used + 1 < len; i++) {
        const struct vgpu_gpu *g = &list->gpu[cs->pos[i]];
        char t[32], idx[32];
        gpu_label(g, idx, sizeof idx);
        int k = snprintf(buf + used, len - used, "%sGPU %s (%s)", i ? ", " : "", idx,
                         vgpu_format_size(cs->c[i].total, t, sizeof t));
        if (k < 0)
            break;
        used += (size_t)k;
        if (used >= len)
            used = len - 1;
    }
}

/* ---- the queue ---------------------------------------------------------------------------------- */

static unsigned long long next_ticket(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/queue.seq", dir);
    unsigned long long t = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%llu", &t) != 1)
            t = 0;
        fclose(f);
    }
    t++;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%llu\n", t);
        if (fclose(f) == 0)
            rename(tmp, path);
        else
            unlink(tmp);
    }
    return t;
}

/* How many live entries are ahead of ticket (dead ones are removed). */
static unsigned queue_ahead(const char *dir, unsigned long long ticket)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/queue", dir);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    unsigned ahead = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid;
        unsigned long long st, tk;
        if (!parse_entry(de->d_name, true, &tk, &pid, &st))
            continue;
        if (!alive(pid, st)) {
            char f[4500];
            snprintf(f, sizeof f, "%s/%s", path, de->d_name);
            unlink(f);
            continue;
        }
        if (tk < ticket)
            ahead++;
    }
    closedir(d);
    return ahead;
}

static void queue_path(const char *dir, unsigned long long ticket, char *buf, size_t len)
{
    char name[64];
    own_name(name, sizeof name);
    snprintf(buf, len, "%s/queue/%020llu.%s", dir, ticket, name);
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
    char qpath[4400] = "";
    unsigned last_ahead = (unsigned)-1;
    bool announced = false;
    int rc = -1;
    for (;;) {
        int fd = lock_dir(statedir, e);
        if (fd < 0)
            break;
        unsigned ahead = ticket ? queue_ahead(statedir, ticket) : queue_ahead(statedir, (unsigned long long)-1);
        fill_cands(statedir, list, cs);
        if (!cs->n) {
            unlock_dir(fd);
            vgpu_err_set(e, VGPU_EXIT_NO_GPU, "placement: no GPU reports its memory, so none can be chosen; use --gpu");
            break;
        }
        /* A request no GPU could ever hold fails now: waiting for it would never end. */
        unsigned bigger = 0;
        for (unsigned i = 0; i < cs->n; i++)
            bigger += req->want > cs->c[i].total;
        if (bigger == cs->n) {
            char a[32], all[1500];
            describe_totals(list, cs, all, sizeof all);
            unlock_dir(fd);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s is larger than %s; ask for at most the memory of one GPU",
                         vgpu_format_size(req->want, a, sizeof a), all);
            break;
        }
        /* First come, first served: while others wait, a newcomer queues behind them. */
        int pick = ahead == 0 ? vgpu_place_choose(cs->c, cs->n, req->want, req->policy, req->overcommit) : -1;
        if (pick >= 0) {
            const struct vgpu_gpu *g = &list->gpu[cs->pos[pick]];
            const char *u = g->uuid;
            int w = write_promise(statedir, &u, &req->want, 1, e);
            if (qpath[0])
                unlink(qpath);
            unlock_dir(fd);
            if (w == 0) {
                *pos = cs->pos[pick];
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
            else
                vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "no GPU has %s of memory not promised to running jobs "
                             "(use --wait to queue, or --overcommit); what each GPU has left:%s",
                             vgpu_format_size(req->want, a, sizeof a), left);
            unlock_dir(fd);
            break;
        }
        if (!ticket) {
            ticket = next_ticket(statedir);
            queue_path(statedir, ticket, qpath, sizeof qpath);
            int q = open(qpath, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (q >= 0)
                close(q);
            ahead = queue_ahead(statedir, ticket);
        }
        unlock_dir(fd);
        if (!req->quiet && ahead != last_ahead) {
            char a[32];
            vgpu_log(announced ? VGPU_LOG_INFO : VGPU_LOG_WARN, "waiting for %s of GPU memory: place %u in the queue",
                     vgpu_format_size(req->want, a, sizeof a), ahead + 1);
            announced = true;
            last_ahead = ahead;
        }
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (rc < 0 && qpath[0])
        unlink(qpath);
    free(cs);
    return rc;
}

int vgpu_place_reserve(const char *statedir, const struct vgpu_gpu_list *list, const unsigned *pos,
                       const uint64_t *bytes, unsigned n, bool overcommit, struct vgpu_err *e)
{
    int fd = lock_dir(statedir, e);
    if (fd < 0)
        return -1;
    const char *uuids[VGPU_MAX_GPUS];
    uint64_t b[VGPU_MAX_GPUS];
    unsigned m = 0;
    for (unsigned i = 0; i < n && m < VGPU_MAX_GPUS; i++) {
        const struct vgpu_gpu *g = &list->gpu[pos[i]];
        if (!bytes[i] || !g->uuid[0])
            continue;
        uint64_t promised = sum_promises(statedir, g->uuid);
        if (!overcommit && g->mem_total && promised + bytes[i] > g->mem_total) {
            char a[32], l[32], t[32];
            uint64_t left = promised >= g->mem_total ? 0 : g->mem_total - promised;
            vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY,
                         "GPU %u (%s) has %s of its %s not promised to running jobs, less than the %s asked; "
                         "wait for a job to end, or give --overcommit", g->index, g->uuid,
                         vgpu_format_size(left, l, sizeof l), vgpu_format_size(g->mem_total, t, sizeof t),
                         vgpu_format_size(bytes[i], a, sizeof a));
            unlock_dir(fd);
            return -1;
        }
        uuids[m] = g->uuid;
        b[m++] = bytes[i];
    }
    int rc = m ? write_promise(statedir, uuids, b, m, e) : 0;
    unlock_dir(fd);
    return rc;
}
