/* Accounting through the arbiter (DESIGN.md decision 12; ops VGPU_ARB_ACCT_* of vgpu/arbiter.h):
 * one root-owned database for every user's jobs (default VGPU_ACCT_DAEMON_DB, vgpu daemon
 * --acct-db). Each record's user is the sender's (SO_PEERCRED), never the payload's, except for
 * root, whose vgpu run --user jobs belong to the user they ran as. A reader gets its own user's
 * records only; root reads all. The database file is 0600 root's: no user opens it directly.
 *
 * This is the scheduling thread's half: it settles what needs the schedules or the connections
 * (who may send a job's record: acct_jobs.c; what the schedules charged: charged.c; a user's
 * rate and size limits) and hands the request to the accounting thread (acct_worker.c), which
 * owns the database and answers. Nothing here waits on the file. */
#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/acct_worker.h"
#include "vgpu/acct.h"
#include "vgpu/log.h"

struct arb_acct {
    char path[PATH_MAX];
    bool started;                          /* the accounting thread runs */
};

static uint64_t clock_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A daemon of a relocated machine-wide directory (VGPU_MACHINE_DIR: tests, a second instance)
 * keeps its records there, not in the machine's own database. */
void arb_acct_default_path(char *buf, size_t len)
{
    const char *md = getenv("VGPU_MACHINE_DIR");
    if (md && *md)
        snprintf(buf, len, "%s/%s", md, VGPU_ACCT_DB_NAME);
    else
        snprintf(buf, len, "%s", VGPU_ACCT_DAEMON_DB);
}

