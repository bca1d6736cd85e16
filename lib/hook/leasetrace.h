/* leasetrace.h: an optional record of the limiter's lease events, for measuring handovers on a
 * real GPU (issue 14: "measure the drain and the gap between one lease ending and the next job's
 * first kernel"). Off unless VGPU_LEASE_TRACE=DIR is set; then each process keeps its events in
 * memory (a fixed buffer; events past it are counted, not kept) and writes DIR/lease.PID at
 * exit, one "EVENT DEV T_NS [ARG]" line each, CLOCK_MONOTONIC (one clock for all processes).
 * tests/gpu/handover.py merges the files of a run. Only the limiter's slow path records: the
 * launch fast path never looks at it. */
#ifndef VGPU_HOOK_LEASETRACE_H
#define VGPU_HOOK_LEASETRACE_H

#include <stdint.h>

enum vgpu_lt_event {
    VGPU_LT_WANT,      /* a launch found no lease and began to wait */
    VGPU_LT_GRANT,     /* we took the lease (ARG: its length in ns) */
    VGPU_LT_END,       /* the lease is to end (deadline, preempted or yielded): draining starts */
    VGPU_LT_RELEASE,   /* drained and passed on (ARG: the GPU time charged) */
    VGPU_LT_PREEMPTED, /* drained after a preemptor took the lease */
    VGPU_LT_FENCE,     /* a launch waited for a pacing fence (ARG: how long) */
    VGPU_LT_IDLE,      /* the helper saw the lease idle (ARG 1), or busy again after that (ARG 0) */
    VGPU_LT_CLEAR,     /* gave the lease back to keep clear of a job due back (ARG: for how long) */
};

void vgpu_lt_record(enum vgpu_lt_event ev, int dev, uint64_t t, uint64_t arg);

#endif
