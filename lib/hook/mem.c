/* mem.c: linear, pitched and managed device memory (interception.md §2, first rows).
 * Reserve before the real call, release when it fails, remember what was charged by pointer;
 * a free releases exactly that, and a pointer we never charged passes straight through. */
#include "hook.h"

/* The job device to charge, or -1 when there is no job (then nothing is recorded at all). */
static int charge_device(void)
{
    return vgpu_job() ? vgpu_current_device() : -1;
}

static void remember(uint64_t ptr, int dev, uint64_t bytes)
{
    if (dev >= 0 && bytes && !vgpu_ptr_put(VGPU_AK_LINEAR, ptr, dev, bytes))
        vgpu_acct_release(dev, bytes);   /* cannot remember it: do not keep a charge we cannot free */
}

/* The allocation most programs use (cudaMalloc): the one that spills past an oversubscribed
 * job's device share (spill.c), and also when the GPU itself has no room left for it. */
VGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    vgpu_cuMemAlloc_v2_fn real = REAL(cuMemAlloc_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = charge_device();
    bool spill = false;
    if (!vgpu_acct_reserve_spillable(dev, bytesize, "cuMemAlloc_v2", &spill))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (spill)
        return vgpu_spill_alloc(dptr, bytesize, dev);
    CUresult rc = real(dptr, bytesize);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && vgpu_acct_mark_spilled(dev, bytesize))
        return vgpu_spill_alloc(dptr, bytesize, dev);
    /* Within the job's promise, but other jobs' borrowed memory holds the room: wait for them to
     * give way, at most a second (giveway.c). */
    for (struct vgpu_giveway g = { 0 }; rc == CUDA_ERROR_OUT_OF_MEMORY && vgpu_giveway_wait(&g, dev, bytesize, "cuMemAlloc_v2");)
        rc = real(dptr, bytesize);
    if (rc != CUDA_SUCCESS)
        vgpu_acct_release(dev, bytesize);
    else
        remember(*dptr, dev, bytesize);
    return rc;
}

