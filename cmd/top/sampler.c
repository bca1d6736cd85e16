/* vgpu top's sampler: gathers NVML device data, NVML processes with their SM %, the jobs from
 * vgpu's state and host facts from /proc into a fresh model, on its own thread, so the screen
 * never waits on the driver (htop/tmux style; nvtop #139 is what happens otherwise). */
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/nvml.h"

static uint64_t now_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- NVML ---- */

static enum top_nvml_status status_of(int code)
{
    switch (code) {
    case VGPU_EXIT_NO_LIBRARY: return TOP_NVML_NO_LIBRARY;
    case VGPU_EXIT_NO_DRIVER: return TOP_NVML_NO_DRIVER;
    case VGPU_EXIT_NO_GPU: return TOP_NVML_NO_GPU;
    default: return TOP_NVML_ERROR;
    }
}

int top_sampler_init(struct top_sampler *s, const char *gpusel, struct vgpu_err *e)
{
    memset(s, 0, sizeof *s);
    s->notify[0] = s->notify[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->clk_tck = sysconf(_SC_CLK_TCK);
    s->delay_ms = 1000;
    top_host_init(s);
    struct vgpu_err ne;
    s->nv = vgpu_nvml_open(&ne);
    if (!s->nv) {
        s->nvml = status_of(ne.code);
        snprintf(s->nvml_msg, sizeof s->nvml_msg, "%s", ne.msg);
        if (gpusel && strcmp(gpusel, "all") != 0) {
            vgpu_err_set(e, ne.code, "--gpu %s: no GPU data: %s", gpusel, ne.msg);
            return -1;
        }
        return 0;
    }
    s->list = calloc(1, sizeof *s->list);
    if (!s->list) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    if (vgpu_gpus_enumerate(s->nv, s->list, &ne) < 0) {
        s->nvml = TOP_NVML_ERROR;
        snprintf(s->nvml_msg, sizeof s->nvml_msg, "%s", ne.msg);
        s->list->count = 0;
        return 0;
    }
    if (!gpusel || strcmp(gpusel, "all") == 0) {
        for (unsigned i = 0; i < s->list->count; i++)
            s->shown[i] = true;
    } else {
        struct vgpu_gpu_sel sel;
        if (vgpu_gpus_select(s->list, gpusel, &sel, e) < 0)
            return -1;
        for (unsigned k = 0; k < sel.count; k++) {
            const struct vgpu_gpu *g = &s->list->gpu[sel.pos[k]];
            /* a physical GPU brings its MIG devices, a MIG device its parent */
            for (unsigned i = 0; i < s->list->count; i++)
                if (s->list->gpu[i].index == g->index && (!g->is_mig || !s->list->gpu[i].is_mig))
                    s->shown[i] = true;
            s->shown[sel.pos[k]] = true;
        }
    }
    uint64_t now_us = now_ms(CLOCK_REALTIME) * 1000;
    for (unsigned i = 0; i < VGPU_MAX_GPUS; i++)
        s->util_cursor[i] = now_us - 1000000;   /* nvitop: samples of the last second */
    return 0;
}

void top_sampler_fini(struct top_sampler *s)
{
    top_sampler_stop(s);
    for (int i = 0; i < 2; i++)
        if (s->notify[i] >= 0)
            close(s->notify[i]);
    if (s->nv)
        vgpu_nvml_close(s->nv);
    free(s->list);
    top_host_fini(s);
    free(s->pbuf);
    free(s->ubuf);
    top_model_free(s->latest);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

/* "NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb" */
static void mig_profile(const char *name, char *out, size_t len)
{
    const char *p = strstr(name, "MIG ");
    snprintf(out, len, "%s", p ? p + 4 : "");
}

static void gpu_sample(struct top_sampler *s, const struct vgpu_gpu *lg, struct top_gpu *g)
{
    struct vgpu_nvml *nv = s->nv;
    nvmlDevice_t h = lg->handle;
    unsigned u;
    g->index = lg->index;
    g->is_mig = lg->is_mig;
    g->gi = lg->mig_gi;
    g->ci = lg->mig_ci;
    snprintf(g->uuid, sizeof g->uuid, "%s", lg->uuid);
    snprintf(g->name, sizeof g->name, "%s", lg->name);
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", lg->pci_bus_id);
    if (g->is_mig)
        mig_profile(lg->name, g->profile, sizeof g->profile);
    if (!h) {
        g->lost = true;
        return;
    }
    nvmlReturn_t rc = NVML_SUCCESS;
    if (nv->nvmlDeviceGetMemoryInfo_v2) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        rc = nv->nvmlDeviceGetMemoryInfo_v2(h, &m);
        if (rc == NVML_SUCCESS) {
            g->mem_used = m.used;
            g->mem_total = m.total;
            g->valid |= TOP_GV_MEM;
        }
    }
    if (!(g->valid & TOP_GV_MEM)) {
        nvmlMemory_t m1;
        rc = nv->nvmlDeviceGetMemoryInfo(h, &m1);
        if (rc == NVML_SUCCESS) {
            g->mem_used = m1.used;
            g->mem_total = m1.total;
            g->valid |= TOP_GV_MEM;
        }
    }
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        g->lost = true;
        return;
    }
    nvmlUtilization_t ut;
    if (nv->nvmlDeviceGetUtilizationRates && nv->nvmlDeviceGetUtilizationRates(h, &ut) == NVML_SUCCESS) {
        g->util_pct = ut.gpu > 100 ? 100 : ut.gpu;
        g->mem_util_pct = ut.memory > 100 ? 100 : ut.memory;
        g->valid |= TOP_GV_UTIL | TOP_GV_MEMUTIL;
    }
    if (g->is_mig)
        return;   /* sensors, clocks and power belong to the parent GPU */
    if (nv->nvmlDeviceGetTemperature && nv->nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
        g->temp_c = u, g->valid |= TOP_GV_TEMP;
    if (nv->nvmlDeviceGetPowerUsage && nv->nvmlDeviceGetPowerUsage(h, &u) == NVML_SUCCESS)
        g->power_mw = u, g->valid |= TOP_GV_POWER;
    if (nv->nvmlDeviceGetEnforcedPowerLimit && nv->nvmlDeviceGetEnforcedPowerLimit(h, &u) == NVML_SUCCESS)
        g->power_limit_mw = u, g->valid |= TOP_GV_PLIMIT;
    if (nv->nvmlDeviceGetClockInfo && nv->nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &u) == NVML_SUCCESS)
        g->sm_clock_mhz = u, g->valid |= TOP_GV_SMCLK;
    if (nv->nvmlDeviceGetClockInfo && nv->nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM, &u) == NVML_SUCCESS)
        g->mem_clock_mhz = u, g->valid |= TOP_GV_MEMCLK;
    if (nv->nvmlDeviceGetFanSpeed && nv->nvmlDeviceGetFanSpeed(h, &u) == NVML_SUCCESS)
        g->fan_pct = u, g->valid |= TOP_GV_FAN;
    unsigned w;
    if (nv->nvmlDeviceGetCurrPcieLinkGeneration && nv->nvmlDeviceGetCurrPcieLinkWidth &&
        nv->nvmlDeviceGetCurrPcieLinkGeneration(h, &u) == NVML_SUCCESS &&
        nv->nvmlDeviceGetCurrPcieLinkWidth(h, &w) == NVML_SUCCESS)
        g->pcie_gen = u, g->pcie_width = w, g->valid |= TOP_GV_PCIE;
    unsigned per;
    if (nv->nvmlDeviceGetEncoderUtilization && nv->nvmlDeviceGetEncoderUtilization(h, &u, &per) == NVML_SUCCESS)
        g->enc_pct = u > 100 ? 100 : u, g->valid |= TOP_GV_ENC;
    if (nv->nvmlDeviceGetDecoderUtilization && nv->nvmlDeviceGetDecoderUtilization(h, &u, &per) == NVML_SUCCESS)
        g->dec_pct = u > 100 ? 100 : u, g->valid |= TOP_GV_DEC;
    if (nv->nvmlDeviceGetMigMode && nv->nvmlDeviceGetMigMode(h, &g->mig_current, &g->mig_pending) == NVML_SUCCESS)
        g->valid |= TOP_GV_MIG;
}

