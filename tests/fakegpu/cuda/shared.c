/* shared.c: the fake libcuda's only door to the shared simulated machine (fakestate.h).
 * It turns the machine's GPUs and MIG devices into this process's CUDA devices (after
 * CUDA_VISIBLE_DEVICES), and forwards memory charges, context attachment and kernel time to
 * the (pid, place) records that the fake NVML and other processes read. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fakestate.h"
#include "fakecuda.h"

int fc_ndev;
struct fc_device fc_devs[FC_MAX_DEVICES];
int fc_driver_version = 13000;

/* Where each CUDA device lives in the shared state. */
struct place { unsigned gpu; int gi, ci; };
static struct place places[FC_MAX_DEVICES];
static bool opened, loaded;

static void parse_uuid(const char *s, unsigned char out[16])
{
    memset(out, 0, 16);
    const char *p = strchr(s, '-'); /* skip "GPU-" / "MIG-" */
    p = p ? p + 1 : s;
    int n = 0;
    for (; *p && n < 32; p++) {
        if (!isxdigit((unsigned char)*p))
            continue;
        int v = isdigit((unsigned char)*p) ? *p - '0' : (tolower((unsigned char)*p) - 'a' + 10);
        out[n / 2] = (unsigned char)(out[n / 2] | (n % 2 ? v : v << 4));
        n++;
    }
}

static void describe_gpu(struct fc_device *d, const struct fs_gpu *g)
{
    snprintf(d->name, sizeof d->name, "%s", g->s.name);
    snprintf(d->uuid, sizeof d->uuid, "%s", g->s.uuid);
    memcpy(d->uuid_bytes, g->s.uuid_bytes, 16);
    snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", g->s.pci_bus_id);
    d->pci_domain = (int)g->s.pci_domain;
    d->pci_bus = (int)g->s.pci_bus;
    d->pci_device = (int)g->s.pci_device;
    d->sm_count = (int)g->s.sm_count;
    d->cc_major = (int)g->s.cc_major;
    d->cc_minor = (int)g->s.cc_minor;
    d->ctx_overhead = g->s.ctx_overhead;
    d->uvm_fault_mbps = g->s.uvm.fault_mbps;
    d->uvm_prefetch_mbps = g->s.uvm.prefetch_mbps;
    d->uvm_populate_mbps = g->s.uvm.populate_mbps;
    d->uvm_prefetch_host_mbps = g->s.uvm.prefetch_host_mbps;
}

