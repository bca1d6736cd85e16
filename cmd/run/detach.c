/* vgpu run --detach (see detach.h). Moved out of cmd/run.c, unchanged, when it passed 800 lines. */
#include "run/detach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "vgpu/exitcode.h"

/* The caller's side: waits until the supervisor (its child) has made the job and sent its id,
 * or has failed (it said why on the shared stderr, and exits 125). */
int vgpu_run_detach_wait(pid_t supervisor, int sock)
{
    char buf[VGPU_JOB_ID_LEN + 2];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t k = read(sock, buf + got, sizeof buf - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(sock);
    buf[got] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) {
        *nl = '\0';
        printf("%s\n", buf);
        if (fflush(stdout) == EOF)
            return vgpu_fail(VGPU_EXIT_RUN_FAILED, "cannot write the job id %s: %s (the job runs: see vgpu ps)", buf,
                             strerror(errno));
        return 0;
    }
    int status;
    while (waitpid(supervisor, &status, 0) < 0)
        if (errno != EINTR)
            return vgpu_fail(VGPU_EXIT_RUN_FAILED, "lost the detached vgpu run (pid %d): waitpid: %s", (int)supervisor,
                             strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return WEXITSTATUS(status);
    return vgpu_fail(VGPU_EXIT_RUN_FAILED, "the detached vgpu run (pid %d) ended before the job was started (%s %d)",
                     (int)supervisor, WIFSIGNALED(status) ? "signal" : "status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* The supervisor's side, once the job exists: stdin from /dev/null, stdout and stderr (its
 * own messages and the command's) to <region path minus .region>.log, 0600; then the id goes
 * to the caller, who exits. Nothing of the caller's terminal or pipes is kept open. */
int vgpu_run_detach_io(const struct vgpu_region *r, int sock, struct vgpu_err *e)
{
    char log[PATH_MAX];
    size_t len = strlen(r->path);
    if (len < 8 || len - 7 + 5 > sizeof log) {
        vgpu_err_set(e, VGPU_EXIT_RUN_FAILED, "the job region path %s is too long for its log", r->path);
        return -1;
    }
    memcpy(log, r->path, len - 7);
    memcpy(log + len - 7, ".log", 5);
    /* O_APPEND: vgpu run and the command's processes write to it side by side. */
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    const char *why = NULL;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (fchmod(fd, 0600) < 0)    /* the umask may have taken bits; an old file may have others */
        why = strerror(errno);
    if (why) {
        vgpu_err_set(e, VGPU_EXIT_RUN_FAILED, "cannot create the job's log %s: %s", log, why);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) {
        vgpu_err_set(e, VGPU_EXIT_RUN_FAILED, "cannot open /dev/null: %s", strerror(errno));
        close(fd);
        unlink(log);
        return -1;
    }
    fflush(NULL);
    /* dup2 clears FD_CLOEXEC: the command inherits these three. */
    if (dup2(null, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
        vgpu_err_set(e, VGPU_EXIT_RUN_FAILED, "cannot redirect to the job's log %s: %s", log, strerror(errno));
        close(null);
        close(fd);
        unlink(log);
        return -1;
    }
    close(null);
    close(fd);
    char msg[VGPU_JOB_ID_LEN + 2];
    int n = snprintf(msg, sizeof msg, "%s\n", r->info->id);
    /* MSG_NOSIGNAL: a caller killed meanwhile is an error here, not a SIGPIPE. */
    if (send(sock, msg, (size_t)n, MSG_NOSIGNAL) != n) {
        vgpu_err_set(e, VGPU_EXIT_RUN_FAILED, "the caller of vgpu run --detach is gone (%s): the job is not started",
                     strerror(errno));
        unlink(log);
        return -1;
    }
    return 0;
}

