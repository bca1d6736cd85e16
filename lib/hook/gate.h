/* gate.h: the compute limiter's hook point. Every launch path of libvgpu.so (cuLaunchKernel,
 * cuLaunchKernelEx, cuLaunchCooperativeKernel, cuLaunchHostFunc, cuGraphLaunch and their _ptsz
 * variants; the legacy cuLaunch, cuLaunchGrid and cuLaunchGridAsync; launch.c) calls
 * vgpu_launch_gate(stream, per_thread) before the real launch, and
 * cuLaunchCooperativeKernelMultiDevice calls the limiter once per device.
 *
 *  - `stream` is exactly what the application passed (NULL, CU_STREAM_LEGACY,
 *    CU_STREAM_PER_THREAD or a handle); `per_thread` is true for the _ptsz variants (stream 0
 *    then means the calling thread's own default stream).
 *  - With no core limit anywhere in the job it costs one predictable branch on a cached flag
 *    (vgpu_job_core_limited(), refreshed when `vgpu limit` changes the limits); otherwise the
 *    limiter (limiter.h) decides, possibly waiting (bounded) for the job's turn. The gate never
 *    fails a launch. */
#ifndef VGPU_HOOK_GATE_H
#define VGPU_HOOK_GATE_H

#include <stdbool.h>

#include "limiter.h"
#include "vgpu_cuda.h"

bool vgpu_job_core_limited(void);

static inline void vgpu_launch_gate(CUstream stream, bool per_thread)
{
    if (__builtin_expect(vgpu_job_core_limited(), 0))
        vgpu_limiter_gate(-1, stream, per_thread);
}

#endif
