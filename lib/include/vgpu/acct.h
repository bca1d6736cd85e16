/* Accounting (DESIGN.md decision 12, issue 28): one record for every job when it ends, kept in an
 * SQLite database (WAL mode), queried by `vgpu acct` and `vgpu metrics`.
 *
 * Where: without the arbiter, one database per user, STATEDIR/acct.db (0600, the user's), written
 * by `vgpu run` when the job's command ends. When `vgpu run` itself dies (kill -9) or cannot write
 * (a full disk, a database locked for longer than its busy timeout), the job's region stays and
 * the next command that lists jobs (vgpu_jobs_list, which removes ended jobs) or `vgpu acct`
 * writes the record from it (recovered). The store's functions take an open database and know
 * nothing of who writes: the arbiter can insert the same records into its own database.
 *
 * Never corrupts or loses earlier records: every change is one transaction; records are keyed by
 * the job id, so writing one twice (vgpu run and a recovery racing) keeps the first.
 * vgpu only (libsqlite3 is linked into the vgpu binary, never into libvgpu.so). */
#ifndef VGPU_ACCT_H
#define VGPU_ACCT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"
#include "vgpu/region.h"

#define VGPU_ACCT_DB_NAME            "acct.db"
#define VGPU_ACCT_SCHEMA_VERSION     7
#define VGPU_ACCT_RETENTION_DEFAULT  400     /* days */
#define VGPU_ACCT_BUSY_TIMEOUT_MS    5000

/* struct vgpu_region_header.acct_flags */
#define VGPU_ACCT_RECORDED      1u  /* vgpu run wrote the record: nothing to recover */
#define VGPU_ACCT_ENERGY_KNOWN  2u  /* acct_energy_mj was measured (NVML's energy counter) */
/* GPU d's acct_nvml_gpu_ns holds its GPU time from NVML's per-process samples (d < 16) */
#define VGPU_ACCT_NVML_DEV(d)   (1u << (16 + (d)))
/* acct_energy_mj of a GPU whose energy could not be measured (no counter, a MIG device) */
#define VGPU_ACCT_ENERGY_UNKNOWN UINT64_MAX

struct vgpu_acct_gpu {
    unsigned ordinal;                   /* the job's CUDA ordinal (0..) */
    char uuid[VGPU_REGION_UUID_LEN];
    int nvml_index;                     /* the physical GPU's NVML index at the job's start */
    uint64_t mem_limit_bytes;           /* 0: none */
    unsigned core_limit;                /* percent; 0: none */
    char core_policy[8];                /* "hard" or "soft" */
    int priority;
    uint64_t oversub_device_bytes;      /* --oversubscribe: what may stay on the GPU; 0: not */
    /* GPU time: measured by the schedule (the limiter charges each lease its busy time) on a
     * GPU where the job had a --core cap ("schedule" in gpu_time_source); elsewhere from NVML's
     * per-process utilisation samples ("nvml"), or "none" when nothing measured it (a MIG device,
     * a driver without samples: gpu_ns then is 0 and means unknown). */
    uint64_t gpu_ns;
    char gpu_time_source[12];
    uint64_t throttled_ns;              /* launches' waits for the schedule */
    uint64_t mem_peak_bytes;
    double mem_byte_seconds;            /* memory integrated over time (sampled every 250 ms) */
    /* Lent memory (--mem REQUEST:LIMIT, issue 37): REQUEST at the end (0: no memory limit; the
     * limit itself without a REQUEST), the memory promised integrated over time (REQUEST, or the
     * limit, as vgpu limit changed it), and the memory held past REQUEST (borrowed) integrated
     * over time. Byte-seconds, sampled with mem_byte_seconds; 0 in records of an older vgpu. */
    uint64_t mem_request_bytes;
    double mem_requested_byte_seconds;
    double mem_borrowed_byte_seconds;
    bool energy_known;
    double energy_j;                    /* the GPU's energy apportioned by GPU-time share */
    bool migrated_known;                /* --oversubscribe, measured by vgpu run (not recovered) */
    uint64_t migrated_bytes;            /* the GPU's PCIe bytes while the job had memory off it */
};

