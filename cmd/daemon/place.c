/* Placement and the job count through the arbiter (vgpu/arbiter.h, VGPU_ARB_PL_* and VGPU_ARB_JC_*).
 *
 * What every user's `vgpu run` must agree on before a job starts: the memory promised to running
 * jobs on each GPU, the --wait queue, and how many jobs each GPU runs (root's max-jobs-per-gpu).
 * Kept here, in the daemon's memory, rather than in files of a directory every user may write:
 * there one empty file named for pid 1 stopped every placement, and one flock on the lock file
 * stopped them all for as long as it was held. Here each entry belongs to the connection that
 * made it, and ends with it (a killed `vgpu run` holds nothing), and a user's entries are bounded.
 *
 * The choice itself stays with the client (lib/core/place/placement.c): it looks (the promised
 * bytes of its candidate GPUs and the ledger's version), decides, and records its promise with the
 * version it looked at; when anything changed in between, it is told to look again. So two
 * placements never both take the last room, and the daemon never waits for a client. */
#include "daemon/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/jobcount.h"

enum entry_kind { PROMISE, COUNTED };

struct entry {
    uint64_t client;            /* the connection that holds it */
    uid_t uid;
    enum entry_kind kind;
    char uuid[96];
    uint64_t bytes;             /* PROMISE */
};

struct ticket {
    uint64_t client;
    uid_t uid;
    unsigned long long no;
};

struct arb_place {
    struct entry *e;
    size_t n, cap;
    struct ticket *t;
    size_t nt, tcap;
    unsigned long long next_ticket;
    uint64_t version;           /* moves with every change of the promises or the queue */
};

static struct arb_place *state(struct arbiter *a)
{
    if (!a->place) {
        a->place = calloc(1, sizeof *a->place);
        if (a->place)
            a->place->version = 1;
    }
    return a->place;
}

/* The GPUs of a payload: n entries, each a NUL-terminated UUID of a GPU or MIG device. */
static bool gpus_of(const struct vgpu_arb_req *q, const void *in, const struct vgpu_arb_gpu_bytes **g, size_t *n)
{
    if (q->len == 0 || q->len % sizeof **g)
        return false;
    *g = in;
    *n = q->len / sizeof **g;
    for (size_t i = 0; i < *n; i++) {
        size_t l = strnlen((*g)[i].uuid, sizeof (*g)[i].uuid);
        if (l == 0 || l == sizeof (*g)[i].uuid || (strncmp((*g)[i].uuid, "GPU-", 4) && strncmp((*g)[i].uuid, "MIG-", 4)))
            return false;
    }
    return true;
}

static struct entry *add_entry(struct arb_place *p)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct entry *e = realloc(p->e, cap * sizeof *e);
        if (!e)
            return NULL;
        p->e = e;
        p->cap = cap;
    }
    return &p->e[p->n++];
}

static unsigned user_entries(const struct arb_place *p, uid_t uid)
{
    unsigned k = 0;
    for (size_t i = 0; i < p->n; i++)
        k += p->e[i].uid == uid;
    return k;
}

/* Records the client's entries of `kind` on GPUs g[0..n) (bytes: a promise's), within its user's
 * quota; false with the refusal in r. */
static bool add_entries(struct arbiter *a, struct arb_place *p, const struct arb_client *c,
                        const struct vgpu_arb_gpu_bytes *g, size_t n, enum entry_kind kind, struct vgpu_arb_rep *r)
{
    if (c->uid != 0 && user_entries(p, c->uid) + n > VGPU_ARB_USER_PROMISES) {
        arb_refuse(a, r, EDQUOT, "your user already holds the most placement entries a user may hold (256)");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        struct entry *e = add_entry(p);
        if (!e) {
            arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
            return false;
        }
        *e = (struct entry){ .client = c->id, .uid = c->uid, .kind = kind, .bytes = kind == PROMISE ? g[i].bytes : 0 };
        memcpy(e->uuid, g[i].uuid, sizeof e->uuid);
    }
    p->version++;
    r->rc = 0;
    return true;
}

static uint64_t promised_on(const struct arb_place *p, const char *uuid)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->e[i].kind == PROMISE && !strcmp(p->e[i].uuid, uuid))
            sum = sum + p->e[i].bytes < sum ? UINT64_MAX : sum + p->e[i].bytes;
    return sum;
}

