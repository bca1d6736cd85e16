/* fakecuda.h: internals of the fake libcuda.so.1 (tests/fakegpu/cuda). Not a product header.
 *
 * The fake keeps process-local objects (contexts, streams, allocations, modules, graphs) in
 * plain structures under one mutex, and everything another process must see (device memory,
 * this process's per-device usage, the device's kernel timeline and busy time) in the shared
 * state of tests/fakegpu/common/fakestate.h, reached only through the fc_dev_* functions of
 * shared.c. Time is real: CLOCK_MONOTONIC nanoseconds. */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vgpu_cuda.h"

/* Prototypes of every exported entry point (keeps -Wmissing-prototypes happy and checks our
 * definitions against the ABI the .def declares). */
#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

/* Everything below is internal: only the cu* entry points are exported. */
#pragma GCC visibility push(hidden)

#define FC_MAX_DEVICES 64
#define FC_MIB (1024ULL * 1024ULL)

/* ---- devices (shared.c) ---- */
struct fc_device {
    char name[96];
    char uuid[96];          /* "GPU-..." for a whole GPU, "MIG-..." for a MIG device */
    unsigned char uuid_bytes[16];
    char pci_bus_id[32];    /* "00000000:1B:00.0" */
    int pci_domain, pci_bus, pci_device;
    unsigned long long total_mem;
    int sm_count;
    int cc_major, cc_minor;
    unsigned long long ctx_overhead;   /* what each context here costs */
    /* managed memory's migration rates over the GPU's link, MB/s, 0: at once (fs_uvm_rates) */
    unsigned uvm_fault_mbps, uvm_prefetch_mbps, uvm_populate_mbps, uvm_prefetch_host_mbps;
    int gpu;                /* index of the physical GPU in the shared state */
    int mig;                /* MIG instance index in the shared state, -1 for a whole GPU */
};

extern int fc_ndev;                          /* visible devices after CUDA_VISIBLE_DEVICES */
extern struct fc_device fc_devs[FC_MAX_DEVICES];
extern int fc_driver_version;                /* cuDriverGetVersion, from the scenario */

CUresult fc_shared_init(void);               /* opens the state, loads fc_devs; once */
/* Device memory of device `ordinal` for this process: fails with OUT_OF_MEMORY when the
 * device (or MIG instance) has less than `bytes` free. */
CUresult fc_dev_charge(int ordinal, unsigned long long bytes);
void fc_dev_uncharge(int ordinal, unsigned long long bytes);
/* One block of device memory (cuMemAlloc, cuMemAllocPitch): fails when it is larger than the
 * largest free piece (fakegpu-ctl fragment), though the free total would fit. */
CUresult fc_dev_charge_block(int ordinal, unsigned long long bytes);
/* A context's own memory: not counted against an MPS client's pinned memory limit. */
CUresult fc_dev_charge_ctx(int ordinal, unsigned long long bytes);
void fc_dev_uncharge_ctx(int ordinal, unsigned long long bytes);
/* A context is being created: CUDA_ERROR_DEVICE_UNAVAILABLE when the compute mode refuses it;
 * joins MPS when a daemon serves the GPU (see shared.c); marks the process as holding a context. */
CUresult fc_dev_claim(int ordinal);
void fc_dev_meminfo(int ordinal, unsigned long long *free_bytes, unsigned long long *total);
unsigned long long fc_dev_charge_managed(int ordinal, unsigned long long bytes);
void fc_dev_uncharge_managed(int ordinal, unsigned long long bytes);
unsigned long long fc_dev_take_evicted(int ordinal);
/* Bytes over the device's PCIe link (its physical GPU's NVML counters): tx device->host, rx host->device. */
void fc_dev_pcie(int ordinal, unsigned long long tx, unsigned long long rx);
/* A piece of work queued on the device's timeline (common/timeline.c): seq 0 = none. `end` is
 * the last thing known of its completion time: exact once done, a projection before. */
struct fc_pos { uint64_t seq; unsigned slot; uint64_t end; };
/* One rank's kernel of a collective: it waits, busy, for the other nranks - 1 (fs_coll). */
struct fc_coll { uint64_t id, seq; unsigned nranks; };
#define FC_W_BARRIER  1u   /* legacy default stream (= FS_W_BARRIER) */
#define FC_W_BLOCKING 2u   /* a blocking stream (= FS_W_BLOCKING) */
#define FC_W_COPY    32u   /* a copy on the copy engines: no SMs, no busy time (= FS_W_COPY) */
/* Queues `dur_ns` of work of `width` thousandths of the SMs (0: a marker) on the device for this
 * process's context `ctx` and stream `stream`; false when the device's ring is full. */
