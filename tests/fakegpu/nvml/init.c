/* init.c: nvmlInit/Shutdown (reference counted), error strings, system versions, handles and
 * the checks every call starts with. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakenvml.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;

static struct nvmlDevice_st dev_handles[FS_MAX_GPUS];
static struct nvmlDevice_st mig_handles[FS_MAX_GPUS][FS_MAX_GI][FS_MAX_CI];
static struct nvmlGpuInstance_st gi_handles[FS_MAX_GPUS][FS_MAX_GI];
static struct nvmlComputeInstance_st ci_handles[FS_MAX_GPUS][FS_MAX_GI][FS_MAX_CI];

static nvmlReturn_t do_init(unsigned flags)
{
    struct fs_state *st = fs_open();
    if (!st) {
        fprintf(stderr, "fake libnvidia-ml: %s\n", fs_error());
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    fs_maybe_slow("nvmlInit_v2");
    const struct fs_failures *f = fs_failures();
    if (f->nvml_init == NVML_ERROR_GPU_NOT_FOUND && (flags & NVML_INIT_FLAG_NO_GPUS))
        ; /* "no GPUs" is not an error for this caller */
    else if (f->nvml_init)
        return (nvmlReturn_t)f->nvml_init;
    if (st->ngpus == 0 && !(flags & NVML_INIT_FLAG_NO_GPUS))
        return NVML_ERROR_GPU_NOT_FOUND;
    pthread_mutex_lock(&init_lock);
    if (init_count++ == 0) {
        for (unsigned g = 0; g < FS_MAX_GPUS; g++) {
            dev_handles[g] = (struct nvmlDevice_st){g, -1, -1};
            for (int i = 0; i < FS_MAX_GI; i++) {
                gi_handles[g][i] = (struct nvmlGpuInstance_st){g, i};
                for (int c = 0; c < FS_MAX_CI; c++) {
                    mig_handles[g][i][c] = (struct nvmlDevice_st){g, i, c};
                    ci_handles[g][i][c] = (struct nvmlComputeInstance_st){g, i, c};
                }
            }
        }
    }
    pthread_mutex_unlock(&init_lock);
    fs_start_resolver();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return do_init(0); }
nvmlReturn_t nvmlInit(void) { return do_init(0); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { return do_init(flags); }

nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&init_lock);
    nvmlReturn_t rc = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&init_lock);
    return rc;
}

static bool initialized(void)
{
    pthread_mutex_lock(&init_lock);
    bool yes = init_count > 0;
    pthread_mutex_unlock(&init_lock);
    return yes;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    static const char *const strings[] = {
        "Success", "Uninitialized", "Invalid Argument", "Not Supported", "Insufficient Permissions",
        "Already Initialized", "Not Found", "Insufficient Size", "Insufficient External Power", "Driver Not Loaded",
        "Timeout", "Interrupt Request Issue", "NVML Shared Library Not Found", "Function Not Found",
        "Corrupted infoROM", "GPU is lost", "GPU requires reset", "GPU access blocked by the operating system",
        "Driver/library version mismatch", "In use by another client", "Insufficient Memory", "No data",
        "vGPU ECC not supported", "Insufficient Resources", "Invalid Frequency", "Argument version mismatch",
        "Requested functionality has been deprecated", "System is not in ready state",
        "No supported GPUs were found", "Resource not in correct state to perform requested operation",
        "Reset type is not supported for given device",
    };
    if ((unsigned)result < sizeof strings / sizeof strings[0])
        return strings[result];
    return "Unknown Error";
}

static nvmlReturn_t copy_string(char *out, unsigned int len, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, fs_state()->driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, fs_state()->nvml_version);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    /* Works without nvmlInit on the real library too (it asks libcuda). */
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fs_state *st = fs_open();
    if (!st)
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    *v = st->cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---- the prologue of every call ---- */
nvmlReturn_t fn_enter(const char *fn)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    fs_maybe_slow(fn);
    fs_lock();
    return NVML_SUCCESS;
}

static bool in_array(const void *p, const void *base, size_t size) {
    return (const char *)p >= (const char *)base && (const char *)p < (const char *)base + size;
}

