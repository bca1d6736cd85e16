/* nvml.c: NVML as the job sees it (DESIGN.md decision 6, pitfall 3).
 *
 *  - nvmlDeviceGetCount[_v2] / nvmlDeviceGetHandleByIndex[_v2] list only the job's GPUs (by the
 *    UUIDs `vgpu run` wrote in the region; a MIG device of the job shows its parent GPU), so
 *    nvidia-smi inside a job shows only them. Without UUIDs in the region (HAMi variables) or
 *    outside a job, nothing is filtered.
 *  - nvmlDeviceGetMemoryInfo[_v2] of a job GPU with a memory limit show the job's slice:
 *    total = min(limit, physical), used = the job's usage, free = total - used, never negative,
 *    used + free (+ reserved = 0 in v2) = total. Without a limit, the driver's numbers.
 * The real functions come from libnvidia-ml.so.1; NVML handles are only ever passed through. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hook.h"
#include "vgpu/outside.h"
#include "vgpu/proc.h"
#include "vgpu/region.h"

#define NV(sym) ((vgpu_##sym##_fn)vgpu_real_nvml_sym(#sym))

/* ---- the job's GPUs ---- */

/* Job device whose UUID is the handle's; -1 when none (or no job). */
static int job_dev_of_handle(nvmlDevice_t h)
{
    struct vgpu_region *r = vgpu_job();
    vgpu_nvmlDeviceGetUUID_fn uuid_of = NV(nvmlDeviceGetUUID);
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    if (!r || !uuid_of || uuid_of(h, uuid, sizeof uuid) != NVML_SUCCESS)
        return -1;
    unsigned n = vgpu_region_device_count(r);
    for (unsigned i = 0; i < n; i++)
        if (r->info->dev[i].uuid[0] && strcmp(r->info->dev[i].uuid, uuid) == 0)
            return (int)i;
    return -1;
}

static bool job_has_uuids(void)
{
    struct vgpu_region *r = vgpu_job();
    return r && vgpu_region_device_count(r) && r->info->dev[0].uuid[0];
}

/* Whether physical GPU handle h is one of the job's (itself, or the parent of a job MIG device). */
static bool handle_in_job(nvmlDevice_t h)
{
    if (job_dev_of_handle(h) >= 0)
        return true;
    struct vgpu_region *r = vgpu_job();
    vgpu_nvmlDeviceGetHandleByUUID_fn by_uuid = NV(nvmlDeviceGetHandleByUUID);
    vgpu_nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn parent = NV(nvmlDeviceGetDeviceHandleFromMigDeviceHandle);
    if (!r || !by_uuid || !parent)
        return false;
    unsigned n = vgpu_region_device_count(r);
    for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t mig, p;
        if (strncmp(r->info->dev[i].uuid, "MIG-", 4) == 0 && by_uuid(r->info->dev[i].uuid, &mig) == NVML_SUCCESS &&
            parent(mig, &p) == NVML_SUCCESS && p == h)
            return true;
    }
    return false;
}

/* Visible index -> real NVML index. Built on first use (NVML is initialised by then). */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static bool map_built;
static unsigned map_n, map_idx[64];

static nvmlReturn_t build_map(void)
{
    vgpu_nvmlDeviceGetCount_v2_fn count = NV(nvmlDeviceGetCount_v2);
    vgpu_nvmlDeviceGetHandleByIndex_v2_fn by_index = NV(nvmlDeviceGetHandleByIndex_v2);
    if (!count || !by_index)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&map_lock);
    if (!map_built) {
        unsigned n = 0;
        rc = count(&n);
        if (rc == NVML_SUCCESS) {
            map_n = 0;
            for (unsigned i = 0; i < n && map_n < 64; i++) {
                nvmlDevice_t h;
                if (by_index(i, &h) == NVML_SUCCESS && handle_in_job(h))
                    map_idx[map_n++] = i;
            }
            map_built = true;
        }
    }
    pthread_mutex_unlock(&map_lock);
    return rc;
}

static nvmlReturn_t filtered_count(unsigned int *n, vgpu_nvmlDeviceGetCount_v2_fn real)
{
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!n || !job_has_uuids())
        return real(n);
    nvmlReturn_t rc = build_map();
    if (rc != NVML_SUCCESS)
        return rc;
    *n = map_n;
    return NVML_SUCCESS;
}

