/* vgpu run's use of the GPU list kept between jobs (vgpu/gpu_cache.h): the list before the
 * command, and the check against NVML while the command runs. */
#ifndef VGPU_CMD_RUN_KEPT_LIST_H
#define VGPU_CMD_RUN_KEPT_LIST_H

#include <stdbool.h>
#include "vgpu/gpu.h"
#include "vgpu/region.h"

/* Fills list from the kept one when it is still the driver's (remembered for the check). */
bool vgpu_run_kept_list(struct vgpu_gpu_list *list);

/* Once per vgpu run, from the command's walk, when its GPUs came from the kept list: NVML's list
 * now, compared for the job's GPUs. One that agrees is kept again (its age starts over); one that
 * disagrees is forgotten and said on stderr. The NVML handle goes to the job's accounting, which
 * would load NVML at this point anyway. */
void vgpu_run_kept_list_check(struct vgpu_region *r);

#endif