/* NVML's two-call protocol with headroom (nvitop: 2n+5); the count may grow between calls. The
 * buffer is the sampler's, kept: one call per GPU while it is large enough. */
static unsigned list_procs(struct vgpu_nvml *nv, nvmlDevice_t h, nvmlProcessInfo_v2_t **buf, unsigned *cap)
{
    if (!nv->nvmlDeviceGetComputeRunningProcesses_v3)
        return 0;
    for (int tries = 0; tries < 4; tries++) {
        unsigned n = *cap;
        nvmlReturn_t rc = nv->nvmlDeviceGetComputeRunningProcesses_v3(h, &n, *cap ? *buf : NULL);
        if (rc == NVML_SUCCESS)
            return n <= *cap ? n : 0;
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return 0;
        unsigned want = 2 * n + 5;
        nvmlProcessInfo_v2_t *nb = realloc(*buf, want * sizeof *nb);
        if (!nb)
            return 0;
        *buf = nb;
        *cap = want;
    }
    return 0;
}

/* Per-process SM % over the last interval, newest sample per pid; none on MIG (N/A). The buffer
 * is kept from one sample to the next (NVML's two-call protocol, a count and then the samples,
 * asked the driver twice per GPU per refresh): one call while it is large enough. */
static void proc_util(struct top_sampler *s, unsigned pos, nvmlDevice_t h, struct top_model *m, size_t first,
                      size_t last, int gi)
{
    struct vgpu_nvml *nv = s->nv;
    if (!nv->nvmlDeviceGetProcessUtilization || m->gpus[gi].is_mig)
        return;
    unsigned n = s->ucap;
    nvmlReturn_t rc = nv->nvmlDeviceGetProcessUtilization(h, s->ucap ? s->ubuf : NULL, &n, s->util_cursor[pos]);
    for (int tries = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && n > 0 && n < 100000 && tries < 3; tries++) {
        unsigned want = n > s->ucap ? n : s->ucap * 2;
        nvmlProcessUtilizationSample_t *nb = realloc(s->ubuf, want * sizeof *nb);
        if (!nb)
            return;
        s->ubuf = nb;
        s->ucap = want;
        n = want;
        rc = nv->nvmlDeviceGetProcessUtilization(h, s->ubuf, &n, s->util_cursor[pos]);
    }
    /* NOT_FOUND: no samples newer than the cursor, everyone 0 % */
    bool any = rc == NVML_ERROR_NOT_FOUND;
    if (rc == NVML_SUCCESS && n <= s->ucap) {
        any = true;
        const nvmlProcessUtilizationSample_t *smp = s->ubuf;
        unsigned long long newest = s->util_cursor[pos];
        struct top_pid_ix *ix;
        size_t nix = top_pid_index(m, first, last, &ix);
        for (unsigned k = 0; k < n; k++) {
            if (smp[k].timeStamp > newest)
                newest = smp[k].timeStamp;
            if (smp[k].smUtil > 100)     /* garbage seen in the wild (nvtop #110) */
                continue;
            pid_t pid = (pid_t)smp[k].pid;
            for (const struct top_pid_ix *x = top_pid_find(ix, nix, pid); x && x < ix + nix && x->pid == pid; x++) {
                struct top_proc *p = &m->procs[x->at];
                p->sm_pct = smp[k].smUtil;   /* later samples overwrite earlier ones */
                p->valid |= TOP_PV_SM;
            }
        }
        free(ix);
        s->util_cursor[pos] = newest;
    }
    if (any)
        for (size_t i = first; i < last; i++)
            m->procs[i].valid |= TOP_PV_SM;   /* NVML lists only processes above 0 % */
}

