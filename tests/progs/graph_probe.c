/* graph_probe: graph memory and stream-ordered frees under libvgpu.so (tests/cli/hook_graphmem.sh).
 * Runs the steps given on the command line, in order, printing one parseable line per step
 * (rc is the CUresult of the step's first failing call, 0 when all succeeded):
 *
 *   leak SIZE N          up to N times: a graph with one SIZE allocation node and no free node,
 *                        instantiated and launched (its memory is never freed), until a step
 *                        fails; prints "leak count=K rc=N stage=add|instantiate|launch"
 *   leaklatev2 SIZE N    like leaklate, instantiated with the CUDA 11 cuGraphInstantiate_v2
 *   leaklate SIZE N      the same, but all N graphs are built and instantiated first, then
 *                        launched one by one: "leaklate built=B count=K rc=N stage=..."
 *   addnode SIZE N       like leak with cuGraphAddNode_v2(MEM_ALLOC) nodes
 *   capture SIZE N       like leak with graphs made by stream capture of cuMemAllocAsync
 *   upload SIZE N        N graphs as in leaklate, then each instantiated with
 *                        cuGraphInstantiateWithParams(FLAG_UPLOAD), which takes the memory:
 *                        "upload built=B count=K rc=N stage=instantiate" (and the result_out)
 *   cycle SIZE N         one graph (SIZE allocation, a 20 ms kernel, the free) launched N times:
 *                        "cycle count=K rc=N" (K = launches that succeeded)
 *   pending SIZE MS      a graph allocating SIZE, running an MS ms kernel, then freeing: prints
 *                        "pending launched=USED synced=USED" with the graph memory in use right
 *                        after cuGraphLaunch and after cuStreamSynchronize
 *   asyncfree SIZE MS    cuMemAllocAsync(SIZE) on stream A, an MS ms kernel on A, cuMemFreeAsync
 *                        on A, then cuMemAllocAsync(SIZE) on stream B before A got there:
 *                        "asyncfree rc=N reserved=BYTES" (the default pool's reserved memory)
 *   linearasync SIZE     cuMemAlloc_v2(SIZE) freed with cuMemFreeAsync on the default stream,
 *                        then synchronized: "linearasync rc=N" (the first failing call's)
 *   sync                 cuCtxSynchronize
 *   trim                 cuDeviceGraphMemTrim and every pool trimmed to 0 after a synchronize
 *   meminfo              cuMemGetInfo_v2: "meminfo free=F total=T used=U" (the job's view, which
 *                        never shows more than the limit)
 *   region               the job's accounted usage of device 0, read from $VGPU_REGION as
 *                        `vgpu ps` does: "region used=BYTES limit=BYTES" (may pass the limit)
 * SIZE takes K/M/G suffixes (binary). Exit status 0 unless the setup failed (2). */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver.h"
#include "vgpu/region.h"

static CUdevice dev;
static CUfunction sleep_fn;

static uint64_t size_arg(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return v;
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(uint64_t size)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = dev;
    p.bytesize = size;
    return p;
}

static CUresult add_sleep(CUgraph g, CUgraphNode *dep, size_t ndep, CUgraphNode *out, unsigned long long *us)
{
    static void *params[1];
    params[0] = us;
    CUDA_KERNEL_NODE_PARAMS k;
    memset(&k, 0, sizeof k);
    k.func = sleep_fn;
    k.gridDimX = k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = params;
    return cuGraphAddKernelNode_v2(out, g, dep, ndep, &k);
}

enum how { PLAIN_NODE, ADD_NODE, CAPTURE };

