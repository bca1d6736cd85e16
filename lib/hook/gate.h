/* gate.h: the compute limiter's hook point. Every launch path of libvgpu.so (cuLaunchKernel,
 * cuLaunchKernelEx, cuLaunchCooperativeKernel, cuLaunchHostFunc, cuGraphLaunch and their _ptsz
 * variants; the legacy cuLaunch, cuLaunchGrid and cuLaunchGridAsync; launch.c) calls
 * vgpu_launch_gate(stream, per_thread) before the real launch, and
 * cuLaunchCooperativeKernelMultiDevice calls the limiter once per device.
 *
 *  - `stream` is exactly what the application passed (NULL, CU_STREAM_LEGACY,
 *    CU_STREAM_PER_THREAD or a handle); `per_thread` is true for the _ptsz variants (stream 0
 *    then means the calling thread's own default stream).
 *  - With no core limit anywhere in the job it costs three loads and two predictable branches,
 *    inline, with no call: the job's limits sequence (bumped by every `vgpu limit`), the
 *    sequence last looked at, and the answer then (vgpu_gate, kept by config.c). A call (to
 *    vgpu_job_core_limited) happens only before the job is known and after a limit changed.
 *    Otherwise the limiter (limiter.h) decides, possibly waiting (bounded) for the job's turn.
 *    The gate never fails a launch. */
#ifndef VGPU_HOOK_GATE_H
#define VGPU_HOOK_GATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "limiter.h"
#include "vgpu_cuda.h"

struct vgpu_gate_state {
    _Atomic(const _Atomic uint32_t *) limits_seq;  /* the job region's limits_seq; NULL: no job yet */
    _Atomic uint32_t seen_seq;                     /* the sequence core_any was computed at */
    _Atomic bool core_any;                         /* a core limit on some device of the job */
    _Atomic bool one_device;                       /* the job has one GPU: it is CUDA ordinal 0 */
};
extern struct vgpu_gate_state vgpu_gate;

/* Recomputes core_any when the sequence moved (or the job is not known yet). */
bool vgpu_job_core_limited(void);

/* -1: nothing to report after the launch; else the device to pass to vgpu_limiter_launched. */
static inline int vgpu_launch_gate(CUstream stream, bool per_thread)
{
    const _Atomic uint32_t *seq = atomic_load_explicit(&vgpu_gate.limits_seq, memory_order_acquire);
    bool limited;
    if (__builtin_expect(seq != NULL && atomic_load_explicit(seq, memory_order_relaxed) ==
                                            atomic_load_explicit(&vgpu_gate.seen_seq, memory_order_acquire), 1))
        limited = atomic_load_explicit(&vgpu_gate.core_any, memory_order_relaxed);
    else
        limited = vgpu_job_core_limited();
    if (__builtin_expect(limited, 0))
        return vgpu_limiter_gate(atomic_load_explicit(&vgpu_gate.one_device, memory_order_relaxed) ? 0 : -1, stream,
                                 per_thread);
    return -1;
}

#endif