static nvmlReturn_t filtered_handle(unsigned int index, nvmlDevice_t *h, vgpu_nvmlDeviceGetHandleByIndex_v2_fn real)
{
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!job_has_uuids())
        return real(index, h);
    nvmlReturn_t rc = build_map();
    if (rc != NVML_SUCCESS)
        return rc;
    if (index >= map_n)
        return NVML_ERROR_INVALID_ARGUMENT;
    return real(map_idx[index], h);
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    return filtered_count(deviceCount, NV(nvmlDeviceGetCount_v2));
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return filtered_count(deviceCount, (vgpu_nvmlDeviceGetCount_v2_fn)NV(nvmlDeviceGetCount));
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    return filtered_handle(index, device, NV(nvmlDeviceGetHandleByIndex_v2));
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return filtered_handle(index, device, (vgpu_nvmlDeviceGetHandleByIndex_v2_fn)NV(nvmlDeviceGetHandleByIndex));
}

/* ---- memory ---- */

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    vgpu_nvmlDeviceGetMemoryInfo_fn real = NV(nvmlDeviceGetMemoryInfo);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    int dev;
    if (rc != NVML_SUCCESS || !memory || (dev = job_dev_of_handle(device)) < 0 || !vgpu_acct_limit_job(dev))
        return rc;
    uint64_t fr, to, used;
    vgpu_acct_view_job(dev, memory->free, memory->total, &fr, &to, &used);
    memory->total = to;
    memory->free = fr;
    memory->used = used;
    return rc;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    vgpu_nvmlDeviceGetMemoryInfo_v2_fn real = NV(nvmlDeviceGetMemoryInfo_v2);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    int dev;
    if (rc != NVML_SUCCESS || !memory || (dev = job_dev_of_handle(device)) < 0 || !vgpu_acct_limit_job(dev))
        return rc;
    uint64_t fr, to, used;
    vgpu_acct_view_job(dev, memory->free, memory->total, &fr, &to, &used);
    memory->total = to;
    memory->reserved = 0;      /* the slice has no driver-reserved part: used + free = total */
    memory->free = fr;
    memory->used = used;
    return rc;
}

struct nvml_hook {
    const char *name;
    void *fn;
};
static const struct nvml_hook nvml_hooks[] = {
    { "nvmlDeviceGetCount_v2", (void *)&nvmlDeviceGetCount_v2 },
    { "nvmlDeviceGetCount", (void *)&nvmlDeviceGetCount },
    { "nvmlDeviceGetHandleByIndex_v2", (void *)&nvmlDeviceGetHandleByIndex_v2 },
    { "nvmlDeviceGetHandleByIndex", (void *)&nvmlDeviceGetHandleByIndex },
    { "nvmlDeviceGetMemoryInfo", (void *)&nvmlDeviceGetMemoryInfo },
    { "nvmlDeviceGetMemoryInfo_v2", (void *)&nvmlDeviceGetMemoryInfo_v2 },
};

void *vgpu_nvml_hook_by_symbol(const char *name)
{
    for (size_t i = 0; i < sizeof nvml_hooks / sizeof *nvml_hooks; i++)
        if (strcmp(nvml_hooks[i].name, name) == 0)
            return nvml_hooks[i].fn;
    return NULL;
}

/* ---- measuring for the CUDA side (ctx.c) ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool nvml_ok;
static atomic_bool nvml_done;   /* nvml_init ran to its end (nvml_ok is then final) */

static void nvml_init(void)
{
    vgpu_nvmlInit_v2_fn init = NV(nvmlInit_v2);
    nvml_ok = init && init() == NVML_SUCCESS;
    atomic_store(&nvml_done, true);
}

bool vgpu_nvml_ready(void)
{
    return atomic_load(&nvml_done);
}

static void *nvml_init_thread(void *arg)
{
    (void)arg;
    pthread_once(&init_once, nvml_init);
    /* The job's GPUs attached here, not in the first measurement (by UUID: no CUDA call). */
    vgpu_nvmlDeviceGetHandleByUUID_fn by_uuid = NV(nvmlDeviceGetHandleByUUID);
    struct vgpu_region *r = vgpu_job();
    for (unsigned d = 0; nvml_ok && by_uuid && r && d < vgpu_region_device_count(r); d++) {
        nvmlDevice_t h;
        if (r->info->dev[d].uuid[0])
            (void)by_uuid(r->info->dev[d].uuid, &h);
    }
    return NULL;
}

