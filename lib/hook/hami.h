/* hami.h: HAMi-core's environment contract (DESIGN.md decision 5, interception.md §6), parsed
 * strictly. See hami.c and man/libvgpu.7. */
#ifndef VGPU_HOOK_HAMI_H
#define VGPU_HOOK_HAMI_H

struct vgpu_region;

/* Without VGPU_REGION: reads CUDA_DEVICE_MEMORY_LIMIT[_i], CUDA_DEVICE_SM_LIMIT[_i] and
 * CUDA_DEVICE_MEMORY_SHARED_CACHE, and creates or opens the region they describe.
 * 1: r is open; 0: none of the variables is set; -1: an error was reported on stderr and the
 * process must run without limits. */
int vgpu_hami_open(struct vgpu_region *r);

#endif
