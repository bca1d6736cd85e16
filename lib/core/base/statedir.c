/* The state directory: where job regions, their logs and the extracted libvgpu.so live. The trust
 * rules are in vgpu/statedir.h; this file enforces them once, at open, and hands out a directory
 * handle so that nothing later depends on a path lookup that someone else could redirect. */
#include "vgpu/statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/trust.h"

static int errno_code(int err)
{
    return err == ENOENT ? VGPU_EXIT_NOT_FOUND : err == EACCES || err == EPERM ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL;
}

const char *vgpu_statedir_errno_hint(int err)
{
    if (err == EMFILE || err == ENFILE)
        return " (no file descriptor left: close some, or raise the limit with ulimit -n)";
    if (err == ENOSPC || err == EDQUOT)
        return " (the file system is full: free space there, or set VGPU_STATE_DIR)";
    return "";
}

int vgpu_statedir_check_fd(int fd, const char *path, struct vgpu_err *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot use the state directory %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory %s is not a directory; remove it or set VGPU_STATE_DIR",
                     path);
        return -1;
    }
    uid_t me = geteuid();
    if (st.st_uid != me && me == 0) {
        /* Root never works in a directory a user owns: the owner could swap what root then reads,
         * deletes or preloads (a library renamed over the unpacked one ran as root). */
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the state directory %s: it belongs to uid %u, and root uses only directories root "
                     "owns, since their owner could swap the files root reads, removes or preloads there; unset "
                     "VGPU_STATE_DIR (root's is /run/vgpu), or run vgpu as that user (runuser -u USER -- vgpu ...)",
                     path, (unsigned)st.st_uid);
        return -1;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the state directory %s: it belongs to uid %u, not to you (uid %u), so its owner could "
                     "plant job files there; use a directory of your own (VGPU_STATE_DIR)",
                     path, (unsigned)st.st_uid, (unsigned)me);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the state directory %s: it is writable by group or others (mode %03o), so anyone "
                     "could replace job files; run chmod go-w %s, or use another VGPU_STATE_DIR",
                     path, (unsigned)(st.st_mode & 0777), path);
        return -1;
    }
    return 0;
}

/* A directory above the state directory: whoever may rename entries in it could put another
 * state directory in place of ours after we checked it. Root and the caller are trusted; a
 * directory others may write is fine only when sticky (they cannot rename what is not theirs). */
static int check_ancestor(int fd, const char *path, struct vgpu_err *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot check %s: %s", path, strerror(errno));
        return -1;
    }
    uid_t me = geteuid();
    if (st.st_uid != 0 && st.st_uid != me) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the state directory under %s: that directory belongs to uid %u, who could replace the "
                     "state directory with another; put the state directory (VGPU_STATE_DIR) under directories only "
                     "you or root own",
                     path, (unsigned)st.st_uid);
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the state directory under %s: that directory is writable by group or others without "
                     "the sticky bit (mode %04o), so they could replace the state directory; run chmod go-w %s, or "
                     "use another VGPU_STATE_DIR",
                     path, (unsigned)(st.st_mode & 07777), path);
        return -1;
    }
    return 0;
}

/* Opens dir (symlinks resolved once, by realpath) by walking down from / with O_NOFOLLOW, checking
 * each directory on the way. Its resolved path goes into canon. A descriptor, or -1 with e set. */
static int open_parent(const char *dir, char *canon, size_t len, struct vgpu_err *e)
{
    char real[PATH_MAX];
    if (!realpath(dir, real)) {
        vgpu_err_set(e, errno_code(errno), "cannot use the state directory's parent %s: %s%s", dir, strerror(errno),
                     vgpu_statedir_errno_hint(errno));
        return -1;
    }
    if (strlen(real) >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %s", real);
        return -1;
    }
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || check_ancestor(fd, "/", e) < 0) {
        if (fd < 0)
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot open /: %s%s", strerror(errno), vgpu_statedir_errno_hint(errno));
        else
            close(fd);
        return -1;
    }
    char walked[PATH_MAX];
    size_t used = 0;
    walked[0] = 0;
    for (char *save = NULL, *comp = strtok_r(real, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        used += (size_t)snprintf(walked + used, sizeof walked - used, "/%s", comp);
        int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        close(fd);
        if (next < 0) {
            /* ELOOP/ENOTDIR: a symlink appeared after realpath() resolved it; someone is racing us. */
            vgpu_err_set(e, errno_code(err), "cannot use the state directory's parent %s: %s%s", walked, strerror(err),
                         vgpu_statedir_errno_hint(err));
            return -1;
        }
        fd = next;
        if (check_ancestor(fd, walked, e) < 0) {
            close(fd);
            return -1;
        }
    }
    snprintf(canon, len, "%s", used ? walked : "/");
    return fd;
}