bool vgpu_nvml_pids_are_ours(void)
{
    /* The kernel's initial PID namespace has this fixed inode (PROC_PID_INIT_INO). */
    static int ours = -1;
    if (ours < 0)
        ours = vgpu_proc_pidns(0) == 0xEFFFFFFCu;
    return ours == 1;
}

void vgpu_nvml_start(void)
{
    /* Only in a job (nothing else measures contexts), and once: a second cuInit finds it done. A
     * thread that cannot be made leaves the initialisation to the first measurement, as before. */
    static atomic_bool started;
    if (!vgpu_job() || atomic_exchange(&started, true))
        return;
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0)
        return;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, nvml_init_thread, NULL) != 0)
        vgpu_debug("cannot start NVML ahead of the first context; it starts there");
    pthread_attr_destroy(&a);
}

/* The NVML handle of CUDA device `dev`, by UUID. */
static bool handle_of_dev(int dev, nvmlDevice_t *h)
{
    vgpu_nvmlDeviceGetHandleByUUID_fn by_uuid = NV(nvmlDeviceGetHandleByUUID);
    struct vgpu_region *r = vgpu_job();
    if (!by_uuid || !r)
        return false;
    int jdev = vgpu_job_dev(dev);
    if (jdev >= 0 && r->info->dev[jdev].uuid[0])
        return by_uuid(r->info->dev[jdev].uuid, h) == NVML_SUCCESS;
    /* No UUID in the region (HAMi variables): ask the driver. */
    vgpu_cuDeviceGetUuid_v2_fn cu_uuid = (vgpu_cuDeviceGetUuid_v2_fn)vgpu_real_cuda_sym("cuDeviceGetUuid_v2");
    CUuuid u;
    if (!cu_uuid || cu_uuid(&u, dev) != CUDA_SUCCESS)
        return false;
    const unsigned char *b = (const unsigned char *)u.bytes;
    char s[64];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(s, sizeof s, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 pass ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                 b[12], b[13], b[14], b[15]);
        if (by_uuid(s, h) == NVML_SUCCESS)
            return true;
    }
    return false;
}

bool vgpu_nvml_device_used(int dev, uint64_t *used)
{
    pthread_once(&init_once, nvml_init);
    vgpu_nvmlDeviceGetMemoryInfo_fn mem = NV(nvmlDeviceGetMemoryInfo);
    nvmlDevice_t h;
    nvmlMemory_t m;
    if (!nvml_ok || !mem || !handle_of_dev(dev, &h) || mem(h, &m) != NVML_SUCCESS)
        return false;
    *used = m.used;
    return true;
}

/* ---- reconciliation with NVML (off the hot path: allocations, at most once a second) ----
 *
 * NVML's per-process usedGpuMemory is what the GPU really gives this process: its context,
 * modules, heaps, everything allocated. Whatever it shows beyond what this process has been
 * charged is charged too (as part of the process's "overhead"), and an overhead measured too
 * high (another process's context created at the same instant) is given back, so the remainder
 * is neither lost nor counted twice. Allocations themselves are never uncharged here. */

static _Atomic uint64_t overhead[VGPU_REGION_MAX_DEVICES];   /* context + reconciled remainder */
static _Atomic bool measured[VGPU_REGION_MAX_DEVICES];       /* the context's overhead is charged */

void vgpu_ctx_overhead_charged(int dev, uint64_t bytes)
{
    if (dev >= 0 && dev < VGPU_REGION_MAX_DEVICES) {
        atomic_fetch_add(&overhead[dev], bytes);
        atomic_store(&measured[dev], true);
    }
}

#define MAX_NVML_PROCS 128
#define AWAIT_SELF_MS 750   /* three of `vgpu run`'s walks */

/* This process's pid as NVML reports it (a host pid), 0 while it is unknown. The slot has it
 * once it is known in the creator's namespace: at once when the process lives there or its /proc
 * is the host's; for a process in a container with its own /proc, only after a reader there
 * found it (`vgpu run`'s walk). Outside a job, or in a region of an older vgpu: NSpid's first
 * entry. */
