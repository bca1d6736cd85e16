/* fakenvml.h: internals of the fake libnvidia-ml.so.1 (test double, tests/fakegpu/README.md).
 * Every exported entry point is declared here from the vgpu_<symbol>_fn types of vgpu_nvml.h,
 * so a definition that strays from the ABI we call through does not compile. */
#ifndef VGPU_FAKENVML_H
#define VGPU_FAKENVML_H

#include <stdbool.h>

#include "../common/fakestate.h"
#include "vgpu_nvml.h"

#define FN_EXPORT(sym) extern __typeof__(*(vgpu_##sym##_fn)0) sym;
FN_EXPORT(nvmlInit_v2)
FN_EXPORT(nvmlInit)
FN_EXPORT(nvmlInitWithFlags)
FN_EXPORT(nvmlShutdown)
FN_EXPORT(nvmlErrorString)
FN_EXPORT(nvmlSystemGetDriverVersion)
FN_EXPORT(nvmlSystemGetNVMLVersion)
FN_EXPORT(nvmlSystemGetCudaDriverVersion)
FN_EXPORT(nvmlSystemGetCudaDriverVersion_v2)
FN_EXPORT(nvmlDeviceGetCount_v2)
FN_EXPORT(nvmlDeviceGetCount)
FN_EXPORT(nvmlDeviceGetHandleByIndex_v2)
FN_EXPORT(nvmlDeviceGetHandleByIndex)
FN_EXPORT(nvmlDeviceGetHandleByUUID)
FN_EXPORT(nvmlDeviceGetHandleByPciBusId_v2)
FN_EXPORT(nvmlDeviceGetHandleByPciBusId)
FN_EXPORT(nvmlDeviceGetName)
FN_EXPORT(nvmlDeviceGetUUID)
FN_EXPORT(nvmlDeviceGetIndex)
FN_EXPORT(nvmlDeviceGetMinorNumber)
FN_EXPORT(nvmlDeviceGetPciInfo_v3)
FN_EXPORT(nvmlDeviceGetMemoryInfo)
FN_EXPORT(nvmlDeviceGetMemoryInfo_v2)
FN_EXPORT(nvmlDeviceGetUtilizationRates)
FN_EXPORT(nvmlDeviceGetTemperature)
FN_EXPORT(nvmlDeviceGetPowerUsage)
FN_EXPORT(nvmlDeviceGetTotalEnergyConsumption)
FN_EXPORT(nvmlDeviceGetSamples)
FN_EXPORT(nvmlDeviceGetEnforcedPowerLimit)
FN_EXPORT(nvmlDeviceGetPowerManagementLimit)
FN_EXPORT(nvmlDeviceGetClockInfo)
FN_EXPORT(nvmlDeviceGetMaxClockInfo)
FN_EXPORT(nvmlDeviceGetFanSpeed)
FN_EXPORT(nvmlDeviceGetCurrPcieLinkGeneration)
FN_EXPORT(nvmlDeviceGetCurrPcieLinkWidth)
FN_EXPORT(nvmlDeviceGetTopologyCommonAncestor)
FN_EXPORT(nvmlDeviceGetP2PStatus)
FN_EXPORT(nvmlDeviceGetNvLinkState)
FN_EXPORT(nvmlDeviceGetFieldValues)
FN_EXPORT(nvmlDeviceGetEncoderUtilization)
FN_EXPORT(nvmlDeviceGetDecoderUtilization)
FN_EXPORT(nvmlDeviceGetComputeMode)
FN_EXPORT(nvmlDeviceSetComputeMode)
FN_EXPORT(nvmlDeviceGetComputeRunningProcesses)
FN_EXPORT(nvmlDeviceGetComputeRunningProcesses_v2)
FN_EXPORT(nvmlDeviceGetComputeRunningProcesses_v3)
FN_EXPORT(nvmlDeviceGetGraphicsRunningProcesses)
FN_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v2)
FN_EXPORT(nvmlDeviceGetGraphicsRunningProcesses_v3)
FN_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses)
FN_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v2)
FN_EXPORT(nvmlDeviceGetMPSComputeRunningProcesses_v3)
FN_EXPORT(nvmlDeviceGetRunningProcessDetailList)
FN_EXPORT(nvmlDeviceGetProcessUtilization)
FN_EXPORT(nvmlDeviceGetProcessesUtilizationInfo)
FN_EXPORT(nvmlDeviceGetMigMode)
FN_EXPORT(nvmlDeviceSetMigMode)
FN_EXPORT(nvmlDeviceGetMaxMigDeviceCount)
FN_EXPORT(nvmlDeviceGetMigDeviceHandleByIndex)
FN_EXPORT(nvmlDeviceIsMigDeviceHandle)
FN_EXPORT(nvmlDeviceGetGpuInstanceId)
FN_EXPORT(nvmlDeviceGetComputeInstanceId)
FN_EXPORT(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)
FN_EXPORT(nvmlDeviceGetAttributes_v2)
FN_EXPORT(nvmlDeviceGetGpuInstanceProfileInfo)
FN_EXPORT(nvmlDeviceGetGpuInstanceProfileInfoV)
FN_EXPORT(nvmlDeviceGetGpuInstanceProfileInfoByIdV)
FN_EXPORT(nvmlDeviceGetGpuInstancePossiblePlacements_v2)
FN_EXPORT(nvmlDeviceGetGpuInstanceRemainingCapacity)
FN_EXPORT(nvmlDeviceCreateGpuInstance)
FN_EXPORT(nvmlDeviceCreateGpuInstanceWithPlacement)
FN_EXPORT(nvmlDeviceGetGpuInstances)
FN_EXPORT(nvmlDeviceGetGpuInstanceById)
FN_EXPORT(nvmlGpuInstanceGetInfo)
FN_EXPORT(nvmlGpuInstanceDestroy)
FN_EXPORT(nvmlGpuInstanceGetComputeInstanceProfileInfo)
FN_EXPORT(nvmlGpuInstanceGetComputeInstanceProfileInfoV)
FN_EXPORT(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)
FN_EXPORT(nvmlGpuInstanceGetComputeInstancePossiblePlacements)
FN_EXPORT(nvmlGpuInstanceCreateComputeInstance)
FN_EXPORT(nvmlGpuInstanceCreateComputeInstanceWithPlacement)
FN_EXPORT(nvmlGpuInstanceGetComputeInstances)
FN_EXPORT(nvmlGpuInstanceGetComputeInstanceById)
FN_EXPORT(nvmlComputeInstanceGetInfo_v2)
FN_EXPORT(nvmlComputeInstanceDestroy)
#undef FN_EXPORT

