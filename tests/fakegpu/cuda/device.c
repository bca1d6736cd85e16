/* device.c: cuInit, the driver version and device queries. Devices are those of the shared
 * state that CUDA_VISIBLE_DEVICES lets through (shared.c). */
#include <stdio.h>
#include <string.h>

#include "fakecuda.h"

bool fc_initialized;

CUresult fc_check_init(void)
{
    return fc_initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult check_device(CUdevice dev)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return (dev >= 0 && dev < fc_ndev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuInit(unsigned int flags)
{
    FC_TRACE();
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    bool first = !fc_initialized;
    CUresult r = fc_initialized ? CUDA_SUCCESS : fc_shared_init();
    if (r == CUDA_SUCCESS)
        fc_initialized = true;
    pthread_mutex_unlock(&fc_lock);
    /* The driver's own start (~90 ms on an H200): VGPU_FAKE_FAIL=slow=cuInit:MS, the first call. */
    if (first && r == CUDA_SUCCESS)
        fc_shared_maybe_slow("cuInit");
    if (r == CUDA_SUCCESS && fc_ndev == 0)
        return CUDA_ERROR_NO_DEVICE;
    return r;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    FC_TRACE();
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    /* Works before cuInit, like the real driver. */
    pthread_mutex_lock(&fc_lock);
    if (!fc_initialized)
        (void)fc_shared_init();
    pthread_mutex_unlock(&fc_lock);
    *driverVersion = fc_driver_version;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = fc_ndev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FC_TRACE();
    CUresult r = check_device(ordinal);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", fc_devs[dev].name);
    return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, fc_devs[dev].uuid_bytes, 16);
    return CUDA_SUCCESS;
}

/* The real driver's v1 returns the parent GPU's UUID for a MIG device and v2 the MIG device's
 * own; the fake keeps that difference. */
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    FC_TRACE();
    CUresult r = get_uuid(uuid, dev);
    if (r == CUDA_SUCCESS && fc_devs[dev].mig >= 0)
        fc_dev_parent_uuid(dev, (unsigned char *)uuid->bytes);
    return r;
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    FC_TRACE();
    return get_uuid(uuid, dev);
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "%s", fc_devs[dev].pci_bus_id);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = fc_devs[dev].total_mem;
    return CUDA_SUCCESS;
}

/* The CUDA 2.x ABI: a 32-bit size, which the real driver clamps. */
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long t = fc_devs[dev].total_mem;
    *bytes = t > 0xFFFFFFFFULL ? 0xFFFFFFFFu : (unsigned int)t;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FC_TRACE();
    CUresult r = check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    const struct fc_device *d = &fc_devs[dev];
    switch ((int)attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *pi = 512; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = d->sm_count; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = d->pci_bus; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = d->pci_device; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = d->pci_domain; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 50 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 3; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = d->cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = d->cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    default:
        if ((int)attrib <= 0 || (int)attrib >= 160)
            return CUDA_ERROR_INVALID_VALUE;
        *pi = 0; /* an attribute the fake does not model */
    }
    return CUDA_SUCCESS;
}
