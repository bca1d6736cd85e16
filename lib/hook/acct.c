/* acct.c: the job's memory counters, as this process sees them: the bottom of the hook's
 * memory accounting (DESIGN.md decisions 4 and 6).
 *
 * The layers, each calling only down:
 *   wrappers      mem.c vmm.c ctx.c spill.c pool.c graphmem.c view.c nvml.c's views, launch.c
 *   admission     admit.c: vgpu_acct_reserve*: settle NVML's view first, try, and before refusing
 *                 re-measure what may be stale (pools, graph pools, memory outside the limiter,
 *                 dead processes) and try once more; the OOM message. giveway.c: after the
 *                 driver refused an allocation within the request, the bounded wait for borrowers
 *   measuring     pool_charge.c, graphmem_charge.c, nvml.c (reconciliation): measure what the
 *                 driver holds for the job and charge or give back the difference
 *   counters      this file: one reservation attempt, release, force, spill, limits and views
 *   region        lib/core/region/region.c: the per-job, per-device counters and their CAS
 * This file knows the job (config.c) and the region only: nothing above it, and no driver call,
 * so that it can be tested alone (tests/unit/test_hook_acct.c).
 *
 * A reservation is a CAS of the job's per-device counter against the limit (region.c), so that
 * concurrent processes can never pass the limit together; it is released when the real call
 * fails or the memory is freed. Callers pass CUDA ordinals; the job device is found by UUID
 * (vgpu_job_dev), and a GPU that is not the job's gets no memory at all (a child that changed
 * CUDA_VISIBLE_DEVICES must not use GPUs the job was not given). */
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#include "hook.h"
#include "vgpu/lend.h"
#include "vgpu/region.h"

/* The job and this process's slot when CUDA device `dev` can be accounted, with its job device
 * in *jdev; NULL otherwise (*jdev is VGPU_NOT_JOB_DEV for a GPU that is not the job's). */
static struct vgpu_region *accountable(int dev, int *slot, int *jdev)
{
    struct vgpu_region *r = vgpu_job();
    vgpu_job_guard(r);
    *jdev = r && dev >= 0 ? vgpu_job_dev(dev) : -1;
    if (!r || *jdev < 0)
        return NULL;
    *slot = vgpu_job_slot();
    return *slot >= 0 ? r : NULL;
}

bool vgpu_acct_tracked(int dev)
{
    int slot, jdev;
    return accountable(dev, &slot, &jdev) != NULL;
}

enum vgpu_acct_answer vgpu_acct_try(int dev, uint64_t bytes, enum vgpu_acct_place how, bool *spilled)
{
    int slot, jdev;
    bool sp = false;
    if (spilled)
        *spilled = false;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    if (jdev == VGPU_NOT_JOB_DEV && bytes)
        return VGPU_ACCT_REFUSED;       /* not the job's GPU: said once by vgpu_job_dev */
    if (!r && bytes && vgpu_job_refused())
        return VGPU_ACCT_REFUSED;       /* VGPU_FAIL_CLOSED: no job region, no memory */
    if (!r || bytes == 0)
        return VGPU_ACCT_GRANTED;
    (void)vgpu_region_reap_maybe(r);
    int rc;
    if (how == VGPU_ACCT_PAGED && vgpu_region_oversub(r, (unsigned)jdev, NULL)) {
        /* Managed memory the program asked for: pageable by nature, so it counts against the
         * cap and off the device share (when this process may spill here). */
        rc = vgpu_region_reserve(r, slot, (unsigned)jdev, bytes);
        if (rc == 0)
            sp = vgpu_region_mark_spilled(r, slot, (unsigned)jdev, bytes);
    } else {
        /* A borrower's managed memory is pageable by nature: past its REQUEST it is borrowed. */
        bool pageable = how == VGPU_ACCT_SPILLABLE ||
                        (how == VGPU_ACCT_PAGED && vgpu_region_lending(r, (unsigned)jdev, NULL));
        rc = vgpu_region_reserve_split(r, slot, (unsigned)jdev, bytes, pageable, &sp);
    }
    if (rc == 0) {
        if (spilled)
            *spilled = sp;
        return VGPU_ACCT_GRANTED;
    }
    if (errno == EINVAL)
        return VGPU_ACCT_GRANTED;       /* not ours to account (bad index): never fail the call */
    return VGPU_ACCT_OVER;
}

void vgpu_acct_release_spilled(int dev, uint64_t bytes)
{
    int slot, jdev;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    if (r && bytes) {
        vgpu_region_unspill(r, slot, (unsigned)jdev, bytes);
        (void)vgpu_region_release(r, slot, (unsigned)jdev, bytes);
    }
}

bool vgpu_acct_mark_spilled(int dev, uint64_t bytes)
{
    int slot, jdev;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    return r && vgpu_region_oversub(r, (unsigned)jdev, NULL) && vgpu_region_mark_spilled(r, slot, (unsigned)jdev, bytes);
}

bool vgpu_acct_oversub(int dev)
{
    return vgpu_region_oversub(vgpu_job(), (unsigned)vgpu_job_dev(dev), NULL);
}

bool vgpu_acct_lending(int dev)
{
    int jdev = vgpu_job_dev(dev);
    return jdev >= 0 && vgpu_region_lending(vgpu_job(), (unsigned)jdev, NULL);
}

