/* context.c: primary and created contexts, the per-thread context stack, limits.
 *
 * Creating a context takes time, as in the driver (hundreds of milliseconds on an H100): the
 * process shows up in NVML's process list at once (fc_dev_attach), and its memory grows in
 * CTX_STEPS steps over VGPU_FAKE_CTX_CREATE_MS (default 100 ms) until the context holds the
 * scenario's context overhead. Every context costs its own overhead (a second cuCtxCreate on
 * the same device costs as much as the first), returned when that context goes; the process
 * leaves NVML's list when its last context on the device goes. So processes that create their
 * contexts at the same moment see each other's memory move while their own creation is under
 * way, which is what a limiter measuring device-wide deltas gets wrong. Destroying a context
 * frees everything it allocated, as the real driver does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

static struct fc_ctx primary[FC_MAX_DEVICES];
static int live_contexts[FC_MAX_DEVICES];   /* contexts alive per device in this process */

#define STACK_MAX 32
static __thread struct fc_ctx *ctx_stack[STACK_MAX];
static __thread int ctx_depth;

/* Defaults a fresh context has; the context overhead already pays for them. */
static const size_t default_limits[8] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

/* Device memory a limit's value costs beyond the default: the malloc heap is reserved as is;
 * the stack is per thread, for every thread that can be resident (SMs × 2048). */
static unsigned long long limit_cost(const struct fc_ctx *c, int limit, size_t value)
{
    if (limit == CU_LIMIT_MALLOC_HEAP_SIZE)
        return value > default_limits[limit] ? value - default_limits[limit] : 0;
    if (limit == CU_LIMIT_STACK_SIZE) {
        size_t extra = value > default_limits[limit] ? value - default_limits[limit] : 0;
        return (unsigned long long)extra * (unsigned long long)fc_devs[c->device].sm_count * 2048ULL;
    }
    return 0;
}

