/* limiter.h: the compute limiter of libvgpu.so (DESIGN.md decision 7; model in vgpu/sched.h).
 *
 * The launch gate (gate.h) calls vgpu_limiter_gate() before every launch of a job that has a
 * core limit on some device. Under budget it costs one atomic load, a few thread-local compares
 * and a counter (every 8th launch also reads the shared lease and the clock); otherwise it waits (sleeping, never spinning) for the job's next turn on that GPU.
 * A helper thread of the process ends each turn at its deadline: it waits until the work the
 * process submitted during the turn has finished (events on the streams used, through the real
 * driver), charges the time to the job and passes the turn on. */
#ifndef VGPU_LIMITER_H
#define VGPU_LIMITER_H

#include <stdbool.h>
#include "vgpu_cuda.h"

/* dev: the job device (CUDA ordinal) of the launch, or -1 to take the current context's;
 * stream: the launch's stream as the application passed it; ptsz: the launch came through a
 * _ptsz entry point (stream 0 then means the calling thread's default stream). */
void vgpu_limiter_gate(int dev, CUstream stream, bool ptsz);

#endif