static unsigned own_nvml_pid(struct vgpu_region *r, int slot)
{
    if (!r || slot < 0 || !r->hdr->creator_pidns)
        return (unsigned)vgpu_proc_host_pid();
    const struct vgpu_region_slot *s = &r->use->slot[slot];
    if (atomic_load(&s->host_ns) == r->hdr->creator_pidns && atomic_load(&s->host_pid) > 0)
        return (unsigned)atomic_load(&s->host_pid);
    return 0;
}

/* Which of NVML's pids is this process: NVML gives the pids of the caller's own PID namespace
 * (driver 580 on an H200: a process in a container with its own /proc is listed to itself as
 * its pid there, 1 for unshare's child, while the host lists it as 575), where older drivers were
 * documented to give host pids. So the host pid when NVML lists it, else this namespace's own
 * pid (getpid) when it lists that; 0 when it lists neither (this process has no context there,
 * or its host pid is not known yet on a driver of host pids). In the initial namespace the two
 * are one. */
static unsigned self_in_list(const unsigned *pids, unsigned n, unsigned host)
{
    unsigned own = (unsigned)getpid();
    bool own_listed = false;
    for (unsigned i = 0; i < n; i++) {
        if (host && pids[i] == host)
            return host;
        own_listed |= pids[i] == own;
    }
    return own_listed ? own : 0;
}

