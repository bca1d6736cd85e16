/* launch.c: kernel launches and how long a kernel occupies its device.
 *
 * Duration of one kernel, first rule that applies:
 *  1. the function is named "sleep_us": its first kernel parameter is an unsigned long long
 *     number of microseconds (kernelParams[0] points to it, or the first 8 bytes of the
 *     CU_LAUNCH_PARAM_BUFFER_POINTER buffer);
 *  2. env VGPU_FAKE_KERNEL_US (microseconds, for every kernel);
 *  3. from the launch shape: blocks resident per SM = min(32, max(1, 2048 / threads per block)),
 *     waves = ceil(blocks / (SMs × resident blocks per SM)), duration = 5 µs + waves × 10 µs.
 * Its width (the share of the SMs it occupies) is the share of one wave its blocks fill,
 * min(1, blocks / (SMs x resident blocks per SM)), except a "sleep_us" kernel, which fills the
 * device, and "sleep_us_w", whose second parameter (an unsigned long long) is the percentage.
 * A "collective_us" kernel is one rank's part of a collective, as an NCCL kernel: its four
 * parameters (unsigned long long each) are the microseconds it runs once all ranks are there,
 * the communicator id, the operation's sequence number in it, and the number of ranks. Once it
 * has the device it spins, filling the device and busy, until the kernels of the same
 * (communicator, sequence) on the other ranks have all started (common/timeline.c).
 * A kernel that migrates managed memory in by its page faults runs longer by the time they take
 * (cuda/managed.c). When it runs is the timeline's business (common/timeline.c): streams of one
 * context side by side, contexts in time slices. A launch waits first while its context has too much work
 * queued (the push buffer, fc_queue_admit). */
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

static unsigned shape_width(const struct fc_launch *l, int device)
{
    unsigned long long threads = (unsigned long long)l->block[0] * l->block[1] * l->block[2];
    unsigned long long blocks = (unsigned long long)l->grid[0] * l->grid[1] * l->grid[2];
    unsigned long long per_sm = threads ? 2048 / threads : 1;
    per_sm = per_sm < 1 ? 1 : per_sm > 32 ? 32 : per_sm;
    unsigned long long slots = per_sm * (unsigned long long)(fc_devs[device].sm_count > 0 ? fc_devs[device].sm_count : 1);
    unsigned long long w = blocks >= slots ? 1000 : blocks * 1000 / slots;
    return w ? (unsigned)w : 1;
}

static uint64_t shape_ns(const struct fc_launch *l, int device)
{
    unsigned long long threads = (unsigned long long)l->block[0] * l->block[1] * l->block[2];
    unsigned long long blocks = (unsigned long long)l->grid[0] * l->grid[1] * l->grid[2];
    unsigned long long per_sm = threads ? 2048 / threads : 1;
    if (per_sm < 1)
        per_sm = 1;
    if (per_sm > 32)
        per_sm = 32;
    unsigned long long slots = per_sm * (unsigned long long)(fc_devs[device].sm_count > 0 ? fc_devs[device].sm_count : 1);
    unsigned long long waves = (blocks + slots - 1) / slots;
    return (5 + waves * 10) * 1000ULL;
}

CUresult fc_launch_prepare(struct fc_launch *l, CUfunction f, const unsigned int grid[3],
                           const unsigned int block[3], unsigned int shmem, void **params,
                           void **extra)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (fc_func_valid(f) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned long long)block[0] * block[1] * block[2] > 1024 || block[2] > 64 || grid[1] > 65535 ||
        grid[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (shmem > 232448)
        return CUDA_ERROR_INVALID_VALUE;
    if (params && extra)
        return CUDA_ERROR_INVALID_VALUE;
    memset(l, 0, sizeof *l);
    l->func = (struct fc_func *)f;
    memcpy(l->grid, grid, sizeof l->grid);
    memcpy(l->block, block, sizeof l->block);
    l->shmem = shmem;
    const char *env = getenv("VGPU_FAKE_KERNEL_US");
    l->width = shape_width(l, c->device);
    if (l->func->collective) {
        unsigned long long v[4];
        if (!params)
            return CUDA_ERROR_INVALID_VALUE; /* collective_us needs its four arguments */
        for (int i = 0; i < 4; i++) {
            if (!params[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(&v[i], params[i], sizeof v[i]);
        }
        if (v[3] < 1 || v[3] > 4096)
            return CUDA_ERROR_INVALID_VALUE;
        l->width = 1000;
        l->dur_ns = v[0] * 1000ULL;
        l->coll = (struct fc_coll){ v[1], v[2], (unsigned)v[3] };
    } else if (l->func->sleep_us) {
        unsigned long long us = 0;
        l->width = 1000;
        if (l->func->width_param) {
            unsigned long long pct = 0;
            if (!params || !params[0] || !params[1])
                return CUDA_ERROR_INVALID_VALUE; /* sleep_us_w needs both arguments */
            memcpy(&pct, params[1], sizeof pct);
            if (pct < 1 || pct > 100)
                return CUDA_ERROR_INVALID_VALUE;
            l->width = (unsigned)pct * 10;
        }
        if (params && params[0]) {
            memcpy(&us, params[0], sizeof us);
        } else if (extra) {
            for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2)
                if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i + 1])
                    memcpy(&us, extra[i + 1], sizeof us);
        } else {
            return CUDA_ERROR_INVALID_VALUE; /* sleep_us needs its argument */
        }
        l->dur_ns = us * 1000ULL;
    } else if (env && *env) {
        l->dur_ns = strtoull(env, NULL, 10) * 1000ULL;
    } else {
        l->dur_ns = shape_ns(l, c->device);
    }
    return CUDA_SUCCESS;
}

