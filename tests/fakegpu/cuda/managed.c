/* managed.c: unified (managed) memory as the driver pages it (issue 18, item 8).
 *
 * A managed allocation is host memory first: cuMemAllocManaged takes no device memory. Pages
 * become resident on the device when they migrate there (a prefetch to the device, or a kernel
 * launch, which in the fake touches all of its context's managed memory, except ranges whose
 * preferred location is the CPU: those are accessed remotely, as with SET_ACCESSED_BY). Only
 * resident pages are charged to the device, as evictable memory: when the device is full the
 * process's own least recently used pages go back to the host to make room (oversubscription),
 * and an ordinary allocation of any process evicts resident managed pages instead of failing,
 * as the UVM driver gives way to the resource manager (common/procs.c). The fake tracks a
 * resident byte count per allocation, in 2 MiB pages, not which pages; copies into managed
 * memory do not migrate it. Every page that migrates crosses the PCIe link and counts in the
 * GPU's NVML byte counters (fc_dev_pcie: in as rx, out as tx), as the real counters see it;
 * freeing resident pages moves nothing. */
#include <string.h>
#include <sys/mman.h>

#include "fakecuda.h"

#define FC_UVM_PAGE (2ULL << 20)

static uint64_t use_clock;   /* guarded by fc_lock */
static unsigned live;        /* managed allocations of this process (fc_lock): none, nothing to do */

CUresult fc_managed_alloc(CUdeviceptr *dptr, size_t size)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* NORESERVE: a large managed allocation costs nothing until touched, on the host as well. */
    void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_new(FC_ALLOC_MANAGED, (CUdeviceptr)(uintptr_t)host, size, c->device, c);
    if (a) {
        a->host = host;
        a->preferred = -2;
        a->last_use = ++use_clock;
        live++;
        *dptr = (CUdeviceptr)(uintptr_t)host;
    }
    pthread_mutex_unlock(&fc_lock);
    if (!a) {
        munmap(host, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FC_TRACE();
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return fc_managed_alloc(dptr, bytesize);
}

static unsigned long long pages_of(unsigned long long bytes)
{
    return fc_round_up(bytes, FC_UVM_PAGE);
}

void fc_managed_release(struct fc_alloc *a)
{
    if (live)
        live--;
    if (a->resident)
        fc_dev_uncharge_managed(a->device, a->resident);
    a->resident = 0;
}

/* The least recently used managed allocation on `device` with resident pages, other than keep. */
static struct fc_alloc *lru(int device, const struct fc_alloc *keep)
{
    struct fc_alloc *best = NULL;
    for (struct fc_alloc *a = fc_alloc_first(); a; a = a->next)
        if (a->kind == FC_ALLOC_MANAGED && a->device == device && a != keep && a->resident &&
            (!best || a->last_use < best->last_use))
            best = a;
    return best;
}

/* Caller holds fc_lock. Marks `bytes` of resident pages on `device` non-resident, least recently
 * used first, skipping `keep`; uncharges them when `uncharge` (the process's own eviction; the
 * driver's eviction for another allocation already took them off the device). */
static unsigned long long evict_lru(int device, unsigned long long bytes, const struct fc_alloc *keep, bool uncharge)
{
    unsigned long long moved = 0;
    struct fc_alloc *v;
    while (moved < bytes && (v = lru(device, keep))) {
        unsigned long long take = v->resident < bytes - moved ? v->resident : bytes - moved;
        v->resident -= take;
        moved += take;
        if (uncharge) {
            fc_dev_uncharge_managed(device, take);
            fc_dev_pcie(device, take, 0);   /* the driver's eviction counted its own (common/procs.c) */
        }
    }
    return moved;
}

void fc_managed_sync_evictions(int device)
{
    if (!live)
        return;
    unsigned long long gone = fc_dev_take_evicted(device);
    if (gone)
        (void)evict_lru(device, gone, NULL, false);
}

/* Caller holds fc_lock. Makes up to `want` more bytes of `a` resident (whole pages): from free
 * device memory, then by evicting the process's own older pages. */
static void migrate_in(struct fc_alloc *a, unsigned long long want)
{
    fc_managed_sync_evictions(a->device);
    unsigned long long room = pages_of(a->size) - a->resident;
    want = pages_of(want) < room ? pages_of(want) : room;
    a->last_use = ++use_clock;
    if (!want)
        return;
    unsigned long long got = fc_dev_charge_managed(a->device, want);
    if (got < want) {
        unsigned long long freed = evict_lru(a->device, want - got, a, true);
        got += fc_dev_charge_managed(a->device, freed);
    }
    a->resident += got;
    fc_dev_pcie(a->device, 0, got);
}

static void migrate_out(struct fc_alloc *a, unsigned long long bytes)
{
    fc_managed_sync_evictions(a->device);
    unsigned long long b = pages_of(bytes) < a->resident ? pages_of(bytes) : a->resident;
    a->resident -= b;
    fc_dev_uncharge_managed(a->device, b);
    fc_dev_pcie(a->device, b, 0);
}

void fc_managed_on_launch(struct fc_ctx *ctx)
{
    if (!live)
        return;
    for (struct fc_alloc *a = fc_alloc_first(); a; a = a->next)
        if (a->kind == FC_ALLOC_MANAGED && a->ctx == ctx && a->device == ctx->device && a->preferred != -1)
            migrate_in(a, a->size);
}

/* ---- prefetch and advice ---- */

static CUresult stream_ok(CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

/* The managed allocation holding [p, p+n), or NULL. Caller holds fc_lock. */
static struct fc_alloc *managed_range(CUdeviceptr p, size_t n)
{
    struct fc_alloc *a = fc_alloc_find(p, true);
    if (!a || a->kind != FC_ALLOC_MANAGED || n > a->size || p - a->base > a->size - n)
        return NULL;
    return a;
}

/* dst: a device ordinal, or -1 (CU_DEVICE_CPU). */
static CUresult prefetch(CUdeviceptr p, size_t n, int dst)
{
    if (dst < -1 || dst >= fc_ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = managed_range(p, n);
    CUresult r = a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (a && dst == a->device)
        migrate_in(a, n);
    else if (a && dst == -1)
        migrate_out(a, n);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static int location_device(CUmemLocation loc, CUresult *r)
{
    *r = CUDA_SUCCESS;
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (loc.id < 0 || loc.id >= fc_ndev)
            *r = CUDA_ERROR_INVALID_DEVICE;
        return loc.id;
    }
    if (loc.type == CU_MEM_LOCATION_TYPE_HOST || loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
        loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)
        return -1;
    *r = CUDA_ERROR_INVALID_VALUE;
    return -1;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, false);
    return r != CUDA_SUCCESS ? r : prefetch(devPtr, count, dstDevice);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, true);
    return r != CUDA_SUCCESS ? r : prefetch(devPtr, count, dstDevice);
}
static CUresult prefetch_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s, bool ptsz)
{
    CUresult r = stream_ok(s, ptsz);
    if (r == CUDA_SUCCESS && flags)
        r = CUDA_ERROR_INVALID_VALUE;
    int dev = r == CUDA_SUCCESS ? location_device(loc, &r) : 0;
    return r != CUDA_SUCCESS ? r : prefetch(p, n, dev);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream)
{
    FC_TRACE();
    return prefetch_v2(devPtr, count, location, flags, hStream, false);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream hStream)
{
    FC_TRACE();
    return prefetch_v2(devPtr, count, location, flags, hStream, true);
}

