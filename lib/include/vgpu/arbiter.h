/* The arbiter (DESIGN.md decision 10, revised): `vgpu daemon`, run by root, alone writes what
 * other users' jobs act on. This header is the wire protocol between it and its clients (the
 * schedule code of libvgpu.so and of vgpu), and the client side's API.
 *
 * Why a daemon: a schedule every user may write lets any user write valid-looking values into it
 * (take the lease word for ever, zero others' entries, fill the tables, rewrite others' credit),
 * and validating what one reads cannot tell those from real ones. So the schedule of each GPU is a
 * memfd that only the daemon maps writable; each client gets a read-only descriptor of it over the
 * socket (SCM_RIGHTS), maps it, and reads the lease word and its deadline there at every launch, as
 * before. What a client would have written (asking for the lease, giving it back, its busy time,
 * when it expects to be back) it sends to the daemon instead, which performs the same operation of
 * vgpu/sched.h on its own mapping after checking that the entries named belong to that client (a
 * process entry it attached, a job of its user, a lease its process holds). Waiters still sleep on
 * futexes in the read-only mapping; the daemon's writes wake them, so a handover costs a message.
 *
 *   socket    <machine dir>/arbiter/sock: SOCK_SEQPACKET, one connection per client process.
 *             The arbiter/ directory is root's, mode 0755; the daemon evicts anything else found
 *             under that name (the machine dir is sticky and world-writable for the placement
 *             ledger, so a user could make it first). A client talks only to a daemon whose peer
 *             uid is 0 or its own (SO_PEERCRED).
 *   identity  SO_PEERCRED: the daemon attaches the connecting process itself (its pid as the
 *             daemon sees it, its start time read by the daemon), so a client cannot name another
 *             process. Job keys are mixed with the client's uid: two users' jobs never share an
 *             entry, whatever keys they send.
 *   ending    a closed connection detaches every process entry it attached, giving back a lease
 *             it held: a killed job holds nothing.
 *   quotas    a user other than root holds at most VGPU_ARB_USER_JOBS job entries and
 *             VGPU_ARB_USER_PROCS process entries of one GPU's schedule (root's jobs can always
 *             join).
 *   failure   a client whose daemon goes away (its socket closes, or a reply takes longer than
 *             VGPU_ARB_REPLY_MS) falls back to its user's own schedule (vgpu/sched.h) and looks
 *             for a daemon again at least once a second (limiter.c): jobs keep their caps and
 *             rejoin a restarted daemon.
 *
 * Why messages, not memory each user writes and the daemon reads (DESIGN.md decision 10's sketch):
 * the daemon would have to scan every user's memory to notice a want, or be woken for it anyway;
 * a message wakes it with the request in hand, arrives in order with the same process's other
 * requests (a release before the next want), and names its sender (SO_PEERCRED) without a
 * second check of who owns which page. The lock-free operations of vgpu/sched.h are kept as they
 * were: the daemon performs them on its own mapping, one request at a time.
 *
 * Messages are fixed-size structs. Operations that answer nothing (marks, busy time) are sent
 * without waiting; the daemon handles a connection's messages in order, so they take effect before
 * the next call that waits for its answer. libc only (linked into libvgpu.so). */
#ifndef VGPU_ARBITER_H
#define VGPU_ARBITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include "vgpu/log.h"

#define VGPU_ARB_DIR          "arbiter"     /* under the machine-wide directory */
#define VGPU_ARB_SOCK         "sock"
#define VGPU_ARB_LOCK         "lock"        /* one daemon per machine-wide directory (flock) */
#define VGPU_ARB_REPLY_MS     1000          /* a reply later than this: the daemon is taken as gone */
#define VGPU_ARB_RESTART_MS   1000          /* a restarted daemon holds placements back this long at most */
#define VGPU_ARB_USER_JOBS    8             /* of VGPU_SCHED_MAX_JOBS (32) per GPU, for a user other than root */
#define VGPU_ARB_USER_PROCS   64            /* of VGPU_SCHED_MAX_PROCS (256) */
#define VGPU_ARB_MAX_GPUS     64
#define VGPU_ARB_PROTO        2             /* payloads (len) came later: 0 before, so 2 still */
#define VGPU_ARB_MAX_PAYLOAD  32768         /* a request's or reply's payload, bytes at most */

