/* gang.c: a job of several GPUs (DESIGN.md decision 11) ends each turn on a device only once that
 * device has had the launches its other devices had.
 *
 * Why: the ranks of a collective job (NCCL) each launch one kernel of every collective, and a
 * rank's kernel spins until its peers' have started. Each GPU's turns end at their own deadline,
 * so a turn can end between two ranks' launches of one collective: the rank that launched drains
 * its lease (it waits for its queued work), which waits for the collective, which waits for the
 * other rank's launch, which waits for that rank's next turn, up to a period away; the drain is
 * charged as an overrun and the debt makes the ranks miss further turns together. On 2 x H200 a
 * --core 50 NCCL job kept 4 % of its rate (tests/gpu/RESULTS-multi.md); on the simulated GPU,
 * once the two GPUs' kernels do not take exactly the same time (collective -j), 13 %.
 *
 * So the job counts its launches on each device, in the job's usage region, which all its
 * processes map (gang_launches, mod 2^16), and marks which devices hold a live lease and which
 * wait for their turn (gang_live, gang_want). Two rules make the job's turns on its GPUs open and
 * close together, without the daemon and without changing any GPU's schedule:
 *  - ahead: a launch that would put its device ahead of (or level with and then past) another
 *    device of the job that is out of its turn (waiting for it, or it launched during our turn and
 *    is between a synchronize and its next launch) waits, holding the lease, until that device's
 *    turn comes or ours ends. A turn therefore opens for the job when its last device gets one
 *    (the early ones pay the wait, so their next turns come later: the GPUs fall into step), and
 *    closes for all when the first one's deadline passes;
 *  - behind: a device whose lease reached its deadline while another device of the job has had
 *    more launches keeps the lease, and its launches pass, until it has caught up or
 *    VGPU_GANG_CATCH_UP_NS has passed: its launches are exactly those its peers' collectives
 *    wait for (the ranks of one data-parallel step launch the same sequence).
 * Everything held is charged like any lease (the drain measures it) and paid back by the next
 * turns, so the cap holds on every GPU. A device the job does not use (no launch since our turn
 * began, not waiting) holds nobody back. A job whose devices launch different amounts (pipeline
 * stages) holds each turn of the device behind up to the bound: charged, never more than that
 * late. Measured (tests/cli/multi_gpu.sh, collective -s 1 -j 200): 2 ranks at --core 50 kept 13 %
 * of their rate before, 49 % with these rules; --core 90 89 %; 4 ranks 49 %.
 *
 * Both rules look only at devices that other processes of the job drive. A thread that drives
 * several GPUs itself (one PyTorch process round robin) cannot be ahead of its own next launch:
 * held at one GPU for a device that waits for the same thread, it lost its turns there (2 x H200,
 * round robin at --core 50: 42 % of bare with the rules on its own devices, 50 % without them). */
#include <stdatomic.h>

#include "gang.h"
#include "hook.h"
#include "vgpu/region.h"

static _Atomic uint32_t own_devs;   /* the job devices this process launched on */

void vgpu_gang_launched(int dev)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || !r->use || (unsigned)dev >= VGPU_REGION_MAX_DEVICES)
        return;
    atomic_fetch_add_explicit(&r->use->gang_launches[dev], 1, memory_order_relaxed);
    if (!(atomic_load_explicit(&own_devs, memory_order_relaxed) >> dev & 1))
        atomic_fetch_or_explicit(&own_devs, 1u << dev, memory_order_relaxed);
}

/* Whether device k is another process's to drive (not `dev`, and not one this process launched on). */
static bool others(unsigned k, int dev)
{
    return (int)k != dev && !(atomic_load_explicit(&own_devs, memory_order_relaxed) >> k & 1);
}

static bool behind(const struct vgpu_region *r, int dev)
{
    unsigned n = vgpu_region_device_count(r);
    uint16_t mine = atomic_load_explicit(&r->use->gang_launches[dev], memory_order_relaxed);
    for (unsigned k = 0; k < n && k < VGPU_REGION_MAX_DEVICES; k++) {
        uint16_t other = atomic_load_explicit(&r->use->gang_launches[k], memory_order_relaxed);
        if (others(k, dev) && (int16_t)(uint16_t)(other - mine) > 0)
            return true;
    }
    return false;
}

bool vgpu_gang_hold(int dev, uint64_t deadline, uint64_t now)
{
    struct vgpu_region *r = vgpu_job();
    if (!deadline || now >= deadline + VGPU_GANG_CATCH_UP_NS || !r || !r->use ||
        (unsigned)dev >= VGPU_REGION_MAX_DEVICES || vgpu_region_device_count(r) < 2)
        return false;
    return behind(r, dev);
}

static void set_bit(_Atomic uint32_t *w, int dev, bool on)
{
    uint32_t b = 1u << dev;
    if (!!(atomic_load_explicit(w, memory_order_relaxed) & b) == on)
        return;
    if (on)
        atomic_fetch_or(w, b);
    else
        atomic_fetch_and(w, ~b);
}

void vgpu_gang_mark(int dev, bool live, bool want)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || !r->use || (unsigned)dev >= VGPU_REGION_MAX_DEVICES || vgpu_region_device_count(r) < 2)
        return;
    set_bit(&r->use->gang_live, dev, live);
    set_bit(&r->use->gang_want, dev, want);
}

void vgpu_gang_snapshot(uint16_t seen[VGPU_REGION_MAX_DEVICES])
{
    struct vgpu_region *r = vgpu_job();
    for (unsigned k = 0; k < VGPU_REGION_MAX_DEVICES; k++)
        seen[k] = r && r->use ? atomic_load_explicit(&r->use->gang_launches[k], memory_order_relaxed) : 0;
}

bool vgpu_gang_ahead_of_waiter(int dev, const uint16_t seen[VGPU_REGION_MAX_DEVICES])
{
    struct vgpu_region *r = vgpu_job();
    if (!r || !r->use || (unsigned)dev >= VGPU_REGION_MAX_DEVICES)
        return false;
    unsigned n = vgpu_region_device_count(r);
    uint32_t live = atomic_load(&r->use->gang_live), want = atomic_load(&r->use->gang_want);
    uint16_t mine = atomic_load_explicit(&r->use->gang_launches[dev], memory_order_relaxed);
    for (unsigned k = 0; k < n && k < VGPU_REGION_MAX_DEVICES; k++) {
        if (!others(k, dev) || (live >> k & 1))
            continue;
        uint16_t other = atomic_load_explicit(&r->use->gang_launches[k], memory_order_relaxed);
        /* Out of its turn, and taking part: waiting for its turn, or it launched during ours
         * (between a synchronize and its next launch). A device that did neither since our
         * turn began is not used by the job now: it holds nobody back. */
        if ((int16_t)(uint16_t)(other - mine) <= 0 && ((want >> k & 1) || other != seen[k]))
            return true;
    }
    return false;
}