CUresult fc_ctx_valid(CUcontext c)
{
    struct fc_ctx *x = (struct fc_ctx *)c;
    if (!x || x->magic != FC_CTX_MAGIC || !x->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult fc_ctx_sticky(struct fc_ctx *c)
{
    if (c->fault.seq && c->sticky == CUDA_SUCCESS && fc_dev_pos_done(c->device, &c->fault))
        c->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return c->sticky;
}

CUresult fc_current(struct fc_ctx **out)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    if (!c || fc_ctx_valid((CUcontext)c) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* After a kernel fault the context is broken: every call in it returns the error, until it
     * is destroyed (cuCtxDestroy, cuDevicePrimaryCtxReset or the last release still work). */
    if (fc_ctx_sticky(c) != CUDA_SUCCESS)
        return c->sticky;
    *out = c;
    return CUDA_SUCCESS;
}

#define CTX_STEPS 4
#define CTX_CREATE_MS_DEFAULT 100

/* VGPU_FAKE_CTX_CREATE_MS: how long creating a context takes (0..60000 ms). */
static unsigned create_ms(void)
{
    static int ms = -1;
    if (ms >= 0)
        return (unsigned)ms;
    const char *e = getenv("VGPU_FAKE_CTX_CREATE_MS");
    ms = CTX_CREATE_MS_DEFAULT;
    if (e && *e) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(e, &end, 10);
        if (errno || *end || v > 60000 || *e == '-')
            fprintf(stderr, "fake libcuda: VGPU_FAKE_CTX_CREATE_MS='%s' is not a number of milliseconds "
                            "0..60000; using %d\n", e, CTX_CREATE_MS_DEFAULT);
        else
            ms = (int)v;
    }
    return (unsigned)ms;
}

/* Caller holds fc_lock (the driver serialises context creation within a process too). Charges
 * the context's overhead in steps over the creation time; on failure gives back what the
 * steps took. */
static CUresult ctx_open(struct fc_ctx *c, int dev, unsigned int flags)
{
    CUresult claimed = fc_dev_claim(dev);   /* the compute mode; MPS; NVML lists us from now on */
    if (claimed != CUDA_SUCCESS)
        return claimed;
    unsigned long long total = fc_devs[dev].ctx_overhead, done = 0;
    uint64_t step_ns = (uint64_t)create_ms() * 1000000ULL / CTX_STEPS, t = fc_now_ns();
    for (int i = 0; i < CTX_STEPS; i++) {
        unsigned long long part = i == CTX_STEPS - 1 ? total - done : fc_round_up(total / CTX_STEPS, 2 * FC_MIB);
        if (part > total - done)
            part = total - done;
        CUresult r = fc_dev_charge_ctx(dev, part);
        if (r != CUDA_SUCCESS) {
            fc_dev_uncharge_ctx(dev, done);
            if (live_contexts[dev] == 0)
                fc_dev_attach(dev, false);
            return r;
        }
        done += part;
        t += step_ns;
        fc_sleep_until(t);
    }
    live_contexts[dev]++;
    c->overhead = total;
    c->magic = FC_CTX_MAGIC;
    c->device = dev;
    c->alive = true;
    c->flags = flags;
    memcpy(c->limits, default_limits, sizeof c->limits);
    static uint32_t next_key;
    c->key = ++next_key;
    c->legacy_last = c->orphan_last = c->fault = (struct fc_pos){ 0, 0, 0 };
    c->sticky = CUDA_SUCCESS;
    c->admit_pending = c->admit_since = 0;
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. */
static void ctx_close(struct fc_ctx *c)
{
    fc_stream_destroy_all(c);
    fc_ctx_free_allocations(c);
    for (int l = 0; l < 8; l++)
        fc_dev_uncharge(c->device, limit_cost(c, l, c->limits[l]));
    c->alive = false;
    fc_dev_uncharge_ctx(c->device, c->overhead);
    fc_dev_uncharge(c->device, c->module_bytes);
    c->overhead = c->module_bytes = 0;
    if (--live_contexts[c->device] == 0)
        fc_dev_attach(c->device, false);
}

static CUresult check_dev(CUdevice dev)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < fc_ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fc_ctx *c = &primary[dev];
    if (!c->alive) {
        r = ctx_open(c, dev, c->flags);
        c->primary = true;
    }
    if (r == CUDA_SUCCESS) {
        c->refcount++;
        *pctx = (CUcontext)c;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult primary_release(CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_ctx *c = &primary[dev];
    if (!c->alive || c->refcount <= 0) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--c->refcount == 0) {
        ctx_close(c);
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    FC_TRACE();
    return primary_release(dev);
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    FC_TRACE();
    return primary_release(dev);
}

static CUresult primary_reset(CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_ctx *c = &primary[dev];
    if (c->alive)
        ctx_close(c);
    c->refcount = 0;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    FC_TRACE();
    return primary_reset(dev);
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    FC_TRACE();
    return primary_reset(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FC_TRACE();
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    *flags = primary[dev].flags;
    *active = primary[dev].alive;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

static void push(struct fc_ctx *c)
{
    if (ctx_depth < STACK_MAX)
        ctx_stack[ctx_depth++] = c;
}

/* cuCtxCreate makes the new context current (pushes it). */
static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx || (flags & ~0xFFu))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    r = ctx_open(c, dev, flags);
    pthread_mutex_unlock(&fc_lock);
    if (r != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    push(c);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FC_TRACE();
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FC_TRACE();
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    FC_TRACE();
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    FC_TRACE();
    if (ctxCreateParams && ctxCreateParams->execAffinityParams && ctxCreateParams->cigParams)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_ctx *c = (struct fc_ctx *)ctx;
    r = fc_ctx_valid(ctx);
    if (r == CUDA_SUCCESS && c->primary)
        r = CUDA_ERROR_INVALID_CONTEXT; /* primary contexts go through Release/Reset */
    if (r == CUDA_SUCCESS)
        ctx_close(c);
    pthread_mutex_unlock(&fc_lock);
    if (r != CUDA_SUCCESS)
        return r;
    /* Drop it from this thread's stack; other threads' stacks see it as invalid. The memory is
     * kept (never reused) so that a stale handle is detected instead of dereferenced freed. */
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == c) {
            memmove(&ctx_stack[i], &ctx_stack[i + 1], (size_t)(ctx_depth - i - 1) * sizeof c);
            ctx_depth--;
            i--;
        }
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    FC_TRACE();
    return ctx_destroy(ctx);
}

CUresult cuCtxDestroy(CUcontext ctx)
{
    FC_TRACE();
    return ctx_destroy(ctx);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx_depth > 0 ? (CUcontext)ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx && fc_ctx_valid(ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        if (ctx_depth > 0)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (ctx_depth > 0)
        ctx_stack[ctx_depth - 1] = (struct fc_ctx *)ctx;
    else
        push((struct fc_ctx *)ctx);
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext ctx)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (fc_ctx_valid(ctx) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth >= STACK_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    push((struct fc_ctx *)ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    FC_TRACE();
    return ctx_push(ctx);
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    FC_TRACE();
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fc_ctx *c = ctx_stack[--ctx_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FC_TRACE();
    return ctx_pop(pctx);
}

CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    FC_TRACE();
    return ctx_pop(pctx);
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->device;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    return fc_ctx_sync(c);
}

/* The CUDA 13 forms take the context explicitly; NULL means the current one. */
static CUresult ctx_or_current(CUcontext ctx, struct fc_ctx **out)
{
    if (!ctx)
        return fc_current(out);
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = fc_ctx_valid(ctx);
    if (r == CUDA_SUCCESS)
        *out = (struct fc_ctx *)ctx;
    return r;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->device;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    return r != CUDA_SUCCESS ? r : fc_ctx_sync(c);
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if ((int)limit < 0 || (int)limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    pthread_mutex_lock(&fc_lock);
    unsigned long long old_cost = limit_cost(c, (int)limit, c->limits[limit]);
    unsigned long long new_cost = limit_cost(c, (int)limit, value);
    if (new_cost > old_cost)
        r = fc_dev_charge(c->device, new_cost - old_cost);
    else
        fc_dev_uncharge(c->device, old_cost - new_cost);
    if (r == CUDA_SUCCESS)
        c->limits[limit] = value;
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pvalue)
        return CUDA_ERROR_INVALID_VALUE;
    if ((int)limit < 0 || (int)limit > CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *pvalue = c->limits[limit];
    return CUDA_SUCCESS;
}

/* A process that exits with contexts open gives their memory back, as the driver does when
 * the process's file descriptors close (shared.c; kill -9 is left to the shared state's readers,
 * which reclaim dead processes' records). */
__attribute__((destructor)) static void release_at_exit(void)
{
    if (fc_initialized)
        fc_shared_release_all();
}