bool fc_dev_submit(int ordinal, uint32_t ctx, uint32_t stream, uint64_t dur_ns, unsigned width, unsigned flags,
                   const struct fc_coll *coll, struct fc_pos *out);
/* True when the work is done; p->end gets its end (or its projected end). */
bool fc_dev_pos_done(int ordinal, struct fc_pos *p);
/* Waits, in real time, until the work is done. Call without fc_lock. */
void fc_dev_pos_wait(int ordinal, struct fc_pos *p);
/* Work of context `ctx` queued on the device and not done; *oldest the first of it. */
unsigned fc_dev_pending(int ordinal, uint32_t ctx, struct fc_pos *oldest);
/* This process has (or no longer has) a context on the device: NVML's process list. */
void fc_dev_attach(int ordinal, bool attached);
/* The device's GPU fell off the bus after cuInit: allocations fail with
 * CUDA_ERROR_DEVICE_UNAVAILABLE and launches with CUDA_ERROR_LAUNCH_FAILED. */
bool fc_dev_lost(int ordinal);
/* Sleeps if the scenario says `symbol` is slow (no-op before the state is open). */
void fc_shared_maybe_slow(const char *symbol);
/* Gives back everything this process holds on every device (process exit). */
void fc_shared_release_all(void);
/* The parent GPU's UUID of a MIG device (cuDeviceGetUuid v1 reports it). */
void fc_dev_parent_uuid(int ordinal, unsigned char out[16]);

/* ---- CUDA_VISIBLE_DEVICES (visible.c) ---- */
struct fc_phys_gpu {
    const char *uuid;             /* "GPU-..." */
    bool mig_enabled;             /* current MIG mode */
    int nmig;                     /* MIG devices (compute instances), in the order CUDA lists them */
    const char *const *mig_uuids; /* "MIG-..." */
};
struct fc_pick { int gpu, mig; }; /* mig -1: the whole GPU */
/* Picks the visible devices from `env` (NULL: unset); returns how many went into out[]. */
int fc_visible_select(const char *env, const struct fc_phys_gpu *gpus, int ngpus, struct fc_pick *out, int max);

/* ---- common (util.c) ---- */
extern pthread_mutex_t fc_lock;     /* guards every process-local object below */
extern bool fc_initialized;
uint64_t fc_now_ns(void);
void fc_sleep_until(uint64_t t_ns);
void fc_trace(const char *symbol);  /* VGPU_FAKE_TRACE: append the entry point's name; and
                                     * sleep first if the scenario marks the call slow */
#define FC_TRACE() fc_trace(__func__)
unsigned long long fc_round_up(unsigned long long v, unsigned long long a);

/* ---- contexts (context.c) ---- */
struct fc_ctx {
    uint32_t magic;
    int device;
    bool primary;
    bool alive;          /* primary: active (refcount > 0 or retained); others: not destroyed */
    int refcount;        /* primary only */
    unsigned int flags;
    size_t limits[8];    /* CUlimit values */
    uint32_t key;        /* names its work on the device's timeline */
    struct fc_pos legacy_last;   /* the last work queued on its legacy default stream */
    struct fc_pos orphan_last;   /* the last work of a destroyed blocking stream (the legacy stream still waits for it) */
    unsigned long long overhead; /* device memory this context itself holds */
    unsigned long long module_bytes; /* device memory its modules' code took (lazy loading) */
    unsigned admit_pending, admit_since; /* the push buffer's last count, and launches since */
    struct fc_pos fault;     /* a "fault" kernel queued in it: when it runs, the context is broken */
    CUresult sticky;         /* the sticky error every call in it returns from then on */
};
#define FC_CTX_MAGIC 0xC0C7C7C0u
CUresult fc_check_init(void);
/* The calling thread's current context, or INVALID_CONTEXT / NOT_INITIALIZED. */
CUresult fc_current(struct fc_ctx **out);
CUresult fc_ctx_valid(CUcontext c);
/* The context's sticky error (CUDA_ERROR_ILLEGAL_ADDRESS once its "fault" kernel ran), else
 * CUDA_SUCCESS: what a synchronize returns after waiting. */
