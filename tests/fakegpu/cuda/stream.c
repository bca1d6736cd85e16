/* stream.c: streams, events and host callbacks on the simulated timeline.
 *
 * Each stream remembers `tail`, the simulated completion time of the last work queued on it.
 * Work starts no earlier than now, the stream's tail, and (legacy default-stream semantics)
 * the legacy stream's tail for blocking streams, or every blocking stream's tail for the legacy
 * stream; the device timeline (fc_dev_run, shared with other processes) may push it later.
 * Synchronize, query and events compare those times with the real clock. The per-thread
 * default stream (stream 0 in a _ptsz/_ptds call, or CU_STREAM_PER_THREAD) is one blocking
 * stream per thread and context.
 * Host functions run on one helper thread per process when the clock reaches the stream's tail
 * at the time they were queued; a synchronize waits for them too. (Later work on that stream
 * is not held back while a callback runs: a simplification.) */
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

#define MAX_STREAMS 1024
static struct fc_stream *streams[MAX_STREAMS];
static pthread_cond_t host_fn_done = PTHREAD_COND_INITIALIZER;

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

/* The earliest time new work on `st` may start. Caller holds fc_lock. */
static uint64_t ready_time(struct fc_ctx *ctx, struct fc_stream *st)
{
    uint64_t t = fc_now_ns();
    if (st) {
        if (st->tail > t)
            t = st->tail;
        if (blocking(st) && ctx->legacy_tail > t)
            t = ctx->legacy_tail;
        return t;
    }
    if (ctx->legacy_tail > t)
        t = ctx->legacy_tail;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i]->ctx == ctx && blocking(streams[i]) && streams[i]->tail > t)
            t = streams[i]->tail;
    return t;
}

static void set_tail(struct fc_ctx *ctx, struct fc_stream *st, uint64_t t)
{
    if (st)
        st->tail = t;
    else
        ctx->legacy_tail = t;
}

uint64_t fc_stream_enqueue(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns)
{
    uint64_t end = fc_dev_run(ctx->device, ready_time(ctx, st), dur_ns);
    set_tail(ctx, st, end);
    return end;
}

uint64_t fc_stream_tail(struct fc_ctx *ctx, struct fc_stream *st)
{
    uint64_t t = ready_time(ctx, st);
    set_tail(ctx, st, t);
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

/* Waits, in real time, for everything queued on `st` (NULL: the legacy stream, which also
 * covers the blocking streams). Caller holds fc_lock; it is released while sleeping. */
static void wait_stream_locked(struct fc_ctx *ctx, struct fc_stream *st)
{
    uint64_t t = st ? (st->tail > (blocking(st) ? ctx->legacy_tail : 0) ? st->tail : ctx->legacy_tail)
                    : ready_time(ctx, NULL);
    pthread_mutex_unlock(&fc_lock);
    fc_sleep_until(t);
    pthread_mutex_lock(&fc_lock);
    while (pending(ctx, st) > 0)
        pthread_cond_wait(&host_fn_done, &fc_lock);
    fc_pool_release_all(ctx->device);
}

CUresult fc_stream_wait(struct fc_ctx *ctx, struct fc_stream *st)
{
    pthread_mutex_lock(&fc_lock);
    wait_stream_locked(ctx, st);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult fc_ctx_sync(struct fc_ctx *ctx)
{
    pthread_mutex_lock(&fc_lock);
    uint64_t t = ready_time(ctx, NULL);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (streams[i] && streams[i]->ctx == ctx && streams[i]->tail > t)
            t = streams[i]->tail;
    pthread_mutex_unlock(&fc_lock);
    fc_sleep_until(t);
    pthread_mutex_lock(&fc_lock);
    for (;;) {
        int n = 0;
        for (int i = 0; i < MAX_STREAMS; i++)
            if (streams[i] && streams[i]->ctx == ctx)
                n += streams[i]->pending_host_fns;
        if (n == 0)
            break;
        pthread_cond_wait(&host_fn_done, &fc_lock);
    }
    fc_pool_release_all(ctx->device);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
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
        if (st->tail > c->legacy_tail && blocking(st))
            c->legacy_tail = st->tail; /* keep the ordering the legacy stream owed it */
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
    if (r == CUDA_SUCCESS)
        wait_stream_locked(c, st);
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
        uint64_t now = fc_now_ns();
        uint64_t t = st ? st->tail : ready_time(c, NULL);
        if (t > now || pending(c, st) > 0)
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
    uint64_t time;
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
        ev->time = fc_stream_tail(c, st);
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
    uint64_t t = ev->recorded ? ev->time : 0;
    pthread_mutex_unlock(&fc_lock);
    fc_sleep_until(t);
    pthread_mutex_lock(&fc_lock);
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
    r = (ev->recorded && ev->time > fc_now_ns()) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
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
    uint64_t now = fc_now_ns();
    if (s->time > now || e->time > now)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)(((double)e->time - (double)s->time) / 1e6);
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
    uint64_t due;
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
        struct host_fn **best = &host_fns;
        for (struct host_fn **pp = &host_fns; *pp; pp = &(*pp)->next)
            if ((*pp)->due < (*best)->due)
                best = pp;
        struct host_fn *h = *best;
        if (h->due > fc_now_ns()) {
            uint64_t due = h->due;
            pthread_mutex_unlock(&fc_lock);
            fc_sleep_until(due); /* a callback queued meanwhile for earlier waits at most this */
            pthread_mutex_lock(&fc_lock);
            continue;
        }
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
    if (!st) {
        /* The legacy stream: account the callback on the per-thread stream object so that
         * synchronize sees it pending; ordering comes from `due`. */
        st = per_thread_stream(c);
    }
    h->due = fc_stream_tail(c, st);
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
