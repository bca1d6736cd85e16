/* timeline.c: how queued GPU work runs on the simulated device (tests/fakegpu/README.md, "Time").
 *
 * Work is not booked at submission: a launch queues an item (fs_item) on its place's timeline
 * (the whole GPU, or one MIG compute instance), and the timeline is simulated lazily, up to the
 * present, by whoever looks (a launch, a query, a synchronize, an NVML reader). The model:
 *  - a stream runs its items in order; the legacy default stream waits for the context's
 *    blocking streams and they for it (FS_W_BARRIER / FS_W_BLOCKING);
 *  - the streams of one context share the device: the heads of its streams run together, each
 *    kernel asking for `width` thousandths of the SMs; while the widths add up to at most the
 *    whole device they all run at full speed, beyond that each slows by the same factor (the
 *    device's throughput is bounded by one);
 *  - contexts time-slice: one group holds the device for a slice (fs_slice_ns of the setting its
 *    process saw when it attached); when the slice ends and another group has work, the next
 *    group in key order takes over; a group that runs out of work gives the device up at once;
 *  - MPS clients are one group (one server context): each client gets at most its active
 *    thread percentage of the SMs, and all of them together at most the device;
 *  - a marker (an event record, a host function) is done as soon as its stream reaches it, in
 *    whatever slice.
 *  - a collective kernel (FS_W_COLL), once its group has the device, spins (busy, no progress)
 *    until its peers on every GPU have started; while one is pending anywhere, all timelines
 *    with work move in step (advance_all).
 *  - a copy (FS_W_COPY: a managed-memory prefetch) runs on the copy engines: once its stream
 *    reaches it, it takes its dur_ns in real time whatever group holds the SMs, uses no SMs and
 *    is no busy time (NVML's utilisation counts kernels); it holds its stream meanwhile.
 * Busy time is accounted per process as the simulation passes: the time during which it had a
 * kernel running (what NVML's utilisation samples measure). Arrivals happen at the real time of
 * submission (the timeline is advanced to then first), so the result does not depend on who
 * looks when: deterministic for a given arrival sequence. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_internal.h"

#define MPS_GROUP (1ULL << 63)

static unsigned tl_index(int gi, int ci)
{
    return gi < 0 ? 0 : 1 + (unsigned)gi * FS_MAX_CI + (unsigned)(ci < 0 ? 0 : ci);
}

uint64_t fs_slice_ns(unsigned timeslice)
{
    static const uint64_t ms[4] = { 2, 1, 4, 8 };
    return ms[timeslice & 3] * 1000000ULL;
}

static uint64_t group_of(const struct fs_gpu *g, const struct fs_item *it)
{
    if (g->procs[it->proc].mps_pct)
        return MPS_GROUP;
    return ((uint64_t)(unsigned)(it->proc + 1) << 32) | it->ctx;
}

static uint64_t group_slice(const struct fs_gpu *g, uint64_t group)
{
    if (group == MPS_GROUP)
        return fs_slice_ns(g->timeslice);
    return fs_slice_ns(g->procs[(int)(group >> 32) - 1].timeslice);
}

/* Appends [a, b) of busy time of the process to the GPU's interval ring (merging with one of
 * the latest intervals of the same process when they touch). */
static void add_interval(struct fs_gpu *g, pid_t pid, int gi, uint64_t a, uint64_t b)
{
    for (unsigned k = 1; k <= 4; k++) {
        struct fs_interval *iv = &g->intervals[(g->interval_head + FS_MAX_INTERVALS - k) % FS_MAX_INTERVALS];
        if (iv->end_ns != 0 && iv->pid == pid && iv->gi == gi && iv->end_ns == a) {
            iv->end_ns = b;
            return;
        }
    }
    struct fs_interval *iv = &g->intervals[g->interval_head];
    g->interval_head = (g->interval_head + 1) % FS_MAX_INTERVALS;
    iv->pid = pid;
    iv->gi = gi;
    iv->start_ns = a;
    iv->end_ns = b;
}

