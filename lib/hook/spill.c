/* spill.c: virtual device memory (vgpu run --oversubscribe, issue 15).
 *
 * Past the job's device share, cuMemAlloc_v2 is served from managed memory that prefers the
 * job's GPU: cuMemAllocManaged(GLOBAL), then cuMemAdvise SET_PREFERRED_LOCATION and
 * SET_ACCESSED_BY to the device. The program gets an ordinary device pointer (unified
 * addressing), usable in kernels and copies; the driver migrates the pages it touches onto the
 * GPU while there is room and evicts them back to host memory when there is not, including when
 * another process's ordinary allocation needs the room. Why managed and not mapped host memory
 * (cuMemHostAlloc DEVICEMAP), see libvgpu(7): pinned memory would lock the whole spill in host
 * RAM up front and send every access over PCIe, while managed pages are populated on demand and
 * a small hot set runs from device memory at full speed (tests/gpu/oversub.sh measures both).
 * The advice is best effort: a driver that refuses it still has working managed memory.
 *
 * Borrowed memory (--mem REQUEST:LIMIT, issue 37) is served the same way past the REQUEST, and is
 * then prefetched onto the GPU (cuMemPrefetchAsync on the allocating context's default stream),
 * so that while the GPU has room it runs at device speed rather than migrating on first touch
 * (tests/gpu/RESULTS-oversub.txt: managed memory touched whole ran at 294 GB/s against 3259 for
 * plain device memory on an H200). The prefetch is asynchronous and best effort too: a GPU
 * without room keeps the pages on the host, where the driver migrates them on touch. */
#include "hook.h"

#include <string.h>

typedef CUresult (*advise_fn)(CUdeviceptr, size_t, CUmem_advise, CUdevice);
typedef CUresult (*prefetch_fn)(CUdeviceptr, size_t, CUdevice, CUstream);

CUresult vgpu_spill_alloc(CUdeviceptr *dptr, size_t bytes, int dev)
{
    vgpu_cuMemAllocManaged_fn real = REAL(cuMemAllocManaged);
    CUresult rc = real ? real(dptr, bytes, CU_MEM_ATTACH_GLOBAL) : CUDA_ERROR_NOT_INITIALIZED;
    if (rc != CUDA_SUCCESS) {
        /* Host memory ran out as well: the program sees the driver's own answer. */
        vgpu_acct_release_spilled(dev, bytes);
        return rc == CUDA_ERROR_NOT_INITIALIZED ? rc : CUDA_ERROR_OUT_OF_MEMORY;
    }
    advise_fn advise = (advise_fn)vgpu_real_cuda_sym("cuMemAdvise");
    if (advise && dev >= 0) {
        (void)advise(*dptr, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev);
        (void)advise(*dptr, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, dev);
    }
    prefetch_fn prefetch = dev >= 0 && vgpu_acct_lending(dev) ? (prefetch_fn)vgpu_real_cuda_sym("cuMemPrefetchAsync")
                                                              : NULL;
    if (prefetch)
        (void)prefetch(*dptr, bytes, dev, NULL);
    if (dev >= 0 && !vgpu_ptr_put(VGPU_AK_SPILLED, *dptr, dev, bytes))
        vgpu_acct_release_spilled(dev, bytes);   /* cannot remember it: keep no charge we cannot free */
    else if (prefetch)
        vgpu_squeeze_track(*dptr, bytes, dev);   /* borrowed: it gives way to other jobs' requests */
    return CUDA_SUCCESS;
}

/* IPC export of memory that spilled: it is not device memory (the driver refuses managed memory
 * for IPC), and it exists only because the device share was used, so the answer is the one the
 * allocation would have had without --oversubscribe. Everything else passes through. */
VGPU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    vgpu_cuIpcGetMemHandle_fn real = REAL(cuIpcGetMemHandle);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int dev;
    uint64_t bytes;
    if (vgpu_job() && vgpu_ptr_take(VGPU_AK_SPILLED, dptr, &dev, &bytes)) {
        (void)vgpu_ptr_put(VGPU_AK_SPILLED, dptr, dev, bytes);
        if (vgpu_acct_lending(dev))
            vgpu_warn("%s: cuIpcGetMemHandle of memory borrowed past the job's REQUEST (managed memory, which the "
                      "driver cannot share by IPC) refused with CUDA_ERROR_OUT_OF_MEMORY; allocate memory to share "
                      "within the REQUEST, or raise it (vgpu limit JOB --mem REQUEST:)", vgpu_job_label());
        else
            vgpu_warn("%s: cuIpcGetMemHandle of memory allocated past the job's device share (it lives off the "
                  "device) refused with CUDA_ERROR_OUT_OF_MEMORY; allocate memory to share before the share is "
                  "used, or give a larger --oversubscribe=DEVICE_SIZE", vgpu_job_label());
        if (pHandle)
            memset(pHandle, 0, sizeof *pHandle);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return real(pHandle, dptr);
}