void vgpu_acct_release(int dev, uint64_t bytes)
{
    int slot, jdev;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    if (r && bytes)
        (void)vgpu_region_release(r, slot, (unsigned)jdev, bytes);
}

void vgpu_acct_force(int dev, uint64_t bytes)
{
    int slot, jdev;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    if (!r || bytes == 0)
        return;
    dev = jdev;
    /* Memory the driver already handed out: counted even past the limit, so the job's view and
     * later reservations see it (the region API only has the checked reserve). */
    atomic_fetch_add(&r->use->slot[slot].used[dev], bytes);
    uint64_t now = atomic_fetch_add(&r->use->dev[dev].used, bytes) + bytes;
    uint64_t peak = atomic_load(&r->use->dev[dev].peak);
    while (now > peak && !atomic_compare_exchange_weak(&r->use->dev[dev].peak, &peak, now))
        ;
}

uint64_t vgpu_acct_limit_job(int jdev)
{
    struct vgpu_region *r = vgpu_job();
    return r && jdev >= 0 ? vgpu_region_mem_limit(r, (unsigned)jdev) : 0;
}

uint64_t vgpu_acct_limit(int dev)
{
    return vgpu_acct_limit_job(vgpu_job_dev(dev));
}

/* What the job holds on job device jdev: accounted, plus its memory outside the limiter. */
static uint64_t used_job(int jdev)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || jdev < 0)
        return 0;
    uint64_t u = vgpu_region_mem_used(r, (unsigned)jdev), o = vgpu_region_outside(r, (unsigned)jdev);
    return u + o < u ? UINT64_MAX : u + o;
}

uint64_t vgpu_acct_used(int dev)
{
    return used_job(vgpu_job_dev(dev));
}

void vgpu_acct_view(int dev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out,
                    uint64_t *used_out)
{
    vgpu_acct_view_job(vgpu_job_dev(dev), real_free, real_total, free_out, total_out, used_out);
}

/* The other jobs' unmet requests and borrowed bytes on job device jdev's GPU (vgpu_lend_others
 * reads their files), looked at most every VGPU_REGION_REAP_NS: a view is asked for often
 * (frameworks size their pools by it), the other jobs' use changes slowly next to that. */
static struct vgpu_lend_others others_on(struct vgpu_region *r, int jdev)
{
    static _Atomic uint64_t at_ns[VGPU_REGION_MAX_DEVICES], unmet[VGPU_REGION_MAX_DEVICES],
        borrowed[VGPU_REGION_MAX_DEVICES];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* not vgpu_now_ns: this layer is tested alone */
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, at = atomic_load(&at_ns[jdev]);
    struct vgpu_lend_others o = { 0 };
    if (at && now - at < VGPU_REGION_REAP_NS) {
        o.unmet = atomic_load(&unmet[jdev]);
        o.borrowed = atomic_load(&borrowed[jdev]);
        return o;
    }
    vgpu_lend_others(r, (unsigned)jdev, &o);
    atomic_store(&unmet[jdev], o.unmet);
    atomic_store(&borrowed[jdev], o.borrowed);
    atomic_store(&at_ns[jdev], now);
    return o;
}

void vgpu_acct_view_job(int jdev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out,
                        uint64_t *used_out)
{
    uint64_t request;
    struct vgpu_region *job = vgpu_job();
    if (jdev >= 0 && jdev < VGPU_REGION_MAX_DEVICES && vgpu_region_lending(job, (unsigned)jdev, &request)) {
        /* A borrower (decision 13): LIMIT is the total; free is what it could get now. */
        (void)vgpu_region_reap_maybe(job);
        uint64_t limit = vgpu_acct_limit_job(jdev), used = used_job(jdev);
        uint64_t fr = vgpu_lend_free(limit, request, used, real_free, others_on(job, jdev).unmet);
        *free_out = fr;
        *total_out = limit;
        *used_out = limit - fr;
        return;
    }
    uint64_t limit = vgpu_acct_limit_job(jdev);
    /* Oversubscribed: the job's memory is its cap, whatever the GPU has (issue 15), so that
     * frameworks size their pools to it; what does not fit on the device is paged. */
    bool virt = jdev >= 0 && vgpu_region_oversub(vgpu_job(), (unsigned)jdev, NULL);
    if (!limit) {
        *free_out = real_free;
        *total_out = real_total;
        *used_out = real_total > real_free ? real_total - real_free : 0;
        return;
    }
    uint64_t total = !virt && real_total && real_total < limit ? real_total : limit;
    (void)vgpu_region_reap_maybe(vgpu_job());   /* a dead process's memory is not shown as used */
    uint64_t used = used_job(jdev);
    uint64_t fr = used < total ? total - used : 0;
    if (fr > real_free && !virt) {
        /* The device itself has less: never promise more, except what other jobs borrow there,
         * which the driver evicts for this job's allocations (decision 13's safety net). */
        fr = jdev < VGPU_REGION_MAX_DEVICES ? vgpu_lend_owner_free(total, used, real_free, others_on(vgpu_job(), jdev).borrowed)
                                            : real_free;
    }
    *free_out = fr;
    *total_out = total;
    *used_out = total - fr;
}
