/* procaddr_probe: reaches the driver the way CUDA runtimes do, through cuGetProcAddress found
 * with dlopen("libcuda.so.1") + dlsym, asks for (NAME, VERSION, FLAGS), calls what it got with
 * the ABI that VERSION implies, and prints
 *     NAME ver=V flags=F rc=R from=hook|driver|null call=C
 * (`from`: which library the pointer lives in; `call`: the CUresult of calling it).
 *   procaddr_probe [--v1] NAME VERSION FLAGS [NAME VERSION FLAGS ...]
 * --v1 uses the 4-argument cuGetProcAddress (CUDA 11.3 ABI) instead of cuGetProcAddress_v2.
 * Names understood for the call: cuMemAlloc, cuMemGetInfo, cuLaunchKernel, cuMemAllocAsync,
 * cuMemPrefetchAsync, cuMemAdvise, cuCtxCreate, cuGetProcAddress (others: not called). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "driver.h"

static const char *origin(void *p)
{
    Dl_info info;
    if (!p)
        return "null";
    if (dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "libvgpu"))
        return "hook";
    return "driver";
}

static CUdeviceptr managed;
static CUfunction kernel;
static CUdevice dev;

static CUresult call(const char *name, void *fn, int ver)
{
    if (!strcmp(name, "cuMemAlloc")) {
        if (ver < 3020) {
            CUdeviceptr_v1 p;
            CUresult rc = ((vgpu_cuMemAlloc_fn)fn)(&p, 1 << 20);
            if (!rc)
                (void)cuMemFree(p);
            return rc;
        }
        CUdeviceptr p;
        CUresult rc = ((vgpu_cuMemAlloc_v2_fn)fn)(&p, 1 << 20);
        if (!rc)
            (void)cuMemFree_v2(p);
        return rc;
    }
    if (!strcmp(name, "cuMemGetInfo")) {
        if (ver < 3020) {
            unsigned int f, t;
            return ((vgpu_cuMemGetInfo_fn)fn)(&f, &t);
        }
        size_t f, t;
        return ((vgpu_cuMemGetInfo_v2_fn)fn)(&f, &t);
    }
    if (!strcmp(name, "cuLaunchKernel")) {
        void *args[] = { NULL };
        return ((vgpu_cuLaunchKernel_fn)fn)(kernel, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
    }
    if (!strcmp(name, "cuMemAllocAsync")) {
        CUdeviceptr p;
        CUresult rc = ((vgpu_cuMemAllocAsync_fn)fn)(&p, 1 << 20, NULL);
        if (!rc)
            (void)cuMemFreeAsync(p, NULL);
        return rc;
    }
    if (!strcmp(name, "cuMemPrefetchAsync")) {
        if (ver < 12020)
            return ((vgpu_cuMemPrefetchAsync_fn)fn)(managed, 4096, dev, NULL);
        CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, dev };
        return ((vgpu_cuMemPrefetchAsync_v2_fn)fn)(managed, 4096, loc, 0, NULL);
    }
    if (!strcmp(name, "cuMemAdvise")) {
        if (ver < 12020)
            return ((vgpu_cuMemAdvise_fn)fn)(managed, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, dev);
        CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, dev };
        return ((vgpu_cuMemAdvise_v2_fn)fn)(managed, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, loc);
    }
    if (!strcmp(name, "cuCtxCreate")) {
        CUcontext c = NULL, prev = NULL;
        CUresult rc;
        (void)cuCtxGetCurrent(&prev);
        if (ver >= 12050) {
            CUctxCreateParams params;
            memset(&params, 0, sizeof params);
            rc = ((vgpu_cuCtxCreate_v4_fn)fn)(&c, &params, 0, dev);
        } else if (ver >= 11040) {
            rc = ((vgpu_cuCtxCreate_v3_fn)fn)(&c, NULL, 0, 0, dev);
        } else {
            rc = ((vgpu_cuCtxCreate_v2_fn)fn)(&c, 0, dev);
        }
        if (!rc)
            (void)cuCtxDestroy_v2(c);
        (void)cuCtxSetCurrent(prev);
        return rc;
    }
    if (!strcmp(name, "cuGetProcAddress")) {
        void *again = NULL;
        return ((vgpu_cuGetProcAddress_v2_fn)fn)("cuMemAlloc", &again, 12000, 0, NULL);
    }
    return CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool v1 = argc > 1 && !strcmp(argv[1], "--v1");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "procaddr_probe: %s\n", dlerror());
        return 2;
    }
    vgpu_cuInit_fn init = (vgpu_cuInit_fn)dlsym(h, "cuInit");
    vgpu_cuGetProcAddress_fn gpa1 = (vgpu_cuGetProcAddress_fn)dlsym(h, "cuGetProcAddress");
    vgpu_cuGetProcAddress_v2_fn gpa2 = (vgpu_cuGetProcAddress_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    printf("getter from=%s\n", origin(v1 ? (void *)gpa1 : (void *)gpa2));
    MUST(init(0));
    CUcontext ctx;
    CUmodule mod;
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuMemAllocManaged(&managed, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    MUST(cuModuleLoadData(&mod, "fake image"));
    MUST(cuModuleGetFunction(&kernel, mod, "k"));
    for (int i = v1 ? 2 : 1; i + 2 < argc; i += 3) {
        const char *name = argv[i];
        int ver = atoi(argv[i + 1]);
        cuuint64_t flags = strtoull(argv[i + 2], NULL, 10);
        void *fn = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult rc = v1 ? gpa1(name, &fn, ver, flags) : gpa2(name, &fn, ver, flags, &st);
        CUresult crc = fn ? call(name, fn, ver) : CUDA_SUCCESS;
        (void)cuCtxSynchronize();
        printf("%s ver=%d flags=%llu rc=%d from=%s call=%d\n", name, ver, (unsigned long long)flags, rc,
               origin(fn), crc);
    }
    return 0;
}
