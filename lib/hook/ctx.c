/* ctx.c: memory the driver takes on the job's behalf without an allocation call: context
 * overhead, cuCtxSetLimit (device malloc heap, stack), modules and libraries (graph memory is
 * graphmem.c's).
 *
 * None of these has a size known in advance, so each is measured around the real call:
 *  - each context the process creates: its own per-process memory in NVML before and after (see
 *    "contexts" below for the rule and its bound); a context that does not fit in the limit is
 *    undone and refused with CUDA_ERROR_OUT_OF_MEMORY, as the driver refuses one on a full GPU;
 *  - cuCtxSetLimit(STACK_SIZE | MALLOC_HEAP_SIZE) and module/library loads: free memory through
 *    the real cuMemGetInfo before and after; over the limit the change is undone (old limit
 *    restored, module unloaded) and CUDA_ERROR_OUT_OF_MEMORY returned;
 * Measurements through device-wide counters (cuCtxSetLimit, modules) can include another
 * process's simultaneous allocation; NVML reconciliation (nvml.c) corrects the context share. */
#include <pthread.h>
#include <stdatomic.h>

#include "hook.h"
#include "vgpu/region.h"

/* The driver's initialisation, before any context: NVML, which measures each context (below),
 * starts beside it on a thread of its own instead of inside the first creation, where a job's
 * start waited for it (2026-12-02, H200: ~20 ms of nvmlInit in every job's first context). */
VGPU_EXPORT CUresult cuInit(unsigned int Flags)
{
    vgpu_cuInit_fn real = REAL(cuInit);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_nvml_start();
    return real(Flags);
}

/* ---- contexts ----
 *
 * A process is charged its own context, never another process's memory (issue 11, part 1):
 * processes of one job (8 PyTorch ranks), or two jobs, often create their contexts at the same
 * instant, and a device-wide measurement around one creation then includes all the others.
 *  - The driver's per-process figure first: NVML's used memory for this pid on the device
 *    (nvmlDeviceGetComputeRunningProcesses) before and after the real call. Its growth, less
 *    what this process's other threads were charged meanwhile, is the context's cost. Before a
 *    process's first context on a whole GPU the figure is 0 and is not asked (ctx_begin).
 *  - A process in a container with its own /proc does not know the pid NVML lists it by (its
 *    host pid) until `vgpu run`'s walk records it in the slot: it waits for that first
 *    (vgpu_nvml_await_self, bounded).
 *  - Where NVML gives no per-process figure (NVML_VALUE_NOT_AVAILABLE on some MIG setups, or
 *    the process not listed, or its host pid unknown): the device-wide delta, clamped to
 *    CTX_CHARGE_MAX. A context on
 *    current GPUs takes 300-600 MiB, so a creation is never charged more than that bound,
 *    however many processes start at the same time; man/libvgpu.7 documents it.
 * Every context costs its own memory, so every creation is measured: each cuCtxCreate*, and
 * cuDevicePrimaryCtxRetain when the primary context is not active yet. Creations within one
 * process are serialised (the driver serialises them too) so that their measurements do not
 * overlap. What a context was charged is given back when it is destroyed (cuCtxDestroy, the
 * last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset). */

#define CTX_CHARGE_MAX (1ull << 30)
#define CTX_TRACKED 64

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { CUcontext ctx; int dev; uint64_t bytes; } ctx_tab[CTX_TRACKED];   /* created ones */
static uint64_t primary_charge[VGPU_REGION_MAX_DEVICES];
static bool made_on[VGPU_REGION_MAX_DEVICES];   /* this process created a context there (ctx_lock) */
static bool no_self_figure;   /* NVML showed no per-process figure after a context: ask it before */
static _Atomic uint64_t primary_ctx[VGPU_REGION_MAX_DEVICES];   /* the primary context's handle */

struct ctx_probe {
    int dev;
    bool active;
    bool unasked;                /* a first context: NVML not asked before it (0 assumed) */
    int self_ok;                 /* vgpu_nvml_self_used's answer before the call */
    uint64_t self0, dev0, slot0;
    bool dev_ok;
};

/* This process's accounted use on CUDA device `dev` (mapped to the job's device by UUID). */
static uint64_t slot_used(int dev)
{
    struct vgpu_region *r = vgpu_job();
    int slot = vgpu_job_slot(), jdev = vgpu_job_dev(dev);
    return r && slot >= 0 && jdev >= 0 ? atomic_load(&r->use->slot[slot].used[jdev]) : 0;
}

