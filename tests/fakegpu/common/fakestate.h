/* fakestate.h: the simulated machine shared by the fake libcuda.so.1, the fake
 * libnvidia-ml.so.1 and the fake tools (test double; see tests/fakegpu/README.md).
 *
 * One state file per simulated machine (VGPU_FAKE_STATE; default derived from the scenario path
 * and the uid, in /tmp). The first process to need it builds it from the scenario JSON
 * (VGPU_FAKE_SCENARIO; a built-in single H100 when unset), writes it to a temporary file and
 * link()s it into place, so racing processes all end up on the same inode. Every process maps
 * it MAP_SHARED. Dynamic fields are changed only under fs_lock() (a process-shared robust
 * mutex inside the file: a process SIGKILLed while holding it does not wedge the others).
 * Static facts (name, UUID, totals, profile tables) never change after creation and can be
 * read without the lock.
 *
 * Places: a process uses a whole GPU (gi = ci = -1) or, with MIG on, one compute instance
 * (gi = GPU-instance slot, ci = compute-instance slot in that GI: array indexes, not the NVML
 * IDs). Memory is charged per (pid, place); kernels are queued on the place's timeline: the
 * whole GPU or the MIG compute instance (different CIs run in parallel; on one timeline contexts
 * take time slices, see timeline.c). Time: CLOCK_MONOTONIC ns; NVML sample timestamps are
 * wall-clock µs (fs_wall_us). All symbols here are hidden: each fake library links its own copy. */
#ifndef VGPU_FAKESTATE_H
#define VGPU_FAKESTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

#define FS_MAGIC 0x5647505546414b45ULL   /* "VGPUFAKE" */
#define FS_LAYOUT_VERSION 11  /* 3: managed/evicted in fs_proc; 4: work queues (timeline.c); 5: PCIe counters;
                                * 6: collectives, NVLink topology; 7: busy time and energy per GPU;
                                * 8: busy time per sample period (device utilisation samples);
                               * 9: the host resolver of container processes' pids;
                              * 10: busy time of ended process records (fs_gpu.ended);
                              * 11: managed memory's migration rates (fs_uvm_rates), copy items */
#define FS_MAX_GPUS 16
#define FS_MAX_PROCS 64                  /* process records per GPU (pid x place) */
#define FS_MAX_ENDED 64                  /* ended records per GPU whose busy time stays readable */
#define FS_MAX_PROFILES 12               /* GI profiles per GPU */
#define FS_MAX_CI_PROFILES 8             /* CI profiles per GI profile */
#define FS_MAX_GI 8                      /* GPU instances per GPU (7 on A100/H100) */
#define FS_MAX_CI 8                      /* compute instances per GI */
#define FS_MAX_PLACEMENTS 8
#define FS_MEM_SLICES 8                  /* memory slices of a MIG-capable GPU */
#define FS_MAX_INTERVALS 4096            /* kernel busy intervals kept per GPU */
#define FS_UTIL_PERIODS 128              /* sample periods whose busy time is kept per GPU (NVML's
                                          * device samples: the newest completed 120 of them) */
#define FS_MAX_SLOW 8
#define FS_RING 4096                     /* queued and recently finished work items per GPU */
#define FS_MAX_TL (1 + FS_MAX_GI * FS_MAX_CI) /* timelines per GPU: the whole GPU, or one per MIG CI */
#define FS_MAX_COLL 256                  /* collectives in flight (started by some rank, not finished by all) */

/* ---- static facts (from the scenario) ---- */
/* How fast managed memory moves over a GPU's link, in MB/s (10^6 bytes a second); 0: at once.
 * The h200 model's defaults are what an H200 on driver 580.159.04 did (tests/fakegpu/README.md,
 * "Managed memory's time"; tools/uvm_rates.py); the other models have none unless the scenario
 * gives them. */
struct fs_uvm_rates {
    unsigned fault_mbps;                 /* a kernel's page faults migrating pages in (H200: 6300) */
    unsigned prefetch_mbps;              /* cuMemPrefetchAsync to the device of pages with data (50000) */
    unsigned populate_mbps;              /* the same of pages never touched: zero-filled there (262000) */
    unsigned prefetch_host_mbps;         /* cuMemPrefetchAsync to the host (15500) */
};

struct fs_ci_profile {
    unsigned index, id;                  /* NVML CI profile index and ID (ID = index) */
    unsigned slices, instances, sm;
    char name[64];                       /* "1c.3g.40gb"; the default CI of a GI is named as the GI */
};

