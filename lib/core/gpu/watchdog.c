/* The bound on driver calls that may never return (vgpu/watchdog.h). */
#include "vgpu/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/log.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static bool started;
static unsigned depth;               /* nested arms */
static const char *watched;          /* what the armed section waits for */
static struct timespec deadline;     /* CLOCK_MONOTONIC */
static unsigned limit_s;

static unsigned read_timeout_s(void)
{
    const char *v = getenv("VGPU_NVML_TIMEOUT_S");
    if (!v || !*v)
        return 30;
    char *end;
    errno = 0;
    unsigned long s = strtoul(v, &end, 10);
    if (errno || *end || v[0] == '-' || s > 86400) {
        vgpu_warn("VGPU_NVML_TIMEOUT_S='%s' is not a number of seconds (0 to 86400); using 30", v);
        return 30;
    }
    return (unsigned)s;
}

/* Read once a process: every NVML call arms the watchdog, and a bad value was warned about at
 * each one (every refresh of vgpu top). */
static unsigned timeout_s(void)
{
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (int)read_timeout_s();
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return (unsigned)v;
}

static _Noreturn void expire(const char *what, unsigned s)
{
    const char *prefix = vgpu_log_prefix();
    bool run = prefix && !strncmp(prefix, "vgpu run", 8);
    vgpu_error("%s has not returned after %u s: the NVIDIA driver is not answering (a GPU fallen off the bus, "
               "a hung kernel module?); look at dmesg and nvidia-smi, or set VGPU_NVML_TIMEOUT_S to wait longer",
               what, s);
    _exit(run ? VGPU_EXIT_RUN_FAILED : VGPU_EXIT_NO_DRIVER);
}

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!depth)
            pthread_cond_wait(&cv, &mu);
        struct timespec d = deadline;
        int rc = pthread_cond_timedwait(&cv, &mu, &d);
        if (rc == ETIMEDOUT && depth) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
                expire(watched, limit_s);   /* the lock dies with the process */
        }
    }
    return NULL;
}

void vgpu_watchdog_arm(const char *what)
{
    pthread_mutex_lock(&mu);
    if (depth++ == 0) {
        limit_s = timeout_s();
        if (limit_s == 0) {
            pthread_mutex_unlock(&mu);
            return;                     /* depth counts; nothing is watched */
        }
        if (!started) {
            pthread_condattr_t ca;
            pthread_condattr_init(&ca);
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
            pthread_cond_init(&cv, &ca);
            pthread_condattr_destroy(&ca);
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals stay with the command's threads */
            pthread_t t;
            pthread_attr_t a;
            pthread_attr_init(&a);
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            started = pthread_create(&t, &a, watch, NULL) == 0;
            pthread_attr_destroy(&a);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (!started)
                vgpu_debug("cannot start the NVML watchdog thread; NVML calls are not bounded");
        }
        watched = what;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)limit_s;
        if (started)
            pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
}

void vgpu_watchdog_disarm(void)
{
    pthread_mutex_lock(&mu);
    if (depth && --depth == 0 && started)
        pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}
