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

/* One clock for the job's turns. A device of the job whose next turn is `at` away (its credit,
 * or another job's lease, keeps it out: vgpu_sched_turn_at) says so; the job's other devices
 * then end their turns (vgpu_gang_should_close) and open their next ones not before `at`
 * (vgpu_gang_open_at). A device out for less than this does not end the others' turns: */
#define VGPU_GANG_CLOSE_MIN_NS 1000000ULL
void vgpu_gang_out_until(uint64_t at, uint64_t now);
/* When the job's devices may open their next turns (at or before now: at once), and the count of
 * outs so far (what a grant notes: only an out after it ends that turn). */
uint64_t vgpu_gang_open_at(uint32_t *outs);
/* Whether a live lease on dev, granted when the out count was `outs_at_grant`, should end now:
 * another device of the job went out since, for VGPU_GANG_CLOSE_MIN_NS or more, and dev is not
 * behind the job's others (it would leave them waiting in a collective). */
bool vgpu_gang_should_close(int dev, uint32_t outs_at_grant, uint64_t now);

#endif
