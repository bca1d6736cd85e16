/* hook.h: internals of libvgpu.so (lib/hook). Not installed, not a public interface.
 *
 * The pieces: real.c finds the real driver/NVML functions (lazily, once); route.c hands our
 * wrappers out through dlsym and cuGetProcAddress; config.c reads the job (VGPU_REGION, or the
 * HAMi-core variables through hami.c), and guard.c keeps a truncated job region from killing the
 * process (SIGBUS); memory accounting is layered, each layer calling only down (the layers are
 * described at the top of acct.c): acct.c the counters, pool_charge.c, graphmem_charge.c and
 * nvml.c measure what the driver holds, admit.c admits or refuses an allocation;
 * ptrtab.c remembers what each allocation charged; mem.c, pool.c, vmm.c, ctx.c, view.c,
 * graphmem.c, launch.c and nvml.c are the wrappers. Lent memory (decision 13): squeeze.c moves a
 * borrower's borrowed allocations off the GPU and back on a thread of its own, giveway.c makes an
 * allocation within its job's request wait for that, bounded. libc, libdl and libpthread only. */
#ifndef VGPU_HOOK_H
#define VGPU_HOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu_cuda.h"
#include "vgpu_nvml.h"
#include "vgpu/log.h"

/* Functions exported under their real names: default visibility, listed in exports.map. */
#define VGPU_EXPORT __attribute__((visibility("default")))

/* Prototypes of every driver entry point (the wrappers we define are among them). */
#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

/* ---- real.c: the real functions ------------------------------------------------------------ */

enum vgpu_hook_id {
#define VGPU_HOOK(symbol, base, version, kind) VGPU_H_##symbol,
#include "hooks.def"
#undef VGPU_HOOK
    VGPU_H_COUNT
};

/* The real driver function behind hook `id`: libcuda.so.1's export of that exact name, or the
 * pointer the real cuGetProcAddress returned for it (route.c records it). NULL when the driver
 * has none. The first call per id resolves it (thread-safe, idempotent); later calls are one
 * load, inline (vgpu_real_fast: a call here made every wrapper spill its arguments around it,
 * which was most of the uncapped launch path's cost). */
void *vgpu_real(enum vgpu_hook_id id);
extern void *_Atomic vgpu_real_slots[VGPU_H_COUNT];
static inline void *vgpu_real_fast(enum vgpu_hook_id id)
{
    void *fn = atomic_load_explicit(&vgpu_real_slots[id], memory_order_acquire);
    return __builtin_expect(fn != NULL, 1) ? fn : vgpu_real(id);
}
void vgpu_real_offer(enum vgpu_hook_id id, void *fn);   /* from cuGetProcAddress, when unresolved */
/* Any driver function by exported name (not necessarily hooked); NULL when absent. */
void *vgpu_real_cuda_sym(const char *name);
/* An NVML function by name from libnvidia-ml.so.1; NULL when NVML is absent. */
void *vgpu_real_nvml_sym(const char *name);
/* The real dlsym (glibc's), found with dlvsym; never our override. */
void *vgpu_real_dlsym(void *handle, const char *name);

/* Calls the real `sym` with `args`, or returns `fail` when the driver lacks it. */
#define REAL(sym) ((vgpu_##sym##_fn)vgpu_real_fast(VGPU_H_##sym))
#define CALL_REAL(sym, args)                                                   \
    do {                                                                       \
        vgpu_##sym##_fn real_ = REAL(sym);                                     \
        return real_ ? real_ args : CUDA_ERROR_NOT_INITIALIZED;                \
    } while (0)

/* ---- route.c ------------------------------------------------------------------------------------ */

/* Our wrapper for the driver export `name` (exact versioned name), or NULL when not hooked. */
void *vgpu_route_hook_by_symbol(const char *name);
/* nvml.c: our NVML wrapper for `name`, or NULL when that NVML function is not virtualised. */
void *vgpu_nvml_hook_by_symbol(const char *name);

