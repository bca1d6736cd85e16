/* pool.c: stream-ordered allocation (cuMemAllocAsync and explicit pools).
 *
 * A pool reserves device memory in chunks (FC_POOL_CHUNK, or the request rounded up to 2 MiB
 * when larger) and is charged for what it reserves, not what is in use. Freed memory stays
 * reserved: cuMemPoolTrimTo gives it back, and each synchronize (stream, event, context)
 * shrinks every pool of the device to max(used, RELEASE_THRESHOLD), as the driver does.
 * The fake keeps one number per pool, not a free list: `reserved` is always a multiple of
 * 2 MiB and at least `used`.
 *
 * cuMemFreeAsync is stream-ordered: the memory stays in use (and counted in `used`) until the
 * stream's work queued before the free has run, as in the driver. Until then only an allocation
 * on the same stream may reuse it (stream order makes that safe); any other waits for the
 * stream to get there, so the pool grows meanwhile. */
#include <stdlib.h>

#include "fakecuda.h"

#define FC_POOL_CHUNK (32ULL * FC_MIB)
#define FC_2MIB (2ULL * FC_MIB)

/* Frees queued by cuMemFreeAsync that the stream has not reached yet. */
struct pending_free {
    struct fc_alloc *a;
    struct fc_stream *st;     /* NULL: the legacy default stream */
    struct fc_ctx *ctx;
    uint64_t due_ns;          /* when the stream reaches the free */
    struct pending_free *next;
};
static struct pending_free *pending_frees;

static struct fc_pool default_pools[FC_MAX_DEVICES];
static struct fc_pool *current_pools[FC_MAX_DEVICES];
static struct fc_pool *user_pools[256];

static void pool_init(struct fc_pool *p, int device, bool is_default)
{
    p->magic = FC_POOL_MAGIC;
    p->device = device;
    p->is_default = is_default;
    p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
}

/* Caller holds fc_lock. */
struct fc_pool *fc_default_pool(int device)
{
    struct fc_pool *p = &default_pools[device];
    if (p->magic != FC_POOL_MAGIC)
        pool_init(p, device, true);
    return p;
}

static struct fc_pool *current_pool(int device)
{
    return current_pools[device] ? current_pools[device] : fc_default_pool(device);
}

