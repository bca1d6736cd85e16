/* Placement of jobs by memory (vgpu run --mem without --gpu): which GPU or MIG instance has
 * room for the memory a job asks, counting what is already promised to running jobs; with
 * --gpus N, which N of them together (all or nothing), nearest to each other first.
 *
 * The ledger of promises and the --wait queue (lib/core/place/ledger.h) is kept by the arbiter
 * (vgpu daemon) for every user when one answers, or in the caller's state directory when none
 * does: place.lock (flock, taken around every decision), promises/PID.START (one file per running
 * `vgpu run`: "UUID BYTES" lines) and queue/TICKET.PID.START for --wait, served in ticket order.
 * Either way what a `vgpu run` holds ends with it: the daemon drops a connection's entries when
 * it closes, and entries of dead processes in the directory are dropped by whoever looks next. */
#ifndef VGPU_PLACEMENT_H
#define VGPU_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

struct vgpu_gpu_list;
struct vgpu_topology;

enum vgpu_place_policy {
    VGPU_PLACE_BINPACK = 0,   /* the fullest GPU that fits */
    VGPU_PLACE_SPREAD = 1,    /* the emptiest GPU */
};

/* "binpack" / "spread"; -1 for anything else. */
int vgpu_place_policy_parse(const char *s);

struct vgpu_place_cand {
    uint64_t total;           /* bytes the GPU (or MIG instance) has */
    uint64_t promised;        /* bytes promised to running jobs */
    unsigned model;           /* equal for GPUs of one model (vgpu_place_choose_group) */
};

/* Pure: the candidate for `want` bytes, or -1 when none fits (with overcommit: among those whose
 * total is at least `want`, the one with the most room left; -1 when none is that large). Ties
 * go to the lower position. */
int vgpu_place_choose(const struct vgpu_place_cand *c, unsigned n, uint64_t want, enum vgpu_place_policy pol,
                      bool overcommit);

#define VGPU_PLACE_MAX_CANDS 64   /* = VGPU_MAX_GPUS */

/* Pure: `count` candidates that each have room for `want` bytes, chosen together: first a
 * group of one model (c[].model) over a mixed one, whose fast GPUs would wait for the slow one
 * at every step of the job; then the group whose farthest two members are nearest (near[i * n + j], enum vgpu_near, lower is
 * nearer; NULL: all equal), then by policy (binpack: the least room left in all, spread: the
 * most), then the lowest positions. With overcommit, when too few fit, among those whose total
 * is at least `want`, the most room left. Fills pick[0..count-1] in ascending order and returns
 * the group's farthest closeness (0 when count is 1), or -1 when no group exists. */
int vgpu_place_choose_group(const struct vgpu_place_cand *c, unsigned n, uint64_t want, enum vgpu_place_policy pol,
                            bool overcommit, unsigned count, const uint8_t *near, unsigned *pick);

struct vgpu_place_req {
    uint64_t want;            /* bytes (on each GPU) */
    unsigned count;           /* GPUs the job needs together (0: one) */
    const struct vgpu_topology *topo;   /* how close they are (NULL: not known) */
    enum vgpu_place_policy policy;
    bool overcommit;
    bool wait;                /* queue until one fits */
    bool quiet;               /* no queue-position messages */
};

/* Chooses a GPU (req->count GPUs: all or nothing) among the default selection of list (whole
 * GPUs, and the MIG devices of GPUs in MIG mode) and records the promise for this process.
 * pos[] gets the chosen list positions (req->count of them, ascending). Without wait, when none
 * fits: -1 with e (VGPU_EXIT_NO_CAPACITY) listing what each GPU has left. 0 on success. */
int vgpu_place(const char *statedir, const struct vgpu_gpu_list *list, const struct vgpu_place_req *req,
               unsigned *pos, struct vgpu_err *e);

/* The machine's GPUs as the arbiter (vgpu daemon) listed them, when one answers: a placement
 * then needs no NVML of its own (its initialisation and first attach: ~20 ms of every job's start
 * on an H200). 1 with *out filled; 0 when no daemon answers, or it is a vgpu without the request,
 * or it cannot list them (the caller asks NVML, which then says why); -1 never. */
int vgpu_place_gpus_from_arbiter(struct vgpu_gpu_list *out);

/* Records promises for GPUs chosen by the user (--gpu): bytes[i] on list positions pos[i].
 * Refused (VGPU_EXIT_NO_CAPACITY) when one would exceed its GPU, unless overcommit. */
int vgpu_place_reserve(const char *statedir, const struct vgpu_gpu_list *list, const unsigned *pos,
                       const uint64_t *bytes, unsigned n, bool overcommit, struct vgpu_err *e);

/* Takes over the promises of process `from` (alive: the parent of a `vgpu run --detach`
 * supervisor), so that they last as long as the calling process instead. 0, or -1 with e set
 * (VGPU_EXIT_STATE; e.g. `from` has none, or died and lost them). */
int vgpu_place_adopt(const char *statedir, pid_t from, struct vgpu_err *e);

/* While the job runs (every walk of vgpu run): a restarted arbiter learns this process's promises
 * again (it knew only those made since it started). */
void vgpu_place_keep(void);

/* Once the job's command runs: the promises recorded in the state directory last as long as it
 * does too, so a `vgpu run` killed with SIGKILL does not take them with it while its command
 * runs on (vgpu/holder.h). 0, or -1 (errno). */
int vgpu_place_hold(const char *statedir, pid_t command);

/* Drops this process's promises (the job ended). */
void vgpu_place_release(const char *statedir);

/* Bytes promised on the GPU with this UUID (live entries only). */
uint64_t vgpu_place_promised(const char *statedir, const char *uuid);

#endif
