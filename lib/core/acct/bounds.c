/* Sanity bounds of an accounting record before it is stored (vgpu/acct.h, issue 36 N13): one
 * function that both writers (vgpu run into the user's own store, the daemon into its database)
 * and the store itself call, each with what it knows of the GPUs' memory. libc only. */
#include "vgpu/acct.h"

#include <stddef.h>

/* The most memory the job could have held on GPU d: the GPU's, when known and believable. An
 * oversubscribed job's memory lives on the host past its device part, so only 1 PiB bounds it. */
static uint64_t mem_bound(const struct vgpu_acct_gpu *g, const uint64_t *mem_total, unsigned d)
{
    uint64_t total = mem_total ? mem_total[d] : 0;
    if (!total || total > VGPU_ACCT_MEM_UNKNOWN_MAX || g->oversub_device_bytes)
        return VGPU_ACCT_MEM_UNKNOWN_MAX;
    return total;
}

/* NaN or negative (bytes from another process) is no figure either: 0. */
static unsigned cut_dbl(double *v, double max, unsigned bit)
{
    if (*v >= 0.0 && *v <= max)
        return 0;
    *v = *v > max ? max : 0.0;
    return bit;
}

static unsigned cut_u64(uint64_t *v, uint64_t max, unsigned bit)
{
    if (*v <= max)
        return 0;
    *v = max;
    return bit;
}

unsigned vgpu_acct_bound(struct vgpu_acct_record *rec, const uint64_t *mem_total)
{
    unsigned cut = 0;
    if (rec->end_ns < rec->start_ns) {
        rec->end_ns = rec->start_ns;
        cut |= VGPU_ACCT_BOUND_TIME;
    }
    uint64_t dur_ns = rec->end_ns - rec->start_ns;
    /* Byte-seconds are sampled every 250 ms up to just after the command's end: 1 s of slack,
     * so that an honest record is never cut. */
    double dur_s = (double)dur_ns / 1e9 + 1.0;
    unsigned n = rec->gpu_count < VGPU_REGION_MAX_DEVICES ? rec->gpu_count : VGPU_REGION_MAX_DEVICES;
    for (unsigned d = 0; d < n; d++) {
        struct vgpu_acct_gpu *g = &rec->gpu[d];
        uint64_t mem = mem_bound(g, mem_total, d);
        uint64_t gpu_mem = mem_total && mem_total[d] && mem_total[d] <= VGPU_ACCT_MEM_UNKNOWN_MAX
                               ? mem_total[d] : VGPU_ACCT_MEM_UNKNOWN_MAX;
        cut |= cut_u64(&g->mem_limit_bytes, mem, VGPU_ACCT_BOUND_MEM_LIMIT);
        /* What may stay on the device is on the device: the GPU's memory, even oversubscribed. */
        cut |= cut_u64(&g->oversub_device_bytes, gpu_mem, VGPU_ACCT_BOUND_MEM_LIMIT);
        if (g->core_limit > 100) {
            g->core_limit = 100;
            cut |= VGPU_ACCT_BOUND_CORE;
        }
        cut |= cut_u64(&g->gpu_ns, dur_ns, VGPU_ACCT_BOUND_GPU_TIME);
        cut |= cut_u64(&g->mem_peak_bytes, mem, VGPU_ACCT_BOUND_MEM_PEAK);
        cut |= cut_u64(&g->mem_request_bytes, mem, VGPU_ACCT_BOUND_MEM_LIMIT);
        double max_bs = (double)mem * dur_s;
        cut |= cut_dbl(&g->mem_byte_seconds, max_bs, VGPU_ACCT_BOUND_MEM_TIME);
        cut |= cut_dbl(&g->mem_requested_byte_seconds, max_bs, VGPU_ACCT_BOUND_MEM_TIME);
        /* What was borrowed was held: never more than the memory integrated over time. */
        cut |= cut_dbl(&g->mem_borrowed_byte_seconds, g->mem_byte_seconds, VGPU_ACCT_BOUND_MEM_TIME);
    }
    rec->bounded |= cut;
    return cut;
}

const char *vgpu_acct_bound_name(unsigned bit, bool json)
{
    switch (bit) {
    case VGPU_ACCT_BOUND_TIME: return json ? "end_time" : "end before start";
    case VGPU_ACCT_BOUND_MEM_LIMIT: return json ? "mem_limit" : "memory limit";
    case VGPU_ACCT_BOUND_CORE: return json ? "core_limit" : "core limit";
    case VGPU_ACCT_BOUND_GPU_TIME: return json ? "gpu_seconds" : "GPU-seconds";
    case VGPU_ACCT_BOUND_MEM_PEAK: return json ? "mem_peak" : "memory peak";
    case VGPU_ACCT_BOUND_MEM_TIME: return json ? "mem_gib_hours" : "GiB-hours";
    default: return NULL;
    }
}
