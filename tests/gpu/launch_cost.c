/* launch_cost: enqueue cost of an empty kernel through the real driver API (tests/gpu/run.sh).
 * Loads a PTX empty kernel (the driver JIT-compiles it, so no nvcc is needed), launches it in
 * batches of 256 on one stream, synchronizing after each batch, and prints
 *     ns_per_launch=N
 * the median of 5 repetitions of 400 batches. Built here against the real cuda.h. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry empty()\n{\n    ret;\n}\n";

#define CHECK(x)                                                                  \
    do {                                                                          \
        CUresult r_ = (x);                                                        \
        if (r_ != CUDA_SUCCESS) {                                                 \
            fprintf(stderr, "%s failed: %d\n", #x, (int)r_);                      \
            return 2;                                                             \
        }                                                                         \
    } while (0)

static double now(void)
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

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUstream s;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&f, mod, "empty"));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double rep[5];
    for (int r = -1; r < 5; r++) {              /* r = -1: warm-up */
        double t0 = now();
        for (int b = 0; b < 400; b++) {
            for (int i = 0; i < 256; i++)
                CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
            CHECK(cuStreamSynchronize(s));
        }
        if (r >= 0)
            rep[r] = (now() - t0) / (400.0 * 256);
    }
    qsort(rep, 5, sizeof *rep, cmp);
    printf("ns_per_launch=%.0f\n", rep[2]);
    return 0;
}
