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
 * placements never both take the last room, and the daemon never waits for a client.
 *
 * A restart: the running jobs' vgpu run make their promises and places in the count again to the
 * new daemon at their next walk (every 250 ms: ledger_arb_keep in lib/core/place/ledger_arb.c,
 * vgpu_jobcount_keep), and a placement asked before that was admitted against an empty ledger
 * (with 102 GiB promised on a 140 GiB H200, `vgpu run --mem 60G` ran right after a restart, 10
 * times of 10). So the daemon names the processes it serves in a file beside its socket
 * (holders.c), and one that starts and finds some of them alive answers everyone else's look,
 * promise and count "try again" (-EAGAIN; vgpu_arb_call_patient asks again every 10 ms) until
 * each has come back or ended, VGPU_ARB_RESTART_MS after its start at most (a vgpu run stopped
 * with SIGSTOP cannot hold every placement for ever). A fresh daemon, or one whose holders are
 * gone, never waits. */
#include "daemon/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "vgpu/jobcount.h"
#include "vgpu/proc.h"

enum entry_kind { PROMISE, COUNTED };

struct entry {
    uint64_t client;            /* the connection that holds it */
    uid_t uid;
    enum entry_kind kind;
    char uuid[96];
    uint64_t bytes;             /* PROMISE */
};

/* A connection that holds entries, as the holders file names it. */
struct held {
    uint64_t client;
    struct arb_holder h;        /* h.kinds: what it holds now (0: nothing, dropped at the next write) */
    unsigned written;           /* h.kinds as the file says it */
    bool renamed;               /* its job named since the file was written */
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
    /* Whom the entries are of (one record a connection), and the holders file (arb_place_start). */
    struct held *held;
    size_t nheld, heldcap;
    int dir;                    /* the daemon's directory (-1: no file kept) */
    char *shown;                /* the file's path, for messages */
    bool pending_changed;       /* the list below changed since the file was written */
    int write_err;              /* the error of the last write, said once */
    uint64_t written_ns;        /* when the file was last written */
    /* The holders of the daemon before this one that still live and have not come back. */
    struct arb_holder *pending;
    size_t npending, listed, back, ended;
    uint64_t start_ns, checked_ns;
};

#define MS_NS 1000000ULL
#define PENDING_CHECK_NS (10 * MS_NS)   /* how often the pending holders' liveness is read again */
#define SHRINK_NS        (100 * MS_NS)  /* a holder that holds nothing any more leaves the file this late */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct arb_place *state(struct arbiter *a)
{
    if (!a->place) {
        a->place = calloc(1, sizeof *a->place);
        if (a->place) {
            a->place->version = 1;
            a->place->dir = -1;
        }
    }
    return a->place;
}

/* ---- whom the entries are of ------------------------------------------------------------------- */

static unsigned kind_bit(enum entry_kind kind)
{
    return kind == PROMISE ? ARB_HELD_PROMISE : ARB_HELD_COUNT;
}

static struct held *held_of(struct arb_place *p, uint64_t client)
{
    for (size_t i = 0; i < p->nheld; i++)
        if (p->held[i].client == client)
            return &p->held[i];
    return NULL;
}

/* Client c's record (made when it has none; NULL: no memory, and then the file does not name it). */
static struct held *held_get(struct arb_place *p, const struct arb_client *c)
{
    struct held *h = held_of(p, c->id);
    if (h)
        return h;
    if (p->nheld == p->heldcap) {
        size_t cap = p->heldcap ? p->heldcap * 2 : 16;
        struct held *m = realloc(p->held, cap * sizeof *m);
        if (!m)
            return NULL;
        p->held = m;
        p->heldcap = cap;
    }
    h = &p->held[p->nheld++];
    *h = (struct held){ .client = c->id, .h = { .pid = c->pid, .uid = c->uid } };
    h->h.start = c->pid > 0 ? vgpu_proc_start_time(c->pid) : 0;
    return h;
}

/* ---- the holders of the daemon before this one ------------------------------------------------ */

static bool alive(const struct arb_holder *h)
{
    return h->pid > 0 && vgpu_proc_start_time(h->pid) == h->start;
}

