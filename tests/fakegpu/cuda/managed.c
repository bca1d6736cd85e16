/* managed.c: unified (managed) memory as the driver pages it (issue 18, item 8; issue 37).
 *
 * A managed allocation is host memory first: cuMemAllocManaged takes no device memory. The fake
 * keeps it in groups of 2 MiB (fc_uvm_group), each resident on the device or not (a count of
 * bytes, so a device that is full to the byte is filled to the byte), with what the driver
 * knows of it: whether it holds data yet, whether its preferred location is the CPU, whether
 * the device has mapped it in host memory. Pages become resident when they migrate there: a
 * prefetch to the device, or a kernel launch, which in the fake touches all of its context's
 * managed memory except groups preferred on the CPU or mapped remotely (those are accessed where
 * they are, as the driver does: measured on an H200, a range advised SET_PREFERRED_LOCATION CPU
 * and prefetched to the host is read over the link at 42 GB/s, not migrated, and stays so after
 * UNSET_PREFERRED_LOCATION until a prefetch brings it back). Only resident pages are charged to
 * the device, as evictable memory: when the device is full the process's own least recently
 * used pages go back to the host to make room (oversubscription), and an ordinary allocation of
 * any process evicts resident managed pages instead of failing, as the UVM driver gives way to
 * the resource manager (common/procs.c). Copies into managed memory do not migrate it.
 *
 * Migration costs time, at the GPU's rates (fs_uvm_rates, README.md "Managed memory's time"):
 * a kernel whose launch migrates N bytes in runs N / uvm_fault longer (its faults stall it on
 * the SMs: busy time); a prefetch is a copy on its stream (timeline.c FS_W_COPY: stream order,
 * no SMs, no busy time) of N / uvm_prefetch (pages with data), N / uvm_populate (pages never
 * touched) or N / uvm_prefetch_host (to the host). Residency changes when the call is made (the
 * driver takes the device pages up front); the time is when the stream is done with it. Every
 * page that migrates crosses the PCIe link and counts in the GPU's NVML byte counters
 * (fc_dev_pcie: in as rx, out as tx), as the real counters see it; freeing resident pages moves
 * nothing. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fakecuda.h"

#define FC_UVM_PAGE (2ULL << 20)
#define FC_UVM_DATA   1u   /* populated: its contents exist (on the device or the host) */
#define FC_UVM_CPU    2u   /* SET_PREFERRED_LOCATION CPU */
#define FC_UVM_MAPPED 4u   /* the device maps it in host memory: accessed remotely, not migrated */

static uint64_t use_clock;   /* guarded by fc_lock */
static unsigned live;        /* managed allocations of this process (fc_lock): none, nothing to do */

/* Bytes that moved, by what they cost: fresh pages are zero-filled where they land. */
struct moved { unsigned long long fresh, data; };

