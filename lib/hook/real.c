/* real.c: finding the real driver and NVML functions.
 *
 * Nothing happens at load time: the first call of a hook opens libcuda.so.1 (by its SONAME,
 * never the toolkit's unversioned stub) under pthread_once and looks the exact exported name
 * up with glibc's own dlsym. Later calls cost one atomic load. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "hook.h"
#include "vgpu/log.h"

static const char *const hook_names[VGPU_H_COUNT] = {
#define VGPU_HOOK(symbol, base, version, kind) [VGPU_H_##symbol] = #symbol,
#include "hooks.def"
#undef VGPU_HOOK
};

void *_Atomic vgpu_real_slots[VGPU_H_COUNT];

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_fn;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

static void find_dlsym(void)
{
    /* glibc >= 2.34 defines dlsym@@GLIBC_2.34 in libc.so.6; older ones only the base version
     * (x86-64 GLIBC_2.2.5, aarch64 GLIBC_2.17). dlvsym itself is not overridden by us. */
    static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
    for (size_t i = 0; i < sizeof versions / sizeof *versions && !real_dlsym_fn; i++)
        real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
}

void *vgpu_real_dlsym(void *handle, const char *name)
{
    pthread_once(&dlsym_once, find_dlsym);
    return real_dlsym_fn ? real_dlsym_fn(handle, name) : NULL;
}

static void *cuda_handle, *nvml_handle;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, nvml_once = PTHREAD_ONCE_INIT;

static void open_cuda(void)
{
    cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!cuda_handle)
        cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda_handle)
        vgpu_error("cannot load the CUDA driver library libcuda.so.1 (%s); CUDA calls will fail. "
                   "Is the NVIDIA driver installed and on the library path?", dlerror());
}

static void open_nvml(void)
{
    nvml_handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!nvml_handle)
        nvml_handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
}

void *vgpu_real_cuda_sym(const char *name)
{
    pthread_once(&cuda_once, open_cuda);
    return cuda_handle ? vgpu_real_dlsym(cuda_handle, name) : NULL;
}

void *vgpu_real_nvml_sym(const char *name)
{
    pthread_once(&nvml_once, open_nvml);
    return nvml_handle ? vgpu_real_dlsym(nvml_handle, name) : NULL;
}

void *vgpu_real(enum vgpu_hook_id id)
{
    void *fn = atomic_load_explicit(&vgpu_real_slots[id], memory_order_acquire);
    if (__builtin_expect(fn != NULL, 1))
        return fn;
    fn = vgpu_real_cuda_sym(hook_names[id]);
    if (fn)
        atomic_store_explicit(&vgpu_real_slots[id], fn, memory_order_release);
    return fn;
}

void vgpu_real_offer(enum vgpu_hook_id id, void *fn)
{
    void *expected = NULL;
    if (fn && !vgpu_real(id))
        atomic_compare_exchange_strong(&vgpu_real_slots[id], &expected, fn);
}

uint64_t vgpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static vgpu_cuCtxGetDevice_fn ctx_get_device(void)
{
    static _Atomic(vgpu_cuCtxGetDevice_fn) fn;
    vgpu_cuCtxGetDevice_fn f = atomic_load_explicit(&fn, memory_order_acquire);
    if (!f) {
        f = (vgpu_cuCtxGetDevice_fn)vgpu_real_cuda_sym("cuCtxGetDevice");
        atomic_store_explicit(&fn, f, memory_order_release);
    }
    return f;
}

int vgpu_current_device(void)
{
    vgpu_cuCtxGetDevice_fn f = ctx_get_device();
    CUdevice d = -1;
    if (!f || f(&d) != CUDA_SUCCESS || d < 0)
        return -1;
    return d;
}

bool vgpu_real_meminfo(uint64_t *free_b, uint64_t *total_b)
{
    vgpu_cuMemGetInfo_v2_fn f = REAL(cuMemGetInfo_v2);
    size_t fr = 0, to = 0;
    if (!f || f(&fr, &to) != CUDA_SUCCESS)
        return false;
    *free_b = fr;
    *total_b = to;
    return true;
}
