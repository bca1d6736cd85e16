/* The job region: the shared state of one job (DESIGN.md decision 4).
 *
 * A job is one file <statedir>/jobs/<id>.region, created 0600 by `vgpu run` and mapped
 * MAP_SHARED by every process of the job (libvgpu.so), by `vgpu ps/top/limit/wait`. When the
 * command ends, `vgpu run` records the state EXITED with the status and the time, and leaves
 * the file; vgpu_jobs_list removes it VGPU_EXITED_KEEP_DEFAULT_S later.
 *
 *   page 0  (VGPU_REGION_LIMITS_SIZE bytes): header + limits. Written only by `vgpu run`
 *           (creation, exit status) and `vgpu limit`. Readers (libvgpu.so, ps, top) map it
 *           from a descriptor opened O_RDONLY, so neither a bug nor mprotect(2) in the job can
 *           make that mapping writable (with pages larger than 4 KiB it shares one writable
 *           mapping with the usage part). A process of the job's own user can still open the
 *           file itself, as it could drop LD_PRELOAD: against the job's own user the limits
 *           hold only when the job runs as another user (vgpu run --user, vgpu-security(7)).
 *   page 1+ usage: per-device counters and per-process slots, mapped writable by everyone who
 *           opens the region (the job's processes account into it, readers reap dead slots).
 *
 * Concurrency: no locks at all. Memory is reserved with a compare-and-swap of the device's
 * `used` counter against the limit *before* the real allocation, so concurrent processes can
 * never pass the limit together. A process claims a slot with a CAS on the slot's owner word;
 * a dead process's slot is reclaimed by whoever reaps next (any process of the job, ps, top).
 * A process or reaper killed at any instant cannot block anyone: at worst the usage of the one
 * slot being changed in that instant stays counted (never under-counted) until the job ends.
 *
 * Library code: libc only, never prints, never exits; errors come back through struct vgpu_err.
 * Every device index is bounds-checked (dev < VGPU_REGION_MAX_DEVICES, and < device_count
 * where the caller could be wrong). */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include "vgpu/log.h"
#include "vgpu/proc.h"

#define VGPU_REGION_MAGIC        0x314E475255504756ULL /* "VGPURGN1" as little-endian bytes */
#define VGPU_REGION_VERSION      1
#define VGPU_REGION_MAX_DEVICES  16
#define VGPU_REGION_MAX_SLOTS    1024
#define VGPU_REGION_LIMITS_SIZE  4096   /* page 0; libvgpu.so maps it read-only */
#define VGPU_REGION_UUID_LEN     96
#define VGPU_JOB_ID_LEN          16     /* 12 hex digits + NUL, padded */
#define VGPU_JOB_NAME_LEN        64
#define VGPU_JOB_CMDLINE_LEN     512

enum vgpu_job_state { VGPU_JOB_STARTING = 0, VGPU_JOB_RUNNING = 1, VGPU_JOB_EXITED = 2 };
enum vgpu_core_policy { VGPU_CORE_HARD = 0, VGPU_CORE_SOFT = 1 };

/* One device of the job, in page 0. The index into dev[] is the CUDA ordinal inside the job
 * (the job sees only its GPUs, through CUDA_VISIBLE_DEVICES in this order). */
struct vgpu_region_dev_limits {
    char uuid[VGPU_REGION_UUID_LEN];    /* GPU-... or MIG-..., as NVML and CUDA_VISIBLE_DEVICES spell it */
    uint32_t nvml_index;                /* physical GPU's NVML index when created (informational) */
    uint32_t is_mig;
    uint64_t mem_total;                 /* the device's total memory in bytes (0: unknown) */
    _Atomic uint64_t mem_limit;         /* bytes; 0 = no limit */
    _Atomic uint32_t core_limit;        /* percent of GPU time, 1..100; 0 = no limit */
    _Atomic uint32_t core_policy;       /* enum vgpu_core_policy */
    _Atomic int32_t priority;           /* for the compute limiter; 0 = default */
    /* Virtual device memory (vgpu run --oversubscribe; both were reserved words, zero in regions
     * of an older vgpu, which therefore read as "not oversubscribed"). With VGPU_DEV_OVERSUB,
     * mem_limit is the job's hard cap and mem_device how much of it may stay on the GPU: past
     * that, allocations that can be paged are served from managed memory (lib/hook/spill.c),
     * and those that cannot fail with CUDA_ERROR_OUT_OF_MEMORY. */
    _Atomic uint32_t flags;             /* VGPU_DEV_* */
    _Atomic uint64_t mem_device;        /* bytes; meaningful with VGPU_DEV_OVERSUB */
    /* Accounting (vgpu/acct.h), written by `vgpu run` only, in its wait loop: the job's memory on
     * this device integrated over time, and its share of the device's energy. Were reserved
     * words (0 in regions of an older vgpu, which therefore read as "not measured"). */
    _Atomic uint64_t acct_mem_byte_s;   /* byte-seconds */
    _Atomic uint64_t acct_energy_mj;    /* millijoules; VGPU_ACCT_ENERGY_KNOWN in acct_flags, and
                                         * VGPU_ACCT_ENERGY_UNKNOWN here for a GPU without the counter */
    /* GPU time from NVML's per-process utilisation samples (a GPU the schedule did not measure),
     * valid with VGPU_ACCT_NVML_DEV(d) in acct_flags. Was a reserved word (0 in older regions). */
    _Atomic uint64_t acct_nvml_gpu_ns;
};
#define VGPU_DEV_OVERSUB 1u

