/* sched_hostile: a user who does not play fair with the GPU-time schedule (tests/cli/arbiter.sh).
 *
 *   sched_hostile UUID SECONDS
 *
 * For SECONDS, over and over, it does everything it can to the schedules of GPU UUID:
 *   - every System V segment of a schedule's size made by root that it can attach writable (the
 *     world-writable schedule of vgpu before the arbiter, or one not closed to others): takes the
 *     lease word in an entry of its own with a far deadline, zeroes the other entries' pids and
 *     credit, and fills the job table;
 *   - the arbiter's schedule (when a daemon answers): tries to map it writable, to make it writable
 *     with mprotect, and sends the daemon every request naming what is not its own (giving back,
 *     draining, or marking the current holder's lease; detaching, unwanting and acquiring for the
 *     holder's entry; marking every job spilling), and as many jobs and processes as it is let.
 * It needs no GPU work of its own. Prints one line:
 *   writable_segments=N write_map=refused|ALLOWED mprotect=refused|ALLOWED forged_ok=N refused=N
 *   jobs=N procs=N
 * forged_ok counts answered requests about others' entries that the daemon granted (0 when it
 * holds), jobs/procs the entries it got for itself. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "vgpu/machinedir.h"
#include "vgpu/sched.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The hash a schedule keeps of its machine-wide directory's path (sched.c's dir_hash). */
static uint64_t machine_hash(void)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (const char *p = vgpu_machinedir_path(); *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* Every writable schedule-sized segment of this machine-wide directory: scribbled on. */
static unsigned scribble_segments(void)
{
    struct shm_info info;
    int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&info);
    unsigned n = 0;
    for (int idx = 0; idx <= max; idx++) {
        struct shmid_ds ds;
        int id = shmctl(idx, SHM_STAT, &ds);
        /* Root's schedules only: not one of our own making (sched_squat's), nor another user's
         * that a vgpu before the arbiter made world-writable (another suite on this machine). */
        if (id < 0 || ds.shm_segsz != sizeof(struct vgpu_sched_file) || ds.shm_perm.cuid != 0)
            continue;
        struct vgpu_sched_file *f = shmat(id, NULL, 0);
        if (f == (void *)-1)
            continue;
        if (f->dirhash != machine_hash()) {   /* another machine-wide directory's (another suite's) */
            shmdt(f);
            continue;
        }
        n++;
        uint64_t t = now_ns();
        atomic_store(&f->lease_start, t);
        atomic_store(&f->lease_end, t + VGPU_SCHED_MAX_LEASE_NS);
        atomic_store(&f->lease, ((uint64_t)(t & 0xffffff) << 16) | 1);
        atomic_store(&f->procs[0].pid, 1);   /* pid 1 holds it, and lives for ever */
        for (unsigned i = 1; i < VGPU_SCHED_MAX_PROCS; i++)
            atomic_store(&f->procs[i].pid, 0);
        for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
            atomic_store(&f->jobs[j].credit, -(int64_t)VGPU_SCHED_DEBT_NS);
            atomic_store(&f->jobs[j].credit_t, t);
        }
        shmdt(f);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: sched_hostile UUID SECONDS\n");
        return 2;
    }
    const char *uuid = argv[1];
    uint64_t until = now_ns() + (uint64_t)(atof(argv[2]) * 1e9);
    unsigned writable = 0, forged_ok = 0, refused = 0, jobs = 0, procs = 0;
    const char *write_map = "none", *mprot = "none";
    uint32_t handle = 0, gen = 0;
    int fd = -1;
    struct vgpu_err e = { 0 };
    const struct vgpu_sched_file *f = NULL;
    if (vgpu_arb_open(uuid, &handle, &fd, &gen, &e) == 0) {
        void *w = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        write_map = w == MAP_FAILED ? "refused" : "ALLOWED";
        void *r = mmap(NULL, sizeof(struct vgpu_sched_file), PROT_READ, MAP_SHARED, fd, 0);
        if (r != MAP_FAILED) {
            f = r;
            mprot = mprotect(r, sizeof(struct vgpu_sched_file), PROT_READ | PROT_WRITE) == 0 ? "ALLOWED" : "refused";
        }
        /* As many entries of its own as it is let: each job key once, a process entry in each. */
        for (uint64_t k = 1; k <= 40; k++) {
            uint64_t a[4] = { k * 7919, 100, 0, 1 };
            int64_t j = vgpu_arb_call(gen, VGPU_ARB_JOB, handle, -1, a, -1, NULL);
            if (j < 0)
                continue;
            jobs++;
            uint64_t b[4] = { (uint64_t)j, 0, 0, 0 };
            procs += vgpu_arb_call(gen, VGPU_ARB_ATTACH, handle, -1, b, -1, NULL) >= 0;
        }
    }
    while (now_ns() < until) {
        writable += scribble_segments();
        if (f) {
            uint64_t lease = atomic_load(&f->lease);
            int holder = (int)vgpu_lease_holder(lease) - 1;
            uint64_t a[4] = { lease, 0, now_ns(), 0 }, v[2];
            int64_t rc = vgpu_arb_call(gen, VGPU_ARB_RELEASE, handle, -1, a, -1, v);
            forged_ok += rc > 0;
            refused += rc < 0;
            if (holder >= 0) {
                uint64_t none[4] = { 0 };
                rc = vgpu_arb_call(gen, VGPU_ARB_ACQUIRE, handle, holder, none, -1, v);
                forged_ok += rc > 0;
                refused += rc < 0;
                vgpu_arb_send(gen, VGPU_ARB_DETACH, handle, holder, 0, 0, 0);
                vgpu_arb_send(gen, VGPU_ARB_UNWANT, handle, holder, 0, 0, 0);
                vgpu_arb_send(gen, VGPU_ARB_NOTE_END, handle, holder, 1, now_ns(), 0);
                vgpu_arb_send(gen, VGPU_ARB_EXPECT, handle, holder, now_ns() + 1000000, 1000000, 0);
            }
            vgpu_arb_send(gen, VGPU_ARB_DRAINING, handle, -1, lease, now_ns(), 0);
            vgpu_arb_send(gen, VGPU_ARB_NOTE_BUSY, handle, -1, lease, 0, 0);
            for (uint64_t j = 0; j < VGPU_SCHED_MAX_JOBS; j++)
                vgpu_arb_send(gen, VGPU_ARB_SPILLING, handle, -1, j, 1, 0);
        }
        usleep(200);
    }
    printf("writable_segments=%u write_map=%s mprotect=%s forged_ok=%u refused=%u jobs=%u procs=%u\n", writable,
           write_map, mprot, forged_ok, refused, jobs, procs);
    return 0;
}
