/* limiter_internal.h: what the parts of the compute limiter share (limiter.c: the gate, leases,
 * draining and pacing; limiter_keeper.c: the helper thread). Not an interface: see limiter.h. */
#ifndef VGPU_LIMITER_INTERNAL_H
#define VGPU_LIMITER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "vgpu_cuda.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"

#define MAX_DEV     VGPU_REGION_MAX_DEVICES
#define MAX_STREAMS 32

/* Pacing fences outstanding at most: two, and OVERLAP_FENCES more while a holder we preempted
 * drains (see pace). */
#define OVERLAP_FENCES 2
#define MAX_FENCES (2 + OVERLAP_FENCES)
/* Idle gaps remembered for the guess of our next return (expected_gap). */
#define GAPS 8

struct dstate {
    pthread_mutex_t mu;
    int ready;                   /* 0: not set up; 1: ok; -1: failed (launches pass) */
    struct vgpu_sched s;
    int job, proc;
    bool gang;                   /* a job of several GPUs: turns end where its devices agree (gang.c) */
    uint16_t gang_seen[MAX_DEV]; /* the job's launch counts when this lease was granted */
    uint32_t gang_outs;          /* the job's count of devices gone out of turn, at that grant */
    _Atomic uint64_t lease;      /* the lease word we hold, 0 when none */
    _Atomic uint64_t end;        /* its deadline */
    _Atomic uint64_t start;     /* when the lease was granted (read by the helper without d->mu) */
    _Atomic uint32_t touched;    /* a launch came since the helper last looked (idle detection) */
    _Atomic uint32_t inflight;   /* launches passed under the lease and not yet back from the driver */
    _Atomic uint64_t idle_since; /* the helper first saw the lease idle (0: not idle) */
    /* The lease's own GPU work as the helper sees it (vgpu_sched_note_busy), under d->mu: */
    uint64_t busy_ns;            /* closed busy stretches since the grant */
    uint64_t busy_from;          /* start of the stretch going on (0: idle) */
    _Atomic bool in_overlap;     /* a holder we preempted still drains (as last seen) */
    uint64_t busy_in_ov;         /* busy time until that drain ended, once seen to end */
    uint64_t bypass_until;       /* the schedule looked damaged: launch unscheduled until then */
    bool warned_stall;
    bool warned_lost;            /* said that the arbiter went away */
    bool full;                   /* the last join found the schedule full (its launches wait for room) */
    bool warned_full;            /* said so */
    uint64_t arb_look_at;        /* on our own user's schedule: look for the arbiter again then */
    CUcontext ctx;               /* the context current at the grant (for draining) */
    CUstream streams[MAX_STREAMS];
    unsigned nstreams;
    bool whole_ctx;              /* per-thread stream or too many streams: drain the context */
    /* pacing (see the top of this file) */
    _Atomic unsigned fence_every;  /* F: launches between fences */
    CUcontext fence_ctx;         /* the context the fence events belong to */
    CUevent fence[MAX_FENCES];   /* outstanding fences, fence[0] the oldest */
    bool fence_ovl[MAX_FENCES];  /* recorded while a holder we preempted drained */
    unsigned nfence;             /* fences recorded and not known to be done */
    bool done_ovl;               /* `done` was recorded during such an overlap */
    CUevent done;                /* the last fence found done (timing interval start) */
    unsigned max_fences;         /* outstanding fences allowed: 2, or 1 when one launch alone is
                                  * longer than two intervals' worth (long kernels) */
    bool have_done;              /* `done` was recorded in this lease and has completed */
    uint64_t interval_ns;        /* GPU time of the last interval measured while the GPU was behind */
    /* keeping clear (vgpu/sched.h): */
    uint64_t clear_until;        /* queue nothing before this: a job we keep clear of is due */
    uint64_t stall_gen;          /* background: the lease generation last seen while waiting (its
                                  * wait is bounded only while the lease stops moving) */
    uint64_t gone_idle_at;       /* our last lease was given back idle then (0: it was not) */
    uint64_t gaps[GAPS];         /* our recent idle gaps: from gone_idle_at to the next want */
    unsigned ngaps, gap_next;
    _Atomic bool service;        /* we publish expected returns: give the lease back once idle,
                                  * wanted or not, so that the time we went idle is seen */
};

/* Per job device: this process's part of the GPU's schedule (limiter.c sets them up). */
extern struct dstate vgpu_lim_devs[MAX_DEV];

/* Ends the lease d holds: waits for its work, charges it, passes it on (d->mu held). idle_at:
 * when it went idle, for a lease given back idle (0 otherwise). */
void vgpu_lim_drain_and_release(struct dstate *d, int dev, bool at_deadline, uint64_t idle_at);
/* Whether work launched under d's lease has not finished yet (d->mu held). */
bool vgpu_lim_work_in_flight(struct dstate *d);

/* The helper thread (limiter_keeper.c). init: once, before any lease; reset_child: in a forked
 * child, which has none; kick: starts it at the first lease, and wakes it when a lease changed;
 * started: whether it runs (without it, every launch checks the clock). */
void vgpu_lim_keeper_init(void);
void vgpu_lim_keeper_reset_child(void);
void vgpu_lim_kick_keeper(void);
bool vgpu_lim_keeper_started(void);

#endif
