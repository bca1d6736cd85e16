/* What vgpu run measures of its job through NVML for the accounting record (vgpu/acct.h), in its
 * wait loop next to the memory integral: the GPU time of GPUs the schedule does not measure (no
 * --core cap), from NVML's per-process utilisation samples, and each GPU's energy, from its
 * energy counter, apportioned by GPU-time share.
 *
 * Per-process samples, as the driver gives them: "SM % over the window" of a sampling window in
 * which the process had work, stamped with the window's end (wall-clock µs), and only the newest
 * window of each process: an H200 (driver 580) read every 250 ms gave one sample a process per
 * read, 200 ms apart, and 400 ms apart where a window had ended and been replaced between two
 * reads; the record then showed 7.5 GPU-s where the kernels' CUDA events took 10.0 s (-24 %).
 * The window's length is not given: it is the shortest gap between two windows' stamps seen on
 * that GPU, kept within NVML's documented range of sampling periods (1/6 s to 1 s); until two
 * windows have been seen, 1/6 s. So vgpu run reads a sampled GPU every half window
 * (vgpu_acct_nvml_every_ms), and a window is lost only when a read comes late (a loaded
 * machine): a sample then stands for every window since the last read that it may have replaced
 * (from the newer of the previous stamp and the previous read, in whole windows). A job's GPU time
 * on a GPU is the sum over samples of its processes' percentages times the windows they stand
 * for. A process is the job's when it is vgpu run's
 * descendant, or a process of the job's region (a container process NVML shows by its host
 * pid): processes that left the limiter count too, as the GPU served them.
 *
 * Energy: the GPU's counter (millijoules since the driver loaded) read at the first look and at
 * each look since gives the GPU's mean power while watched; times the job's duration, that is
 * the GPU's energy over the job's life, of which the job gets its share by GPU time:
 * - uncapped GPU: its processes' sampled GPU time over all processes' on that GPU in the same
 *   windows;
 * - scheduled GPU (--core): the GPU time the schedule measured over the GPU's busy time in the
 *   job's life, at most 1, of the counter's growth from the first look to the end. The busy
 *   time is the sum of NVML's device utilisation samples (nvmlDeviceGetSamples: the GPU's busy
 *   % over each sampling period, ~25 s of them kept by the driver) times their periods, for the
 *   part of each period inside the job's life.
 * Either way a job alone that used the GPU gets all of it, idle power included, and a job that
 * never used it gets 0 J; without the counter or the samples, unknown, never 0. (Before, a
 * scheduled GPU's energy was its mean power times the job's GPU time: a --core 30 job alone on
 * an H200 for 24 s got 1009 J of the 4729 J the GPU drew.) Written into the region at every look
 * (every device-sample read on a scheduled GPU), so that a record recovered after vgpu run died
 * has what was seen.
 *
 * State is per process: vgpu run samples one job. */
#include "vgpu/acct.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/migration.h"
#include "vgpu/nvml.h"
#include "vgpu/proc.h"

#define PERIOD_MIN_US 166667ULL   /* NVML: "between 1 second and 1/6 second depending on the product" */
#define PERIOD_MAX_US 1000000ULL
#define PERIOD_ASKS 20            /* looks that ask the device samples for the window's length */
/* A scheduled GPU's device samples are read this often, and at the job's end. The driver keeps
 * about 25 s of them, so reading every 5 s loses none, while reading them as often as the
 * per-process samples (250 ms) would put a driver call beside a latency-sensitive client four
 * times a second for nothing: the schedule already measures the job's GPU time there. */
#define BUSY_EVERY_US 5000000ULL
#define JOB_PIDS 256
/* The most of its life a job that NVML never showed busy waits at its end for its last sampling
 * window (vgpu_acct_nvml_finish). */
#define END_WAIT_SHARE 0.05