enum vgpu_arb_op {
    /* Answered. */
    VGPU_ARB_HELLO = 1,      /* a[0] = protocol version; rc = the daemon's version */
    VGPU_ARB_OPEN,           /* uuid: rc = handle, with a read-only descriptor of the schedule */
    VGPU_ARB_JOB,            /* a = key, cap, soft, prio (+ the job's limits file, optional): rc = job */
    VGPU_ARB_ATTACH,         /* a[0] = job: rc = proc (the calling process) */
    VGPU_ARB_ACQUIRE,        /* proc: rc = granted, v = lease, deadline */
    VGPU_ARB_RELEASE,        /* a = lease, used, now: rc = released (not taken away before).
                              * Answered although nothing urgent waits for it: the releaser's
                              * next steps read the schedule as its release left it (a holder
                              * keeping clear waits for the next release after its own; sent
                              * without an answer, its own ended that wait at once, and the
                              * training job beside a service fell from 70 % to 65 %) */
    /* Not answered. */
    VGPU_ARB_DETACH,         /* proc */
    VGPU_ARB_UNWANT,         /* proc */
    VGPU_ARB_WANT_FROM,      /* proc, a[0] = since */
    VGPU_ARB_NOTE_END,       /* proc, a[0] = held_out */
    VGPU_ARB_DRAINING,       /* a[0] = lease */
    VGPU_ARB_DRAINED,        /* (the preempted holder finished draining now) */
    VGPU_ARB_NOTE_BUSY,      /* a = lease, busy_ns, busy_from */
    VGPU_ARB_EXPECT,         /* proc, a = back_at, gap, late (at most gap) */
    VGPU_ARB_SPILLING,       /* a = job, spilling */
    VGPU_ARB_YIELDED,        /* (statistics: a lease given back on request) */