static bool primary_active(CUdevice dev)
{
    vgpu_cuDevicePrimaryCtxGetState_fn st =
        (vgpu_cuDevicePrimaryCtxGetState_fn)vgpu_real_cuda_sym("cuDevicePrimaryCtxGetState");
    unsigned flags = 0;
    int active = 0;
    return st && st(dev, &flags, &active) == CUDA_SUCCESS && active;
}

/* Takes ctx_lock when measuring (released by ctx_end). */
static struct ctx_probe ctx_begin(CUdevice dev, bool primary)
{
    struct ctx_probe p = { dev, false, false, 0, 0, 0, 0, false };
    /* dev is a CUDA ordinal: a child may have reordered CUDA_VISIBLE_DEVICES (vgpu_job_dev). */
    if (!vgpu_job() || dev < 0 || dev >= VGPU_REGION_MAX_DEVICES)
        return p;
    pthread_mutex_lock(&ctx_lock);
    if (primary && primary_active(dev)) {
        pthread_mutex_unlock(&ctx_lock);
        return p;                        /* only a reference more: nothing new on the GPU */
    }
    p.active = true;
    /* This process's first context on a whole GPU: its own memory there is 0 before (no process
     * holds device memory without a context), so NVML is not asked first. Its initialisation,
     * started at cuInit, waits inside the driver for cuInit to end: asked here, the creation
     * waited for it and for the GPU's first handle (H200: 15 + 5 ms of every job's start,
     * issue 34). It is done by the time the context is, and measures it after. Not on a MIG
     * device (no per-process figure there: the device-wide delta needs its figure before), nor
     * where NVML's pids are not this process's own (a container: see vgpu_nvml_await_self). */
    struct vgpu_region *r = vgpu_job();
    int jdev = vgpu_job_dev(dev);
    if (!made_on[dev] && !no_self_figure && jdev >= 0 && !r->info->dev[jdev].is_mig && !vgpu_nvml_ready() &&
        vgpu_nvml_pids_are_ours()) {
        p.self_ok = 1;
        p.self0 = 0;
        p.unasked = true;
        p.slot0 = slot_used(dev);
        return p;
    }
    /* A process in a container learns the pid NVML knows it by from `vgpu run`'s walk: without
     * it, only the device-wide delta measures the context, which other processes' frees and
     * allocations meanwhile make too small or too large. */
    vgpu_nvml_await_self();
    p.self_ok = vgpu_nvml_self_used(dev, &p.self0);
    p.dev_ok = vgpu_nvml_device_used(dev, &p.dev0);
    p.slot0 = slot_used(dev);
    return p;
}

/* What the new context cost this process (see the rule above); false when it cannot be told. */
static bool ctx_cost(const struct ctx_probe *p, uint64_t *cost)
{
    uint64_t self1 = 0, dev1, slot1 = slot_used(p->dev);
    uint64_t others = slot1 > p->slot0 ? slot1 - p->slot0 : 0;   /* other threads' allocations meanwhile */
    int after = p->self_ok == 1 ? vgpu_nvml_self_used(p->dev, &self1) : p->self_ok;
    if (p->self_ok == 1 && after == 1 && self1 > 0) {
        uint64_t grew = self1 > p->self0 ? self1 - p->self0 : 0;
        *cost = grew > others ? grew - others : 0;
        return true;
    }
    if (p->unasked) {
        /* No figure before to take a device-wide delta from (see ctx_begin): said, and later
         * contexts of this process are measured the old way. */
        no_self_figure = true;
        vgpu_debug("no per-process NVML figure on GPU %d after this process's first context, which was not "
                   "measured before its creation: it is not charged", p->dev);
        return false;
    }
    if (!p->dev_ok || !vgpu_nvml_device_used(p->dev, &dev1))
        return false;
    uint64_t grew = dev1 > p->dev0 ? dev1 - p->dev0 : 0;
    grew = grew > others ? grew - others : 0;
    *cost = grew < CTX_CHARGE_MAX ? grew : CTX_CHARGE_MAX;
    vgpu_debug("no per-process NVML figure on GPU %d (before: %d, after: %d with %llu bytes; 1 = a figure, 0 = "
               "none or the host pid unknown, -1 = not available): context charged the device-wide delta %llu "
               "bytes, clamped to %llu", p->dev, p->self_ok, after, (unsigned long long)self1,
               (unsigned long long)grew, (unsigned long long)*cost);
    return true;
}

