/* Lending across users (vgpu/lend.h, VGPU_ARB_LEND_SHARE; issue 37 item 4).
 *
 * A borrower (--mem REQUEST:LIMIT) gives way to other jobs' unmet requests in one order (the lower
 * priority first, then the job that borrows more, then the job id: vgpu_lend_gives_first), each
 * only its part (vgpu_lend_target, lib/hook/squeeze.c). The jobs it reads for that are its own
 * user's, whose regions it can open. So the arbiter keeps what every job's vgpu run says at each
 * walk of each of its GPUs, and answers each job with what the other users' jobs there add: their
 * unmet requests, what they borrow, what they demoted (not while a move of theirs is in flight),
 * and what those of them ahead of the asking job in the order borrow.
 *
 * Trust: a job's unmet request counts only up to the promise its connection holds on that GPU
 * (placement, place.c), so a user cannot squeeze others past what placement admitted; its
 * priority only as root's policy grants it (arb_granted_prio). What a job says it borrows or
 * demoted can only put it ahead in the order, or make others give more; a borrower behind one
 * that claims to cover the need and does not gives all the same once the shortfall lasts
 * (squeeze.c, PATIENCE_NS). Entries are bounded per login, with room kept for root, and end with
 * their connection or when not said again within LEND_STALE_NS. Everything here is a few loops
 * over at most ARB_LEND_MAX entries: cheap enough for the scheduling thread. */
#include "daemon/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/lend.h"

#define ARB_LEND_MAX      4096
#define ARB_LEND_PER_USER 256
#define ARB_LEND_ROOT     512            /* of ARB_LEND_MAX, kept for root */
#define LEND_STALE_NS     2000000000ULL  /* a job that said nothing for this long is gone */

struct lend_entry {
    uint64_t client;
    uid_t uid, login;
    uint64_t job;                        /* the job id, as a number (12 hex digits) */
    uint64_t at;                         /* when it was said */
    char uuid[VGPU_REGION_UUID_LEN];
    uint64_t unmet, borrowed, demoted;
    int prio;
    bool moving;
};

