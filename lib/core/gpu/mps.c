/* The MPS control daemon: locating it and parsing its replies (see vgpu/mps.h). */
#include "vgpu/mps.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/smi.h"

const char *vgpu_mps_control_path(void)
{
    const char *s = getenv("VGPU_MPS_CONTROL");
    return s && *s ? s : "nvidia-cuda-mps-control";
}

const char *vgpu_mps_default_pipe_dir(void)
{
    const char *s = getenv("CUDA_MPS_PIPE_DIRECTORY");
    return s && *s ? s : VGPU_MPS_DEFAULT_PIPE_DIR;
}

const char *vgpu_mps_default_log_dir(void)
{
    const char *s = getenv("CUDA_MPS_LOG_DIRECTORY");
    return s && *s ? s : VGPU_MPS_DEFAULT_LOG_DIR;
}

/* The uid a process runs as (real uid, from /proc/PID/status), or -1. */
static long proc_uid(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return -1;
    }
    long uid = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %ld", &uid) == 1)
            break;
    fclose(f);
    return uid;
}

pid_t vgpu_mps_daemon_pid(const char *pipe_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", pipe_dir, VGPU_MPS_PID_FILE);
    /* The pipe directory is often /tmp/nvidia-mps, which anyone can create first, and root's
     * 'vgpu mps stop --force' signals the pid found here: so the file must be a regular file (not
     * followed if a symlink, not waited on if a FIFO), and the process it names must run as the
     * file's owner. A user can then name only their own processes. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char buf[32];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *end;
    errno = 0;
    long pid = strtol(buf, &end, 10);
    while (*end == '\n' || *end == ' ')
        end++;
    if (errno || end == buf || *end || pid <= 1 || pid > INT32_MAX)
        return 0;
    /* EPERM: alive, but another user's (a root daemon seen by a user): still running. */
    if (kill((pid_t)pid, 0) < 0 && errno != EPERM)
        return 0;
    if (proc_uid((pid_t)pid) != (long)st.st_uid) {
        vgpu_warn("ignoring %s: it names pid %ld, which does not run as the file's owner (uid %u); remove the file "
                  "if no MPS daemon uses %s", path, pid, (unsigned)st.st_uid, pipe_dir);
        return 0;
    }
    return (pid_t)pid;
}

static void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
}

int vgpu_mps_cmd(const char *pipe_dir, const char *cmd, char *reply, size_t len, struct vgpu_err *e)
{
    const char *argv[] = { vgpu_mps_control_path(), NULL };
    char envpipe[4200];
    snprintf(envpipe, sizeof envpipe, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    const char *env[] = { envpipe, NULL };
    char input[512];
    snprintf(input, sizeof input, "%s\n", cmd);
    struct vgpu_proc p;
    if (vgpu_proc_run(argv, env, input, 30000, &p, e) < 0) {
        if (e->code == VGPU_EXIT_NO_LIBRARY) {
            char why[600];
            vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY, "%s",
                         vgpu_tool_missing(argv[0], "VGPU_MPS_CONTROL", "install the NVIDIA driver's MPS tools, or set "
                                           "VGPU_MPS_CONTROL to its path", why, sizeof why));
        }
        return -1;
    }
    int rc = 0;
    char all[1024];
    snprintf(all, sizeof all, "%s%s", p.out, p.err);
    rtrim(all);
    if (p.timed_out) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the MPS control daemon (pipe directory %s) did not answer '%s' within 30 s",
                     pipe_dir, cmd);
        rc = -1;
    } else if (strstr(all, "Cannot find MPS control daemon")) {
        vgpu_err_set(e, VGPU_EXIT_NOT_FOUND,
                     "no MPS control daemon is running on pipe directory %s; start one with 'vgpu mps start'%s",
                     pipe_dir, getenv("CUDA_MPS_PIPE_DIRECTORY") ? "" : " (or give its --pipe-dir)");
        rc = -1;
    } else if (strncmp(all, "Unknown command", 15) == 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the MPS control daemon does not know '%s' (%s): it is older than this "
                     "command", cmd, all);
        rc = -1;
    } else if (p.status != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "%s failed on '%s' (exit status %d)%s%s", argv[0], cmd, p.status,
                     all[0] ? ": " : "", all);
        rc = -1;
    } else if (reply && len) {
        snprintf(reply, len, "%s", p.out);
        rtrim(reply);
    }
    vgpu_proc_free(&p);
    return rc;
}

int vgpu_mps_parse_pids(const char *text, pid_t *pids, int max)
{
    int n = 0;
    const char *s = text;
    while (*s) {
        while (*s == '\n' || *s == ' ' || *s == '\t' || *s == '\r')
            s++;
        if (!*s)
            break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v <= 0 || v > 0x7fffffffL)
            return -1;
        while (*end == ' ' || *end == '\t' || *end == '\r')
            end++;
        if (*end && *end != '\n')
            return -1;
        if (n < max)
            pids[n] = (pid_t)v;
        n++;
        s = end;
    }
    return n < max ? n : max;
}

int vgpu_mps_parse_percent(const char *text, double *pct)
{
    char *end;
    while (isspace((unsigned char)*text))
        text++;
    if (!isdigit((unsigned char)*text))
        return -1;
    errno = 0;
    double v = strtod(text, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (errno || *end || v < 0 || v > 100)
        return -1;
    *pct = v;
    return 0;
}

int vgpu_mps_parse_size(const char *text, uint64_t *bytes)
{
    while (isspace((unsigned char)*text))
        text++;
    if (!*text) {
        *bytes = 0;
        return 0;
    }
    if (!isdigit((unsigned char)*text))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno)
        return -1;
    uint64_t mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'T': mul = 1ULL << 40; end++; break;
    case 'G': mul = 1ULL << 30; end++; break;
    case 'M': mul = 1ULL << 20; end++; break;
    case 'K': mul = 1ULL << 10; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end || (v && mul > UINT64_MAX / v))
        return -1;
    *bytes = v * mul;
    return 0;
}

void vgpu_mps_format_size(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0)
        snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
    else
        snprintf(buf, len, "%lluM", (unsigned long long)(bytes >> 20 ? bytes >> 20 : 1));
}

bool vgpu_mps_reply_is_error(const char *text)
{
    return strstr(text, "Unknown command") || strstr(text, "not found") || strstr(text, "Cannot find") ||
           strcasestr(text, "failed") || strcasestr(text, "error") || strcasestr(text, "invalid");
}
