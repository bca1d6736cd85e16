/* acct.c: reserving device memory in the job region (DESIGN.md decisions 4 and 6).
 *
 * Every allocating wrapper reserves before the real call (a CAS of the job's per-device
 * counter against the limit, in lib/core/region/region.c, so that concurrent processes can never pass
 * the limit together) and releases when the real call fails or the memory is freed. A refused
 * reservation is logged once a second at most (warn level: VGPU_LOG=error silences it) and the
 * wrapper returns CUDA_ERROR_OUT_OF_MEMORY. Callers pass CUDA ordinals; the job device is found
 * by UUID (vgpu_job_dev), and a GPU that is not the job's gets no memory at all (a child that
 * changed CUDA_VISIBLE_DEVICES must not use GPUs the job was not given). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "hook.h"
#include "vgpu/region.h"
#include "vgpu/units.h"

static vgpu_cuCtxGetDevice_fn ctx_get_device(void)
{
    static _Atomic(vgpu_cuCtxGetDevice_fn) fn;
    vgpu_cuCtxGetDevice_fn f = atomic_load_explicit(&fn, memory_order_acquire);
    if (!f) {
        f = (vgpu_cuCtxGetDevice_fn)vgpu_real_cuda_sym("cuCtxGetDevice");
        atomic_store_explicit(&fn, f, memory_order_release);
    }
    return f;
}

int vgpu_current_device(void)
{
    vgpu_cuCtxGetDevice_fn f = ctx_get_device();
    CUdevice d = -1;
    if (!f || f(&d) != CUDA_SUCCESS || d < 0)
        return -1;
    return d;
}

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
    vgpu_warn("%s: %s of %s on GPU %d refused with CUDA_ERROR_OUT_OF_MEMORY: %s of its %s limit in use%s%s. "
              "Use less memory, or raise the limit with `vgpu limit`.",
              vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev,
              vgpu_format_size(vgpu_region_mem_used(r, (unsigned)jdev), used, sizeof used),
              vgpu_format_size(vgpu_region_mem_limit(r, (unsigned)jdev), lim, sizeof lim), out, more);
}

/* How a reservation may be placed on an oversubscribed device (vgpu_region_reserve_split). */
enum placing { ON_DEVICE, SPILLABLE, PAGED };

static bool reserve(int dev, uint64_t bytes, const char *what, bool before_call, enum placing how, bool *spilled)
{
    int slot, jdev;
    bool sp = false;
    if (spilled)
        *spilled = false;
    struct vgpu_region *r = accountable(dev, &slot, &jdev);
    if (jdev == VGPU_NOT_JOB_DEV && bytes)
        return false;                   /* not the job's GPU: said once by vgpu_job_dev */
    if (!r && bytes && vgpu_job_refused())
        return false;                   /* VGPU_FAIL_CLOSED: no job region, no memory */
    if (!r || bytes == 0)
        return true;
    (void)vgpu_region_reap_maybe(r);
    /* Only before a real call: after one, NVML already shows memory not yet charged. */
    if (before_call)
        vgpu_nvml_reconcile_maybe(dev);
    bool paged = how == PAGED && vgpu_region_oversub(r, (unsigned)jdev, NULL);
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc;
        if (paged) {
            /* Managed memory the program asked for: pageable by nature, so it counts against
             * the cap and off the device share (when this process may spill here). */
            rc = vgpu_region_reserve(r, slot, (unsigned)jdev, bytes);
            if (rc == 0)
                sp = vgpu_region_mark_spilled(r, slot, (unsigned)jdev, bytes);
        } else {
            rc = vgpu_region_reserve_split(r, slot, (unsigned)jdev, bytes, how == SPILLABLE, &sp);
        }
        if (rc == 0) {
            if (spilled)
                *spilled = sp;
            return true;
        }
        if (errno == EINVAL)
            return true;                /* not ours to account (bad index): never fail the call */
        if (attempt)
            break;
        /* Before refusing: charges that may be stale (pools shrink at synchronize, graph memory
         * is trimmed, processes die) are re-measured, then one more try. */
        vgpu_pool_reconcile_all();
        vgpu_graphmem_reconcile(dev);
        vgpu_nvml_outside_refresh(dev);
        (void)vgpu_region_reap(r);
    }
    report_oom(r, dev, jdev, bytes, what);
    return false;
}

bool vgpu_acct_reserve(int dev, uint64_t bytes, const char *what)
{
    return reserve(dev, bytes, what, true, ON_DEVICE, NULL);
}

bool vgpu_acct_reserve_measured(int dev, uint64_t bytes, const char *what)
{
    return reserve(dev, bytes, what, false, ON_DEVICE, NULL);
}

bool vgpu_acct_reserve_spillable(int dev, uint64_t bytes, const char *what, bool *spill)
{
    return reserve(dev, bytes, what, true, SPILLABLE, spill);
}

bool vgpu_acct_reserve_paged(int dev, uint64_t bytes, const char *what, bool *spilled)
{
    return reserve(dev, bytes, what, true, PAGED, spilled);
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

void vgpu_acct_view_job(int jdev, uint64_t real_free, uint64_t real_total, uint64_t *free_out, uint64_t *total_out,
                        uint64_t *used_out)
{
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
    if (fr > real_free && !virt)
        fr = real_free;                 /* the device itself has less: never promise more */
    *free_out = fr;
    *total_out = total;
    *used_out = total - fr;
}
