/* util.c: utilisation, derived from the kernel intervals the fake libcuda puts on each GPU's
 * timeline: device utilisation over the last sample period, and per-process samples (reference
 * §5, §6). A process's sample is its SM % over one completed sample period in which it had work,
 * and, as the driver gives them, only its newest: an H200 (driver 580) read every 250 ms returned
 * one sample per process each time, stamped 200 ms apart, then 400 ms when a window had ended
 * and been replaced between two reads (so a reader slower than the period loses windows). */
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

#define SAMPLE_CAPACITY 72   /* the driver's sample buffer: what a NULL-buffer query reports */
#define SAMPLE_WINDOWS 5     /* completed periods kept: 1 s at the default 200 ms */

static uint64_t period_ns(void) { return (uint64_t)fs_state()->sample_period_ms * 1000000ULL; }

unsigned fn_gpu_util(unsigned gpu)
{
    fs_advance_gpu(gpu);     /* the simulated work up to now (common/timeline.c); callers hold the lock */
    uint64_t now = fs_now_ns(), p = period_ns();
    uint64_t from = now > p ? now - p : 0;
    uint64_t busy = fs_busy_between(gpu, 0, -2, from, now);
    unsigned pct = (unsigned)((busy * 100 + p / 2) / p);
    return pct > 100 ? 100 : pct;
}

unsigned fn_mem_util(unsigned gpu_util) { return gpu_util / 3; }

/* Device samples, as the driver keeps them: the GPU's busy % over each completed sample period,
 * stamped with the period's end, the newest DEVICE_SAMPLES of them (an H200's buffer holds about
 * 25 s at its 200 ms period). Periods before the state was made ("driver load") have none. */
#define DEVICE_SAMPLES 120

/* The completed periods newer than last_seen (wall µs), oldest first: the first period's number
 * in *first, how many returned. Under the lock. */