struct fs_profile {                      /* one GPU-instance profile (reference/nvml.md §10) */
    unsigned index, id;                  /* NVML profile index and device-specific ID */
    char name[48];                       /* "1g.10gb+me" (NVML's v2 name is "MIG " + this) */
    unsigned slices, instances, sm, ce, dec, enc, jpg, ofa;
    unsigned long long mem_mb;
    unsigned nplacements, placement_size;
    unsigned placements[FS_MAX_PLACEMENTS];   /* possible starts, in memory slices */
    unsigned nci;
    struct fs_ci_profile ci[FS_MAX_CI_PROFILES];
};

struct fs_gpu_static {
    char name[96];                       /* "NVIDIA H100 80GB HBM3" */
    char uuid[96];                       /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    unsigned char uuid_bytes[16];
    char pci_bus_id[32];                 /* "00000000:1B:00.0" */
    unsigned pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id;
    unsigned minor;
    unsigned long long mem_total;        /* NVML total (85,520,809,984 on H100) */
    unsigned long long mem_reserved;     /* driver-reserved part of it (NVML v2 'reserved') */
    unsigned long long ctx_overhead;     /* bytes the fake libcuda charges per process context */
    unsigned sm_count, cc_major, cc_minor;
    unsigned clock_graphics, clock_sm, clock_mem, clock_video;          /* MHz, current */
    unsigned max_graphics, max_sm, max_mem, max_video;                  /* MHz */
    unsigned temperature, power_mw, power_limit_mw, fan;                /* °C, mW, mW, % (fan 0 = none) */
    unsigned pcie_gen, pcie_width;
    unsigned nvlink_island;              /* GPUs of one island share NVLinks (0: none, no NVLink) */
    unsigned pcie_switch;                /* GPUs of one group sit behind one PCIe switch (0: none) */
    unsigned numa_node;                  /* GPUs of one node share a CPU (host bridge) */
    bool mig_capable;
    bool no_energy;                      /* no energy counter (pre-Volta parts): NOT_SUPPORTED */
    struct fs_uvm_rates uvm;             /* managed memory's migration rates (cuda/managed.c) */
    unsigned nprofiles;
    struct fs_profile profiles[FS_MAX_PROFILES];
};

/* ---- dynamic state ---- */
struct fs_proc {                         /* one process on one place of one GPU */
    bool used;
    bool resolved;                       /* pid is the host pid (else FS_UNRESOLVED_PID + ns_pid) */
    pid_t pid;                           /* what NVML reports: the pid in the host's PID namespace */
    pid_t ns_pid;                        /* the process's own getpid() (in its namespace) */
    unsigned pidns;                      /* inode of its PID namespace */
    unsigned long long start_time;       /* /proc/PID/stat field 22: a reused pid is another process */
    int gi, ci;                          /* slots; -1 = whole GPU */
    bool attached;                       /* holds a context (shown by NVML even at 0 bytes) */
    unsigned long long mem;              /* bytes held on this place, context overhead included */
    unsigned long long resolve_after_ns; /* the host resolver's next try (fs_start_resolver) */
    unsigned long long managed;          /* of mem: resident managed pages (the driver may evict them) */
    unsigned long long evicted;          /* managed bytes evicted for another allocation, not yet seen
                                          * by the owning process (it marks its pages non-resident) */
    uint64_t busy_ns;                    /* time it had a kernel running, up to its timeline's present */
    unsigned timeslice;                  /* the GPU's time-slice setting when it attached (its slices) */
    unsigned mps_pct;                    /* MPS client: its active thread percentage (0: not a client) */
};

/* A process record that ended (its process exited, was reaped, or dropped its last context and
 * memory), kept with the busy time it had: a reader's busy time of a pid is its live records'
 * plus these, so it never goes down when the process ends between two reads. */
struct fs_ended {
    pid_t pid;                           /* as NVML reported it (fs_proc.pid) */
    int gi;
    uint64_t busy_ns, ended_ns;          /* ended_ns: CLOCK_MONOTONIC; 0 = free slot */
};

struct fs_interval {                     /* one stretch of kernel work on the GPU */
    pid_t pid;
    int gi;
    uint64_t start_ns, end_ns;           /* CLOCK_MONOTONIC; may lie in the future (queued work) */
};