struct nv_dev {
    bool util;                          /* per-process samples can be read (not MIG, the driver has them) */
    bool scheduled;                     /* the schedule measures the job's GPU time here (--core) */
    bool energy;                        /* the energy counter can be read */
    nvmlDevice_t h, h_link;             /* the device, and the physical GPU whose link it uses */
    unsigned long long cursor;          /* newest sample stamp read (µs) */
    unsigned long long period_us;       /* shortest window gap seen; 0: none yet */
    unsigned period_asks;               /* device samples asked for the period (period_from_device) */
    uint64_t last_read_us;              /* the previous read (wall clock); 0: none yet */
    uint64_t job_pct, all_pct;          /* sums of SM % x windows: the job's processes, everyone's */
    bool job_seen;                      /* a sample of the job's processes was read */
    unsigned long long energy0;         /* the counter at the first look (mJ) */
    uint64_t energy0_us;                /* when (wall clock) */
    bool ended;                         /* energy1 is the counter at the job's end */
    unsigned long long energy1;
    uint64_t energy1_us;
    /* Bytes migrated (an oversubscribed GPU): the GPU's PCIe byte counters (vgpu/migration.h)
     * while the job had memory off the device. */
    bool pcie;                          /* 64-bit counters read at the first look */
    struct vgpu_pcie_count link;        /* the last reading */
    uint64_t migrated;
    bool was_off;                       /* the job had memory off the device at the last look */
    /* A scheduled GPU's busy time over the job's life, from the device utilisation samples. */
    bool busy;                          /* the samples can be read */
    unsigned long long busy_cursor;     /* newest sample stamp read (µs); 0: none yet */
    uint64_t busy_read_us;              /* the last read (wall clock) */
    double busy_us;                     /* busy µs inside the job's life, from the samples read */
    uint64_t covered_us;                /* how much of the job's life those samples covered */
    unsigned long long busy_period_us;  /* shortest gap between two samples; 0: none yet */
    bool energy_seen;                   /* energy_now: the counter at the last read */
    unsigned long long energy_now;
    uint64_t energy_now_us;
};

static struct {
    bool tried;                         /* NVML opened (or failed to) */
    struct vgpu_nvml *nv;
    struct vgpu_nvml *adopted;          /* vgpu run's own handle, to use instead of a second open */
    unsigned ndev;
    struct nv_dev dev[VGPU_REGION_MAX_DEVICES];
    unsigned long long start_us;        /* the job's start: older samples are someone else's */
    nvmlProcessUtilizationSample_t *buf;
    unsigned cap;
    nvmlSample_t *dbuf;                 /* device samples (scheduled GPUs) */
    unsigned dcap;
    struct { pid_t pid; uint64_t start; } job[JOB_PIDS];  /* pids found to be the job's */
    unsigned njob;
    bool final;                         /* the look at the job's end: read every device's samples */
    bool end_taken;                     /* vgpu_acct_nvml_end ran: the counters at the end are read */
    uint64_t until_us;                  /* when the last look may read the job's last window */
} S;

static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

