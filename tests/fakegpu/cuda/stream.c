/* stream.c: streams, events and host callbacks on the simulated timeline.
 *
 * Work is queued on the device's timeline in the shared state (common/timeline.c), which
 * decides when it runs: in stream order, with legacy default-stream semantics (the legacy
 * stream waits for the blocking streams and they for it; CU_STREAM_NON_BLOCKING streams do
 * not), streams of one context side by side, contexts of all processes in time slices. Each
 * stream remembers the last work queued on it (`last`); synchronize and query look at that
 * work, and an event is a marker queued on its stream, done when the stream reaches it (an
 * event on an idle stream: at once; behind pending work: when that work is done). The
 * per-thread default stream (stream 0 in a _ptsz/_ptds call, or CU_STREAM_PER_THREAD) is one
 * blocking stream per thread and context.
 * Host functions are markers too: one helper thread per process runs each when the timeline
 * reaches it; a synchronize waits for them too. (Later work on that stream is not held back
 * while a callback runs: a simplification.) */
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

#define MAX_STREAMS 1024
static struct fc_stream *streams[MAX_STREAMS];
static pthread_cond_t host_fn_done = PTHREAD_COND_INITIALIZER;
static uint32_t next_stream_key;   /* 0 is the legacy stream */

struct pt_stream { struct fc_ctx *ctx; struct fc_stream *st; };
static __thread struct pt_stream per_thread[8];

static struct fc_stream *per_thread_stream(struct fc_ctx *ctx)
{
    for (int i = 0; i < 8; i++)
        if (per_thread[i].ctx == ctx && per_thread[i].st && per_thread[i].st->magic == FC_STREAM_MAGIC)
            return per_thread[i].st;
    struct fc_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->magic = FC_STREAM_MAGIC;
    st->ctx = ctx;
    st->per_thread = true;
    st->key = ++next_stream_key;
    int slot = 0;
    for (int i = 0; i < 8; i++)
        if (!per_thread[i].ctx || !per_thread[i].st || per_thread[i].st->magic != FC_STREAM_MAGIC) {
            slot = i;
            break;
        }
    per_thread[slot].ctx = ctx;
    per_thread[slot].st = st;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!streams[i]) {
            streams[i] = st;
            break;
        }
    return st;
}

