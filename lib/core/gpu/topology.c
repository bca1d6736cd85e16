/* NVML topology between the GPUs of a listing (see vgpu/topology.h). */
#include "vgpu/topology.h"

#include <string.h>

#include "vgpu/nvml.h"

const char *vgpu_near_name(enum vgpu_near n)
{
    switch (n) {
    case VGPU_NEAR_SAME_GPU: return "the same GPU";
    case VGPU_NEAR_NVLINK: return "NVLink";
    case VGPU_NEAR_PCIE_SWITCH: return "one PCIe switch";
    case VGPU_NEAR_CPU: return "one CPU";
    case VGPU_NEAR_SYSTEM: break;
    }
    return "no NVLink or PCIe switch shared";
}

/* The physical GPU's handle of a listing entry (a MIG device answers for its parent). */
static void *physical(const struct vgpu_gpu_list *list, const struct vgpu_gpu *g)
{
    if (!g->is_mig)
        return g->lost || g->unreachable[0] ? NULL : g->handle;
    for (unsigned i = 0; i < list->count; i++)
        if (!list->gpu[i].is_mig && list->gpu[i].index == g->index)
            return physical(list, &list->gpu[i]);
    return NULL;
}

static enum vgpu_near between(struct vgpu_nvml *nv, nvmlDevice_t a, nvmlDevice_t b)
{
    if (!a || !b)
        return VGPU_NEAR_SYSTEM;
    if (a == b)
        return VGPU_NEAR_SAME_GPU;
    nvmlGpuP2PStatus_t p2p;
    if (nv->nvmlDeviceGetP2PStatus &&
        nv->nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_NVLINK, &p2p) == NVML_SUCCESS &&
        p2p == NVML_P2P_STATUS_OK)
        return VGPU_NEAR_NVLINK;
    nvmlGpuTopologyLevel_t level;
    if (!nv->nvmlDeviceGetTopologyCommonAncestor || nv->nvmlDeviceGetTopologyCommonAncestor(a, b, &level) != NVML_SUCCESS)
        return VGPU_NEAR_SYSTEM;
    if (level <= NVML_TOPOLOGY_MULTIPLE)
        return VGPU_NEAR_PCIE_SWITCH;   /* (INTERNAL: two GPUs of one board, behind its switch) */
    if (level <= NVML_TOPOLOGY_NODE)
        return VGPU_NEAR_CPU;
    return VGPU_NEAR_SYSTEM;
}

void vgpu_gpus_topology(struct vgpu_nvml *nv, const struct vgpu_gpu_list *list, struct vgpu_topology *out)
{
    memset(out, VGPU_NEAR_SYSTEM, sizeof *out);
    for (unsigned i = 0; i < list->count; i++)
        for (unsigned j = i; j < list->count; j++) {
            enum vgpu_near n = between(nv, physical(list, &list->gpu[i]), physical(list, &list->gpu[j]));
            out->near[i][j] = out->near[j][i] = (uint8_t)n;
        }
}
