/* A job whose `vgpu run` died (kill -9): adopted by the next reader that owns it (see adopt.c). */
#ifndef VGPU_CMD_RUN_ADOPT_H
#define VGPU_CMD_RUN_ADOPT_H

/* vgpu_jobs_on_orphan's hook: starts a detached adopter process for the job at region_path,
 * which claims it (one adopter per job), watches it as vgpu run's wait loop did, and writes its
 * record when its last process ends. Returns at once. */
void vgpu_run_adopt(const char *region_path);

#endif