/* "pid 123 of job 4f2a..., pid 456 and 2 more" */
static void describe(const struct arb_holder *h, size_t n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        bool last = i == 4 && n > 5;
        int k = last ? snprintf(buf + used, len - used, " and %zu more", n - i)
                     : snprintf(buf + used, len - used, "%spid %d%s%s", i ? ", " : "", (int)h[i].pid,
                                h[i].job[0] ? " of job " : "", h[i].job);
        if (k < 0)
            break;
        used += (size_t)k;
        if (used >= len)
            used = len - 1;
        if (last)
            break;
    }
}

/* The wait is over: every holder came back or ended, or the time is up (then who did not is said). */
static void pending_over(struct arb_place *p, uint64_t now)
{
    unsigned ms = (unsigned)((now - p->start_ns) / MS_NS);
    if (p->npending) {
        char who[512];
        describe(p->pending, p->npending, who, sizeof who);
        fprintf(stderr, "vgpu daemon: stopped waiting after %u ms for %zu of the %zu running jobs of the daemon "
                        "before this one to make their promises again (%s): placements go on without them\n", ms,
                p->npending, p->listed, who);
    } else {
        fprintf(stderr, "vgpu daemon: the %zu running job%s of the daemon before this one promised again after %u ms "
                        "(%zu came back, %zu had ended): placements go on\n", p->listed, p->listed == 1 ? "" : "s", ms,
                p->back, p->ended);
    }
    free(p->pending);
    p->pending = NULL;
    p->npending = 0;
    p->pending_changed = true;   /* those left out are not this daemon's to name */
}

static void pending_remove(struct arb_place *p, size_t i)
{
    p->pending[i] = p->pending[--p->npending];
    p->pending_changed = true;
}

/* The time is up (ARB_RESTART_MS after the start), whether or not all came back. */
static bool pending_expired(struct arb_place *p, uint64_t now)
{
    if (!p->npending || now - p->start_ns < VGPU_ARB_RESTART_MS * MS_NS)
        return false;
    pending_over(p, now);
    return true;
}

/* Whether client c's look, promise or count (kind ARB_HELD_*) must wait for the holders of the
 * daemon before this one: then r says "try again". A holder itself never waits. */
static bool must_wait(struct arbiter *a, struct arb_place *p, const struct arb_client *c, unsigned kind,
                      struct vgpu_arb_rep *r)
{
    if (!p->npending)
        return false;
    uint64_t now = now_ns();
    if (pending_expired(p, now))
        return false;
    if (now - p->checked_ns >= PENDING_CHECK_NS) {
        p->checked_ns = now;
        for (size_t i = p->npending; i-- > 0;)
            if (!alive(&p->pending[i])) {
                pending_remove(p, i);
                p->ended++;
            }
        if (!p->npending) {
            pending_over(p, now);
            return false;
        }
    }
    bool waits = false;
    for (size_t i = 0; i < p->npending; i++) {
        if (c->pid > 0 && p->pending[i].pid == c->pid && alive(&p->pending[i]))
            return false;   /* one of them: it comes back by these requests */
        waits |= (p->pending[i].kinds & kind) != 0;
    }
    if (!waits)
        return false;
    arb_refuse(a, r, EAGAIN, "the arbiter has just started and waits for the running jobs it served before to make "
                             "their promises again (1 s at most): try again");
    return true;
}

/* Client c holds entries of `kind` now (record h): when its process is a holder of the daemon
 * before this one, that much of it is back, and its job's id is the one it had. */
static void holder_back(struct arb_place *p, struct held *h, unsigned kind)
{
    for (size_t i = 0; i < p->npending; i++) {
        struct arb_holder *o = &p->pending[i];
        if (o->pid != h->h.pid || o->start != h->h.start)
            continue;
        if (!h->h.job[0] && o->job[0]) {
            memcpy(h->h.job, o->job, sizeof o->job);
            h->renamed = true;
        }
        o->kinds &= ~kind;
        if (!o->kinds) {
            pending_remove(p, i);
            p->back++;
            if (!p->npending)
                pending_over(p, now_ns());
        }
        return;
    }
}

/* ---- the holders file ------------------------------------------------------------------------- */

