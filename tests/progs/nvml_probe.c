/* nvml_probe: what an NVML client (nvidia-smi, a framework's device query) sees, one line per
 * GPU:  gpu=I uuid=U total=T free=F used=U v2total=T v2reserved=R v2free=F v2used=U
 * after a first line  count=N  (nvmlDeviceGetCount_v2). Linked with libnvidia-ml.so.1 directly;
 * with --dlopen the functions are found with dlopen + dlsym instead, as nvidia-smi does. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vgpu_nvml.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m);

int main(int argc, char **argv)
{
    vgpu_nvmlInit_v2_fn init = nvmlInit_v2;
    vgpu_nvmlDeviceGetCount_v2_fn count = nvmlDeviceGetCount_v2;
    vgpu_nvmlDeviceGetHandleByIndex_v2_fn by_index = nvmlDeviceGetHandleByIndex_v2;
    vgpu_nvmlDeviceGetUUID_fn uuid_of = nvmlDeviceGetUUID;
    vgpu_nvmlDeviceGetMemoryInfo_fn mem = nvmlDeviceGetMemoryInfo;
    vgpu_nvmlDeviceGetMemoryInfo_v2_fn mem2 = nvmlDeviceGetMemoryInfo_v2;
    if (argc > 1 && !strcmp(argv[1], "--dlopen")) {
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        if (!h)
            return 2;
        init = (vgpu_nvmlInit_v2_fn)dlsym(h, "nvmlInit_v2");
        count = (vgpu_nvmlDeviceGetCount_v2_fn)dlsym(h, "nvmlDeviceGetCount_v2");
        by_index = (vgpu_nvmlDeviceGetHandleByIndex_v2_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
        uuid_of = (vgpu_nvmlDeviceGetUUID_fn)dlsym(h, "nvmlDeviceGetUUID");
        mem = (vgpu_nvmlDeviceGetMemoryInfo_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
        mem2 = (vgpu_nvmlDeviceGetMemoryInfo_v2_fn)dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    }
    unsigned n = 0;
    if (init() != NVML_SUCCESS || count(&n) != NVML_SUCCESS) {
        fprintf(stderr, "nvml_probe: NVML failed\n");
        return 2;
    }
    printf("count=%u\n", n);
    for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t d;
        char uuid[96] = "";
        nvmlMemory_t m = { 0, 0, 0 };
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = nvmlMemory_v2;
        if (by_index(i, &d) != NVML_SUCCESS)
            return 2;
        (void)uuid_of(d, uuid, sizeof uuid);
        nvmlReturn_t r1 = mem(d, &m), r2 = mem2(d, &m2);
        printf("gpu=%u uuid=%s rc=%d total=%llu free=%llu used=%llu rc2=%d v2total=%llu v2reserved=%llu v2free=%llu v2used=%llu\n",
               i, uuid, r1, m.total, m.free, m.used, r2, m2.total, m2.reserved, m2.free, m2.used);
    }
    return 0;
}
