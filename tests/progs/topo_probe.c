/* topo_probe: the NVML topology an NCCL-like client sees, one line per pair of GPUs:
 *   A B ancestor=LEVEL nvlink=P2P_STATUS read=P2P_STATUS
 * (LEVEL: nvmlDeviceGetTopologyCommonAncestor's value, 0 10 20 30 40 50; P2P_STATUS:
 * nvmlDeviceGetP2PStatus's, 0 = OK), then per GPU "A links=N" (active NVLinks by
 * nvmlDeviceGetNvLinkState, or "links=unsupported") and the answer past the last link
 * ("A link18=RC"). Linked with libnvidia-ml.so.1. */
#include <stdio.h>

#include "vgpu_nvml.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
extern __typeof__(*(vgpu_nvmlDeviceGetTopologyCommonAncestor_fn)0) nvmlDeviceGetTopologyCommonAncestor;
extern __typeof__(*(vgpu_nvmlDeviceGetP2PStatus_fn)0) nvmlDeviceGetP2PStatus;
extern __typeof__(*(vgpu_nvmlDeviceGetNvLinkState_fn)0) nvmlDeviceGetNvLinkState;

int main(void)
{
    unsigned n;
    nvmlDevice_t d[16];
    if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS)
        return 1;
    if (n > 16)
        n = 16;
    for (unsigned i = 0; i < n; i++)
        if (nvmlDeviceGetHandleByIndex_v2(i, &d[i]) != NVML_SUCCESS)
            return 1;
    for (unsigned a = 0; a < n; a++)
        for (unsigned b = a + 1; b < n; b++) {
            nvmlGpuTopologyLevel_t level;
            nvmlGpuP2PStatus_t nv, rd;
            if (nvmlDeviceGetTopologyCommonAncestor(d[a], d[b], &level) != NVML_SUCCESS ||
                nvmlDeviceGetP2PStatus(d[a], d[b], NVML_P2P_CAPS_INDEX_NVLINK, &nv) != NVML_SUCCESS ||
                nvmlDeviceGetP2PStatus(d[a], d[b], NVML_P2P_CAPS_INDEX_READ, &rd) != NVML_SUCCESS)
                return 1;
            printf("%u %u ancestor=%d nvlink=%d read=%d\n", a, b, (int)level, (int)nv, (int)rd);
        }
    for (unsigned a = 0; a < n; a++) {
        unsigned links = 0;
        nvmlEnableState_t on;
        nvmlReturn_t rc = NVML_SUCCESS;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS && rc == NVML_SUCCESS; l++)
            if ((rc = nvmlDeviceGetNvLinkState(d[a], l, &on)) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED)
                links++;
        if (rc == NVML_ERROR_NOT_SUPPORTED)
            printf("%u links=unsupported\n", a);
        else
            printf("%u links=%u\n", a, links);
        printf("%u link18=%d\n", a, (int)nvmlDeviceGetNvLinkState(d[a], NVML_NVLINK_MAX_LINKS, &on));
    }
    return 0;
}
