/* device.c: what NVML says about one device: identity, memory, sensors (which follow the
 * simulated load), compute mode. MIG device handles answer for their instance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

static struct fs_gpu *gpu_of(const struct nvmlDevice_st *d) { return &fs_state()->gpu[d->gpu]; }

static nvmlReturn_t put_string(char *out, unsigned int len, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    FN_ENTER_DEV(device, d);
    struct fs_gpu *g = gpu_of(d);
    char buf[160];
    if (d->gi >= 0) /* e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb" */
        snprintf(buf, sizeof buf, "%s MIG %s", g->s.name, g->s.profiles[g->gi[d->gi].profile].name);
    else
        snprintf(buf, sizeof buf, "%s", g->s.name);
    FN_RETURN(put_string(name, length, buf));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    FN_ENTER_DEV(device, d);
    struct fs_gpu *g = gpu_of(d);
    FN_RETURN(put_string(uuid, length, d->gi >= 0 ? g->gi[d->gi].ci[d->ci].uuid : g->s.uuid));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    FN_ENTER_DEV(device, d);
    if (!index)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *index = d->gpu;
    if (d->gi >= 0) { /* a MIG device's index among its parent's MIG devices */
        int gis[FS_MAX_GI * FS_MAX_CI], cis[FS_MAX_GI * FS_MAX_CI];
        unsigned n = fs_mig_devices(d->gpu, gis, cis, FS_MAX_GI * FS_MAX_CI);
        for (unsigned i = 0; i < n; i++)
            if (gis[i] == d->gi && cis[i] == d->ci)
                *index = i;
    }
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    FN_ENTER_DEV(device, d);
    if (!minor)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *minor = gpu_of(d)->s.minor;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    FN_ENTER_DEV(device, d);
    if (!pci)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gpu_static *s = &gpu_of(d)->s;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", s->pci_domain & 0xffff, s->pci_bus,
             s->pci_device);
    snprintf(pci->busId, sizeof pci->busId, "%s", s->pci_bus_id);
    pci->domain = s->pci_domain;
    pci->bus = s->pci_bus;
    pci->device = s->pci_device;
    pci->pciDeviceId = s->pci_device_id;
    pci->pciSubSystemId = s->pci_subsystem_id;
    FN_RETURN(NVML_SUCCESS);
}

