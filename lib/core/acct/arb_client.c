/* Accounting through the arbiter, the client's side (vgpu/acct.h; the daemon's is
 * cmd/daemon/acct.c): vgpu run sends its job's record, readers (vgpu acct, metrics, top) ask for
 * records and totals a page at a time, and what the user's own store holds (written while no
 * daemon answered, or when it refused) is handed to the daemon first and then removed here, so
 * both are shown, each job once (the daemon keeps a job id once). */
#include "vgpu/acct.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"

#define LAYOUT ((uint64_t)sizeof(struct vgpu_acct_record))

static int refused(int64_t rc, const struct vgpu_arb_rep *r, const char *what, struct vgpu_err *e)
{
    vgpu_err_set(e, rc == -EBUSY ? VGPU_EXIT_BUSY : VGPU_EXIT_FAIL, "the arbiter (vgpu daemon) refused %s: %s", what,
                 r->msg[0] ? r->msg : strerror((int)-rc));
    return -1;
}

int vgpu_acct_arb_insert(const struct vgpu_acct_record *rec, struct vgpu_err *e)
{
    static char buf[VGPU_ARB_MAX_PAYLOAD];
    size_t len = vgpu_acct_pack(rec, buf, sizeof buf);
    uint64_t a[4] = { 1, LAYOUT };
    struct vgpu_arb_rep r;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, &r);
    if (rc == -EPIPE)
        return 1;
    return rc < 0 ? refused(rc, &r, "the job's accounting record", e) : 0;
}

void vgpu_acct_arb_start(const char *id)
{
    char buf[VGPU_JOB_ID_LEN] = { 0 };
    snprintf(buf, sizeof buf, "%s", id);
    uint64_t a[4] = { 0, LAYOUT };
    struct vgpu_arb_rep r;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_START, a, buf, sizeof buf, NULL, 0, NULL, &r);
    if (rc < 0 && rc != -EPIPE)
        vgpu_debug("job %s: the arbiter did not take its start (%s): its record is taken as any of your user's",
                   id, r.msg[0] ? r.msg : strerror((int)-rc));
}

/* ---- handing the own store over ------------------------------------------------------------- */

#define BATCH 8    /* records per request: ~0.5 ms each in the daemon, which serves one at a time */

struct batch {
    char buf[VGPU_ARB_MAX_PAYLOAD];
    size_t len;
    char ids[BATCH][VGPU_JOB_ID_LEN];
    unsigned n;
};

static int add_to_batch(const struct vgpu_acct_record *rec, void *arg)
{
    struct batch *b = arg;
    size_t used = vgpu_acct_pack(rec, b->buf + b->len, sizeof b->buf - b->len);
    if (!used || b->n == BATCH)
        return 1;
    b->len += used;
    snprintf(b->ids[b->n++], VGPU_JOB_ID_LEN, "%s", rec->id);
    return 0;
}

/* 0 handed over (or nothing to hand), 1 no daemon answers, -1 refused (e). */
static int hand_over(struct vgpu_err *e)
{
    struct vgpu_err oe = { 0 };
    struct vgpu_acct_store *s = vgpu_acct_open_user(false, &oe);
    if (!s) {
        if (oe.code == VGPU_EXIT_NOT_FOUND)
            return vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) < 0 ? 1 : 0;
        *e = oe;
        return -1;
    }
    /* Records handed over are removed here, which a read-only file system refuses: they stay,
     * and are handed over once it is writable again (the reader shows the own store meanwhile). */
    if (vgpu_acct_is_read_only(s)) {
        vgpu_acct_close(s);
        vgpu_debug("accounting: your own store is on a read-only file system: its records are handed to the "
                   "arbiter once it is writable");
        return vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) < 0 ? 1 : 0;
    }
    struct batch *b = malloc(sizeof *b);
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    f.limit = BATCH;
    int ret = 0;
    unsigned moved = 0;
    while (b) {
        b->len = 0;
        b->n = 0;
        if (vgpu_acct_query(s, &f, add_to_batch, b, e) < 0) {
            ret = -1;
            break;
        }
        if (b->n == 0) {   /* nothing (left) in the own store: is a daemon there? */
            if (!moved && vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) < 0)
                ret = 1;
            break;
        }
        uint64_t a[4] = { b->n, LAYOUT };
        struct vgpu_arb_rep r;
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, b->buf, b->len, NULL, 0, NULL, &r);
        if (rc < 0) {
            ret = rc == -EPIPE ? 1 : refused(rc, &r, "the records of your own store", e);
            break;
        }
        /* The daemon has them now (committed before it answered): remove ours. */
        if (vgpu_acct_delete(s, b->ids, b->n, e) < 0) {
            ret = -1;
            break;
        }
        moved += b->n;
    }
    if (!b) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        ret = -1;
    }
    if (moved)
        vgpu_debug("accounting: %u record%s of your own store handed to the arbiter", moved, moved == 1 ? "" : "s");
    free(b);
    vgpu_acct_close(s);
    return ret;
}

/* ---- reading ------------------------------------------------------------------------------------ */

