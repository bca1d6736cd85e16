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
 * Pools on host locations (HOST_NUMA) are host memory and never charged.
 * What each pool holds, charged, is pool_charge.c's (below admit.c, which re-measures the pools
 * before refusing an allocation); this file is the wrappers, above both. */
#include "hook.h"

#define ASYNC_ALLOC(sym)                                                           \
    VGPU_EXPORT CUresult sym(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) \
    {                                                                              \
        vgpu_##sym##_fn real = REAL(sym);                                          \
        if (!real)                                                                 \
            return CUDA_ERROR_NOT_INITIALIZED;                                     \
        int dev = vgpu_job() ? vgpu_current_device() : -1;                         \
        CUmemoryPool pool = dev >= 0 ? vgpu_pool_current(dev) : NULL;              \
        if (!pool)                                                                 \
            return real(dptr, bytesize, hStream);                                  \
        uint64_t held = vgpu_pool_up_front(pool, dev, bytesize);                   \
        if (!vgpu_acct_reserve(dev, held, #sym))                                   \
            return CUDA_ERROR_OUT_OF_MEMORY;                                       \
        CUresult rc = real(dptr, bytesize, hStream);                               \
        vgpu_pool_settle(pool, dev, held);                                         \
        return rc;                                                                 \
    }
ASYNC_ALLOC(cuMemAllocAsync)
ASYNC_ALLOC(cuMemAllocAsync_ptsz)

#define POOL_ALLOC(sym)                                                                               \
    VGPU_EXPORT CUresult sym(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) \
    {                                                                                                 \
        vgpu_##sym##_fn real = REAL(sym);                                                             \
        if (!real)                                                                                    \
            return CUDA_ERROR_NOT_INITIALIZED;                                                        \
        int dev = vgpu_job() && pool ? vgpu_pool_device(pool) : -1;                                   \
        if (dev < 0)                                                                                  \
            return real(dptr, bytesize, pool, hStream);                                               \
        uint64_t held = vgpu_pool_up_front(pool, dev, bytesize);                                      \
        if (!vgpu_acct_reserve(dev, held, #sym))                                                      \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                          \
        CUresult rc = real(dptr, bytesize, pool, hStream);                                            \
        vgpu_pool_settle(pool, dev, held);                                                            \
        return rc;                                                                                    \
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
    if (rc == CUDA_SUCCESS && vgpu_job() && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        vgpu_pool_register(*pool, poolProps->location.id);
    else if (rc == CUDA_SUCCESS && vgpu_job())
        vgpu_pool_register(*pool, -1);  /* host memory: known, never charged */
    return rc;
}

VGPU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    vgpu_cuMemPoolTrimTo_fn real = REAL(cuMemPoolTrimTo);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool, minBytesToKeep);
    if (rc == CUDA_SUCCESS && vgpu_job())
        vgpu_pool_trimmed(pool);
    return rc;
}

VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    vgpu_cuMemPoolDestroy_fn real = REAL(cuMemPoolDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(pool);
    if (rc == CUDA_SUCCESS)
        vgpu_pool_forget(pool);
    return rc;
}