static void open_nvml(const struct vgpu_region *r)
{
    S.tried = true;
    S.start_us = r->info->created_realtime_ns / 1000;
    struct vgpu_err e = { 0 };
    S.nv = S.adopted ? S.adopted : vgpu_nvml_open(&e);
    S.adopted = NULL;
    if (!S.nv) {
        vgpu_debug("accounting: no NVML (%s): uncapped GPU time and energy are not measured", e.msg);
        return;
    }
    S.ndev = vgpu_region_device_count(r);
    for (unsigned d = 0; d < S.ndev; d++) {
        struct nv_dev *g = &S.dev[d];
        const char *uuid = r->info->dev[d].uuid;
        if (r->info->dev[d].is_mig || !S.nv->nvmlDeviceGetHandleByUUID ||
            S.nv->nvmlDeviceGetHandleByUUID(uuid, &g->h) != NVML_SUCCESS)
            continue;   /* a MIG device: neither per-process samples nor its own energy counter */
        /* A GPU whose time the schedule measures (a --core cap) needs no samples: reading them
         * every 250 ms for each job held an inference client beside a capped training job to
         * p99 2.7 ms instead of 0.9 on an H200 (tests/gpu/latency.sh). */
        unsigned cap = atomic_load(&r->info->dev[d].core_limit);
        g->scheduled = cap > 0 && cap < 100;
        g->util = !g->scheduled && S.nv->nvmlDeviceGetProcessUtilization != NULL;
        g->energy = S.nv->nvmlDeviceGetTotalEnergyConsumption &&
                    S.nv->nvmlDeviceGetTotalEnergyConsumption(g->h, &g->energy0) == NVML_SUCCESS;
        g->energy0_us = wall_us();
        g->busy = g->scheduled && g->energy && S.nv->nvmlDeviceGetSamples != NULL;
        uint64_t share;
        nvmlDevice_t phys = vgpu_region_oversub(r, d, &share) ? vgpu_pcie_device(S.nv, g->h) : NULL;
        /* A 32-bit counter can wrap unseen between two looks 250 ms apart: unknown there. */
        g->pcie = phys && vgpu_pcie_read(S.nv, phys, &g->link) && g->link.bits == 64;
        if (g->pcie)
            g->h_link = phys;
    }
}

/* The link's bytes since the last look go to the job when it has memory off the device: every
 * migrated page crosses the link. An upper bound: the counters also carry the job's own copies,
 * and the traffic of other jobs' processes on that GPU (another oversubscribed job spilling at
 * the same time is charged the same bytes). */
static void read_link(const struct vgpu_region *r, unsigned d, struct nv_dev *g)
{
    struct vgpu_pcie_count b;
    if (!vgpu_pcie_read(S.nv, g->h_link, &b) || b.bits != 64) {
        g->pcie = false;
        return;
    }
    /* Off the device at this look or the last: its memory freed at the end went back too. */
    bool off = vgpu_region_mem_spilled(r, d) > 0;
    if (b.tx >= g->link.tx && b.rx >= g->link.rx && (off || g->was_off))
        g->migrated += (b.tx - g->link.tx) + (b.rx - g->link.rx);
    g->was_off = off;
    g->link = b;
}

bool vgpu_acct_nvml_migrated(unsigned d, uint64_t *bytes)
{
    if (d >= S.ndev || !S.dev[d].pcie)
        return false;
    *bytes = S.dev[d].migrated;
    return true;
}

/* Is pid (as NVML gives it: in the host's namespace) one of the job's processes? */
static bool is_job_pid(const struct vgpu_region *r, pid_t pid)
{
    uint64_t start = vgpu_proc_start_time(pid);
    for (unsigned i = 0; i < S.njob; i++)
        if (S.job[i].pid == pid) {
            /* Gone: its last windows are still the job's. Alive with another start time: the
             * pid was reused by a process that may be anyone's; look again. */
            if (!start || start == S.job[i].start)
                return true;
            S.job[i] = S.job[--S.njob];
            break;
        }
    bool mine = false;
    if (start) {
        pid_t self = getpid();
        mine = vgpu_proc_descends(pid, &self, 1);
    }
    /* A container process of the job, which the library recorded by its host pid. */
    for (unsigned i = 0; !mine && i < vgpu_region_slot_end(r); i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        mine = vgpu_slot_state_of(atomic_load(&s->owner)) == VGPU_SLOT_LIVE && atomic_load(&s->host_pid) == pid &&
               atomic_load(&s->host_ns) == r->info->creator_pidns;
    }
    if (mine && S.njob < JOB_PIDS)
        S.job[S.njob++] = (typeof(S.job[0])){pid, start};
    return mine;
}

static int by_stamp(const void *a, const void *b)
{
    const nvmlProcessUtilizationSample_t *x = a, *y = b;
    return x->timeStamp < y->timeStamp ? -1 : x->timeStamp > y->timeStamp;
}