static struct arb_acct *state(struct arbiter *a)
{
    if (!a->acct) {
        a->acct = calloc(1, sizeof *a->acct);
        if (a->acct)
            arb_acct_default_path(a->acct->path, sizeof a->acct->path);
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
    if (arb_acct_worker_start(st->path) < 0) {
        vgpu_warn("cannot start the accounting thread: %s; the arbiter keeps no accounting records", strerror(errno));
        return -1;
    }
    st->started = true;
    return 0;
}

/* ---- a user's rate and size limits ------------------------------------------------------------- */

/* Per user other than root: records and bytes a second, each with a burst, and the requests
 * waiting in the accounting thread's queue (acct_worker.h). An honest user's vgpu run sends one
 * record a job, and a hand-over 8 a request; a flood (1051 records/s, 7.7 MiB/s, issue 35) is
 * refused with EBUSY and its records wait in its user's own store. */
#define RATE_RECORDS_S     50
#define RATE_RECORDS_BURST 400
#define RATE_BYTES_S       (1ULL << 20)
#define RATE_BYTES_BURST   (8ULL << 20)
#define RATE_USERS         256

struct bucket {
    uid_t uid;
    bool set;
    uint64_t at;                   /* the last refill (monotonic) */
    double records, bytes;         /* what may be sent now */
};

static struct bucket buckets[RATE_USERS];

static struct bucket *bucket_of(uid_t uid, uint64_t now)
{
    struct bucket *spare = &buckets[0];
    for (unsigned i = 0; i < RATE_USERS; i++) {
        if (buckets[i].set && buckets[i].uid == uid)
            return &buckets[i];
        if (!buckets[i].set || (spare->set && buckets[i].at < spare->at))
            spare = &buckets[i];
    }
    /* A user not seen for longest is forgotten: it had refilled anyway (or it is the flood's). */
    *spare = (struct bucket){ .uid = uid, .set = true, .at = now, .records = RATE_RECORDS_BURST,
                              .bytes = (double)RATE_BYTES_BURST };
    return spare;
}

static bool within_rate(uid_t uid, uint64_t records, uint64_t bytes)
{
    if (uid == 0)
        return true;
    uint64_t now = clock_of(CLOCK_MONOTONIC);
    struct bucket *b = bucket_of(uid, now);
    double dt = (now - b->at) / 1e9;
    b->at = now;
    b->records = b->records + dt * RATE_RECORDS_S;
    b->bytes = b->bytes + dt * (double)RATE_BYTES_S;
    if (b->records > RATE_RECORDS_BURST)
        b->records = RATE_RECORDS_BURST;
    if (b->bytes > (double)RATE_BYTES_BURST)
        b->bytes = (double)RATE_BYTES_BURST;
    if (b->records < (double)records || b->bytes < (double)bytes)
        return false;
    b->records -= (double)records;
    b->bytes -= (double)bytes;
    return true;
}

/* ---- records ------------------------------------------------------------------------------------ */

/* GPU time of a job that the daemon's schedules charged (charged.c), against what its record says.
 * A job this daemon saw start (acct_jobs.c) ran on its schedules from its first lease: its record
 * stores the charge, whatever the record says (gpu_time_source stays "schedule" when the two agree
 * within the tolerance below, else "arbiter"). For a job that started before the daemon:
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

static void cross_check(struct arbiter *a, struct vgpu_acct_record *rec, bool seen)
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
        if (!g)
            continue;
        bool agrees = !understated(g->gpu_ns, charged) && !understated(charged, g->gpu_ns);
        if (!agrees && (seen || understated(g->gpu_ns, charged))) {
            vgpu_debug("job %s (uid %u): GPU %s charged %.3f s by the schedule (%.3f s reported), its record says "
                       "%.3f s: the charge is stored", rec->id, (unsigned)rec->uid, uuid, charged / 1e9,
                       reported / 1e9, g->gpu_ns / 1e9);
            snprintf(g->gpu_time_source, sizeof g->gpu_time_source, "arbiter");
            g->gpu_ns = charged;
        } else if (seen) {
            g->gpu_ns = charged;
        }
    }
}

/* The job's charges are in its stored record now: nothing more to keep. */
static void forget_charges(struct arbiter *a, const char *id, uid_t uid)
{
    uint64_t key = arb_user_key(arb_job_key(id, VGPU_JOB_ID_LEN), uid);
    for (unsigned i = 0; i < a->ngpus; i++)
        arb_charged_forget(a, i, key);
}


/* What the accounting thread stored since the last look: those jobs' charges and entries go. */
static void collect_stored(struct arbiter *a)
{
    static char ids[64][VGPU_JOB_ID_LEN];
    uid_t uids[64];
    unsigned n;
    while ((n = arb_acct_worker_stored(ids, uids, 64)) > 0)
        for (unsigned i = 0; i < n; i++) {
            forget_charges(a, ids[i], uids[i]);
            arb_acct_job_done(ids[i], uids[i]);
        }
}

/* An end after now is the sender's clock or a forgery: a record that ends in ten years is never
 * pruned. Ends more than a minute ahead are stored as now (end_approximate), and a start after
 * the end as the end. */
#define ARB_ACCT_END_SLACK_NS 60000000000ULL

static void bound_times(struct vgpu_acct_record *rec)
{
    uint64_t now = clock_of(CLOCK_REALTIME);
    if (rec->end_ns > now + ARB_ACCT_END_SLACK_NS) {
        vgpu_debug("job %s (uid %u): its record ends %.0f s from now: stored as ending now", rec->id,
                   (unsigned)rec->uid, (rec->end_ns - now) / 1e9);
        rec->end_ns = now;
        rec->end_approximate = true;
    }
    if (rec->start_ns > rec->end_ns) {
        rec->start_ns = rec->end_ns;
        rec->bounded |= VGPU_ACCT_BOUND_TIME;
    }
}

/* The record's figures cut to what the GPUs of this machine allow (vgpu/acct.h, issue 36 N13):
 * by the memory NVML gives each GPU here, never the sender's word for it. */
static void bound_figures(struct arbiter *a, struct vgpu_acct_record *rec)
{
    uint64_t mem[VGPU_REGION_MAX_DEVICES] = { 0 };
    for (unsigned d = 0; d < rec->gpu_count && d < VGPU_REGION_MAX_DEVICES; d++)
        mem[d] = arb_gpus_mem_total(a, rec->gpu[d].uuid);
    unsigned cut = vgpu_acct_bound(rec, mem);
    if (cut)
        vgpu_debug("job %s (uid %u): its record is bounded (%#x) before it is stored", rec->id, (unsigned)rec->uid,
                   cut);
}

/* Checks and fixes the records (who, when, how much GPU time) into w->buf. */
static bool prepare_records(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                            struct arb_acct_work *w, struct vgpu_arb_rep *r)
{
    static struct vgpu_acct_record rec;
    size_t off = 0;
    w->len = 0;
    for (uint64_t i = 0; i < q->a[0]; i++) {
        size_t used = vgpu_acct_unpack((const char *)in + off, q->len - off, &rec);
        if (!used || !rec.id[0]) {
            arb_refuse(a, r, EINVAL, "not an accounting record");
            return false;
        }
        off += used;
        /* Who: the sender, whatever the record says; root's vgpu run --user jobs are the user's. */
        if (c->uid != 0) {
            rec.uid = c->uid;
            rec.run_as_user = false;
        }
        const char *why = NULL;
        int rc = arb_acct_job_may_record(c, rec.id, &why);
        if (rc < 0) {
            arb_refuse(a, r, -rc, why);
            return false;
        }
        bound_times(&rec);
        cross_check(a, &rec, arb_acct_job_seen(rec.id));
        bound_figures(a, &rec);
        size_t packed = vgpu_acct_pack(&rec, w->buf + w->len, sizeof w->buf - w->len);
        if (!packed) {   /* a GPU the daemon added does not fit: the client sends fewer a request */
            arb_refuse(a, r, E2BIG, "too many accounting records in one request");
            return false;
        }
        w->len += (uint32_t)packed;
    }
    if (off != q->len) {
        arb_refuse(a, r, EINVAL, "not an accounting record");
        return false;
    }
    w->count = q->a[0];
    return true;
}

static void do_start(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r)
{
    char id[VGPU_JOB_ID_LEN];
    if (q->len != sizeof id || !memchr(in, 0, sizeof id) || !((const char *)in)[0]) {
        arb_refuse(a, r, EINVAL, "not a job id");
        return;
    }
    memcpy(id, in, sizeof id);
    const char *why = NULL;
    int rc = arb_acct_job_start(c, id, &why);
    if (rc < 0)
        arb_refuse(a, r, -rc, why);
    else
        arb_place_job_named(a, c, id);   /* the holders file names the job (place.c) */
}

bool arb_acct_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out)
{
    (void)out;
    if (q->a[1] != sizeof(struct vgpu_acct_record)) {
        arb_refuse(a, r, EPROTO, "this arbiter is another vgpu's version (its records differ): use the same vgpu");
        return true;
    }
    /* Totals are sent as the struct is (acct_worker.c): a client of another size of it is another
     * vgpu (an older one sends 0 there), which could not read them. */
    if (q->op == VGPU_ARB_ACCT_TOTALS && q->a[2] != sizeof(struct vgpu_acct_total)) {
        arb_refuse(a, r, EPROTO, "this arbiter is another vgpu's version (its accounting totals differ): use the same "
                                 "vgpu");
        return true;
    }
    collect_stored(a);
    if (q->op == VGPU_ARB_ACCT_START) {
        do_start(a, c, q, in, r);
        return true;
    }
    if (q->op != VGPU_ARB_ACCT_RECORD && q->op != VGPU_ARB_ACCT_QUERY && q->op != VGPU_ARB_ACCT_TOTALS) {
        arb_refuse(a, r, ENOSYS, "no such accounting request");
        return true;
    }
    if (q->op != VGPU_ARB_ACCT_RECORD && q->len != sizeof(struct vgpu_acct_wire_filter)) {
        arb_refuse(a, r, EINVAL, "not an accounting filter");
        return true;
    }
    if (q->op == VGPU_ARB_ACCT_RECORD && !within_rate(c->uid, q->a[0], q->len)) {
        arb_refuse(a, r, EBUSY, "your user sends accounting records faster than the arbiter takes them (50 a "
                                "second, 1 MiB a second): they wait in your own store");
        return true;
    }
    struct arb_acct_work *w = a->acct && a->acct->started ? arb_acct_worker_take(c->uid) : NULL;
    if (!w) {
        arb_refuse(a, r, EBUSY, a->acct && a->acct->started
                                    ? "the arbiter's accounting queue is full for your user: try again"
                                    : "the arbiter keeps no accounting records (its accounting thread is not running)");
        return true;
    }
    w->client = c->id;
    w->op = q->op;
    if (q->op == VGPU_ARB_ACCT_RECORD) {
        if (!prepare_records(a, c, q, in, w, r)) {
            arb_acct_worker_drop(w);
            return true;
        }
    } else {
        memcpy(w->buf, in, q->len);
        w->len = q->len;
        w->count = q->a[0];
    }
    w->fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 3);
    if (w->fd < 0) {
        arb_refuse(a, r, EMFILE, "the arbiter is out of descriptors: try again");
        arb_acct_worker_drop(w);
        return true;
    }
    arb_acct_worker_queue(w);
    return false;   /* the accounting thread answers */
}

void arb_acct_client_gone(struct arbiter *a, struct arb_client *c)
{
    (void)a;
    arb_acct_worker_client_gone(c->id);
    arb_acct_jobs_client_gone(c->id);
}