struct vgpu_region_header {
    _Atomic uint64_t magic;             /* written last at creation (release) */
    uint32_t version;
    uint32_t limits_size;               /* VGPU_REGION_LIMITS_SIZE */
    uint64_t total_size;                /* file size */
    uint32_t max_devices, max_slots;    /* VGPU_REGION_MAX_DEVICES / _SLOTS */
    char id[VGPU_JOB_ID_LEN];
    char name[VGPU_JOB_NAME_LEN];       /* "" when none was given */
    uint32_t owner_uid;
    int32_t creator_pid;                /* the `vgpu run` process */
    uint64_t creator_start;             /* its start time, /proc/PID/stat field 22 (clock ticks) */
    uint64_t created_realtime_ns;       /* CLOCK_REALTIME */
    char cmdline[VGPU_JOB_CMDLINE_LEN]; /* the command, space-joined, truncated with "..." */
    uint32_t device_count;
    _Atomic uint32_t limits_seq;        /* bumped by every `vgpu limit` change */
    _Atomic uint32_t state;             /* enum vgpu_job_state */
    _Atomic int32_t exit_code;          /* when EXITED: 0..255, or -1 when killed by a signal */
    _Atomic int32_t exit_signal;        /* when EXITED by a signal: its number, else 0 */
    uint32_t creator_pidns;             /* inode of the creator's PID namespace: slots' host_pid are
                                         * pids in it (0: a region of an older vgpu, see the slot) */
    _Atomic uint64_t exited_realtime_ns; /* CLOCK_REALTIME when the command ended (EXITED), else 0 */
    uint32_t layout;                    /* VGPU_LAYOUT_* (was a reserved word: 0 in older regions) */
    /* Accounting (vgpu/acct.h; were reserved words, 0 in older regions): VGPU_ACCT_* flags, and
     * CLOCK_REALTIME of `vgpu run`'s last look at the job (its wait loop, every 250 ms), the end
     * time of a job whose `vgpu run` died. Written by `vgpu run`, and after it died by the job's
     * adopter (cmd/run/adopt.c), which looks the same way until the last process ends. */
    _Atomic uint32_t acct_flags;
    _Atomic uint64_t acct_seen_ns;
    /* The memory watch of a --user job (vgpu/overlimit.h), written by its root watcher alone (the
     * job's user cannot write page 0 of a split region): the policy (0: not watched), and the
     * last time the job was found over its memory limit, how (action), where (job device), by
     * how much (NVML's memory of its processes against the limit then) and when (CLOCK_REALTIME).
     * The word is stored last, so a reader that sees an action sees its figures. Were reserved
     * words (0 in older regions: not watched). */
    _Atomic uint64_t over_limit_bytes;
    _Atomic uint64_t over_limit_limit;
    _Atomic uint64_t over_limit_ns;
    _Atomic uint32_t over_limit;        /* vgpu_overlimit_word(policy, action, dev, count) */
    uint32_t reserved32;
    uint64_t reserved[1];
    struct vgpu_region_dev_limits dev[VGPU_REGION_MAX_DEVICES];
    /* Appended after dev[], in page 0's unused tail (zero in regions of an older vgpu: unknown).
     * The job outlives a `vgpu run` killed with SIGKILL (vgpu_region_job_alive):
     *  - cmd_pid, cmd_start: the command, vgpu run's child (its pid in the creator's namespace,
     *    and its start time), written by vgpu run before the state RUNNING;
     *  - adopter: who took over vgpu run's watch once it died (vgpu_region_adopt_claim): pid << 32
     *    | the low 32 bits of its start time (in the caller's view), 0 when nobody; claimed by
     *    a compare-and-swap of the adopter, which opens the region ADMIN as vgpu run did. */
    _Atomic int32_t cmd_pid;
    uint32_t tail_reserved32;
    _Atomic uint64_t cmd_start;
    _Atomic uint64_t adopter;
    /* Lent memory (vgpu run --mem REQUEST:LIMIT, issue 37, decision 13 of the design notes): per
     * job device, the bytes promised on the GPU (REQUEST; placement, --wait and the arbiter count
     * only these), of which mem_limit is the hard cap (LIMIT). Bytes past REQUEST are borrowed:
     * served as managed memory that is prefetched onto the GPU (lib/hook/spill.c). 0 means REQUEST
     * is all of mem_limit: regions of an older vgpu (appended in page 0's unused tail, which they
     * have zero) and --mem SIZE read as SIZE:SIZE. Written by vgpu run and vgpu limit only. */
    _Atomic uint64_t mem_request[VGPU_REGION_MAX_DEVICES];
    /* Accounting of lent memory (vgpu/acct.h; appended after mem_request, zero in older regions:
     * nothing requested or borrowed), per job device, in byte-seconds as acct_mem_byte_s: the
     * memory promised (REQUEST, or the whole limit without one) and the memory held past it
     * (borrowed), integrated by vgpu run's wait loop alone. */
    _Atomic uint64_t acct_request_byte_s[VGPU_REGION_MAX_DEVICES];
    _Atomic uint64_t acct_borrow_byte_s[VGPU_REGION_MAX_DEVICES];
};