/* How many windows a sample stamped `ts` stands for: those that ended since the newer of the
 * stamp read before this read (`seen`) and the previous read, which this one replaced unseen (a
 * window that had ended by the previous read was there to be read then: a process without a
 * sample in it had no work in it). One when nothing is known (the first read) or when reads
 * keep up (every half window). */
static unsigned windows(const struct nv_dev *g, unsigned long long seen, uint64_t prev_read, unsigned long long ts)
{
    unsigned long long p = g->period_us ? g->period_us : PERIOD_MIN_US;
    if (!prev_read || ts <= prev_read || ts <= seen)
        return 1;
    /* Window ends lie a period apart (give or take the driver's jitter of a few ms) back from
     * ts: those after the previous read, and those after the stamp seen before. */
    unsigned long long since_read = (ts - prev_read + p - p / 50 - 1) / p;
    unsigned long long w = since_read;
    if (seen) {
        unsigned long long since_seen = (ts - seen + p / 2) / p;
        w = since_seen < w ? since_seen : w;
    }
    return w < 1 ? 1 : w > 10 ? 10 : (unsigned)w;
}

/* The sampling window's length from the GPU's own utilisation samples (nvmlDeviceGetSamples),
 * which the driver keeps for every period, idle or not: the shortest gap between two consecutive
 * stamps. A process's samples cannot tell it alone: a job busy 0.1 s each second has one sample
 * a second, and the window taken as 1 s counted each 100 ms burst as 0.5 s (3.0 GPU-s recorded
 * for 0.6 s of kernels, tests/cli/acct_nvml.sh). Asked at each look until two samples tell, at
 * most PERIOD_ASKS times (a driver loaded just before has none yet); without device samples, the
 * gaps between process samples stay the measure. */
static void period_from_device(struct nv_dev *g)
{
    if (g->period_asks >= PERIOD_ASKS || !S.nv->nvmlDeviceGetSamples)
        return;
    g->period_asks++;
    nvmlValueType_t type;
    unsigned n = 0;
    unsigned long long since = wall_us() - 4 * PERIOD_MAX_US;
    nvmlReturn_t rc = S.nv->nvmlDeviceGetSamples(g->h, NVML_GPU_UTILIZATION_SAMPLES, since, &type, &n, NULL);
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
        g->period_asks = PERIOD_ASKS;
        return;
    }
    if (rc != NVML_SUCCESS || n < 2 || n > 100000)
        return;
    if (n > S.dcap) {
        nvmlSample_t *nb = realloc(S.dbuf, n * sizeof *nb);
        if (!nb)
            return;
        S.dbuf = nb;
        S.dcap = n;
    }
    if (S.nv->nvmlDeviceGetSamples(g->h, NVML_GPU_UTILIZATION_SAMPLES, since, &type, &n, S.dbuf) != NVML_SUCCESS ||
        n > S.dcap)
        return;
    unsigned long long best = 0;
    for (unsigned k = 1; k < n; k++) {
        unsigned long long a = S.dbuf[k - 1].timeStamp, b = S.dbuf[k].timeStamp;
        if (b <= a)
            continue;
        unsigned long long gap = b - a;
        if (gap >= PERIOD_MIN_US * 9 / 10 && gap <= PERIOD_MAX_US * 11 / 10 && (!best || gap < best))
            best = gap;
    }
    if (best) {
        if (!g->period_us || best < g->period_us)
            g->period_us = best;
        g->period_asks = PERIOD_ASKS;
        vgpu_debug("accounting: the GPU's sampling window is %.0f ms (device samples)", (double)best / 1000);
    }
}