struct top_model *top_sampler_sample(struct top_sampler *s)
{
    struct top_model *m = top_model_new();
    if (!m)
        return NULL;
    m->seq = ++s->seq;
    m->time_ms = (int64_t)now_ms(CLOCK_REALTIME);
    m->nvml = s->nvml;
    snprintf(m->nvml_msg, sizeof m->nvml_msg, "%s", s->nvml_msg);
    uint64_t mono = now_ms(CLOCK_BOOTTIME);
    if (s->nv) {
        snprintf(m->driver_version, sizeof m->driver_version, "%s", s->nv->driver_version);
        if (s->nv->cuda_version > 0)
            snprintf(m->cuda_version, sizeof m->cuda_version, "%d.%d", s->nv->cuda_version / 1000,
                     s->nv->cuda_version % 1000 / 10);
    }
    for (unsigned i = 0; s->list && i < s->list->count && m->ngpu < TOP_MAX_GPUS; i++) {
        if (!s->shown[i])
            continue;
        const struct vgpu_gpu *lg = &s->list->gpu[i];
        int gi = (int)m->ngpu++;
        struct top_gpu *g = &m->gpus[gi];
        gpu_sample(s, lg, g);
        /* history lives in the sampler and is copied into each model */
        struct top_gpu *h = &s->hist[i];
        unsigned mempct = (g->valid & TOP_GV_MEM) && g->mem_total ? (unsigned)(g->mem_used * 100 / g->mem_total) : 255;
        top_gpu_hist_push(h, (g->valid & TOP_GV_UTIL) ? g->util_pct : 255, mempct);
        memcpy(g->hist_util, h->hist_util, sizeof g->hist_util);
        memcpy(g->hist_mem, h->hist_mem, sizeof g->hist_mem);
        g->hist_len = h->hist_len;
        if (g->lost || !lg->handle)
            continue;
        /* processes: MIG GPUs list theirs under their MIG devices */
        if (!lg->is_mig && lg->has_mig_mode && lg->mig_current)
            continue;
        unsigned n = list_procs(s->nv, lg->handle, &s->pbuf, &s->pcap);
        size_t first = m->nproc;
        for (unsigned k = 0; k < n; k++) {
            struct top_proc *p = top_model_add_proc(m);
            if (!p)
                break;
            p->pid = (pid_t)s->pbuf[k].pid;
            p->gpu = gi;
            if (s->pbuf[k].usedGpuMemory != ~0ULL) {
                p->gpu_mem = s->pbuf[k].usedGpuMemory;
                p->valid |= TOP_PV_MEM;
            }
        }
        proc_util(s, i, lg->handle, m, first, m->nproc, gi);
    }
    /* NVML's processes first: their /proc/PID/stat gives the job reader their parents too. */
    size_t nvml_procs = m->nproc;
    top_host_poll(s);
    for (size_t i = 0; i < nvml_procs; i++)
        top_host_facts(s, &m->procs[i], mono);
    top_jobs_read(m);
    top_migration_update(s, m);
    for (size_t i = nvml_procs; i < m->nproc; i++)
        top_host_facts(s, &m->procs[i], mono);
    top_host_sweep(s);
    /* Per-job sums of NVML memory and SM % over the job's host pids, in one pass over the
     * processes sorted by pid (a pass per job, with a scan for duplicates, grew as jobs x
     * processes); distinct pids are counted for a job whose region did not say. */
    unsigned sm[TOP_MAX_JOBS] = { 0 }, npid[TOP_MAX_JOBS] = { 0 };
    bool smv[TOP_MAX_JOBS] = { false };
    struct top_pid_ix *ix;
    size_t nix = top_pid_index(m, 0, m->nproc, &ix);
    for (size_t k = 0; k < nix; k++) {
        const struct top_proc *p = &m->procs[ix[k].at];
        if (p->job < 0 || (unsigned)p->job >= m->njob)
            continue;
        struct top_job *jb = &m->jobs[p->job];
        if (p->valid & TOP_PV_MEM)
            jb->mem_nvml += p->gpu_mem, jb->mem_nvml_valid = true;
        if (p->valid & TOP_PV_SM)
            sm[p->job] += p->sm_pct, smv[p->job] = true;
        bool dup = false;
        for (size_t b = k; b-- > 0 && ix[b].pid == p->pid && !dup;)
            dup = m->procs[ix[b].at].job == p->job;
        if (!dup)
            npid[p->job]++;
    }
    free(ix);
    for (unsigned j = 0; j < m->njob; j++) {
        struct top_job *jb = &m->jobs[j];
        if (!jb->nproc)
            jb->nproc = npid[j];
        if (!jb->share_valid && smv[j]) {
            /* Σ SM % of its processes over all its GPUs: the job's share is the mean over its
             * GPUs, as the limiter's measure is (a 2-GPU job at --core 50 read "94/50%"). */
            double pct = sm[j] / (jb->ndev > 1 ? jb->ndev : 1);
            jb->share_pct = pct > 100 ? 100 : pct;
            jb->share_valid = true;
        }
    }
    return m;
}