struct vgpu_acct_record {
    char id[VGPU_JOB_ID_LEN];
    char name[VGPU_JOB_NAME_LEN];
    uint32_t uid;                       /* the job's user */
    char user[64];                      /* its name ("" when it has none) */
    char command[VGPU_JOB_CMDLINE_LEN]; /* argv[0] */
    uint64_t start_ns, end_ns;          /* CLOCK_REALTIME */
    int exit_code;                      /* 0..255, or -1 when killed by a signal */
    int exit_signal;                    /* 0, or the signal */
    bool run_as_user;                   /* vgpu run --user (root set the limits) */
    bool recovered;                     /* written from the region after vgpu run could not */
    bool end_approximate;               /* vgpu run died: end is its last look (<= 250 ms early) */
    unsigned bounded;                   /* VGPU_ACCT_BOUND_*: what vgpu_acct_bound cut to its bound */
    unsigned gpu_count;
    struct vgpu_acct_gpu gpu[VGPU_REGION_MAX_DEVICES];
};

/* --- sanity bounds (bounds.c, issue 36 N13) ------------------------------------------------
 * A damaged job region (or a forged record) must not put impossible figures into the permanent
 * records and everyone's totals (it did: a memory limit of 1.8e19 bytes, a core limit of
 * 1753333957 %, 1.2 million GiB-hours for a 4 s job). Before a record is stored, each figure past
 * what the job could have had is cut to that bound, and the record says which (the `bounded`
 * column; vgpu acct's NOTE, "bounded" in --json and --csv): the rest of the record is kept, as it
 * may be right. The bounds, per GPU of the job:
 *  - the end not before the start (TIME: the end is set to the start);
 *  - a memory limit, the peak and, without --oversubscribe, what may stay on the GPU at most the
 *    GPU's memory (1 PiB when it is not known, or oversubscribed: host memory then backs it);
 *  - a core limit at most 100 %;
 *  - GPU time at most the job's duration (so a job of N GPUs has at most N x its duration);
 *  - memory integrated over time at most that memory bound x (the duration + 1 s: vgpu run's last
 *    sample is taken just after the command's end). */
#define VGPU_ACCT_BOUND_TIME      1u    /* the end was before the start */
#define VGPU_ACCT_BOUND_MEM_LIMIT 2u    /* memory limit (or --oversubscribe's device part) */
#define VGPU_ACCT_BOUND_CORE      4u    /* core limit */
#define VGPU_ACCT_BOUND_GPU_TIME  8u    /* GPU seconds */
#define VGPU_ACCT_BOUND_MEM_PEAK  16u   /* peak memory */
#define VGPU_ACCT_BOUND_MEM_TIME  32u   /* GiB-hours */
#define VGPU_ACCT_BOUND_ALL       63u
#define VGPU_ACCT_MEM_UNKNOWN_MAX (1ULL << 50)   /* 1 PiB: no GPU has more */

/* Cuts rec's figures to their bounds, mem_total[d] the memory of rec->gpu[d]'s GPU as the
 * caller knows it (NULL, or 0 in it: unknown). Adds what it cut to rec->bounded, and returns
 * that (0: nothing). Running it again changes nothing. */
unsigned vgpu_acct_bound(struct vgpu_acct_record *rec, const uint64_t *mem_total);
/* "memory limit", "core limit", ... for bit `bit` of VGPU_ACCT_BOUND_*; json: "mem_limit", ... */
const char *vgpu_acct_bound_name(unsigned bit, bool json);

struct vgpu_acct_store;

/* Opens (creating with create) the database `file` in the directory dirfd (a checked state
 * directory, vgpu/statedir.h; `dirpath` is its path): the file must be a regular file owned by
 * the caller, not a symlink, not readable or writable by others (created 0600). WAL mode,
 * busy_timeout VGPU_ACCT_BUSY_TIMEOUT_MS, schema created or migrated to the current version.
 * NULL with e set (VGPU_EXIT_NOT_FOUND when !create and it does not exist). */
struct vgpu_acct_store *vgpu_acct_open(int dirfd, const char *dirpath, const char *file, bool create,
                                       struct vgpu_err *e);
