/* hami.c: HAMi-core's environment variables, so that the Kubernetes device plugins, DRA drivers
 * and schedulers that inject them can preload libvgpu.so unchanged (DESIGN.md decision 5).
 *
 *   CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT_<i>   a size (lib/core/base/units.c grammar:
 *        decimal, optional fraction, suffix B/K/M/G/T, KB..TB, KiB..TiB, Ki..Ti, any case, all
 *        binary; HAMi's device plugin writes "<MiB>m"); "0" means no limit, as in HAMi.
 *   CUDA_DEVICE_MEMORY_REQUEST, CUDA_DEVICE_MEMORY_REQUEST_<i>  vgpu's own (HAMi has none): the
 *        REQUEST of --mem REQUEST:LIMIT, a size as above, at most that device's LIMIT (then
 *        CUDA_DEVICE_MEMORY_LIMIT is the LIMIT); unset or equal to the LIMIT: nothing is lent.
 *        A REQUEST without a LIMIT, above it, or with CUDA_OVERSUBSCRIBE=true is an error.
 *   CUDA_DEVICE_SM_LIMIT, CUDA_DEVICE_SM_LIMIT_<i>           a percent 0..100; 0 and 100 mean none.
 *   CUDA_DEVICE_MEMORY_SHARED_CACHE                          the region file: one file = one job.
 *   CUDA_OVERSUBSCRIBE                                       "true": the memory limits are virtual
 *        (HAMi's deviceMemoryScaling > 1), as vgpu run --oversubscribe: allocations that the GPU
 *        has no room for are served from managed memory (spill.c) up to the limit; "false" or
 *        unset: not. Anything else is an error. The device share is what the GPU has free at
 *        each allocation (HAMi does not say how much of the scaled limit is physical).
 *
 * HAMi-core's parser turns "1Gi" into 1 byte, "0x40000000" into 1 GiB and "010g" into 8 GiB
 * (interception.md pitfall 14). We reject every value that is not in our grammar, loudly, and
 * then run WITHOUT limits (never a silently different limit). The file is vgpu's region format,
 * not HAMi-core's: HAMi's node monitor cannot read it. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hami.h"
#include "hook.h"
#include "vgpu/exitcode.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

struct hami_limits {
    uint64_t mem[VGPU_REGION_MAX_DEVICES];
    uint64_t req[VGPU_REGION_MAX_DEVICES];   /* 0: all of mem (nothing lent) */
    unsigned sm[VGPU_REGION_MAX_DEVICES];
    bool oversub;
};

/* A variable's value, NULL when unset or empty (HAMi treats empty as unset). */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool parse(struct hami_limits *l, bool *any)
{
    bool ok = true;
    uint64_t mem_all = 0, req_all = 0;
    unsigned sm_all = 0;
    struct vgpu_err e = { 0 };
    const char *v;
    if ((v = env("CUDA_DEVICE_MEMORY_LIMIT"))) {
        *any = true;
        if (vgpu_parse_size(v, &mem_all, "CUDA_DEVICE_MEMORY_LIMIT", &e) != 0) {
            vgpu_error("%s", e.msg);
            ok = false;
        }
    }
    if ((v = env("CUDA_DEVICE_MEMORY_REQUEST"))) {
        *any = true;
        if (vgpu_parse_size(v, &req_all, "CUDA_DEVICE_MEMORY_REQUEST", &e) != 0) {
            vgpu_error("%s", e.msg);
            ok = false;
        }
    }
    if ((v = env("CUDA_DEVICE_SM_LIMIT"))) {
        *any = true;
        if (vgpu_parse_percent(v, &sm_all, "CUDA_DEVICE_SM_LIMIT", &e) != 0) {
            vgpu_error("%s", e.msg);
            ok = false;
        }
    }
    for (int i = 0; i < VGPU_REGION_MAX_DEVICES; i++) {
        char name[48];
        l->mem[i] = mem_all;
        l->req[i] = req_all;
        l->sm[i] = sm_all;
        snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
        if ((v = env(name))) {
            *any = true;
            if (vgpu_parse_size(v, &l->mem[i], name, &e) != 0) {
                vgpu_error("%s", e.msg);
                ok = false;
            }
        }
        snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_REQUEST_%d", i);
        if ((v = env(name))) {
            *any = true;
            if (vgpu_parse_size(v, &l->req[i], name, &e) != 0) {
                vgpu_error("%s", e.msg);
                ok = false;
            }
        }
        snprintf(name, sizeof name, "CUDA_DEVICE_SM_LIMIT_%d", i);
        if ((v = env(name))) {
            *any = true;
            if (vgpu_parse_percent(v, &l->sm[i], name, &e) != 0) {
                vgpu_error("%s", e.msg);
                ok = false;
            }
        }
        if (l->sm[i] >= 100)
            l->sm[i] = 0;
        if (l->req[i] && (!l->mem[i] || l->req[i] > l->mem[i])) {
            char a[32], b[32];
            if (l->mem[i])
                vgpu_error("CUDA_DEVICE_MEMORY_REQUEST (%s) on device %d is more than its CUDA_DEVICE_MEMORY_LIMIT "
                           "(%s): the REQUEST is at most the LIMIT", vgpu_format_size(l->req[i], a, sizeof a), i,
                           vgpu_format_size(l->mem[i], b, sizeof b));
            else
                vgpu_error("CUDA_DEVICE_MEMORY_REQUEST (%s) on device %d has no CUDA_DEVICE_MEMORY_LIMIT: set the "
                           "LIMIT (the cap) too", vgpu_format_size(l->req[i], a, sizeof a), i);
            ok = false;
            break;
        }
        if (l->req[i] == l->mem[i])
            l->req[i] = 0;
    }
    if (env("CUDA_DEVICE_MEMORY_SHARED_CACHE"))
        *any = true;
    l->oversub = false;
    if ((v = env("CUDA_OVERSUBSCRIBE"))) {
        if (!strcmp(v, "true")) {
            l->oversub = true;
        } else if (strcmp(v, "false")) {
            vgpu_error("CUDA_OVERSUBSCRIBE='%s': write true or false", v);
            ok = false;
        }
    }
    for (int i = 0; l->oversub && i < VGPU_REGION_MAX_DEVICES; i++)
        if (l->req[i]) {
            vgpu_error("CUDA_DEVICE_MEMORY_REQUEST and CUDA_OVERSUBSCRIBE=true both let the job past what stays on "
                       "the GPU: set one of them");
            ok = false;
            break;
        }
    return ok;
}