/* Adds [a, b) of the GPU's busy time to the sample periods it falls in. */
static void add_period_busy(struct fs_gpu *g, uint64_t a, uint64_t b)
{
    uint64_t p = (uint64_t)fs_state()->sample_period_ms * 1000000ULL;
    if (!p)
        return;
    while (a < b) {
        uint64_t n = a / p, end = (n + 1) * p < b ? (n + 1) * p : b;
        unsigned k = (unsigned)(n % FS_UTIL_PERIODS);
        if (g->util_period[k] != n) {
            g->util_period[k] = n;
            g->util_busy_ns[k] = 0;
        }
        g->util_busy_ns[k] += end - a;
        a = end;
    }
}

uint64_t fs_busy_in_period(unsigned gpu, uint64_t n)
{
    const struct fs_gpu *g = &fs_state()->gpu[gpu];
    unsigned k = (unsigned)(n % FS_UTIL_PERIODS);
    return g->util_period[k] == n ? g->util_busy_ns[k] : 0;
}

struct sim {
    struct fs_gpu *g;
    unsigned tl;
    struct fs_item *it;          /* copies of the timeline's pending items, in seq order */
    uint16_t *slot;              /* their ring slots */
    unsigned n;
    uint64_t t, slice_end, cur;
    bool commit;                 /* account busy time (the real advance, not a projection) */
    /* scratch, n entries each */
    bool *run;
    bool *spin;                  /* a collective waiting for its peers: occupies, no progress */
    double *rate;
    /* the running group's processes this step (busy accounting) */
    int procs[FS_MAX_PROCS];
    unsigned np;
};

/* ---- collectives ----
 * A collective kernel, once its group has the device, counts as started (its fs_coll entry,
 * shared by all GPUs in the state); it then spins, busy, until every rank has started, and only
 * then runs its own duration. Starts are recorded only by the real advance (commit), which
 * moves every timeline with pending work in step while a collective is pending anywhere
 * (advance_all), so a start on one GPU is seen at its simulated time on the others. */
static struct fs_coll *coll_find(uint64_t id, uint64_t seq, bool create)
{
    struct fs_state *st = fs_state();
    struct fs_coll *free_e = NULL, *oldest = NULL;
    for (unsigned k = 0; k < FS_MAX_COLL; k++) {
        struct fs_coll *c = &st->coll[k];
        if (!c->nranks) {
            if (!free_e)
                free_e = c;
            continue;
        }
        if (c->id == id && c->seq == seq)
            return c;
        if (!oldest || c->last_start_ns < oldest->last_start_ns)
            oldest = c;
    }
    if (!create)
        return NULL;
    /* Full: the oldest entry belongs to ranks that died mid-collective (they never finish). */
    struct fs_coll *c = free_e ? free_e : oldest;
    *c = (struct fs_coll){ .id = id, .seq = seq };
    return c;
}

static bool coll_released(const struct fs_item *it)
{
    const struct fs_coll *c = coll_find(it->coll_id, it->coll_seq, false);
    return c && c->started >= c->nranks;
}

static void coll_start(struct sim *s, unsigned i)
{
    struct fs_item *it = &s->it[i];
    struct fs_coll *c = coll_find(it->coll_id, it->coll_seq, true);
    c->nranks = it->coll_n;
    c->started++;
    if (s->t > c->last_start_ns)
        c->last_start_ns = s->t;
    it->flags |= FS_W_CSTART;
}

static void coll_finish(const struct fs_item *it)
{
    struct fs_coll *c = coll_find(it->coll_id, it->coll_seq, false);
    if (c && ++c->finished >= c->nranks)
        c->nranks = 0;
}

static bool coll_pending_any(void)
{
    struct fs_state *st = fs_state();
    for (unsigned gpu = 0; gpu < st->ngpus; gpu++) {
        const struct fs_gpu *g = &st->gpu[gpu];
        for (unsigned k = 0; k < g->npend; k++)
            if (g->items[g->pend[k]].flags & FS_W_COLL)
                return true;
    }
    return false;
}

