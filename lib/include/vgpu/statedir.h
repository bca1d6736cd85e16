/* vgpu's per-user state directory (DESIGN.md decision 10):
 *   VGPU_STATE_DIR when set; else /run/vgpu for root; else $XDG_RUNTIME_DIR/vgpu; else
 *   /run/user/UID/vgpu when /run/user/UID is the caller's; else /tmp/vgpu-UID. Created 0700
 *   (explicit modes, umask untouched), with jobs/ and lib/ inside.
 *
 * Trust. A state directory is used only when
 *   - it is a real directory (not a symlink), owned by the caller (a non-root caller may also use
 *     one of root's; root uses only its own), and not writable by group or others;
 *   - every directory above it (after resolving symlinks above it once) belongs to root or to the
 *     caller, and is not writable by group or others unless it is sticky (/tmp): nobody else can
 *     rename it away and put another in its place between our check and a later path lookup
 *     (ld.so's LD_PRELOAD lookup, a job's VGPU_REGION).
 * Everything inside is then reached through the directory handle with the openat family
 * (O_NOFOLLOW, O_EXCL on creation), so a swapped name inside is refused, never followed.
 * libc only (also linked into libvgpu.so). */
#ifndef VGPU_STATEDIR_H
#define VGPU_STATEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "vgpu/log.h"

/* An open, checked state directory. */
struct vgpu_statedir {
    int fd;                 /* O_PATH|O_DIRECTORY|O_NOFOLLOW: a dirfd for the openat family; -1 closed */
    char path[4096];        /* its path with the symlinks above it resolved, for messages and for
                             * paths handed to other processes */
};

/* Opens the state directory. With create, makes it (and jobs/, lib/) when missing; either way
 * checks it as described above. 0, or -1 with e set (VGPU_EXIT_PERMISSION for an unsafe
 * directory, VGPU_EXIT_NOT_FOUND when !create and it does not exist, VGPU_EXIT_FAIL otherwise). */
int vgpu_statedir_open(struct vgpu_statedir *sd, bool create, struct vgpu_err *e);
/* The same for a given path (a state directory found earlier, or a test's). */
int vgpu_statedir_open_path(struct vgpu_statedir *sd, const char *path, bool create, struct vgpu_err *e);
void vgpu_statedir_close(struct vgpu_statedir *sd);

/* Opens the subdirectory `name` of a checked directory, O_RDONLY|O_DIRECTORY|O_NOFOLLOW, and
 * checks it like the state directory itself (creating it 0700 first with create). Returns the
 * descriptor, or -1 with e set (VGPU_EXIT_NOT_FOUND when missing and !create). `shown` is the
 * parent's path, for messages. */
int vgpu_statedir_sub(int dirfd, const char *shown, const char *name, bool create, struct vgpu_err *e);

/* What to do about an errno met in the state directory, for messages: " (the file system is
 * full: ...)" and the like, or "". */
const char *vgpu_statedir_errno_hint(int err);

/* Checks an open directory descriptor: a directory, owned by the caller (or by root when the
 * caller is not root), not writable by group or others. 0, or -1 with e set. */
int vgpu_statedir_check_fd(int fd, const char *path, struct vgpu_err *e);

/* Creates the regular file `name` in dirfd: O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC plus `flags`
 * (O_WRONLY or O_RDWR), with `mode` (the umask can only narrow it). -1 with errno as openat. */
int vgpu_dir_create(int dirfd, const char *name, int flags, mode_t mode);

/* Opens the existing file `name` in dirfd with O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK plus `flags`
 * (O_NONBLOCK so that a FIFO planted there cannot block us; it is cleared again), and fstat()s it
 * into st. A file that is not a regular file is refused (-1, errno EINVAL). */
int vgpu_dir_open(int dirfd, const char *name, int flags, struct stat *st);

/* Compatibility with path-based callers: vgpu_statedir_open(), the path into buf, close.
 * Safe to use only when everything later done with the path is done in the checked directory
 * (see the trust rules above). */
int vgpu_statedir(char *buf, size_t len, bool create, struct vgpu_err *e);

/* Checks one existing directory by path (not followed if it is a symlink), as
 * vgpu_statedir_check_fd. 0, or -1 with e set. */
int vgpu_statedir_check(const char *path, struct vgpu_err *e);

/* mkdir(path, 0700) unless it exists, then vgpu_statedir_check(). */
int vgpu_statedir_mkdir(const char *path, struct vgpu_err *e);

#endif
