/* admit.c: whether an allocation may have its memory: the admission above the counters.
 *
 * Every allocating wrapper asks here before the real call (vgpu_acct_reserve*). A reservation
 * is tried against the counters (acct.c); only before a real call, NVML's view of this process
 * is settled first (nvml.c), as memory it shows but that was never charged would otherwise pass
 * the limit. When the counters say over the limit, charges that may be stale are re-measured
 * (pools shrink at synchronize, graph pools are trimmed, memory outside the limiter goes away,
 * processes die) and the reservation is tried once more. A refusal is logged once a second at
 * most (warn level: VGPU_LOG=error silences it) and the wrapper returns
 * CUDA_ERROR_OUT_OF_MEMORY.
 * This file sits above the measuring files it asks (pool_charge.c, graphmem_charge.c, nvml.c),
 * which sit above the counters: see the layers at the top of acct.c. */
#include <stdatomic.h>
#include <stdio.h>

#include "hook.h"
#include "vgpu/region.h"
#include "vgpu/units.h"

/* The OOM line for `bytes` refused on CUDA device dev (job device jdev of job r). */
static void report_oom(struct vgpu_region *r, int dev, int jdev, uint64_t bytes, const char *what)
{
    static _Atomic uint64_t last_ns;
    static _Atomic unsigned suppressed;
    uint64_t now = vgpu_now_ns(), last = atomic_load(&last_ns);
    if (last && now - last < 1000000000ull) {
        atomic_fetch_add(&suppressed, 1);
        return;
    }
    if (!atomic_compare_exchange_strong(&last_ns, &last, now)) {
        atomic_fetch_add(&suppressed, 1);
        return;
    }
    char req[32], used[32], lim[32], more[64] = "", out[96] = "";
    unsigned n = atomic_exchange(&suppressed, 0);
    if (n)
        snprintf(more, sizeof more, " (%u more refused since the last message)", n);
    uint64_t outside = vgpu_region_outside(r, (unsigned)jdev);
    if (outside) {
        char o[32];
        snprintf(out, sizeof out, ", and %s outside the limiter (pid %d, not under libvgpu.so)",
                 vgpu_format_size(outside, o, sizeof o), (int)atomic_load(&r->use->dev[jdev].outside_pid));
    }
    uint64_t share;
    if (vgpu_region_oversub(r, (unsigned)jdev, &share) && share != UINT64_MAX) {
        /* Oversubscribed: say which bound refused it, the cap or the device share. */
        char sh[32], off[32];
        uint64_t sp = vgpu_region_mem_spilled(r, (unsigned)jdev), u = vgpu_region_mem_used(r, (unsigned)jdev);
        vgpu_warn("%s: %s of %s on GPU %d refused with CUDA_ERROR_OUT_OF_MEMORY: %s of its %s limit in use, %s of it "
                  "off the device; its device share is %s (--oversubscribe: only cuMemAlloc spills past it)%s%s. "
                  "Use less memory, or raise the limit with `vgpu limit`.",
                  vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev,
                  vgpu_format_size(u, used, sizeof used),
                  vgpu_format_size(vgpu_region_mem_limit(r, (unsigned)jdev), lim, sizeof lim),
                  vgpu_format_size(sp, off, sizeof off), vgpu_format_size(share, sh, sizeof sh), out, more);
        return;
    }
    uint64_t request, u = vgpu_region_mem_used(r, (unsigned)jdev);
    if (vgpu_region_lending(r, (unsigned)jdev, &request) && u + bytes >= u &&
        u + bytes + outside <= vgpu_region_mem_limit(r, (unsigned)jdev)) {
        /* Under the LIMIT but past the REQUEST: this path cannot borrow (decision 13). */
        char rq[32], bo[32];
        vgpu_warn("%s: %s of %s on GPU %d refused with CUDA_ERROR_OUT_OF_MEMORY: it would pass the job's REQUEST "
                  "(%s; %s in use, %s of it borrowed, LIMIT %s). Only cuMemAlloc (cudaMalloc) and managed memory "
                  "borrow past the REQUEST: this path (VMM, memory pools, pitched memory, arrays, graph memory) cannot be paged off "
                  "the GPU, so it stays within the REQUEST. PyTorch: set PYTORCH_CUDA_ALLOC_CONF="
                  "expandable_segments:False (True allocates by VMM). Or raise the REQUEST with `vgpu limit JOB "
                  "--mem REQUEST:`%s%s.",
                  vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev,
                  vgpu_format_size(request, rq, sizeof rq), vgpu_format_size(u, used, sizeof used),
                  vgpu_format_size(vgpu_region_mem_borrowed(r, (unsigned)jdev), bo, sizeof bo),
                  vgpu_format_size(vgpu_region_mem_limit(r, (unsigned)jdev), lim, sizeof lim), out, more);
        return;
    }
    vgpu_warn("%s: %s of %s on GPU %d refused with CUDA_ERROR_OUT_OF_MEMORY: %s of its %s limit in use%s%s. "
              "Use less memory, or raise the limit with `vgpu limit`.",
              vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev,
              vgpu_format_size(vgpu_region_mem_used(r, (unsigned)jdev), used, sizeof used),
              vgpu_format_size(vgpu_region_mem_limit(r, (unsigned)jdev), lim, sizeof lim), out, more);
}

/* Charges that may be stale, re-measured before a reservation is refused. */
static void reclaim(int dev)
{
    vgpu_pool_reconcile_all();
    vgpu_graphmem_reconcile(dev);
    vgpu_nvml_outside_refresh(dev);
    (void)vgpu_region_reap(vgpu_job());
}

static bool reserve(int dev, uint64_t bytes, const char *what, bool before_call, enum vgpu_acct_place how,
                    bool *spilled)
{
    /* Only before a real call: after one, NVML already shows memory not yet charged. */
    if (before_call && bytes && vgpu_acct_tracked(dev))
        vgpu_nvml_reconcile_maybe(dev);
    for (int attempt = 0;; attempt++) {
        enum vgpu_acct_answer a = vgpu_acct_try(dev, bytes, how, spilled);
        if (a != VGPU_ACCT_OVER)
            return a == VGPU_ACCT_GRANTED;
        if (attempt)
            break;
        reclaim(dev);
    }
    /* Over the limit twice: the counters found the job and its device (VGPU_ACCT_OVER). */
    report_oom(vgpu_job(), dev, vgpu_job_dev(dev), bytes, what);
    return false;
}

bool vgpu_acct_reserve(int dev, uint64_t bytes, const char *what)
{
    return reserve(dev, bytes, what, true, VGPU_ACCT_ON_DEVICE, NULL);
}

bool vgpu_acct_reserve_measured(int dev, uint64_t bytes, const char *what)
{
    return reserve(dev, bytes, what, false, VGPU_ACCT_ON_DEVICE, NULL);
}

bool vgpu_acct_reserve_spillable(int dev, uint64_t bytes, const char *what, bool *spill)
{
    return reserve(dev, bytes, what, true, VGPU_ACCT_SPILLABLE, spill);
}

bool vgpu_acct_reserve_paged(int dev, uint64_t bytes, const char *what, bool *spilled)
{
    return reserve(dev, bytes, what, true, VGPU_ACCT_PAGED, spilled);
}