/* The split layout (vgpu run --user, DESIGN.md decision 10): the job's limits and its usage are
 * two files, so that the job's user can account without being able to raise its limits.
 *   <dir>/jobs/<id>.region  the header and limits only (total_size = VGPU_REGION_LIMITS_SIZE),
 *                           owned by root, group the job user's primary group, mode 0640;
 *   <dir>/jobs/<id>.usage   struct vgpu_region_usage at offset 0, owned by the job's user
 *                           (owner_uid), mode 0600;
 * in <dir> = <machine dir>/userjobs/<uid>, which root owns (group: the user's, 0750) with jobs/
 * inside: the user can read and list but neither rename nor replace anything. Readers map the
 * limits from the .region read-only and the usage from the .usage read-write; a reader that
 * cannot open the .usage read-write (another user) cannot open the job. */
#define VGPU_LAYOUT_SPLIT 1u

/* Per-device counters of the whole job (usage part). */
struct vgpu_region_dev_usage {
    _Atomic uint64_t used;              /* bytes reserved by all processes (what the limit checks) */
    _Atomic uint64_t peak;              /* highest `used` seen */
    _Atomic uint64_t gpu_time_ns;       /* for the compute limiter */
    _Atomic uint64_t throttled_ns;      /* time launches waited for the limiter */
    /* GPU memory of processes that descend from the job but left the limiter (no LD_PRELOAD, a
     * static binary, RTLD_DEEPBIND), as NVML reports it: written by whoever looks (vgpu ps,
     * vgpu top, the job's own processes at most once a second, see vgpu_region_set_outside);
     * reservations count it against the limit. */
    _Atomic uint64_t outside_bytes;
    _Atomic int32_t outside_pid;        /* one of those processes (host pid), 0 when none */
    _Atomic uint32_t outside_count;     /* how many */
    _Atomic uint64_t outside_at_ns;     /* CLOCK_MONOTONIC of the last update */
    /* Of `used`: bytes allocated as pageable memory that lives off the device (spilled, or
     * managed memory of an oversubscribed job). Was a reserved word (0 in older regions). */
    _Atomic uint64_t spilled;
};

enum vgpu_slot_state { VGPU_SLOT_FREE = 0, VGPU_SLOT_CLAIMING = 1, VGPU_SLOT_LIVE = 2, VGPU_SLOT_REAPING = 3 };

/* One process of the job. `owner` packs (nstag << 40 | pid << 8 | state) so that claiming, and
 * taking a dead slot over for reaping, are single CASes: no window where the state says "taken"
 * and the pid is not yet known. The pid is the process's own (getpid(): in a container, the
 * container's pid); nstag is the low 24 bits of its PID namespace's inode (0: unknown), so that
 * a reader in another namespace never judges a CLAIMING or REAPING word by a pid that means
 * another process to it. Liveness: vgpu/proc.h (vgpu_proc_liveness). */
struct vgpu_region_slot {
    _Atomic uint64_t owner;             /* VGPU_SLOT_FREE == 0; see vgpu_slot_* helpers below */
    _Atomic uint64_t start_time;        /* /proc/PID/stat field 22 of the process (0: unreadable) */
    _Atomic int32_t host_pid;           /* its pid in the creator's PID namespace (the one NVML
                                         * reports on a host), valid when host_ns ==
                                         * hdr->creator_pidns; filled by the process itself when
                                         * it can see it, else by the first reader that can */
    _Atomic uint32_t host_ns;           /* the namespace host_pid is in (0 in regions of older vgpu) */
    _Atomic uint64_t used[VGPU_REGION_MAX_DEVICES]; /* bytes this process holds, per job device */
    _Atomic uint32_t pidns;             /* inode of the process's PID namespace (0: unknown) */
    /* What this process spilled (of its used[]), returned to dev[].spilled when it is reaped. A
     * process spills on one job device only (spill_dev's low VGPU_SLOT_SPILL_DEV_BITS: that device
     * + 1, 0 none): two reserved words had room for no more. The bits above them hold what this
     * process demoted of its borrowed memory there (decision 13's squeeze, lib/hook/squeeze.c),
     * in MiB rounded up: those bits were always 0 before, so older regions read as "nothing
     * demoted", and the figure goes with the slot when its process dies (vgpu_region_mem_demoted). */
    _Atomic uint32_t spill_dev;
    _Atomic uint64_t spilled;
};

