/* Root's policy file, <machinedir>/policy (vgpu/machinedir.h, DESIGN.md decision 10): settings
 * every user's vgpu obeys, read strictly: owned by root, a regular file, mode 0644 exactly,
 * under 64 KiB; lines "KEY N", '#' comments and blank lines; any other line is an error naming
 * it, so a broken policy is never silently ignored. Keys:
 *   max-jobs-per-gpu N      the split count (vgpu/jobcount.h), 1..VGPU_MAX_JOBS_LIMIT
 *   acct-retention-days N   accounting records are kept at most N days (vgpu/acct.h), 1..36500
 *   priority-high-users L   who may run --priority high through the arbiter besides root: user
 *   priority-high-groups L  names or uids, group names or gids, comma-separated (vgpu_policy_may_high)
 *   priority-default P      the priority the arbiter grants a job that asks for normal: low or normal
 * A key given twice is an error naming both lines. vgpu-side code. */
#ifndef VGPU_POLICY_H
#define VGPU_POLICY_H

#include "vgpu/log.h"

#define VGPU_POLICY_RETENTION_MAX 36500

#include <stdbool.h>
#include <sys/types.h>

struct vgpu_policy {
    unsigned max_jobs_per_gpu;          /* 0: not set */
    unsigned acct_retention_days;       /* 0: not set */
    char high_users[64], high_groups[64]; /* comma-separated lists ("": nobody but root) */
    int default_prio;                   /* enum vgpu_sched_prio for a normal request: 0 or -1 */
};

/* Reads root's policy: all 0 when there is no machine-wide directory or no policy file. A file
 * that is not root's, writable by others, or has a bad line: -1 with e (VGPU_EXIT_STATE, or
 * VGPU_EXIT_PERMISSION). */
int vgpu_policy_read(struct vgpu_policy *p, struct vgpu_err *e);
/* Whether user `uid` may have --priority high granted: root always; else when the policy names
 * the user (name or uid) or one of its groups (name or gid, from the group database). */
bool vgpu_policy_may_high(const struct vgpu_policy *p, uid_t uid);

#endif