/* ---- the thread ---- */

static void *sampler_main(void *arg)
{
    struct top_sampler *s = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals are the UI thread's */
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        struct top_model *m = top_sampler_sample(s);
        pthread_mutex_lock(&s->mu);
        if (m) {
            top_model_free(s->latest);   /* the UI did not take it: drop it */
            s->latest = m;
            /* the UI sleeps in poll(2) until this (or a key); a full pipe has a wake-up pending */
            if (s->notify[1] >= 0 && write(s->notify[1], "", 1) < 0 && errno != EAGAIN)
                vgpu_debug("vgpu top: waking the screen: %s", strerror(errno));
        }
        s->wake = false;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)s->delay_ms * 1000000ULL;
        until.tv_sec += (time_t)(ns / 1000000000ULL);
        until.tv_nsec = (long)(ns % 1000000000ULL);
        while (!s->stop && !s->wake)
            if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int top_sampler_start(struct top_sampler *s, unsigned delay_ms)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&s->cv);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->delay_ms = delay_ms;
    s->stop = false;
    if (s->notify[0] < 0 && pipe2(s->notify, O_CLOEXEC | O_NONBLOCK) < 0)
        s->notify[0] = s->notify[1] = -1;   /* the UI then looks every 50 ms, as it did */
    int rc = pthread_create(&s->thread, NULL, sampler_main, s);
    if (rc != 0)
        return -rc;
    s->started = true;
    return 0;
}

struct top_model *top_sampler_take(struct top_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    struct top_model *m = s->latest;
    s->latest = NULL;
    pthread_mutex_unlock(&s->mu);
    return m;
}

int top_sampler_notify_fd(const struct top_sampler *s)
{
    return s->notify[0];
}

void top_sampler_set_delay(struct top_sampler *s, unsigned delay_ms)
{
    pthread_mutex_lock(&s->mu);
    s->delay_ms = delay_ms;
    s->wake = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void top_sampler_wake(struct top_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    s->wake = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void top_sampler_stop(struct top_sampler *s)
{
    if (!s->started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = false;
}
