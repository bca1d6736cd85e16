/* The machine-wide directory (DESIGN.md decision 10): root's, mode 0755.
 *
 *   VGPU_MACHINE_DIR when set (tests), else /run/vgpu-machine.
 *
 * It holds what root alone writes and every user reads: the arbiter's socket (arbiter/, see
 * vgpu/arbiter.h), root's policy file (vgpu/jobcount.h) and the limits of jobs root runs as
 * another user (userjobs/, vgpu/userjobs.h). No user writes anything in it: placement promises,
 * the --wait queue and the job count are kept by the arbiter, or per user without it
 * (lib/core/place/ledger.h). root creates it (vgpu daemon, any vgpu command of root's that needs
 * it, or the tmpfiles.d entry `make install` ships), and takes back the write bits of one an older
 * vgpu made 1777. A directory others may write is refused unless sticky and root's (or the
 * caller's). Everything in it is opened O_NOFOLLOW relative to a descriptor of the directory,
 * checked with fstat, and parsed strictly. libc only (also linked into libvgpu.so). */
#ifndef VGPU_MACHINEDIR_H
#define VGPU_MACHINEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include "vgpu/log.h"

#define VGPU_MACHINEDIR_DEFAULT "/run/vgpu-machine"

/* The directory's path (no checks): VGPU_MACHINE_DIR or the default. */
const char *vgpu_machinedir_path(void);

/* Opens the directory O_DIRECTORY|O_NOFOLLOW and checks it with fstat: a directory owned by root
 * (or by the caller), and sticky when others may write it. With create and root, makes it (0755)
 * when missing. A descriptor, or -1 with e set (VGPU_EXIT_STATE when missing: the message says
 * who creates it; VGPU_EXIT_PERMISSION when unsafe). */
int vgpu_machinedir_open(bool create, struct vgpu_err *e);

/* True (with e set, VGPU_EXIT_STATE) when VGPU_MACHINE_DIR names a directory that does not
 * exist: a command that works there says so rather than go on without it. */
bool vgpu_machinedir_named_missing(struct vgpu_err *e);

/* Opens (making it 0755 when missing) the subdirectory `name` of the directory dfd, with the
 * same checks. A descriptor, or -1 with e set. */
int vgpu_machinedir_sub(int dfd, const char *name, struct vgpu_err *e);

#endif
