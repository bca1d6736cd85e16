/* vgpu ps: the rate of migration of each oversubscribed job, per GPU (see ps/migrate.h). */
#include "ps/migrate.h"

#include "vgpu/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PM_MAX 64

struct pm_gpu {
    nvmlDevice_t phys;          /* the physical GPU: its link, its counters */
    uint64_t off_total;         /* bytes off the device of the visible jobs there */
    struct vgpu_pcie_count a;   /* first reading (a.ok false: no counter) */
    bool rate_ok;
    double bps;
};

struct ps_migration {
    struct vgpu_nvml *nv;
    const struct vgpu_job_ref *refs;
    size_t nref;
    bool measured;
    unsigned ngpu, nuuid;
    struct pm_gpu gpu[PM_MAX];
    struct { char uuid[VGPU_REGION_UUID_LEN]; int at; } uuid[PM_MAX];   /* job GPU uuid -> gpu[], -1 none */
};

/* The entry of a job GPU, made on first sight; -1 when NVML cannot find it. */
static int entry_of(struct ps_migration *pm, const char *uuid)
{
    for (unsigned i = 0; i < pm->nuuid; i++)
        if (strcmp(pm->uuid[i].uuid, uuid) == 0)
            return pm->uuid[i].at;
    if (pm->nuuid >= PM_MAX)
        return -1;
    int at = -1;
    nvmlDevice_t h = NULL, phys = NULL;
    if (pm->nv->nvmlDeviceGetHandleByUUID && pm->nv->nvmlDeviceGetHandleByUUID(uuid, &h) == NVML_SUCCESS)
        phys = vgpu_pcie_device(pm->nv, h);
    for (unsigned i = 0; phys && i < pm->ngpu && at < 0; i++)
        if (pm->gpu[i].phys == phys)
            at = (int)i;
    if (phys && at < 0 && pm->ngpu < PM_MAX) {
        at = (int)pm->ngpu++;
        memset(&pm->gpu[at], 0, sizeof pm->gpu[at]);
        pm->gpu[at].phys = phys;
    }
    snprintf(pm->uuid[pm->nuuid].uuid, sizeof pm->uuid[pm->nuuid].uuid, "%s", uuid);
    pm->uuid[pm->nuuid++].at = at;
    return at;
}

static int entry_find(const struct ps_migration *pm, const char *uuid)
{
    for (unsigned i = 0; i < pm->nuuid; i++)
        if (strcmp(pm->uuid[i].uuid, uuid) == 0)
            return pm->uuid[i].at;
    return -1;
}

struct ps_migration *ps_migration_new(struct vgpu_nvml *nv, const struct vgpu_job_ref *refs, size_t n)
{
    if (!nv)
        return NULL;
    struct ps_migration *pm = calloc(1, sizeof *pm);
    if (!pm)
        return NULL;
    pm->nv = nv;
    pm->refs = refs;
    pm->nref = n;
    return pm;
}

static void measure(struct ps_migration *pm)
{
    struct vgpu_nvml *nv = pm->nv;
    const struct vgpu_job_ref *refs = pm->refs;
    pm->measured = true;
    /* Which GPUs carry oversubscribed jobs, and how much the visible ones have off each. */
    for (size_t i = 0; i < pm->nref; i++) {
        struct vgpu_region r;
        struct vgpu_err e;
        if (!refs[i].readable || vgpu_region_open(&r, refs[i].path, VGPU_REGION_VIEW, &e) < 0)
            continue;
        if (vgpu_region_check(&r) == 0 && atomic_load(&r.hdr->state) != VGPU_JOB_EXITED) {
            for (unsigned d = 0; d < vgpu_region_device_count(&r); d++) {
                uint64_t share;
                if (!vgpu_region_oversub(&r, d, &share))
                    continue;
                int at = entry_of(pm, r.info->dev[d].uuid);
                if (at >= 0)
                    pm->gpu[at].off_total += vgpu_region_mem_spilled(&r, d);
            }
        }
        vgpu_region_close(&r);
    }
    /* One reading each (it tells whether the driver has the counters), one wait for all the
     * GPUs that have memory off the device, one more reading of those. */
    unsigned window = 0;
    for (unsigned i = 0; i < pm->ngpu; i++) {
        struct pm_gpu *g = &pm->gpu[i];
        bool ok = vgpu_pcie_read(nv, g->phys, &g->a);
        /* The width is not documented (nvml.h: "Value can be wrapped"): say what this driver gives. */
        if (ok)
            vgpu_debug("PCIe byte counters of a GPU with oversubscribed jobs: %u bits, tx %llu rx %llu", g->a.bits,
                       (unsigned long long)g->a.tx, (unsigned long long)g->a.rx);
        else
            vgpu_debug("a GPU with oversubscribed jobs has no PCIe byte counters (driver older than 550?): "
                       "no rate of migration");
        if (ok && g->off_total) {
            unsigned w = vgpu_pcie_window_ms(g->a.bits, VGPU_MIGRATION_WINDOW_MS);
            window = !window || w < window ? w : window;
        }
    }
    if (!window)
        return;
    struct timespec ts = { window / 1000, (long)(window % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    for (unsigned i = 0; i < pm->ngpu; i++) {
        struct pm_gpu *g = &pm->gpu[i];
        struct vgpu_pcie_count b;
        if (g->a.ok && g->off_total && vgpu_pcie_read(nv, g->phys, &b))
            g->rate_ok = vgpu_pcie_rate(&g->a, &b, &g->bps);
    }
}

bool ps_migration_of(struct ps_migration *pm, const struct vgpu_region *r, unsigned d, double *bps)
{
    uint64_t share;
    if (!pm || !vgpu_region_oversub(r, d, &share) || atomic_load(&r->hdr->state) == VGPU_JOB_EXITED)
        return false;
    if (!pm->measured)
        measure(pm);
    int at = entry_find(pm, r->info->dev[d].uuid);
    if (at < 0 || !pm->gpu[at].a.ok)
        return false;
    const struct pm_gpu *g = &pm->gpu[at];
    uint64_t off = vgpu_region_mem_spilled(r, d);
    if (!off) {
        *bps = 0;   /* nothing of it off the device: none of the traffic is its migration */
        return true;
    }
    if (!g->rate_ok)
        return false;
    *bps = vgpu_migration_share(g->bps, off, g->off_total);
    return true;
}

void ps_migration_free(struct ps_migration *pm)
{
    free(pm);
}