/* Builds a graph with one SIZE allocation (never freed). */
static CUresult build(enum how how, uint64_t size, CUgraph *g)
{
    CUresult rc;
    if (how == CAPTURE) {
        CUstream s;
        CUdeviceptr p;
        if ((rc = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
            return rc;
        rc = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        CUresult rc2 = rc == CUDA_SUCCESS ? cuMemAllocAsync(&p, size, s) : rc;
        CUresult rc3 = rc == CUDA_SUCCESS ? cuStreamEndCapture(s, g) : rc;
        (void)cuStreamDestroy_v2(s);
        return rc2 != CUDA_SUCCESS ? rc2 : rc3;
    }
    if ((rc = cuGraphCreate(g, 0)) != CUDA_SUCCESS)
        return rc;
    CUgraphNode n;
    if (how == ADD_NODE) {
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        np.alloc = alloc_params(size);
        return cuGraphAddNode_v2(&n, *g, NULL, NULL, 0, &np);
    }
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(size);
    return cuGraphAddMemAllocNode(&n, *g, NULL, 0, &p);
}

static void leak(const char *name, enum how how, uint64_t size, int n)
{
    int count = 0;
    const char *stage = "none";
    CUresult rc = CUDA_SUCCESS;
    for (; count < n; count++) {
        CUgraph g;
        CUgraphExec e;
        if ((rc = build(how, size, &g)) != CUDA_SUCCESS) { stage = "add"; break; }
        if ((rc = cuGraphInstantiateWithFlags(&e, g, 0)) != CUDA_SUCCESS) { stage = "instantiate"; break; }
        if ((rc = cuGraphLaunch(e, NULL)) != CUDA_SUCCESS) { stage = "launch"; break; }
        if ((rc = cuStreamSynchronize(NULL)) != CUDA_SUCCESS) { stage = "sync"; break; }
    }
    printf("%s count=%d rc=%d stage=%s\n", name, count, (int)rc, stage);
}

static void leaklate(uint64_t size, int n, bool v2)
{
    CUgraphExec e[64];
    int built = 0, count = 0;
    const char *stage = "none";
    CUresult rc = CUDA_SUCCESS;
    for (; built < n && built < 64; built++) {
        CUgraph g;
        if ((rc = build(PLAIN_NODE, size, &g)) != CUDA_SUCCESS) { stage = "add"; break; }
        rc = v2 ? cuGraphInstantiate_v2(&e[built], g, NULL, NULL, 0) : cuGraphInstantiateWithFlags(&e[built], g, 0);
        if (rc != CUDA_SUCCESS) { stage = "instantiate"; break; }
    }
    for (; rc == CUDA_SUCCESS && count < built; count++)
        if ((rc = cuGraphLaunch(e[count], NULL)) != CUDA_SUCCESS)
            stage = "launch";
    if (rc != CUDA_SUCCESS && !strcmp(stage, "launch"))
        count--;
    printf("%s built=%d count=%d rc=%d stage=%s\n", v2 ? "leaklatev2" : "leaklate", built, count, (int)rc, stage);
}

static void upload(uint64_t size, int n)
{
    CUgraph g[64];
    int built = 0, count = 0;
    CUresult rc = CUDA_SUCCESS;
    const char *stage = "none";
    for (; built < n && built < 64; built++)
        if ((rc = build(PLAIN_NODE, size, &g[built])) != CUDA_SUCCESS) { stage = "add"; break; }
    for (; rc == CUDA_SUCCESS && count < built; count++) {
        CUgraphExec e;
        CUDA_GRAPH_INSTANTIATE_PARAMS ip;
        memset(&ip, 0, sizeof ip);
        ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
        if ((rc = cuGraphInstantiateWithParams(&e, g[count], &ip)) != CUDA_SUCCESS) {
            stage = "instantiate";
            printf("upload result_out=%d\n", (int)ip.result_out);
            break;
        }
    }
    printf("upload built=%d count=%d rc=%d stage=%s\n", built, count, (int)rc, stage);
}

static void cycle(uint64_t size, int n)
{
    static unsigned long long us = 20000;
    CUgraph g;
    CUgraphNode a, k, f;
    CUgraphExec e;
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(size);
    int count = 0;
    CUresult rc = cuGraphCreate(&g, 0);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphAddMemAllocNode(&a, g, NULL, 0, &p);
    if (rc == CUDA_SUCCESS)
        rc = add_sleep(g, &a, 1, &k, &us);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphAddMemFreeNode(&f, g, &k, 1, p.dptr);
    if (rc == CUDA_SUCCESS)
        rc = cuGraphInstantiateWithFlags(&e, g, 0);
    for (; rc == CUDA_SUCCESS && count < n; count++)
        if ((rc = cuGraphLaunch(e, NULL)) != CUDA_SUCCESS)
            break;
    (void)cuStreamSynchronize(NULL);
    printf("cycle count=%d rc=%d\n", count, (int)rc);
}

static uint64_t graph_used(void)
{
    cuuint64_t v = 0;
    (void)cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v);
    return v;
}

static void pending(uint64_t size, unsigned long long ms)
{
    static unsigned long long us;
    us = ms * 1000;
    CUgraph g;
    CUgraphNode a, k, f;
    CUgraphExec e;
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(size);
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddMemAllocNode(&a, g, NULL, 0, &p));
    MUST(add_sleep(g, &a, 1, &k, &us));
    MUST(cuGraphAddMemFreeNode(&f, g, &k, 1, p.dptr));
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    MUST(cuGraphLaunch(e, NULL));
    uint64_t launched = graph_used();
    MUST(cuStreamSynchronize(NULL));
    printf("pending launched=%llu synced=%llu\n", (unsigned long long)launched, (unsigned long long)graph_used());
}

