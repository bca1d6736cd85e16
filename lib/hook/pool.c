/* pool.c: stream-ordered allocation and memory pools (interception.md §2).
 *
 * What a pool occupies on the GPU is its *reserved* memory (RESERVED_MEM_CURRENT), which grows
 * in chunks at allocation and shrinks at trim, at synchronize (down to the release threshold)
 * and when the pool is destroyed. Each allocation reserves its size in the job region up front
 * (so a concurrent process cannot pass the limit meanwhile), then the pool's reserved memory is
 * measured and the job is charged exactly its growth: the up-front reservation is settled
 * against it (what the pool took from its cache is given back; chunk rounding beyond the
 * request is charged after the fact). Shrinking is picked up at the next allocation, trim or
 * destroy, and before any allocation is refused for lack of memory.
 * Pools on host locations (HOST_NUMA) are host memory and never charged. */
#include <pthread.h>
#include <string.h>

#include "hook.h"

#define MAX_POOLS 256

struct pool_rec {
    CUmemoryPool pool;
    int dev;
    uint64_t charged;        /* the pool's reserved memory as last charged to the job */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec pools[MAX_POOLS];
static int npools;

static vgpu_cuMemPoolGetAttribute_fn get_attr(void)
{
    return (vgpu_cuMemPoolGetAttribute_fn)vgpu_real_cuda_sym("cuMemPoolGetAttribute");
}

/* Under lock. */
static struct pool_rec *find(CUmemoryPool pool)
{
    for (int i = 0; i < npools; i++)
        if (pools[i].pool == pool)
            return &pools[i];
    return NULL;
}

static struct pool_rec *add(CUmemoryPool pool, int dev)
{
    struct pool_rec *p = find(pool);
    if (p || npools == MAX_POOLS)
        return p;
    pools[npools] = (struct pool_rec){ pool, dev, 0 };
    return &pools[npools++];
}

/* Under lock: measures the pool and returns the change of its reserved memory since last
 * time (positive: growth not yet charged; negative: shrinkage not yet released). */
static int64_t measure(struct pool_rec *p)
{
    vgpu_cuMemPoolGetAttribute_fn f = get_attr();
    cuuint64_t reserved = 0;
    if (!f || f(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
        return 0;
    int64_t delta = (int64_t)(reserved - p->charged);
    p->charged = reserved;
    return delta;
}

static void apply(int dev, int64_t delta, uint64_t reserved_up_front)
{
    if (delta > (int64_t)reserved_up_front) {
        vgpu_acct_force(dev, (uint64_t)delta - reserved_up_front);
    } else {
        vgpu_acct_release(dev, reserved_up_front - (uint64_t)(delta > 0 ? delta : 0));
        if (delta < 0)
            vgpu_acct_release(dev, (uint64_t)-delta);
    }
}

void vgpu_pool_reconcile_all(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < npools; i++) {
        int dev = pools[i].dev;
        int64_t d = measure(&pools[i]);
        pthread_mutex_unlock(&lock);
        apply(dev, d, 0);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
}

/* The device's current pool (what cuMemAllocAsync draws from), registered. */
static CUmemoryPool current_pool(int dev)
{
    vgpu_cuDeviceGetMemPool_fn f = (vgpu_cuDeviceGetMemPool_fn)vgpu_real_cuda_sym("cuDeviceGetMemPool");
    CUmemoryPool pool = NULL;
    if (!f || f(&pool, dev) != CUDA_SUCCESS)
        return NULL;
    pthread_mutex_lock(&lock);
    (void)add(pool, dev);
    pthread_mutex_unlock(&lock);
    return pool;
}

/* The device of a pool we know; unknown pools (a default pool fetched directly) are taken to be
 * on the current device and registered. -1: not device memory, or no job. */
static int pool_device(CUmemoryPool pool)
{
    pthread_mutex_lock(&lock);
    struct pool_rec *p = find(pool);
    int dev = p ? p->dev : -2;
    pthread_mutex_unlock(&lock);
    if (dev != -2)
        return dev;
    dev = vgpu_current_device();
    if (dev >= 0) {
        pthread_mutex_lock(&lock);
        (void)add(pool, dev);
        pthread_mutex_unlock(&lock);
    }
    return dev;
}

/* What the pool holds, charged, that no allocation uses now: an allocation it can serve from
 * there does not grow it. Memory freed with cuMemFreeAsync counts as used until its stream
 * gets there (the driver may not hand it to another stream before), so it is not spare. */
static uint64_t pool_spare(CUmemoryPool pool)
{
    vgpu_cuMemPoolGetAttribute_fn f = get_attr();
    cuuint64_t used = 0;
    pthread_mutex_lock(&lock);
    struct pool_rec *p = find(pool);
    uint64_t charged = p ? p->charged : 0;
    pthread_mutex_unlock(&lock);
    if (!f || f(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
        return 0;
    return charged > used ? charged - used : 0;
}

static void settle_pool(CUmemoryPool pool, int dev, uint64_t up_front);

/* The part of a request the pool cannot serve from what it holds: reserved before the call.
 * The pool is settled first (it may have shrunk at a synchronize), so its charge is current. */
static uint64_t up_front(CUmemoryPool pool, int dev, uint64_t bytes)
{
    settle_pool(pool, dev, 0);
    uint64_t spare = pool_spare(pool);
    return bytes > spare ? bytes - spare : 0;
}

static void settle_pool(CUmemoryPool pool, int dev, uint64_t up_front)
{
    pthread_mutex_lock(&lock);
    struct pool_rec *p = find(pool);
    int64_t d = p ? measure(p) : 0;
    pthread_mutex_unlock(&lock);
    apply(dev, d, up_front);
}

#define ASYNC_ALLOC(sym)                                                                    \
    VGPU_EXPORT CUresult sym(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)          \
    {                                                                                       \
        vgpu_##sym##_fn real = REAL(sym);                                                   \
        if (!real)                                                                          \
            return CUDA_ERROR_NOT_INITIALIZED;                                              \
        int dev = vgpu_job() ? vgpu_current_device() : -1;                                  \
        CUmemoryPool pool = dev >= 0 ? current_pool(dev) : NULL;                            \
        if (!pool)                                                                          \
            return real(dptr, bytesize, hStream);                                           \
        uint64_t held = up_front(pool, dev, bytesize);                                           \
        if (!vgpu_acct_reserve(dev, held, #sym))                                            \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                \
        CUresult rc = real(dptr, bytesize, hStream);                                        \
        settle_pool(pool, dev, held);                                                       \
        return rc;                                                                          \
    }
ASYNC_ALLOC(cuMemAllocAsync)
ASYNC_ALLOC(cuMemAllocAsync_ptsz)

#define POOL_ALLOC(sym)                                                                           \
    VGPU_EXPORT CUresult sym(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) \
    {                                                                                             \
        vgpu_##sym##_fn real = REAL(sym);                                                         \
        if (!real)                                                                                \
            return CUDA_ERROR_NOT_INITIALIZED;                                                    \
        int dev = vgpu_job() && pool ? pool_device(pool) : -1;                                    \
        if (dev < 0)                                                                              \
            return real(dptr, bytesize, pool, hStream);                                           \
        uint64_t held = up_front(pool, dev, bytesize);                                                 \
        if (!vgpu_acct_reserve(dev, held, #sym))                                                  \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                      \
        CUresult rc = real(dptr, bytesize, pool, hStream);                                        \
        settle_pool(pool, dev, held);                                                             \
        return rc;                                                                                \
    }
POOL_ALLOC(cuMemAllocFromPoolAsync)
POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz)

/* A free of pool memory returns it to its pool, not to the device: nothing to release until
 * the pool shrinks. cuMemFreeAsync also frees cuMemAlloc memory: that charge (mem.c's record)
 * is given back when the free is queued, as cuMemFree gives it back (the driver returns the
 * memory once the stream reaches the free). Anything else passes straight through. */
static CUresult free_async(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr dptr, CUstream hStream)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev;
    uint64_t bytes;
    bool tracked = vgpu_job() && vgpu_ptr_take(VGPU_AK_LINEAR, dptr, &dev, &bytes);
    CUresult rc = real(dptr, hStream);
    if (tracked) {
        if (rc == CUDA_SUCCESS)
            vgpu_acct_release(dev, bytes);
        else
            (void)vgpu_ptr_put(VGPU_AK_LINEAR, dptr, dev, bytes);
    }
    return rc;
}

VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(REAL(cuMemFreeAsync), dptr, hStream);
}

VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(REAL(cuMemFreeAsync_ptsz), dptr, hStream);
}

VGPU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    vgpu_cuMemPoolCreate_fn real = REAL(cuMemPoolCreate);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool, poolProps);
    if (rc == CUDA_SUCCESS && vgpu_job() && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        pthread_mutex_lock(&lock);
        (void)add(*pool, poolProps->location.id);
        pthread_mutex_unlock(&lock);
    } else if (rc == CUDA_SUCCESS && vgpu_job()) {
        pthread_mutex_lock(&lock);
        (void)add(*pool, -1);           /* host memory: known, never charged */
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

VGPU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    vgpu_cuMemPoolTrimTo_fn real = REAL(cuMemPoolTrimTo);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool, minBytesToKeep);
    if (rc == CUDA_SUCCESS && vgpu_job()) {
        pthread_mutex_lock(&lock);
        struct pool_rec *p = find(pool);
        int dev = p ? p->dev : -1;
        int64_t d = p ? measure(p) : 0;
        pthread_mutex_unlock(&lock);
        apply(dev, d, 0);
    }
    return rc;
}

VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    vgpu_cuMemPoolDestroy_fn real = REAL(cuMemPoolDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        struct pool_rec *p = find(pool);
        int dev = -1;
        uint64_t charged = 0;
        if (p) {
            dev = p->dev;
            charged = p->charged;
            *p = pools[--npools];
        }
        pthread_mutex_unlock(&lock);
        vgpu_acct_release(dev, charged);
    }
    return rc;
}
