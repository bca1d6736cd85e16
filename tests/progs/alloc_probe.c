/* alloc_probe: exercises each allocation path of the driver by name, in the order given on the
 * command line, and prints one parseable line per step:
 *     OP rc=N [key=value ...]
 * (rc is the CUresult). Used by tests/cli/hook_*.sh under libvgpu.so.
 *
 *   alloc SIZE | alloc32 SIZE       cuMemAlloc_v2 / the old 32-bit cuMemAlloc
 *   pitch WIDTH HEIGHT              cuMemAllocPitch_v2 (prints pitch=)
 *   managed SIZE                    cuMemAllocManaged
 *   async SIZE                      cuMemAllocAsync on stream 0 (default pool)
 *   pool SIZE                       cuMemAllocFromPoolAsync from an explicit device pool
 *   hostpool SIZE                   same from a HOST_NUMA pool (host memory: never charged)
 *   vmm SIZE | vmmhost SIZE         cuMemCreate on a DEVICE / HOST_NUMA location
 *   array W H | array3d W H D       cuArrayCreate_v2 / cuArray3DCreate_v2 (float, 1 channel)
 *   mipmap W H LEVELS               cuMipmappedArrayCreate
 *   heap SIZE | stack SIZE          cuCtxSetLimit(MALLOC_HEAP_SIZE / STACK_SIZE)
 *   free                            frees the most recent allocation still held (its own path)
 *   freeall                         frees everything held, newest first
 *   badfree                         cuMemFree_v2 of a pointer nobody allocated (expect the driver's answer)
 *   graph SIZE                      a graph with a memory-allocation node of SIZE and its free node,
 *                                   instantiated and launched once (the device's graph pool grows)
 *   graphtrim                       cuDeviceGraphMemTrim
 *   trim                            synchronize and trim every pool to 0
 *   meminfo                         cuMemGetInfo_v2 (free= total=) ; meminfo32: old ABI
 *   charged                         the job's charge on its GPU 0 read from the job region
 *                                   ($VGPU_REGION, read-only, as vgpu ps reads it): bytes=; not
 *                                   through this process's own view, which a bug could move
 *                                   together with the charge
 *   sync                            cuStreamSynchronize(0) (pools shrink to their release
 *                                   threshold; the hook learns it only at its next measure)
 *   totalmem                        cuDeviceTotalMem_v2 (bytes=)
 *   fill SIZE                       cuMemAlloc_v2 of SIZE until it fails (prints count=)
 *   churn MS                        cuMemAlloc_v2/cuMemFree_v2 of 1 MiB in a loop for MS ms (prints n=)
 *   fork                            the rest of the steps run in a child; the parent waits for it
 *                                   and then prints "parent" and the job's view (meminfo)
 *   fault                           launches the simulated GPU's "fault" kernel (an illegal address)
 *                                   and synchronizes: the context is broken from then on (prints rc
 *                                   of the synchronize, then of a cuMemGetInfo_v2: the sticky error)
 *   ctxreset                        cuDevicePrimaryCtxReset_v2, then retains and sets a new primary
 *                                   context (what an application does after a sticky error); what
 *                                   this probe held is forgotten
 *   sleep MS                        sleeps (a window for other processes / signals)
 *   hold                            prints "holding" and sleeps until killed
 *   await FILE                      prints "awaiting", then waits until FILE exists (the test's
 *                                   signal to go on); after 60 s it fails: exit status 3
 *   forge                           a job that forges its usage (tests/cli/overlimit.sh): zeroes
 *                                   the job's `used` counters in its usage file, as the job's user
 *                                   can (a --user job's .usage beside $VGPU_REGION, else the region
 *                                   itself), so that the library lets it allocate past its limit
 *                                   (prints forged=BYTES: what the counter of job device 0 held)
 * SIZE accepts K/M/G suffixes (binary). ALLOC_PROBE_DEVICE=N: use CUDA device N (default 0).
 * Exit status 0 unless the setup failed (2). */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"
#include "vgpu/region.h"

/* The job's charge on job GPU 0, from the region file itself (region_sampler's reading). */
static int region_charge(uint64_t *bytes)
{
    const char *path = getenv("VGPU_REGION");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return -1;
    void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    const struct vgpu_region_usage *u = (const void *)((const char *)m + VGPU_REGION_LIMITS_SIZE);
    *bytes = atomic_load(&u->dev[0].used);
    munmap(m, VGPU_REGION_SIZE);
    return 0;
}

enum kind { LINEAR, LINEAR32, ASYNC, POOL, VMM, ARRAY, MIPMAP };
struct held {
    enum kind kind;
    uint64_t ptr;
    CUmemoryPool pool;
};
static struct held held[4096];
static int nheld;
static CUmemoryPool dev_pool, host_pool;

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