/* Charges the new context (ctx NULL: the primary one); false when it does not fit in the limit
 * (the caller then undoes the context and returns CUDA_ERROR_OUT_OF_MEMORY, as the driver does
 * when a GPU has no room for a context). Releases ctx_lock. */
static bool ctx_end(struct ctx_probe *p, CUresult rc, CUcontext ctx)
{
    if (!p->active)
        return true;
    bool ok = true;
    uint64_t cost = 0;
    if (rc == CUDA_SUCCESS)
        made_on[p->dev] = true;
    if (rc == CUDA_SUCCESS && vgpu_job_dev(p->dev) < 0) {
        ok = false;   /* not one of the job's GPUs (vgpu_job_dev said so): no memory there at all */
    } else if (rc == CUDA_SUCCESS && ctx_cost(p, &cost) && cost) {
        if (!vgpu_acct_reserve_measured(p->dev, cost, "context creation")) {
            ok = false;
        } else {
            vgpu_ctx_overhead_charged(p->dev, cost);
            vgpu_debug("context on GPU %d: %llu bytes", p->dev, (unsigned long long)cost);
            bool kept = false;
            if (!ctx) {
                primary_charge[p->dev] += cost;
                kept = true;
            }
            for (int i = 0; !kept && i < CTX_TRACKED; i++)
                if (!ctx_tab[i].ctx) {
                    ctx_tab[i].ctx = ctx;
                    ctx_tab[i].dev = p->dev;
                    ctx_tab[i].bytes = cost;
                    kept = true;
                }
            /* Past CTX_TRACKED live contexts the charge stays until the process exits (NVML
             * reconciliation gives it back where NVML has per-process figures). */
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    return ok;
}

static void release_kind(enum vgpu_alloc_kind kind, int dev, uint64_t bytes)
{
    if (kind == VGPU_AK_SPILLED)
        vgpu_acct_release_spilled(dev, bytes);
    else
        vgpu_acct_release(dev, bytes);
}

/* Gives back what context `ctx` (NULL: the primary context of `dev`) was charged: its own
 * memory, and what was allocated in it and not freed (the driver freed that with it). */
static void ctx_gone(CUcontext ctx, int dev)
{
    uint64_t handle = ctx ? (uint64_t)(uintptr_t)ctx
                          : dev >= 0 && dev < VGPU_REGION_MAX_DEVICES ? atomic_exchange(&primary_ctx[dev], 0) : 0;
    vgpu_ptr_drop_ctx(handle, release_kind);
    vgpu_squeeze_drop_ctx(handle);
    uint64_t bytes = 0;
    pthread_mutex_lock(&ctx_lock);
    if (!ctx && dev >= 0 && dev < VGPU_REGION_MAX_DEVICES) {
        bytes = primary_charge[dev];
        primary_charge[dev] = 0;
    }
    for (int i = 0; ctx && i < CTX_TRACKED; i++)
        if (ctx_tab[i].ctx == ctx) {
            dev = ctx_tab[i].dev;
            bytes = ctx_tab[i].bytes;
            ctx_tab[i].ctx = NULL;
            break;
        }
    pthread_mutex_unlock(&ctx_lock);
    if (bytes) {
        vgpu_acct_release(dev, bytes);
        vgpu_ctx_overhead_released(dev, bytes);
    }
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

#define CTX_WRAP(sym, dev, primary, args, undo)                                    \
    vgpu_##sym##_fn real = REAL(sym);                                              \
    if (!real)                                                                     \
        return CUDA_ERROR_NOT_INITIALIZED;                                         \
    if (vgpu_job_refused()) /* VGPU_FAIL_CLOSED and no job region */               \
        return CUDA_ERROR_NOT_PERMITTED;                                           \
    struct ctx_probe probe = ctx_begin(dev, primary);                              \
    CUresult rc = real args;                                                       \
    if (!ctx_end(&probe, rc, primary || !pctx ? NULL : *pctx)) {                   \
        undo;                                                                      \
        return CUDA_ERROR_OUT_OF_MEMORY;                                           \
    }                                                                              \
    return rc;

static CUresult primary_retain(CUcontext *pctx, CUdevice dev)
{
    CTX_WRAP(cuDevicePrimaryCtxRetain, dev, true, (pctx, dev), undo_primary(dev))
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = primary_retain(pctx, dev);
    if (rc == CUDA_SUCCESS && pctx && dev >= 0 && dev < VGPU_REGION_MAX_DEVICES)
        atomic_store(&primary_ctx[dev], (uint64_t)(uintptr_t)*pctx);
    return rc;
}

VGPU_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate, dev, false, (pctx, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v2, dev, false, (pctx, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                    unsigned int flags, CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v3, dev, false, (pctx, paramsArray, numParams, flags, dev), undo_created(pctx))
}

VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                    CUdevice dev)
{
    CTX_WRAP(cuCtxCreate_v4, dev, false, (pctx, ctxCreateParams, flags, dev), undo_created(pctx))
}

#define CTX_DESTROY(sym)                                                            \
    VGPU_EXPORT CUresult sym(CUcontext ctx)                                         \
    {                                                                               \
        vgpu_##sym##_fn real = REAL(sym);                                           \
        if (!real)                                                                  \
            return CUDA_ERROR_NOT_INITIALIZED;                                      \
        CUresult rc = real(ctx);                                                    \
        if (rc == CUDA_SUCCESS && ctx && vgpu_job())                                \
            ctx_gone(ctx, -1);                                                      \
        return rc;                                                                  \
    }
CTX_DESTROY(cuCtxDestroy)
CTX_DESTROY(cuCtxDestroy_v2)

/* Release: the memory goes with the last reference; Reset: always. */
#define PRIMARY_DROP(sym)                                                           \
    VGPU_EXPORT CUresult sym(CUdevice dev)                                          \
    {                                                                               \
        vgpu_##sym##_fn real = REAL(sym);                                           \
        if (!real)                                                                  \
            return CUDA_ERROR_NOT_INITIALIZED;                                      \
        CUresult rc = real(dev);                                                    \
        if (rc == CUDA_SUCCESS && vgpu_job() && !primary_active(dev))               \
            ctx_gone(NULL, dev);                                                    \
        return rc;                                                                  \
    }
PRIMARY_DROP(cuDevicePrimaryCtxRelease)
PRIMARY_DROP(cuDevicePrimaryCtxRelease_v2)
PRIMARY_DROP(cuDevicePrimaryCtxReset)
PRIMARY_DROP(cuDevicePrimaryCtxReset_v2)

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

/* A module's code and data on the GPU: charged like a context (see the rule at the top), by the
 * growth of this process's own NVML figure across the load, less what its other threads
 * allocated meanwhile; where NVML has no per-process figure, by the device-wide delta, clamped.
 * The device-wide delta alone charged every other process's allocations and loads as well: on
 * an H100, 8 PyTorch processes starting together under a limit for 7 got 4 started. */
struct load_probe {
    int dev;
    uint64_t free0;
    int self_ok;                 /* vgpu_nvml_self_used's answer before the load */
    uint64_t self0, slot0;
};

static struct load_probe load_begin(void)
{
    struct load_probe p = { -1, 0, 0, 0, 0 };
    uint64_t total;
    if (vgpu_job() && vgpu_real_meminfo(&p.free0, &total)) {
        p.dev = vgpu_current_device();
        if (p.dev >= 0) {
            p.self_ok = vgpu_nvml_self_used(p.dev, &p.self0);
            p.slot0 = slot_used(p.dev);
        }
    }
    return p;
}

/* 0 when fine; CUDA_ERROR_OUT_OF_MEMORY when the load must be undone. */
static CUresult load_end(struct load_probe *p, uint64_t handle, const char *what)
{
    if (p->dev < 0)
        return CUDA_SUCCESS;
    uint64_t slot1 = slot_used(p->dev), self1, free1, total, grow;
    uint64_t others = slot1 > p->slot0 ? slot1 - p->slot0 : 0;
    if (p->self_ok == 1 && vgpu_nvml_self_used(p->dev, &self1) == 1) {
        grow = self1 > p->self0 ? self1 - p->self0 : 0;
    } else {
        if (!vgpu_real_meminfo(&free1, &total) || free1 >= p->free0)
            return CUDA_SUCCESS;
        grow = p->free0 - free1;
        if (grow > CTX_CHARGE_MAX)
            grow = CTX_CHARGE_MAX;
    }
    grow = grow > others ? grow - others : 0;
    if (!grow)
        return CUDA_SUCCESS;
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