/* Marks which items may run now (the head of their stream, ordering rules satisfied). */
static void runnable(struct sim *s)
{
    struct key { int proc; uint32_t ctx, stream; } *seen = malloc(sizeof *seen * (s->n + 1));
    struct ckey { int proc; uint32_t ctx; bool blocking, barrier; } *ctxs = malloc(sizeof *ctxs * (s->n + 1));
    unsigned ns = 0, nc = 0;
    for (unsigned i = 0; i < s->n; i++) {
        const struct fs_item *it = &s->it[i];
        s->run[i] = false;
        if (it->flags & FS_W_DONE)
            continue;
        bool head = true;
        for (unsigned k = 0; k < ns && head; k++)
            head = !(seen[k].proc == it->proc && seen[k].ctx == it->ctx && seen[k].stream == it->stream);
        if (head)
            seen[ns++] = (struct key){ it->proc, it->ctx, it->stream };
        unsigned c;
        for (c = 0; c < nc; c++)
            if (ctxs[c].proc == it->proc && ctxs[c].ctx == it->ctx)
                break;
        if (c == nc)
            ctxs[nc++] = (struct ckey){ it->proc, it->ctx, false, false };
        s->run[i] = head && !((it->flags & FS_W_BARRIER) && ctxs[c].blocking) &&
                    !((it->flags & FS_W_BLOCKING) && ctxs[c].barrier);
        if (it->flags & FS_W_BLOCKING)
            ctxs[c].blocking = true;
        if (it->flags & FS_W_BARRIER)
            ctxs[c].barrier = true;
    }
    free(seen);
    free(ctxs);
}

static void finish(struct sim *s, unsigned i)
{
    s->it[i].flags |= FS_W_DONE;
    s->it[i].left_ns = 0;
    s->it[i].end_ns = s->t;
    if ((s->it[i].flags & FS_W_COLL) && s->commit)
        coll_finish(&s->it[i]);
}

/* Plans the step that starts at s->t: finishes the markers its streams reach, picks the group
 * holding the device, and sets the rates of its kernels. Returns the step's length: until the
 * first kernel would end or the slice ends; UINT64_MAX with *idle when nothing can run.
 * *stalled: nothing can make progress by itself (only collectives waiting for peers, and no
 * other group to take the device). Idempotent at a given s->t. */
