/* Jobs that root starts as another user (vgpu run --user; DESIGN.md decision 10): their limits
 * must be where that user can read but not write them, and their usage where the user's
 * processes can account, so they live apart from every user's own state directory:
 *
 *   <machine dir>/userjobs/              root's, 0755
 *   <machine dir>/userjobs/<uid>/        root's, group the user's primary group, 0750
 *   <machine dir>/userjobs/<uid>/jobs/   likewise: <id>.region (root's, 0640), <id>.usage (the
 *                                        user's, 0600), <id>.log (vgpu run --detach, root's)
 *
 * <machine dir>/userjobs/<uid> is laid out as a state directory (a jobs/ inside), so the job
 * listing and lookup of vgpu/region.h work on it unchanged. The user can list and read, but
 * cannot rename, replace or remove anything there; root's vgpu ps/top/limit/wait see every
 * user's, a user's see their own (and their own state directory's, as always). */
#ifndef VGPU_USERJOBS_H
#define VGPU_USERJOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "vgpu/log.h"
#include "vgpu/region.h"

/* Root only: makes (when missing) and checks <machine dir>/userjobs/<uid> with its jobs/, owned
 * by root with group gid, and puts its path in out. 0, or -1 with e set. */
int vgpu_userjobs_prepare(uid_t uid, gid_t gid, char *out, size_t len, struct vgpu_err *e);

/* The user-job directories the caller may look at: all of them for root, the caller's own
 * otherwise (when it exists). *dirs is malloc'd, each entry 4096 bytes (free it). Never fails:
 * a missing or unsafe directory is left out (said at debug level). */
size_t vgpu_userjobs_dirs(char (**dirs)[4096]);

/* vgpu_statedir(buf, len, false, e), except that a state directory that does not exist gives
 * "" (the caller may still have jobs root started for it). 0, or -1 with e set. */
int vgpu_statedir_or_none(char *buf, size_t len, struct vgpu_err *e);

/* vgpu_jobs_list ("" : no state directory of one's own), then the same for every directory of vgpu_userjobs_dirs, as one list sorted
 * by creation. */
int vgpu_jobs_list_all(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                       struct vgpu_err *e);
/* The same with the damaged regions too (vgpu_jobs_list_damaged): for vgpu ps. */
int vgpu_jobs_list_all_damaged(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                               struct vgpu_err *e);
/* vgpu_jobs_list_all, again every 10 ms for at most timeout_ms while a job of the caller's is
 * `finishing` (EXITED, its record being written by vgpu run's finisher, cmd/run/finisher.c): a
 * reader of records run right after `vgpu run` then sees the job's. Returns how many were still
 * finishing at the deadline (0: none), or -1 with e set when the listing failed. */
int vgpu_jobs_await_records(const char *statedir, int timeout_ms, struct vgpu_err *e);

/* vgpu_jobs_find in the state directory, and when the key is not found there, in each
 * user-job directory. */
int vgpu_jobs_find_all(const char *statedir, const char *key, enum vgpu_region_mode mode, struct vgpu_region *r,
                       struct vgpu_err *e);

#endif