static unsigned counted_on(const struct arb_place *p, const char *uuid)
{
    unsigned k = 0;
    for (size_t i = 0; i < p->n; i++)
        k += p->e[i].kind == COUNTED && !strcmp(p->e[i].uuid, uuid);
    return k;
}

static void drop_entries(struct arb_place *p, uint64_t client, enum entry_kind kind)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->e[i].client != client || p->e[i].kind != kind)
            p->e[k++] = p->e[i];
    if (k != p->n)
        p->version++;
    p->n = k;
}

static struct ticket *ticket_of(struct arb_place *p, uint64_t client)
{
    for (size_t i = 0; i < p->nt; i++)
        if (p->t[i].client == client)
            return &p->t[i];
    return NULL;
}

static void unqueue(struct arb_place *p, uint64_t client)
{
    struct ticket *t = ticket_of(p, client);
    if (!t)
        return;
    *t = p->t[--p->nt];
    p->version++;
}

/* The waiters ahead of ticket `no` of user `uid` (0: a newcomer, behind all): first come, first
 * served among one user's own jobs. Another user's waiter is never ahead: one that does not fit
 * would otherwise hold back jobs that do (and anyone could stop every placement by waiting for
 * memory that is never free, as one empty file named for pid 1 did in the shared queue
 * directory); one that fits takes its place at its next look, and the version check of
 * promise() keeps two jobs from taking the same room. A large job may so wait while another
 * user's smaller ones pass (said in vgpu-run(1)). */
static unsigned ahead_of(const struct arb_place *p, uid_t uid, unsigned long long no)
{
    unsigned k = 0;
    for (size_t i = 0; i < p->nt; i++)
        k += p->t[i].uid == uid && (no == 0 || p->t[i].no < no);
    return k;
}

static void look(struct arb_place *p, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                 struct vgpu_arb_rep *r, void *out)
{
    const struct vgpu_arb_gpu_bytes *g;
    size_t n;
    if (!gpus_of(q, in, &g, &n)) {
        r->rc = -EINVAL;
        return;
    }
    struct vgpu_arb_gpu_bytes *o = out;
    for (size_t i = 0; i < n; i++) {
        o[i] = g[i];
        o[i].bytes = promised_on(p, g[i].uuid);
    }
    r->len = (uint32_t)(n * sizeof *o);
    /* Only the caller's own ticket counts as a place: another number is "none". */
    struct ticket *t = ticket_of(p, c->id);
    r->v[0] = p->version;
    r->v[1] = ahead_of(p, c->uid, t && t->no == q->a[0] ? t->no : 0);
    r->rc = 0;
}

static void promise(struct arbiter *a, struct arb_place *p, struct arb_client *c, const struct vgpu_arb_req *q,
                    const void *in, struct vgpu_arb_rep *r)
{
    const struct vgpu_arb_gpu_bytes *g;
    size_t n;
    if (!gpus_of(q, in, &g, &n)) {
        arb_refuse(a, r, EINVAL, "not a list of GPUs");
        return;
    }
    /* a[1]: a running job's promise again, to a restarted daemon that never saw it: recorded
     * whatever the ledger (the job holds that memory already; the same as --overcommit). */
    if (q->a[0] != p->version && !q->a[1]) {
        r->rc = -EAGAIN;
        return;
    }
    if (add_entries(a, p, c, g, n, PROMISE, r))
        unqueue(p, c->id);
}

static void take_ticket(struct arbiter *a, struct arb_place *p, struct arb_client *c, const struct vgpu_arb_req *q,
                        struct vgpu_arb_rep *r)
{
    struct ticket *t = ticket_of(p, c->id);
    if (!t) {
        if (p->nt == p->tcap) {
            size_t cap = p->tcap ? p->tcap * 2 : 16;
            struct ticket *m = realloc(p->t, cap * sizeof *m);
            if (!m) {
                arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
                return;
            }
            p->t = m;
            p->tcap = cap;
        }
        t = &p->t[p->nt++];
        *t = (struct ticket){ .client = c->id, .uid = c->uid, .no = ++p->next_ticket };
        p->version++;
    }
    r->rc = 0;
    r->v[0] = t->no;
}

/* Everything connections of process `pid` (the caller's user's; root's may be anyone's) hold
 * becomes the caller's: `vgpu run --detach`'s supervisor takes over from the `vgpu run` that is
 * about to exit. */
