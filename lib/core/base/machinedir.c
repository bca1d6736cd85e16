/* The machine-wide directory (see vgpu/machinedir.h). */
#include "vgpu/machinedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/trust.h"

const char *vgpu_machinedir_path(void)
{
    const char *env = getenv("VGPU_MACHINE_DIR");
    return env && *env ? env : VGPU_MACHINEDIR_DEFAULT;
}

/* A directory others may write is safe only when sticky (their files stay theirs) and owned by
 * root or by us (its owner could delete anyone's files). */
static int check(int fd, const char *what, struct vgpu_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot stat the machine-wide directory %s: %s", what, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "the machine-wide directory %s is not a directory; remove it (root)", what);
        return -1;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the machine-wide directory %s: it belongs to uid %u, who could delete other users' "
                     "files in it; root should remove it and create it again (mode 0755)",
                     what, (unsigned)st.st_uid);
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the machine-wide directory %s: others may write it but it is not sticky (mode %04o), "
                     "so anyone could replace anyone's files; run chmod 0755 %s as root", what,
                     (unsigned)(st.st_mode & 07777), what);
        return -1;
    }
    return 0;
}

int vgpu_machinedir_open(bool create, struct vgpu_err *e)
{
    const char *path = vgpu_machinedir_path();
    /* Root works in it (creates it, writes promises and the queue there): the directories above
     * it must be root's alone, as must a link on the way (vgpu/trust.h). */
    if (vgpu_trust_path(path, getenv("VGPU_MACHINE_DIR") && *getenv("VGPU_MACHINE_DIR") ? "VGPU_MACHINE_DIR" : NULL,
                        VGPU_TRUST_DIR | VGPU_TRUST_MAY_BE_MISSING, e) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* Only the default is made here: a VGPU_MACHINE_DIR that does not exist is more likely a
     * typo than a wish for a world-writable directory wherever it points (/nonexistent). */
    const char *env = getenv("VGPU_MACHINE_DIR");
    bool from_env = env && *env;
    if (fd < 0 && errno == ENOENT && create && geteuid() == 0 && from_env) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "VGPU_MACHINE_DIR=%s does not exist, and vgpu creates only the default "
                     "(%s): create it (as root: mkdir -m 0755 %s), or unset VGPU_MACHINE_DIR", path,
                     VGPU_MACHINEDIR_DEFAULT, path);
        return -1;
    }
    if (fd < 0 && errno == ENOENT && create && geteuid() == 0) {
        /* The mode is filtered by the umask, which we never change: set it after. */
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "cannot create the machine-wide directory %s: %s", path,
                         strerror(errno));
            return -1;
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && st.st_uid == 0 && (st.st_mode & 07777) != 0755)
                fchmod(fd, 0755);
        }
    }
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT)
            vgpu_err_set(e, VGPU_EXIT_STATE,
                         "the machine-wide directory %s does not exist; root creates it (vgpu daemon, or the "
                         "tmpfiles.d entry of `make install`)", path);
        else if (err == ELOOP || err == ENOTDIR)
            vgpu_err_set(e, VGPU_EXIT_STATE, "refusing the machine-wide directory %s: it is a symbolic link or not "
                         "a directory; root should remove it", path);
        else
            vgpu_err_set(e, err == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_STATE,
                         "cannot open the machine-wide directory %s: %s", path, strerror(err));
        return -1;
    }
    /* An older vgpu made it 1777 for the placement ledger every user wrote: nobody writes it now
     * (the arbiter keeps that), so root takes the write bits back. */
    struct stat st;
    if (create && geteuid() == 0 && fstat(fd, &st) == 0 && st.st_uid == 0 && (st.st_mode & 022))
        fchmod(fd, 0755);
    if (check(fd, path, e) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int vgpu_machinedir_sub(int dfd, const char *name, struct vgpu_err *e)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (mkdirat(dfd, name, 0755) != 0 && errno != EEXIST) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "cannot create %s/%s: %s", vgpu_machinedir_path(), name, strerror(errno));
            return -1;
        }
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) != 0755)
                fchmod(fd, 0755);
        }
    }
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot open %s/%s: %s", vgpu_machinedir_path(), name, strerror(errno));
        return -1;
    }
    char what[4200];
    snprintf(what, sizeof what, "%s/%s", vgpu_machinedir_path(), name);
    if (check(fd, what, e) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool vgpu_machinedir_named_missing(struct vgpu_err *e)
{
    const char *env = getenv("VGPU_MACHINE_DIR");
    struct stat st;
    if (!env || !*env || stat(env, &st) == 0 || errno != ENOENT)
        return false;
    vgpu_err_set(e, VGPU_EXIT_STATE, "VGPU_MACHINE_DIR=%s does not exist: create it (as root: mkdir -m 0755 %s; "
                 "the arbiter, vgpu daemon, listens there), or unset VGPU_MACHINE_DIR", env, env);
    return true;
}
