/* leasetrace.c: see leasetrace.h. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hook.h"
#include "leasetrace.h"
#include "vgpu/trust.h"

#define LT_MAX 65536

struct lt_rec {
    uint64_t t, arg;
    uint8_t ev, dev;
};

static struct lt_rec *recs;
static _Atomic uint32_t nrec, lost;
static const char *dir;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void setup(void)
{
    const char *d = getenv("VGPU_LEASE_TRACE");
    if (!d || !*d)
        return;
    /* Root writes its trace there at exit: only into a directory nobody else can change. */
    struct vgpu_err e = { 0 };
    if (vgpu_trust_path(d, "VGPU_LEASE_TRACE", VGPU_TRUST_DIR, &e) != 0) {
        vgpu_warn("%s; no lease trace is written", e.msg);
        return;
    }
    recs = calloc(LT_MAX, sizeof *recs);
    if (recs)
        dir = d;
}

void vgpu_lt_record(enum vgpu_lt_event ev, int dev, uint64_t t, uint64_t arg)
{
    pthread_once(&once, setup);
    if (!recs)
        return;
    uint32_t i = atomic_fetch_add(&nrec, 1);
    if (i >= LT_MAX) {
        atomic_fetch_add(&lost, 1);
        return;
    }
    recs[i] = (struct lt_rec){ t, arg, (uint8_t)ev, (uint8_t)dev };
}

__attribute__((destructor)) static void lt_write(void)
{
    if (!recs)
        return;
    static const char *const names[] = { "want", "grant", "end", "release", "preempted", "fence", "idle", "clear" };
    char path[4096];
    snprintf(path, sizeof path, "%s/lease.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        vgpu_warn("VGPU_LEASE_TRACE: cannot write %s", path);
        return;
    }
    uint32_t n = atomic_load(&nrec);
    for (uint32_t i = 0; i < n && i < LT_MAX; i++)
        if (recs[i].ev < sizeof names / sizeof *names)
            fprintf(f, "%s %u %llu %llu\n", names[recs[i].ev], recs[i].dev, (unsigned long long)recs[i].t,
                    (unsigned long long)recs[i].arg);
    if (atomic_load(&lost))
        fprintf(f, "lost 0 0 %u\n", atomic_load(&lost));
    fclose(f);
}