struct vgpu_region_usage {
    _Atomic uint64_t last_reap_ns;      /* CLOCK_MONOTONIC of the last reap (throttles reap_maybe) */
    _Atomic uint32_t reaped_total;      /* slots reclaimed so far (statistics, tests) */
    /* VGPU_SLOT_END_KEPT | n: no slot at or past n was ever claimed, so readers (reap, ps, top)
     * scan slot[0..n) rather than all VGPU_REGION_MAX_SLOTS (see vgpu_region_slot_end). A
     * claimer raises it before its claiming CAS. Was a reserved word: regions of an older vgpu
     * (and HAMi-variable regions) have 0, without the KEPT bit, and are scanned whole. */
    _Atomic uint32_t slot_end;
    /* Launches of the job on each job device, mod 2^16, for a job of several GPUs (lib/hook/gang.c:
     * a rank behind its peers may finish launching what they did before its turn ends). Were
     * reserved words (0 in older regions). */
    _Atomic uint16_t gang_launches[VGPU_REGION_MAX_DEVICES];
    _Atomic uint32_t gang_live;         /* bit d: job device d holds a lease that has not ended */
    _Atomic uint32_t gang_want;         /* bit d: a launch on job device d waits for its turn */
    /* When the job's devices may open their next turns, in µs of CLOCK_MONOTONIC (low 48 bits),
     * and how many times a device went out of its turn (high 16 bits): gang.c. Was a reserved
     * word (0 in older regions: no device out). */
    _Atomic uint64_t gang_open;
    struct vgpu_region_dev_usage dev[VGPU_REGION_MAX_DEVICES];
    struct vgpu_region_slot slot[VGPU_REGION_MAX_SLOTS];
};

#define VGPU_REGION_SIZE (VGPU_REGION_LIMITS_SIZE + sizeof(struct vgpu_region_usage))
#define VGPU_SLOT_END_KEPT 0x80000000u   /* slot_end is maintained (set at creation) */
#define VGPU_SLOT_SPILL_DEV_BITS 5u      /* spill_dev: the device + 1 (0..VGPU_REGION_MAX_DEVICES) */
#define VGPU_SLOT_SPILL_DEV_MASK ((1u << VGPU_SLOT_SPILL_DEV_BITS) - 1)
#define VGPU_SLOT_DEMOTED_UNIT   (1ull << 20)   /* spill_dev's bits 5..30 count demoted MiB */
/* spill_dev's top bit: a move of that process's borrowed memory is in flight (its stream is not
 * done), so what it demoted may not have left the GPU yet (decision 13's order of giving way). */
#define VGPU_SLOT_MOVING         0x80000000u

static inline unsigned vgpu_slot_state_of(uint64_t owner) { return (unsigned)(owner & 0xff); }
static inline pid_t vgpu_slot_pid_of(uint64_t owner) { return (pid_t)(uint32_t)(owner >> 8); }
static inline uint32_t vgpu_slot_nstag_of(uint64_t owner) { return (uint32_t)(owner >> 40); }

/* "<dir>/<id>SUFFIX" beside the region file "<dir>/<id>.region" (its ".usage" of a split region,
 * the ".lend" of vgpu/lend.h), into out[len]; false when `region` is not so named or it does not
 * fit. */
static inline bool vgpu_region_sibling_path(const char *region, const char *suffix, char *out, size_t len)
{
    size_t n = strlen(region), k = strlen(suffix);
    if (n < 7 || strcmp(region + n - 7, ".region") != 0 || n - 7 + k + 1 > len)
        return false;
    memcpy(out, region, n - 7);
    memcpy(out + n - 7, suffix, k + 1);
    return true;
}

/* An open region. */
struct vgpu_region {
    int fd;                             /* -1 once closed; O_RDONLY unless opened ADMIN */
    int use_fd;                         /* the .usage file of a split region (read-write), else -1 */
    const struct vgpu_region_header *hdr;   /* page 0 (read-only unless opened ADMIN): the live
                                             * limits and state; read strings from `info` */
    /* The header as validated at open, a private copy: its strings (id, name, cmdline, UUIDs)
     * and counts cannot change under a reader that checked them. Its limits are refreshed by
     * vgpu_region_check, and are what the job keeps when the file is damaged. */
    struct vgpu_region_header *info;
    bool damaged;                       /* vgpu_region_check found the file truncated or replaced,
                                         * or vgpu_region_fence_fault fenced it off */
    int fence;                          /* VGPU_FENCE_*: who replaces the mappings, and how it went */
    char damaged_why[4200];
    struct vgpu_region_header *hdr_rw;      /* page 0 writable: NULL unless opened ADMIN */
    struct vgpu_region_usage *use;          /* usage part, writable */
    void *map_limits, *map_usage;           /* the mappings (usage may be part of map_limits) */
    size_t map_limits_len, map_usage_len;
    uid_t file_uid;
    bool copy;                              /* VIEW of another user's files: map_limits is private
                                             * memory that vgpu_region_check fills by pread */
    char path[4096];
};

