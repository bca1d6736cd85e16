/* What vgpu daemon checks before it serves (issue 36 N9, L8, L9, L17, L19): a daemon that starts
 * must be able to do its job, and says at once what stops it, rather than at the first request. */
#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/machinedir.h"

/* Descriptors 0-2 closed by whoever started us would be the first ones the daemon opens (its
 * lock, its directory, its socket), and every message would be written into them: /dev/null
 * takes their place first. */
int arb_start_stdio(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0)
            continue;
        int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (n < 0)
            return -1;
        if (n != fd) {   /* a lower one was free and is now /dev/null: this one comes next */
            close(n);
            fd--;
            continue;
        }
    }
    return 0;
}

/* Other users' jobs must reach the socket: every directory above it must let others search it.
 * A closed one is served (root's own jobs still work) with a warning that says which. */
static void warn_closed_path(const char *mpath)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", mpath);
    for (char *end = p + strlen(p); end > p;) {
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)) {
            vgpu_warn("%s is mode %04o: other users' jobs cannot reach the arbiter's socket under it, so they are "
                      "not scheduled with root's (chmod o+x %s, or 0755)", p, (unsigned)(st.st_mode & 07777), p);
            return;
        }
        while (end > p && *end != '/')
            end--;
        *end = 0;
    }
}

int arb_start_env(void)
{
    const char *md = getenv("VGPU_MACHINE_DIR");
    if (md && !*md) {
        vgpu_error("VGPU_MACHINE_DIR is set but empty: set it to the machine-wide directory to serve, or unset it "
                   "to serve %s", VGPU_MACHINEDIR_DEFAULT);
        return VGPU_EXIT_USAGE;
    }
    return 0;
}

int arb_start_checks(const char *acct_db)
{
    /* Another user's daemon of root's directory: serve() refuses it, saying why (exit 6); its
     * database is not the point. */
    char adir[PATH_MAX];
    struct stat ast;
    snprintf(adir, sizeof adir, "%s/%s", vgpu_machinedir_path(), VGPU_ARB_DIR);
    if (geteuid() != 0 && lstat(adir, &ast) == 0 && ast.st_uid == 0)
        return 0;
    struct vgpu_err e = { 0 };
    if (arb_acct_check(acct_db, &e) < 0) {
        vgpu_error("%s; the arbiter does not start without its accounting database (--acct-db PATH names another)",
                   e.msg);
        return e.code == VGPU_EXIT_USAGE ? VGPU_EXIT_USAGE : VGPU_EXIT_FAIL;
    }
    warn_closed_path(vgpu_machinedir_path());
    return 0;
}
