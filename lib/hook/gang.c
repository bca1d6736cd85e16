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
 * One clock (the job's turns open and close together, on the job's own schedule or the daemon's):
 * a device of a capped job that is out of its turn and cannot take its next one yet (its credit, or
 * another job's lease: vgpu_sched_turn_at) publishes when it can, in the job's usage region
 * (gang_open). Every other device of the job then ends its lease at its next launch or within
 * GANG_POLL_NS (limiter_keeper.c), charged only what it used, unless it is behind (the rule above
 * keeps it until it has caught up, so its collectives are matched), and no device opens a turn
 * before that time (waiting without a lease: nothing charged; a period at most). Without it each
 * GPU kept the phase it started with: on 2 x H200 one PyTorch process round robin at --core 90 had
 * GPU 1's turns 14 ms behind GPU 0's for the whole run (PyTorch's first matmul there came late),
 * the thread was held on whichever GPU was between turns, and the job kept 82 % of its rate; the
 * simulated GPU the same with collective -m rr -w 14000 (80 %), 90 % with one clock. It also ends
 * the charged waits of the ahead rule: a rank that would run ahead of one out of its turn gives its
 * lease back instead of holding it. Outs shorter than VGPU_GANG_CLOSE_MIN_NS (a device a moment
 * late for a turn the others opened) end nobody's turn.
 *
 * The ahead and behind rules look only at devices that other processes of the job drive. A thread that drives
 * several GPUs itself (one PyTorch process round robin) cannot be ahead of its own next launch:
 * held at one GPU for a device that waits for the same thread, it lost its turns there (2 x H200,
 * round robin at --core 50: 42 % of bare with the rules on its own devices, 50 % without them). */
#include <stdatomic.h>

#include "gang.h"
#include "hook.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"

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

/* ---- one clock for the job's turns ------------------------------------------------------------- */

#define OPEN_US_MASK ((1ULL << 48) - 1)

void vgpu_gang_out_until(uint64_t at, uint64_t now)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || !r->use || vgpu_region_device_count(r) < 2 || at <= now + VGPU_GANG_CLOSE_MIN_NS)
        return;
    uint64_t at_us = (at / 1000) & OPEN_US_MASK;
    uint64_t w = atomic_load(&r->use->gang_open);
    for (;;) {
        uint64_t open_us = w & OPEN_US_MASK;
        /* Already out until then or later (another device, or ours at a retry): nothing new. A
         * value far ahead of any turn (damaged) is replaced. */
        if (open_us >= at_us && open_us <= (now + 2 * VGPU_SCHED_PERIOD_NS) / 1000)
            return;
        uint64_t next = ((w >> 48) + 1) << 48 | at_us;
        if (atomic_compare_exchange_weak(&r->use->gang_open, &w, next))
            return;
    }
}

uint64_t vgpu_gang_open_at(uint32_t *outs)
{
    struct vgpu_region *r = vgpu_job();
    uint64_t w = r && r->use ? atomic_load(&r->use->gang_open) : 0;
    if (outs)
        *outs = (uint32_t)(w >> 48);
    return (w & OPEN_US_MASK) * 1000;
}

bool vgpu_gang_should_close(int dev, uint32_t outs_at_grant, uint64_t now)
{
    uint32_t outs;
    uint64_t open = vgpu_gang_open_at(&outs);
    if (outs == outs_at_grant || open < now + VGPU_GANG_CLOSE_MIN_NS || open > now + 2 * VGPU_SCHED_PERIOD_NS)
        return false;
    struct vgpu_region *r = vgpu_job();
    return !(r && r->use && (unsigned)dev < VGPU_REGION_MAX_DEVICES && behind(r, dev));
}