/* The CUDA 2.x ABI: 32-bit size and pointer. */
VGPU_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    vgpu_cuMemAlloc_fn real = REAL(cuMemAlloc);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = charge_device();
    if (!vgpu_acct_reserve(dev, bytesize, "cuMemAlloc"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(dptr, bytesize);
    if (rc != CUDA_SUCCESS)
        vgpu_acct_release(dev, bytesize);
    else
        remember(*dptr, dev, bytesize);
    return rc;
}

/* The driver picks the pitch; reserve an upper bound (rows padded to 512 B, the largest
 * pitch alignment of current GPUs), then settle on pitch x height once it is known. */
static uint64_t pitch_bound(uint64_t width, uint64_t height)
{
    /* Checked: a width near 2^64 used to wrap to a bound of 0 bytes. UINT64_MAX / 2 is refused
     * by any limit and cannot wrap when added to what is charged already. */
    uint64_t w, b;
    if (__builtin_add_overflow(width, 511, &w) || __builtin_mul_overflow(w / 512 * 512, height, &b))
        return UINT64_MAX / 2;
    return b;
}

/* What the driver's pitch x height really takes (saturating, like pitch_bound). */
static uint64_t pitched_bytes(uint64_t pitch, uint64_t height)
{
    uint64_t b;
    return __builtin_mul_overflow(pitch, height, &b) ? UINT64_MAX / 2 : b;
}

static void settle(int dev, uint64_t reserved, uint64_t actual)
{
    if (actual > reserved)
        vgpu_acct_force(dev, actual - reserved);
    else
        vgpu_acct_release(dev, reserved - actual);
}

VGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                        unsigned int ElementSizeBytes)
{
    vgpu_cuMemAllocPitch_v2_fn real = REAL(cuMemAllocPitch_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = charge_device();
    uint64_t bound = pitch_bound(WidthInBytes, Height);
    if (!vgpu_acct_reserve(dev, bound, "cuMemAllocPitch_v2"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    for (struct vgpu_giveway g = { 0 }; rc == CUDA_ERROR_OUT_OF_MEMORY && vgpu_giveway_wait(&g, dev, bound, "cuMemAllocPitch_v2");)
        rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc != CUDA_SUCCESS) {
        vgpu_acct_release(dev, bound);
        return rc;
    }
    uint64_t actual = pitched_bytes(*pPitch, Height);
    if (dev >= 0)
        settle(dev, bound, actual);
    remember(*dptr, dev, actual);
    return rc;
}

VGPU_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                     unsigned int Height, unsigned int ElementSizeBytes)
{
    vgpu_cuMemAllocPitch_fn real = REAL(cuMemAllocPitch);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = charge_device();
    uint64_t bound = pitch_bound(WidthInBytes, Height);
    if (!vgpu_acct_reserve(dev, bound, "cuMemAllocPitch"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc != CUDA_SUCCESS) {
        vgpu_acct_release(dev, bound);
        return rc;
    }
    uint64_t actual = pitched_bytes(*pPitch, Height);
    if (dev >= 0)
        settle(dev, bound, actual);
    remember(*dptr, dev, actual);
    return rc;
}

/* Managed memory is charged in full to the current device: it can be resident there at any
 * time, and a limit that counted only what is resident would move under the job's feet. In an
 * oversubscribed job it counts against the cap and off the device share, as spilled memory. */
VGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    vgpu_cuMemAllocManaged_fn real = REAL(cuMemAllocManaged);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev = charge_device();
    bool spilled = false;
    if (!vgpu_acct_reserve_paged(dev, bytesize, "cuMemAllocManaged", &spilled))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(dptr, bytesize, flags);
    if (rc != CUDA_SUCCESS) {
        if (spilled)
            vgpu_acct_release_spilled(dev, bytesize);
        else
            vgpu_acct_release(dev, bytesize);
    } else if (!spilled) {
        remember(*dptr, dev, bytesize);
    } else if (!vgpu_ptr_put(VGPU_AK_SPILLED, *dptr, dev, bytesize)) {
        vgpu_acct_release_spilled(dev, bytesize);
    }
    return rc;
}

/* Take the record first (the address cannot be handed out again before the real free), put it
 * back if the driver refuses the free. */
static CUresult free_linear(uint64_t ptr, CUresult rc_of_real_free(uint64_t))
{
    int dev;
    uint64_t bytes;
    enum vgpu_alloc_kind kind = VGPU_AK_LINEAR;
    bool tracked = vgpu_ptr_take(kind, ptr, &dev, &bytes);
    if (!tracked && vgpu_ptr_take(VGPU_AK_SPILLED, ptr, &dev, &bytes)) {
        tracked = true;
        kind = VGPU_AK_SPILLED;
        vgpu_squeeze_forget(ptr);   /* before the real free: no move of memory being freed */
    }
    CUresult rc = rc_of_real_free(ptr);
    if (tracked) {
        if (rc != CUDA_SUCCESS)
            (void)vgpu_ptr_put(kind, ptr, dev, bytes);
        else if (kind == VGPU_AK_SPILLED)
            vgpu_acct_release_spilled(dev, bytes);
        else
            vgpu_acct_release(dev, bytes);
    }
    return rc;
}

static CUresult real_free_v2(uint64_t ptr)
{
    vgpu_cuMemFree_v2_fn real = REAL(cuMemFree_v2);
    return real ? real((CUdeviceptr)ptr) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult real_free_v1(uint64_t ptr)
{
    vgpu_cuMemFree_fn real = REAL(cuMemFree);
    return real ? real((CUdeviceptr_v1)ptr) : CUDA_ERROR_NOT_INITIALIZED;
}

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return free_linear(dptr, real_free_v2);
}

VGPU_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    return free_linear(dptr, real_free_v1);
}
