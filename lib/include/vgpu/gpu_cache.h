/* The GPU list kept between jobs (issue 34 item 1): vgpu run without an arbiter loaded NVML
 * before every command to learn the GPUs' UUIDs and sizes: on an H200, 20 of the 31 ms that
 * `vgpu run -- true` took. A job that makes a context gains less (25 interleaved rounds: 358 ms
 * against 364, bare 321): the driver's work moves to the accounting's first look, in the job's start.
 * A list NVML gave is kept in the caller's state directory (gpus.cache, 0600) and used instead
 * while the driver shows the same GPUs:
 *   - the same boot (/proc/sys/kernel/random/boot_id);
 *   - the same driver's /proc files: its version, each GPU's information file (model, UUID, bus,
 *     minor), and the names under capabilities/ (a MIG instance made or destroyed adds or
 *     removes one);
 *   - at most VGPU_GPU_CACHE_S seconds old (default 60, 0: never kept).
 * Only a list of whole, healthy GPUs is kept: none lost or unreachable, none in MIG mode or with
 * one pending (NVML is asked each time there). vgpu run checks a kept list against NVML while the
 * command runs (its first walk, which loads NVML for the accounting anyway): a list that
 * disagrees is forgotten and said, one that agrees is kept again. `vgpu mig` forgets it.
 * VGPU_NVIDIA_PROC names the driver's /proc directory (default /proc/driver/nvidia; tests).
 * This is vgpu-side code (not used by libvgpu.so). */
#ifndef VGPU_GPU_CACHE_H
#define VGPU_GPU_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include "vgpu/gpu.h"

/* 1 with out filled when a kept list is still the driver's, else 0 (none kept, another boot, the
 * driver's files changed, too old, unreadable or damaged: each said at debug level). */
int vgpu_gpu_cache_load(struct vgpu_gpu_list *out);

/* Keeps list for the next jobs, when it is one that may be kept (above). Best effort: a list
 * that cannot be written is said at debug level and NVML is asked next time. */
void vgpu_gpu_cache_store(const struct vgpu_gpu_list *list);

/* Removes the kept list (vgpu mig, or a list found out of date). */
void vgpu_gpu_cache_forget(void);

/* Whether `now` (NVML's list) still has the GPU `uuid` as `kept` had it (same index, size, not
 * lost, not in MIG mode). false with why set ("GPU-... has 80 GiB now, 141 GiB were kept"). */
bool vgpu_gpu_cache_agrees(const struct vgpu_gpu_list *kept, const struct vgpu_gpu_list *now, const char *uuid,
                           char *why, size_t len);

#endif