enum vgpu_region_mode {
    VGPU_REGION_JOB = 0,     /* page 0 read-only, usage writable: libvgpu.so, ps, top */
    VGPU_REGION_ADMIN = 1,   /* everything writable: vgpu run, vgpu limit (owner or root) */
    /* The tools that only look (ps, top, metrics, list, wait): as JOB, except that a job whose
     * files are another user's (root looking at a --user job) is read by pread into private
     * memory, again at each vgpu_region_check, and never mapped: its user may truncate the file
     * at any moment, and a mapping of it would kill the reader with SIGBUS (issue 25 item 5).
     * What the reader writes there (a reap, outside memory) then stays in its copy; the job's
     * own processes do both themselves. */
    VGPU_REGION_VIEW = 2,
};

/* What `vgpu run` puts in a new job. */
struct vgpu_job_spec {
    const char *name;                   /* NULL or "" for none; [A-Za-z0-9._-], 1..63 chars */
    const char *cmdline;                /* already joined; truncated to fit */
    unsigned device_count;              /* 1..VGPU_REGION_MAX_DEVICES */
    struct {
        const char *uuid;
        unsigned nvml_index;
        bool is_mig;
        uint64_t mem_total;
        uint64_t mem_limit;             /* 0 = none */
        unsigned core_limit;            /* 0 = none */
        enum vgpu_core_policy core_policy;
        int priority;
        bool oversub;                   /* --oversubscribe: mem_limit is the cap, mem_device on the GPU */
        uint64_t mem_device;
        uint64_t mem_request;           /* --mem REQUEST:LIMIT: REQUEST (< mem_limit); 0 = all of it */
    } dev[VGPU_REGION_MAX_DEVICES];
    /* vgpu run --user (root only): the split layout, limits owned by root and readable by the
     * job's group, usage owned by the job's user (see VGPU_LAYOUT_SPLIT). */
    bool split;
    uid_t job_uid;
    gid_t job_gid;
    unsigned over_limit;                /* enum vgpu_overlimit_policy for a split job (0: not watched) */
};

/* Creates <statedir>/jobs/<new id>.region (0600, explicit mode, umask untouched), fills it and
 * opens it ADMIN. The caller is the creator (its pid is recorded). A name already used by a
 * live job → VGPU_EXIT_BUSY. 0, or -1 with e set (VGPU_EXIT_FAIL/STATE/BUSY/USAGE). */
int vgpu_region_create(struct vgpu_region *r, const char *statedir, const struct vgpu_job_spec *spec,
                       struct vgpu_err *e);

/* True for a name vgpu_region_create accepts: 1..63 of [A-Za-z0-9._-], not starting with '.'
 * or '-'. */
bool vgpu_job_name_valid(const char *name);

/* Opens and validates an existing region (magic, version, sizes, counts, file size, not
 * group/world-writable). Corrupt, truncated or wrong-version → VGPU_EXIT_STATE with the reason;
 * EACCES/EPERM → VGPU_EXIT_PERMISSION; missing → VGPU_EXIT_NOT_FOUND. 0, or -1 with e set. */
int vgpu_region_open(struct vgpu_region *r, const char *path, enum vgpu_region_mode mode, struct vgpu_err *e);
/* Whether the file under the mappings is still whole (fstat: size, link count), before the
 * mappings are touched: a file truncated under a MAP_SHARED mapping kills whoever touches the
 * lost pages with SIGBUS. When it is not, the mappings are replaced in place (same addresses,
 * atomically) by private memory holding the last limits seen (r->info) and empty usage, so
 * every pointer into them stays valid and nothing can fault; r->damaged and r->damaged_why
 * then say why. Returns 0 when whole, 1 when found damaged by this call, 2 when it was already.
 * attach, detach, reap and set_outside check first; reserve and release do not (they are the
 * allocation path: libvgpu.so checks once per driver call, lib/hook/config.c vgpu_job_guard). */
int vgpu_region_check(struct vgpu_region *r);
/* r->fence: the mappings are the file's (WHOLE), being replaced by one thread (FENCING: the
 * others wait), private memory (FENCED), or not all of them could be replaced (FAILED: a fault
 * there cannot be helped). Only WHOLE -> FENCING -> FENCED|FAILED, once. */
