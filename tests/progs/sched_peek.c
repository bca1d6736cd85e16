/* sched_peek: what the GPU-time schedule of a GPU holds, for tests and benchmarks: the arbiter's
 * (vgpu daemon) when one answers, else this user's own.
 *
 *   sched_peek UUID
 *
 * Prints one line. When no process uses the GPU's schedule (no segment): "exists=0 where=own".
 * Otherwise "exists=1 where=arbiter|own jobs=N procs=N held=0|1 preemptions=N yields=N", counting
 * the job and process entries in use. It never creates the segment (vgpu_sched_open would). */
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "vgpu/machinedir.h"
#include "vgpu/sched.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: sched_peek UUID\n");
        return 2;
    }
    /* The arbiter's schedule when a daemon answers, else this user's own segment. */
    struct vgpu_sched s;
    struct vgpu_err e = { 0 };
    int r = vgpu_sched_open_existing(&s, argv[1], &e);
    if (r < 0) {
        fprintf(stderr, "sched_peek: %s\n", e.msg);
        return 1;
    }
    char where[32];
    snprintf(where, sizeof where, "%s", s.remote ? "arbiter" : "own");
    if (r == 0) {
        printf("exists=0 where=%s\n", where);
        return 0;
    }
    const struct vgpu_sched_file *f = s.f;
    unsigned jobs = 0, procs = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++)
        jobs += atomic_load(&f->jobs[i].key) != 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
        procs += atomic_load(&f->procs[i].pid) != 0;
    printf("exists=1 where=%s jobs=%u procs=%u held=%d preemptions=%llu yields=%llu\n", where, jobs, procs,
           vgpu_lease_holder(atomic_load(&f->lease)) != 0, (unsigned long long)atomic_load(&f->preemptions),
           (unsigned long long)atomic_load(&f->yields));
    /* One line per job: its cap and the GPU time charged to it so far (two samples give the
     * share of the GPU each job was charged over an interval: tests/gpu/core.sh). */
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++)
        if (atomic_load(&f->jobs[i].key) != 0)
            printf("job=%u cap=%u used_ns=%llu\n", i, (unsigned)atomic_load(&f->jobs[i].cap),
                   (unsigned long long)atomic_load(&f->jobs[i].used_ns));
    if (s.shmid >= 0)
        shmdt(s.f);   /* not vgpu_sched_close: a reader must not remove it */
    else
        vgpu_sched_close(&s);
    return 0;
}
