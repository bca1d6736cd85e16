/* How close the GPUs of this machine are to each other (NVML topology), for placing a job on
 * several GPUs together (vgpu run --gpus N): GPUs that share an NVLink are best, then GPUs
 * behind one PCIe switch, then one CPU's, then anything. vgpu-side code. */
#ifndef VGPU_TOPOLOGY_H
#define VGPU_TOPOLOGY_H

#include <stdint.h>
#include "vgpu/gpu.h"

/* Closeness of two GPUs, nearest first (a MIG device is as close as its physical GPU). */
enum vgpu_near {
    VGPU_NEAR_SAME_GPU = 0,      /* two MIG devices of one GPU */
    VGPU_NEAR_NVLINK = 1,        /* P2P over NVLink */
    VGPU_NEAR_PCIE_SWITCH = 2,   /* common ancestor: one or more PCIe switches */
    VGPU_NEAR_CPU = 3,           /* one host bridge or NUMA node */
    VGPU_NEAR_SYSTEM = 4,        /* across CPUs, or not known */
};

struct vgpu_topology {
    uint8_t near[VGPU_MAX_GPUS][VGPU_MAX_GPUS];   /* enum vgpu_near, by list position */
};

/* Fills the matrix from NVML (nvmlDeviceGetP2PStatus for NVLink,
 * nvmlDeviceGetTopologyCommonAncestor for the rest). What NVML cannot tell (no such entry point,
 * an error, a lost GPU) is VGPU_NEAR_SYSTEM: placement then goes by memory alone. */
void vgpu_gpus_topology(struct vgpu_nvml *nv, const struct vgpu_gpu_list *list, struct vgpu_topology *out);

/* "the same GPU", "NVLink", "one PCIe switch", "one CPU", "no NVLink or PCIe switch shared". */
const char *vgpu_near_name(enum vgpu_near n);

#endif