/* Reads the samples newer than the cursor (NVML's two-call protocol) and adds them up. */
static void read_samples(const struct vgpu_region *r, struct nv_dev *g)
{
    period_from_device(g);
    unsigned n = S.cap;
    nvmlReturn_t rc = S.nv->nvmlDeviceGetProcessUtilization(g->h, S.cap ? S.buf : NULL, &n, g->cursor);
    for (int tries = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && n > 0 && n < 100000 && tries < 3; tries++) {
        unsigned want = n > S.cap ? n : S.cap * 2;
        nvmlProcessUtilizationSample_t *nb = realloc(S.buf, want * sizeof *nb);
        if (!nb)
            return;
        S.buf = nb;
        S.cap = n = want;
        rc = S.nv->nvmlDeviceGetProcessUtilization(g->h, S.buf, &n, g->cursor);
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        g->util = false;
    uint64_t read_us = wall_us(), prev_read = g->last_read_us;
    /* A read that found nothing new is a read too: every window that had ended by then had no
     * work of anyone's. Counted only at reads that found samples, a job busy 0.1 s each second
     * had each burst's sample stand for the four windows since the previous burst's read. */
    if (rc == NVML_ERROR_NOT_FOUND)
        g->last_read_us = read_us;
    if (rc != NVML_SUCCESS || n > S.cap)
        return;                 /* NOT_FOUND: nothing new */
    qsort(S.buf, n, sizeof *S.buf, by_stamp);
    g->last_read_us = read_us;
    unsigned long long prev = g->cursor, seen = g->cursor;
    for (unsigned k = 0; k < n; k++) {
        const nvmlProcessUtilizationSample_t *s = &S.buf[k];
        if (s->timeStamp <= seen || s->timeStamp <= S.start_us || s->smUtil > 100)
            continue;           /* seen, before the job, or garbage seen in the wild (nvtop #110) */
        if (prev && s->timeStamp > prev) {
            unsigned long long gap = s->timeStamp - prev;
            if (gap >= PERIOD_MIN_US * 9 / 10 && gap <= PERIOD_MAX_US * 11 / 10 && (!g->period_us || gap < g->period_us))
                g->period_us = gap;
        }
        prev = s->timeStamp;
        unsigned w = windows(g, seen, prev_read, s->timeStamp);
        g->all_pct += (uint64_t)s->smUtil * w;
        if (is_job_pid(r, (pid_t)s->pid)) {
            g->job_pct += (uint64_t)s->smUtil * w;
            g->job_seen = true;
        }
    }
    if (prev > g->cursor)
        g->cursor = prev;
}

/* A device sample's value as a percentage (the driver gives unsigned int; others in case). */
static bool sample_pct(nvmlValueType_t t, const nvmlValue_t *v, double *pct)
{
    switch (t) {
    case NVML_VALUE_TYPE_DOUBLE: *pct = v->dVal; break;
    case NVML_VALUE_TYPE_UNSIGNED_INT: *pct = v->uiVal; break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: *pct = (double)v->ulVal; break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *pct = (double)v->ullVal; break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: *pct = (double)v->sllVal; break;
    default: return false;
    }
    return *pct >= 0 && *pct <= 100;
}

/* Reads a scheduled GPU's device utilisation samples newer than the last read (NVML's two-call
 * protocol) and adds the busy time of the part of each sample's period that lies in the job's
 * life [start, end): a sample is the busy % over the period ending at its stamp, whose length
 * is the gap since the previous stamp (the first sample ever read, older than the job, only
 * gives the next one its start). A gap over NVML's longest period (samples lost, or none kept)
 * counts as that period: covered_us then falls short of the life and publish() scales. The
 * energy counter is read with them. */
static void read_busy(const struct vgpu_region *r, struct nv_dev *g)
{
    uint64_t now = wall_us();
    g->busy_read_us = now;
    unsigned long long e;
    if (g->energy && S.nv->nvmlDeviceGetTotalEnergyConsumption(g->h, &e) == NVML_SUCCESS) {
        g->energy_now = e;
        g->energy_now_us = now;
        g->energy_seen = true;
    }
    nvmlValueType_t type;
    unsigned n = 0;
    nvmlReturn_t rc = S.nv->nvmlDeviceGetSamples(g->h, NVML_GPU_UTILIZATION_SAMPLES, g->busy_cursor, &type, &n, NULL);
    if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && n == 0))
        return;                 /* nothing new */
    if (rc != NVML_SUCCESS || n > 100000) {
        if (rc == NVML_ERROR_NOT_SUPPORTED)
            g->busy = false;
        return;
    }
    if (n > S.dcap) {
        nvmlSample_t *nb = realloc(S.dbuf, n * sizeof *nb);
        if (!nb)
            return;
        S.dbuf = nb;
        S.dcap = n;
    }
    rc = S.nv->nvmlDeviceGetSamples(g->h, NVML_GPU_UTILIZATION_SAMPLES, g->busy_cursor, &type, &n, S.dbuf);
    if (rc == NVML_ERROR_NOT_SUPPORTED)
        g->busy = false;
    if (rc != NVML_SUCCESS || n > S.dcap)
        return;
    uint64_t exited = atomic_load(&r->hdr->exited_realtime_ns) / 1000;
    unsigned long long start = S.start_us, end = exited ? exited : now, prev = g->busy_cursor;
    for (unsigned k = 0; k < n; k++) {
        const nvmlSample_t *s = &S.dbuf[k];
        double pct;
        if (s->timeStamp <= prev || !sample_pct(type, &s->sampleValue, &pct))
            continue;           /* seen, out of order, or not a percentage */
        unsigned long long gap = prev ? s->timeStamp - prev : 0;
        prev = s->timeStamp;
        if (!gap)
            continue;
        if (gap >= PERIOD_MIN_US * 9 / 10 && (!g->busy_period_us || gap < g->busy_period_us))
            g->busy_period_us = gap;
        if (gap > PERIOD_MAX_US)
            gap = PERIOD_MAX_US;
        unsigned long long a = s->timeStamp - gap, b = s->timeStamp;
        a = a > start ? a : start;
        b = b < end ? b : end;
        if (b > a) {
            g->covered_us += b - a;
            g->busy_us += pct / 100.0 * (double)(b - a);
        }
    }
    if (prev > g->busy_cursor)
        g->busy_cursor = prev;
}

