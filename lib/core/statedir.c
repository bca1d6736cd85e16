/* The state directory: where job regions and the extracted libvgpu.so live. */
#include "vgpu/statedir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

int vgpu_statedir_check(const char *path, struct vgpu_err *e)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        vgpu_err_set(e, errno == ENOENT ? VGPU_EXIT_NOT_FOUND : errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                     "cannot use the state directory %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory %s is not a directory; remove it or set VGPU_STATE_DIR",
                     path);
        return -1;
    }
    uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0 && me != 0) {
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

int vgpu_statedir_mkdir(const char *path, struct vgpu_err *e)
{
    /* mkdir's mode is filtered by the umask; a stricter umask only makes it safer, and we never
     * change the umask (the library shares the process with the application). */
    if (mkdir(path, 0700) < 0 && errno != EEXIST) {
        vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                     "cannot create the state directory %s: %s", path, strerror(errno));
        return -1;
    }
    return vgpu_statedir_check(path, e);
}

static int base_dir(char *buf, size_t len, struct vgpu_err *e)
{
    const char *env = getenv("VGPU_STATE_DIR");
    int n;
    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (geteuid() == 0)
        n = snprintf(buf, len, "/run/vgpu");
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        n = snprintf(buf, len, "%s/vgpu", env);
    else
        n = snprintf(buf, len, "/tmp/vgpu-%u", (unsigned)geteuid());
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

int vgpu_statedir(char *buf, size_t len, bool create, struct vgpu_err *e)
{
    if (base_dir(buf, len, e) < 0)
        return -1;
    if (!create)
        return vgpu_statedir_check(buf, e);
    if (vgpu_statedir_mkdir(buf, e) < 0)
        return -1;
    static const char *const subdirs[] = { "jobs", "lib" };
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", buf, subdirs[i]);
        if (vgpu_statedir_mkdir(sub, e) < 0)
            return -1;
    }
    return 0;
}
