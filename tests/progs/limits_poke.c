/* limits_poke: a hostile program of the job's own user, for tests/cli/region_ro.sh. Under
 * libvgpu.so it finds the library's mapping of the job's limits page ($VGPU_REGION at offset 0
 * in /proc/self/maps), tries to make it writable with mprotect, and when that works writes a
 * 1 TiB memory limit into it; then it allocates SIZE (argv[1]) and prints one line per step:
 *     mapped=0|1 mprotect=OK|<errno name> poked=0|1 alloc rc=N
 * Test code, not product. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver.h"
#include "vgpu/region.h"

/* The start of the mapping of `path` at file offset 0, or NULL. */
static void *find_limits(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[8192];
    void *found = NULL;
    while (f && !found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perms[8];
        int pos = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s%n", &lo, &hi, perms, &off, &pos) < 4)
            continue;
        char *name = line + pos;
        while (*name == ' ')
            name++;
        name[strcspn(name, "\n")] = 0;
        if (off == 0 && strcmp(name, path) == 0)
            found = (void *)lo;
    }
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsigned long long size = argc > 1 ? strtoull(argv[1], NULL, 10) << 20 : 2048ULL << 20;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    /* One small allocation: the library has opened and mapped the region by now. */
    MUST(cuMemAlloc_v2(&p, 1 << 20));
    const char *path = getenv("VGPU_REGION");
    struct vgpu_region_header *h = path ? find_limits(path) : NULL;
    printf("mapped=%d", h != NULL);
    int poked = 0;
    if (h) {
        if (mprotect(h, VGPU_REGION_LIMITS_SIZE, PROT_READ | PROT_WRITE) == 0) {
            printf(" mprotect=OK");
            atomic_store(&h->dev[0].mem_limit, 1ULL << 40);
            poked = 1;
        } else {
            printf(" mprotect=%s", errno == EACCES ? "EACCES" : strerror(errno));
        }
    }
    CUdeviceptr big = 0;
    CUresult rc = cuMemAlloc_v2(&big, size);
    printf(" poked=%d alloc rc=%d\n", poked, (int)rc);
    return 0;
}