/* ---- config.c: what the job allows ------------------------------------------------------------- */

struct vgpu_region;
/* Reads the configuration once (thread-safe). Returns the job region, or NULL when this process
 * runs with no job (no VGPU_REGION, no HAMi variables, or a configuration error already
 * reported): then every wrapper passes straight through. */
struct vgpu_region *vgpu_job(void);
int vgpu_job_slot(void);               /* this process's slot (re-attached after fork) */
const char *vgpu_job_label(void);      /* "job NAME (ID)" for messages */
void vgpu_job_guard(struct vgpu_region *r); /* fences a damaged region off, says so once (config.c) */
/* guard.c: r's mappings are the library's: a SIGBUS fault inside them (the file truncated under
 * them) replaces them by private memory holding the last limits seen, instead of killing the
 * process. Installs the library's SIGBUS handler on the first call. */
void vgpu_guard_region(struct vgpu_region *r);
/* True when this process has no job and VGPU_FAIL_CLOSED=1: contexts and allocations are refused. */
bool vgpu_job_refused(void);
/* Whether any device of the job has a core limit (refreshed when `vgpu limit` changes one). */
bool vgpu_job_core_limited(void);
/* The job device (index into the region's devices) of CUDA ordinal `ordinal`, matched by UUID
 * (cuDeviceGetUuid), so that a process that changed CUDA_VISIBLE_DEVICES is still accounted on
 * the right GPU. VGPU_NOT_JOB_DEV for a GPU that is not one of the job's (its allocations are
 * refused); -1 with no job or a bad ordinal. Without UUIDs in the region (HAMi variables): the
 * ordinal itself. Cached per ordinal. */
#define VGPU_NOT_JOB_DEV (-2)
int vgpu_job_dev(int ordinal);

/* ---- acct.c: the memory counters (the bottom layer: knows the job and the region only) ----------- */

/* How a reservation may be placed on an oversubscribed device (vgpu_region_reserve_split):
 * ON_DEVICE must fit in the device share; SPILLABLE may be served from pageable memory instead;
 * PAGED is managed memory the program asked for (off the device when the job is oversubscribed). */
enum vgpu_acct_place { VGPU_ACCT_ON_DEVICE, VGPU_ACCT_SPILLABLE, VGPU_ACCT_PAGED };
enum vgpu_acct_answer {
    VGPU_ACCT_REFUSED,   /* never: not the job's GPU, or no job with VGPU_FAIL_CLOSED (said already) */
    VGPU_ACCT_GRANTED,   /* reserved, or nothing to account (no job, 0 bytes, not ours) */
    VGPU_ACCT_OVER,      /* over the limit (or the device share) now: nothing reserved, nothing said */
};
/* One attempt to reserve `bytes` on CUDA device `dev`; *spilled (may be NULL) says they were
 * counted off the device. Reaps dead processes first when it is time (vgpu_region_reap_maybe). */
enum vgpu_acct_answer vgpu_acct_try(int dev, uint64_t bytes, enum vgpu_acct_place how, bool *spilled);
/* Whether memory on CUDA device `dev` is accounted in this process (a job, its GPU, a slot). */
bool vgpu_acct_tracked(int dev);
/* Spilled bytes given back (reserved with VGPU_ACCT_SPILLABLE/PAGED and *spilled). */
void vgpu_acct_release_spilled(int dev, uint64_t bytes);
/* Bytes reserved on the device that turn out not to fit there physically (the driver said
 * out of memory): counted as spilled instead, when the job is oversubscribed on dev. */
bool vgpu_acct_mark_spilled(int dev, uint64_t bytes);
/* Whether CUDA device `dev` is oversubscribed in this job. */
bool vgpu_acct_oversub(int dev);
/* Whether the job borrows on CUDA device `dev` (--mem REQUEST:LIMIT with REQUEST < LIMIT). */
bool vgpu_acct_lending(int dev);
/* Returns bytes reserved earlier (free, or the real call failed). */
void vgpu_acct_release(int dev, uint64_t bytes);
/* Charges bytes that are already in use whatever the limit says (context overhead, pool and
 * graph rounding measured after the fact): never fails, may pass the limit. */