/* Writes what was measured into the region (the record is built from it). */
static void publish(struct vgpu_region *r)
{
    unsigned flags = 0;
    for (unsigned d = 0; d < S.ndev; d++) {
        struct nv_dev *g = &S.dev[d];
        struct vgpu_region_dev_limits *dl = &r->hdr_rw->dev[d];
        if (g->util) {
            unsigned long long period = g->period_us ? g->period_us : PERIOD_MIN_US;
            atomic_store(&dl->acct_nvml_gpu_ns, g->job_pct * period * 1000ULL / 100ULL);
            flags |= VGPU_ACCT_NVML_DEV(d);
        }
        if (g->scheduled) {
            /* The schedule measured the job's GPU time here: the job gets the GPU's energy over
             * its life times that time's share of the GPU's busy time then (at most all). The
             * energy is the counter's growth from the first look (200 ms into the job) to the
             * end, not extrapolated to the start as above: the start is mostly idle (the
             * command loading), so the mean power while watched would charge two capped jobs
             * at once 2 % more than the GPU drew (the simulated H100). */
            unsigned long long mj = g->ended ? g->energy1 : g->energy_now;
            uint64_t at = g->ended ? g->energy1_us : g->energy_now_us;
            uint64_t end = atomic_load(&r->hdr->exited_realtime_ns) / 1000;
            double life = (double)((end ? end : at) > S.start_us ? (end ? end : at) - S.start_us : 0);
            /* Samples that covered less than half the life (lost, or the driver kept none) say
             * too little of the GPU's busy time: unknown, unless the job never used the GPU
             * (0 J). Otherwise what they saw stands for the life (the period the job ended in
             * may be unread when vgpu run died). */
            double used_s = (double)atomic_load(&r->use->dev[d].gpu_time_ns) / 1e9;
            if (g->busy && (g->ended || g->energy_seen) && at > g->energy0_us && mj >= g->energy0 && life > 0 &&
                (used_s <= 0 || (double)g->covered_us * 2 >= life)) {
                double busy_s = g->covered_us ? g->busy_us * life / (double)g->covered_us / 1e6 : 0.0;
                double share = used_s <= 0 ? 0.0 : busy_s <= used_s ? 1.0 : used_s / busy_s;
                atomic_store(&dl->acct_energy_mj, (uint64_t)((double)(mj - g->energy0) * share + 0.5));
            } else {
                atomic_store(&dl->acct_energy_mj, VGPU_ACCT_ENERGY_UNKNOWN);
            }
            continue;
        }
        unsigned long long now_mj = g->energy1;
        uint64_t now_us = g->ended ? g->energy1_us : wall_us();
        if (g->energy && g->util &&
            (g->ended || S.nv->nvmlDeviceGetTotalEnergyConsumption(g->h, &now_mj) == NVML_SUCCESS) &&
            now_us > g->energy0_us) {
            /* The GPU's mean power while watched, over the job's life (NVML is loaded a moment
             * after the start, and the last look may come after the end). */
            double mw = now_mj > g->energy0 ? (double)(now_mj - g->energy0) / ((double)(now_us - g->energy0_us) / 1e6)
                                            : 0.0;
            uint64_t end = atomic_load(&r->hdr->exited_realtime_ns);
            double life = (double)((end ? end / 1000 : now_us) - S.start_us) / 1e6;
            double share = g->all_pct ? (double)g->job_pct / (double)g->all_pct : 0.0;
            atomic_store(&dl->acct_energy_mj, (uint64_t)(mw * (life > 0 ? life : 0) * share + 0.5));
        } else {
            atomic_store(&dl->acct_energy_mj, VGPU_ACCT_ENERGY_UNKNOWN);
        }
    }
    atomic_fetch_or(&r->hdr_rw->acct_flags, flags | (S.nv ? VGPU_ACCT_ENERGY_KNOWN : 0));
}