CUresult fc_launch_submit(const struct fc_launch *l, CUstream stream, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (fc_dev_lost(c->device))
        return CUDA_ERROR_LAUNCH_FAILED;
    fc_queue_admit(c);
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(stream, ptsz, c, &st);
    if (r == CUDA_SUCCESS) {
        if (st && st->capture)
            r = l->coll.nranks ? CUDA_ERROR_NOT_SUPPORTED   /* collectives in graphs: not simulated */
                               : fc_graph_capture_kernel(st, l);
        else {
            /* The kernel's page faults migrate managed memory in; it stalls on them meanwhile. */
            uint64_t faults_ns = fc_managed_on_launch(c);
            fc_stream_enqueue(c, st, l->dur_ns + faults_ns, l->width, &l->coll, false);
            if (l->func->fault && !c->fault.seq)
                c->fault = st ? st->last : c->legacy_last;   /* broken once it runs */
        }
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                       unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                       void **extra, bool ptsz, bool cooperative)
{
    struct fc_launch l;
    const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };
    CUresult r = fc_launch_prepare(&l, f, grid, block, shmem, params, extra);
    if (r != CUDA_SUCCESS)
        return r;
    if (cooperative) {
        /* A cooperative grid must be co-resident: at most one wave. */
        struct fc_ctx *c;
        if (fc_current(&c) == CUDA_SUCCESS) {
            unsigned long long threads = (unsigned long long)bx * by * bz;
            unsigned long long per_sm = threads ? 2048 / threads : 1;
            if (per_sm > 32)
                per_sm = 32;
            if ((unsigned long long)gx * gy * gz > per_sm * (unsigned long long)fc_devs[c->device].sm_count)
                return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        }
    }
    return fc_launch_submit(&l, s, ptsz);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    FC_TRACE();
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                  kernelParams, extra, false, false);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                             unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                             unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    FC_TRACE();
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                  kernelParams, extra, true, false);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                   unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    FC_TRACE();
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                  kernelParams, NULL, false, true);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
{
    FC_TRACE();
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                  kernelParams, NULL, true, true);
}

/* The launch API of CUDA 2.0 (deprecated, still exported by the driver). The block shape and
 * the parameters were set beforehand with cuFuncSetBlockShape and cuParamSet*, which this
 * simulation does not keep: a legacy launch runs blocks of one thread, and its duration comes
 * from VGPU_FAKE_KERNEL_US or the shape (a "sleep_us" function cannot be launched this way).
 * cuLaunch and cuLaunchGrid use the legacy default stream. */
CUresult cuLaunch(CUfunction f)
{
    FC_TRACE();
    return launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL, false, false);
}

CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    FC_TRACE();
    if (grid_width <= 0 || grid_height <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, (unsigned)grid_width, (unsigned)grid_height, 1, 1, 1, 1, 0, NULL, NULL, NULL, false, false);
}

CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    FC_TRACE();
    if (grid_width <= 0 || grid_height <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, (unsigned)grid_width, (unsigned)grid_height, 1, 1, 1, 1, 0, hStream, NULL, NULL, false, false);
}

/* One cooperative kernel on several devices at once: each part names its own stream, which must
 * be a created stream (not a default one) of a context on a device no other part uses. Each part
 * is submitted in its stream's context. */
CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int numDevices, unsigned int flags)
{
    FC_TRACE();
    if (!list || numDevices == 0 || numDevices > FC_MAX_DEVICES || (flags & ~3u))
        return CUDA_ERROR_INVALID_VALUE;
    bool used[FC_MAX_DEVICES] = { false };
    for (unsigned int i = 0; i < numDevices; i++) {
        CUstream s = list[i].hStream;
        if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
            return CUDA_ERROR_INVALID_VALUE;
        const struct fc_stream *st = (const struct fc_stream *)s;
        if (st->magic != FC_STREAM_MAGIC || fc_ctx_valid((CUcontext)st->ctx) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_HANDLE;
        if (used[st->ctx->device])
            return CUDA_ERROR_INVALID_DEVICE;
        used[st->ctx->device] = true;
    }
    for (unsigned int i = 0; i < numDevices; i++) {
        const CUDA_LAUNCH_PARAMS *l = &list[i];
        CUcontext c = (CUcontext)((const struct fc_stream *)l->hStream)->ctx, popped;
        CUresult r = cuCtxPushCurrent_v2(c);
        if (r != CUDA_SUCCESS)
            return r;
        r = launch(l->function, l->gridDimX, l->gridDimY, l->gridDimZ, l->blockDimX, l->blockDimY, l->blockDimZ,
                   l->sharedMemBytes, l->hStream, l->kernelParams, NULL, false, true);
        cuCtxPopCurrent_v2(&popped);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **params, void **extra, bool ptsz)
{
    if (!config || (config->numAttrs && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    bool coop = false;
    for (unsigned int i = 0; i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && config->attrs[i].value.cooperative)
            coop = true;
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX, config->blockDimY,
                  config->blockDimZ, config->sharedMemBytes, config->hStream, params, extra, ptsz, coop);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{ FC_TRACE(); return launch_ex(config, f, kernelParams, extra, false); }
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{ FC_TRACE(); return launch_ex(config, f, kernelParams, extra, true); }
