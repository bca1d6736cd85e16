/* topology.c: how the simulated GPUs are connected, from the scenario's "nvlink_island",
 * "pcie_switch" and "numa_node" (tests/fakegpu/README.md): GPUs of one island share NVLinks
 * (all 18 links of each active, P2P over NVLink OK), GPUs behind one PCIe switch have it as
 * their common ancestor, otherwise their NUMA node or the whole system. MIG device handles
 * answer for their GPU, as the driver's do for the physical device. */
#include "fakenvml.h"

static const struct fs_gpu_static *stat_of(const struct nvmlDevice_st *d) { return &fs_state()->gpu[d->gpu].s; }

/* Validates the second handle of a two-device call (fn_enter_dev locks; this one unlocks). */
static nvmlReturn_t other_dev(nvmlDevice_t dev, const char *fn, struct nvmlDevice_st **out)
{
    nvmlReturn_t rc = fn_enter_dev(dev, fn, out);
    if (rc == NVML_SUCCESS)
        fs_unlock();
    return rc;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    struct nvmlDevice_st *b;
    nvmlReturn_t rc = other_dev(device2, __func__, &b);
    if (rc != NVML_SUCCESS)
        return rc;
    FN_ENTER_DEV(device1, a);
    if (!pathInfo)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gpu_static *sa = stat_of(a), *sb = stat_of(b);
    if (a->gpu == b->gpu)
        *pathInfo = NVML_TOPOLOGY_INTERNAL;
    else if (sa->pcie_switch && sa->pcie_switch == sb->pcie_switch)
        *pathInfo = NVML_TOPOLOGY_SINGLE;
    else if (sa->numa_node == sb->numa_node)
        *pathInfo = NVML_TOPOLOGY_NODE;
    else
        *pathInfo = NVML_TOPOLOGY_SYSTEM;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                    nvmlGpuP2PStatus_t *p2pStatus)
{
    struct nvmlDevice_st *b;
    nvmlReturn_t rc = other_dev(device2, __func__, &b);
    if (rc != NVML_SUCCESS)
        return rc;
    FN_ENTER_DEV(device1, a);
    if (!p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gpu_static *sa = stat_of(a), *sb = stat_of(b);
    bool nvlink = a->gpu != b->gpu && sa->nvlink_island && sa->nvlink_island == sb->nvlink_island;
    switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_NVLINK:
    case NVML_P2P_CAPS_INDEX_ATOMICS:
        *p2pStatus = nvlink ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
        break;
    default:   /* reads, writes, PCI: over NVLink, or through one CPU's root complex */
        *p2pStatus = nvlink || sa->numa_node == sb->numa_node ? NVML_P2P_STATUS_OK
                                                              : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED;
        break;
    }
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    FN_ENTER_DEV(device, d);
    if (!isActive || link >= NVML_NVLINK_MAX_LINKS)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!stat_of(d)->nvlink_island)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *isActive = NVML_FEATURE_ENABLED;
    FN_RETURN(NVML_SUCCESS);
}