/* Caller holds fs_lock. */
static void load_devices(struct fs_state *st)
{
    /* GPUs that have fallen off the bus are not enumerated (the others' indexes close up). */
    struct fc_phys_gpu phys[FS_MAX_GPUS];
    unsigned present[FS_MAX_GPUS], np = 0;
    static char mig_uuid_store[FS_MAX_GPUS][FS_MAX_GI * FS_MAX_CI][96];
    static const char *mig_uuids[FS_MAX_GPUS][FS_MAX_GI * FS_MAX_CI];
    static int mig_gi[FS_MAX_GPUS][FS_MAX_GI * FS_MAX_CI], mig_ci[FS_MAX_GPUS][FS_MAX_GI * FS_MAX_CI];
    unsigned n = st->ngpus < FS_MAX_GPUS ? st->ngpus : FS_MAX_GPUS;
    for (unsigned g = 0; g < n; g++) {
        if (fs_gpu_lost(g))
            continue;
        present[np++] = g;
    }
    for (unsigned x = 0; x < np; x++) {
        unsigned g = present[x];
        const struct fs_gpu *gpu = &st->gpu[g];
        phys[x].uuid = gpu->s.uuid;
        phys[x].mig_enabled = gpu->mig_current == 1; /* NVML_DEVICE_MIG_ENABLE */
        unsigned k = phys[x].mig_enabled ? fs_mig_devices(g, mig_gi[g], mig_ci[g], FS_MAX_GI * FS_MAX_CI) : 0;
        for (unsigned i = 0; i < k; i++) {
            snprintf(mig_uuid_store[g][i], sizeof mig_uuid_store[g][i], "%s",
                     gpu->gi[mig_gi[g][i]].ci[mig_ci[g][i]].uuid);
            mig_uuids[g][i] = mig_uuid_store[g][i];
        }
        phys[x].nmig = (int)k;
        phys[x].mig_uuids = mig_uuids[g];
    }
    struct fc_pick picks[FC_MAX_DEVICES];
    int k = fc_visible_select(getenv("CUDA_VISIBLE_DEVICES"), phys, (int)np, picks, FC_MAX_DEVICES);
    fc_ndev = 0;
    for (int i = 0; i < k; i++) {
        unsigned g = present[picks[i].gpu];
        const struct fs_gpu *gpu = &st->gpu[g];
        struct fc_device *d = &fc_devs[fc_ndev];
        struct place *pl = &places[fc_ndev];
        memset(d, 0, sizeof *d);
        describe_gpu(d, gpu);
        d->gpu = (int)g;
        d->mig = picks[i].mig;
        pl->gpu = g;
        pl->gi = pl->ci = -1;
        if (picks[i].mig >= 0) {
            int gi = mig_gi[g][picks[i].mig], ci = mig_ci[g][picks[i].mig];
            const struct fs_gi *G = &gpu->gi[gi];
            const struct fs_profile *prof = &gpu->s.profiles[G->profile];
            pl->gi = gi;
            pl->ci = ci;
            snprintf(d->name, sizeof d->name, "%s MIG %s", gpu->s.name, prof->name);
            snprintf(d->uuid, sizeof d->uuid, "%s", G->ci[ci].uuid);
            parse_uuid(G->ci[ci].uuid, d->uuid_bytes);
            d->sm_count = (int)prof->sm;
            for (unsigned c = 0; c < prof->nci; c++)
                if (prof->ci[c].id == G->ci[ci].profile_id)
                    d->sm_count = (int)prof->ci[c].sm;
        }
        d->total_mem = fs_place_total(g, pl->gi);
        fc_ndev++;
    }
}

/* Caller holds fc_lock. Opens the machine once; loads the device list at the first cuInit. */
CUresult fc_shared_init(void)
{
    if (!opened) {
        if (!fs_open()) {
            fprintf(stderr, "fake libcuda: %s\n", fs_error());
            return CUDA_ERROR_UNKNOWN;
        }
        opened = true;
        fc_driver_version = fs_state()->cuda_version;
    }
    if (fc_initialized || loaded)
        return CUDA_SUCCESS;
    int fail = fs_failures()->cuda_init;
    if (fail != 0)
        return (CUresult)fail;
    fs_lock();
    load_devices(fs_state());
    fs_unlock();
    loaded = true;
    return CUDA_SUCCESS;
}

bool fc_dev_lost(int ordinal)
{
    return fs_gpu_lost(places[ordinal].gpu);
}

/* ---- MPS clients ----
 * A process is an MPS client of a GPU when it names a pipe directory (CUDA_MPS_PIPE_DIRECTORY)
 * and a control daemon serves that GPU (fs_gpu.mps, kept by the fake nvidia-cuda-mps-control).
 * Its active thread percentage (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, else the server's, else the
 * daemon's default, else 100) caps the share of the SMs its kernels get (common/timeline.c); its
 * pinned device memory limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "IDX=SIZE,..." or "SIZE", else
 * the daemon's default) refuses allocations past it, context overhead not counted (the server
 * holds the context). */
static unsigned long long mps_limit[FC_MAX_DEVICES], mps_used[FC_MAX_DEVICES];

