/* limiter.h: the compute limiter of libvgpu.so (DESIGN.md decision 7; model in vgpu/sched.h).
 *
 * The launch gate (gate.h) calls vgpu_limiter_gate() before every launch of a job that has a
 * core limit on some device. Under budget it costs two atomic loads of the lease word, an atomic
 * increment before the real launch and a decrement after it (launches inside the driver, which
 * a drain waits for), a few thread-local compares and a counter (every 8th launch also reads
 * the shared lease and the clock); no system call. Otherwise it waits (sleeping, never spinning) for the job's next turn on that GPU.
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
/* Returns the job device whose lease the launch runs under (its count of launches inside the
 * driver was raised: call vgpu_limiter_launched(dev) once the real launch returned), or -1. */
int vgpu_limiter_gate(int dev, CUstream stream, bool ptsz);
/* The launch counted by vgpu_limiter_gate returned from the driver. A drain waits for every
 * counted launch first: a launch that blocked in the driver (a full push buffer) while its lease
 * ended would otherwise queue its kernel into the next holder's turn, uncharged. */
void vgpu_limiter_launched(int dev);

#endif