/* The caller's own store (own_store.c): $XDG_STATE_HOME/vgpu/acct.db, else
 * ~/.local/state/vgpu/acct.db, /var/lib/vgpu/own/acct.db for root (places a logout leaves), or
 * STATEDIR/acct.db when VGPU_STATE_DIR is set. The records an older vgpu kept in the runtime
 * state directory are moved into it at its first open. path: where it is (0, or -1). */
struct vgpu_acct_store *vgpu_acct_open_user(bool create, struct vgpu_err *e);
int vgpu_acct_own_store_path(char *buf, size_t len);
void vgpu_acct_close(struct vgpu_acct_store *s);
/* A store on a read-only file system (a state directory mounted read-only) opens to be read
 * (not created, not migrated: an older schema is refused there); what would write fails saying
 * the file system is read-only, never blaming the file's owner (issue 36 N11). */
bool vgpu_acct_is_read_only(const struct vgpu_acct_store *s);

/* Inserts one record (and prunes records past the retention) in one transaction. A record whose
 * id is already there is left as it is (1 returned), else 0; -1 with e set. The record is
 * bounded first (vgpu_acct_bound, its GPUs' memory unknown here: the writers that know it,
 * vgpu run and the daemon, bounded it by that already). */
int vgpu_acct_insert(struct vgpu_acct_store *s, const struct vgpu_acct_record *rec, struct vgpu_err *e);

/* Retention in days: what vgpu acct --retention kept in the database, else root's policy
 * (acct-retention-days, vgpu/policy.h), else VGPU_ACCT_RETENTION_DEFAULT; never more than root's
 * policy (a user may keep less, never more). set refuses more than the policy (VGPU_EXIT_USAGE). */
int vgpu_acct_retention(struct vgpu_acct_store *s, unsigned *days, struct vgpu_err *e);
int vgpu_acct_set_retention(struct vgpu_acct_store *s, unsigned days, struct vgpu_err *e);
/* Removes records that ended more than the retention before now_ns; *removed gets how many. */
int vgpu_acct_prune(struct vgpu_acct_store *s, uint64_t now_ns, unsigned *removed, struct vgpu_err *e);

struct vgpu_acct_filter {
    uint64_t since_ns, until_ns;        /* jobs that ended in [since, until); 0: open */
    bool by_uid;
    uint32_t uid;
    const char *gpu;                    /* a UUID, its start, or an NVML index; NULL: any */
    const char *name;                   /* exact job name; NULL: any */
    const char *id;                     /* exact id or its start; NULL: any */
    /* Paging (the arbiter's replies): only records after (after_end_ns, after_id) in the query's
     * order, when after_id; at most `limit` of them (0: all). */
    uint64_t after_end_ns;
    const char *after_id;
    unsigned limit;
};

/* Calls fn for each record that matches, oldest end first; fn returns non-zero to stop. */
int vgpu_acct_query(struct vgpu_acct_store *s, const struct vgpu_acct_filter *f,
                    int (*fn)(const struct vgpu_acct_record *rec, void *arg), void *arg, struct vgpu_err *e);

struct vgpu_acct_total {
    uint32_t uid;
    char user[64];
    char uuid[VGPU_REGION_UUID_LEN];
    int nvml_index;                     /* of the latest job there */
    uint64_t jobs;                      /* the jobs that used this GPU */
    /* Of those, the jobs counted for their user here: a job of several GPUs counts at its first
     * GPU (the lowest ordinal that matches the filter) only, so that the sum over a user's rows
     * counts each job once (issue 36: a 2-GPU job counted twice in a user's jobs). */
    uint64_t user_jobs;
    double gpu_seconds, mem_gib_seconds, energy_j;
    bool energy_known;                  /* some job there had its energy measured */
    /* Lent memory (issue 37): the sums of the jobs' mem_requested_byte_seconds and
     * mem_borrowed_byte_seconds there, in GiB-seconds as mem_gib_seconds. On the arbiter's wire
     * (VGPU_ARB_ACCT_TOTALS) the struct goes as it is: a request names its size in a[2]. */
    double mem_requested_gib_seconds, mem_borrowed_gib_seconds;
};

/* Totals per user and GPU over the matching records (for the job's GPUs that match f->gpu). */
int vgpu_acct_totals(struct vgpu_acct_store *s, const struct vgpu_acct_filter *f,
                     int (*fn)(const struct vgpu_acct_total *t, void *arg), void *arg, struct vgpu_err *e);