/* The daemon's records a page at a time: 1 no daemon, 0 done, -1 refused (e). */
static int arb_query(const struct vgpu_acct_filter *f0, int (*fn)(const struct vgpu_acct_record *, void *), void *arg,
                     struct vgpu_err *e)
{
    struct vgpu_acct_filter f = *f0;
    static char page[VGPU_ARB_MAX_PAYLOAD];
    static struct vgpu_acct_wire_filter w;
    static struct vgpu_acct_record rec;
    char after[VGPU_JOB_ID_LEN];
    bool first = true;
    for (;;) {
        if (vgpu_acct_filter_pack(&f, &w) < 0) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "a filter of vgpu acct is longer than %d characters: nothing can match "
                         "it", VGPU_ACCT_WIRE_TEXT - 1);
            return -1;
        }
        uint64_t a[4] = { 0, LAYOUT };
        size_t got = 0;
        struct vgpu_arb_rep r;
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_QUERY, a, &w, sizeof w, page, sizeof page, &got, &r);
        if (rc == -EPIPE && first)
            return 1;
        if (rc < 0)
            return rc == -EPIPE ? (vgpu_err_set(e, VGPU_EXIT_STATE, "the arbiter (vgpu daemon) went away while "
                                                "sending records; try again"), -1)
                                : refused(rc, &r, "to show the accounting records", e);
        first = false;
        size_t off = 0;
        for (uint64_t i = 0; i < r.v[0]; i++) {
            size_t used = vgpu_acct_unpack(page + off, got - off, &rec);
            if (!used) {
                vgpu_err_set(e, VGPU_EXIT_FAIL, "the arbiter sent a damaged accounting record");
                return -1;
            }
            off += used;
            if (fn(&rec, arg))
                return 0;
        }
        if (!r.v[1] || !r.v[0])
            return 0;
        snprintf(after, sizeof after, "%s", rec.id);
        f.after_id = after;
        f.after_end_ns = rec.end_ns;
    }
}

static int arb_totals(const struct vgpu_acct_filter *f, int (*fn)(const struct vgpu_acct_total *, void *), void *arg,
                      struct vgpu_err *e)
{
    static struct vgpu_acct_total page[VGPU_ARB_MAX_PAYLOAD / sizeof(struct vgpu_acct_total)];
    static struct vgpu_acct_wire_filter w;
    if (vgpu_acct_filter_pack(f, &w) < 0) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "a filter of vgpu acct is longer than %d characters: nothing can match it",
                     VGPU_ACCT_WIRE_TEXT - 1);
        return -1;
    }
    for (uint64_t skip = 0;;) {
        /* a[2]: the size of a total here (the daemon refuses another vgpu's: its totals differ) */
        uint64_t a[4] = { skip, LAYOUT, sizeof page[0] };
        size_t got = 0;
        struct vgpu_arb_rep r;
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_TOTALS, a, &w, sizeof w, page, sizeof page, &got, &r);
        if (rc == -EPIPE && skip == 0)
            return 1;
        if (rc < 0)
            return refused(rc, &r, "to add up the accounting records", e);
        if (r.v[0] > sizeof page / sizeof page[0] || got != r.v[0] * sizeof page[0]) {
            /* an older daemon ignores a[2] and sends its own size of total */
            vgpu_err_set(e, VGPU_EXIT_FAIL, "the arbiter sent accounting totals this vgpu cannot read (%zu bytes for "
                         "%llu of %zu bytes: damaged, or another vgpu's version, which must be the same)", got,
                         (unsigned long long)r.v[0], sizeof page[0]);
            return -1;
        }
        for (uint64_t i = 0; i < r.v[0]; i++) {
            page[i].user[sizeof page[i].user - 1] = 0;
            page[i].uuid[sizeof page[i].uuid - 1] = 0;
            if (fn(&page[i], arg))
                return 0;
        }
        if (!r.v[1] || !r.v[0])
            return 0;
        skip += r.v[0];
    }
}

/* Through the daemon when one answers: 1 when none does (read the own store), else its answer.
 * A refused hand-over is said, and the own store is read instead (the daemon's records are not
 * shown then, and the hand-over is tried again next time). */
static int through_daemon(struct vgpu_err *e)
{
    struct vgpu_err he = { 0 };
    int rc = hand_over(&he);
    if (rc < 0) {
        vgpu_warn("your own accounting store (written while no arbiter answered) could not be handed to the "
                  "arbiter, so only it is shown: %s", he.msg);
        return 1;
    }
    (void)e;
    return rc;
}

static int own_store(bool totals, const struct vgpu_acct_filter *f,
                     int (*rfn)(const struct vgpu_acct_record *, void *),
                     int (*tfn)(const struct vgpu_acct_total *, void *), void *arg, struct vgpu_err *e)
{
    struct vgpu_acct_store *s = vgpu_acct_open_user(false, e);
    if (!s)
        return e->code == VGPU_EXIT_NOT_FOUND ? 0 : -1;   /* no database yet: no job ended here */
    int rc = totals ? vgpu_acct_totals(s, f, tfn, arg, e) : vgpu_acct_query(s, f, rfn, arg, e);
    vgpu_acct_close(s);
    return rc;
}

int vgpu_acct_read_query(const struct vgpu_acct_filter *f, int (*fn)(const struct vgpu_acct_record *rec, void *arg),
                         void *arg, struct vgpu_err *e)
{
    int rc = through_daemon(e);
    if (rc == 0 && (rc = arb_query(f, fn, arg, e)) != 1)
        return rc;
    return own_store(false, f, fn, NULL, arg, e);
}

int vgpu_acct_read_totals(const struct vgpu_acct_filter *f, int (*fn)(const struct vgpu_acct_total *t, void *arg),
                          void *arg, struct vgpu_err *e)
{
    int rc = through_daemon(e);
    if (rc == 0 && (rc = arb_totals(f, fn, arg, e)) != 1)
        return rc;
    return own_store(true, f, NULL, fn, arg, e);
}

/* vgpu run, once the job's command has started (record.c): the own store's records to the
 * daemon. 0 handed over (or none), 1 no daemon answers, -1 refused (e). */
int vgpu_acct_hand_over(struct vgpu_err *e)
{
    return hand_over(e);
}
