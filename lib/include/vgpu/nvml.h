/* The NVML loader: dlopen("libnvidia-ml.so.1") (never the unversioned development name, which
 * may be the toolkit's stub), resolve versioned symbols with fallbacks, and init.
 * Failures are told apart, each with its own message and exit status:
 *   library not found      VGPU_EXIT_NO_LIBRARY  (dlerror text, "is the NVIDIA driver installed?")
 *   driver not loaded      VGPU_EXIT_NO_DRIVER   (NVML_ERROR_DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH)
 *   no GPUs                VGPU_EXIT_NO_GPU
 *   insufficient perms     VGPU_EXIT_PERMISSION
 * VGPU_NVML_LIB overrides the library path. vgpu-side code (not used by libvgpu.so). */
#ifndef VGPU_NVML_LOADER_H
#define VGPU_NVML_LOADER_H

#include "vgpu_nvml.h"
#include "vgpu/log.h"

struct vgpu_nvml {
    void *dl;
    char driver_version[80];
    char nvml_version[80];
    int cuda_version;             /* 13000 for CUDA 13.0; 0 when unknown */
    /* resolved entry points; NULL when the driver lacks them (optional ones) */
#define VGPU_NVML_FN(name, required) vgpu_##name##_fn name;
#include "vgpu/nvml_fns.h"
#undef VGPU_NVML_FN
};

/* Loads and initialises NVML. Returns NULL with e set (see above). Call vgpu_nvml_close(). */
struct vgpu_nvml *vgpu_nvml_open(struct vgpu_err *e);
void vgpu_nvml_close(struct vgpu_nvml *nv);

/* nvmlErrorString when the library has it, else a built-in table. */
const char *vgpu_nvml_strerror(struct vgpu_nvml *nv, nvmlReturn_t rc);

#endif