CUresult fc_ctx_sticky(struct fc_ctx *c);

/* ---- memory (memory.c) ---- */
enum fc_alloc_kind {
    FC_ALLOC_DEVICE, FC_ALLOC_MANAGED, FC_ALLOC_HOST, FC_ALLOC_POOL, FC_ALLOC_VA, FC_ALLOC_ARRAY,
    FC_ALLOC_GRAPH,
    FC_ALLOC_POOL_FREEING,      /* a pool allocation whose cuMemFreeAsync the stream has not reached */
};
struct fc_alloc {
    struct fc_alloc *next;
    enum fc_alloc_kind kind;
    CUdeviceptr base;
    size_t size;
    unsigned long long charged;     /* device bytes this allocation holds */
    int device;
    struct fc_ctx *ctx;
    void *host;                     /* real memory for host and managed allocations */
    struct fc_pool *pool;
    bool live;                      /* graph allocations: allocated by a launch, not yet freed */
    bool uploaded;                  /* graph allocations: memory taken by cuGraphUpload for the next launch */
    /* managed allocations (managed.c): pages resident on the device, charged as evictable */
    unsigned long long resident;    /* the sum of groups[].res */
    struct fc_uvm_group *groups;    /* one per 2 MiB of the allocation (managed.c) */
    size_t ngroups;
    uint64_t last_use;              /* for evicting the least recently used pages first */
};
/* 2 MiB of a managed allocation: how much of it is resident on the device, and what the driver
 * knows of it (FC_UVM_* flags, managed.c). */
struct fc_uvm_group {
    uint32_t res;                   /* bytes resident on the device, 0..2 MiB */
    uint8_t flags;
};
CUdeviceptr fc_va_reserve(size_t size, size_t align);
struct fc_alloc *fc_alloc_new(enum fc_alloc_kind kind, CUdeviceptr base, size_t size, int device,
                              struct fc_ctx *ctx);
struct fc_alloc *fc_alloc_find(CUdeviceptr p, bool containing);
struct fc_alloc *fc_alloc_first(void);   /* the list of every allocation (caller holds fc_lock) */
void fc_alloc_remove(struct fc_alloc *a);
/* Frees (and uncharges) everything a destroyed context owned. */
void fc_ctx_free_allocations(struct fc_ctx *ctx);
CUresult fc_check_range(CUdeviceptr p, size_t n);
CUresult fc_check_host_range(const void *p, size_t n);

/* ---- pools (pool.c) ---- */
struct fc_pool {
    uint32_t magic;
    int device;
    bool is_default;
    unsigned long long reserved, reserved_high, used, used_high, release_threshold, max_size;
    int reuse[4];
};
#define FC_POOL_MAGIC 0x9001F000u
struct fc_pool *fc_default_pool(int device);
CUresult fc_pool_alloc(struct fc_pool *pool, size_t size, CUstream stream, CUdeviceptr *out);
void fc_pool_release_all(int device);   /* at synchronize: honour release thresholds */
void fc_pool_free(struct fc_alloc *a);
void fc_pool_forget_ctx(struct fc_ctx *ctx);   /* a context goes: its pending frees are done */

/* ---- streams, events, host functions (stream.c) ---- */
struct fc_graph;
struct fc_stream {
    uint32_t magic;
    struct fc_ctx *ctx;
    unsigned int flags;
    bool per_thread;         /* the per-thread default stream of one thread */
    uint32_t key;            /* names it on the device's timeline (0 is the legacy stream) */
    struct fc_pos last;      /* the last work queued on it */
    int pending_host_fns;
    struct fc_graph *capture;/* non-NULL while capturing */
};
#define FC_STREAM_MAGIC 0x57BEA300u
/* Resolves a stream argument: NULL/LEGACY (legacy default stream), PER_THREAD, or a handle.
 * `ptsz` says the caller is a _ptsz/_ptds variant: then NULL means the per-thread stream.
 * *out is NULL for the legacy default stream. */
CUresult fc_stream_resolve(CUstream s, bool ptsz, struct fc_ctx *ctx, struct fc_stream **out);
/* Queues `dur_ns` of device work (`width` thousandths of the SMs) on the stream; returns its
 * projected end time when want_end (0 otherwise: the projection costs a simulation). Caller
 * holds fc_lock. */
