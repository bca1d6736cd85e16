/* procs.c: the running-process lists in their three record formats, with the two-call
 * protocol (reference §4, §5). Dead processes are reaped first, as the driver frees their
 * memory at exit. Everything a process has is a compute process here: the graphics lists are
 * always empty, and so is the MPS list until the fake grows an MPS server (fs_mps).
 *
 * usedGpuMemory is not the exact sum of what the process allocated, as with the driver: it is
 * rounded up to 2 MiB pages and has a per-process extra (VGPU_FAKE_NVML_PROC_EXTRA bytes,
 * default 0) added; VGPU_FAKE_NVML_PROC_MEM=na makes it NVML_VALUE_NOT_AVAILABLE, as some MIG
 * setups and containers report. Both are read by the process asking, as is VGPU_FAKE_NVML_PIDS
 * (pid_for_caller). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

struct rec {
    unsigned pid, gi, ci;
    unsigned long long mem;
};

/* The pid NVML gives the caller for p, 0 for none. By default the host pid, to every caller.
 * VGPU_FAKE_NVML_PIDS=caller (read by the process asking) is what driver 580 does on an H200:
 * pids of the caller's own PID namespace, so a process in a container with its own /proc is
 * listed to itself by its pid there (1 for unshare's child), and the processes of other
 * namespaces not at all; a caller on the host still gets host pids. */
static unsigned pid_for_caller(const struct fs_proc *p)
{
    static int caller = -1;
    static unsigned mine;
    if (caller < 0) {
        const char *e = getenv("VGPU_FAKE_NVML_PIDS");
        caller = e && strcmp(e, "caller") == 0;
        if (e && *e && !caller && strcmp(e, "host") != 0)
            fprintf(stderr, "fake NVML: VGPU_FAKE_NVML_PIDS='%s' is neither 'host' nor 'caller'\n", e);
        mine = fs_proc_pidns(0);
    }
    unsigned host = fs_state()->host_pidns;
    if (!caller || !host || !mine || mine == host)
        return (unsigned)p->pid;
    return p->pidns == mine ? (unsigned)p->ns_pid : 0;
}

/* The processes of the handle: all of a GPU (with MIG instance ids), or one MIG device's. */
static unsigned gather(const struct nvmlDevice_st *d, struct rec *out)
{
    struct fs_gpu *g = &fs_state()->gpu[d->gpu];
    unsigned n = 0;
    fs_reap_gpu(d->gpu);
    for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
        const struct fs_proc *p = &g->procs[i];
        if (!p->used || (d->gi >= 0 && (p->gi != d->gi || p->ci != d->ci)))
            continue;
        unsigned pid = pid_for_caller(p);
        if (!pid)
            continue;   /* another namespace's, hidden from this caller */
        /* one line per pid on a whole GPU: a process's records on several places add up */
        unsigned gi = p->gi < 0 ? VGPU_NVML_NO_INSTANCE : g->gi[p->gi].id;
        unsigned ci = p->gi < 0 ? VGPU_NVML_NO_INSTANCE : g->gi[p->gi].ci[p->ci].id;
        bool merged = false;
        for (unsigned k = 0; k < n && !merged; k++)
            if (out[k].pid == pid && out[k].gi == gi && out[k].ci == ci) {
                out[k].mem += p->mem;
                merged = true;
            }
        if (!merged)
            out[n++] = (struct rec){pid, gi, ci, p->mem};
    }
    return n;
}

/* What NVML reports for a process holding `mem` bytes. */
static unsigned long long shown(unsigned long long mem)
{
    static int na = -1;
    static unsigned long long extra;
    if (na < 0) {
        const char *e = getenv("VGPU_FAKE_NVML_PROC_MEM"), *x = getenv("VGPU_FAKE_NVML_PROC_EXTRA");
        na = e && strcmp(e, "na") == 0;
        if (e && *e && !na && strcmp(e, "exact") != 0)
            fprintf(stderr, "fake NVML: VGPU_FAKE_NVML_PROC_MEM='%s' is neither 'na' nor 'exact'\n", e);
        if (x && *x) {
            char *end;
            extra = strtoull(x, &end, 10);
            if (*end || *x == '-') {
                fprintf(stderr, "fake NVML: VGPU_FAKE_NVML_PROC_EXTRA='%s' is not a number of bytes\n", x);
                extra = 0;
            }
        }
    }
    if (na)
        return VGPU_NVML_VALUE_NOT_AVAILABLE;
    const unsigned long long page = 2ULL << 20;
    return (mem + page - 1) / page * page + extra;
}

enum kind { COMPUTE, GRAPHICS, MPS };

static nvmlReturn_t list(nvmlDevice_t device, const char *fn, enum kind kind, unsigned int *count, void *infos,
                         int version)
{
    struct nvmlDevice_st *d;
    nvmlReturn_t rc = fn_enter_dev(device, fn, &d);
    if (rc)
        return rc;
    if (!count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct rec r[FS_MAX_PROCS];
    unsigned n = kind == COMPUTE ? gather(d, r) : 0;
    if (*count < n || (n > 0 && !infos)) {
        *count = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++) {
        if (version == 1) {
            nvmlProcessInfo_v1_t *v1 = (nvmlProcessInfo_v1_t *)infos + i;
            memset(v1, 0, sizeof *v1);
            v1->pid = r[i].pid;
            v1->usedGpuMemory = shown(r[i].mem);
        } else {
            nvmlProcessInfo_v2_t *v2 = (nvmlProcessInfo_v2_t *)infos + i;
            memset(v2, 0, sizeof *v2);
            v2->pid = r[i].pid;
            v2->usedGpuMemory = shown(r[i].mem);
            v2->gpuInstanceId = r[i].gi;
            v2->computeInstanceId = r[i].ci;
        }
    }
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
    return list(d, __func__, COMPUTE, c, i, 1);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, COMPUTE, c, i, 2);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, COMPUTE, c, i, 3);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
    return list(d, __func__, GRAPHICS, c, i, 1);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, GRAPHICS, c, i, 2);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, GRAPHICS, c, i, 3);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
    return list(d, __func__, MPS, c, i, 1);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, MPS, c, i, 2);
}
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
    return list(d, __func__, MPS, c, i, 3);
}

nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device, nvmlProcessDetailList_v1_t *plist)
{
    FN_ENTER_DEV(device, d);
    if (!plist)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (plist->version != nvmlProcessDetailList_v1)
        FN_RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (plist->mode > 3)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct rec r[FS_MAX_PROCS];
    unsigned n = plist->mode == 0 || plist->mode == 3 ? gather(d, r) : 0;
    if (plist->numProcArrayEntries < n || (n > 0 && !plist->procArray)) {
        plist->numProcArrayEntries = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++)
        plist->procArray[i] = (nvmlProcessDetail_v1_t){r[i].pid, shown(r[i].mem), r[i].gi, r[i].ci, 0};
    plist->numProcArrayEntries = n;
    FN_RETURN(NVML_SUCCESS);
}