static int base_dir(char *buf, size_t len, struct vgpu_err *e)
{
    const char *env = getenv("VGPU_STATE_DIR");
    int n;
    uid_t me = geteuid();
    char run_user[64];
    struct stat st;
    snprintf(run_user, sizeof run_user, "/run/user/%u", (unsigned)me);
    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (me == 0)
        n = snprintf(buf, len, "/run/vgpu");
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        n = snprintf(buf, len, "%s/vgpu", env);
    else if (lstat(run_user, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == me)
        /* The login session's runtime directory, even when XDG_RUNTIME_DIR was not passed on
         * (sudo, cron): /tmp/vgpu-UID is a name any user can create first to deny us service. */
        n = snprintf(buf, len, "%s/vgpu", run_user);
    else
        n = snprintf(buf, len, "/tmp/vgpu-%u", (unsigned)me);
    if (n < 0 || (size_t)n >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long (VGPU_STATE_DIR or XDG_RUNTIME_DIR)");
        return -1;
    }
    /* Paths are joined as DIR/jobs, DIR/lib: a trailing '/' would print as "//lib". */
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    if (strcmp(buf, "/") == 0) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the state directory cannot be / (VGPU_STATE_DIR=%s): give a directory of "
                     "vgpu's own, such as /run/vgpu, or unset VGPU_STATE_DIR", getenv("VGPU_STATE_DIR"));
        return -1;
    }
    return 0;
}