uint64_t fc_stream_enqueue(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns, unsigned width,
                           const struct fc_coll *coll, bool want_end);
/* Queues a copy of `dur_ns` on the stream (a managed-memory prefetch): it holds the stream for
 * that long on the copy engines, beside any context's kernels, and is no busy time. Caller
 * holds fc_lock. */
void fc_stream_enqueue_copy(struct fc_ctx *ctx, struct fc_stream *st, uint64_t dur_ns);
/* When the stream's work queued so far is projected to be done (now when none is pending): what
 * stream-ordered frees wait for. Caller holds fc_lock. */
uint64_t fc_stream_tail(struct fc_ctx *ctx, struct fc_stream *st);
/* The push buffer: waits while the context has too much work queued (VGPU_FAKE_QUEUE_DEPTH,
 * default 1024 launches). Call without fc_lock. */
void fc_queue_admit(struct fc_ctx *ctx);
CUresult fc_stream_wait(struct fc_ctx *ctx, struct fc_stream *st);
CUresult fc_ctx_sync(struct fc_ctx *ctx);
void fc_stream_destroy_all(struct fc_ctx *ctx);

/* ---- modules and kernels (module.c) ---- */
struct fc_func {
    uint32_t magic;
    char name[128];
    bool sleep_us;           /* "sleep_us": runs for kernelParams[0] (unsigned long long) µs;
                              * "sleep_us_w" too, over kernelParams[1] % of the SMs */
    bool width_param;        /* "sleep_us_w" */
    bool fault;              /* "fault": an illegal address; the context is broken once it runs */
    bool collective;         /* "collective_us": one rank's part of a collective (launch.c) */
};
#define FC_FUNC_MAGIC 0xF00C7100u
CUresult fc_func_valid(CUfunction f);

/* ---- launches (launch.c) ---- */
struct fc_launch {
    struct fc_func *func;
    unsigned int grid[3], block[3], shmem;
    uint64_t dur_ns;
    unsigned width;          /* thousandths of the SMs it occupies */
    struct fc_coll coll;     /* a collective's communicator and operation (nranks 0: not one) */
};
CUresult fc_launch_prepare(struct fc_launch *l, CUfunction f, const unsigned int grid[3],
                           const unsigned int block[3], unsigned int shmem, void **params,
                           void **extra);
CUresult fc_launch_submit(const struct fc_launch *l, CUstream stream, bool ptsz);
/* ---- managed memory (managed.c) ---- */
/* A kernel on ctx's device touches the context's managed memory: non-resident pages migrate
 * in (evicting this process's least recently used pages when the device is full), except those
 * whose preferred location is the CPU or that the device has mapped in host memory (accessed
 * remotely). Returns the time the kernel's page faults take (the migration at the GPU's
 * uvm_fault rate), which the kernel runs longer. Caller holds fc_lock. */
uint64_t fc_managed_on_launch(struct fc_ctx *ctx);
/* Pages the driver evicted for other allocations are marked non-resident. Caller holds fc_lock. */
void fc_managed_sync_evictions(int device);
/* A managed allocation goes: its resident pages are uncharged. Caller holds fc_lock. */
void fc_managed_release(struct fc_alloc *a);
CUresult fc_managed_alloc(CUdeviceptr *dptr, size_t size);

/* ---- graphs (graph.c) ---- */
struct fc_graph *fc_graph_new(void);
/* cuMemFree of a graph allocation outside a graph. Caller holds fc_lock. */
CUresult fc_graph_alloc_free(struct fc_alloc *a);
/* cuMemFreeAsync of one: the memory stays in use until due_ns (the stream reaches the free). */
CUresult fc_graph_alloc_free_async(struct fc_alloc *a, uint64_t due_ns);
void fc_graph_forget_ctx(struct fc_ctx *ctx);  /* a context goes: its pending frees are done */
CUresult fc_graph_capture_kernel(struct fc_stream *st, const struct fc_launch *l);
CUresult fc_graph_capture_alloc(struct fc_stream *st, size_t size, CUdeviceptr *out);
CUresult fc_graph_capture_free(struct fc_stream *st, CUdeviceptr p);

#pragma GCC visibility pop

#endif