void vgpu_acct_force(int dev, uint64_t bytes);
/* Job view of CUDA device `dev`: limit (0 = none) and used bytes (the job's memory outside the
 * limiter included). The _job variants take a job device index (NVML handles have no ordinal). */
uint64_t vgpu_acct_limit(int dev);
uint64_t vgpu_acct_limit_job(int jdev);
uint64_t vgpu_acct_used(int dev);
/* Saturating helpers for the views: used + free = total, never negative. */
void vgpu_acct_view(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out,
                    uint64_t *used_out);
void vgpu_acct_view_job(int jdev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out,
                        uint64_t *used_out);

/* ---- pool_charge.c: what the memory pools hold, charged (calls only the counters) ---------------- */

/* Settles every known pool (each may have shrunk at a synchronize): before refusing with OOM,
 * and before a view of free memory. */
void vgpu_pool_reconcile_all(void);
/* The device's current pool (what cuMemAllocAsync draws from), registered; NULL when none. */
CUmemoryPool vgpu_pool_current(int dev);
/* The device of a known pool; an unknown one (a default pool fetched directly) is taken to be on
 * the current device and registered. -1: not device memory, or no current device. */
int vgpu_pool_device(CUmemoryPool pool);
/* A pool created on `dev` (-1: host memory, known and never charged). */
void vgpu_pool_register(CUmemoryPool pool, int dev);
/* The part of a request of `bytes` the pool cannot serve from what it holds unused: what must
 * be reserved before the call (the pool is settled first, so its charge is current). */
uint64_t vgpu_pool_up_front(CUmemoryPool pool, int dev, uint64_t bytes);
/* After an allocation from the pool: charges its growth against the `up_front` reserved. */
void vgpu_pool_settle(CUmemoryPool pool, int dev, uint64_t up_front);
/* The pool was trimmed (settled), or destroyed (its whole charge given back). */
void vgpu_pool_trimmed(CUmemoryPool pool);
void vgpu_pool_forget(CUmemoryPool pool);

/* ---- graphmem_charge.c: what the graph pools hold, charged (calls only the counters) -------------- */

/* Settles device dev's graph pool: growth forced, shrinking released. Nothing before graph
 * memory was seen. */
void vgpu_graphmem_reconcile(int dev);
/* Graph memory was seen (a memory node, a captured allocation): from now on graph pools are
 * measured. */
void vgpu_graphmem_saw(void);
bool vgpu_graphmem_seen(void);
/* Memory device dev's graph pool holds, charged to the job, that no graph uses now. */
uint64_t vgpu_graphmem_spare(int dev);
/* After a graph instantiate/launch, charge the growth of the current device's graph pool. */
void vgpu_graph_launched(void);

/* ---- admit.c: admitting an allocation (above the counters and the measuring files) ---------------- */

/* Reserves `bytes` on job device `dev` for `what` (the entry point's name) before the real
 * call. true when granted (or when there is no job/limit accounting for dev); false when over
 * the limit: the OOM line has been logged (rate limited) and the caller returns
 * CUDA_ERROR_OUT_OF_MEMORY. */
bool vgpu_acct_reserve(int dev, uint64_t bytes, const char *what);
/* The same for memory measured after the real call (context, cuCtxSetLimit, module loads):
 * skips the NVML reconciliation, which would see the new memory as not yet charged. */
bool vgpu_acct_reserve_measured(int dev, uint64_t bytes, const char *what);
/* On a device with --oversubscribe (VGPU_DEV_OVERSUB), vgpu_acct_reserve also holds the job's
 * device share: memory that cannot be paged fails there. _spillable is for allocations that may
 * be served from pageable memory instead (spill.c): *spill says the caller must allocate them
 * that way (they are counted off the device). _paged is for managed memory the program asked
 * for: counted off the device when the job is oversubscribed (*spilled), charged in full
 * otherwise. Spilled bytes go back with vgpu_acct_release_spilled. */