/* One piece of queued GPU work (timeline.c): a kernel (dur_ns of work when it has the device to
 * itself, over `width` thousandths of its SMs) or a marker (dur_ns 0: an event record or a host
 * function, done as soon as its stream reaches it). */
#define FS_W_BARRIER  1u                 /* on the legacy default stream: waits for the blocking streams */
#define FS_W_BLOCKING 2u                 /* on a blocking stream: waits for the legacy stream */
#define FS_W_DONE     4u
#define FS_W_COLL     8u                 /* a collective: spins until its peers have started (fs_coll) */
#define FS_W_CSTART  16u                 /* the collective has started (counted in its fs_coll) */
#define FS_W_COPY    32u                 /* a copy (a managed-memory prefetch): holds its stream for
                                          * dur_ns on the copy engines, whatever context has the SMs;
                                          * no SMs, no busy time */
struct fs_item {
    uint64_t seq;                        /* per GPU, from 1 in submission order; 0: free slot */
    uint64_t dur_ns, left_ns;            /* work, and what is left of it at the timeline's t_adv */
    uint64_t end_ns;                     /* when it finished (FS_W_DONE) */
    int proc;                            /* fs_gpu.procs[] index of its process */
    uint32_t ctx, stream;                /* the process's context and stream keys */
    uint16_t width;                      /* thousandths of the SMs (1..1000); 0 for a marker */
    uint8_t tl;                          /* timeline index (fs_tl_index) */
    uint8_t flags;
    uint16_t coll_n;                     /* FS_W_COLL: ranks of its communicator */
    uint64_t coll_id, coll_seq;          /* FS_W_COLL: communicator and operation */
};

/* One collective in flight (timeline.c): each rank's kernel, once it has the device, spins
 * (occupying it, busy) until all nranks kernels have started, then runs its own duration, as
 * NCCL's kernels do. Created by the first rank that starts; freed when all have finished. */
struct fs_coll {
    uint64_t id, seq;                    /* communicator and operation; nranks 0: a free entry */
    unsigned nranks, started, finished;
    uint64_t last_start_ns;              /* when the latest rank started: the release time */
};

struct fs_tl {                           /* one timeline: the whole GPU, or one MIG compute instance */
    uint64_t t_adv;                      /* simulated up to here */
    uint64_t slice_end;                  /* the running group's time slice ends here */
    uint64_t cur;                        /* the group holding the slice (a context, or all MPS clients) */
};

struct fs_ci {
    bool used;
    unsigned id;                         /* NVML CI ID, unique within the GI (from 0) */
    unsigned profile_id;                 /* CI profile ID */
    unsigned start, size;                /* compute slices inside the GI */
    char uuid[96];                       /* "MIG-..." of the MIG device this CI is */
};

struct fs_gi {
    bool used;
    unsigned id;                         /* NVML GI ID (RM swizzle id, reference §9) */
    unsigned profile;                    /* index into fs_gpu_static.profiles */
    unsigned start, size;                /* memory slices */
    struct fs_ci ci[FS_MAX_CI];
};

struct fs_mps {                          /* the fake nvidia-cuda-mps-control's view of this GPU */
    pid_t server_pid;                    /* its running MPS server; 0 = none */
    unsigned active_thread_pct;          /* daemon default for new servers; 0 = unset (100) */
    unsigned long long pinned_limit;     /* daemon default for new servers, bytes; 0 = unset */
    pid_t control_pid;                   /* the control daemon serving this GPU; 0 = none */
    unsigned server_thread_pct;          /* the running server's percentage (0 = none running) */
    unsigned nclients;                   /* clients of the running server */
    unsigned reserved[13];
};