/* Only the preferred location changes what the fake does (see the top of the file). */
static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise advice, int dev)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if ((int)advice < 1 || (int)advice > 6)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < -1 || dev >= fc_ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = managed_range(p, n);
    if (!a)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION)
        a->preferred = dev;
    else if (advice == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION)
        a->preferred = -2;
    pthread_mutex_unlock(&fc_lock);
    return r;
}
CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    FC_TRACE();
    return advise(devPtr, count, advice, device);
}
CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    FC_TRACE();
    CUresult r;
    int dev = location_device(location, &r);
    return r != CUDA_SUCCESS ? r : advise(devPtr, count, advice, dev);
}

/* ---- IPC: device memory only; the driver refuses managed memory ---- */

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(dptr, false);
    r = a && a->kind == FC_ALLOC_DEVICE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&fc_lock);
    if (r == CUDA_SUCCESS) {
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle->reserved, &dptr, sizeof dptr);
    }
    return r;
}

/* ---- mapped host memory: cuMemHostAlloc(DEVICEMAP) memory as the device addresses it ---- */

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find((CUdeviceptr)(uintptr_t)p, true);
    r = a && a->kind == FC_ALLOC_HOST ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&fc_lock);
    if (r == CUDA_SUCCESS)
        *pdptr = (CUdeviceptr)(uintptr_t)p;   /* unified addressing: the same address */
    return r;
}
