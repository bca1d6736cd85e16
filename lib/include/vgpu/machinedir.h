/* The machine-wide directory (DESIGN.md decision 10): what every user's jobs must agree on.
 *
 *   VGPU_MACHINE_DIR when set (tests), else /run/vgpu-machine.
 *
 * Owned by root (or, for an override, by the caller), mode 1777: every user may create files,
 * and the sticky bit keeps each user's files their own. root creates it (any vgpu command run
 * as root that needs it, or the tmpfiles.d entry `make install` ships); a user who finds it
 * missing is told so and runs without the machine-wide view. It holds the placement ledger
 * (placement.c). The GPU-time schedules are System V segments whose keys are derived from its
 * path (sched.h says why they are not files). Everything in it is untrusted input: files are
 * opened O_NOFOLLOW relative to a descriptor of the directory, checked with fstat, and parsed
 * strictly. libc only (also linked into libvgpu.so). */
#ifndef VGPU_MACHINEDIR_H
#define VGPU_MACHINEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include "vgpu/log.h"

#define VGPU_MACHINEDIR_DEFAULT "/run/vgpu-machine"

/* The directory's path (no checks): VGPU_MACHINE_DIR or the default. */
const char *vgpu_machinedir_path(void);

/* Opens the directory O_DIRECTORY|O_NOFOLLOW and checks it with fstat: a directory owned by root
 * (or by the caller), and sticky when others may write it. With create and root, makes it (1777)
 * when missing. A descriptor, or -1 with e set (VGPU_EXIT_STATE when missing: the message says
 * who creates it; VGPU_EXIT_PERMISSION when unsafe). */
int vgpu_machinedir_open(bool create, struct vgpu_err *e);

/* Opens (making it 1777 when missing) the subdirectory `name` of the directory dfd, with the
 * same checks. A descriptor, or -1 with e set. */
int vgpu_machinedir_sub(int dfd, const char *name, struct vgpu_err *e);

#endif
