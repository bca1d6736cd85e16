/* slot_fill: fills a job with processes, for the growth benchmark (bench/growth.sh, issue 14
 * item 5) and tests/cli/many_procs.sh. Takes a slot in the job region (VGPU_REGION, as
 * libvgpu.so does when a process of the job first uses CUDA) and forks N-1 children that take
 * one each and sleep; writes READY (a file) once all have their slot, then sleeps until killed.
 * The children die with it (PR_SET_PDEATHSIG).
 *
 *   slot_fill N READY
 *
 * READY holds "ATTACHED OUTSIDE_US": how many of the N have a slot, and the time of one
 * vgpu_outside_find over 128 of the job's processes (NVML's list as the hook passes it: the
 * job's own processes, each to be recognised as such), the mean of 50 calls in microseconds.
 * That is the check each process of the job makes at most once a second when it allocates. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <time.h>

#include "vgpu/outside.h"
#include "vgpu/region.h"

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[1]) > VGPU_REGION_MAX_SLOTS) {
        fprintf(stderr, "usage: slot_fill N READY   (N: 1..%d)\n", VGPU_REGION_MAX_SLOTS);
        return 2;
    }
    const char *path = getenv("VGPU_REGION");
    struct vgpu_region r;
    struct vgpu_err e;
    if (!path || vgpu_region_open(&r, path, VGPU_REGION_JOB, &e) < 0) {
        fprintf(stderr, "slot_fill: no job region (run it under vgpu run): %s\n", path ? e.msg : "VGPU_REGION unset");
        return 1;
    }
    int n = atoi(argv[1]) - 1, ready[2];
    if (pipe(ready) < 0)
        return 1;
    pid_t me = getpid();
    int got = vgpu_region_attach(&r, &e) >= 0 ? 1 : 0;
    for (int i = 0; i < n; i++) {
        pid_t kid = fork();
        if (kid < 0) {
            perror("slot_fill: fork");
            return 1;
        }
        if (kid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != me)
                _exit(0);
            char ok = vgpu_region_attach(&r, &e) >= 0 ? 'y' : 'n';
            if (write(ready[1], &ok, 1) != 1)
                _exit(1);
            for (;;)
                pause();
        }
    }
    for (int i = 0; i < n; i++) {
        char ok;
        if (read(ready[0], &ok, 1) == 1 && ok == 'y')
            got++;
    }
    pid_t pids[128];
    int32_t host[128];
    unsigned np = vgpu_region_pids(&r, pids, host, 128), nl = np < 128 ? np : 128;
    unsigned list[128];
    uint64_t bytes[128] = { 0 };
    for (unsigned i = 0; i < nl; i++)
        list[i] = (unsigned)(host[i] > 0 ? host[i] : pids[i]);
    struct timespec t0, t1;
    struct vgpu_outside o;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 50; k++)
        (void)vgpu_outside_find(&r, list, bytes, nl, &o);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 50 / 1000;
    FILE *f = fopen(argv[2], "w");
    if (!f)
        return 1;
    fprintf(f, "%d %.1f\n", got, us);
    fclose(f);
    for (;;)
        pause();
}
