/* ctx.c: memory the driver takes on the job's behalf without an allocation call: context
 * overhead, cuCtxSetLimit (device malloc heap, stack), modules and libraries, graph memory.
 *
 * None of these has a size known in advance, so each is measured around the real call:
 *  - the first context of the process on a device: NVML's used memory of the device before and
 *    after (the context does not exist yet, so cuMemGetInfo cannot be asked before), once per
 *    device; a context that does not fit in the limit is undone and refused with
 *    CUDA_ERROR_OUT_OF_MEMORY, as the driver refuses one on a full GPU;
 *  - cuCtxSetLimit(STACK_SIZE | MALLOC_HEAP_SIZE) and module/library loads: free memory through
 *    the real cuMemGetInfo before and after; over the limit the change is undone (old limit
 *    restored, module unloaded) and CUDA_ERROR_OUT_OF_MEMORY returned;
 *  - graph memory: the device's graph pool (RESERVED_MEM_CURRENT) after instantiate and launch
 *    of graphs, once the process has used graph memory nodes or stream capture; it cannot be
 *    refused after the fact, so growth is charged even past the limit; trim releases it.
 * Measurements through device-wide counters can include another process's simultaneous
 * allocation; NVML reconciliation (nvml.c) corrects the context share. */
#include <stdatomic.h>

#include "hook.h"
#include "vgpu/region.h"

/* ---- contexts ---- */

static _Atomic bool ctx_charged[VGPU_REGION_MAX_DEVICES];

struct ctx_probe {
    int dev;
    bool measuring;
    uint64_t before;
};

static struct ctx_probe ctx_begin(CUdevice dev)
{
    struct ctx_probe p = { dev, false, 0 };
    if (!vgpu_job() || dev < 0 || dev >= VGPU_REGION_MAX_DEVICES || atomic_load(&ctx_charged[dev]))
        return p;
    p.measuring = vgpu_nvml_device_used(dev, &p.before);
    return p;
}

/* Charges the new context's overhead; false when it does not fit in the limit (the caller then
 * undoes the context and returns CUDA_ERROR_OUT_OF_MEMORY, as the driver does when a GPU has
 * no room for a context). */
static bool ctx_end(struct ctx_probe *p, CUresult rc)
{
    if (!p->measuring || rc != CUDA_SUCCESS)
        return true;
    uint64_t after;
    if (!vgpu_nvml_device_used(p->dev, &after) || atomic_exchange(&ctx_charged[p->dev], true))
        return true;
    uint64_t overhead = after > p->before ? after - p->before : 0;
    if (!vgpu_acct_reserve_measured(p->dev, overhead, "context creation")) {
        atomic_store(&ctx_charged[p->dev], false);
        return false;
    }
    vgpu_ctx_overhead_charged(p->dev, overhead);
    vgpu_debug("context overhead on GPU %d: %llu bytes", p->dev, (unsigned long long)overhead);
    return true;
}

static void undo_primary(CUdevice dev)
{
    vgpu_cuDevicePrimaryCtxRelease_v2_fn rel =
        (vgpu_cuDevicePrimaryCtxRelease_v2_fn)vgpu_real_cuda_sym("cuDevicePrimaryCtxRelease_v2");
    if (rel)
        (void)rel(dev);
}

static void undo_created(CUcontext *pctx)
{
    vgpu_cuCtxDestroy_v2_fn destroy = (vgpu_cuCtxDestroy_v2_fn)vgpu_real_cuda_sym("cuCtxDestroy_v2");
    if (destroy && pctx && *pctx)
        (void)destroy(*pctx);
    if (pctx)
        *pctx = NULL;
}

#define CTX_WRAP(sym, dev, args, undo)                                             \
    vgpu_##sym##_fn real = REAL(sym);                                              \
    if (!real)                                                                     \
        return CUDA_ERROR_NOT_INITIALIZED;                                         \
    struct ctx_probe probe = ctx_begin(dev);                                       \
    CUresult rc = real args;                                                       \
    if (!ctx_end(&probe, rc)) {                                                    \
        undo;                                                                      \
        return CUDA_ERROR_OUT_OF_MEMORY;                                           \
    }                                                                              \
    return rc;

VGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CTX_WRAP(cuDevicePrimaryCtxRetain, dev, (pctx, dev), undo_primary(dev))
}

VGPU_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate, dev, (pctx, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v2, dev, (pctx, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                    unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v3, dev, (pctx, paramsArray, numParams, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                    CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v4, dev, (pctx, ctxCreateParams, flags, dev), undo_created(pctx))
}

/* ---- cuCtxSetLimit ---- */

static _Atomic uint64_t limit_charge[VGPU_REGION_MAX_DEVICES][2];  /* [dev][stack, heap] */

VGPU_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    vgpu_cuCtxSetLimit_fn real = REAL(cuCtxSetLimit);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    int which = limit == CU_LIMIT_STACK_SIZE ? 0 : limit == CU_LIMIT_MALLOC_HEAP_SIZE ? 1 : -1;
    int dev = which >= 0 && vgpu_job() ? vgpu_current_device() : -1;
    uint64_t free0, free1, total;
    vgpu_cuCtxGetLimit_fn get = (vgpu_cuCtxGetLimit_fn)vgpu_real_cuda_sym("cuCtxGetLimit");
    size_t old = 0;
    if (dev < 0 || dev >= VGPU_REGION_MAX_DEVICES || !get || get(&old, limit) != CUDA_SUCCESS ||
        !vgpu_real_meminfo(&free0, &total))
        return real(limit, value);
    CUresult rc = real(limit, value);
    if (rc != CUDA_SUCCESS || !vgpu_real_meminfo(&free1, &total))
        return rc;
    if (free1 < free0) {
        uint64_t grow = free0 - free1;
        if (!vgpu_acct_reserve_measured(dev, grow, "cuCtxSetLimit")) {
            (void)real(limit, old);    /* undo: the job cannot afford it */
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        atomic_fetch_add(&limit_charge[dev][which], grow);
    } else if (free1 > free0) {
        uint64_t shrink = free1 - free0, had = atomic_load(&limit_charge[dev][which]);
        if (shrink > had)
            shrink = had;
        atomic_fetch_sub(&limit_charge[dev][which], shrink);
        vgpu_acct_release(dev, shrink);
    }
    return rc;
}

/* ---- modules and libraries ---- */

struct load_probe {
    int dev;
    uint64_t free0;
};

static struct load_probe load_begin(void)
{
    struct load_probe p = { -1, 0 };
    uint64_t total;
    if (vgpu_job() && vgpu_real_meminfo(&p.free0, &total))
        p.dev = vgpu_current_device();
    return p;
}

/* 0 when fine; CUDA_ERROR_OUT_OF_MEMORY when the load must be undone. */
static CUresult load_end(struct load_probe *p, uint64_t handle, const char *what)
{
    uint64_t free1, total;
    if (p->dev < 0 || !vgpu_real_meminfo(&free1, &total) || free1 >= p->free0)
        return CUDA_SUCCESS;
    uint64_t grow = p->free0 - free1;
    if (!vgpu_acct_reserve_measured(p->dev, grow, what))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!vgpu_ptr_put(VGPU_AK_MODULE, handle, p->dev, grow))
        vgpu_acct_release(p->dev, grow);
    return CUDA_SUCCESS;
}

#define MODULE_LOAD(sym, args)                                                          \
    vgpu_##sym##_fn real = REAL(sym);                                                   \
    if (!real)                                                                          \
        return CUDA_ERROR_NOT_INITIALIZED;                                              \
    struct load_probe probe = load_begin();                                             \
    CUresult rc = real args;                                                            \
    if (rc == CUDA_SUCCESS && load_end(&probe, (uint64_t)(uintptr_t)*module, #sym)) {   \
        vgpu_cuModuleUnload_fn unload = REAL(cuModuleUnload);                           \
        if (unload)                                                                     \
            (void)unload(*module);                                                      \
        *module = NULL;                                                                 \
        return CUDA_ERROR_OUT_OF_MEMORY;                                                \
    }                                                                                   \
    return rc;

VGPU_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    MODULE_LOAD(cuModuleLoad, (module, fname))
}

VGPU_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    MODULE_LOAD(cuModuleLoadData, (module, image))
}

