/* The NVML loader (see vgpu/nvml.h). dlopen by SONAME, versioned symbols, init, and the four
 * ways it can fail told apart (reference/nvml.md §1 and §11). vgpu only. */
#include "vgpu/nvml.h"
#include "vgpu/watchdog.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/exitcode.h"
#include "vgpu/trust.h"

struct sym { const char *name; size_t off; int required; };

static const struct sym syms[] = {
#define VGPU_NVML_FN(name, req) { #name, offsetof(struct vgpu_nvml, name), req },
#include "vgpu/nvml_fns.h"
#undef VGPU_NVML_FN
};

/* NVML's own strings (observed on 580.159.04), for when the library is not there to ask. */
static const char *builtin_strerror(nvmlReturn_t rc)
{
    static const char *const s[] = {
        "Success", "Uninitialized", "Invalid Argument", "Not Supported", "Insufficient Permissions",
        "Already Initialized", "Not Found", "Insufficient Size", "Insufficient External Power",
        "Driver Not Loaded", "Timeout", "Interrupt Request Issue", "NVML Shared Library Not Found",
        "Function Not Found", "Corrupted infoROM", "GPU is lost", "GPU requires reset",
        "GPU access blocked by the operating system", "Driver/library version mismatch",
        "In use by another client", "Insufficient Memory", "No data", "vGPU ECC not supported",
        "Insufficient Resources", "Invalid Frequency", "Argument version mismatch",
        "Requested functionality has been deprecated", "System is not in ready state",
        "No supported GPUs were found", "Resource not in correct state to perform requested operation",
        "Reset type is not supported for given device",
    };
    if ((unsigned)rc < sizeof s / sizeof s[0])
        return s[rc];
    return "Unknown Error";
}

const char *vgpu_nvml_strerror(struct vgpu_nvml *nv, nvmlReturn_t rc)
{
    if (nv && nv->nvmlErrorString) {
        const char *s = nv->nvmlErrorString(rc);
        if (s)
            return s;
    }
    return builtin_strerror(rc);
}

static void init_failed(struct vgpu_nvml *nv, nvmlReturn_t rc, struct vgpu_err *e)
{
    const char *why = vgpu_nvml_strerror(nv, rc);
    switch ((int)rc) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
        vgpu_err_set(e, VGPU_EXIT_NO_DRIVER,
                     "the NVIDIA kernel driver is not loaded (NVML: %s); load it with 'modprobe nvidia' "
                     "and check 'dmesg' for driver errors", why);
        break;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        vgpu_err_set(e, VGPU_EXIT_NO_DRIVER,
                     "the NVIDIA driver and libnvidia-ml.so.1 have different versions (NVML: %s); reload the "
                     "nvidia kernel modules or reboot after a driver update", why);
        break;
    case NVML_ERROR_GPU_NOT_FOUND:
        vgpu_err_set(e, VGPU_EXIT_NO_GPU, "no supported NVIDIA GPU was found (NVML: %s)", why);
        break;
    case NVML_ERROR_NO_PERMISSION:
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "not allowed to use the GPUs (NVML: %s); check the permissions of /dev/nvidia* "
                     "or run as a user in the group that owns them", why);
        break;
    default:
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot initialise NVML (error %d: %s)", (int)rc, why);
        break;
    }
}

struct vgpu_nvml *vgpu_nvml_open(struct vgpu_err *e)
{
    const char *path = getenv("VGPU_NVML_LIB");
    if (!path || !*path)
        path = "libnvidia-ml.so.1";
    /* dlopen runs the library's constructors: as root, only a library nobody else can change. */
    if (vgpu_trust_path(path, "VGPU_NVML_LIB", VGPU_TRUST_SEARCHED, e) != 0) {
        if (e->code == VGPU_EXIT_NOT_FOUND)     /* as dlopen would have said */
            vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY, "cannot load %s (no such file). Is the NVIDIA driver installed? "
                         "(set VGPU_NVML_LIB to the library's path, or unset it)", path);
        return NULL;
    }
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY,
                     "cannot load %s (%s). Is the NVIDIA driver installed? (set VGPU_NVML_LIB to the "
                     "library's path if it is somewhere the loader does not look)", path, why ? why : "not found");
        return NULL;
    }
    struct vgpu_nvml *nv = calloc(1, sizeof *nv);
    if (!nv) {
        dlclose(dl);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return NULL;
    }
    nv->dl = dl;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(dl, syms[i].name);
        if (!f && syms[i].required) {
            /* Older drivers export some entry points only under their unversioned names. */
            char base[96];
            snprintf(base, sizeof base, "%s", syms[i].name);
            char *v = strstr(base, "_v");
            if (v) {
                *v = 0;
                f = dlsym(dl, base);
            }
        }
        if (!f && syms[i].required) {
            vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY,
                         "%s has no %s: it is not the NVIDIA driver's NVML library, or the driver is too old",
                         path, syms[i].name);
            dlclose(dl);
            free(nv);
            return NULL;
        }
        memcpy((char *)nv + syms[i].off, &f, sizeof f);
    }
    /* Bounded (vgpu/watchdog.h): on a wedged driver these never return. */
    vgpu_watchdog_arm("NVML's nvmlInit");
    nvmlReturn_t rc = nv->nvmlInit_v2();
    vgpu_watchdog_disarm();
    if (rc != NVML_SUCCESS) {
        init_failed(nv, rc, e);
        dlclose(dl);
        free(nv);
        return NULL;
    }
    unsigned count = 0;
    vgpu_watchdog_arm("NVML's nvmlDeviceGetCount");
    rc = nv->nvmlDeviceGetCount_v2(&count);
    vgpu_watchdog_disarm();
    if (rc != NVML_SUCCESS || count == 0) {
        if (rc != NVML_SUCCESS)
            init_failed(nv, rc, e);
        else
            vgpu_err_set(e, VGPU_EXIT_NO_GPU, "the NVIDIA driver is loaded but found no GPU");
        nv->nvmlShutdown();
        dlclose(dl);
        free(nv);
        return NULL;
    }
    if (nv->nvmlSystemGetDriverVersion)
        nv->nvmlSystemGetDriverVersion(nv->driver_version, sizeof nv->driver_version);
    if (nv->nvmlSystemGetNVMLVersion)
        nv->nvmlSystemGetNVMLVersion(nv->nvml_version, sizeof nv->nvml_version);
    int cv = 0;
    if (nv->nvmlSystemGetCudaDriverVersion_v2 && nv->nvmlSystemGetCudaDriverVersion_v2(&cv) == NVML_SUCCESS)
        nv->cuda_version = cv;
    else if (nv->nvmlSystemGetCudaDriverVersion && nv->nvmlSystemGetCudaDriverVersion(&cv) == NVML_SUCCESS)
        nv->cuda_version = cv;
    return nv;
}

void vgpu_nvml_close(struct vgpu_nvml *nv)
{
    if (!nv)
        return;
    nv->nvmlShutdown();
    dlclose(nv->dl);
    free(nv);
}