struct arb_lend {
    struct lend_entry e[ARB_LEND_MAX];
    size_t n;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void add_sat(uint64_t *sum, uint64_t v)
{
    *sum = *sum + v < *sum ? UINT64_MAX : *sum + v;
}

static void drop_at(struct arb_lend *l, size_t i)
{
    l->e[i] = l->e[--l->n];
}

/* Drops what `client` said of job `job` (all its jobs: job == 0), and every stale entry. */
static void drop(struct arb_lend *l, uint64_t client, uint64_t job, uint64_t now)
{
    for (size_t i = l->n; i-- > 0;)
        if ((l->e[i].client == client && (!job || l->e[i].job == job)) || now - l->e[i].at > LEND_STALE_NS)
            drop_at(l, i);
}

static size_t of_login(const struct arb_lend *l, uid_t login)
{
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        k += l->e[i].login == login;
    return k;
}

static bool room_for(const struct arb_lend *l, uid_t login, size_t more)
{
    if (login == 0)
        return l->n + more <= ARB_LEND_MAX;
    return l->n + more <= ARB_LEND_MAX - ARB_LEND_ROOT && of_login(l, login) + more <= ARB_LEND_PER_USER;
}

static bool uuid_str(const char *u, size_t cap)
{
    const char *end = memchr(u, 0, cap);
    return end && end > u && (strncmp(u, "GPU-", 4) == 0 || strncmp(u, "MIG-", 4) == 0);
}

/* What the other users' jobs on `uuid` add for job `me` (entry of the asking job there). */
static void remote_for(const struct arb_lend *l, const struct lend_entry *me, struct vgpu_lend_remote *out)
{
    memset(out, 0, sizeof *out);
    char mine[24], theirs[24];
    snprintf(mine, sizeof mine, "%012llx", (unsigned long long)me->job);
    struct vgpu_lend_key k_me = { me->prio, me->borrowed, mine };
    for (size_t i = 0; i < l->n; i++) {
        const struct lend_entry *x = &l->e[i];
        if (x->uid == me->uid || strcmp(x->uuid, me->uuid) != 0)
            continue;                    /* the user's own jobs it reads itself */
        add_sat(&out->unmet, x->unmet);
        if (!x->borrowed)
            continue;
        add_sat(&out->borrowed, x->borrowed);
        if (x->moving)
            out->moving = 1;
        else
            add_sat(&out->demoted, x->demoted);
        snprintf(theirs, sizeof theirs, "%012llx", (unsigned long long)x->job);
        struct vgpu_lend_key k = { x->prio, x->borrowed, theirs };
        if (vgpu_lend_gives_first(&k, &k_me))
            add_sat(&out->ahead, x->borrowed);
    }
}

bool arb_lend_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out)
{
    if (q->op != VGPU_ARB_LEND_SHARE) {
        arb_refuse(a, r, ENOSYS, "not a request this arbiter knows");
        return true;
    }
    if (!a->lend && !(a->lend = calloc(1, sizeof *a->lend))) {
        arb_refuse(a, r, ENOMEM, "out of memory");
        return true;
    }
    struct arb_lend *l = a->lend;
    size_t n = q->len / sizeof(struct vgpu_lend_report);
    if (q->len % sizeof(struct vgpu_lend_report) || n == 0 || n > VGPU_REGION_MAX_DEVICES || !q->a[0] ||
        q->a[0] >= 1ULL << 48) {
        arb_refuse(a, r, EINVAL, "a lending report is one to 16 GPUs of one job, with the job's id");
        return true;
    }
    struct vgpu_lend_report rep[VGPU_REGION_MAX_DEVICES];
    memcpy(rep, in, n * sizeof *rep);   /* the payload may be unaligned for these fields */
    for (size_t i = 0; i < n; i++)
        if (!uuid_str(rep[i].uuid, sizeof rep[i].uuid)) {
            arb_refuse(a, r, EINVAL, "a lending report names a GPU that is not a GPU or MIG UUID");
            return true;
        }
    uint64_t now = now_ns();
    drop(l, c->id, q->a[0], now);
    if (!room_for(l, c->login, n)) {
        arb_refuse(a, r, EDQUOT, "the arbiter keeps no more lending figures for this user");
        return true;
    }
    struct vgpu_lend_remote *back = out;
    size_t first = l->n;
    for (size_t i = 0; i < n; i++) {
        struct lend_entry *x = &l->e[l->n++];
        memset(x, 0, sizeof *x);
        x->client = c->id;
        x->uid = c->uid;
        x->login = c->login;
        x->job = q->a[0];
        x->at = now;
        memcpy(x->uuid, rep[i].uuid, sizeof x->uuid);
        /* Unmet only within the promise this connection holds there: placement admitted that. */
        uint64_t promised = arb_place_promised(a, c->id, x->uuid), req = rep[i].request;
        if (req > promised)
            req = promised;
        x->unmet = req > rep[i].held ? req - rep[i].held : 0;
        x->borrowed = rep[i].borrowed;
        x->demoted = rep[i].demoted < rep[i].borrowed ? rep[i].demoted : rep[i].borrowed;
        x->moving = rep[i].moving != 0;
        int p = rep[i].prio > 0 ? VGPU_PRIO_HIGH : rep[i].prio < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
        x->prio = p == VGPU_PRIO_HIGH ? arb_granted_prio(c->uid, p) : p;
    }
    for (size_t i = 0; i < n; i++)
        remote_for(l, &l->e[first + i], &back[i]);
    r->len = (uint32_t)(n * sizeof *back);
    r->rc = 0;
    return true;
}

void arb_lend_client_gone(struct arbiter *a, struct arb_client *c)
{
    if (a->lend)
        drop(a->lend, c->id, 0, now_ns());
}

void arb_lend_free(struct arbiter *a)
{
    free(a->lend);
    a->lend = NULL;
}
