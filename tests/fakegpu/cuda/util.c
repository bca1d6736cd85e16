/* util.c: the fake's clock, its lock and the VGPU_FAKE_TRACE call log. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

pthread_mutex_t fc_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t fc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void fc_sleep_until(uint64_t t_ns)
{
    struct timespec ts = { .tv_sec = (time_t)(t_ns / 1000000000ULL), .tv_nsec = (long)(t_ns % 1000000000ULL) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

unsigned long long fc_round_up(unsigned long long v, unsigned long long a)
{
    return a ? (v + a - 1) / a * a : v;
}

/* Tests ask "which variant ran?" (cuLaunchKernel vs cuLaunchKernel_ptsz): each entry point
 * appends its exported name to $VGPU_FAKE_TRACE, one per line. O_APPEND with one write() per
 * line keeps lines whole when several processes and threads share the file. */
void fc_trace(const char *symbol)
{
    fc_shared_maybe_slow(symbol);
    const char *path = getenv("VGPU_FAKE_TRACE");
    if (!path || !*path)
        return;
    int saved = errno;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char line[160];
        size_t n = strlen(symbol);
        if (n > sizeof line - 2)
            n = sizeof line - 2;
        memcpy(line, symbol, n);
        line[n++] = '\n';
        ssize_t w = write(fd, line, n);
        (void)w;
        close(fd);
    }
    errno = saved;
}