/* Removes the records with these ids (one transaction): what was handed to the arbiter. */
int vgpu_acct_delete(struct vgpu_acct_store *s, char (*ids)[VGPU_JOB_ID_LEN], unsigned n, struct vgpu_err *e);
/* How long a write waits for another writer's lock (default VGPU_ACCT_BUSY_TIMEOUT_MS). */
void vgpu_acct_busy_timeout(struct vgpu_acct_store *s, unsigned ms);

/* --- the arbiter's database (DESIGN.md decision 12) ------------------------------------------
 * With `vgpu daemon` answering, records live in one root-owned database it writes (default
 * VGPU_ACCT_DAEMON_DB, vgpu daemon --acct-db): vgpu run sends its job's record there (ops
 * VGPU_ARB_ACCT_* of vgpu/arbiter.h); the daemon takes the user from SO_PEERCRED (a payload's
 * user is believed only from root, for vgpu run --user), and answers each user with their own
 * records only (root: all). When no daemon answers or it refuses, the record goes to the user's
 * own store; the next reader that finds a daemon hands those records over (the daemon keeps a
 * job id once) and removes them from the own store, so every record is shown once. */
#define VGPU_ACCT_DAEMON_DB "/var/lib/vgpu/acct.db"

/* A record on the wire (wire.c): its fixed part and its gpu_count GPUs, back to back. pack: the
 * bytes written, 0 when cap is too small. unpack: the bytes used, 0 when buf holds no whole,
 * well-formed record (strings are cut at their size). */
size_t vgpu_acct_pack(const struct vgpu_acct_record *rec, void *buf, size_t cap);
size_t vgpu_acct_unpack(const void *buf, size_t len, struct vgpu_acct_record *rec);
#define VGPU_ACCT_WIRE_TEXT 128
/* A filter on the wire; unpack points f's strings into w. pack: -1 when a string is too long. */
struct vgpu_acct_wire_filter {
    uint64_t since_ns, until_ns, after_end_ns;
    uint32_t uid, limit;
    uint8_t by_uid, has_gpu, has_name, has_id, has_after, pad[3];
    char gpu[VGPU_ACCT_WIRE_TEXT], name[VGPU_ACCT_WIRE_TEXT], id[VGPU_ACCT_WIRE_TEXT];
    char after_id[VGPU_JOB_ID_LEN];
};
int vgpu_acct_filter_pack(const struct vgpu_acct_filter *f, struct vgpu_acct_wire_filter *w);
void vgpu_acct_filter_unpack(struct vgpu_acct_wire_filter *w, struct vgpu_acct_filter *f);

/* vgpu run: the record to the daemon (arb.c). 0 written (or there already), 1 no daemon
 * answers, -1 refused (e says why). */
int vgpu_acct_arb_insert(const struct vgpu_acct_record *rec, struct vgpu_err *e);
/* Tells the daemon (when one answers) that job `id` starts, on this process's connection: from
 * then on it takes the job's record from this process (or root) only. Quiet: without a daemon,
 * or refused, the record is taken as before (said at debug level). */
void vgpu_acct_arb_start(const char *id);

/* The own store's records to the daemon, removed from the own store once it has them: what
 * readers do first, and vgpu run once its command has started (vgpu_acct_sample). 0 handed
 * over (or none there), 1 no daemon answers, -1 refused (e). */
int vgpu_acct_hand_over(struct vgpu_err *e);

/* What readers use (read.c): the daemon's records when one answers (after handing it the own
 * store's), else the caller's own store; nothing and 0 when neither has any. */
int vgpu_acct_read_query(const struct vgpu_acct_filter *f, int (*fn)(const struct vgpu_acct_record *rec, void *arg),
                         void *arg, struct vgpu_err *e);
int vgpu_acct_read_totals(const struct vgpu_acct_filter *f, int (*fn)(const struct vgpu_acct_total *t, void *arg),
                          void *arg, struct vgpu_err *e);

/* Where the records a reader shows come from (origin.c), asked just after it read them: the
 * arbiter when it answers; else the caller's own store (or none), partial when an arbiter ran
 * on this machine (its database holds the rest, out of reach while it is down). */
