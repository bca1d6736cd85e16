/* ctx_probe.c: what a CUDA context costs on a real GPU, step by step, in the driver's own
 * per-process figure (nvidia-smi --query-compute-apps): the context alone, after loading a
 * trivial PTX module, after its first launch, after a 2 MiB allocation. Finds where the memory
 * that PyTorch's first kernel adds (issue 11: 520 MiB charged at context creation, 612 MiB
 * reported once a kernel ran) comes from.
 *   cc -o ctx_probe tests/gpu/ctx_probe.c -I/usr/local/cuda/include -lcuda && ./ctx_probe */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char ptx[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry empty()\n{\n ret;\n}\n";

static void show(const char *what)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | "
             "awk -F', ' '$1 == %d { printf \"%%-28s %%s MiB\\n\", \"%s\", $2 }'", (int)getpid(), what);
    fflush(stdout);
    if (system(cmd) != 0)
        printf("%s: nvidia-smi failed\n", what);
}

#define CK(x) do { CUresult rc_ = (x); if (rc_) { printf("%s: rc %d\n", #x, (int)rc_); return 1; } } while (0)

int main(void)
{
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUdeviceptr p;
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    show("primary context");
    size_t v;
    CK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE)); printf("stack limit %zu\n", v);
    CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE)); printf("heap limit %zu\n", v);
    CK(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE)); printf("printf fifo %zu\n", v);
    CK(cuModuleLoadData(&mod, ptx)); CK(cuModuleGetFunction(&fn, mod, "empty"));
    show("+ PTX module loaded");
    CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL)); CK(cuCtxSynchronize());
    show("+ first launch");
    CK(cuLaunchKernel(fn, 1024, 1, 1, 1024, 1, 1, 0, 0, NULL, NULL)); CK(cuCtxSynchronize());
    show("+ wide launch");
    CK(cuMemAlloc(&p, 2 << 20));
    show("+ 2 MiB alloc");
    return 0;
}
