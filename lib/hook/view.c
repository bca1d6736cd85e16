/* view.c: what the job sees of device memory (DESIGN.md decision 6, pitfalls 2-4).
 * With a memory limit: total = min(limit, physical), used = the job's accounted usage,
 * free = total - used clamped to [0, physical free], and used + free = total always. With
 * --oversubscribe: total = the job's cap even past the GPU's size, free not clamped (spill.c). Without a
 * limit (or outside a job): the driver's own numbers. Queries never fail because of the limit. */
#include "hook.h"

static void job_view(int dev, size_t *free_b, size_t *total_b)
{
    uint64_t fr, to, used;
    vgpu_acct_view(dev, *free_b, *total_b, &fr, &to, &used);
    *free_b = fr;
    *total_b = to;
}

VGPU_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    vgpu_cuMemGetInfo_v2_fn real = REAL(cuMemGetInfo_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(free_b, total_b);
    if (rc != CUDA_SUCCESS || !free_b || !total_b || !vgpu_job())
        return rc;
    int dev = vgpu_current_device();
    if (dev >= 0 && vgpu_acct_limit(dev)) {
        vgpu_pool_reconcile_all();      /* pools shrink at synchronize: show what is really held */
        job_view(dev, free_b, total_b);
    }
    return rc;
}

/* The CUDA 2.x ABI: 32-bit numbers, saturated like the driver does for large GPUs. */
VGPU_EXPORT CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total_b)
{
    vgpu_cuMemGetInfo_v2_fn real = REAL(cuMemGetInfo_v2);
    vgpu_cuMemGetInfo_fn real_v1 = REAL(cuMemGetInfo);
    if (!real_v1)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!real || !free_b || !total_b || !vgpu_job())
        return real_v1(free_b, total_b);
    size_t fr, to;
    CUresult rc = cuMemGetInfo_v2(&fr, &to);
    if (rc != CUDA_SUCCESS)
        return rc;
    *free_b = fr > UINT32_MAX ? UINT32_MAX : (unsigned int)fr;
    *total_b = to > UINT32_MAX ? UINT32_MAX : (unsigned int)to;
    return rc;
}

VGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    vgpu_cuDeviceTotalMem_v2_fn real = REAL(cuDeviceTotalMem_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && vgpu_job()) {
        uint64_t limit = vgpu_acct_limit(dev);
        if (limit && (limit < *bytes || vgpu_acct_oversub(dev)))
            *bytes = limit;
    }
    return rc;
}

VGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    vgpu_cuDeviceTotalMem_fn real = REAL(cuDeviceTotalMem);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && vgpu_job()) {
        uint64_t limit = vgpu_acct_limit(dev);
        if (limit && (limit < *bytes || vgpu_acct_oversub(dev)))
            *bytes = limit > UINT32_MAX ? UINT32_MAX : (unsigned int)limit;
    }
    return rc;
}
