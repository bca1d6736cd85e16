/* oversub_probe: memory that may live off the device (managed, mapped host) and the job's view
 * of it, one parseable line per step (OP rc=N [key=value ...]). Runs on the simulated GPU
 * (tests/cli/fake_managed.sh, oversub.sh) and on a real one (tests/gpu/oversub.sh): it needs no
 * kernel image, the real-GPU timings use the driver's own memset and copies.
 *
 *   alloc SIZE          cuMemAlloc_v2
 *   timed SIZE          cuMemAlloc_v2, timed (prints ms=: how long the call took, a wait for borrowers included)
 *   managed SIZE        cuMemAllocManaged(GLOBAL), then preferred location and accessed-by = the device
 *   mapped SIZE         cuMemHostAlloc(DEVICEMAP) + cuMemHostGetDevicePointer_v2
 *   prefetch | evict    cuMemPrefetchAsync of the newest buffer to the device / to the CPU
 *   launch              one kernel (the simulated GPU's sleep_us: its page faults migrate managed memory)
 *   upload              cuMemcpyHtoD_v2 of the whole newest buffer from host memory
 *   churn MS            a kernel every 20 ms for MS ms (prints steps=): managed memory the GPU cannot
 *                       hold all of migrates at every step (the simulated GPU's sleep_us kernel)
 *   touch N             cuMemsetD32 over the whole newest buffer N times, synchronized (prints GBps=)
 *   hot SIZE N          the same over its first SIZE bytes only (a small hot set)
 *   ismanaged           CU_POINTER_ATTRIBUTE_IS_MANAGED of the newest buffer (prints v=)
 *   ipc                 cuIpcGetMemHandle of the newest buffer
 *   meminfo             cuMemGetInfo_v2 (free= total=)
 *   free | freeall      frees the newest buffer / every buffer
 *   sleep MS            sleeps (to pass a time-throttled step of the library, e.g. its 1 s NVML reconcile)
 *   hold                prints "holding" and sleeps until killed
 * SIZE takes K/M/G (binary). Exit status 0 unless the setup failed (2). */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

enum kind { DEV, MANAGED, MAPPED };
static struct { enum kind kind; CUdeviceptr p; void *host; uint64_t size; } buf[256];
static int nbuf;