/* A new region file at `path`, published with link() so that concurrent first processes agree
 * on one file (the loser opens the winner's). Explicit modes; the umask is never touched. */
static int create_at(const char *path, const struct hami_limits *l, struct vgpu_err *e)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.creating", path, (int)getpid());
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t size = VGPU_REGION_SIZE;
    struct vgpu_region_header *h = MAP_FAILED;
    /* posix_fallocate: every block now, so that a full file system is an error here rather than
     * SIGBUS in whichever process first writes an unallocated page of the mapping. */
    if (fchmod(fd, 0600) == 0 && ftruncate(fd, (off_t)size) == 0 && (errno = posix_fallocate(fd, 0, (off_t)size)) == 0)
        h = mmap(NULL, VGPU_REGION_LIMITS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    h->version = VGPU_REGION_VERSION;
    h->limits_size = VGPU_REGION_LIMITS_SIZE;
    h->total_size = size;
    h->max_devices = VGPU_REGION_MAX_DEVICES;
    h->max_slots = VGPU_REGION_MAX_SLOTS;
    /* A stable id from the path, so every process names the job the same way. */
    uint64_t x = 1469598103934665603ull;
    for (const char *p = path; *p; p++)
        x = (x ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(h->id, sizeof h->id, "%012llx", (unsigned long long)(x & 0xffffffffffffull));
    snprintf(h->name, sizeof h->name, "hami");
    h->owner_uid = (uint32_t)geteuid();
    h->creator_pid = (int32_t)getpid();
    h->creator_start = vgpu_proc_start_time(getpid());
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_realtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    snprintf(h->cmdline, sizeof h->cmdline, "(HAMi-core variables, %.400s)", path);
    h->device_count = VGPU_REGION_MAX_DEVICES;
    for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
        atomic_store(&h->dev[d].mem_limit, l->mem[d]);
        atomic_store(&h->dev[d].core_limit, l->sm[d]);
        if (l->oversub && l->mem[d]) {
            /* No fixed share: spill when the GPU itself is full (mem.c, the driver's OOM). */
            atomic_store(&h->dev[d].mem_device, UINT64_MAX);
            atomic_store(&h->dev[d].flags, VGPU_DEV_OVERSUB);
        }
        atomic_store(&h->mem_request[d], l->req[d]);
    }
    atomic_store(&h->state, VGPU_JOB_RUNNING);
    atomic_store_explicit(&h->magic, VGPU_REGION_MAGIC, memory_order_release);
    munmap(h, VGPU_REGION_LIMITS_SIZE);
    close(fd);
    int rc = link(tmp, path);
    int err = errno;
    unlink(tmp);
    if (rc != 0 && err != EEXIST) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot create %s: %s", path, strerror(err));
        return -1;
    }
    return 0;
}

int vgpu_hami_open(struct vgpu_region *r)
{
    struct hami_limits l;
    bool any = false;
    bool ok = parse(&l, &any);
    if (!any)
        return 0;
    if (!ok) {
        vgpu_error("the HAMi-core variables above are invalid: this process runs WITHOUT GPU memory or "
                   "compute limits. Fix the values (e.g. CUDA_DEVICE_MEMORY_LIMIT=4096m or 4G); see libvgpu(7).");
        return -1;
    }
    char path[4096];
    struct vgpu_err e = { 0 };
    const char *cache = env("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    if (cache) {
        snprintf(path, sizeof path, "%s", cache);
    } else {
        char dir[4000];
        if (vgpu_statedir(dir, sizeof dir, true, &e) != 0) {
            vgpu_error("HAMi-core variables: %s; this process runs WITHOUT GPU limits. "
                       "Set CUDA_DEVICE_MEMORY_SHARED_CACHE to a file path.", e.msg);
            return -1;
        }
        snprintf(path, sizeof path, "%s/jobs/hami-%u.region", dir, (unsigned)geteuid());
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (vgpu_region_open(r, path, VGPU_REGION_JOB, &e) == 0)
            break;
        if (e.code != VGPU_EXIT_NOT_FOUND || attempt == 1 || create_at(path, &l, &e) != 0) {
            vgpu_error("HAMi-core variables: cannot use the shared cache %s: %s; this process runs WITHOUT "
                       "GPU limits.", path, e.msg);
            return -1;
        }
    }
    /* The file's limits are authoritative (changed live by `vgpu limit`); say so when ours differ. */
    for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES && d < vgpu_region_device_count(r); d++)
        if (vgpu_region_mem_limit(r, d) != l.mem[d]) {
            char a[32], b[32];
            vgpu_error("HAMi-core variables ask for a %s memory limit on device %u, but the shared cache %s "
                      "says %s; using the shared cache's (change it with `vgpu limit`)",
                      l.mem[d] ? vgpu_format_size(l.mem[d], a, sizeof a) : "no",
                      d, path, vgpu_region_mem_limit(r, d) ? vgpu_format_size(vgpu_region_mem_limit(r, d), b, sizeof b) : "no");
            break;
        }
    return 1;
}
