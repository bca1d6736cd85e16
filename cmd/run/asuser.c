/* vgpu run --user (see asuser.h). */
#include "run/asuser.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"

struct vgpu_as_user vgpu_as_user;

/* USER (a name, or a uid in the password database) into vgpu_as_user. Root only. */
int vgpu_run_resolve_user(const char *user)
{
    if (geteuid() != 0)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--user %s: only root can start a job as another user (you are uid %u); "
                         "a job you start is yours already: leave --user out, or ask root (a Slurm prolog, a systemd "
                         "unit) to start it", user, (unsigned)geteuid());
    struct passwd pw, *res = NULL;
    char buf[4096];
    int err = getpwnam_r(user, &pw, buf, sizeof buf, &res);
    if (!res && user[0] >= '0' && user[0] <= '9' && strspn(user, "0123456789") == strlen(user)) {
        errno = 0;
        unsigned long id = strtoul(user, NULL, 10);
        if (!errno && id <= UINT32_MAX - 1)
            err = getpwuid_r((uid_t)id, &pw, buf, sizeof buf, &res);
    }
    if (!res)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--user %s: no such user%s%s", user, err ? ": " : " (see getent passwd)",
                         err ? strerror(err) : "");
    if (pw.pw_uid == 0)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--user %s: that is root, who can change any job's limits; --user is for "
                         "running a job as a user who cannot", user);
    vgpu_as_user.on = true;
    vgpu_as_user.uid = pw.pw_uid;
    vgpu_as_user.gid = pw.pw_gid;
    snprintf(vgpu_as_user.name, sizeof vgpu_as_user.name, "%s", pw.pw_name);
    snprintf(vgpu_as_user.home, sizeof vgpu_as_user.home, "%s", pw.pw_dir ? pw.pw_dir : "/");
    return 0;
}

/* In the child, before exec: the user's groups, gid and uid, for good (a later setuid(0) must
 * fail), and the library and the region must be readable as that user: ld.so skips a preload it
 * cannot read with only a warning, and the job would run without limits. */
void vgpu_run_become_user(void)
{
    const char *region = getenv("VGPU_REGION");
    if (initgroups(vgpu_as_user.name, vgpu_as_user.gid) < 0 || setgid(vgpu_as_user.gid) < 0 || setuid(vgpu_as_user.uid) < 0) {
        vgpu_fail(0, "--user %s: cannot switch to uid %u gid %u: %s", vgpu_as_user.name, (unsigned)vgpu_as_user.uid,
                  (unsigned)vgpu_as_user.gid, strerror(errno));
        _exit(VGPU_EXIT_RUN_FAILED);
    }
    if (setuid(0) == 0 || geteuid() != vgpu_as_user.uid) {
        vgpu_fail(0, "--user %s: root privileges could not be dropped", vgpu_as_user.name);
        _exit(VGPU_EXIT_RUN_FAILED);
    }
    if (vgpu_as_user.library && access(vgpu_as_user.library, R_OK) != 0) {
        vgpu_fail(0, "--user %s: %s cannot read the library %s (%s), so the job would run without limits; install "
                  "vgpu (make install), or set VGPU_LIBRARY to a copy %s can read", vgpu_as_user.name, vgpu_as_user.name,
                  vgpu_as_user.library, strerror(errno), vgpu_as_user.name);
        _exit(VGPU_EXIT_RUN_FAILED);
    }
    if (region && access(region, R_OK) != 0) {
        vgpu_fail(0, "--user %s: %s cannot read the job region %s (%s); a directory above it is closed to it (the "
                  "machine-wide directory VGPU_MACHINE_DIR must be reachable by every user)", vgpu_as_user.name,
                  vgpu_as_user.name, region, strerror(errno));
        _exit(VGPU_EXIT_RUN_FAILED);
    }
    /* An MPS client that cannot connect to the daemon runs outside MPS, and a --mps job has no
     * GPU time limit of vgpu's (--core is MPS's percentage): it would run unlimited. */
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    char control[4200];
    if (vgpu_as_user.mps && pipe && snprintf(control, sizeof control, "%s/control", pipe) < (int)sizeof control &&
        access(control, W_OK) != 0) {
        vgpu_fail(0, "--user %s --mps: %s cannot reach the MPS pipe directory %s (%s: %s), so the job would run "
                  "outside MPS, without its --core; start the daemon on a pipe directory every user can reach "
                  "(vgpu mps start --pipe-dir DIR; the default /tmp/nvidia-mps is)", vgpu_as_user.name,
                  vgpu_as_user.name, pipe, control, strerror(errno));
        _exit(VGPU_EXIT_RUN_FAILED);
    }
    /* As runuser(1) does: the user's own identity in the environment. Root's state directory
     * and runtime directory are not the user's: its own vgpu commands find their own. */
    setenv("USER", vgpu_as_user.name, 1);
    setenv("LOGNAME", vgpu_as_user.name, 1);
    setenv("HOME", vgpu_as_user.home, 1);
    unsetenv("VGPU_STATE_DIR");
    unsetenv("XDG_RUNTIME_DIR");
}

