/* The arbiter's server side (vgpu daemon; the protocol is vgpu/arbiter.h): the schedules it
 * owns (one memfd per GPU), its clients, and what each request may do. */
#ifndef VGPU_CMD_DAEMON_ARBITER_H
#define VGPU_CMD_DAEMON_ARBITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu/arbiter.h"
#include "vgpu/sched.h"

/* One GPU's schedule, and who holds what in it. */
struct arb_gpu {
    char uuid[96];
    struct vgpu_sched s;                       /* writable: only the daemon maps it so */
    int ro_fd;                                 /* read-only descriptor handed to clients */
    uid_t job_uid[VGPU_SCHED_MAX_JOBS];        /* the user whose job each entry is */
    uint64_t proc_client[VGPU_SCHED_MAX_PROCS]; /* the client that attached each entry (0: none) */
    uid_t proc_uid[VGPU_SCHED_MAX_PROCS];
    uint64_t grant_at[VGPU_SCHED_MAX_PROCS];   /* the entry's current lease: when granted, and */
    bool grant_preempted[VGPU_SCHED_MAX_PROCS]; /* whether it preempted a holder still draining */
    uint64_t drained_at;                       /* when a preempted holder last finished draining */
    uint16_t charged_slot[VGPU_SCHED_MAX_JOBS]; /* each entry's slot in the charged table + 1 (charged.c) */
};

struct arb_client {
    int fd;                                    /* -1: free */
    uint64_t id;                               /* unique for the daemon's life */
    pid_t pid;                                 /* SO_PEERCRED, as the daemon sees it */
    uid_t uid;
    bool opened[VGPU_ARB_MAX_GPUS];
};

struct arb_place;   /* placement and the job count: cmd/daemon/place.c */
struct arb_acct;    /* accounting: cmd/daemon/acct.c */
struct arb_charged; /* what the schedules charged each job: cmd/daemon/charged.c */

struct arbiter {
    struct arb_gpu *gpus[VGPU_ARB_MAX_GPUS];
    struct arb_place *place;
    struct arb_acct *acct;
    struct arb_charged *charged;
    const struct arb_client *clients;          /* the connections now: clients[0 .. *nclients) */
    const unsigned *nclients;
    unsigned ngpus;
    uint64_t next_client_id;
    uint64_t requests, refused;                /* statistics, printed at exit */
};

/* Handles one request of client `c` (its payload: q->len bytes at `in`); fills the reply, and
 * its payload at `out` (VGPU_ARB_MAX_PAYLOAD bytes of room; r->len says how many). *send_fd: a
 * descriptor to pass along with it (OPEN), or -1. `passed_fd`: one the client sent (JOB's limits
 * file), or -1 (closed here). Returns false for a request that gets no reply. */
bool arb_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in, int passed_fd,
                struct vgpu_arb_rep *r, void *out, int *send_fd);
/* The same for the ranges of vgpu/arbiter.h: placement (place.c) and accounting (acct.c). */
void arb_place_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out);
void arb_acct_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out);
/* Fills a refusal: rc = -err, msg = why. */
int arb_refuse(struct arbiter *a, struct vgpu_arb_rep *r, int err, const char *why);
/* Client `c` is gone: every process entry it attached is detached (a lease it held given back). */
void arb_client_gone(struct arbiter *a, struct arb_client *c);
/* The same for what it held in placement and accounting. */
void arb_place_client_gone(struct arbiter *a, struct arb_client *c);
void arb_acct_client_gone(struct arbiter *a, struct arb_client *c);
/* The schedule entry's key of a job of user `uid` whose own key (its processes') is `key`: two
 * users' jobs never share an entry, whatever keys they send. */
uint64_t arb_user_key(uint64_t key, uid_t uid);
/* A job's own key, as its processes compute it from its id (lib/hook/limiter.c, job_key). */
uint64_t arb_job_key(const char *id, size_t len);
/* What the schedules charged (charged.c): `ns` more charged to job entry `job` of GPU `gpu`, for
 * a lease its process said used `reported`; the sums of both for the job whose entry key is `key`
 * on GPU `gpu` (false: nothing kept); and those sums forgotten (the job's record is stored). */
void arb_charged_add(struct arbiter *a, unsigned gpu, unsigned job, uint64_t ns, uint64_t reported);
bool arb_charged_get(struct arbiter *a, unsigned gpu, uint64_t key, uint64_t *ns, uint64_t *reported);
void arb_charged_forget(struct arbiter *a, unsigned gpu, uint64_t key);
/* The accounting database's path (absolute; NULL: VGPU_ACCT_DAEMON_DB), before serving. -1: not
 * absolute, or too long. */
int arb_acct_configure(struct arbiter *a, const char *path);

#endif