/* total/reserved/used of the handle: the GPU, or the GPU instance of a MIG device. */
static void memory_of(const struct nvmlDevice_st *d, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used)
{
    fs_reap_gpu(d->gpu);
    if (d->gi >= 0) {
        *total = fs_place_total(d->gpu, d->gi);
        *reserved = 0;
        *used = fs_place_used(d->gpu, d->gi);
    } else {
        struct fs_gpu *g = gpu_of(d);
        *total = g->s.mem_total;
        *reserved = g->s.mem_reserved;
        *used = fs_place_used(d->gpu, -2);
    }
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    FN_ENTER_DEV(device, d);
    if (!memory)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long total, reserved, used;
    memory_of(d, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved; /* v1: used includes the driver's reserve (reference §3) */
    memory->free = total > memory->used ? total - memory->used : 0;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    FN_ENTER_DEV(device, d);
    if (!memory)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2)
        /* 580.159.04 answers a bare 2 with FUNCTION_NOT_FOUND (reference §2) */
        FN_RETURN(memory->version == 2 ? NVML_ERROR_FUNCTION_NOT_FOUND : NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long total, reserved, used;
    memory_of(d, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total > used + reserved ? total - used - reserved : 0;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    FN_ENTER_DEV(device, d);
    if (!utilization)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (gpu_of(d)->mig_current == NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED); /* not on A100/H100 under MIG (reference §11) */
    utilization->gpu = fn_gpu_util(d->gpu);
    utilization->memory = fn_mem_util(utilization->gpu);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp)
{
    FN_ENTER_DEV(device, d);
    if (!temp || sensor != NVML_TEMPERATURE_GPU)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *temp = gpu_of(d)->s.temperature + fn_gpu_util(d->gpu) * 2 / 5; /* warms up to +40 °C at full load */
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    FN_ENTER_DEV(device, d);
    if (!power)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gpu_static *s = &gpu_of(d)->s;
    unsigned span = s->power_limit_mw > s->power_mw ? s->power_limit_mw - s->power_mw : 0;
    *power = s->power_mw + (unsigned)((unsigned long long)span * fn_gpu_util(d->gpu) / 200);
    FN_RETURN(NVML_SUCCESS);
}

/* Millijoules since the driver loaded (the state was made), growing with the GPU's busy time
 * (common/timeline.c fs_energy_mj). As the driver: the whole board's counter, so a MIG device
 * handle gets NOT_SUPPORTED (ask the parent), as does a part without the counter. */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    FN_ENTER_DEV(device, d);
    if (!energy)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (d->gi >= 0 || gpu_of(d)->s.no_energy)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *energy = fs_energy_mj(d->gpu);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    FN_ENTER_DEV(device, d);
    if (!limit)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *limit = gpu_of(d)->s.power_limit_mw;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    return nvmlDeviceGetEnforcedPowerLimit(device, limit);
}

static nvmlReturn_t clock_query(nvmlDevice_t device, nvmlClockType_t type, unsigned int *out, bool max)
{
    FN_ENTER_DEV(device, d);
    if (!out)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gpu_static *s = &gpu_of(d)->s;
    bool busy = !max && fn_gpu_util(d->gpu) > 0;
    switch (type) {
    case NVML_CLOCK_GRAPHICS: *out = max || busy ? s->max_graphics : s->clock_graphics; break;
    case NVML_CLOCK_SM: *out = max || busy ? s->max_sm : s->clock_sm; break;
    case NVML_CLOCK_MEM: *out = max ? s->max_mem : s->clock_mem; break;
    case NVML_CLOCK_VIDEO: *out = max || busy ? s->max_video : s->clock_video; break;
    default: FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *c)
{
    return clock_query(device, type, c, false);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *c)
{
    return clock_query(device, type, c, true);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    FN_ENTER_DEV(device, d);
    if (!speed)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    unsigned fan = gpu_of(d)->s.fan;
    if (fan == 0)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED); /* SXM boards have no fan of their own */
    *speed = fan;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    FN_ENTER_DEV(device, d);
    if (!gen)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *gen = gpu_of(d)->s.pcie_gen;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    FN_ENTER_DEV(device, d);
    if (!width)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *width = gpu_of(d)->s.pcie_width;
    FN_RETURN(NVML_SUCCESS);
}

/* Field values: only the PCIe byte counters (NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES), cumulative
 * bytes over the GPU's link since the state was made (common/procs.c counts them from managed
 * migrations and host<->device copies). VGPU_FAKE_PCIE_COUNTER (read by the process asking):
 * unset or `64`, 64-bit counters (NVML_VALUE_TYPE_UNSIGNED_LONG_LONG); `32`, 32-bit ones that
 * wrap at 4 GiB (UNSIGNED_INT: the header says "Value can be wrapped" and does not say at
 * what width); `none`, NOT_SUPPORTED, as a driver older than 550. MIG device handles answer
 * NOT_SUPPORTED: the counters are the physical GPU's. Other fields: NOT_SUPPORTED. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    FN_ENTER_DEV(device, d);
    if (!values || valuesCount < 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const char *mode = getenv("VGPU_FAKE_PCIE_COUNTER");
    bool none = mode && strcmp(mode, "none") == 0, narrow = mode && strcmp(mode, "32") == 0;
    struct fs_gpu *g = gpu_of(d);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *f = &values[i];
        f->timestamp = (long long)fs_wall_us();
        f->latencyUsec = 0;
        memset(&f->value, 0, sizeof f->value);
        bool pcie = f->fieldId == NVML_FI_DEV_PCIE_COUNT_TX_BYTES || f->fieldId == NVML_FI_DEV_PCIE_COUNT_RX_BYTES;
        if (!pcie || none || d->gi >= 0) {
            f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        uint64_t v = f->fieldId == NVML_FI_DEV_PCIE_COUNT_TX_BYTES ? g->pcie_tx : g->pcie_rx;
        f->nvmlReturn = NVML_SUCCESS;
        if (narrow) {
            f->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            f->value.uiVal = (unsigned int)v;
        } else {
            f->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            f->value.ullVal = v;
        }
    }
    FN_RETURN(NVML_SUCCESS);
}

static nvmlReturn_t codec(nvmlDevice_t device, unsigned int *util, unsigned int *period)
{
    FN_ENTER_DEV(device, d);
    if (!util || !period)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *util = 0; /* simulated kernels never use the video engines */
    *period = fs_state()->sample_period_ms * 1000;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *u, unsigned int *p)
{
    return codec(device, u, p);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *u, unsigned int *p)
{
    return codec(device, u, p);
}

/* ---- compute mode (reference §14) ---- */
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    FN_ENTER_DEV(device, d);
    if (!mode)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *mode = d->gi >= 0 ? NVML_COMPUTEMODE_DEFAULT : (nvmlComputeMode_t)gpu_of(d)->compute_mode;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode)
{
    FN_ENTER_DEV(device, d);
    if ((unsigned)mode >= NVML_COMPUTEMODE_COUNT)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD) /* support removed from the driver */
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    struct fs_gpu *g = gpu_of(d);
    if (g->mig_current == NVML_DEVICE_MIG_ENABLE) {
        /* With MIG on only MIG device handles take a mode, and never EXCLUSIVE_PROCESS; the fake
         * keeps no per-instance mode (they always read back DEFAULT). */
        if (d->gi < 0 || mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
            FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
        FN_RETURN(NVML_SUCCESS);
    }
    g->compute_mode = mode;
    FN_RETURN(NVML_SUCCESS);
}