    /* Requests of vgpu's commands rather than of a schedule (gpu and proc unused), answered, each
     * with a payload either way: placement and the job count (64..95, cmd/daemon/place.c) and
     * accounting (96..127, cmd/daemon/acct.c). What one holds ends with its connection. */
    VGPU_ARB_PLACE_FIRST = 64,
    VGPU_ARB_PL_LOOK = 64,   /* in: GPUs (struct vgpu_arb_gpu_bytes, bytes = their memory as the
                              * caller sees it, for the record), a[0] = the caller's ticket (0:
                              * none): out: the same GPUs, bytes = promised to running jobs;
                              * v[0] = the ledger's version, v[1] = waiters of the caller's user
                              * ahead (cmd/daemon/place.c says why only those). -EAGAIN: the
                              * daemon has just started and waits for the running jobs of the one
                              * before it to promise again (VGPU_ARB_RESTART_MS at most): ask
                              * again (vgpu_arb_call_patient) */
    VGPU_ARB_PL_PROMISE,     /* in: GPUs with bytes, a[0] = the version looked at: rc 0 (recorded,
                              * and the caller leaves the queue), or -EAGAIN (changed, or the wait
                              * of PL_LOOK: look again); a[1] = 1: a running job's promise again,
                              * after a daemon restart (recorded whatever the version, never
                              * held back) */
    VGPU_ARB_PL_TICKET,      /* a[0] = bytes, a[1] = GPUs the caller waits for (for the record):
                              * v[0] = the connection's place in the --wait queue (taken if none) */
    VGPU_ARB_PL_UNQUEUE,     /* leaves the queue: rc 0 */
    VGPU_ARB_PL_RELEASE,     /* drops the connection's promises: rc 0 */
    VGPU_ARB_PL_ADOPT,       /* a[0] = pid, one of the caller's user: what its connections hold
                              * (promises, ticket, job count) becomes the caller's; rc = entries */
    VGPU_ARB_JC_ENTER,       /* in: GPUs; a[0] = the job's --max-jobs (0: none), a[1] = 1: a running
                              * job counted again after a daemon restart (no limit): rc 0 counted, or
                              * -EBUSY with v[0] = the full GPU's position in `in`, v[1] = its jobs
                              * | the limit (min(--max-jobs, root's policy)) << 32; -EAGAIN as for
                              * PL_LOOK (never for a[1] = 1) */
    VGPU_ARB_JC_LEAVE,       /* rc 0 */
    VGPU_ARB_JC_COUNT,       /* in: one GPU: rc = jobs counted on it */
    VGPU_ARB_PL_GPUS,        /* out: the machine's GPUs and MIG devices (struct vgpu_arb_gpu), as the
                              * daemon's NVML listed them just now (at most VGPU_ARB_GPUS_FRESH_MS before);
                              * v[0] = how many, v[1] = the list's age in ms. -EIO when the daemon
                              * cannot list them (msg says why). vgpu run places a job by it rather
                              * than load NVML itself (issue 34: ~20 ms of each job's start) */
    VGPU_ARB_PLACE_LAST = 95,
    VGPU_ARB_ACCT_FIRST = 96,
    VGPU_ARB_ACCT_RECORD = 96, /* in: records (vgpu_acct_pack, back to back), a[0] = how many,
                              * a[1] = sizeof(struct vgpu_acct_record) (another vgpu's layout is
                              * refused): rc = records new to the database (one there already is
                              * kept as it was). The user is the caller's (SO_PEERCRED); only
                              * root's records keep the user they name (vgpu run --user) */
    VGPU_ARB_ACCT_QUERY,     /* in: struct vgpu_acct_wire_filter (limit and the cursor after_*
                              * page it), a[1] as above: out: records, oldest end first; v[0] =
                              * how many, v[1] = 1 when more may follow (ask again after the last).
                              * A caller other than root gets its own user's records only */
    VGPU_ARB_ACCT_TOTALS,    /* in: the filter, a[0] = totals to skip, a[1] as above, a[2] =
                              * sizeof(struct vgpu_acct_total) (another is refused: the struct grew
                              * with the lent memory, issue 37): out: struct vgpu_acct_total
                              * entries (per user and GPU); v[0] = how many, v[1] = 1 when more */
    VGPU_ARB_ACCT_START,     /* in: the job's id (VGPU_JOB_ID_LEN bytes, NUL-terminated), a[1] as
                              * above: rc 0. Sent by vgpu run on its connection before the command
                              * starts: the job's record is then taken only from that connection
                              * (or root's, or, once it is gone, the same user's); -EEXIST: another
                              * user's job has that id */
    VGPU_ARB_ACCT_LAST = 127,
    /* Lending across users (128..143, cmd/daemon/lend.c; vgpu/lend.h), answered. */
    VGPU_ARB_LEND_FIRST = 128,
    VGPU_ARB_LEND_SHARE = 128, /* in: struct vgpu_lend_report per GPU of the job (1 to 16), a[0] =
                              * the job id as a number (its 12 hex digits): out: struct
                              * vgpu_lend_remote per GPU, in order: what the other users' jobs there
                              * add to the job's order of giving way. What one says ends with its
                              * connection, or when not said again within 2 s */
    VGPU_ARB_LEND_LAST = 143,
};

struct vgpu_arb_req {
    uint32_t op;
    uint32_t gpu;            /* the handle VGPU_ARB_OPEN answered */
    int32_t proc;
    uint32_t len;            /* bytes of payload that follow in the same message (0..VGPU_ARB_MAX_PAYLOAD) */
    uint64_t a[4];
    char uuid[96];           /* VGPU_ARB_OPEN */
};

/* A GPU in the payloads of placement and the job count. */
struct vgpu_arb_gpu_bytes {
    char uuid[96];
    uint64_t bytes;
};
/* A GPU of VGPU_ARB_PL_GPUS' answer: what placement needs of struct vgpu_gpu (vgpu/gpu.h). */
struct vgpu_arb_gpu {
    char uuid[96];
    char name[96];
    char pci_bus_id[32];
    char unreachable[64];    /* why NVML gave no handle ("": it did) */
    uint64_t mem_total, mem_used, mem_reserved;
    uint32_t index, is_mig, mig_gi, mig_ci;
    uint32_t has_mig_mode, mig_current, mig_pending, lost;
    int32_t compute_mode;
    uint32_t pad;
};
#define VGPU_ARB_GPUS_FRESH_MS 20    /* an older list is read again before it is given */
#define VGPU_ARB_USER_PROMISES 256   /* promise entries a user other than root may hold at once */
#define VGPU_ARB_USER_CONNS    1024  /* connections of a user other than root (of 4096) */

