/* The job's command as a second holder of a state-directory entry (vgpu/holder.h). */
#include "vgpu/holder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/proc.h"

int vgpu_holder_add(int dfd, const char *name, pid_t pid)
{
    unsigned long long st = vgpu_proc_start_time(pid);
    if (pid <= 0 || st == 0) {
        errno = ESRCH;
        return -1;
    }
    int fd = openat(dfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char line[64];
    int n = snprintf(line, sizeof line, "+holder %d %llu\n", (int)pid, st);
    /* One write of a short line: a reader sees all of it or none. */
    ssize_t w = write(fd, line, (size_t)n);
    int err = errno;
    close(fd);
    if (w != n) {
        errno = w < 0 ? err : EIO;
        return -1;
    }
    return 0;
}

bool vgpu_holder_alive(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat sb;
    char buf[8193];
    ssize_t n = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        int pid;
        unsigned long long st;
        char tail;
        if (sscanf(line, "+holder %d %llu%c", &pid, &st, &tail) == 2 && pid > 0 && st &&
            vgpu_proc_start_time((pid_t)pid) == st)
            return true;
        line = nl ? nl + 1 : NULL;
    }
    return false;
}
