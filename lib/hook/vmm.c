/* vmm.c: virtual memory management (cuMemCreate) and CUDA arrays.
 *
 * cuMemCreate is device memory only when its location is a DEVICE (NCCL also creates host and
 * host-NUMA allocations through it, which cost the GPU nothing). The charge is given back at
 * cuMemRelease: the driver frees the memory once the last mapping goes, so a released but still
 * mapped allocation is briefly not counted.
 * Arrays have opaque, padded layouts; the charge is estimated from the descriptor (rows padded
 * to 512 B, the whole rounded up to 64 KiB, mip levels summed). */
#include "hook.h"

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags)
{
    vgpu_cuMemCreate_fn real = REAL(cuMemCreate);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = -1;
    if (vgpu_job() && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        dev = prop->location.id;
    if (!vgpu_acct_reserve(dev, size, "cuMemCreate"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(handle, size, prop, flags);
    /* VMM memory cannot be paged, so it is always within the request: wait for borrowers. */
    for (struct vgpu_giveway g = { 0 }; dev >= 0 && rc == CUDA_ERROR_OUT_OF_MEMORY && vgpu_giveway_wait(&g, dev, size, "cuMemCreate");)
        rc = real(handle, size, prop, flags);
    if (dev < 0)
        return rc;
    if (rc != CUDA_SUCCESS)
        vgpu_acct_release(dev, size);
    else if (!vgpu_ptr_put(VGPU_AK_VMM, *handle, dev, size))
        vgpu_acct_release(dev, size);
    return rc;
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    vgpu_cuMemRelease_fn real = REAL(cuMemRelease);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev;
    uint64_t bytes;
    bool tracked = vgpu_ptr_take(VGPU_AK_VMM, handle, &dev, &bytes);
    CUresult rc = real(handle);
    if (tracked) {
        if (rc == CUDA_SUCCESS)
            vgpu_acct_release(dev, bytes);
        else
            (void)vgpu_ptr_put(VGPU_AK_VMM, handle, dev, bytes);
    }
    return rc;
}

/* ---- arrays ---- */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    }
    return 16;                          /* formats we do not name (block-compressed, wider): generous */
}

/* A size that does not fit in 64 bits is charged as TOO_BIG: more than any GPU has, so any limit
 * refuses it, yet two of them still add up without wrapping. A wrapped product would have been
 * charged as a few bytes. */
#define TOO_BIG (UINT64_MAX / 2)

static uint64_t round_up(uint64_t v, uint64_t a)
{
    uint64_t t;
    return __builtin_add_overflow(v, a - 1, &t) ? TOO_BIG : t / a * a;
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f, unsigned channels)
{
    uint64_t row, b;
    if (__builtin_mul_overflow(w, format_bytes(f), &row) || __builtin_mul_overflow(row, channels ? channels : 1, &row))
        return TOO_BIG;
    row = round_up(row, 512);
    if (__builtin_mul_overflow(row, h ? h : 1, &b) || __builtin_mul_overflow(b, d ? d : 1, &b))
        return TOO_BIG;
    return b >= TOO_BIG ? TOO_BIG : round_up(b, 64 * 1024);
}

/* A 64-bit extent halves to 1 within 64 levels; the driver refuses more levels than that. The
 * cap keeps a bogus count (4 billion) from spinning here before the driver can say so. */
#define MAX_MIP_LEVELS 64

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *a, unsigned levels)
{
    uint64_t w = a->Width, h = a->Height, d = a->Depth, sum = 0;
    bool layered = (a->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    if (levels > MAX_MIP_LEVELS)
        levels = MAX_MIP_LEVELS;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        uint64_t b = array_bytes(w, h, d, a->Format, a->NumChannels);
        if (__builtin_add_overflow(sum, b, &sum) || sum >= TOO_BIG)
            return TOO_BIG;
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : (h ? 1 : 0);
        if (!layered)
            d = d > 1 ? d / 2 : (d ? 1 : 0);
    }
    return sum;
}

static CUresult finish_array(CUresult rc, uint64_t handle, int dev, uint64_t bytes)
{
    if (dev < 0)
        return rc;
    if (rc != CUDA_SUCCESS || !vgpu_ptr_put(VGPU_AK_ARRAY, handle, dev, bytes))
        vgpu_acct_release(dev, bytes);
    return rc;
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    vgpu_cuArrayCreate_v2_fn real = REAL(cuArrayCreate_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = vgpu_job() && desc ? vgpu_current_device() : -1;
    uint64_t bytes = desc ? array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels) : 0;
    if (!vgpu_acct_reserve(dev, bytes, "cuArrayCreate_v2"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(pHandle, desc);
    return finish_array(rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, dev, bytes);
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    vgpu_cuArray3DCreate_v2_fn real = REAL(cuArray3DCreate_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = vgpu_job() && desc ? vgpu_current_device() : -1;
    uint64_t bytes = desc ? array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels) : 0;
    if (!vgpu_acct_reserve(dev, bytes, "cuArray3DCreate_v2"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(pHandle, desc);
    return finish_array(rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, dev, bytes);
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                            unsigned int numMipmapLevels)
{
    vgpu_cuMipmappedArrayCreate_fn real = REAL(cuMipmappedArrayCreate);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = vgpu_job() && desc ? vgpu_current_device() : -1;
    uint64_t bytes = desc ? mipmap_bytes(desc, numMipmapLevels) : 0;
    if (!vgpu_acct_reserve(dev, bytes, "cuMipmappedArrayCreate"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(pHandle, desc, numMipmapLevels);
    return finish_array(rc, rc == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pHandle : 0, dev, bytes);
}

static CUresult destroy_array(uint64_t key, CUresult rc_of_real(uint64_t))
{
    int dev;
    uint64_t bytes;
    bool tracked = vgpu_ptr_take(VGPU_AK_ARRAY, key, &dev, &bytes);
    CUresult rc = rc_of_real(key);
    if (tracked) {
        if (rc == CUDA_SUCCESS)
            vgpu_acct_release(dev, bytes);
        else
            (void)vgpu_ptr_put(VGPU_AK_ARRAY, key, dev, bytes);
    }
    return rc;
}

static CUresult real_array_destroy(uint64_t key)
{
    vgpu_cuArrayDestroy_fn real = REAL(cuArrayDestroy);
    return real ? real((CUarray)(uintptr_t)key) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult real_mipmap_destroy(uint64_t key)
{
    vgpu_cuMipmappedArrayDestroy_fn real = REAL(cuMipmappedArrayDestroy);
    return real ? real((CUmipmappedArray)(uintptr_t)key) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    return destroy_array((uint64_t)(uintptr_t)hArray, real_array_destroy);
}

VGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return destroy_array((uint64_t)(uintptr_t)hMipmappedArray, real_mipmap_destroy);
}
