/* What root may load, run or work in (DESIGN.md decision 10, issue 25 item 4).
 *
 * `sudo -E` keeps VGPU_* variables, so a path in root's environment may have been chosen by
 * another user. When vgpu or libvgpu.so runs with euid 0, a path that names code to load
 * (VGPU_NVML_LIB, VGPU_LIBRARY), a program to run (VGPU_NVIDIA_SMI, VGPU_MPS_CONTROL) or a
 * directory to work in (VGPU_MACHINE_DIR, VGPU_STATE_DIR, ...) is used only when nobody but root
 * can change what it names, now or between this check and its use:
 *   - every component, from / down, and every symbolic link met on the way (and every component
 *     of where it points), belongs to root;
 *   - no directory on the way is writable by group or others, unless it is sticky (/tmp): in a
 *     sticky directory only an entry's owner (root, checked) or the directory's owner (root,
 *     checked) may rename or remove it, so a root-owned entry there cannot be replaced;
 *   - the file itself is not writable by group or others (a directory to work in may be sticky).
 * Otherwise the check fails, naming the component, its owner and mode, and what to do.
 * For any other euid the checks pass: a user may load their own files.
 * libc only (also linked into libvgpu.so). */
#ifndef VGPU_TRUST_H
#define VGPU_TRUST_H

#include <stdbool.h>
#include "vgpu/log.h"

enum {
    /* The path is a directory to work in: it may be writable by others when sticky (the
     * machine-wide directory is 1777); its own checks (owner, mode) are its caller's. */
    VGPU_TRUST_DIR = 1u,
    /* The last component may not exist yet: root creates it in a checked directory. Without
     * this, a missing file fails (VGPU_EXIT_NOT_FOUND): one created after the check, in a
     * sticky directory, would be someone else's. */
    VGPU_TRUST_MAY_BE_MISSING = 2u,
    /* A name without '/' is looked up by the loader or on PATH, like the default it replaces
     * (libnvidia-ml.so.1, nvidia-smi): not checked here. */
    VGPU_TRUST_SEARCHED = 4u,
    /* The last component must be root's, but its mode is its program's business: the MPS
     * daemon makes its pipe directory 0777 for its clients. The directories above it are
     * checked as ever (no one can put another in its place). */
    VGPU_TRUST_ANY_MODE = 8u,
};

/* Whether the checks apply: euid 0. */
bool vgpu_trust_applies(void);

/* Checks `path` as above. `source` names where the path came from, for the message
 * ("VGPU_NVML_LIB", "--textfile"); NULL for none. 0 when it may be used (or euid is not 0), -1
 * with e set: VGPU_EXIT_PERMISSION when someone else could change it, VGPU_EXIT_NOT_FOUND when
 * missing (see VGPU_TRUST_MAY_BE_MISSING), VGPU_EXIT_FAIL when it cannot be checked. */
int vgpu_trust_path(const char *path, const char *source, unsigned flags, struct vgpu_err *e);

/* Every path variable of vgpu's own (VGPU_NVML_LIB, VGPU_NVIDIA_SMI, VGPU_MPS_CONTROL,
 * VGPU_LIBRARY, VGPU_MACHINE_DIR, VGPU_NVIDIA_PROC; VGPU_STATE_DIR is statedir.c's, whose messages say more) that is set, checked at once: vgpu refuses any
 * command as root before it starts when one fails, whether that command would use it or not.
 * Each place that uses one checks it again (libvgpu.so and the Slurm plugin do not go through
 * vgpu's dispatcher). 0, or -1 with e set. */
int vgpu_trust_env(struct vgpu_err *e);

#endif