/* Caller holds fc_lock. */
CUresult fc_stream_resolve(CUstream s, bool ptsz, struct fc_ctx *ctx, struct fc_stream **out)
{
    if (s == CU_STREAM_PER_THREAD || (s == NULL && ptsz)) {
        *out = per_thread_stream(ctx);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (s == NULL || s == CU_STREAM_LEGACY) {
        *out = NULL;
        return CUDA_SUCCESS;
    }
    struct fc_stream *st = (struct fc_stream *)s;
    if (st->magic != FC_STREAM_MAGIC || st->ctx != ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = st;
    return CUDA_SUCCESS;
}

static bool blocking(const struct fc_stream *st)
{
    return !(st->flags & CU_STREAM_NON_BLOCKING);
}

/* Queues one item on the stream (a marker when dur_ns is 0; a copy with FC_W_COPY in `kind`).
 * Caller holds fc_lock; released meanwhile only when the device's ring is full (then it waits
 * for work to finish). */
static struct fc_pos submit(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns, unsigned width,
                            const struct fc_coll *coll, unsigned kind)
{
    struct fc_pos pos = { 0, 0, 0 };
    unsigned flags = kind | (st ? (blocking(st) ? FC_W_BLOCKING : 0) : FC_W_BARRIER);
    while (!fc_dev_submit(ctx->device, ctx->key, st ? st->key : 0, dur_ns, width, flags, coll, &pos)) {
        pthread_mutex_unlock(&fc_lock);
        fc_sleep_until(fc_now_ns() + 1000000ULL);
        pthread_mutex_lock(&fc_lock);
    }
    if (st)
        st->last = pos;
    else
        ctx->legacy_last = pos;
    return pos;
}

uint64_t fc_stream_enqueue(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns, unsigned width,
                           const struct fc_coll *coll, bool want_end)
{
    struct fc_pos pos = submit(ctx, st, dur_ns, width, coll, 0);
    if (want_end)
        fc_dev_pos_done(ctx->device, &pos);   /* a projection: costs a simulation */
    return pos.end;
}

void fc_stream_enqueue_copy(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns)
{
    (void)submit(ctx, st, dur_ns, 0, NULL, FC_W_COPY);
}

void fc_queue_admit(struct fc_ctx *ctx)
{
    static unsigned depth;
    if (!depth) {
        const char *e = getenv("VGPU_FAKE_QUEUE_DEPTH");
        unsigned long v = e && *e ? strtoul(e, NULL, 10) : 1024;
        depth = v >= 1 && v <= 4096 ? (unsigned)v : 1024;
    }
    /* The shared state is asked only when the queue could be full: after it said n pending, k
     * more launches make at most n + k (a launch costs one look at the state, not two). */
    unsigned since = __atomic_fetch_add(&ctx->admit_since, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&ctx->admit_pending, __ATOMIC_RELAXED) + since + 1 < depth)
        return;
    struct fc_pos oldest;
    unsigned n;
    while ((n = fc_dev_pending(ctx->device, ctx->key, &oldest)) >= depth)
        fc_dev_pos_wait(ctx->device, &oldest);   /* the launching thread blocks, as in the driver */
    __atomic_store_n(&ctx->admit_pending, n, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->admit_since, 0, __ATOMIC_RELAXED);
}

/* The work a synchronize of `st` waits for (NULL: the legacy stream, which covers the blocking
 * streams; all: the whole context). Caller holds fc_lock. */
static unsigned sync_set(struct fc_ctx *ctx, struct fc_stream *st, bool all, struct fc_pos *out, unsigned max)
{
    unsigned n = 0;
    if (st && !all) {
        out[n++] = st->last;
        return n;
    }
    out[n++] = ctx->legacy_last;
    out[n++] = ctx->orphan_last;
    for (int i = 0; i < MAX_STREAMS && n < max; i++)
        if (streams[i] && streams[i]->ctx == ctx && (all || blocking(streams[i])) && streams[i]->last.seq)
            out[n++] = streams[i]->last;
    return n;
}

uint64_t fc_stream_tail(struct fc_ctx *ctx, struct fc_stream *st)
{
    struct fc_pos set[MAX_STREAMS + 2];
    unsigned n = sync_set(ctx, st, false, set, MAX_STREAMS + 2);
    uint64_t t = fc_now_ns();
    for (unsigned i = 0; i < n; i++)
        if (set[i].seq && !fc_dev_pos_done(ctx->device, &set[i]) && set[i].end > t)
            t = set[i].end;
    return t;
}

static int pending(struct fc_ctx *ctx, struct fc_stream *st)
{
    if (st)
        return st->pending_host_fns;
    int n = 0;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i]->ctx == ctx)
            n += streams[i]->pending_host_fns;
    return n;
}

/* Waits, in real time, for what a synchronize of `st` (or the whole context) covers. Caller
 * holds fc_lock; it is released while waiting. */
static void wait_locked(struct fc_ctx *ctx, struct fc_stream *st, bool all)
{
    struct fc_pos *mine = malloc(sizeof *mine * (MAX_STREAMS + 2));
    unsigned n = mine ? sync_set(ctx, st, all, mine, MAX_STREAMS + 2) : 0;
    int dev = ctx->device;
    pthread_mutex_unlock(&fc_lock);
    for (unsigned i = 0; i < n; i++)
        if (mine[i].seq)
            fc_dev_pos_wait(dev, &mine[i]);
    free(mine);
    pthread_mutex_lock(&fc_lock);
    while (pending(ctx, all ? NULL : st) > 0)
        pthread_cond_wait(&host_fn_done, &fc_lock);
    fc_pool_release_all(ctx->device);
}