void vgpu_acct_nvml_poll(struct vgpu_region *r)
{
    if (!r->hdr_rw)
        return;
    if (!S.tried)
        open_nvml(r);
    if (!S.nv)
        return;
    uint64_t now = wall_us();
    for (unsigned d = 0; d < S.ndev; d++) {
        if (S.dev[d].util)
            read_samples(r, &S.dev[d]);
        if (S.dev[d].busy && (S.final || !S.dev[d].busy_read_us || now - S.dev[d].busy_read_us >= BUSY_EVERY_US))
            read_busy(r, &S.dev[d]);
        if (S.dev[d].pcie)
            read_link(r, d, &S.dev[d]);
    }
    publish(r);
}

void vgpu_acct_nvml_adopt(struct vgpu_nvml *nv)
{
    if (!S.tried && !S.adopted)
        S.adopted = nv;
    else
        vgpu_nvml_close(nv);
}

static bool used_a_gpu(const struct vgpu_region *r)
{
    bool used = false;
    for (unsigned d = 0; d < vgpu_region_device_count(r); d++)
        used |= atomic_load(&r->use->dev[d].peak) > 0;
    return used;
}

bool vgpu_acct_nvml_last_look_costs(const struct vgpu_region *r)
{
    if (S.end_taken || !r->hdr_rw || r->damaged)
        return false;
    return S.nv || (!S.tried && used_a_gpu(r));
}

