/* uvm_probe: managed memory's residency, advice and migration time, step by step, one
 * parseable line per step (OP rc=N [key=value ...]), for tests/cli/fake_managed.sh on the
 * simulated GPU. Unlike oversub_probe (whose `managed` also advises preferred location and
 * accessed-by the device, and whose prefetch synchronizes), each step here is one driver call,
 * timed, so a test sees what the call itself costs and what a later synchronize waits for.
 * Work goes to one stream the probe creates (blocking, as a framework's).
 *
 *   managed SIZE               cuMemAllocManaged(GLOBAL), no advice
 *   alloc SIZE                 cuMemAlloc_v2 (prints s=: how long the allocation took)
 *   advise cpu|gpu|unset [OFF LEN]  SET_PREFERRED_LOCATION CPU / the device, or UNSET, over
 *                              [OFF, OFF+LEN) of the newest managed buffer (default: all of it)
 *   prefetch gpu|host [OFF LEN]    cuMemPrefetchAsync of that range on the stream, not waited for
 *                              (s=: the call alone)
 *   sync                       cuStreamSynchronize (s=: what it waited; since=: seconds since the
 *                              last prefetch or launch call began, which a loaded machine's delay
 *                              between the calls does not shorten)
 *   launch                     a 1 ms sleep_us kernel on the stream, then sync (s=: both)
 *   meminfo                    cuMemGetInfo_v2 (free= total=)
 *   free                       frees the newest buffer
 *   say WORD                   prints WORD (a mark a test waits for)
 *   await FILE                 waits (up to 60 s) until FILE exists: a test starts the next step
 *   hold                       prints "holding" and sleeps until killed
 * SIZE, OFF, LEN take K/M/G (binary). Exit status 0 unless the setup failed or a step is unknown (2). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

#define PROBE_CPU ((CUdevice)-1)   /* CU_DEVICE_CPU */

static struct { CUdeviceptr p; uint64_t size; bool managed; } buf[64];
static int nbuf;
static double last_submit;   /* when the last prefetch or launch call began */

static bool is_size(const char *s)
{
    return s && *s >= '0' && *s <= '9';
}

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

/* The newest managed buffer, or -1. */
static int newest_managed(void)
{
    for (int i = nbuf - 1; i >= 0; i--)
        if (buf[i].managed)
            return i;
    return -1;
}

/* [OFF LEN] after argv[*i], when given; else the whole buffer. */
static void range_args(int argc, char **argv, int *i, int b, CUdeviceptr *p, uint64_t *n)
{
    *p = buf[b].p;
    *n = buf[b].size;
    if (*i + 2 < argc && is_size(argv[*i + 1]) && is_size(argv[*i + 2])) {
        *p += size_arg(argv[*i + 1]);
        *n = size_arg(argv[*i + 2]);
        *i += 2;
    }
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUmodule mod;
    CUfunction sleep_fn;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&stream, 0));
    MUST(cuModuleLoadData(&mod, "uvm_probe image"));
    MUST(cuModuleGetFunction(&sleep_fn, mod, "sleep_us"));
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        const char *a1 = i + 1 < argc ? argv[i + 1] : "";
        CUresult rc;
        double t0 = now_s();
        if (!strcmp(op, "managed") || !strcmp(op, "alloc")) {
            uint64_t size = size_arg(a1);
            CUdeviceptr p = 0;
            bool managed = op[0] == 'm';
            i++;
            rc = managed ? cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc_v2(&p, size);
            if (rc == CUDA_SUCCESS && nbuf < 64)
                buf[nbuf++] = (typeof(buf[0])){ p, size, managed };
            printf("%s rc=%d size=%llu s=%.3f\n", op, (int)rc, (unsigned long long)size, now_s() - t0);
        } else if (!strcmp(op, "advise") || !strcmp(op, "prefetch")) {
            bool advise = op[0] == 'a';
            const char *where = a1;
            int b = newest_managed();
            CUdeviceptr p = 0;
            uint64_t n = 0;
            i++;
            if (b < 0) {
                rc = CUDA_ERROR_INVALID_VALUE;
            } else {
                range_args(argc, argv, &i, b, &p, &n);
                CUdevice to = !strcmp(where, "cpu") || !strcmp(where, "host") ? PROBE_CPU : dev;
                if (advise)
                    rc = cuMemAdvise(p, n, !strcmp(where, "unset") ? CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION
                                                                   : CU_MEM_ADVISE_SET_PREFERRED_LOCATION, to);
                else
                    rc = cuMemPrefetchAsync(p, n, to, stream);
            }
            if (!advise)
                last_submit = t0;
            printf("%s %s rc=%d s=%.3f\n", op, where, (int)rc, now_s() - t0);
        } else if (!strcmp(op, "sync")) {
            rc = cuStreamSynchronize(stream);
            printf("sync rc=%d s=%.3f since=%.3f\n", (int)rc, now_s() - t0, now_s() - last_submit);
        } else if (!strcmp(op, "launch")) {
            unsigned long long us = 1000;
            void *params[] = { &us };
            last_submit = t0;
            rc = cuLaunchKernel(sleep_fn, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL);
            if (rc == CUDA_SUCCESS)
                rc = cuStreamSynchronize(stream);
            printf("launch rc=%d s=%.3f\n", (int)rc, now_s() - t0);
        } else if (!strcmp(op, "meminfo")) {
            size_t fr = 0, tot = 0;
            rc = cuMemGetInfo_v2(&fr, &tot);
            printf("meminfo rc=%d free=%zu total=%zu\n", (int)rc, fr, tot);
        } else if (!strcmp(op, "free")) {
            rc = nbuf ? cuMemFree_v2(buf[--nbuf].p) : CUDA_ERROR_INVALID_VALUE;
            printf("free rc=%d\n", (int)rc);
        } else if (!strcmp(op, "say")) {
            i++;
            printf("%s\n", a1);
        } else if (!strcmp(op, "await")) {
            struct stat sb;
            i++;
            while (stat(a1, &sb) != 0 && now_s() - t0 < 60)
                nanosleep(&(struct timespec){ 0, 10000000L }, NULL);
            printf("await rc=%d\n", stat(a1, &sb) == 0 ? 0 : 1);
        } else if (!strcmp(op, "hold")) {
            printf("holding\n");
            for (;;)
                pause();
        } else {
            fprintf(stderr, "uvm_probe: unknown step '%s' (see the top of tests/progs/uvm_probe.c)\n", op);
            return 2;
        }
    }
    return 0;
}
