/* The soak driver (tests/soak/soak.c and its helpers): shared types. Test code, not product.
 * See soak.c for what the soak does and checks. */
#ifndef VGPU_SOAK_H
#define VGPU_SOAK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "board.h"
#include "vgpu/region.h"

#define SOAK_USERS      2
#define SOAK_JOBS_PER   4
#define SOAK_SLOTS      4           /* processes per job */
#define SOAK_TICK_NS    10000000ULL /* the checker's period: 10 ms */
#define SOAK_SEC        1000000000ULL
#define SOAK_MIB        (1024ULL * 1024ULL)
#define SOAK_MAX_WINDOWS 4096

enum role { ROLE_ALLOC = 0, ROLE_LAUNCH = 1 };

enum vkind {
    V_OVER_LIMIT,       /* accounted usage above the limit (beyond the allowed overrun) */
    V_RECLAIM_LATE,     /* a dead process's usage still charged after the bound */
    V_STALL,            /* a live process without a heartbeat for longer than 1 s */
    V_SHARE,            /* a saturating capped job's GPU-time share off its cap by more than 5 points */
    V_LIVE_DROPPED,     /* a live process's usage dropped (its slot reaped while it ran) */
    V_LEFTOVER,         /* state left after the last job ended */
    V_WORKER_FAILED,    /* a worker exited with an error, or a job's command ended early */
    V_TOOL_FAILED,      /* vgpu limit / vgpu ps failed */
    V_NKINDS
};

struct user {
    const char *name;               /* "root" side: the caller; else the other user */
    bool other;                     /* runs as uid/gid below (the driver is root) */
    uid_t uid;
    gid_t gid;
    const char *vgpu, *worker;      /* programs, readable by this user */
    char **env;                     /* the base environment of this user's processes */
    char statedir[1024];
};

struct job {
    int user, index, board_index;
    char name[48];
    unsigned core;                  /* cap at start (0: none) */
    uint64_t mem;                   /* limit at start (0: none) */
    enum role roles[SOAK_SLOTS];
    bool change_mem, change_core;   /* chaos changes these limits live */
    bool pidns;                     /* chaos starts some of its processes in a new PID namespace */
    bool share_checked;             /* cap constant, launchers kept alive: its share is checked */
    pid_t run_pid;                  /* `vgpu run` */
    bool run_done;
    int slot_proc[SOAK_SLOTS];      /* proc record of each slot's current process, -1: none */
    uint64_t slot_restart_at[SOAK_SLOTS];
    /* The region, read-only. */
    const struct vgpu_region_header *hdr;
    const struct vgpu_region_usage *use;
    char uuid[VGPU_REGION_UUID_LEN];
    /* Memory check. */
    uint64_t last_limit, allow;     /* allow: the usage ceiling while an allowed overrun lasts */
    uint64_t lowered_ns;            /* when the limit was last seen lowered */
    bool over_reported;
    unsigned drops;                 /* live processes whose usage was dropped */
    /* Share check: one sample a second. */
    uint64_t gt[SOAK_MAX_WINDOWS], gt_t[SOAK_MAX_WINDOWS];
    unsigned gt_cap[SOAK_MAX_WINDOWS];
    bool gt_sat[SOAK_MAX_WINDOWS];  /* a launcher was working through the whole second before */
    unsigned ngt;
    bool unsat_since_sample;
    double share_min, share_max, off_max; /* over the checked windows */
    unsigned cap_min, cap_max;
    unsigned windows;
};

struct wproc {
    int job, slot;
    enum role role;
    bool used, alive, pidns, killed, termed;
    pid_t pid;                      /* our child: the worker, or unshare for a PID-namespace one */
    pid_t target;                   /* the worker's pid in our namespace (what we signal) */
    uint64_t spawned_ns, died_ns;
    uint64_t live_ns;               /* when a check first saw it past its context creation (0: not yet) */
    bool reclaimed, late_reported, stall_reported, drop_reported;
    int status;
    /* The stall check's baseline: the heartbeat last seen, and the time the worker (wait_pid)
     * had waited on a run queue for a CPU when it was seen (/proc/PID/schedstat). */
    uint64_t hb_seen, wait_at_hb;
    pid_t wait_pid;
};

struct stats {
    uint64_t kills, kills_in_alloc, kills_pidns, terms, starts, starts_pidns;
    uint64_t limit_changes, mem_changes, core_changes, ps_runs;
    uint64_t checks, check_rounds;
    uint64_t reclaims, reclaim_max_ns, reclaim_sum_ns;
    uint64_t hb_gap_max_ns;
    uint64_t overrun_episodes, overrun_max;
    uint64_t v[V_NKINDS];
    unsigned v_printed[V_NKINDS];
};

struct soak {
    unsigned seconds;
    uint64_t seed, rng;
    bool no_pidns;                  /* --no-pidns: every process in the driver's PID namespace */
    const char *board_path, *logdir;
    struct soak_board *board;
    struct user users[SOAK_USERS];
    unsigned nusers;
    struct job jobs[SOAK_USERS * SOAK_JOBS_PER];
    unsigned njobs;
    struct wproc procs[SOAK_MAX_PROCS];
    unsigned nprocs;
    uint64_t t0, end_ns;
    struct stats st;
    int logfd;
};

extern const char *const soak_vkind_name[V_NKINDS];

uint64_t soak_now(void);
uint64_t soak_rnd(struct soak *s, uint64_t n);
void soak_violation(struct soak *s, enum vkind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* spawn.c */
pid_t soak_spawn(struct soak *s, const struct user *u, char **argv, char **extra_env, bool pidns, bool quiet);
int soak_start_job(struct soak *s, struct job *j);
int soak_start_worker(struct soak *s, struct job *j, int slot, bool pidns);
void soak_run_tool(struct soak *s, const struct user *u, char **argv);
bool soak_tool_pid(pid_t pid);
void soak_tool_exited(struct soak *s, pid_t pid, int status);
pid_t soak_ns_child(pid_t parent);

/* check.c */
void soak_check_tick(struct soak *s, uint64_t now);
void soak_share_sample(struct soak *s, uint64_t now);
/* Whether job j's region still has a slot of the process (pid as it saw itself, start time, PID
 * namespace inode; 0: unknown). */
bool soak_slot_present(const struct job *j, pid_t pid, uint64_t start, uint32_t pidns);
void soak_final_checks(struct soak *s);

/* chaos.c */
void soak_chaos_tick(struct soak *s, uint64_t now);

#endif
