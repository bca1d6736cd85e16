/* settings.h: what the Slurm plugin (spank_vgpu.c) decides, kept apart from the SPANK calls so
 * that it reads as plain rules: the site's plugstack.conf arguments, the user's options, and the
 * limits of one task on its GPUs. See man/vgpu-slurm.7. libc and libvgpucore only. */
#ifndef VGPU_SLURM_SETTINGS_H
#define VGPU_SLURM_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>
#include "vgpu/log.h"
#include "vgpu/region.h"

/* plugstack.conf: `required /usr/local/lib/vgpu/spank_vgpu.so [KEY=VALUE ...]`. */
struct vgslurm_site {
    char mem[32];           /* mem=SIZE|PCT%       default memory limit per GPU ("" none) */
    char max_mem[32];       /* max_mem=SIZE|PCT%   the most a user may ask for ("" any) */
    unsigned core;          /* core=PCT            default core limit (0 none) */
    unsigned max_core;      /* max_core=PCT        (0: any) */
    enum vgpu_core_policy policy;   /* policy=hard|soft  default hard */
    unsigned shards_per_gpu;        /* shards_per_gpu=N: without --vgpu-*, a step's limits are
                                     * SLURM_SHARDS_ON_NODE/N of the GPU (memory and time) */
    char library[1024];     /* library=PATH        the libvgpu.so tasks preload */
};

/* The user's options (--vgpu-mem, --vgpu-core, --vgpu-policy). */
struct vgslurm_opts {
    char mem[32];
    unsigned core;          /* 0: not given */
    int policy;             /* -1: not given */
};

/* Parses the plugstack.conf arguments. 0, or -1 with e set (code VGPU_EXIT_USAGE) naming the bad
 * argument and the accepted ones. */
int vgslurm_site_parse(struct vgslurm_site *site, int ac, char **av, const char *default_library, struct vgpu_err *e);

/* Checks one option value as the user typed it (srun/sbatch/salloc, before the job is queued):
 * the syntax, and the site's maxima where no GPU is needed to compare (SIZE against SIZE,
 * percent against percent). name is "vgpu-mem", "vgpu-core" or "vgpu-policy". */
int vgslurm_opt_parse(struct vgslurm_opts *o, const struct vgslurm_site *site, const char *name, const char *val,
                    struct vgpu_err *e);

/* The limits of one task on a GPU of `total` bytes: the user's option, else the share of the
 * step's shards (shards > 0 and the site sets shards_per_gpu), else the site default; checked
 * against the site's maxima. mem and core 0 = none. 0, or -1 with e set (VGPU_EXIT_USAGE: over a
 * maximum, larger than the GPU). */
int vgslurm_task_limits(const struct vgslurm_site *site, const struct vgslurm_opts *o, unsigned shards, uint64_t total,
                      const char *gpu_desc, uint64_t *mem, unsigned *core, enum vgpu_core_policy *policy,
                      struct vgpu_err *e);

/* --vgpu-mem=REQUEST:LIMIT: the task's REQUEST on a GPU of `total` bytes whose limit
 * vgslurm_task_limits made `limit` (its LIMIT), else 0 (nothing lent: one size, or no option).
 * 0, or -1 with e set. */
int vgslurm_task_request(const struct vgslurm_opts *o, uint64_t total, const char *gpu_desc, uint64_t limit,
                         uint64_t *request, struct vgpu_err *e);

/* True when a task gets any limit at all (otherwise the plugin leaves it alone). */
bool vgslurm_wants_limits(const struct vgslurm_site *site, const struct vgslurm_opts *o, unsigned shards);

/* "slurm-JOB.STEP.TASK" with the step's special ids spelled out (batch, extern, interactive). */
void vgslurm_job_name(char *buf, size_t len, uint32_t job, uint32_t step, uint32_t task);

#endif
