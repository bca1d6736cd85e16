/* launch.c: every launch path passes the compute limiter's gate (gate.h). The _ptsz wrappers
 * call the real _ptsz functions, so per-thread default-stream semantics are kept. With no core
 * limit the added cost is the gate's one predictable branch. */
#include "gate.h"
#include "hook.h"

#define GATED(sym, pt, stream, args)                            \
    vgpu_##sym##_fn real = REAL(sym);                           \
    if (__builtin_expect(!real, 0))                             \
        return CUDA_ERROR_NOT_INITIALIZED;                      \
    vgpu_launch_gate(stream, pt);                               \
    return real args;

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
    vgpu_launch_gate(hStream, false);
    CUresult rc = real(hGraphExec, hStream);
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
    vgpu_launch_gate(hStream, true);
    CUresult rc = real(hGraphExec, hStream);
    vgpu_graph_mem_after(hGraphExec, rc, true, &hold);
    return rc;
}
