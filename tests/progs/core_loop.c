/* core_loop: a saturating GPU job for the compute-limiter tests and benchmarks.
 *
 *   core_loop [-m MODE] [-k US] [-t SEC] [-s N] [-g NODES] [-d SEC]
 *     -m kernel|ex|coop|graph|streams|ptsz|grid|multi   launch path (default kernel); grid is
 *              cuLaunchGridAsync (legacy: no kernel parameters, so the fake GPU's kernel time
 *              comes from VGPU_FAKE_KERNEL_US, which core_loop sets to -k), multi is
 *              cuLaunchCooperativeKernelMultiDevice on one device
 *     -m rate  the launch path's own cost: -t SEC of back-to-back 0 µs launches, synchronized
 *              every 256; prints "p50_ns=... mean_ns=..." per launch (the median launch is
 *              one made under budget when a limiter is active)
 *     -k US    simulated kernel time (the fake GPU's "sleep_us" kernel), default 1000
 *     -t SEC   run time, default 2          -d SEC  report a window starting after SEC too
 *     -e SEC   ... and ending at SEC (default: the end of the run): two jobs started one after
 *              the other are then measured over the same stretch of time (core_recipe.sh).
 *              In client mode -d/-e keep only the requests that start inside [-d, -e)
 *     -s N     synchronize after every N launches (default 1)
 *     -g N     kernels per graph (graph mode), default 4
 *     -m client  an inference service: requests of -s N kernels then a synchronize, -i US idle
 *              between requests; prints "requests=N p50_ms=... p90_ms=... p99_ms=... max_ms=... busy=F"
 *              (request latency: first launch to the end of the synchronize; busy: the
 *              client's kernel time over wall time)
 *     -i US    idle time between requests (client mode), default 5000
 *     -l US:N  (client mode) every Nth idle is US longer, as a sleep woken late: prints also
 *              "late_p50_ms=", "late_p90_ms=" and "late_max_ms=" of the requests that came late
 *     -a MIB   first allocate MIB MiB (cuMemAlloc, 64 MiB at a time) and keep it: an
 *              oversubscribed job then spills past its device share
 *
 * Prints one line, e.g. "share=0.301 launches=602 elapsed_s=2.000 max_stall_ms=35.1 late_share=..."
 * share = GPU time of the completed kernels / wall time: on the serialized simulated GPU that is
 * this job's fraction of the device (1.0 = uncapped alone). max_stall_ms: the longest time
 * between two synchronizations. late_share: the same share over the time after -d SEC. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu_cuda.h"

/* Prototypes of the driver entry points (the program links against libcuda.so.1). */
#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "core_loop: %s failed: %d\n", #x, (int)r_); exit(1); } } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const char *mode = "kernel";
    unsigned long long us = 1000;
    double secs = 2, late = 0, late_end = 0;
    int sync_every = 1, nodes = 4, opt;
    unsigned long long idle_us = 5000, alloc_mib = 0, late_us = 0, late_every = 0;
    while ((opt = getopt(argc, argv, "m:k:t:s:g:d:e:i:a:l:")) != -1) {
        switch (opt) {
        case 'm': mode = optarg; break;
        case 'k': us = strtoull(optarg, NULL, 10); break;
        case 't': secs = atof(optarg); break;
        case 's': sync_every = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
        case 'g': nodes = atoi(optarg) > 0 ? atoi(optarg) : 1; break;
        case 'd': late = atof(optarg); break;
        case 'e': late_end = atof(optarg); break;
        case 'i': idle_us = strtoull(optarg, NULL, 10); break;
        case 'a': alloc_mib = strtoull(optarg, NULL, 10); break;
        case 'l':
            if (sscanf(optarg, "%llu:%llu", &late_us, &late_every) != 2 || !late_every) {
                fprintf(stderr, "core_loop: -l US:N, e.g. -l 1000:7\n");
                return 2;
            }
            break;
        default:
            fprintf(stderr, "usage: core_loop [-m kernel|ex|coop|graph|streams|ptsz|grid|multi] [-k US] [-t SEC] [-s N] [-g N] [-d SEC]\n");
            return 2;
        }
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate_v2(&ctx, 0, dev));
    for (unsigned long long got = 0; got < alloc_mib; got += 64) {
        CUdeviceptr p;
        CK(cuMemAlloc_v2(&p, 64ULL << 20));
    }
    CK(cuModuleLoadData(&mod, "core_loop image"));
    CK(cuModuleGetFunction(&fn, mod, "sleep_us"));
    CUfunction plain;
    CK(cuModuleGetFunction(&plain, mod, "plain"));
    if (!strcmp(mode, "grid")) {
        char v[32];
        snprintf(v, sizeof v, "%llu", us);
        setenv("VGPU_FAKE_KERNEL_US", v, 1);
    }
    void *params[] = { &us };
    CUstream streams[4];
    for (int i = 0; i < 4; i++)
        CK(cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    if (!strcmp(mode, "rate")) {
        static double lat[1 << 20];
        unsigned long long zero = 0;
        void *zp[] = { &zero };
        size_t n = 0;
        double t0 = now_s(), sum = 0;
        while (now_s() - t0 < secs && n < sizeof lat / sizeof *lat) {
            double a = now_s();
            CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, streams[0], zp, NULL));
            double b = now_s();
            lat[n++] = b - a;
            sum += b - a;
            if (n % 256 == 0)
                CK(cuStreamSynchronize(streams[0]));
        }
        /* median by counting sort into 10 ns buckets up to 100 µs */
        static unsigned hist[10001];
        for (size_t i = 0; i < n; i++) {
            size_t b = (size_t)(lat[i] * 1e8);
            hist[b > 10000 ? 10000 : b]++;
        }
        size_t acc = 0, med = 0;
        for (med = 0; med <= 10000; med++)
            if ((acc += hist[med]) * 2 >= n)
                break;
        printf("p50_ns=%zu mean_ns=%.0f launches=%zu\n", med * 10, n ? sum / n * 1e9 : 0.0, n);
        return 0;
    }
    if (!strcmp(mode, "client")) {
        static double lat[1 << 16], lat_late[1 << 16];
        size_t n = 0, all = 0, nl = 0;
        double t0 = now_s();
        bool came_late = false;
        while (now_s() - t0 < secs && n < sizeof lat / sizeof *lat) {
            double a = now_s();
            for (int i = 0; i < sync_every; i++)
                CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, streams[0], params, NULL));
            CK(cuStreamSynchronize(streams[0]));
            all++;
            if (a - t0 >= late && (late_end <= 0 || a - t0 < late_end)) {
                lat[n++] = now_s() - a;
                if (came_late)
                    lat_late[nl++] = lat[n - 1];
            }
            unsigned long long us_idle = idle_us;
            came_late = late_every && all % late_every == 0;
            if (came_late)
                us_idle += late_us;
            struct timespec idle = { (time_t)(us_idle / 1000000), (long)(us_idle % 1000000) * 1000 };
            nanosleep(&idle, NULL);
        }
        for (size_t i = 1; i < nl; i++)
            for (size_t j = i; j > 0 && lat_late[j - 1] > lat_late[j]; j--) {
                double t = lat_late[j];
                lat_late[j] = lat_late[j - 1];
                lat_late[j - 1] = t;
            }
        for (size_t i = 1; i < n; i++)   /* insertion sort: a few thousand requests */
            for (size_t j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
                double t = lat[j];
                lat[j] = lat[j - 1];
                lat[j - 1] = t;
            }
        if (!n)
            return 1;
        double el = now_s() - t0;
        printf("requests=%zu p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f busy=%.3f", n, lat[n / 2] * 1e3,
               lat[(n * 9) / 10] * 1e3, lat[(n * 99) / 100] * 1e3, lat[n - 1] * 1e3,
               (double)all * sync_every * (us / 1e6) / el);
        if (nl)
            printf(" late_requests=%zu late_p50_ms=%.2f late_p90_ms=%.2f late_max_ms=%.2f", nl, lat_late[nl / 2] * 1e3,
                   lat_late[(nl * 9) / 10] * 1e3, lat_late[nl - 1] * 1e3);
        printf("\n");
        return 0;
    }
    CUgraphExec exec = NULL;
    int per_launch = 1;
    if (!strcmp(mode, "graph")) {
        CUgraph g;
        CK(cuGraphCreate(&g, 0));
        CUgraphNode prev = NULL;
        for (int i = 0; i < nodes; i++) {
            CUDA_KERNEL_NODE_PARAMS p = { .func = fn, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                          .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1, .kernelParams = params };
            CUgraphNode n;
            CK(cuGraphAddKernelNode_v2(&n, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
            prev = n;
        }
        CK(cuGraphInstantiateWithFlags(&exec, g, 0));
        per_launch = nodes;
    }
    double t0 = now_s(), last_sync = t0, max_stall = 0, tl = t0 + late, te = late_end > 0 ? t0 + late_end : 0;
    unsigned long long launches = 0, late_kernels = 0, kernels = 0;
    int pending = 0;
    while (now_s() - t0 < secs) {
        CUstream s = streams[launches % 4];
        if (!strcmp(mode, "kernel")) {
            CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, streams[0], params, NULL));
        } else if (!strcmp(mode, "ptsz")) {
            CK(cuLaunchKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
        } else if (!strcmp(mode, "streams")) {
            CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
        } else if (!strcmp(mode, "ex")) {
            CUlaunchConfig c = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1,
                                 .blockDimZ = 1, .hStream = streams[0] };
            CK(cuLaunchKernelEx(&c, fn, params, NULL));
        } else if (!strcmp(mode, "coop")) {
            CK(cuLaunchCooperativeKernel(fn, 1, 1, 1, 32, 1, 1, 0, streams[0], params));
        } else if (!strcmp(mode, "graph")) {
            CK(cuGraphLaunch(exec, streams[0]));
        } else if (!strcmp(mode, "grid")) {
            CK(cuLaunchGridAsync(plain, 1, 1, streams[0]));
        } else if (!strcmp(mode, "multi")) {
            CUDA_LAUNCH_PARAMS p = { .function = fn, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                                     .blockDimY = 1, .blockDimZ = 1, .hStream = streams[0], .kernelParams = params };
            CK(cuLaunchCooperativeKernelMultiDevice(&p, 1, 0));
        } else {
            fprintf(stderr, "core_loop: unknown mode %s\n", mode);
            return 2;
        }
        launches++;
        if (++pending >= sync_every) {
            if (!strcmp(mode, "ptsz"))
                CK(cuStreamSynchronize_ptsz(NULL));
            else
                for (int i = 0; i < 4; i++)
                    CK(cuStreamSynchronize(streams[i]));
            double t = now_s();
            kernels += (unsigned long long)pending * per_launch;
            if (late > 0 && t >= tl && (!te || t < te))
                late_kernels += (unsigned long long)pending * per_launch;
            pending = 0;
            if (t - last_sync > max_stall)
                max_stall = t - last_sync;
            last_sync = t;
        }
    }
    CK(cuCtxSynchronize());
    double t1 = now_s();
    double el = t1 - t0;
    printf("share=%.3f launches=%llu elapsed_s=%.3f max_stall_ms=%.1f", kernels * (us / 1e6) / el, launches, el,
           max_stall * 1e3);
    if (late > 0)
        printf(" late_share=%.3f", (te && t1 > te ? te : t1) > tl ? late_kernels * (us / 1e6) / ((te && t1 > te ? te : t1) - tl) : 0.0);
    printf("\n");
    return 0;
}