/* Writes the holders file when the holders changed: this daemon's (one a connection's process),
 * and those of the daemon before it still awaited (so a daemon that follows this one soon waits
 * for them too). A holder that gains something is written before the reply (a daemon killed
 * after it admitted a job knows the job); one that holds less, or nothing, at the next request
 * SHRINK_NS after the last write, or with the next gain: a daemon that follows meanwhile at most
 * waits for a process that promises nothing again, and one that leaves and enters the count over
 * and over costs no write (4000 holders: 0.2 ms a write on tmpfs). `force`: write now. */
static void holders_sync(struct arb_place *p, bool force)
{
    uint64_t now = now_ns();
    if (p->dir >= 0)
        pending_expired(p, now);
    bool grew = force, shrank = p->pending_changed;
    size_t named = 0;
    for (size_t i = 0; i < p->nheld; i++) {
        const struct held *h = &p->held[i];
        grew |= (h->h.kinds & ~h->written) != 0 || h->renamed;
        shrank |= (h->written & ~h->h.kinds) != 0;
        named += h->h.kinds && h->h.pid > 0 && h->h.start;   /* one this daemon cannot see in its /proc: not named */
    }
    if (!grew && !(shrank && now - p->written_ns >= SHRINK_NS)) {
        if (!shrank || p->dir < 0) {   /* nothing written is stale: records of nothing go */
            size_t k = 0;
            for (size_t i = 0; i < p->nheld; i++)
                if (p->held[i].h.kinds || (p->dir >= 0 && p->held[i].written))
                    p->held[k++] = p->held[i];
            p->nheld = k;
        }
        return;
    }
    int err = 0;
    if (p->dir >= 0) {
        struct arb_holder *all = named + p->npending ? malloc((named + p->npending) * sizeof *all) : NULL;
        size_t k = 0;
        if (!all && named + p->npending) {
            err = ENOMEM;
        } else {
            for (size_t i = 0; i < p->nheld; i++)
                if (p->held[i].h.kinds && p->held[i].h.pid > 0 && p->held[i].h.start)
                    all[k++] = p->held[i].h;
            if (p->npending)
                memcpy(all + k, p->pending, p->npending * sizeof *all);
            err = -arb_holders_write(p->dir, all, k + p->npending);
        }
        free(all);
        if (err && err != p->write_err)
            vgpu_warn("cannot write %s: %s; a daemon started after this one may admit placements before the running "
                      "jobs have made their promises again", p->shown ? p->shown : ARB_HOLDERS_FILE, strerror(err));
        p->write_err = err;
        if (err)
            return;   /* written again at the next change, with this one */
        p->written_ns = now;
    }
    p->pending_changed = false;
    size_t k = 0;
    for (size_t i = 0; i < p->nheld; i++) {
        struct held *h = &p->held[i];
        h->written = h->h.kinds;
        h->renamed = false;
        if (h->h.kinds)
            p->held[k++] = *h;
    }
    p->nheld = k;
}

void arb_place_start(struct arbiter *a, int dir, const char *shown)
{
    struct arb_place *p = state(a);
    if (!p)
        return;
    p->dir = dir;
    size_t sl = strlen(shown) + sizeof "/" ARB_HOLDERS_FILE;
    p->shown = malloc(sl);
    if (p->shown)
        snprintf(p->shown, sl, "%s/%s", shown, ARB_HOLDERS_FILE);
    /* A version a client looked at with the daemon before this one is not this one's. */
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        p->version = v | 1;
    else
        p->version = now_ns() | 1;
    p->start_ns = p->checked_ns = now_ns();
    struct arb_holder *h;
    size_t n;
    if (arb_holders_read(dir, p->shown ? p->shown : ARB_HOLDERS_FILE, &h, &n) == 0) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (alive(&h[i]))
                h[k++] = h[i];
        if (k) {
            p->pending = h;
            p->npending = p->listed = k;
        } else {
            free(h);
        }
    }
    if (p->npending) {
        char who[512];
        describe(p->pending, p->npending, who, sizeof who);
        fprintf(stderr, "vgpu daemon: %zu running job%s held promises or places in the job count with the daemon "
                        "before this one (%s): new placements wait until %s made them again, %u ms at most\n",
                p->npending, p->npending == 1 ? "" : "s", who, p->npending == 1 ? "it has" : "they have",
                VGPU_ARB_RESTART_MS);
    }
    holders_sync(p, true);   /* this daemon's own list from now on (it replaces one not trusted) */
}

