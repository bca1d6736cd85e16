/* sched_peek: what the machine-wide GPU-time schedule of a GPU holds, for tests and benchmarks.
 *
 *   sched_peek UUID
 *
 * Prints one line. When no process uses the GPU's schedule (no segment): "exists=0 key=0x...".
 * Otherwise "exists=1 key=0x... jobs=N procs=N held=0|1 preemptions=N yields=N", counting the
 * job and process entries in use. It never creates the segment (vgpu_sched_open would). */
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
    int key = vgpu_sched_key(vgpu_machinedir_path(), argv[1]);
    int id = shmget(key, 0, 0);
    if (id < 0) {
        printf("exists=0 key=0x%08x\n", (unsigned)key);
        return 0;
    }
    const struct vgpu_sched_file *f = shmat(id, NULL, SHM_RDONLY);
    if (f == (void *)-1) {
        perror("sched_peek: shmat");
        return 1;
    }
    unsigned jobs = 0, procs = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++)
        jobs += atomic_load(&f->jobs[i].key) != 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
        procs += atomic_load(&f->procs[i].pid) != 0;
    printf("exists=1 key=0x%08x jobs=%u procs=%u held=%d preemptions=%llu yields=%llu\n", (unsigned)key, jobs, procs,
           vgpu_lease_holder(atomic_load(&f->lease)) != 0, (unsigned long long)atomic_load(&f->preemptions),
           (unsigned long long)atomic_load(&f->yields));
    /* One line per job: its cap and the GPU time charged to it so far (two samples give the
     * share of the GPU each job was charged over an interval: tests/gpu/core.sh). */
    for (unsigned i = 0; i < VGPU_SCHED_MAX_JOBS; i++)
        if (atomic_load(&f->jobs[i].key) != 0)
            printf("job=%u cap=%u used_ns=%llu\n", i, (unsigned)atomic_load(&f->jobs[i].cap),
                   (unsigned long long)atomic_load(&f->jobs[i].used_ns));
    shmdt(f);
    return 0;
}