bool vgpu_acct_reserve_spillable(int dev, uint64_t bytes, const char *what, bool *spill);
bool vgpu_acct_reserve_paged(int dev, uint64_t bytes, const char *what, bool *spilled);

/* graphmem.c: around a graph launch or upload. _before reserves the growth of the graph pool
 * the executable graph may need; false (nothing held) when that does not fit in the limit: the
 * caller returns CUDA_ERROR_OUT_OF_MEMORY without the real call. _after charges the pool's real
 * growth and returns the reservation; launch says the graph ran (its relaunches need less). */
#define VGPU_GRAPH_HOLD_DEVS 4
struct vgpu_graph_hold {
    int n;
    struct { int dev; uint64_t held; } d[VGPU_GRAPH_HOLD_DEVS];
};
bool vgpu_graph_mem_before(CUgraphExec exec, const char *what, struct vgpu_graph_hold *hold);
void vgpu_graph_mem_after(CUgraphExec exec, CUresult rc, bool launch, struct vgpu_graph_hold *hold);
/* nvml.c: measures the job's memory outside the limiter on CUDA device `dev` now (NVML's process
 * list: processes descended from the job that are not under libvgpu.so) and records it in the
 * region; at most every 200 ms. Called before refusing an allocation. */
void vgpu_nvml_outside_refresh(int dev);
/* nvml.c: device-wide used memory of job device `dev` through NVML (false without NVML). */
bool vgpu_nvml_device_used(int dev, uint64_t *used);
/* nvml.c: the context overhead charged for `dev` (the baseline of NVML reconciliation). */
void vgpu_ctx_overhead_charged(int dev, uint64_t bytes);
/* nvml.c: this process's own used memory on `dev` as NVML reports it (the driver's per-process
 * figure): 1 with *used set (0 when the process is not listed), -1 when NVML lists it with
 * NVML_VALUE_NOT_AVAILABLE (some MIG setups), 0 when NVML cannot be asked or this process's
 * host pid is not known yet (a container with its own /proc: see vgpu_nvml_await_self). */
int vgpu_nvml_self_used(int dev, uint64_t *used);
/* nvml.c: before a measurement by NVML's per-process figure: a process whose host pid (the pid
 * NVML reports) is not known yet waits for `vgpu run`'s walk to find it, at most 750 ms and only
 * while that walk runs. Returns at once everywhere else. */
void vgpu_nvml_await_self(void);
/* nvml.c: starts NVML's initialisation on a thread of its own, once per process (cuInit's hook),
 * and attaches the job's GPUs there (NVML's first handle of a GPU sleeps 5 ms on an H200): the
 * context measurement needs both. NVML's initialisation waits inside the driver for cuInit to end
 * (H200, driver 580: blocked for all of cuInit's ~110 ms, then ~15 ms more), so a first context
 * is not measured before its creation (ctx.c); the measurement after it finds NVML done, or waits
 * for the rest. */
void vgpu_nvml_start(void);
/* nvml.c: true when NVML's per-process figures name this process by the pid this process knows
 * (it lives in the initial PID namespace, as NVML's pids do), so that its own memory before its
 * first context on a GPU is known without asking (0). */
bool vgpu_nvml_pids_are_ours(void);
/* nvml.c: NVML's initialisation has ended (asking it now does not wait). */
bool vgpu_nvml_ready(void);
/* nvml.c: context overhead given back (a context destroyed). */
void vgpu_ctx_overhead_released(int dev, uint64_t bytes);
/* nvml.c: at most once a second, charge (or give back) the difference between NVML's view of
 * this process on `dev` and what it has been charged beyond its allocations. */