CUresult fc_stream_wait(struct fc_ctx *ctx, struct fc_stream *st)
{
    pthread_mutex_lock(&fc_lock);
    wait_locked(ctx, st, false);
    CUresult r = fc_ctx_sticky(ctx);   /* a fault in the work waited for shows here */
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult fc_ctx_sync(struct fc_ctx *ctx)
{
    pthread_mutex_lock(&fc_lock);
    wait_locked(ctx, NULL, true);
    CUresult r = fc_ctx_sticky(ctx);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

/* Caller holds fc_lock. */
void fc_stream_destroy_all(struct fc_ctx *ctx)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i]->ctx == ctx) {
            streams[i]->magic = 0;
            streams[i] = NULL; /* the memory is kept: stale handles stay detectable */
        }
}

/* The context a stream belongs to (the current one for the default streams). */
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
        if (r == CUDA_SUCCESS)
            *pctx = (CUcontext)c;
        return r;
    }
    const struct fc_stream *st = (const struct fc_stream *)hStream;
    if (st->magic != FC_STREAM_MAGIC || fc_ctx_valid((CUcontext)st->ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_HANDLE;
    *pctx = (CUcontext)st->ctx;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (Flags & ~1u))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *st = calloc(1, sizeof *st);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st->magic = FC_STREAM_MAGIC;
    st->ctx = c;
    st->flags = Flags;
    pthread_mutex_lock(&fc_lock);
    st->key = ++next_stream_key;
    int i;
    for (i = 0; i < MAX_STREAMS && streams[i]; i++)
        ;
    if (i < MAX_STREAMS)
        streams[i] = st;
    pthread_mutex_unlock(&fc_lock);
    if (i == MAX_STREAMS) {
        free(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phStream = (CUstream)st;
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream s)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_stream *st = (struct fc_stream *)s;
    if (!st || st == (struct fc_stream *)CU_STREAM_LEGACY || st == (struct fc_stream *)CU_STREAM_PER_THREAD)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fc_lock);
    if (st->magic != FC_STREAM_MAGIC || st->per_thread) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else {
        /* Queued work still completes; the handle dies now. */
        for (int i = 0; i < MAX_STREAMS; i++)
            if (streams[i] == st)
                streams[i] = NULL;
        if (blocking(st) && st->last.seq > c->orphan_last.seq)
            c->orphan_last = st->last; /* the legacy stream still waits for its work */
        st->magic = 0;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamDestroy_v2(CUstream hStream) { FC_TRACE(); return stream_destroy(hStream); }
CUresult cuStreamDestroy(CUstream hStream) { FC_TRACE(); return stream_destroy(hStream); }

static CUresult stream_sync(CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && st && st->capture)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (r == CUDA_SUCCESS) {
        wait_locked(c, st, false);
        r = fc_ctx_sticky(c);
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamSynchronize(CUstream hStream) { FC_TRACE(); return stream_sync(hStream, false); }
CUresult cuStreamSynchronize_ptsz(CUstream hStream) { FC_TRACE(); return stream_sync(hStream, true); }

static CUresult stream_query(CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS) {
        struct fc_pos set[MAX_STREAMS + 2];
        unsigned n = sync_set(c, st, false, set, MAX_STREAMS + 2);
        for (unsigned i = 0; i < n && r == CUDA_SUCCESS; i++)
            if (set[i].seq && !fc_dev_pos_done(c->device, &set[i]))
                r = CUDA_ERROR_NOT_READY;
        if (pending(c, st) > 0)
            r = CUDA_ERROR_NOT_READY;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamQuery(CUstream hStream) { FC_TRACE(); return stream_query(hStream, false); }
CUresult cuStreamQuery_ptsz(CUstream hStream) { FC_TRACE(); return stream_query(hStream, true); }

/* ---- events ---- */

struct fc_event {
    uint32_t magic;
    unsigned int flags;
    bool recorded;
    struct fc_pos pos;       /* the marker queued on its stream */
    int device;
    struct fc_ctx *ctx;
};
#define FC_EVENT_MAGIC 0xE7E7E700u

static CUresult event_valid(CUevent e, struct fc_event **out)
{
    struct fc_event *ev = (struct fc_event *)e;
    if (!ev || ev->magic != FC_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = ev;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~0x7u) || ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ev->magic = FC_EVENT_MAGIC;
    ev->flags = Flags;
    ev->ctx = c;
    *phEvent = (CUevent)ev;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    struct fc_event *ev;
    CUresult r = fc_current(&c);
    if (r == CUDA_SUCCESS)
        r = event_valid(e, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS) {
        ev->pos = submit(c, st, 0, 0, NULL, 0);
        ev->device = c->device;
        ev->recorded = true;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) { FC_TRACE(); return event_record(hEvent, hStream, false); }
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { FC_TRACE(); return event_record(hEvent, hStream, true); }

CUresult cuEventSynchronize(CUevent hEvent)
{
    FC_TRACE();
    struct fc_event *ev;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = event_valid(hEvent, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_pos pos = ev->recorded ? ev->pos : (struct fc_pos){ 0, 0, 0 };
    pthread_mutex_unlock(&fc_lock);
    if (pos.seq)
        fc_dev_pos_wait(ev->device, &pos);
    pthread_mutex_lock(&fc_lock);
    if (pos.seq && ev->pos.seq == pos.seq)
        ev->pos.end = pos.end;
    fc_pool_release_all(ev->ctx->device);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent)
{
    FC_TRACE();
    struct fc_event *ev;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = event_valid(hEvent, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = (ev->recorded && !fc_dev_pos_done(ev->device, &ev->pos)) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    struct fc_event *s, *e;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = event_valid(a, &s);
    if (r == CUDA_SUCCESS)
        r = event_valid(b, &e);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!s->recorded || !e->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fc_lock);
    bool done = fc_dev_pos_done(s->device, &s->pos) && fc_dev_pos_done(e->device, &e->pos);
    uint64_t t_start = s->pos.end, t_end = e->pos.end;
    pthread_mutex_unlock(&fc_lock);
    if (!done)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)(((double)t_end - (double)t_start) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{ FC_TRACE(); return elapsed(pMilliseconds, hStart, hEnd); }
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{ FC_TRACE(); return elapsed(pMilliseconds, hStart, hEnd); }

static CUresult event_destroy(CUevent e)
{
    struct fc_event *ev;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = event_valid(e, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    ev->magic = 0;
    free(ev);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent) { FC_TRACE(); return event_destroy(hEvent); }
CUresult cuEventDestroy(CUevent hEvent) { FC_TRACE(); return event_destroy(hEvent); }

/* ---- host functions ---- */

struct host_fn {
    struct host_fn *next;
    struct fc_pos pos;       /* its marker on the stream */
    CUhostFn fn;
    void *data;
    struct fc_stream *st;     /* NULL: legacy stream */
    struct fc_ctx *ctx;
};
static struct host_fn *host_fns;
static pthread_cond_t host_fn_queued = PTHREAD_COND_INITIALIZER;
static bool helper_started;

static void *host_fn_helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fc_lock);
    for (;;) {
        if (!host_fns) {
            pthread_cond_wait(&host_fn_queued, &fc_lock);
            continue;
        }
        /* The first callback whose marker is done runs; else sleep until the earliest projected
         * one (at most 1 ms: work of other contexts may move it, callbacks queued meanwhile may
         * come first). */
        struct host_fn **best = NULL;
        uint64_t due = UINT64_MAX;
        for (struct host_fn **pp = &host_fns; *pp; pp = &(*pp)->next) {
            if (fc_dev_pos_done((*pp)->ctx->device, &(*pp)->pos) &&
                (!best || (*pp)->pos.seq < (*best)->pos.seq))
                best = pp;
            else if ((*pp)->pos.end < due)
                due = (*pp)->pos.end;
        }
        if (!best) {
            uint64_t now = fc_now_ns();
            if (due > now + 1000000ULL)
                due = now + 1000000ULL;
            pthread_mutex_unlock(&fc_lock);
            fc_sleep_until(due > now ? due : now + 20000);
            pthread_mutex_lock(&fc_lock);
            continue;
        }
        struct host_fn *h = *best;
        *best = h->next;
        pthread_mutex_unlock(&fc_lock);
        h->fn(h->data);
        pthread_mutex_lock(&fc_lock);
        h->st->pending_host_fns--; /* stream objects are never freed, so this is safe */
        free(h);
        pthread_cond_broadcast(&host_fn_done);
    }
    return NULL;
}

/* A forked child has no helper thread (threads do not survive fork) and must not inherit a
 * held fc_lock; callbacks queued by the parent are the parent's. */
static void before_fork(void) { pthread_mutex_lock(&fc_lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&fc_lock); }
static void after_fork_child(void)
{
    helper_started = false;
    host_fns = NULL;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i])
            streams[i]->pending_host_fns = 0;
    pthread_mutex_unlock(&fc_lock);
}

__attribute__((constructor)) static void install_fork_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static CUresult launch_host_func(CUstream s, CUhostFn fn, void *data, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct host_fn *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && !helper_started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, host_fn_helper, NULL) != 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            helper_started = true;
        pthread_attr_destroy(&attr);
    }
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&fc_lock);
        free(h);
        return r;
    }
    /* Its marker goes on its stream (the legacy one included); a callback of the legacy stream
     * is accounted on the per-thread stream object so that synchronize sees it pending. */
    h->pos = submit(c, st, 0, 0, NULL, 0);
    if (!st)
        st = per_thread_stream(c);
    h->fn = fn;
    h->data = data;
    h->st = st;
    h->ctx = c;
    st->pending_host_fns++;
    h->next = host_fns;
    host_fns = h;
    pthread_cond_signal(&host_fn_queued);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{ FC_TRACE(); return launch_host_func(hStream, fn, userData, false); }
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{ FC_TRACE(); return launch_host_func(hStream, fn, userData, true); }

/* ---- stream capture ---- */

static CUresult begin_capture(CUstream s, int mode, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode < 0 || mode > 2)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && !st)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    if (r == CUDA_SUCCESS && st->capture)
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (r == CUDA_SUCCESS) {
        st->capture = fc_graph_new();
        if (!st->capture)
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamBeginCapture(CUstream hStream) { FC_TRACE(); return begin_capture(hStream, 0, false); }
CUresult cuStreamBeginCapture_ptsz(CUstream hStream) { FC_TRACE(); return begin_capture(hStream, 0, true); }
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{ FC_TRACE(); return begin_capture(hStream, (int)mode, false); }
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{ FC_TRACE(); return begin_capture(hStream, (int)mode, true); }

static CUresult end_capture(CUstream s, CUgraph *phGraph, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && (!st || !st->capture))
        r = CUDA_ERROR_ILLEGAL_STATE;
    if (r == CUDA_SUCCESS) {
        *phGraph = (CUgraph)st->capture;
        st->capture = NULL;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) { FC_TRACE(); return end_capture(hStream, phGraph, false); }
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) { FC_TRACE(); return end_capture(hStream, phGraph, true); }

static CUresult is_capturing(CUstream s, CUstreamCaptureStatus *status, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS)
        *status = (st && st->capture) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{ FC_TRACE(); return is_capturing(hStream, captureStatus, false); }
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{ FC_TRACE(); return is_capturing(hStream, captureStatus, true); }