struct fs_gpu {
    struct fs_gpu_static s;
    bool lost;                           /* NVML answers GPU_IS_LOST, CUDA ECC/unknown errors */
    unsigned compute_mode;               /* nvmlComputeMode_t */
    unsigned timeslice;                  /* nvidia-smi compute-policy value 0..3 */
    unsigned mig_current, mig_pending;   /* NVML_DEVICE_MIG_* */
    unsigned fragment_pct;               /* fakegpu-ctl fragment: one allocation gets at most 100-PCT % of the free memory */
    uint64_t pcie_tx, pcie_rx;           /* bytes over the link, device->host and host->device (fs_pcie_count) */
    uint64_t busy_ns;                    /* time any process had a kernel running on it since the state
                                          * was made ("driver load"): the exact truth tests compare
                                          * vgpu's GPU time with, and what the energy counter grows by */
    struct fs_proc procs[FS_MAX_PROCS];
    unsigned ended_head;                 /* next slot in ended[] (ring: the oldest is overwritten) */
    struct fs_ended ended[FS_MAX_ENDED];
    unsigned interval_head;              /* next slot in intervals[] (ring) */
    struct fs_interval intervals[FS_MAX_INTERVALS];
    struct fs_gi gi[FS_MAX_GI];
    unsigned mig_creates;                /* GI creations so far (all processes) */
    struct fs_mps mps;
    /* work queues (timeline.c): items in a ring, the pending ones listed in seq order */
    uint64_t item_seq;
    unsigned ring_head, npend;
    uint16_t pend[FS_RING];
    struct fs_item items[FS_RING];
    struct fs_tl tl[FS_MAX_TL];
    /* Busy time of each recent sample period (of sample_period_ms, counted from CLOCK_MONOTONIC
     * 0), added as busy_ns is: slot n % FS_UTIL_PERIODS holds period n when util_period says so
     * (else that period had no work). Kept apart from intervals[], whose 4096 kernels may span
     * less than the ~24 s of samples NVML's buffer holds. */
    uint64_t util_period[FS_UTIL_PERIODS];
    uint64_t util_busy_ns[FS_UTIL_PERIODS];
};

struct fs_slow {                         /* an entry point that sleeps before answering */
    char fn[64];
    unsigned ms;
};

struct fs_failures {                     /* injected failures; 0 = none (see README.md) */
    int nvml_init;                       /* nvmlReturn_t nvmlInit_v2 returns */
    int cuda_init;                       /* CUresult cuInit returns */
    int mig_create_fail_after;           /* GI creates per process that succeed before INSUFFICIENT_RESOURCES; -1 none */
    unsigned gpu_lost_mask;              /* bit i: GPU i is lost (besides fs_gpu.lost) */
    unsigned nslow;
    struct fs_slow slow[FS_MAX_SLOW];
    char slow_while[256];                /* non-empty: the slow calls are slow only while this path exists */
};

struct fs_state {                        /* the whole file */
    uint64_t magic;
    uint32_t layout_version, size;       /* size = sizeof(struct fs_state) */
    unsigned long long resolver_ns;      /* the host resolver's last look (fs_start_resolver) */
    unsigned host_pidns;                 /* PID namespace of the state's creator: "the host", whose
                                          * pids NVML reports (a process in another namespace is
                                          * resolved by a reader on the host) */
    char lock_storage[64];               /* pthread_mutex_t, process-shared and robust */
    char driver_version[32];             /* "580.159.04" */
    char nvml_version[32];               /* "13.580.159.04" */
    int cuda_version;                    /* 13000 */
    unsigned sample_period_ms;           /* NVML utilisation sample period (default 200) */
    uint64_t loaded_ns;                  /* CLOCK_MONOTONIC when the state was made: the "driver load"
                                          * the energy counter counts from */
    struct fs_failures fail;
    unsigned ngpus;
    struct fs_gpu gpu[FS_MAX_GPUS];
    struct fs_coll coll[FS_MAX_COLL];
};

/* ---- opening ---- */
/* Maps the state (creating it from the scenario if needed). Idempotent and thread-safe.
 * Returns NULL with a message in fs_error() ("cannot read scenario X: ...") on failure. */
struct fs_state *fs_open(void);
const char *fs_error(void);
/* The state this process mapped (fs_open() must have succeeded). */
struct fs_state *fs_state(void);

/* ---- locking ---- */
void fs_lock(void);                      /* recovers a lock whose owner died */
void fs_unlock(void);
/* Under the lock: drops records of processes that no longer exist (pid gone or start time
 * differs). Every reader of process lists calls it, as the real driver frees a dead process's
 * memory. */
void fs_reap(void);
/* The same for one GPU only (what a per-device NVML query needs). */
void fs_reap_gpu(unsigned gpu);

/* ---- processes and memory (under the lock unless said otherwise) ---- */
/* A pid NVML reports for a process in another PID namespace while no reader on the host has
 * resolved its host pid: never a real pid (pid_max is at most 2^22). */
