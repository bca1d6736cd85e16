/* The placement ledger (vgpu/placement.h): the memory promised to running jobs on each GPU and
 * the --wait queue, kept by the arbiter (vgpu daemon) for every user when one answers, or in the
 * caller's own state directory when none does (then placement sees only the caller's jobs:
 * DESIGN.md decision 10, no directory that every user writes). placement.c decides; this is
 * where the decision is recorded. */
#ifndef VGPU_PLACE_LEDGER_H
#define VGPU_PLACE_LEDGER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

struct ledger {
    bool arb;                       /* kept by the daemon */
    uint64_t version;               /* the daemon's ledger as the last look saw it */
    int dir, promises, queue, lock; /* in the state directory (flock'd while open) */
};

/* Opens the ledger: the daemon's when one answers, else the one in statedir, locked. 0, or -1
 * with e set. */
int ledger_open(const char *statedir, struct ledger *l, struct vgpu_err *e);
void ledger_close(struct ledger *l);

/* out[i] = bytes promised on uuids[i] (whose memory is totals[i]; NULL: not known); *ahead =
 * live queue entries of the caller's user ahead of `ticket` (of all, when ticket is 0): another
 * user's waiter never holds back ours (cmd/daemon/place.c says why). 0, or -1 with e. */
int ledger_look(struct ledger *l, const char *const *uuids, const uint64_t *totals, unsigned n,
                unsigned long long ticket, uint64_t *out, unsigned *ahead, struct vgpu_err *e);
/* Records this process's promise of bytes[i] on uuids[i] (added to one it has). 0; 1 when the
 * daemon's ledger changed since the look (look and decide again); -1 with e set. */
int ledger_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n, struct vgpu_err *e);
/* A place in the --wait queue for this process, waiting for `count` GPUs with `want` bytes each
 * (0: none could be taken). */
unsigned long long ledger_take_ticket(struct ledger *l, uint64_t want, unsigned count);
/* Leaves the queue (l open, or NULL: opened for the purpose). */
void ledger_leave_queue(const char *statedir, struct ledger *l, unsigned long long ticket);

/* Drops this process's promises. */
void ledger_release(const char *statedir);
/* Takes over the promises (and place in the job count) of process `from`, our parent. */
int ledger_adopt(const char *statedir, pid_t from, struct vgpu_err *e);

/* The same, in the state directory (ledger_dir.c) and through the daemon (ledger_arb.c). */
int ledger_dir_open(const char *statedir, struct ledger *l, struct vgpu_err *e);
void ledger_dir_close(struct ledger *l);
int ledger_dir_look(struct ledger *l, const char *const *uuids, unsigned n, unsigned long long ticket, uint64_t *out,
                    unsigned *ahead);
int ledger_dir_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n,
                       struct vgpu_err *e);
unsigned long long ledger_dir_take_ticket(struct ledger *l);
void ledger_dir_leave_queue(struct ledger *l, unsigned long long ticket);
void ledger_dir_release(const char *statedir);
int ledger_dir_adopt(const char *statedir, pid_t from, struct vgpu_err *e);
/* The job's command holds this process's promise too (vgpu/holder.h). 0, or -1 (errno). */
int ledger_dir_hold(const char *statedir, pid_t command);

int ledger_arb_look(struct ledger *l, const char *const *uuids, const uint64_t *totals, unsigned n,
                    unsigned long long ticket, uint64_t *out, unsigned *ahead, struct vgpu_err *e);
int ledger_arb_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n,
                       struct vgpu_err *e);
unsigned long long ledger_arb_take_ticket(uint64_t want, unsigned count);
void ledger_arb_leave_queue(void);
void ledger_arb_release(void);
/* Promises again what this process holds when the daemon it was promised to is gone and another
 * answers (a restart): called every walk of a running job's `vgpu run`. */
void ledger_arb_keep(void);
int ledger_arb_adopt(pid_t from, struct vgpu_err *e);

#endif