uint64_t vgpu_acct_nvml_end(struct vgpu_region *r)
{
    if (S.end_taken)
        return S.until_us > wall_us() ? S.until_us - wall_us() : 0;
    S.end_taken = true;
    if (!r->hdr_rw || r->damaged)
        return 0;
    /* A job shorter than the first look that used a GPU: look now (the driver keeps its last
     * windows). One that never touched a GPU does not pay for loading NVML. */
    if (!S.tried && used_a_gpu(r))
        open_nvml(r);
    if (!S.nv)
        return 0;
    /* The window the job ended in completes up to one period later: its last look waits for it
     * where it can hold the job's work (an uncapped GPU the job used), at most 1 s. vgpu run
     * hands that wait to a finisher process (cmd/run/finisher.c): its caller waited 171 ms on an
     * H200 for a 0.33 s job (a context and 1 MiB, no kernel), +52 % on its start-to-end time
     * (issue 34). The whole period only where NVML showed the job's processes busy before (they
     * ran kernels); a job with memory there and no sample yet waits at most END_WAIT_SHARE of its
     * life, and may miss kernels it ran only in its last window (vgpu-acct(1)). A scheduled GPU
     * (--core) waits only where the schedule charged the job GPU time (its energy share needs the
     * busy time of that period), not for memory alone. */
    uint64_t end_us = atomic_load(&r->hdr->exited_realtime_ns) / 1000, until = 0;
    for (unsigned d = 0; d < S.ndev; d++) {
        struct nv_dev *g = &S.dev[d];
        /* The samples now, first: the driver keeps each process's newest window only, and the
         * last read was up to half a window before the end, so a window that completed since is
         * replaced by the one the job ended in before the wait below is over (0.5 s windows lost
         * 10 % of a 3 s job, tests/cli/acct_nvml.sh). vgpu run's walk after its command's end
         * used to read them; this is the finisher's, off vgpu run's return. */
        if (g->util)
            read_samples(r, g);
        /* The energy counter now, at the end: the wait that follows is not the job's. */
        g->ended = g->energy && S.nv->nvmlDeviceGetTotalEnergyConsumption(g->h, &g->energy1) == NVML_SUCCESS;
        g->energy1_us = wall_us();
        /* A scheduled GPU's device sample of that period too, if the job ran kernels there. */
        bool wait_util = g->util && (g->job_seen || atomic_load(&r->use->dev[d].peak));
        bool wait_busy = g->busy && atomic_load(&r->use->dev[d].gpu_time_ns);
        if (!wait_util && !wait_busy)
            continue;
        uint64_t p = wait_util ? (g->period_us ? g->period_us : PERIOD_MIN_US)
                               : (g->busy_period_us ? g->busy_period_us : PERIOD_MIN_US);
        p = p > PERIOD_MAX_US ? PERIOD_MAX_US : p;
        if (wait_util && !g->job_seen) {
            uint64_t life_us = end_us > S.start_us ? end_us - S.start_us : 0;
            uint64_t most = (uint64_t)((double)life_us * END_WAIT_SHARE);
            p = p + 5000 > most ? (most > 5000 ? most - 5000 : 0) : p;
        }
        if (end_us + p + 5000 > until)
            until = end_us + p + 5000;
    }
    uint64_t now = wall_us();
    if (until > now + PERIOD_MAX_US)
        until = now + PERIOD_MAX_US;
    S.until_us = until;
    return until > now ? until - now : 0;
}

void vgpu_acct_nvml_finish(struct vgpu_region *r)
{
    uint64_t wait = vgpu_acct_nvml_end(r);
    if (!S.nv)
        return;
    if (wait) {
        vgpu_debug("accounting: waiting %llu ms for the job's last sampling window", (unsigned long long)(wait / 1000));
        struct timespec ts = {(time_t)(wait / 1000000ULL), (long)(wait % 1000000ULL) * 1000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    S.final = true;
    vgpu_acct_nvml_poll(r);
}

int vgpu_acct_nvml_every_ms(void)
{
    unsigned long long p = 0;
    for (unsigned d = 0; S.nv && d < S.ndev; d++)
        if (S.dev[d].util) {
            unsigned long long q = S.dev[d].period_us ? S.dev[d].period_us : PERIOD_MIN_US;
            p = !p || q < p ? q : p;
        }
    return p ? (int)(p / 2000ULL) : -1;
}
