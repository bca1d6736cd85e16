/* Accounting through the arbiter (DESIGN.md decision 12; ops VGPU_ARB_ACCT_* of vgpu/arbiter.h):
 * one root-owned database for every user's jobs (default VGPU_ACCT_DAEMON_DB, vgpu daemon
 * --acct-db). Each record's user is the sender's (SO_PEERCRED), never the payload's, except for
 * root, whose vgpu run --user jobs belong to the user they ran as. A reader gets its own user's
 * records only; root reads all. The database file is 0600 root's: no user opens it directly.
 *
 * Writes are inline: one record is ~0.5 ms, and the busy timeout is short (ARB_ACCT_BUSY_MS), so
 * another writer holding the file (root's sqlite3) delays the other clients by that at most; a
 * refused record goes to its user's own store and is handed over at the next read. */
#include "daemon/arbiter.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/acct.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"

#define ARB_ACCT_BUSY_MS 200
#define ARB_ACCT_RETRY_NS 5000000000ULL   /* a database that cannot be opened: tried again after this */

struct arb_acct {
    char path[PATH_MAX];
    struct vgpu_acct_store *s;
    uint64_t failed_at;                    /* the last failed open (monotonic), said once per retry */
    char why[600];
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct arb_acct *state(struct arbiter *a)
{
    if (!a->acct) {
        a->acct = calloc(1, sizeof *a->acct);
        /* A daemon of a relocated machine-wide directory (VGPU_MACHINE_DIR: tests, a second
         * instance) keeps its records there, not in the machine's own database. */
        const char *md = getenv("VGPU_MACHINE_DIR");
        if (a->acct && md && *md)
            snprintf(a->acct->path, sizeof a->acct->path, "%s/%s", md, VGPU_ACCT_DB_NAME);
        else if (a->acct)
            snprintf(a->acct->path, sizeof a->acct->path, "%s", VGPU_ACCT_DAEMON_DB);
    }
    return a->acct;
}

int arb_acct_configure(struct arbiter *a, const char *path)
{
    struct arb_acct *st = state(a);
    if (!st)
        return -1;
    if (path) {
        if (path[0] != '/' || strlen(path) >= sizeof st->path)
            return -1;
        snprintf(st->path, sizeof st->path, "%s", path);
    }
    return 0;
}

/* The database's directory: made (0755) when missing, and it must be ours and closed to others'
 * writes, else someone could swap the file under us. */
static int open_dir(const char *dir, struct vgpu_err *e)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        vgpu_err_set(e, 1, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        vgpu_err_set(e, 1, "cannot open %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        vgpu_err_set(e, 1, "%s is not the daemon's own directory (owner uid %u, mode %04o): make it root's, 0755 or "
                     "0700", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    return fd;
}

static struct vgpu_acct_store *store(struct arbiter *a, struct vgpu_arb_rep *r)
{
    struct arb_acct *st = state(a);
    if (!st) {
        arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
        return NULL;
    }
    if (st->s)
        return st->s;
    uint64_t now = mono_ns();
    if (st->failed_at && now - st->failed_at < ARB_ACCT_RETRY_NS) {
        arb_refuse(a, r, EIO, st->why);
        return NULL;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", st->path);
    char *slash = strrchr(dir, '/');
    const char *file = slash + 1;   /* the path is absolute (arb_acct_configure) */
    *slash = 0;
    struct vgpu_err e = { 0 };
    int fd = open_dir(dir[0] ? dir : "/", &e);
    if (fd >= 0) {
        st->s = vgpu_acct_open(fd, dir[0] ? dir : "/", st->path + (file - dir), true, &e);
        close(fd);
    }
    if (!st->s) {
        st->failed_at = now;
        snprintf(st->why, sizeof st->why, "the arbiter keeps no accounting records now: %s", e.msg);
        vgpu_warn("accounting database %s: %s (records go to each user's own store meanwhile)", st->path, e.msg);
        arb_refuse(a, r, EIO, st->why);
        return NULL;
    }
    st->failed_at = 0;
    vgpu_acct_busy_timeout(st->s, ARB_ACCT_BUSY_MS);
    return st->s;
}

/* GPU time of a job that the daemon's schedules charged (charged.c), against what its record says.
 * A job's `vgpu run` (or any program of its user) writes the record; on a GPU where the arbiter
 * scheduled the job, the record's figure stands when it is at least the charge less one lease
 * (VGPU_SCHED_MAX_LEASE_NS, 100 ms) and 5 %: an honest job's own figure is less than the charge
 * by the lease each process holds when it exits (charged by the daemon, not added to the job's
 * figure: lib/hook/limiter.c, limiter_exit) and by each lease's handover (a lease nobody preempts
 * is charged its whole length, arbiter.c charge(); the kernels fill all but 1.3-2.3 % of it on the
 * simulated GPU). A record below that is understated (written by its user's own program, or its
 * processes under-reported their leases): the charge is stored instead, and gpu_time_source says
 * "arbiter". A GPU the record leaves out is added. Higher figures stand: the job's processes
 * measured time the daemon did not see (before a restart of the daemon), and a user who
 * over-reports charges only their own records. */
#define ARB_CHARGED_TOL_PCT 5

static bool understated(uint64_t rec_ns, uint64_t charged)
{
    return rec_ns + VGPU_SCHED_MAX_LEASE_NS + charged / 100 * ARB_CHARGED_TOL_PCT < charged;
}

static void cross_check(struct arbiter *a, struct vgpu_acct_record *rec)
{
    uint64_t key = arb_user_key(arb_job_key(rec->id, sizeof rec->id), rec->uid);
    for (unsigned i = 0; i < a->ngpus; i++) {
        uint64_t charged, reported;
        if (!arb_charged_get(a, i, key, &charged, &reported))
            continue;
        const char *uuid = a->gpus[i]->uuid;
        struct vgpu_acct_gpu *g = NULL;
        for (unsigned d = 0; d < rec->gpu_count && !g; d++)
            if (!strncmp(rec->gpu[d].uuid, uuid, sizeof rec->gpu[d].uuid))
                g = &rec->gpu[d];
        if (!g && rec->gpu_count < VGPU_REGION_MAX_DEVICES) {
            g = &rec->gpu[rec->gpu_count];
            memset(g, 0, sizeof *g);
            g->ordinal = rec->gpu_count++;
            g->nvml_index = -1;
            snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
            snprintf(g->core_policy, sizeof g->core_policy, "hard");
        }
        if (g && understated(g->gpu_ns, charged)) {
            vgpu_debug("job %s (uid %u): GPU %s charged %.3f s by the schedule (%.3f s reported), its record says "
                       "%.3f s: the charge is stored", rec->id, (unsigned)rec->uid, uuid, charged / 1e9,
                       reported / 1e9, g->gpu_ns / 1e9);
            g->gpu_ns = charged;
            snprintf(g->gpu_time_source, sizeof g->gpu_time_source, "arbiter");
        }
    }
}

/* The job's charges are in its stored record now: nothing more to keep. */
static void forget_charges(struct arbiter *a, const struct vgpu_acct_record *rec)
{
    uint64_t key = arb_user_key(arb_job_key(rec->id, sizeof rec->id), rec->uid);
    for (unsigned i = 0; i < a->ngpus; i++)
        arb_charged_forget(a, i, key);
}

/* A store that failed mid-way (its file removed or damaged) is opened again at the next request. */
static void refuse_store(struct arbiter *a, struct vgpu_arb_rep *r, const struct vgpu_err *e)
{
    arb_refuse(a, r, e->code == VGPU_EXIT_BUSY ? EBUSY : EIO, e->msg);   /* cut to fit the reply */
}

static void do_record(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r)
{
    struct vgpu_acct_store *s = store(a, r);
    if (!s)
        return;
    static struct vgpu_acct_record rec;
    size_t off = 0;
    uint64_t added = 0;
    for (uint64_t i = 0; i < q->a[0]; i++) {
        size_t used = vgpu_acct_unpack((const char *)in + off, q->len - off, &rec);
        if (!used || !rec.id[0]) {
            arb_refuse(a, r, EINVAL, "not an accounting record");
            return;
        }
        off += used;
        /* Who: the sender, whatever the record says; root's vgpu run --user jobs are the user's. */
        if (c->uid != 0) {
            rec.uid = c->uid;
            rec.run_as_user = false;
        }
        struct passwd *pw = getpwuid(rec.uid);
        snprintf(rec.user, sizeof rec.user, "%s", pw ? pw->pw_name : "");
        cross_check(a, &rec);
        struct vgpu_err e = { 0 };
        int rc = vgpu_acct_insert(s, &rec, &e);
        if (rc < 0) {
            refuse_store(a, r, &e);   /* its charges are kept: the record comes again (handed over) */
            return;
        }
        forget_charges(a, &rec);
        added += rc == 0;
    }
    if (off != q->len) {
        arb_refuse(a, r, EINVAL, "not an accounting record");
        return;
    }
    r->rc = (int32_t)added;
}

/* The caller's filter, narrowed to its own user unless it is root. */
static bool filter_of(struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_acct_wire_filter *w, struct vgpu_acct_filter *f)
{
    if (q->len != sizeof *w)
        return false;
    memcpy(w, in, sizeof *w);
    vgpu_acct_filter_unpack(w, f);
    if (c->uid != 0) {
        f->by_uid = true;
        f->uid = c->uid;
    }
    return true;
}

struct page {
    char *out;
    size_t len, cap;
    uint64_t n;
    bool full;
};

static int put_record(const struct vgpu_acct_record *rec, void *arg)
{
    struct page *p = arg;
    size_t used = vgpu_acct_pack(rec, p->out + p->len, p->cap - p->len);
    if (!used) {
        p->full = true;
        return 1;
    }
    p->len += used;
    p->n++;
    return 0;
}

static void do_query(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out)
{
    struct vgpu_acct_wire_filter w;
    struct vgpu_acct_filter f;
    if (!filter_of(c, q, in, &w, &f)) {
        arb_refuse(a, r, EINVAL, "not an accounting filter");
        return;
    }
    struct vgpu_acct_store *s = store(a, r);
    if (!s)
        return;
    /* A page: as many one-GPU records as fit (jobs with more GPUs end it sooner: put_record). */
    unsigned most = VGPU_ARB_MAX_PAYLOAD / (offsetof(struct vgpu_acct_record, gpu) + sizeof(struct vgpu_acct_gpu));
    f.limit = f.limit && f.limit < most ? f.limit : most;
    struct page p = { .out = out, .cap = VGPU_ARB_MAX_PAYLOAD };
    struct vgpu_err e = { 0 };
    if (vgpu_acct_query(s, &f, put_record, &p, &e) < 0) {
        refuse_store(a, r, &e);
        return;
    }
    r->len = (uint32_t)p.len;
    r->v[0] = p.n;
    r->v[1] = p.full || p.n == f.limit;
}

struct totals_page {
    struct vgpu_acct_total *out;
    size_t n, cap;
    uint64_t skip;
    bool full;
};

static int put_total(const struct vgpu_acct_total *t, void *arg)
{
    struct totals_page *p = arg;
    if (p->skip) {
        p->skip--;
        return 0;
    }
    if (p->n == p->cap) {
        p->full = true;
        return 1;
    }
    p->out[p->n++] = *t;
    return 0;
}

static void do_totals(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out)
{
    struct vgpu_acct_wire_filter w;
    struct vgpu_acct_filter f;
    if (!filter_of(c, q, in, &w, &f)) {
        arb_refuse(a, r, EINVAL, "not an accounting filter");
        return;
    }
    struct vgpu_acct_store *s = store(a, r);
    if (!s)
        return;
    struct totals_page p = { .out = out, .cap = VGPU_ARB_MAX_PAYLOAD / sizeof(struct vgpu_acct_total), .skip = q->a[0] };
    struct vgpu_err e = { 0 };
    if (vgpu_acct_totals(s, &f, put_total, &p, &e) < 0) {
        refuse_store(a, r, &e);
        return;
    }
    r->len = (uint32_t)(p.n * sizeof *p.out);
    r->v[0] = p.n;
    r->v[1] = p.full;
}

void arb_acct_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out)
{
    if (q->a[1] != sizeof(struct vgpu_acct_record)) {
        arb_refuse(a, r, EPROTO, "this arbiter is another vgpu's version (its records differ): use the same vgpu");
        return;
    }
    switch (q->op) {
    case VGPU_ARB_ACCT_RECORD: do_record(a, c, q, in, r); break;
    case VGPU_ARB_ACCT_QUERY: do_query(a, c, q, in, r, out); break;
    case VGPU_ARB_ACCT_TOTALS: do_totals(a, c, q, in, r, out); break;
    default: arb_refuse(a, r, ENOSYS, "no such accounting request"); break;
    }
}

void arb_acct_client_gone(struct arbiter *a, struct arb_client *c)
{
    (void)a, (void)c;   /* a connection holds nothing here: every request is whole */
}
