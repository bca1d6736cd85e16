/* Lent memory (vgpu run --mem REQUEST:LIMIT, issue 37): what a borrower may be shown as free.
 * Pure arithmetic and one read-only look at the other jobs' regions; libc only (libvgpu.so). */
#ifndef VGPU_LEND_H
#define VGPU_LEND_H

#include <stdbool.h>
#include <stdint.h>
#include "vgpu/region.h"

/* Free memory in a borrower's view (cuMemGetInfo, NVML): what it could get now.
 *   min(LIMIT - used, max(REQUEST - used, 0) + what the device has free beyond every unmet request)
 * where the job's own unmet request (REQUEST - used) is part of device_free already and is not
 * counted twice: free = min(limit - used, max(request - used, device_free - others_unmet)), each
 * difference saturating at 0. `others_unmet` is the sum of max(REQUEST - used, 0) over the other
 * jobs on the device. Never more than limit - used; never less than the unmet request. */
uint64_t vgpu_lend_free(uint64_t limit, uint64_t request, uint64_t used, uint64_t device_free, uint64_t others_unmet);

/* Free memory in the view of a job that borrows nothing, beside borrowers: what the device has
 * free plus what the other jobs borrow there (managed pages the driver evicts for an ordinary
 * allocation, decision 13's safety net), never more than limit - used. */
uint64_t vgpu_lend_owner_free(uint64_t limit, uint64_t used, uint64_t device_free, uint64_t others_borrowed);

/* The other jobs on the GPU of self's job device `dev` (matched by UUID): each other running job
 * in self's jobs directory (the same user's, as the rest of the schedule without the arbiter) with
 * a memory limit on that GPU adds max(REQUEST - held, 0) to unmet and max(held - REQUEST, 0) to
 * borrowed (held: its used + outside bytes). Read with pread, never mapped (a file truncated
 * meanwhile cannot fault the caller); a file that cannot be read or is not a region is skipped.
 * Zeros for a job without UUIDs (HAMi variables). */
struct vgpu_lend_others {
    uint64_t unmet, borrowed;
    /* Filled by vgpu_lend_look only (0 otherwise): */
    uint64_t ahead;     /* what the borrowers that give way before self borrow (vgpu_lend_gives_first) */
    uint64_t demoted;   /* what the other borrowers demoted, not counting any whose move is in flight */
    bool moving;        /* a move of another borrower's memory is in flight */
};
void vgpu_lend_others(const struct vgpu_region *self, unsigned dev, struct vgpu_lend_others *out);

/* The order in which borrowers give way (decision 13, issue 37 item 4): the lower priority first;
 * at one priority the one that borrows more (it holds the most of what nobody promised it); then
 * the job id, so that every borrower's look agrees on one order. */
struct vgpu_lend_key {
    int prio;           /* the job's --priority on that GPU (region dev[].priority: < 0 low) */
    uint64_t borrowed;  /* vgpu_region_mem_borrowed: what it holds past its REQUEST, demoted included */
    const char *id;
};
bool vgpu_lend_gives_first(const struct vgpu_lend_key *a, const struct vgpu_lend_key *b);

/* vgpu_lend_others for a borrower `me`, with ahead, demoted and moving. */
void vgpu_lend_look(const struct vgpu_region *self, unsigned dev, const struct vgpu_lend_key *me,
                    struct vgpu_lend_others *out);

/* What one borrower should have demoted on a GPU: the room the borrowers together owe the unmet
 * requests (unmet less what the device would have free with nothing demoted: device_free less
 * `demoted`, every borrower's demoted memory that has left the GPU), less what the borrowers ahead
 * of it in the order borrow, between 0 and `mine` (what it borrows). Each borrower's look
 * computes its own part of one sum, so two borrowers never both give way for the same bytes, and
 * a borrower behind gives nothing while those ahead can cover the need. `demoted` leaving out a
 * move in flight only makes the sum smaller: a borrower may give later, never twice. */
uint64_t vgpu_lend_target(uint64_t unmet, uint64_t device_free, uint64_t demoted, uint64_t ahead, uint64_t mine);
/* The same, and the jobs that borrow there named in names[len] ("NAME (ID)", or the ID of a job
 * without a name, ", " between, "..." when they do not fit): for the message of an allocation
 * that borrowers' memory kept off the GPU (lib/hook/giveway.c). */
void vgpu_lend_borrowers(const struct vgpu_region *self, unsigned dev, struct vgpu_lend_others *out, char *names,
                         size_t len);

/* ---- Across users: the arbiter's part (issue 37 item 4) ----------------------------------------
 * A job's regions are its user's, so without the arbiter a borrower sees only its own user's jobs.
 * With it, each job's vgpu run tells the arbiter, at every walk (250 ms), what the job holds on
 * each of its GPUs (VGPU_ARB_LEND_SHARE), and writes the answer, what the other users' jobs there
 * add to vgpu_lend_others, into "<id>.lend" beside its region, which the job's processes read
 * with their regions (vgpu_lend_look, vgpu_lend_others, vgpu_lend_borrowers). The arbiter trusts
 * a job's unmet request only up to the promise its connection holds on that GPU (placement), and
 * its priority only as root's policy grants it; what a job says it borrows can only put it ahead
 * in the order of giving way, and a borrower behind a liar gives all the same once the shortfall
 * lasts (lib/hook/squeeze.c, PATIENCE_NS). */
struct vgpu_lend_report {              /* in: one per GPU of the job */
    char uuid[VGPU_REGION_UUID_LEN];
    uint64_t request;                  /* REQUEST (the limit of a job that lends nothing) */
    uint64_t held;                     /* its memory there: used + outside */
    uint64_t borrowed, demoted;        /* past REQUEST, and of that what left the GPU */
    int32_t prio;                      /* the job's --priority there (region dev[].priority) */
    uint32_t moving;                   /* a move in flight: demoted may not have left yet */
};
struct vgpu_lend_remote {              /* out: one per GPU of the request, in its order */
    uint64_t unmet, borrowed;          /* the other users' jobs there, as vgpu_lend_others counts */
    uint64_t demoted, ahead;           /* as vgpu_lend_look counts them, by the job's own key */
    uint32_t moving, pad;
};
#define VGPU_LEND_FILE_MAGIC   0x444e454cu   /* "LEND" */
#define VGPU_LEND_FILE_VERSION 1u
#define VGPU_LEND_FRESH_NS     1000000000ULL /* an answer older than this is not used */
struct vgpu_lend_file {
    uint32_t magic, version;
    uint64_t at_ns;                    /* CLOCK_MONOTONIC of the answer */
    uint32_t count, pad;               /* job devices answered (dev[0 .. count)) */
    struct vgpu_lend_remote dev[VGPU_REGION_MAX_DEVICES];
};
/* When the arbiter's answer beside self's region was given (CLOCK_MONOTONIC), 0 when there is
 * none (no arbiter, or not yet). */
uint64_t vgpu_lend_answered_at(const struct vgpu_region *self);
/* vgpu run's walk: the job's figures to the arbiter, its answer into the job's .lend file. Nothing
 * without the arbiter, or for a job without a memory limit; a refused or lost answer removes the
 * file (the processes then see their own user's jobs only, as without the arbiter). */
void vgpu_lend_share(struct vgpu_region *r);
/* The job's .lend file removed (its end). */
void vgpu_lend_share_end(const struct vgpu_region *r);

#endif