VGPU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                        CUjit_option *options, void **optionValues)
{
    MODULE_LOAD(cuModuleLoadDataEx, (module, image, numOptions, options, optionValues))
}

VGPU_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    MODULE_LOAD(cuModuleLoadFatBinary, (module, fatCubin))
}

static void unload_release(uint64_t handle)
{
    int dev;
    uint64_t bytes;
    if (vgpu_ptr_take(VGPU_AK_MODULE, handle, &dev, &bytes))
        vgpu_acct_release(dev, bytes);
}

VGPU_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    vgpu_cuModuleUnload_fn real = REAL(cuModuleUnload);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(hmod);
    if (rc == CUDA_SUCCESS)
        unload_release((uint64_t)(uintptr_t)hmod);
    return rc;
}

VGPU_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                       void **jitOptionsValues, unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                       unsigned int numLibraryOptions)
{
    vgpu_cuLibraryLoadData_fn real = REAL(cuLibraryLoadData);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct load_probe probe = load_begin();
    CUresult rc = real(library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                       libraryOptionValues, numLibraryOptions);
    if (rc == CUDA_SUCCESS && load_end(&probe, (uint64_t)(uintptr_t)*library, "cuLibraryLoadData")) {
        vgpu_cuLibraryUnload_fn unload = REAL(cuLibraryUnload);
        if (unload)
            (void)unload(*library);
        *library = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

VGPU_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    vgpu_cuLibraryUnload_fn real = REAL(cuLibraryUnload);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(library);
    if (rc == CUDA_SUCCESS)
        unload_release((uint64_t)(uintptr_t)library);
    return rc;
}

/* ---- graph memory ---- */

static _Atomic bool graph_mem_seen;
static _Atomic uint64_t graph_charged[VGPU_REGION_MAX_DEVICES];

void vgpu_graphmem_reconcile(int dev)
{
    if (!atomic_load_explicit(&graph_mem_seen, memory_order_relaxed) || dev < 0 || dev >= VGPU_REGION_MAX_DEVICES)
        return;
    vgpu_cuDeviceGetGraphMemAttribute_fn f =
        (vgpu_cuDeviceGetGraphMemAttribute_fn)vgpu_real_cuda_sym("cuDeviceGetGraphMemAttribute");
    cuuint64_t reserved = 0;
    if (!f || f(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS)
        return;
    uint64_t old = atomic_exchange(&graph_charged[dev], reserved);
    if (reserved > old)
        vgpu_acct_force(dev, reserved - old);
    else if (old > reserved)
        vgpu_acct_release(dev, old - reserved);
}

void vgpu_graph_launched(void)
{
    if (__builtin_expect(atomic_load_explicit(&graph_mem_seen, memory_order_relaxed), 0) && vgpu_job())
        vgpu_graphmem_reconcile(vgpu_current_device());
}

static void saw_graph_memory(void)
{
    if (!atomic_load_explicit(&graph_mem_seen, memory_order_relaxed))
        atomic_store(&graph_mem_seen, true);
}

VGPU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    saw_graph_memory();
    CALL_REAL(cuGraphAddMemAllocNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

VGPU_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    saw_graph_memory();
    CALL_REAL(cuStreamBeginCapture, (hStream));
}

VGPU_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    saw_graph_memory();
    CALL_REAL(cuStreamBeginCapture_ptsz, (hStream));
}

VGPU_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    saw_graph_memory();
    CALL_REAL(cuStreamBeginCapture_v2, (hStream, mode));
}

VGPU_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    saw_graph_memory();
    CALL_REAL(cuStreamBeginCapture_v2_ptsz, (hStream, mode));
}

VGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    vgpu_cuGraphInstantiateWithFlags_fn real = REAL(cuGraphInstantiateWithFlags);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(phGraphExec, hGraph, flags);
    if (rc == CUDA_SUCCESS)
        vgpu_graph_launched();
    return rc;
}

VGPU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    vgpu_cuDeviceGraphMemTrim_fn real = REAL(cuDeviceGraphMemTrim);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(device);
    if (rc == CUDA_SUCCESS && vgpu_job())
        vgpu_graphmem_reconcile(device);
    return rc;
}
