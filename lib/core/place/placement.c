/* Placement of jobs by memory: the choice (a pure function), and the decision loop over the
 * ledger of promises and the --wait queue (ledger.h; see vgpu/placement.h). */
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

#include "ledger.h"

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

/* A group grown from a seed: each step adds a candidate of the seed's model before one of
 * another, then the one nearest to the group so far, then the one the policy prefers, then
 * the lowest position. Returns its farthest closeness. */
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
            bool other = c[j].model != c[seed].model;
            bool best_other = best >= 0 && c[best].model != c[seed].model;
            if (best < 0 || (!other && best_other) ||
                (other == best_other && far < best_far) ||
                (other == best_other && far == best_far && (pol == VGPU_PLACE_BINPACK ? room(&c[j]) < room(&c[best])
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

static bool one_model(const struct vgpu_place_cand *c, const unsigned *g, unsigned count)
{
    for (unsigned k = 1; k < count; k++)
        if (c[g[k]].model != c[g[0]].model)
            return false;
    return true;
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
    bool best_uniform = false;
    unsigned g[VGPU_PLACE_MAX_CANDS];
    for (unsigned seed = 0; seed < n; seed++) {
        if (!ok[seed])
            continue;
        int far = grow(c, n, ok, pol, count, near, seed, g);
        if (far < 0)
            continue;
        uint64_t r = group_room(c, g, count);
        sort_picks(g, count);
        bool uniform = one_model(c, g, count);
        bool better = best < 0 || (uniform && !best_uniform) ||
                      (uniform == best_uniform && far < best) ||
                      (uniform == best_uniform && far == best &&
                       (pol == VGPU_PLACE_BINPACK ? r < best_room : r > best_room));
        if (!better && uniform == best_uniform && far == best && r == best_room)
            for (unsigned k = 0; k < count; k++)
                if (g[k] != pick[k]) {
                    better = g[k] < pick[k];
                    break;
                }
        if (better) {
            best = far;
            best_room = r;
            best_uniform = uniform;
            memcpy(pick, g, count * sizeof *g);
        }
    }
    return best;
}

/* ---- the ledger (ledger.h) ------------------------------------------------------------------ */

uint64_t vgpu_place_promised(const char *statedir, const char *uuid)
{
    struct vgpu_err e;
    struct ledger l;
    uint64_t sum = 0;
    unsigned ahead;
    if (ledger_open(statedir, &l, &e) < 0)
        return 0;
    if (ledger_look(&l, &uuid, NULL, 1, 0, &sum, &ahead, &e) < 0)
        sum = 0;
    ledger_close(&l);
    return sum;
}

void vgpu_place_release(const char *statedir)
{
    ledger_release(statedir);
}

int vgpu_place_adopt(const char *statedir, pid_t from, struct vgpu_err *e)
{
    return ledger_adopt(statedir, from, e);
}

/* ---- candidates ------------------------------------------------------------------------------ */

struct cands {
    unsigned n;
    unsigned pos[VGPU_MAX_GPUS];
    struct vgpu_place_cand c[VGPU_MAX_GPUS];
    uint8_t near[VGPU_MAX_GPUS * VGPU_MAX_GPUS];   /* by candidate, from the topology */
};

/* The candidates and what is promised on each; *ahead: queue entries ahead of ticket. */
static int fill_cands(struct ledger *l, const struct vgpu_gpu_list *list, unsigned long long ticket, struct cands *out,
                      unsigned *ahead, struct vgpu_err *e)
{
    struct vgpu_gpu_sel sel;
    struct vgpu_err se;
    const char *uuids[VGPU_MAX_GPUS];
    uint64_t promised[VGPU_MAX_GPUS], totals[VGPU_MAX_GPUS];
    out->n = 0;
    *ahead = 0;
    if (vgpu_gpus_select_default(list, NULL, &sel, &se) < 0)
        return 0;
    for (unsigned k = 0; k < sel.count; k++) {
        const struct vgpu_gpu *g = &list->gpu[sel.pos[k]];
        if (!g->uuid[0] || !g->mem_total)
            continue;
        out->pos[out->n] = sel.pos[k];
        out->c[out->n].total = totals[out->n] = g->mem_total;
        /* The model: the first candidate of the same name (a MIG device's name has its profile). */
        out->c[out->n].model = out->n;
        for (unsigned i = 0; i < out->n; i++)
            if (!strcmp(list->gpu[out->pos[i]].name, g->name)) {
                out->c[out->n].model = out->c[i].model;
                break;
            }
        uuids[out->n++] = g->uuid;
    }
    if (ledger_look(l, uuids, totals, out->n, ticket, promised, ahead, e) < 0)
        return -1;
    for (unsigned i = 0; i < out->n; i++)
        out->c[i].promised = promised[i];
    return 0;
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

int vgpu_place(const char *statedir, const struct vgpu_gpu_list *list, const struct vgpu_place_req *req,
               unsigned *pos, struct vgpu_err *e)
{
    struct cands *cs = calloc(1, sizeof *cs);
    if (!cs) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    unsigned long long ticket = 0;
    bool ticket_arb = false;
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
        unsigned ahead;
        if (ledger_open(statedir, &l, e) < 0)
            break;
        if (ticket && ticket_arb != l.arb)
            ticket = 0;   /* the daemon came or went: our place was in the other ledger */
        if (fill_cands(&l, list, ticket, cs, &ahead, e) < 0) {
            ledger_close(&l);
            if (l.arb && req->wait)
                continue;   /* the daemon went away while we wait: go on with what is there now */
            break;
        }
        if (!cs->n) {
            ledger_close(&l);
            vgpu_err_set(e, VGPU_EXIT_NO_GPU, "placement: no GPU reports its memory, so none can be chosen; use --gpu");
            break;
        }
        /* More GPUs than the machine has: say so, not that the memory (maybe none asked) does
         * not fit. */
        if (cs->n < count) {
            ledger_close(&l);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--gpus %u: only %u GPU%s (or MIG instance%s) on this machine; ask for "
                         "at most %u", count, cs->n, cs->n > 1 ? "s" : "", cs->n > 1 ? "s" : "", cs->n);
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
            int w = ledger_promise(&l, u, b, count, e);
            if (w == 1) {
                ledger_close(&l);
                continue;   /* another placement came first: look again */
            }
            if (w == 0) {
                ledger_leave_queue(statedir, &l, ticket);
                ticket = 0;
            }
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
            ticket = ledger_take_ticket(&l, req->want, count);
            ticket_arb = l.arb;
            ledger_close(&l);
            continue;   /* look again with our place in the queue */
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
        ledger_leave_queue(statedir, NULL, ticket);
    free(cs);
    return rc;
}

int vgpu_place_reserve(const char *statedir, const struct vgpu_gpu_list *list, const unsigned *pos,
                       const uint64_t *bytes, unsigned n, bool overcommit, struct vgpu_err *e)
{
    for (;;) {
        struct ledger l;
        if (ledger_open(statedir, &l, e) < 0)
            return -1;
        const char *uuids[VGPU_MAX_GPUS];
        uint64_t b[VGPU_MAX_GPUS], promised[VGPU_MAX_GPUS];
        const struct vgpu_gpu *gs[VGPU_MAX_GPUS];
        unsigned m = 0, ahead;
        for (unsigned i = 0; i < n && m < VGPU_MAX_GPUS; i++) {
            const struct vgpu_gpu *g = &list->gpu[pos[i]];
            if (!bytes[i] || !g->uuid[0])
                continue;
            gs[m] = g;
            uuids[m] = g->uuid;
            b[m++] = bytes[i];
        }
        if (m && ledger_look(&l, uuids, NULL, m, 0, promised, &ahead, e) < 0) {
            ledger_close(&l);
            return -1;
        }
        for (unsigned i = 0; i < m; i++) {
            const struct vgpu_gpu *g = gs[i];
            if (!overcommit && g->mem_total && promised[i] + b[i] > g->mem_total) {
                char a[32], lf[32], t[32];
                uint64_t left = promised[i] >= g->mem_total ? 0 : g->mem_total - promised[i];
                vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY,
                             "GPU %u (%s) has %s of its %s not promised to running jobs, less than the %s asked; "
                             "wait for a job to end, or give --overcommit", g->index, g->uuid,
                             vgpu_format_size(left, lf, sizeof lf), vgpu_format_size(g->mem_total, t, sizeof t),
                             vgpu_format_size(b[i], a, sizeof a));
                ledger_close(&l);
                return -1;
            }
        }
        int rc = m ? ledger_promise(&l, uuids, b, m, e) : 0;
        ledger_close(&l);
        if (rc != 1)
            return rc;
    }
}