static unsigned device_periods(unsigned gpu, unsigned long long last_seen, uint64_t *first)
{
    fs_advance_gpu(gpu);
    uint64_t p = period_ns(), done = fs_now_ns() / p;     /* periods 0 .. done-1 have ended */
    uint64_t from = done > DEVICE_SAMPLES ? done - DEVICE_SAMPLES : 0;
    uint64_t loaded = fs_state()->loaded_ns / p + 1;      /* the first period begun after the load */
    if (from < loaded)
        from = loaded;
    while (from < done && fs_mono_to_wall_us((from + 1) * p) <= last_seen)
        from++;
    *first = from;
    return from < done ? (unsigned)(done - from) : 0;
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long last_seen,
                                  nvmlValueType_t *val_type, unsigned int *count, nvmlSample_t *samples)
{
    FN_ENTER_DEV(device, d);
    if (!count || !val_type)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    /* Only the GPU utilisation samples are simulated; under MIG the board's utilisation is not
     * given (as GetUtilizationRates). */
    if (type != NVML_GPU_UTILIZATION_SAMPLES || d->gi >= 0 ||
        fs_state()->gpu[d->gpu].mig_current == NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    uint64_t first, p = period_ns();
    unsigned n = device_periods(d->gpu, last_seen, &first);
    *val_type = NVML_VALUE_TYPE_UNSIGNED_INT;
    if (!samples) {
        *count = n;         /* how many can be read, as the driver answers a NULL buffer */
        FN_RETURN(NVML_SUCCESS);
    }
    if (*count == 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (n == 0)
        FN_RETURN(NVML_ERROR_NOT_FOUND);
    if (n > *count)
        n = *count;         /* as many as fit, oldest first: a reader resumes from the last stamp */
    for (unsigned i = 0; i < n; i++) {
        uint64_t busy = fs_busy_in_period(d->gpu, first + i);
        unsigned pct = (unsigned)((busy * 100 + p / 2) / p);
        samples[i] = (nvmlSample_t){.timeStamp = fs_mono_to_wall_us((first + i + 1) * p),
                                    .sampleValue.uiVal = pct > 100 ? 100 : pct};
    }
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

struct sample {
    pid_t pid;
    uint64_t ts_us;
    unsigned sm;
};

static int by_time(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    return x->ts_us < y->ts_us ? -1 : x->ts_us > y->ts_us;
}

/* Samples newer than last_seen (wall µs), oldest first, at most max. */
static unsigned collect(unsigned gpu, unsigned long long last_seen, struct sample *out, unsigned max)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    fs_advance_gpu(gpu);
    uint64_t p = period_ns(), now = fs_now_ns();
    uint64_t last_end = now / p * p; /* end of the newest completed period */
    unsigned n = 0;
    pid_t given[FS_MAX_PROCS];      /* pids whose newest sample is already out */
    unsigned ngiven = 0;
    for (unsigned w = 0; w < SAMPLE_WINDOWS && last_end >= (w + 1) * p; w++) {
        uint64_t end = last_end - w * p, start = end - p;
        uint64_t ts = fs_mono_to_wall_us(end);
        if (ts <= last_seen)
            break;
        /* every pid with work in this window, once */
        pid_t seen[FS_MAX_PROCS];
        unsigned nseen = 0;
        for (unsigned i = 0; i < FS_MAX_INTERVALS; i++) {
            const struct fs_interval *iv = &g->intervals[i];
            if (iv->end_ns <= start || iv->start_ns >= end || iv->end_ns == 0)
                continue;
            bool dup = false;
            for (unsigned k = 0; k < nseen; k++)
                dup |= seen[k] == iv->pid;
            if (dup || nseen == FS_MAX_PROCS)
                continue;
            seen[nseen++] = iv->pid;
            for (unsigned k = 0; k < ngiven; k++)
                dup |= given[k] == iv->pid;
            if (dup)
                continue;           /* a newer window of this process replaced this one */
            uint64_t busy = fs_busy_between(gpu, iv->pid, -2, start, end);
            unsigned pct = (unsigned)((busy * 100 + p / 2) / p);
            if (pct == 0)
                continue;
            if (n < max)
                out[n++] = (struct sample){iv->pid, ts, pct > 100 ? 100 : pct};
            if (ngiven < FS_MAX_PROCS)
                given[ngiven++] = iv->pid;
        }
    }
    qsort(out, n, sizeof *out, by_time);
    return n;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long last_seen)
{
    FN_ENTER_DEV(device, d);
    if (!count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (fs_state()->gpu[d->gpu].mig_current == NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED); /* per-process utilisation is unsupported under MIG */
    if (!utilization) {
        *count = SAMPLE_CAPACITY; /* the buffer's capacity, as observed, not a process count */
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    struct sample s[SAMPLE_CAPACITY];
    unsigned n = collect(d->gpu, last_seen, s, SAMPLE_CAPACITY);
    if (n == 0)
        FN_RETURN(NVML_ERROR_NOT_FOUND);
    if (*count < n) {
        *count = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++)
        utilization[i] = (nvmlProcessUtilizationSample_t){
            .pid = (unsigned)s[i].pid, .timeStamp = s[i].ts_us, .smUtil = s[i].sm, .memUtil = fn_mem_util(s[i].sm)};
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *info)
{
    FN_ENTER_DEV(device, d);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (info->version != nvmlProcessesUtilizationInfo_v1)
        FN_RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (fs_state()->gpu[d->gpu].mig_current == NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    struct sample s[SAMPLE_CAPACITY];
    unsigned n = collect(d->gpu, info->lastSeenTimeStamp, s, SAMPLE_CAPACITY);
    if (!info->procUtilArray || info->processSamplesCount < n) {
        if (n == 0 && info->procUtilArray)
            FN_RETURN(NVML_ERROR_NOT_FOUND);
        info->processSamplesCount = n ? n : SAMPLE_CAPACITY;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (n == 0)
        FN_RETURN(NVML_ERROR_NOT_FOUND);
    for (unsigned i = 0; i < n; i++)
        info->procUtilArray[i] = (nvmlProcessUtilizationInfo_v1_t){
            .timeStamp = s[i].ts_us, .pid = (unsigned)s[i].pid, .smUtil = s[i].sm, .memUtil = fn_mem_util(s[i].sm)};
    info->processSamplesCount = n;
    FN_RETURN(NVML_SUCCESS);
}