void vgpu_nvml_await_self(void)
{
    struct vgpu_region *r = vgpu_job();
    int slot = vgpu_job_slot();
    if (!r || slot < 0)
        return;
    unsigned waited = 0;
    for (; !own_nvml_pid(r, slot) && waited < AWAIT_SELF_MS; waited += 5) {
        /* Only while `vgpu run` walks the job (its last look within a second): a job nobody
         * walks would wait for nothing. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        uint64_t seen = atomic_load(&r->hdr->acct_seen_ns);
        uint64_t t = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
        if (!seen || t > seen + 1000000000ull) {
            vgpu_debug("host pid unknown, and vgpu run's walk not seen for %s: not waiting for it",
                       seen ? "over a second" : "ever");
            return;
        }
        nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
    }
    /* Said either way: a container process's context row on a real GPU failed with nothing to
     * tell whether this wait found the pid (issue 34 item 4). */
    if (waited)
        vgpu_debug("host pid %s after %u ms of vgpu run's walks", own_nvml_pid(r, slot) ? "found" : "still unknown",
                   waited);
}

/* NVML's compute processes of h: this process's used memory (*used, false when it is not
 * listed), and the job's memory outside the limiter recorded for job device jdev. */
static bool scan_processes(struct vgpu_region *r, nvmlDevice_t h, int jdev, unsigned self, uint64_t *used)
{
    vgpu_nvmlDeviceGetComputeRunningProcesses_v3_fn procs = NV(nvmlDeviceGetComputeRunningProcesses_v3);
    nvmlProcessInfo_t info[MAX_NVML_PROCS];
    unsigned pids[MAX_NVML_PROCS];
    uint64_t bytes[MAX_NVML_PROCS];
    unsigned n = MAX_NVML_PROCS;
    if (!procs || procs(h, &n, info) != NVML_SUCCESS)
        return false;
    if (n > MAX_NVML_PROCS)
        n = MAX_NVML_PROCS;
    *used = 0;
    bool found = false, unknown = false;
    for (unsigned i = 0; i < n; i++) {
        /* No per-process figure here (MIG, some containers): NVML_VALUE_NOT_AVAILABLE. */
        bool na = info[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE;
        pids[i] = info[i].pid;
        bytes[i] = na ? 0 : info[i].usedGpuMemory;
    }
    self = self_in_list(pids, n, self);
    for (unsigned i = 0; self && i < n; i++) {
        if (info[i].pid != self)
            continue;
        unknown |= info[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE;
        *used += bytes[i];
        found = true;
    }
    if (jdev >= 0) {
        struct vgpu_outside o;
        if (vgpu_outside_find(r, pids, bytes, n, &o))
            vgpu_region_set_outside(r, (unsigned)jdev, o.bytes, o.count ? o.pid[0] : 0, o.count);
    }
    return found && !unknown;
}

int vgpu_nvml_self_used(int dev, uint64_t *used)
{
    pthread_once(&init_once, nvml_init);
    vgpu_nvmlDeviceGetComputeRunningProcesses_v3_fn procs = NV(nvmlDeviceGetComputeRunningProcesses_v3);
    nvmlDevice_t h;
    if (!nvml_ok || !procs || !handle_of_dev(dev, &h))
        return 0;
    /* A busy GPU can list more processes than a fixed buffer holds: grow it (two-call protocol;
     * the list can grow between the calls, hence the retries). */
    nvmlProcessInfo_t small[64], *info = small;
    unsigned cap = 64, n = cap;
    nvmlReturn_t rc;
    for (int tries = 0; (rc = procs(h, &n, info)) == NVML_ERROR_INSUFFICIENT_SIZE && tries < 4; tries++) {
        if (info != small)
            free(info);
        cap = n + 16;
        n = cap;
        if (!(info = calloc(cap, sizeof *info)))
            return 0;
    }
    unsigned host = own_nvml_pid(vgpu_job(), vgpu_job_slot()), pid = host;
    if (rc == NVML_SUCCESS) {
        unsigned listed_pids[MAX_NVML_PROCS], m = 0;
        for (unsigned i = 0; i < n && i < cap && m < MAX_NVML_PROCS; i++)
            listed_pids[m++] = info[i].pid;
        unsigned in_list = self_in_list(listed_pids, m, host);
        /* Not listed: known to have nothing there (0 bytes) when its pid is known, or NVML's
         * pids are this namespace's own (the initial one: they are the same). */
        pid = in_list ? in_list : host ? host : vgpu_nvml_pids_are_ours() ? (unsigned)getpid() : 0;
    }
    int answer = rc == NVML_SUCCESS && pid ? 1 : 0;
    *used = 0;
    bool listed = false;
    for (unsigned i = 0; answer == 1 && i < n && i < cap; i++) {
        if (info[i].pid != pid)
            continue;
        listed = true;
        if (info[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE)
            answer = -1;
        else
            *used += info[i].usedGpuMemory;
    }
    if (answer == 1 && !listed && vgpu_log_level() >= VGPU_LOG_DEBUG) {
        /* Which pids NVML lists instead (a container process whose recorded host pid is not
         * among them: the GPU's container-process row, issue 34 item 4). */
        char pids[160] = "";
        size_t at = 0;
        for (unsigned i = 0; i < n && i < cap && i < 8 && at < sizeof pids - 24; i++)
            at += (size_t)snprintf(pids + at, sizeof pids - at, "%s%u", i ? "," : "", info[i].pid);
        vgpu_debug("GPU %d: NVML lists %u process%s (%s), neither this one's host pid %u nor its own %u", dev, n,
                   n == 1 ? "" : "es", n ? pids : "none", host, (unsigned)getpid());
    }
    if (info != small)
        free(info);
    return answer;
}

void vgpu_ctx_overhead_released(int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= VGPU_REGION_MAX_DEVICES)
        return;
    uint64_t had = atomic_load(&overhead[dev]);
    while (!atomic_compare_exchange_weak(&overhead[dev], &had, had > bytes ? had - bytes : 0))
        ;
}

void vgpu_nvml_outside_refresh(int dev)
{
    static _Atomic uint64_t last_ns;
    struct vgpu_region *r = vgpu_job();
    int jdev = r ? vgpu_job_dev(dev) : -1;
    uint64_t now = vgpu_now_ns(), last = atomic_load_explicit(&last_ns, memory_order_relaxed);
    /* Only where there is something to re-measure, and not at every refused allocation. */
    if (jdev < 0 || !vgpu_region_outside(r, (unsigned)jdev) || now - last < 200000000ull ||
        !atomic_compare_exchange_strong(&last_ns, &last, now))
        return;
    pthread_once(&init_once, nvml_init);
    nvmlDevice_t h;
    uint64_t ignored;
    int slot = vgpu_job_slot();
    if (nvml_ok && slot >= 0 && handle_of_dev(dev, &h))
        (void)scan_processes(r, h, jdev, own_nvml_pid(r, slot), &ignored);
}

void vgpu_nvml_reconcile_maybe(int dev)
{
    static _Atomic uint64_t last_ns;
    struct vgpu_region *r = vgpu_job();
    uint64_t now = vgpu_now_ns(), last = atomic_load_explicit(&last_ns, memory_order_relaxed);
    /* Not before the context itself is charged: its creation is what is being measured then. */
    if (!r || dev < 0 || dev >= VGPU_REGION_MAX_DEVICES || !atomic_load(&measured[dev]) ||
        now - last < 1000000000ull || !atomic_compare_exchange_strong(&last_ns, &last, now))
        return;
    int slot = vgpu_job_slot();
    nvmlDevice_t h;
    uint64_t nvml_used;
    pthread_once(&init_once, nvml_init);
    if (slot < 0 || !nvml_ok || !handle_of_dev(dev, &h) ||
        !scan_processes(r, h, vgpu_job_dev(dev), own_nvml_pid(r, slot), &nvml_used))
        return;
    /* Managed memory that spilled (spill.c) is in `charged`, and NVML counts whichever of its
     * pages happen to be resident: the difference says nothing about unaccounted memory then,
     * so the overhead charged so far stands while this process holds spilled memory here. */
    int jdev = vgpu_job_dev(dev);
    if (jdev >= 0 && (atomic_load(&r->use->slot[slot].spill_dev) & VGPU_SLOT_SPILL_DEV_MASK) == (uint32_t)jdev + 1 &&
        atomic_load(&r->use->slot[slot].spilled))
        return;
    uint64_t charged = atomic_load(&r->use->slot[slot].used[dev]);
    uint64_t over = atomic_load(&overhead[dev]);
    uint64_t allocations = charged > over ? charged - over : 0;
    uint64_t want = nvml_used > allocations ? nvml_used - allocations : 0;
    if (want > over) {
        vgpu_acct_force(dev, want - over);
        atomic_fetch_add(&overhead[dev], want - over);
        vgpu_debug("NVML shows %llu bytes not yet charged on GPU %d: charged", (unsigned long long)(want - over), dev);
    } else if (want < over) {
        vgpu_acct_release(dev, over - want);
        atomic_fetch_sub(&overhead[dev], over - want);
    }
}

/* ---- who else keeps the GPU busy (the fair share of a spilling job, limiter.c) ---- */

int vgpu_nvml_busy_others(int dev, unsigned *out, int max)
{
    pthread_once(&init_once, nvml_init);
    vgpu_nvmlDeviceGetProcessUtilization_fn util = NV(nvmlDeviceGetProcessUtilization);
    struct vgpu_region *r = vgpu_job();
    nvmlDevice_t h;
    if (!nvml_ok || !util || !r || !handle_of_dev(dev, &h))
        return -1;
    pid_t pids[VGPU_REGION_MAX_SLOTS];
    int32_t host[VGPU_REGION_MAX_SLOTS];
    unsigned mine = vgpu_region_pids(r, pids, host, VGPU_REGION_MAX_SLOTS);
    if (mine > VGPU_REGION_MAX_SLOTS)
        mine = VGPU_REGION_MAX_SLOTS;
    /* Samples of the last second (NVML's timestamps are wall-clock microseconds). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long since = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000 -
                               1000000ULL;
    nvmlProcessUtilizationSample_t s[MAX_NVML_PROCS];
    unsigned n = MAX_NVML_PROCS;
    nvmlReturn_t rc = util(h, s, &n, since);
    if (rc == NVML_ERROR_NOT_FOUND)
        return 0;                       /* no samples: nobody busy */
    if (rc != NVML_SUCCESS)
        return -1;
    if (n > MAX_NVML_PROCS)
        n = MAX_NVML_PROCS;
    unsigned seen[MAX_NVML_PROCS], others = 0;
    unsigned self = (unsigned)vgpu_proc_host_pid();
    for (unsigned i = 0; i < n; i++) {
        if (s[i].smUtil == 0 || s[i].smUtil > 100 || s[i].pid == self)
            continue;
        bool ours = false;
        for (unsigned k = 0; k < mine && !ours; k++)
            ours = s[i].pid == (unsigned)pids[k] || (host[k] > 0 && s[i].pid == (unsigned)host[k]);
        for (unsigned k = 0; k < others && !ours; k++)
            ours = seen[k] == s[i].pid;   /* several samples of one process: counted once */
        if (!ours)
            seen[others++] = s[i].pid;
    }
    for (unsigned k = 0; k < others && (int)k < max; k++)
        out[k] = seen[k];
    return (int)others < max ? (int)others : max;
}