struct vgpu_arb_rep {
    int32_t rc;              /* < 0: refused (-errno) */
    uint32_t len;            /* bytes of payload that follow in the same message */
    uint64_t v[2];
    char msg[160];           /* why, when refused */
};

/* ---- a descriptor along with a message (both sides) -------------------------------------------- */

/* Room for one descriptor in a message's control data. */
union vgpu_arb_cmsg {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
};
/* Puts descriptor `fd` into message m (nothing when fd < 0), using `room`. */
void vgpu_arb_put_fd(struct msghdr *m, union vgpu_arb_cmsg *room, int fd);
/* The descriptor a received message carried, or -1 (when several, the others are closed). */
int vgpu_arb_take_fd(struct msghdr *m);

/* ---- the client ---------------------------------------------------------------------------------- */

/* The socket's path for the machine-wide directory in force (vgpu_machinedir_path). */
int vgpu_arb_sock_path(char *buf, size_t len);
/* True when a daemon answers on this machine-wide directory now (connects once if needed). */
bool vgpu_arb_available(void);
/* Opens GPU `uuid`'s schedule through the daemon: *handle, and a read-only descriptor of it
 * (the caller maps and closes it). *gen is the connection's generation (vgpu_arb_gen). 0, or
 * -1 with e set (no daemon: e->code is VGPU_EXIT_STATE; refused: its reason). */
int vgpu_arb_open(const char *uuid, uint32_t *handle, int *fd, uint32_t *gen, struct vgpu_err *e);
/* An answered call: rc (< 0 refused or lost), v[] filled. `limits_fd` >= 0 is passed along. */
int64_t vgpu_arb_call(uint32_t gen, enum vgpu_arb_op op, uint32_t gpu, int proc, const uint64_t a[4],
                      int limits_fd, uint64_t v[2]);
/* An answered call with payloads, for vgpu's commands (placement, accounting): connects first
 * when needed. `in` (inlen bytes, at most VGPU_ARB_MAX_PAYLOAD) goes with the request; the reply's
 * payload is copied to `out` (at most outcap bytes; *outlen its length). rc, or -EPIPE when no
 * daemon answers (or it went away); r (optional) gets the reply's header, msg included. */
int64_t vgpu_arb_call_data(enum vgpu_arb_op op, const uint64_t a[4], const void *in, size_t inlen, void *out,
                           size_t outcap, size_t *outlen, struct vgpu_arb_rep *r);
/* vgpu_arb_call_data, asked again every 10 ms while the daemon answers -EAGAIN because it has
 * just started and waits for the running jobs it served before to promise again (PL_LOOK,
 * JC_ENTER), for 3 * VGPU_ARB_RESTART_MS at most; then -EAGAIN, with r->msg saying why. */
int64_t vgpu_arb_call_patient(enum vgpu_arb_op op, const uint64_t a[4], const void *in, size_t inlen, void *out,
                              size_t outcap, size_t *outlen, struct vgpu_arb_rep *r);
/* A call that is not answered (sent in order with the others). */
void vgpu_arb_send(uint32_t gen, enum vgpu_arb_op op, uint32_t gpu, int proc, uint64_t a0, uint64_t a1,
                   uint64_t a2);
/* The generation of the connection now (0: none). A schedule opened under another generation is
 * lost: its handle means nothing to the daemon now. */
uint32_t vgpu_arb_gen(void);
/* Looks for the daemon with one answered request, connecting to whichever answers now when the
 * one it spoke to went away: the generation of the connection then (0: none answers). What a
 * process holds through an older generation, the daemon no longer knows. */
uint32_t vgpu_arb_probe(void);
/* Drops the connection (a forked child must not speak on its parent's). */
void vgpu_arb_forget(void);
/* When no daemon answers, says once per user (and boot) on stderr that jobs of other users are
 * not scheduled together with this user's (vgpu run, list, top; vgpu only). */
void vgpu_arb_note_alone(const char *cmd);

#endif