#define FS_UNRESOLVED_PID 4194304
unsigned long long fs_proc_start_time(pid_t pid);     /* 0 when the process does not exist */
unsigned fs_proc_pidns(pid_t pid);                   /* PID namespace inode; pid 0: self; 0 unknown */
bool fs_proc_alive(pid_t pid, unsigned long long start_time);
/* On the host (the state creator's PID namespace, and a /proc that shows it): a thread that
 * resolves the host pids of processes in other namespaces every 10 ms, as the driver knows them
 * (once per process; the fake NVML starts it at nvmlInit). Elsewhere nothing. */
void fs_start_resolver(void);
/* The record of (pid, place) on gpu; creates it (this process's start time) when create is set.
 * pid == getpid() means this process, found by its own namespace and pid (whatever pid NVML
 * reports for it). NULL when not found or the table is full. */
struct fs_proc *fs_proc_get(unsigned gpu, pid_t pid, int gi, int ci, bool create);
/* Capacity and use of a place: whole GPU (gi = -1; total = mem_total - mem_reserved) or a GPU
 * instance (total = its profile's memory; ci does not matter: CIs of a GI share its memory). */
unsigned long long fs_place_total(unsigned gpu, int gi);
unsigned long long fs_place_used(unsigned gpu, int gi);
/* Charges bytes to (this pid, place): false (nothing charged) when the place lacks room.
 * Both take the lock themselves. */
bool fs_charge(unsigned gpu, int gi, int ci, unsigned long long bytes);
void fs_uncharge(unsigned gpu, int gi, int ci, unsigned long long bytes);
/* Managed memory (cuda/managed.c): pages made resident are charged as evictable; a plain charge
 * that does not fit evicts resident managed pages of any process on the place (as the UVM driver
 * evicts for the resource manager), which the owner learns from fs_take_evicted. fs_charge_managed
 * charges at most `bytes`, only from free memory, and returns what it charged. */
unsigned long long fs_charge_managed(unsigned gpu, int gi, int ci, unsigned long long bytes);
void fs_uncharge_managed(unsigned gpu, int gi, int ci, unsigned long long bytes);
unsigned long long fs_take_evicted(unsigned gpu, int gi, int ci);
/* Bytes that crossed the GPU's PCIe link: managed pages migrating in (rx) and out (tx), and
 * copies between host and device memory; NVML's NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES read them.
 * The whole GPU's, whatever MIG instance the traffic is for. Takes the lock. */
void fs_pcie_count(unsigned gpu, unsigned long long tx, unsigned long long rx);
/* A context is being created on the place (the driver's checks, then fs_attach): -1 when the
 * GPU's compute mode refuses it (PROHIBITED; EXCLUSIVE_PROCESS with another process holding a
 * context on the GPU, unless this one is an MPS client: the server owns the one context). An MPS
 * client (mps_pct 1..100) runs with that active thread percentage. Takes the lock. */
int fs_claim(unsigned gpu, int gi, int ci, unsigned mps_pct);
/* The largest single allocation the place can take now: its free memory, less what fakegpu-ctl
 * fragment says lies in pieces too small (no limit below 2 MiB). Takes the lock. */
unsigned long long fs_largest_block(unsigned gpu, int gi);
/* Marks this process as holding (or not) a context on the place; the record goes away when it
 * is detached and holds no memory. Takes the lock. */
void fs_attach(unsigned gpu, int gi, int ci, bool attached);
/* Frees every record of this process (clean exit). Takes the lock. */
void fs_release_self(void);

/* ---- kernels, queues and utilisation (timeline.c) ----
 * Work is queued per (process, context, stream) on its place's timeline and simulated lazily up
 * to the present by whoever looks: contexts time-slice (slices from the timeslice setting),
 * streams of one context share the device, MPS clients run side by side within their active
 * thread percentage (see README.md "Time"). */
struct fs_work {
    uint32_t ctx, stream;
    uint64_t dur_ns;
    unsigned width;                      /* thousandths of the SMs; 0: a marker */
    unsigned flags;                      /* FS_W_BARRIER | FS_W_BLOCKING | FS_W_COPY */
    uint64_t coll_id, coll_seq;          /* a collective kernel of coll_n ranks (coll_n 0: none) */
    unsigned coll_n;
};
struct fs_pos { uint64_t seq; unsigned slot; };   /* a submitted item; seq 0: nothing */
/* Queues one item for this process on the place. False when the GPU's ring has no free slot
 * (the caller waits for its oldest work and retries). Takes the lock. */
bool fs_submit(unsigned gpu, int gi, int ci, const struct fs_work *w, struct fs_pos *out);
/* Where a submitted item stands: true (done; *end = when) or false (*end = when it would finish
 * if nothing more arrived). An item gone from the ring is done; *end is then left as it was.
 * Takes the lock. */
