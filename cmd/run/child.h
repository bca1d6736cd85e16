/* vgpu run: the command as vgpu run's child: its environment, the signals vgpu run passes on,
 * and the wait for it, during which vgpu run reaps the job's dead processes (vgpu-run(1)). */
#ifndef VGPU_CMD_RUN_CHILD_H
#define VGPU_CMD_RUN_CHILD_H

#include "vgpu/region.h"

/* setenv(3), or VGPU_EXIT_RUN_FAILED after saying why. */
int vgpu_run_set_env(const char *name, const char *value);
/* CUDA_VISIBLE_DEVICES (the job's GPUs by UUID), VGPU_REGION and LD_PRELOAD (the library first)
 * for the command. 0, or VGPU_EXIT_RUN_FAILED after saying why. */
int vgpu_run_prepare_environment(const char *region_path, const char *library, const struct vgpu_job_spec *spec);
/* Starts argv as the job's command (as the --user user when set), forwards signals sent to vgpu
 * run, reaps the job's dead processes while it waits, and records how the command ended in the
 * job. prune_dir (or NULL): a state directory whose jobs are listed once the command runs, which
 * removes those that ended long ago (vgpu_jobs_list_all): off the command's start, where it read
 * every kept job's region. The command's exit status, -SIG when a signal killed it, or
 * VGPU_EXIT_RUN_* when it could not be started or waited for. */
int vgpu_run_child(struct vgpu_region *r, char **argv, const char *place_dir, const char *prune_dir);
/* Dies by `sig` as the command did, without a second core dump. */
void vgpu_run_die_by_signal(int sig) __attribute__((noreturn));

#endif
