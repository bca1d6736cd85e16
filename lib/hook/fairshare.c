/* fairshare.c: the fair share of a spilling job (issue 15; see fairshare.h). Moved out of
 * limiter.c when it passed 800 lines.
 *
 * A job with --oversubscribe and no --core of its own is held, while it has memory spilled off a
 * GPU that other processes keep busy, to an equal share of that GPU's time: 100 / (1 + the busy
 * processes outside the job), a hard cap. Its kernels wait for page faults inside its own time
 * slices, so time-slicing alone let it take more than its turn: on an H200 a job beside two
 * spilling jobs kept 86 % of the throughput it had beside jobs that fit, and ran faster than
 * that with --core 33 on each of them. The leases charge the stalled kernels as GPU time. The
 * count comes from NVML's per-process utilisation, at most once a second per device. */
#include "fairshare.h"

#include <stdatomic.h>

#include "hook.h"
#include "vgpu/sched.h"

#define MAX_DEV VGPU_REGION_MAX_DEVICES
#define FAIR_REFRESH_NS 1000000000ULL
static struct {
    _Atomic uint64_t at;   /* last count (0: never) */
    _Atomic unsigned cap;  /* the cap then, 0: none (nobody else busy, or NVML cannot tell) */
    _Atomic(struct vgpu_sched *) sched;  /* the GPU's schedule once joined (setup), for the marks */
    _Atomic int job;       /* our job's entry there */
} fair[MAX_DEV];

/* vgpu_fair_cap runs at every launch of an oversubscribed job that is not held: a thread reads the
 * clock (to see whether the count is due) at one call in FAIR_LOOK_EVERY only. */
#define FAIR_LOOK_EVERY 64
static __thread __attribute__((tls_model("initial-exec"))) unsigned t_fair_calls[MAX_DEV];

unsigned vgpu_fair_cap(const struct vgpu_region *r, int dev)
{
    if (!vgpu_region_oversub(r, (unsigned)dev, NULL))
        return 0;
    bool spilling = vgpu_region_mem_spilled(r, (unsigned)dev) != 0;
    uint64_t now = 0, at = atomic_load(&fair[dev].at);
    if (t_fair_calls[dev]++ % FAIR_LOOK_EVERY == 0)
        now = vgpu_now_ns();
    if (now && (at == 0 || now - at >= FAIR_REFRESH_NS) && atomic_compare_exchange_strong(&fair[dev].at, &at, now)) {
        unsigned cap = 0;
        struct vgpu_sched *s = atomic_load(&fair[dev].sched);
        if (s)
            vgpu_sched_set_spilling(s, atomic_load(&fair[dev].job), spilling);
        unsigned pids[64];
        int others = spilling ? vgpu_nvml_busy_others(dev, pids, 64) : 0;
        /* Held only while someone busy beside it does not spill; then to an equal share among
         * all of them. Spilling jobs beside each other only time-slice freely: taking turns
         * would lose the overlap of one's page faults with the other's work. */
        int plain = 0;
        for (int i = 0; i < others; i++)
            plain += !(s && vgpu_sched_pid_spilling(s, (pid_t)pids[i]));
        if (others > 0 && plain > 0)
            cap = 100u / (unsigned)(others + 1);
        atomic_store(&fair[dev].cap, cap);
    }
    return spilling ? atomic_load(&fair[dev].cap) : 0;
}

void vgpu_fair_join(int dev, struct vgpu_sched *s, int job)
{
    atomic_store(&fair[dev].job, job);
    atomic_store(&fair[dev].sched, s);
}