static uint64_t plan(struct sim *s, bool *idle, bool *stalled)
{
    struct fs_gpu *g = s->g;
    *idle = *stalled = false;
    for (;;) {
        runnable(s);
        /* Markers: done as soon as their stream reaches them. */
        bool marker = false;
        for (unsigned i = 0; i < s->n; i++)
            if (s->run[i] && s->it[i].width == 0) {
                finish(s, i);
                marker = true;
            }
        if (!marker)
            break;
    }
    s->np = 0;
    for (unsigned i = 0; i < s->n; i++) {
        s->rate[i] = 0;
        s->spin[i] = false;
    }
    /* Copies: on the copy engines, at their own pace, beside whatever holds the SMs. */
    uint64_t copy_dt = UINT64_MAX;
    for (unsigned i = 0; i < s->n; i++)
        if (s->run[i] && (s->it[i].flags & FS_W_COPY)) {
            s->rate[i] = 1.0;
            if (s->it[i].left_ns < copy_dt)
                copy_dt = s->it[i].left_ns ? s->it[i].left_ns : 1;
            s->run[i] = false;   /* not a kernel: no group, no SMs (the rate stays) */
        }
    /* The groups with work that can run. */
    uint64_t first = UINT64_MAX, after = UINT64_MAX;
    bool cur_has = false;
    for (unsigned i = 0; i < s->n; i++) {
        if (!s->run[i])
            continue;
        uint64_t gk = group_of(g, &s->it[i]);
        if (gk == s->cur)
            cur_has = true;
        if (gk < first)
            first = gk;
        if (gk > s->cur && gk < after)
            after = gk;
    }
    if (first == UINT64_MAX) {
        *idle = copy_dt == UINT64_MAX;
        return copy_dt;          /* only copies run, or nothing is queued */
    }
    bool others = false;
    for (unsigned i = 0; i < s->n && !others; i++)
        others = s->run[i] && group_of(g, &s->it[i]) != s->cur;
    if (!cur_has || (others && s->t >= s->slice_end)) {
        s->cur = after != UINT64_MAX ? after : first;
        s->slice_end = s->t + group_slice(g, s->cur);
    } else if (s->t >= s->slice_end) {
        s->slice_end = s->t + group_slice(g, s->cur);   /* alone: the slice renews */
    }
    /* Rates of the running group's kernels: per process, its widths share at most its MPS
     * percentage of the SMs; all processes together at most the device. */
    double total = 0;
    double sumw[FS_MAX_PROCS], allot[FS_MAX_PROCS];
    unsigned np = 0;
    for (unsigned i = 0; i < s->n; i++) {
        if (!s->run[i] || group_of(g, &s->it[i]) != s->cur)
            continue;
        unsigned k;
        for (k = 0; k < np && s->procs[k] != s->it[i].proc; k++)
            ;
        if (k == np) {
            s->procs[np] = s->it[i].proc;
            sumw[np] = 0;
            np++;
        }
        sumw[k] += s->it[i].width;
    }
    s->np = np;
    for (unsigned k = 0; k < np; k++) {
        unsigned pct = g->procs[s->procs[k]].mps_pct;
        double cap = pct ? pct * 10.0 : 1000.0;
        allot[k] = sumw[k] < cap ? sumw[k] : cap;
        total += allot[k];
    }
    double scale = total > 1000.0 ? 1000.0 / total : 1.0;
    uint64_t dt = UINT64_MAX;
    bool progress = false;
    for (unsigned i = 0; i < s->n; i++) {
        if (!s->run[i] || group_of(g, &s->it[i]) != s->cur)
            continue;
        struct fs_item *it = &s->it[i];
        if (it->flags & FS_W_COLL) {
            if (!(it->flags & FS_W_CSTART) && s->commit)
                coll_start(s, i);
            if (!coll_released(it)) {
                s->spin[i] = true;   /* occupies its SMs and the slice, moves nothing */
                continue;
            }
        }
        unsigned k;
        for (k = 0; s->procs[k] != it->proc; k++)
            ;
        s->rate[i] = allot[k] / sumw[k] * scale;
        progress = true;
        double need = (double)it->left_ns / s->rate[i];
        uint64_t d = (uint64_t)need;
        if ((double)d < need)
            d++;
        if (d < dt)
            dt = d;
    }
    *stalled = !progress && !others && copy_dt == UINT64_MAX;
    /* Every slice boundary is a step, alone or not: a group that arrives meanwhile gets
     * the device at the next boundary of the running slice, not at once. */
    if (s->slice_end > s->t && s->slice_end - s->t < dt)
        dt = s->slice_end - s->t;
    return copy_dt < dt ? copy_dt : dt;
}

/* Runs the planned step of dt: kernels progress at their rates, the running group's
 * processes are busy (accounted when committing). */
static void apply(struct sim *s, uint64_t dt)
{
    uint64_t t0 = s->t;
    s->t += dt;
    for (unsigned i = 0; i < s->n; i++) {
        if (s->rate[i] <= 0)
            continue;
        double need = (double)s->it[i].left_ns / s->rate[i];
        uint64_t done = (uint64_t)(s->rate[i] * (double)dt + 0.5);
        if (need <= (double)dt || done >= s->it[i].left_ns)
            finish(s, i);
        else
            s->it[i].left_ns -= done;
    }
    if (s->commit && s->np) {
        s->g->busy_ns += dt;   /* the GPU was busy (MPS clients at once count once) */
        add_period_busy(s->g, t0, s->t);
    }
    if (s->commit)
        for (unsigned k = 0; k < s->np; k++) {
            struct fs_proc *p = &s->g->procs[s->procs[k]];
            p->busy_ns += dt;
            add_interval(s->g, p->pid, p->gi, t0, s->t);
        }
    s->np = 0;
    for (unsigned i = 0; i < s->n; i++)
        s->rate[i] = 0;
}

static bool target_done(const struct sim *s, uint64_t target)
{
    for (unsigned i = 0; i < s->n; i++)
        if (s->it[i].seq == target && (s->it[i].flags & FS_W_DONE))
            return true;
    return false;
}

/* Runs the simulation until `to`, or until the item of seq `target` is done (0: none).
 * Returns true when the target is done; false also when a projection stalls on a collective
 * whose peers have not started (only the real advance can see them start). */