static void adopt(struct arb_place *p, struct arb_client *c, const struct vgpu_arb_req *q, struct vgpu_arb_rep *r,
                  const struct arb_client *all, size_t nall)
{
    unsigned moved = 0;
    for (size_t k = 0; k < nall; k++) {
        const struct arb_client *o = &all[k];
        if (o->fd < 0 || o->id == c->id || o->pid != (pid_t)q->a[0] || (c->uid != 0 && o->uid != c->uid))
            continue;
        for (size_t i = 0; i < p->n; i++)
            if (p->e[i].client == o->id) {
                p->e[i].client = c->id;
                moved++;
            }
        struct ticket *t = ticket_of(p, o->id);
        if (t && !ticket_of(p, c->id)) {
            t->client = c->id;
            moved++;
        }
    }
    p->version += moved != 0;
    r->rc = (int32_t)moved;
}

static void count_enter(struct arbiter *a, struct arb_place *p, struct arb_client *c, const struct vgpu_arb_req *q,
                        const void *in, struct vgpu_arb_rep *r)
{
    const struct vgpu_arb_gpu_bytes *g;
    size_t n;
    if (!gpus_of(q, in, &g, &n)) {
        arb_refuse(a, r, EINVAL, "not a list of GPUs");
        return;
    }
    /* Root's policy, read by the daemon itself: a client's word about it means nothing. */
    unsigned policy = 0, max = q->a[0] <= VGPU_MAX_JOBS_LIMIT ? (unsigned)q->a[0] : 0;
    struct vgpu_err e = { 0 };
    if (vgpu_jobcount_policy(&policy, &e) < 0) {
        arb_refuse(a, r, EIO, e.msg);
        return;
    }
    unsigned limit = max && policy ? (max < policy ? max : policy) : (max ? max : policy);
    if (q->a[1])
        limit = 0;   /* a running job counted again, by a restarted daemon: it runs already */
    for (size_t i = 0; limit && i < n; i++) {
        unsigned k = counted_on(p, g[i].uuid);
        if (k >= limit) {
            r->rc = -EBUSY;
            r->v[0] = i;
            r->v[1] = (uint64_t)k | (uint64_t)limit << 32;
            return;
        }
    }
    drop_entries(p, c->id, COUNTED);   /* counted once per connection */
    add_entries(a, p, c, g, n, COUNTED, r);
}

void arb_place_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out)
{
    struct arb_place *p = state(a);
    if (!p) {
        arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
        return;
    }
    const struct vgpu_arb_gpu_bytes *g;
    size_t n;
    switch (q->op) {
    case VGPU_ARB_PL_LOOK: look(p, c, q, in, r, out); break;
    case VGPU_ARB_PL_PROMISE: promise(a, p, c, q, in, r); break;
    case VGPU_ARB_PL_TICKET: take_ticket(a, p, c, q, r); break;
    case VGPU_ARB_PL_UNQUEUE: unqueue(p, c->id); break;
    case VGPU_ARB_PL_RELEASE: drop_entries(p, c->id, PROMISE); break;
    case VGPU_ARB_PL_ADOPT: adopt(p, c, q, r, a->clients, a->nclients ? *a->nclients : 0); break;
    case VGPU_ARB_JC_ENTER: count_enter(a, p, c, q, in, r); break;
    case VGPU_ARB_JC_LEAVE: drop_entries(p, c->id, COUNTED); break;
    case VGPU_ARB_JC_COUNT:
        if (!gpus_of(q, in, &g, &n) || n != 1)
            arb_refuse(a, r, EINVAL, "not one GPU");
        else
            r->rc = (int32_t)counted_on(p, g[0].uuid);
        break;
    case VGPU_ARB_PL_GPUS: arb_gpus_answer(a, r, out); break;
    default: arb_refuse(a, r, ENOSYS, "not a request this arbiter knows"); break;
    }
}

void arb_place_client_gone(struct arbiter *a, struct arb_client *c)
{
    struct arb_place *p = a->place;
    if (!p)
        return;
    drop_entries(p, c->id, PROMISE);
    drop_entries(p, c->id, COUNTED);
    unqueue(p, c->id);
}

void arb_place_free(struct arbiter *a)
{
    if (!a->place)
        return;
    free(a->place->e);
    free(a->place->t);
    free(a->place);
    a->place = NULL;
}