/* "1536M", "2G", "4096" (MiB when no unit? no: bytes), with an optional B. 0 when bad. */
static unsigned long long parse_size(const char *s, const char **end)
{
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (errno || e == s || v < 0)
        return 0;
    unsigned long long mul = 1;
    switch (toupper((unsigned char)*e)) {
    case 'K': mul = 1ULL << 10; e++; break;
    case 'M': mul = 1ULL << 20; e++; break;
    case 'G': mul = 1ULL << 30; e++; break;
    case 'T': mul = 1ULL << 40; e++; break;
    default: break;
    }
    if (toupper((unsigned char)*e) == 'B')
        e++;
    *end = e;
    return (unsigned long long)(v * (double)mul);
}

static unsigned long long pinned_limit_env(int ordinal)
{
    const char *s = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    unsigned long long all = 0;
    while (s && *s) {
        const char *eq = strchr(s, '='), *comma = strchr(s, ',');
        const char *end = s;
        if (eq && (!comma || eq < comma)) {
            long idx = strtol(s, NULL, 10);
            unsigned long long v = parse_size(eq + 1, &end);
            if (idx == ordinal)
                return v;
        } else {
            all = parse_size(s, &end);
        }
        s = comma ? comma + 1 : NULL;
    }
    return all;
}

CUresult fc_dev_claim(int ordinal)
{
    const struct place *p = &places[ordinal];
    const struct fs_gpu *g = &fs_state()->gpu[p->gpu];
    unsigned pct = 0;
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    pid_t ctl = g->mps.control_pid;
    mps_limit[ordinal] = 0;
    if (pipe_dir && *pipe_dir && ctl > 0 && (kill(ctl, 0) == 0 || errno == EPERM)) {
        const char *e = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        double v = e && *e ? strtod(e, NULL) : 0;
        if (v <= 0)
            v = g->mps.server_thread_pct ? g->mps.server_thread_pct : g->mps.active_thread_pct ? g->mps.active_thread_pct : 100;
        pct = v >= 100 ? 100 : v < 1 ? 1 : (unsigned)(v + 0.999);
        mps_limit[ordinal] = pinned_limit_env(ordinal);
        if (!mps_limit[ordinal])
            mps_limit[ordinal] = g->mps.pinned_limit;
    }
    return fs_claim(p->gpu, p->gi, p->ci, pct) == 0 ? CUDA_SUCCESS : CUDA_ERROR_DEVICE_UNAVAILABLE;
}

