/* vgpu run --gpus N: a job on N GPUs chosen together by placement (vgpu-run(1)). */
#ifndef VGPU_CMD_RUN_GPUS_H
#define VGPU_CMD_RUN_GPUS_H

#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/topology.h"

/* Checks --gpus N against the other options (--gpu, --mem): 0 with *count set, or -1 with e
 * (VGPU_EXIT_USAGE) saying what was wrong. */
int vgpu_run_gpus_parse(const char *arg, const char *gpu, const char *mem, unsigned *count, struct vgpu_err *e);

/* Says on stderr which GPUs were chosen and how close they are:
 * "vgpu run: placed on GPUs 0, 1 (GPU-..., GPU-...): NVLink". */
void vgpu_run_gpus_say(const struct vgpu_gpu_list *list, const unsigned *pos, unsigned n,
                       const struct vgpu_topology *topo);

#endif
