/* fairshare.h: the GPU time a spilling job may take (issue 15; libvgpu(7), "Oversubscription").
 * A job with --oversubscribe and no --core of its own is held, while it has memory spilled off a
 * GPU that other processes keep busy, to an equal share of that GPU's time. */
#ifndef VGPU_HOOK_FAIRSHARE_H
#define VGPU_HOOK_FAIRSHARE_H

#include "vgpu/region.h"
#include "vgpu/sched.h"

/* The hard cap (percent) that applies to the job on job device `dev` now, 0 for none. Called at
 * every launch of such a job that is not held: cheap (a thread-local count; the clock at one
 * call in 64; NVML at most once a second per device). */
unsigned vgpu_fair_cap(const struct vgpu_region *r, int dev);
/* The job joined the GPU's schedule s as entry `job`: it marks itself there while spilling. */
void vgpu_fair_join(int dev, struct vgpu_sched *s, int job);

#endif
