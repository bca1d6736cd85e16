/* launch.c: every launch path passes the compute limiter's gate (gate.h). The _ptsz wrappers
 * call the real _ptsz functions, so per-thread default-stream semantics are kept. With no core
 * limit the added cost is the gate's one predictable branch. */
#include "gate.h"
#include "hook.h"
#include "limiter.h"
#include "vgpu/region.h"

#define GATED(sym, pt, stream, args)                            \
    vgpu_##sym##_fn real = REAL(sym);                           \
    if (__builtin_expect(!real, 0))                             \
        return CUDA_ERROR_NOT_INITIALIZED;                      \
    int held_ = vgpu_launch_gate(stream, pt);                   \
    if (__builtin_expect(held_ < 0, 1))                         \
        return real args;                                       \
    CUresult r_ = real args;                                    \
    vgpu_limiter_launched(held_);                               \
    return r_;

#define KERNEL_PARAMS                                                                               \
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, \
        unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,          \
        void **kernelParams
#define KERNEL_ARGS f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams

VGPU_EXPORT CUresult cuLaunchKernel(KERNEL_PARAMS, void **extra)
{
    GATED(cuLaunchKernel, false, hStream, (KERNEL_ARGS, extra))
}

VGPU_EXPORT CUresult cuLaunchKernel_ptsz(KERNEL_PARAMS, void **extra)
{
    GATED(cuLaunchKernel_ptsz, true, hStream, (KERNEL_ARGS, extra))
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel(KERNEL_PARAMS)
{
    GATED(cuLaunchCooperativeKernel, false, hStream, (KERNEL_ARGS))
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(KERNEL_PARAMS)
{
    GATED(cuLaunchCooperativeKernel_ptsz, true, hStream, (KERNEL_ARGS))
}

/* The job device of a stream: its context's device. A job of one GPU has only device 0; else
 * the context is made current for one cuCtxGetDevice (a rare, deprecated path: the cost does not
 * matter). -1 when unknown: the limiter then uses the current context's device. */
static int stream_device(CUstream s)
{
    struct vgpu_region *r = vgpu_job();
    if (r && vgpu_region_device_count(r) == 1)
        return 0;
    vgpu_cuStreamGetCtx_fn get = (vgpu_cuStreamGetCtx_fn)vgpu_real_cuda_sym("cuStreamGetCtx");
    vgpu_cuCtxPushCurrent_v2_fn push = (vgpu_cuCtxPushCurrent_v2_fn)vgpu_real_cuda_sym("cuCtxPushCurrent_v2");
    vgpu_cuCtxPopCurrent_v2_fn pop = (vgpu_cuCtxPopCurrent_v2_fn)vgpu_real_cuda_sym("cuCtxPopCurrent_v2");
    CUcontext c;
    if (!get || !push || !pop || get(s, &c) != CUDA_SUCCESS || push(c) != CUDA_SUCCESS)
        return -1;
    int dev = vgpu_current_device();
    pop(&c);
    return dev;
}

/* Every device's part of a multi-device cooperative launch passes the gate of its own device
 * (the stream's); the parts run together, so each waits for its device's turn before any is
 * submitted. */
VGPU_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                          unsigned int numDevices, unsigned int flags)
{
    vgpu_cuLaunchCooperativeKernelMultiDevice_fn real = REAL(cuLaunchCooperativeKernelMultiDevice);
    if (__builtin_expect(!real, 0))
        return CUDA_ERROR_NOT_INITIALIZED;
    /* More parts than a job can have GPUs: the driver refuses the call; do not read them first. */
    int held[VGPU_REGION_MAX_DEVICES];
    unsigned nheld = 0;
    if (__builtin_expect(vgpu_job_core_limited(), 0) && launchParamsList && numDevices <= VGPU_REGION_MAX_DEVICES)
        for (unsigned int i = 0; i < numDevices; i++)
            held[nheld++] = vgpu_limiter_gate(stream_device(launchParamsList[i].hStream), launchParamsList[i].hStream, false);
    CUresult r = real(launchParamsList, numDevices, flags);
    for (unsigned i = 0; i < nheld; i++)
        vgpu_limiter_launched(held[i]);
    return r;
}

/* The launch API of CUDA 2.0 (deprecated, still exported): cuLaunch and cuLaunchGrid run on the
 * legacy default stream. */
VGPU_EXPORT CUresult cuLaunch(CUfunction f)
{
    GATED(cuLaunch, false, NULL, (f))
}

VGPU_EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    GATED(cuLaunchGrid, false, NULL, (f, grid_width, grid_height))
}

VGPU_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    GATED(cuLaunchGridAsync, false, hStream, (f, grid_width, grid_height, hStream))
}

VGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    GATED(cuLaunchKernelEx, false, config ? config->hStream : NULL, (config, f, kernelParams, extra))
}

VGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                           void **extra)
{
    GATED(cuLaunchKernelEx_ptsz, true, config ? config->hStream : NULL, (config, f, kernelParams, extra))
}

VGPU_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    GATED(cuLaunchHostFunc, false, hStream, (hStream, fn, userData))
}

VGPU_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    GATED(cuLaunchHostFunc_ptsz, true, hStream, (hStream, fn, userData))
}

/* Graph launches also take the graph's memory (graphmem.c): refused with OUT_OF_MEMORY before
 * the gate when it does not fit in the limit, as the driver refuses one on a full GPU. */
VGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    vgpu_cuGraphLaunch_fn real = REAL(cuGraphLaunch);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct vgpu_graph_hold hold;
    if (!vgpu_graph_mem_before(hGraphExec, "cuGraphLaunch", &hold))
        return CUDA_ERROR_OUT_OF_MEMORY;
    int held = vgpu_launch_gate(hStream, false);
    CUresult rc = real(hGraphExec, hStream);
    vgpu_limiter_launched(held);
    vgpu_graph_mem_after(hGraphExec, rc, true, &hold);
    return rc;
}

VGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    vgpu_cuGraphLaunch_ptsz_fn real = REAL(cuGraphLaunch_ptsz);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct vgpu_graph_hold hold;
    if (!vgpu_graph_mem_before(hGraphExec, "cuGraphLaunch_ptsz", &hold))
        return CUDA_ERROR_OUT_OF_MEMORY;
    int held = vgpu_launch_gate(hStream, true);
    CUresult rc = real(hGraphExec, hStream);
    vgpu_limiter_launched(held);
    vgpu_graph_mem_after(hGraphExec, rc, true, &hold);
    return rc;
}
