/* gang_loop: one process that drives several GPUs from one thread, round robin (a PyTorch loop
 * over model replicas, tests/cli/gang.sh): each step launches one kernel on every GPU of the job
 * in turn, then synchronizes them all.
 *
 *   gang_loop [-s] [-k US] [-t SEC] [-d SEC]
 *     -s      serial: synchronize each GPU right after its kernel (a loop that waits for each
 *             replica's result), so that one GPU is idle while the thread works on another
 *     -k US   simulated kernel time on each GPU (the fake GPU's "sleep_us"), default 1000
 *     -t SEC  run time, default 3;   -d SEC  the late window starts after SEC (default 1)
 *
 * Prints one line: "gpus=N steps=N share0=F share1=F ... late0=F late1=F ..." where shareI is
 * GPU I's kernel time over the wall time (the fraction of that GPU the job had) and lateI the
 * same after -d SEC. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vgpu_cuda.h"

#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "gang_loop: %s failed: %d\n", #x, (int)r_); exit(1); } } while (0)
#define MAXG 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    unsigned long long us = 1000;
    double secs = 3, late = 1;
    int opt, serial = 0;
    while ((opt = getopt(argc, argv, "sk:t:d:")) != -1) {
        switch (opt) {
        case 's': serial = 1; break;
        case 'k': us = strtoull(optarg, NULL, 10); break;
        case 't': secs = atof(optarg); break;
        case 'd': late = atof(optarg); break;
        default:
            fprintf(stderr, "usage: gang_loop [-s] [-k US] [-t SEC] [-d SEC]\n");
            return 2;
        }
    }
    int n = 0;
    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    if (n < 1 || n > MAXG) {
        fprintf(stderr, "gang_loop: %d devices (1..%d)\n", n, MAXG);
        return 2;
    }
    CUcontext ctx[MAXG];
    CUfunction fn[MAXG];
    for (int g = 0; g < n; g++) {
        CUdevice dev;
        CUmodule mod;
        CK(cuDeviceGet(&dev, g));
        CK(cuCtxCreate_v2(&ctx[g], 0, dev));
        CK(cuModuleLoadData(&mod, "gang_loop image"));
        CK(cuModuleGetFunction(&fn[g], mod, "sleep_us"));
    }
    void *params[] = { &us };
    unsigned long long steps = 0, late_steps = 0;
    double t0 = now_s(), t_late = 0, end = t0 + secs;
    while (now_s() < end) {
        for (int g = 0; g < n; g++) {
            CK(cuCtxSetCurrent(ctx[g]));
            CK(cuLaunchKernel(fn[g], 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
            if (serial)
                CK(cuCtxSynchronize());
        }
        for (int g = 0; g < n; g++) {
            CK(cuCtxSetCurrent(ctx[g]));
            CK(cuCtxSynchronize());
        }
        steps++;
        double t = now_s();
        if (t - t0 >= late) {
            if (!t_late)
                t_late = t;
            else
                late_steps++;
        }
    }
    double wall = now_s() - t0, lwall = t_late ? now_s() - t_late : 0;
    printf("gpus=%d steps=%llu", n, steps);
    /* Every step ran one kernel of -k us on each GPU: each GPU's busy time is steps x us. */
    for (int g = 0; g < n; g++)
        printf(" share%d=%.3f", g, (double)steps * (double)us / 1e6 / wall);
    for (int g = 0; g < n; g++)
        printf(" late%d=%.3f", g, lwall > 0 ? (double)late_steps * (double)us / 1e6 / lwall : 0.0);
    printf("\n");
    return 0;
}