static bool simulate(struct sim *s, uint64_t to, uint64_t target)
{
    for (;;) {
        if (target && target_done(s, target))
            return true;
        bool idle, stalled;
        uint64_t dt = plan(s, &idle, &stalled);
        if (target && target_done(s, target))
            return true;
        if (idle) {
            if (!target && to > s->t)
                s->t = to;
            return false;
        }
        if (target && stalled)
            return false;
        if (!target && s->t + dt > to) {
            if (to <= s->t)
                return false;
            dt = to - s->t;
        }
        if (dt == 0)
            dt = 1;
        apply(s, dt);
    }
}

/* Loads the timeline's pending items into a simulation (false: nothing pending). */
static bool sim_load(struct sim *s, struct fs_gpu *g, unsigned tl, bool commit)
{
    memset(s, 0, sizeof *s);
    s->g = g;
    s->tl = tl;
    s->commit = commit;
    s->t = g->tl[tl].t_adv;
    s->slice_end = g->tl[tl].slice_end;
    s->cur = g->tl[tl].cur;
    unsigned n = 0;
    for (unsigned k = 0; k < g->npend; k++)
        if (g->items[g->pend[k]].tl == tl)
            n++;
    if (!n)
        return false;
    s->it = malloc(sizeof *s->it * n);
    s->slot = malloc(sizeof *s->slot * n);
    s->run = malloc(sizeof *s->run * n);
    s->spin = malloc(sizeof *s->spin * n);
    s->rate = calloc(n, sizeof *s->rate);
    if (!s->it || !s->slot || !s->run || !s->spin || !s->rate) {
        free(s->it); free(s->slot); free(s->run); free(s->spin); free(s->rate);
        return false;
    }
    for (unsigned k = 0; k < g->npend; k++)
        if (g->items[g->pend[k]].tl == tl) {
            s->slot[s->n] = g->pend[k];
            s->it[s->n++] = g->items[g->pend[k]];
        }
    return true;
}

static void sim_free(struct sim *s)
{
    free(s->it);
    free(s->slot);
    free(s->run);
    free(s->spin);
    free(s->rate);
}

/* Removes done (or freed) items from the pending list, keeping its order. */
static void compact(struct fs_gpu *g)
{
    unsigned w = 0;
    for (unsigned k = 0; k < g->npend; k++) {
        const struct fs_item *it = &g->items[g->pend[k]];
        if (it->seq && !(it->flags & FS_W_DONE))
            g->pend[w++] = g->pend[k];
    }
    g->npend = w;
}

/* Writes a committed simulation back into its timeline, now simulated up to `to`. */
static void sim_store(struct sim *s, uint64_t to)
{
    struct fs_tl *T = &s->g->tl[s->tl];
    for (unsigned i = 0; i < s->n; i++)
        s->g->items[s->slot[i]] = s->it[i];
    T->t_adv = to;
    T->slice_end = s->slice_end;
    T->cur = s->cur;
}

/* Simulates one timeline up to `to` and writes the result back. Caller holds the lock. */
static void advance_tl(struct fs_gpu *g, unsigned tl, uint64_t to)
{
    struct fs_tl *T = &g->tl[tl];
    if (to <= T->t_adv)
        return;
    struct sim s;
    if (!sim_load(&s, g, tl, true)) {
        T->t_adv = to;
        return;
    }
    simulate(&s, to, 0);
    sim_store(&s, to);
    sim_free(&s);
    compact(g);
}

/* While a collective is pending anywhere, every timeline with pending work (of every GPU)
 * moves in step up to `to`: the earliest ones first, each step no longer than the shortest any
 * of them plans, so a rank's start is recorded at its simulated time before any other GPU
 * simulates past it. Caller holds the lock. */