enum { VGPU_FENCE_WHOLE = 0, VGPU_FENCE_FENCING = 1, VGPU_FENCE_FENCED = 2, VGPU_FENCE_FAILED = 3 };
/* Whether `addr` lies in one of r's mappings (async-signal-safe). */
bool vgpu_region_maps(const struct vgpu_region *r, const void *addr);
/* For a SIGBUS handler (lib/hook/guard.c), after a load or store at `addr`, in one of r's
 * mappings, faulted (the file was truncated under it): replaces r's mappings in place as
 * vgpu_region_check does when it finds the damage, and sets r->damaged and r->damaged_why.
 * Async-signal-safe (system calls and memcpy only; no lock, no allocation). 1: the faulting access
 * can be retried (the mappings are private memory now, or another thread is replacing them and
 * the retry waits for it); 0: it cannot (the replacement failed, or addr is not r's). */
int vgpu_region_fence_fault(struct vgpu_region *r, const void *addr);
void vgpu_region_close(struct vgpu_region *r);
/* The uid the job runs as: the region file's owner, or for a split region (vgpu run --user)
 * the job's user recorded in the header. */
uid_t vgpu_region_job_uid(const struct vgpu_region *r);
/* True for a split region (vgpu run --user): its limits are root's. */
bool vgpu_region_split(const struct vgpu_region *r);
/* Removes the file (the mapping stays valid until close). */
int vgpu_region_remove(struct vgpu_region *r, struct vgpu_err *e);

/* --- the job's processes ------------------------------------------------------------------ */

/* Claims a slot for the calling process (pid, start time, host pid). Returns the slot index,
 * or -1 with e set when all slots are taken by live processes (after a reap).
 * Call again in a forked child (the parent's slot belongs to the parent). */
int vgpu_region_attach(struct vgpu_region *r, struct vgpu_err *e);
/* Gives the slot back, returning any usage it still holds (clean process exit). */
void vgpu_region_detach(struct vgpu_region *r, int slot);

/* Reserves `bytes` on job device `dev` for slot `slot`, atomically against the current limit,
 * BEFORE the real allocation. The limit counts the job's memory outside the limiter too
 * (outside_bytes): used + outside + bytes must fit. 0 on success; -1 with errno ENOSPC when it
 * would pass the limit (nothing changed), EINVAL for a bad slot/device index, EOVERFLOW when the
 * sum overflows. */
int vgpu_region_reserve(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes);
/* The same on a device that may be oversubscribed (VGPU_DEV_OVERSUB) or lent (a REQUEST below
 * the LIMIT): after reserving against the hard cap, the device part of the job (used + outside
 * - spilled) must fit in mem_device, or in the REQUEST (then spilled bytes are borrowed ones).
 * When it does not and `spillable`, the bytes are recorded as spilled and *spilled is set (the
 * caller then allocates pageable memory); when it does not and the memory cannot be paged
 * (or this process already spilled on another device), nothing changes: -1, ENOSPC. On a
 * device that is not oversubscribed this is vgpu_region_reserve (*spilled = false). */
int vgpu_region_reserve_split(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes, bool spillable,
                              bool *spilled);
/* Counts `bytes` already reserved as spilled (memory that is pageable by nature: managed). false
 * when this process spilled on another device already (the bytes stay counted on the device). */
bool vgpu_region_mark_spilled(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes);
/* Before releasing spilled bytes: they no longer count as spilled. */
void vgpu_region_unspill(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes);
/* Records that slot's process has `bytes` of its borrowed memory on job device dev demoted to
 * host memory now (lib/hook/squeeze.c), kept in MiB rounded up (at most 2^26 - 1 MiB), and
 * whether a move of it is still in flight. Nothing when the process has not spilled there (it
 * then has nothing borrowed to demote). */
void vgpu_region_set_demoted(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes, bool moving);
/* The demoted bytes a slot's spill_dev word holds (the MiB bits, without the moving bit). */
static inline uint64_t vgpu_slot_demoted_of(uint32_t spill_dev)
{
    return (uint64_t)((spill_dev & ~VGPU_SLOT_MOVING) >> VGPU_SLOT_SPILL_DEV_BITS) * VGPU_SLOT_DEMOTED_UNIT;
}
/* Returns `bytes` (after a free, or after the real allocation failed). Never underflows: at
 * most what the slot holds is released. 0, or -1 with errno EINVAL for bad indexes. */
int vgpu_region_release(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes);

/* Finds slots whose process is proven gone (vgpu_proc_liveness: DEAD, judged in the process's
 * own PID namespace) and returns their usage to the device counters; a process that cannot be
 * judged (another namespace not visible from here, an unreadable start time) keeps its usage.
 * A reader in the creator's namespace records the host pid of slots it resolves. Returns the
 * number of slots reclaimed. Safe to call from any number of processes at once. */
int vgpu_region_reap(struct vgpu_region *r);
/* reap() at most once per VGPU_REGION_REAP_NS per job (across all processes): cheap enough to
 * call from the allocation path (one atomic load when it is not time). A quarter of a second, so
 * that a dead process's memory is usable again within a second of its death even on a loaded
 * machine (issue 11; once a second, a soak measured 1209 ms); a walk is a few microseconds per
 * live process (a kill(2) and a read of /proc/PID/stat). */
#define VGPU_REGION_REAP_NS 250000000ULL
int vgpu_region_reap_maybe(struct vgpu_region *r);

