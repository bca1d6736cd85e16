/* The arbiter's server side (vgpu daemon; the protocol is vgpu/arbiter.h): the schedules it
 * owns (one memfd per GPU), its clients, and what each request may do. */
#ifndef VGPU_CMD_DAEMON_SERVER_H
#define VGPU_CMD_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu/arbiter.h"
#include "vgpu/sched.h"

/* What a login's ended job still owed on a GPU, kept a while for its next new job (debts.c). */
struct arb_debt {
    uid_t login;
    unsigned cap;                              /* the ended job's cap: its debt is repaid at that rate */
    int64_t credit;                            /* its credit (at most 0: forfeited) at credit_t */
    uint64_t credit_t;
    uint64_t at;                               /* when it ended (0: a free record) */
};
#define ARB_DEBTS VGPU_SCHED_MAX_JOBS

/* One GPU's schedule, and who holds what in it. */
struct arb_gpu {
    char uuid[96];
    struct vgpu_sched s;                       /* writable: only the daemon maps it so */
    int ro_fd;                                 /* read-only descriptor handed to clients */
    uid_t job_uid[VGPU_SCHED_MAX_JOBS];        /* the user whose job each entry is, and */
    uid_t job_login[VGPU_SCHED_MAX_JOBS];      /* the login it counts as (logins.c), at its JOB */
    uint64_t proc_client[VGPU_SCHED_MAX_PROCS]; /* the client that attached each entry (0: none) */
    uid_t proc_uid[VGPU_SCHED_MAX_PROCS];
    uint64_t grant_lease[VGPU_SCHED_MAX_PROCS]; /* the entry's lease not yet charged (0: none), */
    uint64_t grant_at[VGPU_SCHED_MAX_PROCS];   /* when it was granted, when a preemptor took it (0: not), and */
    uint64_t taken_at[VGPU_SCHED_MAX_PROCS];
    bool grant_preempted[VGPU_SCHED_MAX_PROCS]; /* whether it preempted a holder still draining */
    uint64_t drained_at;                       /* when a preempted holder last finished draining */
    /* The process entry (+ 1; 0: none) whose RELEASE last found its lease gone (taken or
     * revoked): the one client whose DRAINED is believed, once. Any client of the GPU could set
     * drained_at before, and so end another job's overlap early. */
    uint16_t drainer;
    bool fair_share[VGPU_SCHED_MAX_JOBS];      /* an uncapped job held to a fair share (do_job) */
    /* The limits an administrator set for each entry's job (vgpu run --user: root's limits file,
     * read when the job first joined), kept for the entry's life: a later request of the job's
     * processes, with or without the file, cannot change them. */
    bool admin_set[VGPU_SCHED_MAX_JOBS];
    bool admin_soft[VGPU_SCHED_MAX_JOBS];
    uint8_t admin_cap[VGPU_SCHED_MAX_JOBS];
    int8_t admin_prio[VGPU_SCHED_MAX_JOBS];
    uint16_t charged_slot[VGPU_SCHED_MAX_JOBS]; /* each entry's slot in the charged table + 1 (charged.c) */
    struct arb_debt debts[ARB_DEBTS];          /* one record per login at most (debts.c) */
};

struct arb_client {
    int fd;                                    /* -1: free */
    uint64_t id;                               /* unique for the daemon's life */
    pid_t pid;                                 /* SO_PEERCRED, as the daemon sees it */
    uid_t uid;
    uid_t login;                               /* the login uid counts as, for quotas (logins.c) */
    bool opened[VGPU_ARB_MAX_GPUS];
};

struct arb_place;   /* placement and the job count: cmd/daemon/place.c */
struct arb_acct;    /* accounting: cmd/daemon/acct.c */
struct arb_charged; /* what the schedules charged each job: cmd/daemon/charged.c */
struct arb_gpus;    /* the machine's GPUs, from NVML: cmd/daemon/gpus.c */
struct arb_logins;  /* subordinate uids and their logins: cmd/daemon/logins.c */
struct arb_lend;    /* what every job says it holds, for lending across users: cmd/daemon/lend.c */

/* Entries of each GPU's schedule that only root's jobs take (quota.c), so root always has room. */
#define ARB_ROOT_JOBS  4
#define ARB_ROOT_PROCS 16

struct arbiter {
    struct arb_gpu *gpus[VGPU_ARB_MAX_GPUS];
    struct arb_place *place;
    struct arb_acct *acct;
    struct arb_charged *charged;
    struct arb_gpus *machine_gpus;
    struct arb_logins *logins;
    struct arb_lend *lend;
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
bool arb_place_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out);
/* Accounting: false when the request was handed to the accounting thread, which answers it
 * (acct_worker.c); true when r is the answer now. */
bool arb_acct_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out);
/* Fills a refusal: rc = -err, msg = why. */
int arb_refuse(struct arbiter *a, struct vgpu_arb_rep *r, int err, const char *why);
/* Client `c` is gone: every process entry it attached is detached (a lease it held given back). */
void arb_client_gone(struct arbiter *a, struct arb_client *c);
/* The same for what it held in placement and accounting. */
void arb_place_client_gone(struct arbiter *a, struct arb_client *c);
/* Placement's memory given back (a daemon's ends with it; the fuzzer's each input). */
void arb_place_free(struct arbiter *a);
/* The bytes connection `client` has promised on GPU `uuid` (0: none). */
uint64_t arb_place_promised(struct arbiter *a, uint64_t client, const char *uuid);
/* Lending across users (lend.c, VGPU_ARB_LEND_*): one request; client c gone; the memory given back. */
bool arb_lend_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out);
void arb_lend_client_gone(struct arbiter *a, struct arb_client *c);
void arb_lend_free(struct arbiter *a);
/* The priority a job of `uid` is granted for the one it asked for (root's policy file). */
int arb_granted_prio(uid_t uid, int asked);
/* Before serving: placement keeps the list of its holders in `dir` (the daemon's own directory,
 * shown as `shown` in messages; holders.c), and reads the list a daemon before it left there:
 * while a holder named there lives and has not made its promise or place in the job count again,
 * other clients' placements are answered -EAGAIN ("try again"), VGPU_ARB_RESTART_MS after this
 * call at most. Without it (the unit tests, the fuzzer) nothing is written and nothing waits. */