int vgpu_statedir_sub(int dirfd, const char *shown, const char *name, bool create, struct vgpu_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", shown, name);
    if (create && mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST) {
        vgpu_err_set(e, errno_code(errno), "cannot create %s: %s%s", path, strerror(errno), vgpu_statedir_errno_hint(errno));
        return -1;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOTDIR || err == ELOOP)
            vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                         "refusing %s: it is not a directory but a symlink or a file, which vgpu never follows there; "
                         "remove it (vgpu recreates it)", path);
        else
            vgpu_err_set(e, errno_code(err), "cannot open %s: %s%s", path, strerror(err), vgpu_statedir_errno_hint(err));
        return -1;
    }
    if (vgpu_statedir_check_fd(fd, path, e) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int vgpu_statedir_open(struct vgpu_statedir *sd, bool create, struct vgpu_err *e)
{
    char want[4096];
    sd->fd = -1;
    sd->path[0] = 0;
    if (base_dir(want, sizeof want, e) < 0)
        return -1;
    if (vgpu_statedir_open_path(sd, want, create, e) < 0)
        return -1;
    /* open_path() checked the directories the path resolves to; this also checks the symbolic
     * links on the way, which another user could point elsewhere before root's next run. */
    const char *set = getenv("VGPU_STATE_DIR");
    if (set && *set && vgpu_trust_path(want, "VGPU_STATE_DIR", VGPU_TRUST_DIR | VGPU_TRUST_MAY_BE_MISSING, e) != 0) {
        vgpu_statedir_close(sd);
        return -1;
    }
    return 0;
}

int vgpu_statedir_open_path(struct vgpu_statedir *sd, const char *path, bool create, struct vgpu_err *e)
{
    sd->fd = -1;
    sd->path[0] = 0;
    char want[4096], canon[4096];
    if ((size_t)snprintf(want, sizeof want, "%s", path) >= sizeof want) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %.200s...", path);
        return -1;
    }
    size_t n = strlen(want);
    while (n > 1 && want[n - 1] == '/')
        want[--n] = 0;
    char *slash = strrchr(want, '/');
    const char *parent = ".", *name = want;
    if (slash == want) {
        parent = "/";
        name = want + 1;
    } else if (slash) {
        *slash = 0;
        parent = want;
        name = slash + 1;
    }
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the state directory '%s' must name a directory of its own, such as /run/vgpu",
                     path);
        return -1;
    }
    int pfd = open_parent(parent, canon, sizeof canon, e);
    if (pfd < 0)
        return -1;
    if ((size_t)snprintf(sd->path, sizeof sd->path, "%s/%s", strcmp(canon, "/") ? canon : "", name) >=
        sizeof sd->path) {
        close(pfd);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %s/%s", canon, name);
        return -1;
    }
    /* mkdir's mode is filtered by the umask; a stricter umask only makes it safer, and we never
     * change the umask (the library shares the process with the application). */
    if (create && mkdirat(pfd, name, 0700) < 0 && errno != EEXIST) {
        int err = errno;
        close(pfd);
        vgpu_err_set(e, errno_code(err) == VGPU_EXIT_NOT_FOUND ? VGPU_EXIT_FAIL : errno_code(err),
                     "cannot create the state directory %s: %s%s", sd->path, strerror(err), vgpu_statedir_errno_hint(err));
        return -1;
    }
    int fd = openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(pfd);
    if (fd < 0) {
        if (err == ENOTDIR || err == ELOOP)
            vgpu_err_set(e, VGPU_EXIT_FAIL,
                         "the state directory %s is not a directory (a symlink or a file); remove it or set "
                         "VGPU_STATE_DIR", sd->path);
        else
            vgpu_err_set(e, errno_code(err), "cannot use the state directory %s: %s%s", sd->path, strerror(err),
                         vgpu_statedir_errno_hint(err));
        return -1;
    }
    if (vgpu_statedir_check_fd(fd, sd->path, e) < 0) {
        close(fd);
        return -1;
    }
    if (create) {
        static const char *const subdirs[] = { "jobs", "lib" };
        for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
            int s = vgpu_statedir_sub(fd, sd->path, subdirs[i], true, e);
            if (s < 0) {
                close(fd);
                return -1;
            }
            close(s);
        }
    }
    sd->fd = fd;
    return 0;
}

void vgpu_statedir_close(struct vgpu_statedir *sd)
{
    if (sd->fd >= 0)
        close(sd->fd);
    sd->fd = -1;
}

int vgpu_dir_create(int dirfd, const char *name, int flags, mode_t mode)
{
    return openat(dirfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | flags, mode);
}

int vgpu_dir_open(int dirfd, const char *name, int flags, struct stat *st)
{
    int fd = openat(dirfd, name, O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | flags);
    if (fd < 0)
        return -1;
    int err = fstat(fd, st) < 0 ? errno : !S_ISREG(st->st_mode) ? EINVAL : 0;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    if (!(flags & O_NONBLOCK))
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int vgpu_statedir(char *buf, size_t len, bool create, struct vgpu_err *e)
{
    struct vgpu_statedir sd;
    if (vgpu_statedir_open(&sd, create, e) < 0)
        return -1;
    vgpu_statedir_close(&sd);
    if ((size_t)snprintf(buf, len, "%s", sd.path) >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %s", sd.path);
        return -1;
    }
    return 0;
}

int vgpu_statedir_check(const char *path, struct vgpu_err *e)
{
    int fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP)
            vgpu_err_set(e, VGPU_EXIT_FAIL,
                         "the state directory %s is not a directory (a symlink or a file); remove it or set "
                         "VGPU_STATE_DIR", path);
        else
            vgpu_err_set(e, errno_code(errno), "cannot use the state directory %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = vgpu_statedir_check_fd(fd, path, e);
    close(fd);
    return rc;
}

int vgpu_statedir_mkdir(const char *path, struct vgpu_err *e)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                     "cannot create the state directory %s: %s", path, strerror(errno));
        return -1;
    }
    return vgpu_statedir_check(path, e);
}