CUresult fc_managed_alloc(CUdeviceptr *dptr, size_t size)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t ngroups = (size_t)fc_round_up(size, FC_UVM_PAGE) / FC_UVM_PAGE;
    struct fc_uvm_group *groups = calloc(ngroups, sizeof *groups);
    if (!groups)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* NORESERVE: a large managed allocation costs nothing until touched, on the host as well. */
    void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (host == MAP_FAILED) {
        free(groups);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_new(FC_ALLOC_MANAGED, (CUdeviceptr)(uintptr_t)host, size, c->device, c);
    if (a) {
        a->host = host;
        a->groups = groups;
        a->ngroups = ngroups;
        a->last_use = ++use_clock;
        live++;
        *dptr = (CUdeviceptr)(uintptr_t)host;
    }
    pthread_mutex_unlock(&fc_lock);
    if (!a) {
        free(groups);
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

void fc_managed_release(struct fc_alloc *a)
{
    if (live)
        live--;
    if (a->resident)
        fc_dev_uncharge_managed(a->device, a->resident);
    a->resident = 0;
    free(a->groups);
    a->groups = NULL;
    a->ngroups = 0;
}

/* Time of `bytes` at `mbps` (MB/s; 0: none). */
static uint64_t ns_at(unsigned long long bytes, unsigned mbps)
{
    return mbps ? (uint64_t)((double)bytes * 1000.0 / mbps) : 0;
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

/* Caller holds fc_lock. Takes up to `bytes` of residency off groups [g0, g1) of a, the last
 * groups first; returns what it took (the caller uncharges it, or the driver already did). */
static unsigned long long drain(struct fc_alloc *a, size_t g0, size_t g1, unsigned long long bytes)
{
    unsigned long long took = 0;
    for (size_t g = g1; g > g0 && took < bytes; g--) {
        struct fc_uvm_group *grp = &a->groups[g - 1];
        unsigned long long take = grp->res < bytes - took ? grp->res : bytes - took;
        grp->res -= (uint32_t)take;
        took += take;
    }
    a->resident -= took;
    return took;
}

/* Caller holds fc_lock. Marks `bytes` of resident pages on `device` non-resident, least recently
 * used first, skipping `keep`; uncharges them when `uncharge` (the process's own eviction; the
 * driver's eviction for another allocation already took them off the device). */
static unsigned long long evict_lru(int device, unsigned long long bytes, const struct fc_alloc *keep, bool uncharge)
{
    unsigned long long moved = 0;
    struct fc_alloc *v;
    while (moved < bytes && (v = lru(device, keep))) {
        unsigned long long take = drain(v, 0, v->ngroups, bytes - moved);
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

/* A fault does not migrate this group: it is accessed where it is. */
static bool remote(const struct fc_uvm_group *grp)
{
    return grp->flags & (FC_UVM_CPU | FC_UVM_MAPPED);
}

/* Caller holds fc_lock. Makes groups [g0, g1) of a resident, in whole, in order, from free device
 * memory, then by evicting the process's own older pages; a fault (`fault`) skips the groups
 * accessed remotely, a prefetch takes them too (and unmaps them). Returns what moved in. */
static struct moved fill(struct fc_alloc *a, size_t g0, size_t g1, bool fault)
{
    struct moved m = { 0, 0 };
    fc_managed_sync_evictions(a->device);
    a->last_use = ++use_clock;
    unsigned long long want = 0;
    for (size_t g = g0; g < g1; g++)
        if (!(fault && remote(&a->groups[g])))
            want += FC_UVM_PAGE - a->groups[g].res;
    if (!want)
        return m;
    unsigned long long got = fc_dev_charge_managed(a->device, want);
    if (got < want) {
        unsigned long long freed = evict_lru(a->device, want - got, a, true);
        got += fc_dev_charge_managed(a->device, freed);
    }
    a->resident += got;
    fc_dev_pcie(a->device, 0, got);
    for (size_t g = g0; g < g1 && got; g++) {
        struct fc_uvm_group *grp = &a->groups[g];
        if (fault && remote(grp))
            continue;
        unsigned long long take = FC_UVM_PAGE - grp->res < got ? FC_UVM_PAGE - grp->res : got;
        if (!take)
            continue;
        if (grp->flags & FC_UVM_DATA)
            m.data += take;
        else
            m.fresh += take;
        grp->res += (uint32_t)take;
        grp->flags = (uint8_t)((grp->flags | FC_UVM_DATA) & ~FC_UVM_MAPPED);
        got -= take;
    }
    return m;
}

uint64_t fc_managed_on_launch(struct fc_ctx *ctx)
{
    if (!live)
        return 0;
    unsigned long long faulted = 0;
    for (struct fc_alloc *a = fc_alloc_first(); a; a = a->next) {
        if (a->kind != FC_ALLOC_MANAGED || a->ctx != ctx || a->device != ctx->device)
            continue;
        /* Groups preferred on the CPU that are not all on the device get mapped there. */
        for (size_t g = 0; g < a->ngroups; g++)
            if ((a->groups[g].flags & FC_UVM_CPU) && a->groups[g].res < FC_UVM_PAGE)
                a->groups[g].flags |= FC_UVM_MAPPED | FC_UVM_DATA;
        struct moved m = fill(a, 0, a->ngroups, true);
        faulted += m.fresh + m.data;
    }
    /* Fault-driven migration ran at the same rate for fresh pages and pages with data (H200). */
    return ns_at(faulted, fc_devs[ctx->device].uvm_fault_mbps);
}

/* ---- prefetch and advice ---- */

/* The managed allocation holding [p, p+n), or NULL. Caller holds fc_lock. */
static struct fc_alloc *managed_range(CUdeviceptr p, size_t n)
{
    struct fc_alloc *a = fc_alloc_find(p, true);
    if (!a || a->kind != FC_ALLOC_MANAGED || n > a->size || p - a->base > a->size - n)
        return NULL;
    return a;
}

/* The groups [*g0, *g1) that [p, p+n) of a touches. */
static void groups_of(const struct fc_alloc *a, CUdeviceptr p, size_t n, size_t *g0, size_t *g1)
{
    unsigned long long off = p - a->base;
    *g0 = (size_t)(off / FC_UVM_PAGE);
    *g1 = n ? (size_t)((off + n + FC_UVM_PAGE - 1) / FC_UVM_PAGE) : *g0;
    if (*g1 > a->ngroups)
        *g1 = a->ngroups;
}

/* dst: a device ordinal, or -1 (CU_DEVICE_CPU). A copy on the stream of the time it takes. */
static CUresult prefetch(CUdeviceptr p, size_t n, int dst, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && (dst < -1 || dst >= fc_ndev))
        r = CUDA_ERROR_INVALID_DEVICE;
    struct fc_alloc *a = r == CUDA_SUCCESS ? managed_range(p, n) : NULL;
    if (r == CUDA_SUCCESS && !a)
        r = CUDA_ERROR_INVALID_VALUE;
    uint64_t ns = 0;
    if (a) {
        size_t g0, g1;
        groups_of(a, p, n, &g0, &g1);
        const struct fc_device *d = &fc_devs[a->device];
        if (dst == a->device) {
            struct moved m = fill(a, g0, g1, false);
            ns = ns_at(m.data, d->uvm_prefetch_mbps) + ns_at(m.fresh, d->uvm_populate_mbps);
        } else if (dst == -1) {
            fc_managed_sync_evictions(a->device);
            unsigned long long b = drain(a, g0, g1, ~0ULL);
            fc_dev_uncharge_managed(a->device, b);
            fc_dev_pcie(a->device, b, 0);
            ns = ns_at(b, d->uvm_prefetch_host_mbps);
        }
        /* In stream order; a stream being captured records no copy (the pages move now). */
        if (ns && !(st && st->capture))
            fc_stream_enqueue_copy(c, st, ns);
    }
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
    return prefetch(devPtr, count, dstDevice, hStream, false);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    FC_TRACE();
    return prefetch(devPtr, count, dstDevice, hStream, true);
}
static CUresult prefetch_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream s, bool ptsz)
{
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS && flags)
        r = CUDA_ERROR_INVALID_VALUE;
    int dev = r == CUDA_SUCCESS ? location_device(loc, &r) : 0;
    return r != CUDA_SUCCESS ? r : prefetch(p, n, dev, s, ptsz);
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

/* Only the preferred location changes what the fake does (see the top of the file), per 2 MiB
 * group the range touches. Neither a SET nor an UNSET moves pages or unmaps them: groups the
 * device already maps in host memory stay remote until a prefetch to the device (as measured:
 * after UNSET a kernel still read them at 42 GB/s, twice). */
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
    if (!a) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || advice == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION) {
        bool cpu = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION && dev == -1;
        size_t g0, g1;
        groups_of(a, p, n, &g0, &g1);
        for (size_t g = g0; g < g1; g++)
            a->groups[g].flags = (uint8_t)(cpu ? a->groups[g].flags | FC_UVM_CPU : a->groups[g].flags & ~FC_UVM_CPU);
    }
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