static void advance_all(uint64_t to)
{
    struct fs_state *st = fs_state();
    unsigned max = 0;
    for (unsigned gpu = 0; gpu < st->ngpus; gpu++)
        max += FS_MAX_TL;
    struct sim *sims = calloc(max ? max : 1, sizeof *sims);
    uint64_t *want = calloc(max ? max : 1, sizeof *want);
    if (!sims || !want) {
        free(sims);
        free(want);
        return;
    }
    unsigned n = 0;
    for (unsigned gpu = 0; gpu < st->ngpus; gpu++) {
        struct fs_gpu *g = &st->gpu[gpu];
        bool seen[FS_MAX_TL] = { false };
        for (unsigned k = 0; k < g->npend; k++)
            seen[g->items[g->pend[k]].tl] = true;
        for (unsigned tl = 0; tl < FS_MAX_TL; tl++) {
            if (g->tl[tl].t_adv >= to)
                continue;
            if (!seen[tl] || !sim_load(&sims[n], g, tl, true))
                g->tl[tl].t_adv = to;
            else
                n++;
        }
    }
    for (;;) {
        uint64_t now = UINT64_MAX, next = to;
        for (unsigned k = 0; k < n; k++)
            if (sims[k].t < now)
                now = sims[k].t;
        if (now >= to)
            break;
        for (unsigned k = 0; k < n; k++)
            if (sims[k].t > now && sims[k].t < next)
                next = sims[k].t;
        /* Twice: a start recorded by one timeline releases a peer planned before it. */
        uint64_t dt = next - now;
        for (int pass = 0; pass < 2; pass++)
            for (unsigned k = 0; k < n; k++) {
                if (sims[k].t != now)
                    continue;
                bool idle, stalled;
                want[k] = plan(&sims[k], &idle, &stalled);
            }
        for (unsigned k = 0; k < n; k++)
            if (sims[k].t == now && want[k] < dt)
                dt = want[k];
        if (dt == 0)
            dt = 1;
        for (unsigned k = 0; k < n; k++)
            if (sims[k].t == now)
                apply(&sims[k], dt);
    }
    for (unsigned k = 0; k < n; k++) {
        sim_store(&sims[k], to);
        sim_free(&sims[k]);
    }
    for (unsigned gpu = 0; gpu < st->ngpus; gpu++)
        compact(&st->gpu[gpu]);
    free(sims);
    free(want);
}

static void advance(struct fs_gpu *g, unsigned tl, uint64_t to)
{
    if (coll_pending_any())
        advance_all(to);
    else
        advance_tl(g, tl, to);
}

void fs_advance_gpu(unsigned gpu)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    uint64_t now = fs_now_ns();
    if (coll_pending_any()) {
        advance_all(now);
        return;
    }
    bool seen[FS_MAX_TL] = { false };
    for (unsigned k = 0; k < g->npend; k++)
        seen[g->items[g->pend[k]].tl] = true;
    for (unsigned tl = 0; tl < FS_MAX_TL; tl++)
        if (seen[tl])
            advance_tl(g, tl, now);
}

void fs_drop_work(unsigned gpu, unsigned idx)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    bool any = false;
    for (unsigned k = 0; k < g->npend; k++)
        any |= g->items[g->pend[k]].proc == (int)idx;
    if (!any)
        return;
    fs_advance_gpu(gpu);     /* what ran until now stays accounted */
    for (unsigned k = 0; k < g->npend; k++) {
        struct fs_item *it = &g->items[g->pend[k]];
        if (it->proc == (int)idx)
            it->seq = 0;
    }
    compact(g);
}

bool fs_submit(unsigned gpu, int gi, int ci, const struct fs_work *w, struct fs_pos *out)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    bool ok = false;
    fs_lock();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, true);
    unsigned tl = tl_index(gi, ci);
    if (p && g->npend < FS_RING) {
        advance(g, tl, fs_now_ns());   /* the arrival happens now */
        for (unsigned k = 0; k < FS_RING; k++) {
            unsigned slot = (g->ring_head + k) % FS_RING;
            struct fs_item *it = &g->items[slot];
            if (it->seq && !(it->flags & FS_W_DONE))
                continue;
            /* A collective is a kernel even of no duration of its own: it waits for its peers. */
            uint64_t dur = (w->coll_n || (w->flags & FS_W_COPY)) && !w->dur_ns ? 1 : w->dur_ns;
            *it = (struct fs_item){ .seq = ++g->item_seq, .dur_ns = dur, .left_ns = dur,
                                    .proc = (int)(p - g->procs), .ctx = w->ctx, .stream = w->stream,
                                    .width = (uint16_t)(dur ? (w->width > 1000 ? 1000 : w->width ? w->width : 1) : 0),
                                    .tl = (uint8_t)tl,
                                    .flags = (uint8_t)(w->flags & (FS_W_BARRIER | FS_W_BLOCKING | FS_W_COPY)) };
            if (w->coll_n) {
                it->flags |= FS_W_COLL;
                it->coll_n = (uint16_t)w->coll_n;
                it->coll_id = w->coll_id;
                it->coll_seq = w->coll_seq;
            }
            g->pend[g->npend++] = (uint16_t)slot;
            g->ring_head = (slot + 1) % FS_RING;
            out->seq = it->seq;
            out->slot = slot;
            ok = true;
            break;
        }
    }
    fs_unlock();
    return ok;
}

