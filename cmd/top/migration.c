/* vgpu top's rate of migration of spilled memory (issue 15, item 4): each sample reads the PCIe
 * byte counters of the GPUs where a shown job is oversubscribed (well under a millisecond per
 * GPU), and the rate over the interval since the previous sample is shared among the jobs with
 * memory off the device there, in proportion to it (vgpu/migration.h: the source, its limits).
 * Where there is no previous reading (the first sample, or the GPU just got an oversubscribed
 * job), or a 32-bit counter could have wrapped unseen over the interval, the rate is measured
 * over a short window instead (VGPU_MIGRATION_WINDOW_MS, shortened for a 32-bit counter), as
 * vgpu ps does, and only on GPUs with memory off the device. Sampler thread only. */
#include "top.h"

#include <string.h>

#include "vgpu/migration.h"

static struct vgpu_pcie_count prev[VGPU_MAX_GPUS];   /* by NVML index of the physical GPU */

/* The physical GPU of NVML index idx in the sampler's list. */
static nvmlDevice_t phys_handle(const struct top_sampler *s, unsigned idx)
{
    for (unsigned i = 0; s->list && i < s->list->count; i++)
        if (!s->list->gpu[i].is_mig && s->list->gpu[i].index == idx && !s->list->gpu[i].lost)
            return (nvmlDevice_t)s->list->gpu[i].handle;
    return NULL;
}

void top_migration_update(struct top_sampler *s, struct top_model *m)
{
    bool want[VGPU_MAX_GPUS] = { false }, have[VGPU_MAX_GPUS] = { false }, rate_ok[VGPU_MAX_GPUS] = { false };
    uint64_t off_total[VGPU_MAX_GPUS] = { 0 };
    double bps[VGPU_MAX_GPUS] = { 0 };
    for (unsigned j = 0; j < m->njob; j++) {
        const struct top_job *jb = &m->jobs[j];
        for (unsigned d = 0; d < jb->ndev; d++) {
            int g = jb->dev_gpu[d];
            if (!jb->dev_oversub[d] || g < 0 || (unsigned)g >= m->ngpu || m->gpus[g].index >= VGPU_MAX_GPUS)
                continue;
            want[m->gpus[g].index] = true;
            off_total[m->gpus[g].index] += jb->dev_off[d];
        }
    }
    for (unsigned idx = 0; idx < VGPU_MAX_GPUS; idx++) {
        nvmlDevice_t h = want[idx] && s->nv ? phys_handle(s, idx) : NULL;
        struct vgpu_pcie_count c;
        if (!h || !vgpu_pcie_read(s->nv, h, &c)) {
            prev[idx].ok = false;   /* the next rate starts afresh */
            continue;
        }
        have[idx] = true;
        if (off_total[idx]) {
            rate_ok[idx] = prev[idx].ok && vgpu_pcie_rate(&prev[idx], &c, &bps[idx]);
            if (!rate_ok[idx])
                rate_ok[idx] = vgpu_pcie_sample(s->nv, h, VGPU_MIGRATION_WINDOW_MS, &bps[idx], &c);
        }
        prev[idx] = c;
    }
    for (unsigned j = 0; j < m->njob; j++) {
        struct top_job *jb = &m->jobs[j];
        bool valid = false, unknown = false;
        double sum = 0;
        for (unsigned d = 0; d < jb->ndev; d++) {
            if (!jb->dev_oversub[d])
                continue;
            int g = jb->dev_gpu[d];
            unsigned idx = g >= 0 && (unsigned)g < m->ngpu ? m->gpus[g].index : VGPU_MAX_GPUS;
            if (idx >= VGPU_MAX_GPUS || !have[idx] || (jb->dev_off[d] && !rate_ok[idx])) {
                unknown = true;
                continue;
            }
            valid = true;
            sum += vgpu_migration_share(bps[idx], jb->dev_off[d], off_total[idx]);
        }
        jb->migration_valid = valid && !unknown;
        jb->migration_bps = jb->migration_valid ? sum : 0;
    }
}
