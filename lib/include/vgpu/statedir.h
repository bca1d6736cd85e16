/* vgpu's state directory (DESIGN.md decision 10):
 *   VGPU_STATE_DIR when set; else /run/vgpu for root; else $XDG_RUNTIME_DIR/vgpu; else
 *   /tmp/vgpu-UID. Created 0700 (explicit modes, umask untouched), with jobs/ and lib/ inside.
 * A directory owned by another user (unless it is root's, or the caller is root) or writable by
 * group/others is refused:
 * someone else could plant or replace job regions and the preloaded library there.
 * libc only (also linked into libvgpu.so). */
#ifndef VGPU_STATEDIR_H
#define VGPU_STATEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include "vgpu/log.h"

/* Puts the state directory's path into buf. With create, makes it (and jobs/, lib/) when
 * missing; either way checks ownership and modes of what exists. 0, or -1 with e set
 * (VGPU_EXIT_PERMISSION for an unsafe directory, VGPU_EXIT_FAIL otherwise; VGPU_EXIT_NOT_FOUND
 * when !create and it does not exist). */
int vgpu_statedir(char *buf, size_t len, bool create, struct vgpu_err *e);

/* Checks one existing directory: a directory, owned by the caller or root, not group/world
 * writable. 0, or -1 with e set. */
int vgpu_statedir_check(const char *path, struct vgpu_err *e);

/* mkdir(path, 0700) unless it exists, then vgpu_statedir_check(). */
int vgpu_statedir_mkdir(const char *path, struct vgpu_err *e);

#endif