bool fs_pos_done(unsigned gpu, const struct fs_pos *p, uint64_t *end)
{
    if (!p->seq)
        return true;
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    bool done = true;
    fs_lock();
    const struct fs_item *it = &g->items[p->slot % FS_RING];
    if (it->seq == p->seq) {
        unsigned tl = it->tl;
        advance(g, tl, fs_now_ns());
        if (it->flags & FS_W_DONE) {
            *end = it->end_ns;
        } else {
            done = false;
            /* A projection: the same simulation, on copies, until the item is done. */
            struct sim s;
            /* Unknown (a collective whose peers have not started): look again soon. */
            *end = g->tl[tl].t_adv + 50000;
            if (sim_load(&s, g, tl, false)) {
                if (simulate(&s, UINT64_MAX, p->seq))
                    *end = s.t;
                sim_free(&s);
            }
        }
    }
    fs_unlock();
    return done;
}

unsigned fs_pending(unsigned gpu, int gi, int ci, uint32_t ctx, struct fs_pos *oldest)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    unsigned n = 0;
    oldest->seq = 0;
    fs_lock();
    struct fs_proc *p = fs_proc_get(gpu, getpid(), gi, ci, false);
    unsigned tl = tl_index(gi, ci);
    if (p) {
        advance(g, tl, fs_now_ns());
        int idx = (int)(p - g->procs);
        for (unsigned k = 0; k < g->npend; k++) {
            const struct fs_item *it = &g->items[g->pend[k]];
            if (it->tl != tl || it->proc != idx || it->ctx != ctx)
                continue;
            if (!n++)
                *oldest = (struct fs_pos){ it->seq, g->pend[k] };
        }
    }
    fs_unlock();
    return n;
}

uint64_t fs_run(unsigned gpu, int gi, int ci, uint64_t earliest_ns, uint64_t dur_ns)
{
    (void)earliest_ns;
    struct fs_work w = { .dur_ns = dur_ns, .width = 1000 };
    struct fs_pos pos;
    uint64_t end = fs_now_ns() + dur_ns;
    if (fs_submit(gpu, gi, ci, &w, &pos))
        fs_pos_done(gpu, &pos, &end);
    return end;
}

uint64_t fs_busy_between(unsigned gpu, pid_t pid, int gi, uint64_t from_ns, uint64_t to_ns)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    uint64_t busy = 0;
    for (unsigned i = 0; i < FS_MAX_INTERVALS; i++) {
        const struct fs_interval *iv = &g->intervals[i];
        if (iv->end_ns == 0 || (pid && iv->pid != pid) || (gi != -2 && iv->gi != gi))
            continue;
        uint64_t a = iv->start_ns > from_ns ? iv->start_ns : from_ns;
        uint64_t b = iv->end_ns < to_ns ? iv->end_ns : to_ns;
        if (b > a)
            busy += b - a;
    }
    return busy;
}

uint64_t fs_energy_mj(unsigned gpu)
{
    struct fs_state *st = fs_state();
    const struct fs_gpu *g = &st->gpu[gpu];
    fs_advance_gpu(gpu);
    uint64_t now = fs_now_ns(), up = now > st->loaded_ns ? now - st->loaded_ns : 0;
    uint64_t span = g->s.power_limit_mw > g->s.power_mw ? g->s.power_limit_mw - g->s.power_mw : 0;
    /* mW x ns / 1e9 = mJ; in two steps so that a day at 700 W stays far from overflowing */
    return g->s.power_mw * (up / 1000000ULL) / 1000ULL + span / 2 * (g->busy_ns / 1000000ULL) / 1000ULL;
}
