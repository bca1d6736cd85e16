/* The memory watch of a --user job (lib/core/region/overlimit.c; issue 25 item 6).
 *
 * libvgpu.so holds a job under its memory limit by accounting in the job's usage file, which the
 * job's own user can write (the split layout, vgpu/region.h): a job that forges its usage (zeroes
 * the `used` counter) allocates past any limit. The limits of a --user job are root's, so root
 * checks them against what cannot be forged: NVML's per-process used memory
 * (nvmlDeviceGetComputeRunningProcesses) of the job's processes, on each job GPU that has a
 * limit. A job found over its limit (by more than the slack, below) at two or more samples
 * spanning VGPU_OVERLIMIT_GRACE_NS is acted on by the policy root chose (vgpu run --over-limit):
 *   kill  SIGKILL every process of the job (the default);
 *   stop  SIGSTOP them (root decides: kill -CONT, or end the job);
 *   warn  say it, do nothing else.
 * Every action is said on the watcher's stderr and recorded in the job's page 0 (over_limit*),
 * which vgpu ps shows.
 *
 * The job's processes, as far as the watcher trusts them: processes of the job's user (real uid)
 * that descend from the job's `vgpu run` (PPid chain), or that a live slot of the job names (the
 * usage file is the user's, so a slot's pid is believed only for a process of that user: root
 * never signals another user's process on the word of this one). A process that leaves the job's
 * tree (a double fork, reparented to init) and clears its slot is not seen: the arbiter's cgroups
 * are the full answer (vgpu-security(7)).
 *
 * vgpu-side code (NVML through the loader of vgpu/nvml.h): never in libvgpu.so. Callers: vgpu run
 * while it waits for a --user job's command (cmd/run/child.c); the arbiter later. */
#ifndef VGPU_OVERLIMIT_H
#define VGPU_OVERLIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "vgpu/nvml.h"
#include "vgpu/region.h"

enum vgpu_overlimit_policy {
    VGPU_OVERLIMIT_NONE = 0,            /* not watched (a job of the caller's own user) */
    VGPU_OVERLIMIT_KILL = 1,
    VGPU_OVERLIMIT_STOP = 2,
    VGPU_OVERLIMIT_WARN = 3,
};
enum vgpu_overlimit_action {
    VGPU_OVERLIMIT_NOTHING = 0,         /* never found over its limit */
    VGPU_OVERLIMIT_WARNED = 1,
    VGPU_OVERLIMIT_STOPPED = 2,
    VGPU_OVERLIMIT_KILLED = 3,
};

#define VGPU_OVERLIMIT_PERIOD_NS 500000000ULL    /* at most one sample per half second */
#define VGPU_OVERLIMIT_GRACE_NS  2000000000ULL   /* over for this long (two samples at least) */
/* What NVML may show beyond the limit of an honest job: the library charges what NVML shows
 * (contexts, lazily loaded modules) only after the fact, at most once a second, and may pass the
 * limit by that. 64 MiB, or 1/20 of the limit when that is more. */
#define VGPU_OVERLIMIT_SLACK_MIN (64ULL << 20)
uint64_t vgpu_overlimit_slack(uint64_t limit);

/* "kill" "stop" "warn" -> the policy; -1 for any other word. */
int vgpu_overlimit_policy_parse(const char *word);
/* "kill" "stop" "warn", or NULL for NONE. */
const char *vgpu_overlimit_policy_name(unsigned policy);
/* "killed" "stopped" "warned", or NULL for NOTHING. */
const char *vgpu_overlimit_action_name(unsigned action);

/* The header's over_limit word: policy (bits 0-3), last action (4-7), job device (8-15), how
 * many times it was acted on (16-31, saturating). */
static inline uint32_t vgpu_overlimit_word(unsigned policy, unsigned action, unsigned dev, unsigned count)
{
    return (policy & 0xfu) | (action & 0xfu) << 4 | (dev & 0xffu) << 8 | (count > 0xffffu ? 0xffffu : count) << 16;
}
static inline unsigned vgpu_overlimit_policy_of(uint32_t w) { return w & 0xfu; }
static inline unsigned vgpu_overlimit_action_of(uint32_t w) { return (w >> 4) & 0xfu; }
static inline unsigned vgpu_overlimit_dev_of(uint32_t w) { return (w >> 8) & 0xffu; }
static inline unsigned vgpu_overlimit_count_of(uint32_t w) { return w >> 16; }

/* The job's last over-limit event in words, for vgpu ps: "GPU 0: 3.9 GiB used (NVML) over its
 * limit of 1 GiB for 2 s: killed (--over-limit kill)"; false (buf "") when there was none. */
bool vgpu_overlimit_reason(const struct vgpu_region_header *h, char *buf, size_t len);

/* One job device's episode: from the first sample over the limit until a sample under it. */
struct vgpu_overlimit_dev {
    uint64_t since_ns;                  /* the first sample over (0: under) */
    unsigned samples;                   /* samples over since then */
    bool acted;                         /* the policy was applied in this episode */
};
/* The decision, apart from NVML and signals (unit-tested): takes one sample (`over` at now_ns)
 * and says whether the policy is due now: over at two samples or more, spanning the grace. Due
 * once per episode; a kill starts a new one (processes it did not reach are found again). */
bool vgpu_overlimit_due(struct vgpu_overlimit_dev *d, bool over, uint64_t now_ns);

struct vgpu_overlimit {
    struct vgpu_nvml *nv;
    bool own_nv;                        /* opened by vgpu_overlimit_start: closed by _stop */
    uint64_t last_ns;                   /* CLOCK_MONOTONIC of the last sample */
    bool unknown_said;                  /* "NVML gives no per-process memory" said once */
    struct vgpu_overlimit_dev dev[VGPU_REGION_MAX_DEVICES];
};

/* A watch of job r, or NULL when r is not watched (not a split region, no policy, or not opened
 * ADMIN, so the action could not be recorded) or NVML cannot be opened (said). nv: the caller's
 * NVML (kept open by the caller), or NULL to open one (NVML's init is bounded by the watchdog). */
struct vgpu_overlimit *vgpu_overlimit_start(struct vgpu_region *r, struct vgpu_nvml *nv);
/* Samples the job at most once per VGPU_OVERLIMIT_PERIOD_NS (w NULL: nothing) and applies the
 * policy when due. The NVML calls are bounded by the watchdog (vgpu/watchdog.h). Returns the
 * action taken now (VGPU_OVERLIMIT_NOTHING almost always). */
int vgpu_overlimit_tick(struct vgpu_overlimit *w, struct vgpu_region *r);
void vgpu_overlimit_stop(struct vgpu_overlimit *w);

#endif