#pragma GCC visibility push(hidden)

/* Handles are addresses of these process-local records; the state they name lives in the
 * shared file and is checked on every call (a destroyed instance's handle stops working). */
struct nvmlDevice_st {
    unsigned gpu;
    int gi, ci;                 /* -1: the whole GPU; else a MIG device (slots) */
};
struct nvmlGpuInstance_st {
    unsigned gpu;
    int gi;
};
struct nvmlComputeInstance_st {
    unsigned gpu;
    int gi, ci;
};

/* Common prologue of a device call: initialised, valid handle, GPU not lost, injected delay.
 * Locks the state on success (unlock with fs_unlock()); *out gets the handle. */
nvmlReturn_t fn_enter_dev(nvmlDevice_t dev, const char *fn, struct nvmlDevice_st **out);
nvmlReturn_t fn_enter_gi(nvmlGpuInstance_t gi, const char *fn, struct nvmlGpuInstance_st **out);
nvmlReturn_t fn_enter_ci(nvmlComputeInstance_t ci, const char *fn, struct nvmlComputeInstance_st **out);
nvmlReturn_t fn_enter(const char *fn);   /* initialised + delay; locks */
struct nvmlDevice_st *fn_dev_handle(unsigned gpu, int gi, int ci);
nvmlGpuInstance_t fn_gi_handle(unsigned gpu, int gi);
nvmlComputeInstance_t fn_ci_handle(unsigned gpu, int gi, int ci);
/* Device utilisation in percent over the last sample period (under the lock), and the memory
 * utilisation the fake reports for it. (util.c) */
unsigned fn_gpu_util(unsigned gpu);
unsigned fn_mem_util(unsigned gpu_util);
/* Privileged operations: root, unless VGPU_FAKE_ROOT says otherwise (0: never, 1: always). */
bool fn_privileged(void);

#define FN_ENTER_DEV(dev, d)                                  \
    struct nvmlDevice_st *d;                                  \
    do {                                                      \
        nvmlReturn_t rc_ = fn_enter_dev(dev, __func__, &d);   \
        if (rc_ != NVML_SUCCESS)                              \
            return rc_;                                       \
    } while (0)
#define FN_RETURN(rc) \
    do {              \
        fs_unlock();  \
        return (rc);  \
    } while (0)

#pragma GCC visibility pop

#endif