bool fs_pos_done(unsigned gpu, const struct fs_pos *p, uint64_t *end);
/* Pending items of this process's context ctx on the place, and the oldest of them. Takes the lock. */
unsigned fs_pending(unsigned gpu, int gi, int ci, uint32_t ctx, struct fs_pos *oldest);
/* Simulates every timeline of the GPU up to now (readers of busy time call it). Under the lock. */
void fs_advance_gpu(unsigned gpu);
/* Drops the queued work of record procs[idx] (its process is gone). Under the lock. */
void fs_drop_work(unsigned gpu, unsigned idx);
/* Ends process record idx of the GPU: its queued work is dropped (what ran stays accounted),
 * its busy time goes to the GPU's ended[] ring, and the record is freed. Under the lock. */
void fs_proc_end(unsigned gpu, unsigned idx);
/* Runs dur_ns of this process's work on the place (context key 0) and returns the projected end:
 * what fakegpu-ctl busy uses. Takes the lock. */
uint64_t fs_run(unsigned gpu, int gi, int ci, uint64_t earliest_ns, uint64_t dur_ns);
/* Slice length of a time-slice setting (0 default 2 ms, 1 short 1 ms, 2 medium 4 ms, 3 long 8 ms). */
uint64_t fs_slice_ns(unsigned timeslice);
/* Busy ns of the GPU (pid 0: any process; gi -2: any place) within [from_ns, to_ns), from the
 * interval ring. Under the lock. */
uint64_t fs_busy_between(unsigned gpu, pid_t pid, int gi, uint64_t from_ns, uint64_t to_ns);
/* Busy ns of the GPU in sample period n (of sample_period_ms from CLOCK_MONOTONIC 0): exact for
 * the last FS_UTIL_PERIODS periods, 0 before. Under the lock, after fs_advance_gpu. */
uint64_t fs_busy_in_period(unsigned gpu, uint64_t n);

/* ---- MIG (under the lock) ---- */
/* The GI slot with NVML id, or -1. */
int fs_gi_by_id(unsigned gpu, unsigned id);
/* Number of live GIs of the profile (index into profiles[]) that could still be created. */
unsigned fs_gi_remaining(unsigned gpu, unsigned profile);
/* Creates a GI; start = -1 lets the "driver" pick (highest free start first). Returns the slot,
 * or -nvmlReturn_t (-23 INSUFFICIENT_RESOURCES, -2 INVALID_ARGUMENT for a bad start). */
int fs_gi_create(unsigned gpu, unsigned profile, int start);
/* Creates a CI of the GI's CI profile (index into profiles[gi.profile].ci[]); start = -1: lowest
 * free start. Returns the CI slot or -nvmlReturn_t. */
int fs_ci_create(unsigned gpu, int gi, unsigned ci_profile, int start);
/* MIG devices (compute instances) in CUDA/NVML order: GI slot order, then CI slot order.
 * Returns how many; fills gi[]/ci[] slots. */
unsigned fs_mig_devices(unsigned gpu, int *gi, int *ci, unsigned max);
/* "Resets" the GPU: a pending MIG mode becomes current when no process uses the GPU (returns
 * false otherwise); a mode change clears every GI/CI. */
bool fs_gpu_reset(unsigned gpu);

/* ---- failures (process view: scenario, then VGPU_FAKE_FAIL overrides) ---- */
const struct fs_failures *fs_failures(void);
/* Sleeps if the scenario/env says fn is slow. */
void fs_maybe_slow(const char *fn);
/* GPU i has fallen off the bus (scenario, VGPU_FAKE_FAIL or a fake tool). */
bool fs_gpu_lost(unsigned gpu);

/* ---- time ---- */
uint64_t fs_now_ns(void);                /* CLOCK_MONOTONIC */
uint64_t fs_wall_us(void);               /* CLOCK_REALTIME, µs since the epoch */
uint64_t fs_mono_to_wall_us(uint64_t mono_ns);
/* The GPU's energy since the state was made, in millijoules, up to now: its idle power all the
 * time plus half the span up to its power limit while busy (what nvmlDeviceGetPowerUsage shows
 * at full load). Deterministic: tests compute it from busy_ns. Under the lock. */
uint64_t fs_energy_mj(unsigned gpu);

#pragma GCC visibility pop

#endif
