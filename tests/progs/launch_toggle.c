/* launch_toggle: the compute limiter's added cost per launch, measured inside one process
 * (issue 14). Separate processes differ by about ±600 ns per launch on a real GPU, far more than
 * the effect, so one job toggles its own core limit live between batches (unlimited / PCT),
 * in ABBA order, and compares the two kinds of batch pairwise.
 *
 *   vgpu run --core 90 -- launch_toggle [-n PAIRS] [-b BATCH] [-c PCT]
 *   vgpu run -- launch_toggle -r [-n PAIRS] [-b BATCH]
 *
 * -r compares, with no core limit, the launch through libvgpu.so (the gate's uncapped path)
 * with the driver's own cuLaunchKernel, looked up in libcuda.so.1's handle through glibc's own
 * dlsym (libvgpu.so wraps dlsym and would hand back its wrapper; it does not wrap dlvsym): the
 * library's added cost when only --mem is set, which must stay under 20 ns.
 *
 * Needs VGPU_REGION (run under vgpu run, as the job's owner or root: it opens the region for
 * writing to change its own limit, as `vgpu limit` would). Each batch is BATCH (64) launches of
 * an empty kernel (PTX, JIT-compiled by a real driver; any function on the simulated GPU) on
 * one stream, timed on the CPU, then a synchronize outside the timing. A capped batch in which
 * the job waited for its turn (the region's throttled_ns moved) is dropped with its pair: this
 * measures the launch path under budget, not the cap. Prints
 *   pairs=N dropped=N mean_ns=D ci95_ns=H median_ns=M median_ci95=LO..HI base_ns=B
 * D and M are per launch (capped minus unlimited); ci95 is the mean's 95 % interval half-width,
 * median_ci95 the order-statistic interval of the median. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/region.h"
#include "vgpu_cuda.h"

#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "launch_toggle: %s failed: %d\n", #x, (int)r_); exit(1); } } while (0)

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry empty()\n{\n    ret;\n}\n";

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int pairs = 4000, batch = 64, opt;
    unsigned pct = 90;
    bool raw = false;
    while ((opt = getopt(argc, argv, "n:b:c:r")) != -1) {
        switch (opt) {
        case 'n': pairs = atoi(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 'c': pct = (unsigned)atoi(optarg); break;
        case 'r': raw = true; break;
        default:
            fprintf(stderr, "usage: launch_toggle [-n PAIRS] [-b BATCH] [-c PCT] [-r]\n");
            return 2;
        }
    }
    if (pairs < 10 || batch < 1 || pct < 1 || pct > 99) {
        fprintf(stderr, "launch_toggle: -n at least 10, -b at least 1, -c 1..99\n");
        return 2;
    }
    const char *path = getenv("VGPU_REGION");
    struct vgpu_region r;
    struct vgpu_err e = { 0 };
    if (!path || vgpu_region_open(&r, path, VGPU_REGION_ADMIN, &e) != 0) {
        fprintf(stderr, "launch_toggle: run me under vgpu run --core N (as the job's owner): %s\n",
                path ? e.msg : "VGPU_REGION is not set");
        return 2;
    }
    enum vgpu_core_policy pol = (enum vgpu_core_policy)atomic_load(&r.hdr->dev[0].core_policy);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUstream s;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate_v2(&ctx, 0, dev));
    CK(cuModuleLoadData(&mod, ptx));
    if (cuModuleGetFunction(&f, mod, "empty") != CUDA_SUCCESS)
        CK(cuModuleGetFunction(&f, mod, "sleep_us"));   /* the simulated GPU: a 0 us kernel */
    unsigned long long zero = 0;
    void *params[] = { &zero };
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void **, void **);
    launch_fn driver_launch = NULL;
    if (raw) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        void *(*glibc_dlsym)(void *, const char *) = NULL;
        static const char *const ver[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
        for (unsigned v = 0; libc && !glibc_dlsym && v < sizeof ver / sizeof *ver; v++)
            *(void **)&glibc_dlsym = dlvsym(libc, "dlsym", ver[v]);
        driver_launch = h && glibc_dlsym ? (launch_fn)glibc_dlsym(h, "cuLaunchKernel") : NULL;
        if (!driver_launch || driver_launch == cuLaunchKernel) {
            fprintf(stderr, "launch_toggle: cannot find the driver's own cuLaunchKernel (is libvgpu.so preloaded?)\n");
            return 2;
        }
        if (vgpu_region_set_core_limit(&r, 0, 0, pol, &e) != 0) {
            fprintf(stderr, "launch_toggle: %s\n", e.msg);
            return 1;
        }
    }
    double *d = calloc((size_t)pairs, sizeof *d), *capped = calloc((size_t)pairs, sizeof *capped);
    double *plain = calloc((size_t)pairs, sizeof *plain);
    if (!d || !capped || !plain)
        return 1;
    int kept = 0, dropped = 0;
    for (int i = -20; i < pairs; i++) {          /* i < 0: warm-up */
        double t[2];
        bool waited = false;
        for (int k = 0; k < 2; k++) {
            int limited = (i & 1) ? k == 0 : k == 1;   /* ABBA: the order alternates */
            if (raw) {
                /* "limited" is the batch through libvgpu.so, the other the driver's own. */
                double a = now_ns();
                for (int j = 0; j < batch; j++)
                    CK(limited ? cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL)
                               : driver_launch(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
                double b = now_ns();
                CK(cuStreamSynchronize(s));
                t[limited] = (b - a) / batch;
                continue;
            }
            if (vgpu_region_set_core_limit(&r, 0, limited ? pct : 0, pol, &e) != 0) {
                fprintf(stderr, "launch_toggle: %s\n", e.msg);
                return 1;
            }
            uint64_t th = atomic_load(&r.use->dev[0].throttled_ns);
            double a = now_ns();
            for (int j = 0; j < batch; j++)
                CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
            double b = now_ns();
            CK(cuStreamSynchronize(s));
            if (limited && atomic_load(&r.use->dev[0].throttled_ns) != th)
                waited = true;
            t[limited] = (b - a) / batch;
        }
        if (i < 0)
            continue;
        if (waited) {
            dropped++;
            continue;
        }
        capped[kept] = t[1];
        plain[kept] = t[0];
        d[kept++] = t[1] - t[0];
    }
    if (!raw)
        vgpu_region_set_core_limit(&r, 0, pct, pol, &e);
    if (kept < 10) {
        fprintf(stderr, "launch_toggle: only %d pairs were under budget\n", kept);
        return 1;
    }
    double sum = 0, sq = 0;
    for (int i = 0; i < kept; i++)
        sum += d[i];
    double mean = sum / kept;
    for (int i = 0; i < kept; i++)
        sq += (d[i] - mean) * (d[i] - mean);
    double half = 1.96 * sqrt(sq / (kept - 1)) / sqrt(kept);
    qsort(d, (size_t)kept, sizeof *d, cmp);
    qsort(plain, (size_t)kept, sizeof *plain, cmp);
    /* distribution-free interval of the median: ranks n/2 -+ 1.96 sqrt(n)/2 */
    int lo = (int)floor(kept / 2.0 - 0.98 * sqrt(kept)), hi = (int)ceil(kept / 2.0 + 0.98 * sqrt(kept));
    if (lo < 0)
        lo = 0;
    if (hi > kept - 1)
        hi = kept - 1;
    printf("pairs=%d dropped=%d mean_ns=%.1f ci95_ns=%.1f median_ns=%.1f median_ci95=%.1f..%.1f base_ns=%.1f\n", kept,
           dropped, mean, half, d[kept / 2], d[lo], d[hi], plain[kept / 2]);
    return 0;
}
