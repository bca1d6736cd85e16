/* The accounting thread of vgpu daemon (acct_worker.c) and what the scheduling thread (acct.c)
 * hands it. Nothing here touches the schedules: what needs them (the charges, who may send
 * what) is settled before a request is queued. */
#ifndef VGPU_CMD_DAEMON_ACCT_WORKER_H
#define VGPU_CMD_DAEMON_ACCT_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu/acct.h"
#include "vgpu/arbiter.h"

#define ARB_ACCT_QUEUE       64   /* requests waiting in all */
#define ARB_ACCT_ROOT_ROOM   16   /* of them, kept for root's */
#define ARB_ACCT_USER_QUEUED 4    /* a user's other than root's waiting at once */

struct arb_acct_work {
    int fd;                        /* a dup of the client's connection: the answer goes there */
    uint64_t client;               /* the connection's id (arb_client.id) */
    uid_t uid;                     /* the caller's */
    uint32_t op;                   /* VGPU_ARB_ACCT_RECORD, _QUERY or _TOTALS */
    uint64_t count;                /* RECORD: records in `buf`; TOTALS: totals to skip */
    uint32_t len;                  /* bytes in buf: packed records (checked, fixed), or a wire filter */
    _Alignas(8) char buf[VGPU_ARB_MAX_PAYLOAD];   /* records are read in place: aligned as theirs */
};

/* Starts the thread that owns the database at `path` (absolute). -1 with errno when it cannot. */
int arb_acct_worker_start(const char *path);
/* A free work item for a request of `uid` (NULL: the queue is full for it: refuse with EBUSY). */
struct arb_acct_work *arb_acct_worker_take(uid_t uid);
/* Queues a filled item (its fd is the worker's to close from now on). */
void arb_acct_worker_queue(struct arb_acct_work *w);
/* Gives back an item that was taken but is not queued. */
void arb_acct_worker_drop(struct arb_acct_work *w);
/* Requests of connection `client` still waiting: queries are dropped (nobody reads the answer);
 * records are still stored. */
void arb_acct_worker_client_gone(uint64_t client);
/* Ids (with their user) the thread stored since the last call, for the charges to be forgotten:
 * up to `cap` of them; how many. */
unsigned arb_acct_worker_stored(char (*ids)[VGPU_JOB_ID_LEN], uid_t *uids, unsigned cap);

#endif