CUresult fc_dev_charge_ctx(int ordinal, unsigned long long bytes)
{
    if (bytes == 0)
        return CUDA_SUCCESS;
    const struct place *p = &places[ordinal];
    if (fs_gpu_lost(p->gpu))
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    return fs_charge(p->gpu, p->gi, p->ci, bytes) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void fc_dev_uncharge_ctx(int ordinal, unsigned long long bytes)
{
    if (bytes == 0)
        return;
    const struct place *p = &places[ordinal];
    fs_uncharge(p->gpu, p->gi, p->ci, bytes);
}

CUresult fc_dev_charge(int ordinal, unsigned long long bytes)
{
    if (bytes == 0)
        return CUDA_SUCCESS;
    if (mps_limit[ordinal] && (bytes > mps_limit[ordinal] || mps_used[ordinal] > mps_limit[ordinal] - bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;   /* past the MPS client's pinned device memory limit */
    CUresult r = fc_dev_charge_ctx(ordinal, bytes);
    if (r == CUDA_SUCCESS)
        mps_used[ordinal] += bytes;
    return r;
}

CUresult fc_dev_charge_block(int ordinal, unsigned long long bytes)
{
    const struct place *p = &places[ordinal];
    if (bytes > fs_largest_block(p->gpu, p->gi))
        return CUDA_ERROR_OUT_OF_MEMORY;   /* the free memory lies in smaller pieces */
    return fc_dev_charge(ordinal, bytes);
}

void fc_dev_uncharge(int ordinal, unsigned long long bytes)
{
    mps_used[ordinal] = mps_used[ordinal] > bytes ? mps_used[ordinal] - bytes : 0;
    fc_dev_uncharge_ctx(ordinal, bytes);
}

void fc_dev_meminfo(int ordinal, unsigned long long *free_bytes, unsigned long long *total)
{
    const struct place *p = &places[ordinal];
    fs_lock();
    fs_reap();
    unsigned long long t = fs_place_total(p->gpu, p->gi), u = fs_place_used(p->gpu, p->gi);
    fs_unlock();
    *total = t;
    *free_bytes = u < t ? t - u : 0;
}

unsigned long long fc_dev_charge_managed(int ordinal, unsigned long long bytes)
{
    const struct place *p = &places[ordinal];
    return bytes && !fs_gpu_lost(p->gpu) ? fs_charge_managed(p->gpu, p->gi, p->ci, bytes) : 0;
}

void fc_dev_uncharge_managed(int ordinal, unsigned long long bytes)
{
    const struct place *p = &places[ordinal];
    if (bytes)
        fs_uncharge_managed(p->gpu, p->gi, p->ci, bytes);
}

unsigned long long fc_dev_take_evicted(int ordinal)
{
    const struct place *p = &places[ordinal];
    return fs_take_evicted(p->gpu, p->gi, p->ci);
}

void fc_dev_pcie(int ordinal, unsigned long long tx, unsigned long long rx)
{
    if (ordinal >= 0 && ordinal < fc_ndev)
        fs_pcie_count(places[ordinal].gpu, tx, rx);
}

_Static_assert(FC_W_BARRIER == FS_W_BARRIER && FC_W_BLOCKING == FS_W_BLOCKING && FC_W_COPY == FS_W_COPY,
               "fakecuda.h's work flags are fakestate.h's");

bool fc_dev_submit(int ordinal, uint32_t ctx, uint32_t stream, uint64_t dur_ns, unsigned width, unsigned flags,
                   const struct fc_coll *coll, struct fc_pos *out)
{
    const struct place *p = &places[ordinal];
    struct fs_work w = { .ctx = ctx, .stream = stream, .dur_ns = dur_ns, .width = width, .flags = flags };
    if (coll && coll->nranks) {
        w.coll_id = coll->id;
        w.coll_seq = coll->seq;
        w.coll_n = coll->nranks;
    }
    struct fs_pos pos;
    if (!fs_submit(p->gpu, p->gi, p->ci, &w, &pos))
        return false;
    *out = (struct fc_pos){ pos.seq, pos.slot, fc_now_ns() + dur_ns };
    return true;
}

bool fc_dev_pos_done(int ordinal, struct fc_pos *p)
{
    struct fs_pos pos = { p->seq, p->slot };
    return fs_pos_done(places[ordinal].gpu, &pos, &p->end);
}

void fc_dev_pos_wait(int ordinal, struct fc_pos *p)
{
    /* Sleep until the projected end; work that arrived meanwhile (another context's slice) may
     * have pushed it later: look again. */
    while (!fc_dev_pos_done(ordinal, p)) {
        uint64_t now = fc_now_ns();
        fc_sleep_until(p->end > now ? p->end : now + 20000);   /* (a collective's wait: +50 µs) */
    }
}

unsigned fc_dev_pending(int ordinal, uint32_t ctx, struct fc_pos *oldest)
{
    const struct place *p = &places[ordinal];
    struct fs_pos pos;
    unsigned n = fs_pending(p->gpu, p->gi, p->ci, ctx, &pos);
    *oldest = (struct fc_pos){ pos.seq, pos.slot, 0 };
    return n;
}

void fc_dev_attach(int ordinal, bool attached)
{
    const struct place *p = &places[ordinal];
    fs_attach(p->gpu, p->gi, p->ci, attached);
}

void fc_dev_parent_uuid(int ordinal, unsigned char out[16])
{
    memcpy(out, fs_state()->gpu[places[ordinal].gpu].s.uuid_bytes, 16);
}

void fc_shared_release_all(void)
{
    if (opened)
        fs_release_self();
}

void fc_shared_maybe_slow(const char *symbol)
{
    if (opened)
        fs_maybe_slow(symbol);
}