/* --- reading -------------------------------------------------------------------------------- */

unsigned vgpu_region_device_count(const struct vgpu_region *r);
/* 0 (no limit) for out-of-range devices. */
uint64_t vgpu_region_mem_limit(const struct vgpu_region *r, unsigned dev);
uint64_t vgpu_region_mem_used(const struct vgpu_region *r, unsigned dev);
/* Oversubscription of device dev: true with *device_bytes (the part that may stay on the GPU)
 * when the job has --oversubscribe there. */
bool vgpu_region_oversub(const struct vgpu_region *r, unsigned dev, uint64_t *device_bytes);
/* Bytes of `used` that live off the device (0 when not oversubscribed). */
uint64_t vgpu_region_mem_spilled(const struct vgpu_region *r, unsigned dev);
/* The job's REQUEST on device dev (--mem REQUEST:LIMIT): what placement counts. mem_limit when
 * the job borrows nothing there (--mem SIZE, an older region), 0 without a limit. */
uint64_t vgpu_region_mem_request(const struct vgpu_region *r, unsigned dev);
/* Whether the job may borrow on device dev (its REQUEST is below its LIMIT), with *request. */
bool vgpu_region_lending(const struct vgpu_region *r, unsigned dev, uint64_t *request);
/* What the job borrows on device dev now: its memory (outside the limiter included) past its
 * REQUEST; 0 when it borrows nothing there. A REQUEST lowered below use by vgpu limit makes the
 * excess borrowed at once. */
uint64_t vgpu_region_mem_borrowed(const struct vgpu_region *r, unsigned dev);
/* What the job's processes demoted of their borrowed memory on device dev (decision 13's
 * squeeze): the sum of the slots' figures (a dead process's until it is reaped), in MiB
 * granules. 0 for a job that borrows nothing, and in regions of an older vgpu. */
uint64_t vgpu_region_mem_demoted(const struct vgpu_region *r, unsigned dev);
/* Whether a process of the job has a move of its borrowed memory on device dev in flight. */
bool vgpu_region_mem_moving(const struct vgpu_region *r, unsigned dev);
/* One past the highest slot that may be in use: the bound of every scan of the slots. Re-read it
 * at each step of a scan (`for (i = 0; i < vgpu_region_slot_end(r); i++)`), so that a slot claimed
 * during the scan, past the bound read at its start, is still seen. VGPU_REGION_MAX_SLOTS for a
 * region that does not keep the bound. */
unsigned vgpu_region_slot_end(const struct vgpu_region *r);
/* Live processes (LIVE slots), into pids[] (their own pids) and host_pids[] (pids in the
 * creator's namespace, 0 while unknown), up to max; returns the count (may exceed max). */
unsigned vgpu_region_pids(const struct vgpu_region *r, pid_t *pids, int32_t *host_pids, unsigned max);
/* The pid of slot `slot`'s process in the caller's view (its /proc, kill(2) when the caller's
 * /proc is its own); 0 when unknown (another PID namespace, host pid not resolved). */
pid_t vgpu_region_slot_view_pid(const struct vgpu_region *r, int slot);
/* True unless the creator (`vgpu run`) is proven dead (vgpu_proc_liveness). */
bool vgpu_region_creator_alive(const struct vgpu_region *r);
/* The creator's and every live slot's pid in the caller's view (for vgpu_proc_descends): those
 * that cannot be resolved from here are left out. Returns how many (at most max). */
unsigned vgpu_region_roots(const struct vgpu_region *r, pid_t *roots, unsigned max);
/* --- a job whose `vgpu run` died (liveness.c) ---------------------------------------------- */

/* vgpu run, right after starting the command: records its pid and start time (ADMIN). */
void vgpu_region_set_command(struct vgpu_region *r, pid_t pid);
/* Whether any process of the job may still live: `vgpu run`, a live slot, the command itself,
 * or a process whose environment names this job's region (VGPU_REGION=.../<id>.region): one that
 * has not touched the GPU yet, or a descendant left behind by the command. Never false while one
 * of them cannot be judged from here. The walk of /proc is made only when all the others are
 * proven gone. */
bool vgpu_region_job_alive(const struct vgpu_region *r);
/* Whether someone alive has adopted the job (hdr->adopter). */
bool vgpu_region_adopted(const struct vgpu_region *r);
/* The adopter's claim (ADMIN): the caller becomes the adopter unless a live process already is.
 * true when it is now the only one. */
bool vgpu_region_adopt_claim(struct vgpu_region *r);

/* Records the job's memory outside the limiter on device dev (see vgpu_region_dev_usage). */
void vgpu_region_set_outside(struct vgpu_region *r, unsigned dev, uint64_t bytes, pid_t one_pid, unsigned count);
uint64_t vgpu_region_outside(const struct vgpu_region *r, unsigned dev);

/* --- changing (ADMIN only: vgpu run, vgpu limit) --------------------------------------------- */