void arb_place_start(struct arbiter *a, int dir, const char *shown);
/* Connection c named its job `id` (VGPU_ARB_ACCT_START): the holders file says it. */
void arb_place_job_named(struct arbiter *a, const struct arb_client *c, const char *id);

/* The holders file (holders.c): one holder a process, what it holds (kinds). */
#define ARB_HOLDERS_FILE "holders"
#define ARB_HOLDERS_MAX  16384
#define ARB_HELD_PROMISE 1u
#define ARB_HELD_COUNT   2u
struct arb_holder {
    pid_t pid;                                 /* as the daemon sees it (SO_PEERCRED) */
    uint64_t start;                            /* its start time, /proc/PID/stat field 22 */
    uid_t uid;
    unsigned kinds;                            /* ARB_HELD_* */
    char job[16];                              /* its job's id (VGPU_JOB_ID_LEN), "" not named yet */
};
/* Reads dir's list: 0 with *n holders in *out (malloc'd; none when there is no file, or it is of
 * another boot), or -1 when the file is there but not trusted (said why, naming it `shown`). */
int arb_holders_read(int dir, const char *shown, struct arb_holder **out, size_t *n);
/* Writes the list (a new file renamed over the old one): 0, or -errno. */
int arb_holders_write(int dir, const struct arb_holder *h, size_t n);
void arb_acct_client_gone(struct arbiter *a, struct arb_client *c);
/* The schedule entry's key of a job of user `uid` whose own key (its processes') is `key`: two
 * users' jobs never share an entry, whatever keys they send, and the key is mixed with a secret
 * of this daemon's (random at its start), so that the schedule, which every client maps, reveals
 * no job's key, and so no job id (the unsalted hash was inverted to a root job's id in 2.6 s). */
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
/* Opens (creating it when missing) the accounting database at `path` (NULL: the default) and
 * closes it again: -1 with e set when the daemon could not write it, so it does not start. */
struct vgpu_err;
int arb_acct_check(const char *path, struct vgpu_err *e);
/* The database's path when --acct-db names none. */
void arb_acct_default_path(char *buf, size_t len);
/* The jobs the daemon saw start (acct_jobs.c): job `id` named by connection c (vgpu run, before
 * its command: 0, or -errno with *why); whether c may send the record of job `id` (0, or -EPERM
 * with *why); whether the daemon saw it start; the job's record stored (it leaves the table);
 * connection `client` gone (its jobs' records may come from their user's other connections). */
int arb_acct_job_start(const struct arb_client *c, const char *id, const char **why);
int arb_acct_job_may_record(const struct arb_client *c, const char *id, const char **why);
bool arb_acct_job_seen(const char *id);
void arb_acct_job_done(const char *id, uid_t uid);
void arb_acct_jobs_client_gone(uint64_t client);
/* Before serving (startup.c): descriptors 0-2 that are closed become /dev/null (-1: cannot);
 * VGPU_MACHINE_DIR set but empty is refused, and the accounting database must open (an exit
 * status, or 0 to go on; a machine directory other users cannot reach is said). */
int arb_start_stdio(void);
int arb_start_env(void);
int arb_start_checks(const char *acct_db);

/* Debts of ended jobs (debts.c): job entry j of g, whose last process left at `now` (after its
 * forfeit), leaves its credit to its login for a while; a new job entry j of g starts with what
 * its login's ended jobs still owe (at most one quantum), when they owe anything. */
void arb_debt_keep(struct arb_gpu *g, unsigned j, uint64_t now);
void arb_debt_apply(struct arb_gpu *g, unsigned j, uint64_t now);

/* The machine's GPUs (gpus.c): true when NVML lists `uuid` (a GPU or MIG device), reading the
 * list again (at most once a second) when it is not there; false with e saying why. Start reads
 * it first (and says when it cannot); free lets NVML go. */
bool arb_gpus_known(struct arbiter *a, const char *uuid, struct vgpu_err *e);
/* The memory of GPU (or MIG device) uuid as NVML lists it, 0 when it is not one of this machine's
 * (accounting bounds a record by it: acct.c). */
uint64_t arb_gpus_mem_total(struct arbiter *a, const char *uuid);
/* VGPU_ARB_PL_GPUS: the machine's GPUs into `out`, the reply's payload (vgpu/arbiter.h). */
void arb_gpus_answer(struct arbiter *a, struct vgpu_arb_rep *r, void *out);
void arb_gpus_start(struct arbiter *a);
void arb_gpus_free(struct arbiter *a);
/* The login uid `uid` counts as for quotas (logins.c): the owner of a subordinate-uid range of
 * /etc/subuid it is in, else itself. */
uid_t arb_login_of(struct arbiter *a, uid_t uid);
void arb_logins_free(struct arbiter *a);
/* Quotas (quota.c): NULL when client c may take one more job entry (process entry) of g, else
 * why not. Root's always may. */
const char *arb_quota_job(struct arbiter *a, const struct arb_gpu *g, const struct arb_client *c, uint64_t now);
const char *arb_quota_proc(struct arbiter *a, const struct arb_gpu *g, const struct arb_client *c);

#endif
