/* launch_probe: calls every launch entry point once by its exported name (as a program linked
 * with -lcuda does) and prints  NAME rc=N  for each; with VGPU_FAKE_TRACE the fake driver
 * records which of its functions ran, so a test can check that each wrapper called its own
 * variant (the _ptsz ones included). */
#include <string.h>

#include "driver.h"

static void host_fn(void *arg)
{
    (void)arg;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUgraph g;
    CUgraphExec ge;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuModuleLoadData(&mod, "image"));
    MUST(cuModuleGetFunction(&f, mod, "k"));
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = f;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32;
    kp.blockDimY = kp.blockDimZ = 1;
    CUgraphNode kn;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddKernelNode_v2(&kn, g, NULL, 0, &kp));
    MUST(cuGraphInstantiateWithFlags(&ge, g, 0));
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    printf("cuLaunchKernel rc=%d\n", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    printf("cuLaunchKernel_ptsz rc=%d\n", cuLaunchKernel_ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    printf("cuLaunchKernelEx rc=%d\n", cuLaunchKernelEx(&cfg, f, NULL, NULL));
    printf("cuLaunchKernelEx_ptsz rc=%d\n", cuLaunchKernelEx_ptsz(&cfg, f, NULL, NULL));
    printf("cuLaunchCooperativeKernel rc=%d\n", cuLaunchCooperativeKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL));
    printf("cuLaunchCooperativeKernel_ptsz rc=%d\n", cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL));
    printf("cuLaunchHostFunc rc=%d\n", cuLaunchHostFunc(NULL, host_fn, NULL));
    printf("cuLaunchHostFunc_ptsz rc=%d\n", cuLaunchHostFunc_ptsz(NULL, host_fn, NULL));
    printf("cuGraphLaunch rc=%d\n", cuGraphLaunch(ge, NULL));
    printf("cuGraphLaunch_ptsz rc=%d\n", cuGraphLaunch_ptsz(ge, NULL));
    CUstream s;
    MUST(cuStreamCreate(&s, 0));
    printf("cuLaunch rc=%d\n", cuLaunch(f));
    printf("cuLaunchGrid rc=%d\n", cuLaunchGrid(f, 2, 1));
    printf("cuLaunchGridAsync rc=%d\n", cuLaunchGridAsync(f, 2, 1, s));
    CUDA_LAUNCH_PARAMS lp;
    memset(&lp, 0, sizeof lp);
    lp.function = f;
    lp.gridDimX = lp.gridDimY = lp.gridDimZ = 1;
    lp.blockDimX = 32;
    lp.blockDimY = lp.blockDimZ = 1;
    lp.hStream = s;
    printf("cuLaunchCooperativeKernelMultiDevice rc=%d\n", cuLaunchCooperativeKernelMultiDevice(&lp, 1, 0));
    MUST(cuCtxSynchronize());
    return 0;
}