void arb_place_job_named(struct arbiter *a, const struct arb_client *c, const char *id)
{
    struct arb_place *p = a->place;
    struct held *h = p ? held_of(p, c->id) : NULL;
    if (!h || !strncmp(h->h.job, id, sizeof h->h.job))
        return;
    snprintf(h->h.job, sizeof h->h.job, "%s", id);
    h->renamed = true;
    holders_sync(p, false);
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
    /* Named in the holders file before the reply (a record first: without one, nothing is added). */
    struct held *h = held_get(p, c);
    if (!h) {
        arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        struct entry *e = add_entry(p);
        if (!e) {
            arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
            h->h.kinds |= i ? kind_bit(kind) : 0;
            return false;
        }
        *e = (struct entry){ .client = c->id, .uid = c->uid, .kind = kind, .bytes = kind == PROMISE ? g[i].bytes : 0 };
        memcpy(e->uuid, g[i].uuid, sizeof e->uuid);
    }
    p->version++;
    h->h.kinds |= kind_bit(kind);
    holder_back(p, h, kind_bit(kind));
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

uint64_t arb_place_promised(struct arbiter *a, uint64_t client, const char *uuid)
{
    const struct arb_place *p = a->place;
    uint64_t sum = 0;
    for (size_t i = 0; p && i < p->n; i++)
        if (p->e[i].kind == PROMISE && p->e[i].client == client && !strcmp(p->e[i].uuid, uuid))
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
    if (k != p->n) {
        p->version++;
        struct held *h = held_of(p, client);
        if (h)
            h->h.kinds &= ~kind_bit(kind);   /* all of that kind go together */
    }
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
        /* The holders file names the adopter from now on, with the job it took over. */
        struct held *from = held_of(p, o->id);
        if (from && from->h.kinds) {
            struct arb_holder was = from->h;
            from->h.kinds = 0;
            struct held *to = held_get(p, c);   /* (may move the records: `from` is not used again) */
            if (to) {
                to->h.kinds |= was.kinds;
                if (!to->h.job[0] && was.job[0]) {
                    memcpy(to->h.job, was.job, sizeof to->h.job);
                    to->renamed = true;
                }
            }
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

bool arb_place_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out)
{
    struct arb_place *p = state(a);
    if (!p) {
        arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
        return true;
    }
    const struct vgpu_arb_gpu_bytes *g;
    size_t n;
    switch (q->op) {
    case VGPU_ARB_PL_LOOK:
        if (!must_wait(a, p, c, ARB_HELD_PROMISE, r))
            look(p, c, q, in, r, out);
        break;
    case VGPU_ARB_PL_PROMISE:
        /* a[1]: a running job's promise again, which is what the others wait for */
        if (q->a[1] || !must_wait(a, p, c, ARB_HELD_PROMISE, r))
            promise(a, p, c, q, in, r);
        break;
    case VGPU_ARB_PL_TICKET: take_ticket(a, p, c, q, r); break;
    case VGPU_ARB_PL_UNQUEUE: unqueue(p, c->id); break;
    case VGPU_ARB_PL_RELEASE: drop_entries(p, c->id, PROMISE); break;
    case VGPU_ARB_PL_ADOPT: adopt(p, c, q, r, a->clients, a->nclients ? *a->nclients : 0); break;
    case VGPU_ARB_JC_ENTER:
        if (q->a[1] || !must_wait(a, p, c, ARB_HELD_COUNT, r))
            count_enter(a, p, c, q, in, r);
        break;
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
    holders_sync(p, false);
    return true;
}

void arb_place_client_gone(struct arbiter *a, struct arb_client *c)
{
    struct arb_place *p = a->place;
    if (!p)
        return;
    drop_entries(p, c->id, PROMISE);
    drop_entries(p, c->id, COUNTED);
    unqueue(p, c->id);
    holders_sync(p, false);
}

void arb_place_free(struct arbiter *a)
{
    if (!a->place)
        return;
    free(a->place->e);
    free(a->place->t);
    free(a->place->held);
    free(a->place->pending);
    free(a->place->shown);
    free(a->place);
    a->place = NULL;
}