static void keep(enum kind k, uint64_t ptr, CUmemoryPool pool)
{
    if (nheld < (int)(sizeof held / sizeof *held))
        held[nheld++] = (struct held){ k, ptr, pool };
}

static CUresult release(struct held *h)
{
    switch (h->kind) {
    case LINEAR: return cuMemFree_v2(h->ptr);
    case LINEAR32: return cuMemFree((CUdeviceptr_v1)h->ptr);
    case ASYNC:
    case POOL: {
        CUresult rc = cuMemFreeAsync(h->ptr, NULL);
        if (rc == CUDA_SUCCESS)
            rc = cuStreamSynchronize(NULL);
        return rc;
    }
    case VMM: return cuMemRelease(h->ptr);
    case ARRAY: return cuArrayDestroy((CUarray)(uintptr_t)h->ptr);
    case MIPMAP: return cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h->ptr);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* The step "forge": the job's usage counters, zeroed through a mapping of our own. -1: no job. */
static long long forge_usage(void)
{
    const char *region = getenv("VGPU_REGION");
    if (!region)
        return -1;
    char path[4096];
    size_t len = strlen(region);
    off_t off = VGPU_REGION_LIMITS_SIZE;            /* one file: the usage follows page 0 */
    snprintf(path, sizeof path, "%s", region);
    if (len > 7 && strcmp(region + len - 7, ".region") == 0) {
        snprintf(path + len - 7, sizeof path - (len - 7), ".usage");
        if (access(path, F_OK) == 0)
            off = 0;                                /* the split layout (vgpu run --user) */
        else
            snprintf(path, sizeof path, "%s", region);
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long page = sysconf(_SC_PAGESIZE);
    off_t base = off / page * page;
    size_t span = (size_t)(off - base) + sizeof(struct vgpu_region_usage);
    void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    struct vgpu_region_usage *u = (struct vgpu_region_usage *)((char *)m + (off - base));
    long long had = (long long)atomic_load(&u->dev[0].used);
    for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++)
        atomic_store(&u->dev[d].used, 0);
    munmap(m, span);
    return had;
}

static CUmemoryPool make_pool(CUmemLocationType type, int id)
{
    CUmemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    CUmemoryPool pool;
    MUST(cuMemPoolCreate(&pool, &p));
    return pool;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    CUcontext ctx;
    MUST(cuInit(0));
    /* ALLOC_PROBE_INIT_WAIT_MS: a pause between cuInit and the first context, as a program that
     * does other work first has (libvgpu.so's NVML is then ready before the context). */
    const char *init_wait = getenv("ALLOC_PROBE_INIT_WAIT_MS");
    if (init_wait && atoi(init_wait) > 0)
        nanosleep(&(struct timespec){ atoi(init_wait) / 1000, (long)(atoi(init_wait) % 1000) * 1000000L }, NULL);
    const char *which = getenv("ALLOC_PROBE_DEVICE");   /* the CUDA ordinal to use (default 0) */
    MUST(cuDeviceGet(&dev, which ? atoi(which) : 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));

    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        const char *a1 = i + 1 < argc ? argv[i + 1] : "0";
        const char *a2 = i + 2 < argc ? argv[i + 2] : "0";
        const char *a3 = i + 3 < argc ? argv[i + 3] : "0";
        CUresult rc;
        if (!strcmp(op, "alloc")) {
            CUdeviceptr p = 0;
            rc = cuMemAlloc_v2(&p, size_arg(a1));
            if (!rc)
                keep(LINEAR, p, NULL);
            printf("alloc rc=%d size=%llu\n", rc, (unsigned long long)size_arg(a1));
            i++;
        } else if (!strcmp(op, "alloc32")) {
            CUdeviceptr_v1 p = 0;
            rc = cuMemAlloc(&p, (unsigned int)size_arg(a1));
            if (!rc)
                keep(LINEAR32, p, NULL);
            printf("alloc32 rc=%d\n", rc);
            i++;
        } else if (!strcmp(op, "pitch")) {
            CUdeviceptr p = 0;
            size_t pitch = 0;
            rc = cuMemAllocPitch_v2(&p, &pitch, size_arg(a1), size_arg(a2), 4);
            if (!rc)
                keep(LINEAR, p, NULL);
            printf("pitch rc=%d pitch=%zu\n", rc, pitch);
            i += 2;
        } else if (!strcmp(op, "managed")) {
            CUdeviceptr p = 0;
            rc = cuMemAllocManaged(&p, size_arg(a1), CU_MEM_ATTACH_GLOBAL);
            if (!rc)
                keep(LINEAR, p, NULL);
            printf("managed rc=%d\n", rc);
            i++;
        } else if (!strcmp(op, "async")) {
            CUdeviceptr p = 0;
            rc = cuMemAllocAsync(&p, size_arg(a1), NULL);
            if (!rc)
                keep(ASYNC, p, NULL);
            printf("async rc=%d\n", rc);
            i++;
        } else if (!strcmp(op, "pool") || !strcmp(op, "hostpool")) {
            bool host = op[0] == 'h';
            CUmemoryPool *pp = host ? &host_pool : &dev_pool;
            if (!*pp)
                *pp = host ? make_pool(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0) : make_pool(CU_MEM_LOCATION_TYPE_DEVICE, dev);
            CUdeviceptr p = 0;
            rc = cuMemAllocFromPoolAsync(&p, size_arg(a1), *pp, NULL);
            if (!rc)
                keep(POOL, p, *pp);
            printf("%s rc=%d\n", op, rc);
            i++;
        } else if (!strcmp(op, "vmm") || !strcmp(op, "vmmhost")) {
            CUmemAllocationProp p;
            memset(&p, 0, sizeof p);
            p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            p.location.type = op[3] == 'h' ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_DEVICE;
            p.location.id = op[3] == 'h' ? 0 : dev;
            CUmemGenericAllocationHandle h = 0;
            rc = cuMemCreate(&h, size_arg(a1), &p, 0);
            if (!rc)
                keep(VMM, h, NULL);
            printf("%s rc=%d\n", op, rc);
            i++;
        } else if (!strcmp(op, "array") || !strcmp(op, "array3d")) {
            CUarray arr = NULL;
            if (op[5] == '3') {
                CUDA_ARRAY3D_DESCRIPTOR d = { size_arg(a1), size_arg(a2), size_arg(a3), CU_AD_FORMAT_FLOAT, 1, 0 };
                rc = cuArray3DCreate_v2(&arr, &d);
                i += 3;
            } else {
                CUDA_ARRAY_DESCRIPTOR d = { size_arg(a1), size_arg(a2), CU_AD_FORMAT_FLOAT, 1 };
                rc = cuArrayCreate_v2(&arr, &d);
                i += 2;
            }
            if (!rc)
                keep(ARRAY, (uint64_t)(uintptr_t)arr, NULL);
            printf("%s rc=%d\n", op, rc);
        } else if (!strcmp(op, "mipmap")) {
            CUDA_ARRAY3D_DESCRIPTOR d = { size_arg(a1), size_arg(a2), 0, CU_AD_FORMAT_FLOAT, 1, 0 };
            CUmipmappedArray m = NULL;
            rc = cuMipmappedArrayCreate(&m, &d, (unsigned)size_arg(a3));
            if (!rc)
                keep(MIPMAP, (uint64_t)(uintptr_t)m, NULL);
            printf("mipmap rc=%d\n", rc);
            i += 3;
        } else if (!strcmp(op, "heap") || !strcmp(op, "stack")) {
            rc = cuCtxSetLimit(op[0] == 'h' ? CU_LIMIT_MALLOC_HEAP_SIZE : CU_LIMIT_STACK_SIZE, size_arg(a1));
            printf("%s rc=%d\n", op, rc);
            i++;
        } else if (!strcmp(op, "free")) {
            rc = nheld ? release(&held[--nheld]) : CUDA_ERROR_INVALID_VALUE;
            printf("free rc=%d\n", rc);
        } else if (!strcmp(op, "freeall")) {
            rc = CUDA_SUCCESS;
            while (nheld && rc == CUDA_SUCCESS)
                rc = release(&held[--nheld]);
            printf("freeall rc=%d\n", rc);
        } else if (!strcmp(op, "badfree")) {
            rc = cuMemFree_v2((CUdeviceptr)0xdead0000ull);
            printf("badfree rc=%d\n", rc);
        } else if (!strcmp(op, "graph")) {
            CUgraph g;
            CUgraphNode an, fn;
            CUgraphExec ge;
            CUDA_MEM_ALLOC_NODE_PARAMS ap;
            memset(&ap, 0, sizeof ap);
            ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
            ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            ap.poolProps.location.id = dev;
            ap.bytesize = size_arg(a1);
            MUST(cuGraphCreate(&g, 0));
            rc = cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap);
            if (!rc)
                rc = cuGraphAddMemFreeNode(&fn, g, &an, 1, ap.dptr);
            if (!rc)
                rc = cuGraphInstantiateWithFlags(&ge, g, 0);
            if (!rc)
                rc = cuGraphLaunch(ge, NULL);
            if (!rc)
                rc = cuStreamSynchronize(NULL);
            printf("graph rc=%d\n", rc);
            i++;
        } else if (!strcmp(op, "graphtrim")) {
            rc = cuDeviceGraphMemTrim(dev);
            printf("graphtrim rc=%d\n", rc);
        } else if (!strcmp(op, "trim")) {
            (void)cuStreamSynchronize(NULL);
            CUmemoryPool def;
            rc = cuDeviceGetMemPool(&def, dev);
            if (!rc)
                rc = cuMemPoolTrimTo(def, 0);
            if (!rc && dev_pool)
                rc = cuMemPoolTrimTo(dev_pool, 0);
            printf("trim rc=%d\n", rc);
        } else if (!strcmp(op, "meminfo")) {
            size_t fr = 0, to = 0;
            rc = cuMemGetInfo_v2(&fr, &to);
            printf("meminfo rc=%d free=%zu total=%zu used=%zu\n", rc, fr, to, to - fr);
        } else if (!strcmp(op, "charged")) {
            uint64_t b = 0;
            rc = region_charge(&b);
            printf("charged rc=%d bytes=%llu\n", rc, (unsigned long long)b);
        } else if (!strcmp(op, "sync")) {
            rc = cuStreamSynchronize(NULL);
            printf("sync rc=%d\n", rc);
        } else if (!strcmp(op, "meminfo32")) {
            unsigned int fr = 0, to = 0;
            rc = cuMemGetInfo(&fr, &to);
            printf("meminfo32 rc=%d free=%u total=%u\n", rc, fr, to);
        } else if (!strcmp(op, "totalmem")) {
            size_t b = 0;
            rc = cuDeviceTotalMem_v2(&b, dev);
            printf("totalmem rc=%d bytes=%zu\n", rc, b);
        } else if (!strcmp(op, "fill")) {
            int n = 0;
            CUdeviceptr p;
            while ((rc = cuMemAlloc_v2(&p, size_arg(a1))) == CUDA_SUCCESS) {
                keep(LINEAR, p, NULL);
                n++;
            }
            printf("fill rc=%d count=%d\n", rc, n);
            i++;
        } else if (!strcmp(op, "churn")) {
            struct timespec t0, t;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            long n = 0;
            rc = CUDA_SUCCESS;
            do {
                CUdeviceptr p;
                if ((rc = cuMemAlloc_v2(&p, 1 << 20)) == CUDA_SUCCESS)
                    rc = cuMemFree_v2(p);
                n++;
                clock_gettime(CLOCK_MONOTONIC, &t);
            } while (rc == CUDA_SUCCESS &&
                     (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < (long)size_arg(a1));
            printf("churn rc=%d n=%ld\n", rc, n);
            i++;
        } else if (!strcmp(op, "fork")) {
            pid_t child = fork();
            if (child > 0) {
                int st;
                waitpid(child, &st, 0);
                size_t fr = 0, to = 0;
                rc = cuMemGetInfo_v2(&fr, &to);
                printf("parent rc=%d free=%zu total=%zu used=%zu\n", rc, fr, to, to - fr);
                return 0;
            }
        } else if (!strcmp(op, "fault")) {
            CUmodule m;
            CUfunction f;
            MUST(cuModuleLoadData(&m, "alloc_probe image"));
            MUST(cuModuleGetFunction(&f, m, "fault"));
            rc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            CUresult sync = cuCtxSynchronize();
            size_t fr = 0, tot = 0;
            CUresult after = cuMemGetInfo_v2(&fr, &tot);
            printf("fault rc=%d sync=%d after=%d\n", rc, sync, after);
        } else if (!strcmp(op, "ctxreset")) {
            rc = cuDevicePrimaryCtxReset_v2(dev);
            CUresult r2 = rc ? rc : cuDevicePrimaryCtxRetain(&ctx, dev);
            if (!r2)
                r2 = cuCtxSetCurrent(ctx);
            nheld = 0;
            printf("ctxreset rc=%d retain=%d\n", rc, r2);
        } else if (!strcmp(op, "sleep")) {
            usleep((useconds_t)size_arg(a1) * 1000);
            i++;
        } else if (!strcmp(op, "await")) {
            printf("awaiting\n");
            int k = 0;
            while (access(a1, F_OK) != 0) {
                if (++k > 6000) {
                    fprintf(stderr, "alloc_probe: timed out after 60 s waiting for %s\n", a1);
                    return 3;
                }
                usleep(10000);
            }
            i++;
        } else if (!strcmp(op, "forge")) {
            printf("forged=%lld\n", forge_usage());
        } else if (!strcmp(op, "hold")) {
            printf("holding\n");
            for (;;)
                pause();
        } else {
            fprintf(stderr, "alloc_probe: unknown step '%s'\n", op);
            return 2;
        }
    }
    return 0;
}