/* -1 with e set (USAGE) for a bad device, (PERMISSION) when not opened ADMIN. */
/* The LIMIT alone: a REQUEST below it is kept, one at or above it dropped (then not lending). */
int vgpu_region_set_mem_limit(struct vgpu_region *r, unsigned dev, uint64_t bytes, struct vgpu_err *e);
/* Sets REQUEST and LIMIT together (REQUEST == LIMIT: not lending; limit 0: none, and no
 * request). A REQUEST above the LIMIT is refused (USAGE) and nothing changes. */
int vgpu_region_set_mem(struct vgpu_region *r, unsigned dev, uint64_t request, uint64_t limit, struct vgpu_err *e);
int vgpu_region_set_core_limit(struct vgpu_region *r, unsigned dev, unsigned pct, enum vgpu_core_policy pol,
                               struct vgpu_err *e);
/* EXITED also records the time (exited_realtime_ns), before the state, so a reader that sees
 * EXITED sees the status and the time. */
int vgpu_region_set_state(struct vgpu_region *r, enum vgpu_job_state st, int exit_code, int exit_signal,
                          struct vgpu_err *e);

/* --- processes: vgpu/proc.h (vgpu_proc_start_time, vgpu_proc_liveness, ...) ------------------ */

/* --- enumerating jobs (vgpu ps/top/limit/wait) ------------------------------------------------ */

struct vgpu_job_ref {
    char id[VGPU_JOB_ID_LEN];
    char name[VGPU_JOB_NAME_LEN];
    char path[4096];
    uid_t owner;                        /* the file's owner */
    uint64_t created_ns;                /* CLOCK_REALTIME (the file's mtime when unreadable) */
    bool readable;                      /* false: another user's job (0600): only id/owner known */
    unsigned state;                     /* enum vgpu_job_state (readable jobs only) */
    bool finishing;                     /* EXITED, its record still being written by a live adopter
                                         * (vgpu run's finisher: cmd/run/finisher.c) */
    bool damaged;                       /* vgpu_jobs_find only: the region cannot be used, */
    bool misnamed;                      /* ... because its id is not its file name (a copy) */
    char damaged_why[512];              /* ... because of this */
};

/* How long an EXITED job stays listed (so that vgpu wait started late still gets its status):
 * 60 seconds, or VGPU_EXITED_KEEP_S (a testing knob: seconds, fractions allowed). */
#define VGPU_EXITED_KEEP_DEFAULT_S 60

/* Every job in <statedir>/jobs, sorted by creation time. Readable regions are reaped, and
 * stale ones (creator dead and no live slot, or EXITED longer than VGPU_EXITED_KEEP_S ago) are
 * removed, with the job's output log (<id>.log, vgpu run --detach) if any. Corrupt files are skipped (left in
 * place, counted in *corrupt when not NULL). *out is malloc'd (free it). 0, or -1 with e set. */
int vgpu_jobs_list(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                   struct vgpu_err *e);

/* The same, and also the regions that cannot be read (damaged set, why in damaged_why; still
 * counted in *corrupt): vgpu ps lists a damaged job rather than hide it (issue 36 N14). */
int vgpu_jobs_list_damaged(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                           struct vgpu_err *e);

/* Called by vgpu_jobs_list with an ended job's region before it removes the job, when the caller
 * owns the region's file: 0 lets it go, -1 keeps it for the next listing. vgpu sets it to write
 * the job's accounting record when `vgpu run` could not (vgpu_acct_recover, vgpu/acct.h);
 * libvgpu.so never lists jobs and leaves it unset. */
typedef int (*vgpu_jobs_ended_fn)(const struct vgpu_region *r);
void vgpu_jobs_on_ended(vgpu_jobs_ended_fn fn);
/* Called by vgpu_jobs_list with the path of a running job whose `vgpu run` is proven dead while
 * its processes live and nobody alive adopted it, when the caller owns the region's file: vgpu
 * starts an adopter there (cmd/run/adopt.c) that watches the job as vgpu run did and writes its
 * record when its last process ends. Unset in libvgpu.so. */
typedef void (*vgpu_jobs_orphan_fn)(const char *region_path);
void vgpu_jobs_on_orphan(vgpu_jobs_orphan_fn fn);

/* Finds one job by exact id, else exact name, else unique id prefix, and opens it in `mode`.
 * A name shared by an ended job and a later one means the job that has not ended, else the
 * newest. A key that names one job and is (the start of) another's id is ambiguous.
 * VGPU_EXIT_NOT_FOUND (listing the jobs), VGPU_EXIT_USAGE (ambiguous), VGPU_EXIT_PERMISSION
 * (another user's job), or VGPU_EXIT_STATE (its region is damaged: which file, and why; a
 * region whose id is not its file name counts as damaged). 0, or -1 with e set. */
int vgpu_jobs_find(const char *statedir, const char *key, enum vgpu_region_mode mode, struct vgpu_region *r,
                   struct vgpu_err *e);

#endif