enum vgpu_acct_source { VGPU_ACCT_FROM_NONE, VGPU_ACCT_FROM_OWN, VGPU_ACCT_FROM_ARBITER };
struct vgpu_acct_origin {
    enum vgpu_acct_source source;
    bool partial;
    bool own_read_only;                 /* the own store is on a read-only file system */
    char own_path[4200];                /* the own store's path (for messages), "" if unknown */
};
void vgpu_acct_origin(struct vgpu_acct_origin *o);
const char *vgpu_acct_source_name(enum vgpu_acct_source s);   /* "arbiter", "own", "none" */

/* --- records from job regions (record.c) -------------------------------------------------- */

/* Builds the record of a job from its region: exact when the job ended under vgpu run (EXITED),
 * else recovered with the end approximated by acct_seen_ns. */
void vgpu_acct_record_from_region(const struct vgpu_region *r, struct vgpu_acct_record *rec);

/* vgpu run's wait loop, every 250 ms and once at the end: integrates the job's memory into the
 * region (acct_mem_byte_s) and notes the time (acct_seen_ns). r opened ADMIN. */
void vgpu_acct_sample(struct vgpu_region *r);
/* The same once the command has ended, without NVML's look: the job's last look at NVML is
 * vgpu_acct_nvml_finish's (the finisher's, cmd/run/finisher.c), off vgpu run's return. */
void vgpu_acct_sample_end(struct vgpu_region *r);

/* NVML's view of the job (nvml_sample.c): GPU time of GPUs the schedule does not measure, from
 * per-process utilisation samples, and each GPU's energy apportioned by GPU-time share, written
 * into the region (acct_nvml_gpu_ns, acct_energy_mj). poll: from vgpu_acct_sample; finish: at
 * the job's end, waits (at most one sampling period, only for a job that used a GPU) for the
 * window the job ended in and reads it. */
void vgpu_acct_nvml_poll(struct vgpu_region *r);
void vgpu_acct_nvml_finish(struct vgpu_region *r);
/* The first half of finish, at the job's end: reads the counters that end with the job (energy)
 * and returns how long (µs, at most 1 s) the last look must wait for the job's last sampling
 * window; 0: it need not wait. finish (vgpu_acct_record_job) then waits only what is left, so
 * vgpu run can leave that wait to a finisher process (cmd/run/finisher.c). */
uint64_t vgpu_acct_nvml_end(struct vgpu_region *r);
/* True when the job's last look will call NVML (it is open, or the job used a GPU before its
 * first look and NVML must be opened for it): the reads (3-15 ms on an H200, longer while the
 * driver tears a context down) are worth a finisher process. Before vgpu_acct_nvml_end. */
bool vgpu_acct_nvml_last_look_costs(const struct vgpu_region *r);
/* vgpu run hands over the NVML handle it found the GPUs with (owned from then on): the first look
 * uses it instead of initialising NVML a second time (an nvmlShutdown and nvmlInit fewer). */
struct vgpu_nvml;
void vgpu_acct_nvml_adopt(struct vgpu_nvml *nv);
/* How often vgpu run should read the samples between its walks: every half sampling window of
 * the sampled GPUs (the driver keeps only each process's newest window), in ms; -1 while none
 * is sampled. vgpu_acct_sample_nvml reads them alone (the region checked as vgpu_acct_sample
 * does). */
int vgpu_acct_nvml_every_ms(void);
void vgpu_acct_sample_nvml(struct vgpu_region *r);
/* Bytes migrated on job device d (an oversubscribed GPU with 64-bit PCIe counters), as vgpu run
 * measured them (kept in its memory: a recovered record has them unknown). false: unknown. */
bool vgpu_acct_nvml_migrated(unsigned d, uint64_t *bytes);

/* vgpu run at the job's end: writes its record into the caller's store and marks the region
 * recorded. 0, or -1 with e set (the region then keeps it for recovery). */
int vgpu_acct_record_job(struct vgpu_region *r, struct vgpu_err *e);

/* The hook vgpu_jobs_list calls before removing an ended job whose region the caller owns and
 * that vgpu run did not record: writes the record (recovered). 0 lets the region go; -1 keeps it
 * (said at debug level; the next listing tries again). */
int vgpu_acct_recover(const struct vgpu_region *r);

#endif
