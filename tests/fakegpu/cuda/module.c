/* module.c: modules, libraries and the functions/kernels in them.
 * The fake does not read images: any non-NULL image loads, and any function name exists in it
 * (the real driver would answer NOT_FOUND for a name the image lacks). The name matters only
 * for "sleep_us" (see launch.c). Loading is lazy, as with CUDA_MODULE_LOADING=LAZY (the default
 * since CUDA 12.2): cuModuleLoad* costs no device memory, and the first cuModuleGetFunction of
 * a module loads its code, charging VGPU_FAKE_MODULE_BYTES (default 2 MiB) to the module's
 * context until the module is unloaded or the context goes. So a limiter that measures only
 * around the load misses it; NVML's per-process figure shows it. CUkernel handles
 * are the same objects as CUfunction handles, so a CUkernel cast to CUfunction launches, as
 * with the real driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

struct fc_module {
    uint32_t magic;
    struct fc_ctx *ctx;   /* NULL for libraries (context-independent) */
    unsigned long long lazy;  /* device memory its code took at the first cuModuleGetFunction */
};

/* VGPU_FAKE_MODULE_BYTES: what loading a module's code costs (bytes, default 2 MiB). */
static unsigned long long module_bytes(void)
{
    static long long bytes = -1;
    if (bytes >= 0)
        return (unsigned long long)bytes;
    const char *e = getenv("VGPU_FAKE_MODULE_BYTES");
    bytes = (long long)(2 * FC_MIB);
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (*end || *e == '-' || v > (1ULL << 40))
            fprintf(stderr, "fake libcuda: VGPU_FAKE_MODULE_BYTES='%s' is not a number of bytes; using 2 MiB\n", e);
        else
            bytes = (long long)v;
    }
    return (unsigned long long)bytes;
}
#define FC_MODULE_MAGIC 0x30D01E00u
#define FC_LIBRARY_MAGIC 0x11B4A400u

CUresult fc_func_valid(CUfunction f)
{
    const struct fc_func *fn = (const struct fc_func *)f;
    return (fn && fn->magic == FC_FUNC_MAGIC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult module_new(CUmodule *out, const void *image)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_module *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = FC_MODULE_MAGIC;
    m->ctx = c;
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    FC_TRACE();
    if (!fname)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(fname, "rb");
    if (!f) {
        CUresult r = fc_check_init();
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_FILE_NOT_FOUND;
    }
    fclose(f);
    return module_new(module, fname);
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{ FC_TRACE(); return module_new(module, image); }

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
    FC_TRACE();
    if (numOptions && (!options || !optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return module_new(module, image);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{ FC_TRACE(); return module_new(module, fatCubin); }

CUresult cuModuleUnload(CUmodule hmod)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_module *m = (struct fc_module *)hmod;
    if (!m || m->magic != FC_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fc_lock);
    if (m->lazy && m->ctx && m->ctx->alive) {
        fc_dev_uncharge(m->ctx->device, m->lazy);
        m->ctx->module_bytes -= m->lazy;
    }
    m->magic = 0;
    pthread_mutex_unlock(&fc_lock);
    free(m);
    return CUDA_SUCCESS;
}

static CUresult func_new(const char *name, struct fc_func **out)
{
    if (!name || !*name)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f = calloc(1, sizeof *f);
    if (!f)
        return CUDA_ERROR_OUT_OF_MEMORY;
    f->magic = FC_FUNC_MAGIC;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->width_param = strcmp(name, "sleep_us_w") == 0;
    f->fault = strcmp(name, "fault") == 0;
    f->collective = strcmp(name, "collective_us") == 0;
    f->sleep_us = strcmp(name, "sleep_us") == 0 || f->width_param;
    *out = f;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_module *m = (struct fc_module *)hmod;
    if (!m || m->magic != FC_MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!hfunc)
        return CUDA_ERROR_INVALID_VALUE;
    /* Lazy loading: the module's code reaches the device at its first function lookup. */
    pthread_mutex_lock(&fc_lock);
    if (!m->lazy && m->ctx && m->ctx->alive && module_bytes()) {
        r = fc_dev_charge(m->ctx->device, module_bytes());
        if (r == CUDA_SUCCESS) {
            m->lazy = module_bytes();
            m->ctx->module_bytes += m->lazy;
        }
    }
    pthread_mutex_unlock(&fc_lock);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_func *f;
    r = func_new(name, &f);
    if (r == CUDA_SUCCESS)
        *hfunc = (CUfunction)f;
    return r;
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!library || !code || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_module *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = FC_LIBRARY_MAGIC;
    *library = (CUlibrary)m;
    return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_module *m = (struct fc_module *)library;
    if (!m || m->magic != FC_LIBRARY_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    m->magic = 0;
    free(m);
    return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_module *m = (struct fc_module *)library;
    if (!m || m->magic != FC_LIBRARY_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pKernel)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    r = func_new(name, &f);
    if (r == CUDA_SUCCESS)
        *pKernel = (CUkernel)f;
    return r;
}