static CUresult pool_valid(CUmemoryPool h, struct fc_pool **out)
{
    struct fc_pool *p = (struct fc_pool *)h;
    if (!p || p->magic != FC_POOL_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    *out = p;
    return CUDA_SUCCESS;
}

/* Shrinks the reservation to `keep` (never below what is in use). Caller holds fc_lock. */
static void pool_shrink(struct fc_pool *p, unsigned long long keep)
{
    if (keep >= p->reserved)
        return; /* also keeps round_up(UINT64_MAX) from wrapping */
    unsigned long long floor_b = fc_round_up(p->used > keep ? p->used : keep, FC_2MIB);
    if (p->reserved > floor_b) {
        fc_dev_uncharge(p->device, p->reserved - floor_b);
        p->reserved = floor_b;
    }
}

/* Caller holds fc_lock. Carries out the frees of `device` the streams have reached, and those
 * queued on `st` of `ctx` (stream order: an allocation there comes after them) when same_stream. */
static void retire_frees(int device, bool same_stream, struct fc_ctx *ctx, struct fc_stream *st)
{
    uint64_t now = fc_now_ns();
    for (struct pending_free **pp = &pending_frees; *pp;) {
        struct pending_free *f = *pp;
        if (f->a->device == device && (f->due_ns <= now || (same_stream && f->ctx == ctx && f->st == st))) {
            *pp = f->next;
            fc_pool_free(f->a);
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

/* Caller holds fc_lock. A context's pending frees are carried out when it goes. */
void fc_pool_forget_ctx(struct fc_ctx *ctx)
{
    for (struct pending_free **pp = &pending_frees; *pp;) {
        struct pending_free *f = *pp;
        if (f->ctx == ctx) {
            *pp = f->next;
            fc_pool_free(f->a);
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

/* Caller holds fc_lock. */
void fc_pool_release_all(int device)
{
    retire_frees(device, false, NULL, NULL);
    struct fc_pool *d = fc_default_pool(device);
    pool_shrink(d, d->release_threshold);
    for (size_t i = 0; i < sizeof user_pools / sizeof *user_pools; i++)
        if (user_pools[i] && user_pools[i]->device == device)
            pool_shrink(user_pools[i], user_pools[i]->release_threshold);
}

/* Caller holds fc_lock. st: the allocating stream (NULL: legacy default stream). */
static CUresult pool_take(struct fc_pool *p, struct fc_ctx *c, struct fc_stream *st, size_t size, CUdeviceptr *out)
{
    unsigned long long need = fc_round_up(size, 512);
    retire_frees(p->device, true, c, st);
    if (p->max_size && p->used + need > p->max_size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (p->used + need > p->reserved) {
        unsigned long long grow = p->used + need - p->reserved;
        grow = grow <= FC_POOL_CHUNK ? FC_POOL_CHUNK : fc_round_up(grow, FC_2MIB);
        if (p->max_size && p->reserved + grow > p->max_size)
            grow = fc_round_up(p->used + need - p->reserved, FC_2MIB);
        CUresult r = fc_dev_charge(p->device, grow);
        if (r != CUDA_SUCCESS) {
            /* The driver first gives back what the pools hold unused, then retries. */
            fc_pool_release_all(p->device);
            if (p->used + need > p->reserved) {
                grow = fc_round_up(p->used + need - p->reserved, FC_2MIB);
                r = fc_dev_charge(p->device, grow);
            } else {
                grow = 0;
                r = CUDA_SUCCESS;
            }
            if (r != CUDA_SUCCESS)
                return r;
        }
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    struct fc_alloc *a = fc_alloc_new(FC_ALLOC_POOL, fc_va_reserve(size, 512), size, p->device, c);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->pool = p;
    a->charged = 0; /* the pool holds the charge */
    p->used += need;
    if (p->used > p->used_high)
        p->used_high = p->used;
    *out = a->base;
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. */
void fc_pool_free(struct fc_alloc *a)
{
    struct fc_pool *p = a->pool;
    unsigned long long n = fc_round_up(a->size, 512);
    p->used = p->used > n ? p->used - n : 0;
    fc_alloc_remove(a);
}

CUresult fc_pool_alloc(struct fc_pool *pool, size_t size, CUstream stream, CUdeviceptr *out)
{
    struct fc_ctx *c;
    struct fc_stream *st = NULL;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    if (fc_stream_resolve(stream, false, c, &st) != CUDA_SUCCESS)
        st = NULL;
    r = pool_take(pool ? pool : current_pool(c->device), c, st, size, out);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool hpool, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    struct fc_pool *p = NULL;
    if (r == CUDA_SUCCESS && hpool)
        r = pool_valid(hpool, &p);
    if (r == CUDA_SUCCESS && st && st->capture) {
        pthread_mutex_unlock(&fc_lock);
        return fc_graph_capture_alloc(st, size, dptr);
    }
    if (r == CUDA_SUCCESS)
        r = pool_take(p ? p : current_pool(c->device), c, st, size, dptr);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ FC_TRACE(); return alloc_async(dptr, bytesize, NULL, hStream, false); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ FC_TRACE(); return alloc_async(dptr, bytesize, NULL, hStream, true); }

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    FC_TRACE();
    return pool ? alloc_async(dptr, bytesize, pool, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    FC_TRACE();
    return pool ? alloc_async(dptr, bytesize, pool, hStream, true) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && st && st->capture) {
        pthread_mutex_unlock(&fc_lock);
        return fc_graph_capture_free(st, dptr);
    }
    struct fc_alloc *a = r == CUDA_SUCCESS ? fc_alloc_find(dptr, false) : NULL;
    if (r == CUDA_SUCCESS && !a)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        /* The free happens in stream order: pool and graph memory stays in use until the stream
         * reaches it. cuMemFreeAsync also frees cuMemAlloc memory, as the real one does (that
         * goes back to the device at once in the fake). */
        struct pending_free *f;
        if (a->kind == FC_ALLOC_POOL && (f = calloc(1, sizeof *f)) != NULL) {
            *f = (struct pending_free){ a, st, c, fc_stream_tail(c, st), pending_frees };
            a->kind = FC_ALLOC_POOL_FREEING;   /* a second free of it is an error */
            pending_frees = f;
        } else if (a->kind == FC_ALLOC_POOL)
            fc_pool_free(a);
        else if (a->kind == FC_ALLOC_GRAPH)
            r = fc_graph_alloc_free_async(a, fc_stream_tail(c, st));
        else if (a->kind == FC_ALLOC_DEVICE || a->kind == FC_ALLOC_MANAGED)
            fc_alloc_remove(a);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{ FC_TRACE(); return free_async(dptr, hStream, false); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{ FC_TRACE(); return free_async(dptr, hStream, true); }

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int device = 0;
    if (props->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (props->location.id < 0 || props->location.id >= fc_ndev)
            return CUDA_ERROR_INVALID_DEVICE;
        device = props->location.id;
    } else {
        /* Host (NUMA) pools hold host memory; the fake does not model them. */
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    struct fc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, device, false);
    p->max_size = props->maxSize;
    pthread_mutex_lock(&fc_lock);
    size_t i;
    for (i = 0; i < sizeof user_pools / sizeof *user_pools && user_pools[i]; i++)
        ;
    if (i == sizeof user_pools / sizeof *user_pools) {
        pthread_mutex_unlock(&fc_lock);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    user_pools[i] = p;
    pthread_mutex_unlock(&fc_lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    FC_TRACE();
    struct fc_pool *p;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = pool_valid(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    /* Outstanding allocations keep their addresses but the pool's reservation goes. */
    fc_dev_uncharge(p->device, p->reserved);
    for (size_t i = 0; i < sizeof user_pools / sizeof *user_pools; i++)
        if (user_pools[i] == p)
            user_pools[i] = NULL;
    for (int d = 0; d < FC_MAX_DEVICES; d++)
        if (current_pools[d] == p)
            current_pools[d] = NULL;
    p->magic = 0; /* kept allocated: stale handles are detected, allocations may point here */
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FC_TRACE();
    struct fc_pool *p;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = pool_valid(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    switch ((int)attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr] = *(int *)value;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = *(cuuint64_t *)value; break;
    /* High watermarks can only be reset to zero. */
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            p->used_high = p->used;
        break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    FC_TRACE();
    struct fc_pool *p;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = pool_valid(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    switch ((int)attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse[attr];
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    FC_TRACE();
    struct fc_pool *p;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = pool_valid(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    pool_shrink(p, minBytesToKeep);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

static CUresult check_dev(CUdevice dev)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < fc_ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    *pool_out = (CUmemoryPool)fc_default_pool(dev);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    *pool = (CUmemoryPool)current_pool(dev);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    FC_TRACE();
    struct fc_pool *p;
    CUresult r = check_dev(dev);
    if (r == CUDA_SUCCESS)
        r = pool_valid(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->device != dev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_lock);
    current_pools[dev] = p->is_default ? NULL : p;
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}