static uint64_t size_arg(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K') v <<= 10;
    else if (*end == 'm' || *end == 'M') v <<= 20;
    else if (*end == 'g' || *end == 'G') v <<= 30;
    return v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void push(enum kind k, CUdeviceptr p, void *host, uint64_t size)
{
    if (nbuf < 256)
        buf[nbuf++] = (typeof(buf[0])){ k, p, host, size };
}

static CUresult release(int i)
{
    return buf[i].kind == MAPPED ? cuMemFreeHost(buf[i].host) : cuMemFree_v2(buf[i].p);
}

/* memset over [p, p+bytes) n times; prints the rate. */
static void touch(const char *op, CUdeviceptr p, uint64_t bytes, int n)
{
    double t0 = now_s();
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; i < n && rc == CUDA_SUCCESS; i++)
        rc = cuMemsetD32_v2(p, (unsigned)i, bytes / 4);
    if (rc == CUDA_SUCCESS)
        rc = cuCtxSynchronize();
    double dt = now_s() - t0;
    printf("%s rc=%d bytes=%llu n=%d s=%.3f GBps=%.2f\n", op, (int)rc, (unsigned long long)bytes, n, dt,
           dt > 0 ? (double)bytes * n / dt / 1e9 : 0.0);
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        const char *a1 = i + 1 < argc ? argv[i + 1] : "0";
        CUresult rc;
        if (!strcmp(op, "alloc") || !strcmp(op, "managed") || !strcmp(op, "mapped")) {
            uint64_t size = size_arg(a1);
            CUdeviceptr p = 0;
            void *h = NULL;
            i++;
            if (op[0] == 'a') {
                rc = cuMemAlloc_v2(&p, size);
                if (rc == CUDA_SUCCESS) push(DEV, p, NULL, size);
            } else if (op[0] == 'm' && op[1] == 'a' && op[2] == 'n') {
                rc = cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL);
                if (rc == CUDA_SUCCESS) {
                    rc = cuMemAdvise(p, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev);
                    if (rc == CUDA_SUCCESS)
                        rc = cuMemAdvise(p, size, CU_MEM_ADVISE_SET_ACCESSED_BY, dev);
                    push(MANAGED, p, NULL, size);
                }
            } else {
                rc = cuMemHostAlloc(&h, size, CU_MEMHOSTALLOC_DEVICEMAP);
                if (rc == CUDA_SUCCESS) {
                    rc = cuMemHostGetDevicePointer_v2(&p, h, 0);
                    push(MAPPED, p, h, size);
                }
            }
            printf("%s rc=%d size=%llu\n", op, (int)rc, (unsigned long long)size);
        } else if (!strcmp(op, "timed")) {
            uint64_t size = size_arg(a1);
            CUdeviceptr p = 0;
            i++;
            double t0 = now_s();
            rc = cuMemAlloc_v2(&p, size);
            double ms = (now_s() - t0) * 1000.0;
            if (rc == CUDA_SUCCESS) push(DEV, p, NULL, size);
            printf("timed rc=%d size=%llu ms=%.0f\n", (int)rc, (unsigned long long)size, ms);
        } else if (!strcmp(op, "prefetch") || !strcmp(op, "evict")) {
            rc = nbuf ? cuMemPrefetchAsync(buf[nbuf - 1].p, buf[nbuf - 1].size, op[0] == 'p' ? dev : -1, NULL)
                      : CUDA_ERROR_INVALID_VALUE;
            if (rc == CUDA_SUCCESS)
                rc = cuCtxSynchronize();
            printf("%s rc=%d\n", op, (int)rc);
        } else if (!strcmp(op, "launch")) {
            CUmodule mod;
            CUfunction fn;
            unsigned long long us = 10;
            void *params[] = { &us };
            rc = cuModuleLoadData(&mod, "oversub_probe image");
            if (rc == CUDA_SUCCESS) rc = cuModuleGetFunction(&fn, mod, "sleep_us");
            if (rc == CUDA_SUCCESS) rc = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
            if (rc == CUDA_SUCCESS) rc = cuCtxSynchronize();
            printf("launch rc=%d\n", (int)rc);
        } else if (!strcmp(op, "churn")) {
            /* churn MS: a kernel every 20 ms for MS ms, as a training loop's steps (on the fake,
             * each launch makes the context's managed memory resident: with more of it than
             * the GPU has room for, every step migrates pages in and others out) */
            long ms = atol(a1), steps = 0;
            i++;
            CUmodule mod;
            CUfunction fn;
            unsigned long long us = 10;
            void *params[] = { &us };
            rc = cuModuleLoadData(&mod, "oversub_probe image");
            if (rc == CUDA_SUCCESS) rc = cuModuleGetFunction(&fn, mod, "sleep_us");
            double end = now_s() + ms / 1000.0;
            while (rc == CUDA_SUCCESS && now_s() < end) {
                rc = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
                if (rc == CUDA_SUCCESS) rc = cuCtxSynchronize();
                steps++;
                nanosleep(&(struct timespec){ 0, 20000000L }, NULL);
            }
            printf("churn rc=%d steps=%ld\n", (int)rc, steps);
        } else if (!strcmp(op, "upload")) {
            /* the whole newest buffer copied from (zeroed) host memory: PCIe traffic that is
             * not migration, which the GPU's byte counters count as well */
            void *h = nbuf ? calloc(1, buf[nbuf - 1].size) : NULL;
            rc = h ? cuMemcpyHtoD_v2(buf[nbuf - 1].p, h, buf[nbuf - 1].size) : CUDA_ERROR_INVALID_VALUE;
            free(h);
            printf("upload rc=%d\n", (int)rc);
        } else if (!strcmp(op, "touch")) {
            i++;
            if (nbuf) touch(op, buf[nbuf - 1].p, buf[nbuf - 1].size, atoi(a1));
            else printf("touch rc=1\n");
        } else if (!strcmp(op, "hot")) {
            uint64_t size = size_arg(a1);
            int n = i + 2 < argc ? atoi(argv[i + 2]) : 1;
            i += 2;
            if (nbuf && size <= buf[nbuf - 1].size) touch(op, buf[nbuf - 1].p, size, n);
            else printf("hot rc=1\n");
        } else if (!strcmp(op, "ismanaged")) {
            unsigned v = 0;
            rc = nbuf ? cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, buf[nbuf - 1].p)
                      : CUDA_ERROR_INVALID_VALUE;
            printf("ismanaged rc=%d v=%u\n", (int)rc, v);
        } else if (!strcmp(op, "ipc")) {
            CUipcMemHandle h;
            rc = nbuf ? cuIpcGetMemHandle(&h, buf[nbuf - 1].p) : CUDA_ERROR_INVALID_VALUE;
            printf("ipc rc=%d\n", (int)rc);
        } else if (!strcmp(op, "meminfo")) {
            size_t fr = 0, tot = 0;
            rc = cuMemGetInfo_v2(&fr, &tot);
            printf("meminfo rc=%d free=%zu total=%zu\n", (int)rc, fr, tot);
        } else if (!strcmp(op, "free")) {
            rc = nbuf ? release(--nbuf) : CUDA_ERROR_INVALID_VALUE;
            printf("free rc=%d\n", (int)rc);
        } else if (!strcmp(op, "freeall")) {
            rc = CUDA_SUCCESS;
            while (nbuf && rc == CUDA_SUCCESS)
                rc = release(--nbuf);
            printf("freeall rc=%d\n", (int)rc);
        } else if (!strcmp(op, "sleep")) {
            i++;
            long ms = atol(a1);
            nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000L }, NULL);
        } else if (!strcmp(op, "hold")) {
            printf("holding\n");
            for (;;)
                pause();
        } else {
            fprintf(stderr, "oversub_probe: unknown step '%s'\n", op);
            return 2;
        }
    }
    return 0;
}
