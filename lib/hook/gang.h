/* gang.h: the turns of a job of several GPUs end where all its GPUs' launches agree (gang.c). */
#ifndef VGPU_HOOK_GANG_H
#define VGPU_HOOK_GANG_H

#include <stdbool.h>
#include <stdint.h>

#include "vgpu/region.h"

/* Longest a lease of a job of several GPUs is held past its deadline while that device is behind
 * the job's others: under the schedule's grace (VGPU_SCHED_GRACE_NS), past which others revoke
 * it. */
#define VGPU_GANG_CATCH_UP_NS 10000000ULL

/* Counts a launch of the job on job device dev (a job of several GPUs only). */
void vgpu_gang_launched(int dev);
/* Whether a lease on dev whose deadline passed may still be held (now < deadline + the catch-up
 * bound, and another device of the job has had launches that dev has not). deadline 0: lost. */
bool vgpu_gang_hold(int dev, uint64_t deadline, uint64_t now);

/* Whether a launch on dev must wait (holding its lease): it would put dev ahead of another device
 * of the job that waits for its turn, whose rank could not launch its part of a collective until
 * then. */
bool vgpu_gang_ahead_of_waiter(int dev, const uint16_t seen[VGPU_REGION_MAX_DEVICES]);
/* The job's launch counts now (at a grant: what ahead_of_waiter compares against). */
void vgpu_gang_snapshot(uint16_t seen[VGPU_REGION_MAX_DEVICES]);
/* Marks dev as holding a live lease, or waiting for a turn (bits in the job's usage region). */
void vgpu_gang_mark(int dev, bool live, bool want);

#endif