void vgpu_nvml_reconcile_maybe(int dev);
/* nvml.c: the processes outside this job that kept CUDA device `dev` busy in the last second
 * (NVML's per-process utilisation samples above 0 %), their pids into out[] (at most max); the
 * count, or -1 when NVML cannot tell (none, MIG). */
int vgpu_nvml_busy_others(int dev, unsigned *out, int max);

/* ---- spill.c: allocations past an oversubscribed job's device share ------------------------------ */

/* Serves cuMemAlloc-style requests of `bytes` (already reserved as spilled) from managed memory
 * preferring CUDA device `dev`; the record for the free is kept. */
CUresult vgpu_spill_alloc(CUdeviceptr *dptr, size_t bytes, int dev);

/* ---- squeeze.c: borrowed memory gives way (decision 13) ---------------------------------------- */

/* A borrowed allocation (served from managed memory past the REQUEST on CUDA device dev, in the
 * current context): from now on it may be demoted to host memory while other jobs' requests need
 * its room, and promoted back when they do not. The first one starts the helper thread. */
void vgpu_squeeze_track(CUdeviceptr p, uint64_t bytes, int dev);
/* Before the real free of p (one relaxed load when nothing is tracked). */
void vgpu_squeeze_forget(CUdeviceptr p);
/* Context ctx is gone: its borrowed allocations with it. */
void vgpu_squeeze_drop_ctx(uint64_t ctx);

/* ---- giveway.c: an allocation within the request waits for borrowers, bounded ----------------------- */

struct vgpu_giveway {
    uint64_t start_ns;     /* 0 before the first wait */
    unsigned rounds;
    bool unsure;           /* no borrower seen yet, but the arbiter's answer predates the wait */
};
/* After the real allocation of `bytes` (reserved) on CUDA device dev answered out of memory:
 * true when it should be tried again (other jobs borrow on the GPU and the bounded wait of 1 s is
 * not over; the reservation is held again); false when it should fail (the reservation is still
 * held for the caller to release; past the wait, a warning naming the borrowers was logged).
 * Start with a zeroed struct vgpu_giveway per allocation. */
bool vgpu_giveway_wait(struct vgpu_giveway *g, int dev, uint64_t bytes, const char *what);

/* ---- ptrtab.c: what each allocation charged ----------------------------------------------------- */

enum vgpu_alloc_kind {
    VGPU_AK_LINEAR = 1,   /* cuMemAlloc*, pitch, managed: keyed by device pointer */
    VGPU_AK_VMM = 2,      /* cuMemCreate handle */
    VGPU_AK_ARRAY = 3,    /* CUarray / CUmipmappedArray handle */
    VGPU_AK_MODULE = 4,   /* CUmodule / CUlibrary handle */
    VGPU_AK_SPILLED = 5,  /* managed memory counted off the device (spill.c): keyed by pointer */
};
/* Remembers key -> (dev, bytes). Returns false when out of memory (the charge is then given
 * back by the caller and the allocation kept: it is simply not accounted). */
bool vgpu_ptr_put(enum vgpu_alloc_kind kind, uint64_t key, int dev, uint64_t bytes);
/* Removes key; true and its (dev, bytes) when it was tracked. */
bool vgpu_ptr_take(enum vgpu_alloc_kind kind, uint64_t key, int *dev, uint64_t *bytes);
/* Context `ctx` is gone and the driver freed what was allocated in it: removes its entries
 * (VMM handles excepted), calling release for each. */
void vgpu_ptr_drop_ctx(uint64_t ctx, void (*release)(enum vgpu_alloc_kind kind, int dev, uint64_t bytes));

/* ---- small helpers --------------------------------------------------------------------------------- */

uint64_t vgpu_now_ns(void);            /* CLOCK_MONOTONIC */
/* The CUDA device (ordinal) of the calling thread's current context; -1 when none (real.c). */
int vgpu_current_device(void);
/* Free and total memory of the current context's device through the real cuMemGetInfo_v2. */
bool vgpu_real_meminfo(uint64_t *free_b, uint64_t *total_b);

#endif