static void asyncfree(uint64_t size, unsigned long long ms)
{
    static unsigned long long us;
    us = ms * 1000;
    void *params[] = { &us };
    CUstream a, b;
    CUdeviceptr p, q;
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUresult rc = cuMemAllocAsync(&p, size, a);
    if (rc == CUDA_SUCCESS)
        rc = cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, a, params, NULL);
    if (rc == CUDA_SUCCESS)
        rc = cuMemFreeAsync(p, a);
    if (rc == CUDA_SUCCESS)
        rc = cuMemAllocAsync(&q, size, b);
    CUmemoryPool pool;
    cuuint64_t reserved = 0;
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    (void)cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    printf("asyncfree rc=%d reserved=%llu\n", (int)rc, (unsigned long long)reserved);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUcontext ctx;
    CUmodule mod;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuModuleLoadData(&mod, "graph_probe image"));
    MUST(cuModuleGetFunction(&sleep_fn, mod, "sleep_us"));
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        const char *a1 = i + 1 < argc ? argv[i + 1] : "0", *a2 = i + 2 < argc ? argv[i + 2] : "0";
        if (!strcmp(op, "leak") || !strcmp(op, "addnode") || !strcmp(op, "capture")) {
            leak(op, !strcmp(op, "leak") ? PLAIN_NODE : !strcmp(op, "addnode") ? ADD_NODE : CAPTURE, size_arg(a1),
                 atoi(a2));
            i += 2;
        } else if (!strcmp(op, "leaklate") || !strcmp(op, "leaklatev2")) {
            leaklate(size_arg(a1), atoi(a2), !strcmp(op, "leaklatev2"));
            i += 2;
        } else if (!strcmp(op, "upload")) {
            upload(size_arg(a1), atoi(a2));
            i += 2;
        } else if (!strcmp(op, "cycle")) {
            cycle(size_arg(a1), atoi(a2));
            i += 2;
        } else if (!strcmp(op, "pending")) {
            pending(size_arg(a1), strtoull(a2, NULL, 10));
            i += 2;
        } else if (!strcmp(op, "asyncfree")) {
            asyncfree(size_arg(a1), strtoull(a2, NULL, 10));
            i += 2;
        } else if (!strcmp(op, "linearasync")) {
            CUdeviceptr p;
            CUresult rc = cuMemAlloc_v2(&p, size_arg(a1));
            if (rc == CUDA_SUCCESS)
                rc = cuMemFreeAsync(p, NULL);
            if (rc == CUDA_SUCCESS)
                rc = cuStreamSynchronize(NULL);
            printf("linearasync rc=%d\n", (int)rc);
            i++;
        } else if (!strcmp(op, "sync")) {
            printf("sync rc=%d\n", (int)cuCtxSynchronize());
        } else if (!strcmp(op, "trim")) {
            CUmemoryPool pool;
            MUST(cuCtxSynchronize());
            MUST(cuDeviceGetDefaultMemPool(&pool, dev));
            printf("trim rc=%d pool=%d\n", (int)cuDeviceGraphMemTrim(dev), (int)cuMemPoolTrimTo(pool, 0));
        } else if (!strcmp(op, "region")) {
            const char *path = getenv("VGPU_REGION");
            int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
            void *m = fd >= 0 ? mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
            if (m == MAP_FAILED) {
                fprintf(stderr, "graph_probe: cannot map VGPU_REGION\n");
                return 2;
            }
            const struct vgpu_region_header *h = m;
            const struct vgpu_region_usage *u = (const void *)((const char *)m + VGPU_REGION_LIMITS_SIZE);
            printf("region used=%llu limit=%llu\n", (unsigned long long)atomic_load(&u->dev[0].used),
                   (unsigned long long)atomic_load(&h->dev[0].mem_limit));
            munmap(m, VGPU_REGION_SIZE);
            close(fd);
        } else if (!strcmp(op, "meminfo")) {
            size_t fr = 0, to = 0;
            CUresult rc = cuMemGetInfo_v2(&fr, &to);
            printf("meminfo rc=%d free=%zu total=%zu used=%zu\n", (int)rc, fr, to, to - fr);
        } else {
            fprintf(stderr, "graph_probe: unknown step '%s'\n", op);
            return 2;
        }
    }
    return 0;
}
