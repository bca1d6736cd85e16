/* pool_charge.c: what the job's memory pools hold, charged to the job (interception.md §2).
 *
 * A pool occupies on the GPU its *reserved* memory (RESERVED_MEM_CURRENT), which grows in chunks
 * at allocation and shrinks at trim, at synchronize (down to the release threshold) and when the
 * pool is destroyed. This file knows the pools of the process (those created, and each device's
 * current pool as it is used) and what each was last charged; settling a pool measures it and
 * charges the change: growth beyond what was reserved up front is forced (the driver has handed
 * it out already), what the pool took from its cache or gave back is released.
 * The measuring half of pools, below the admission (admit.c re-measures every pool before it
 * refuses an allocation) and below the wrappers (pool.c): it calls down into the counters
 * (acct.c) only, so that both can call it without a cycle. */
#include <pthread.h>

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
CUmemoryPool vgpu_pool_current(int dev)
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
int vgpu_pool_device(CUmemoryPool pool)
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

/* The part of a request the pool cannot serve from what it holds: reserved before the call.
 * The pool is settled first (it may have shrunk at a synchronize), so its charge is current. */
uint64_t vgpu_pool_up_front(CUmemoryPool pool, int dev, uint64_t bytes)
{
    vgpu_pool_settle(pool, dev, 0);
    uint64_t spare = pool_spare(pool);
    return bytes > spare ? bytes - spare : 0;
}

void vgpu_pool_settle(CUmemoryPool pool, int dev, uint64_t up_front)
{
    pthread_mutex_lock(&lock);
    struct pool_rec *p = find(pool);
    int64_t d = p ? measure(p) : 0;
    pthread_mutex_unlock(&lock);
    apply(dev, d, up_front);
}

void vgpu_pool_register(CUmemoryPool pool, int dev)
{
    pthread_mutex_lock(&lock);
    (void)add(pool, dev);
    pthread_mutex_unlock(&lock);
}

void vgpu_pool_trimmed(CUmemoryPool pool)
{
    pthread_mutex_lock(&lock);
    struct pool_rec *p = find(pool);
    int dev = p ? p->dev : -1;
    int64_t d = p ? measure(p) : 0;
    pthread_mutex_unlock(&lock);
    apply(dev, d, 0);
}

void vgpu_pool_forget(CUmemoryPool pool)
{
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
