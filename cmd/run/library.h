/* Which libvgpu.so `vgpu run` preloads (DESIGN.md decision 2). */
#ifndef VGPU_CMD_RUN_LIBRARY_H
#define VGPU_CMD_RUN_LIBRARY_H

#include <stddef.h>
#include "vgpu/log.h"

/* In order: $VGPU_LIBRARY (must exist); libvgpu.so beside the vgpu binary (a build tree);
 * ../lib/vgpu/libvgpu.so relative to it (installed); else the copy linked inside vgpu, written
 * once by content hash to <statedir>/lib/libvgpu-<hash>.so (0500, atomically).
 * Puts an absolute path into buf. 0, or -1 with e set. */
int vgpu_run_find_library(const char *statedir, char *buf, size_t len, struct vgpu_err *e);

#endif