nvmlReturn_t fn_enter_dev(nvmlDevice_t dev, const char *fn, struct nvmlDevice_st **out)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    if (!in_array(dev, dev_handles, sizeof dev_handles) && !in_array(dev, mig_handles, sizeof mig_handles))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct fs_state *st = fs_state();
    if (dev->gpu >= st->ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    fs_maybe_slow(fn);
    if (fs_gpu_lost(dev->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    fs_lock();
    if (dev->gi >= 0) { /* a MIG device handle is valid while its CI exists */
        struct fs_gpu *g = &st->gpu[dev->gpu];
        if (g->mig_current != NVML_DEVICE_MIG_ENABLE || !g->gi[dev->gi].used || !g->gi[dev->gi].ci[dev->ci].used) {
            fs_unlock();
            return NVML_ERROR_INVALID_ARGUMENT;
        }
    }
    *out = dev;
    return NVML_SUCCESS;
}

nvmlReturn_t fn_enter_gi(nvmlGpuInstance_t gi, const char *fn, struct nvmlGpuInstance_st **out)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    if (!in_array(gi, gi_handles, sizeof gi_handles) || gi->gpu >= fs_state()->ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    fs_maybe_slow(fn);
    if (fs_gpu_lost(gi->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    fs_lock();
    struct fs_gpu *g = &fs_state()->gpu[gi->gpu];
    if (g->mig_current != NVML_DEVICE_MIG_ENABLE || !g->gi[gi->gi].used) {
        fs_unlock();
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = gi;
    return NVML_SUCCESS;
}

nvmlReturn_t fn_enter_ci(nvmlComputeInstance_t ci, const char *fn, struct nvmlComputeInstance_st **out)
{
    if (!initialized())
        return NVML_ERROR_UNINITIALIZED;
    if (!in_array(ci, ci_handles, sizeof ci_handles) || ci->gpu >= fs_state()->ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    fs_maybe_slow(fn);
    if (fs_gpu_lost(ci->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    fs_lock();
    struct fs_gpu *g = &fs_state()->gpu[ci->gpu];
    if (g->mig_current != NVML_DEVICE_MIG_ENABLE || !g->gi[ci->gi].used || !g->gi[ci->gi].ci[ci->ci].used) {
        fs_unlock();
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = ci;
    return NVML_SUCCESS;
}

struct nvmlDevice_st *fn_dev_handle(unsigned gpu, int gi, int ci)
{
    return gi < 0 ? &dev_handles[gpu] : &mig_handles[gpu][gi][ci];
}
nvmlGpuInstance_t fn_gi_handle(unsigned gpu, int gi) { return &gi_handles[gpu][gi]; }
nvmlComputeInstance_t fn_ci_handle(unsigned gpu, int gi, int ci) { return &ci_handles[gpu][gi][ci]; }

bool fn_privileged(void)
{
    const char *env = getenv("VGPU_FAKE_ROOT");
    if (env && strcmp(env, "1") == 0)
        return true;
    if (env && strcmp(env, "0") == 0)
        return false;
    return geteuid() == 0;
}

/* ---- device enumeration ---- */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    nvmlReturn_t rc = fn_enter(__func__);
    if (rc)
        return rc;
    if (!count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = fs_state()->ngpus;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = fn_enter(__func__);
    if (rc)
        return rc;
    if (!device || index >= fs_state()->ngpus)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = fn_dev_handle(index, -1, -1);
    /* The real _v2 hands out a lost GPU's handle (later calls fail); the old ABI fails here. */
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = nvmlDeviceGetHandleByIndex_v2(index, device);
    return rc == NVML_SUCCESS && fs_gpu_lost(index) ? NVML_ERROR_GPU_IS_LOST : rc;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    nvmlReturn_t rc = fn_enter(__func__);
    if (rc)
        return rc;
    if (!uuid || !device)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct fs_state *st = fs_state();
    for (unsigned g = 0; g < st->ngpus; g++) {
        if (strcmp(st->gpu[g].s.uuid, uuid) == 0) {
            *device = fn_dev_handle(g, -1, -1);
            FN_RETURN(NVML_SUCCESS);
        }
        int gis[FS_MAX_GI * FS_MAX_CI], cis[FS_MAX_GI * FS_MAX_CI];
        unsigned n = fs_mig_devices(g, gis, cis, FS_MAX_GI * FS_MAX_CI);
        for (unsigned i = 0; i < n; i++)
            if (strcmp(st->gpu[g].gi[gis[i]].ci[cis[i]].uuid, uuid) == 0) {
                *device = fn_dev_handle(g, gis[i], cis[i]);
                FN_RETURN(NVML_SUCCESS);
            }
    }
    FN_RETURN(NVML_ERROR_NOT_FOUND);
}

/* Accepts "00000000:1B:00.0", "0000:1b:00.0" and "1b:00.0" as the driver does. */
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    nvmlReturn_t rc = fn_enter(__func__);
    if (rc)
        return rc;
    unsigned dom = 0, bus, dv, fnum;
    if (!bus_id || !device)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dv, &fnum) != 4) {
        dom = 0;
        if (sscanf(bus_id, "%x:%x.%x", &bus, &dv, &fnum) != 3)
            FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    struct fs_state *st = fs_state();
    for (unsigned g = 0; g < st->ngpus; g++)
        if (st->gpu[g].s.pci_domain == dom && st->gpu[g].s.pci_bus == bus && st->gpu[g].s.pci_device == dv) {
            *device = fn_dev_handle(g, -1, -1);
            FN_RETURN(NVML_SUCCESS);
        }
    FN_RETURN(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}
