/* soak_worker: one process of the soak (tests/soak/soak.c), on the simulated GPU under
 * libvgpu.so. Test code, not product.
 *
 *   soak_worker BOARD anchor JOB          the job's command under `vgpu run`: writes the job's
 *                                         environment into the board, then waits for SIGTERM
 *   soak_worker BOARD alloc  IDX SEED MAXMIB   allocates and frees pieces of 1..MAXMIB MiB at
 *                                         random every 1-7 ms, with short bursts of back-to-back
 *                                         1 MiB allocations and frees (a SIGKILL then lands
 *                                         inside an allocation call)
 *   soak_worker BOARD launch IDX SEED US  launches US-microsecond kernels back to back (each
 *                                         synchronized) and allocates/frees 1 MiB every 50 ms
 *
 * Every worker beats its heartbeat (board record IDX) after every operation, counts what it
 * did, and checks every 50 ms that the job region still charges it at least what it holds
 * (a live process's usage must never be dropped, DESIGN.md decision 4): it finds its own
 * slot by pid and start time, reading the region read-only. On SIGTERM it frees everything,
 * destroys its context and exits 0 (libvgpu.so then gives its slot and schedule entry back).
 * Exit status 2: setup failed; 3: an allocation, free or launch failed other than with
 * OUT_OF_MEMORY; 4: loading the (empty) module was refused with OUT_OF_MEMORY. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../progs/driver.h"
#include "board.h"
#include "vgpu/region.h"

#define MIB (1024ULL * 1024ULL)
#define MAX_HELD 256

static volatile sig_atomic_t stop;
static struct soak_board *board;
static struct soak_proc *me;
static const struct vgpu_region_usage *usage;    /* the job region's usage part, read-only */
static uint64_t rng;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? rng % n : 0;
}

static void nap_us(uint64_t us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static void beat(void)
{
    atomic_store(&me->hb_ns, now_ns());
}

static struct soak_board *map_board(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "soak_worker: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    struct soak_board *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED || b->magic != SOAK_MAGIC) {
        fprintf(stderr, "soak_worker: %s is not a soak board\n", path);
        exit(2);
    }
    return b;
}

static void copy_env(char *dst, size_t len, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, len, "%s", v ? v : "");
}

static int anchor(unsigned job)
{
    if (job >= SOAK_MAX_JOBS)
        return 2;
    struct soak_job_env *j = &board->job[job];
    copy_env(j->region, sizeof j->region, "VGPU_REGION");
    copy_env(j->visible, sizeof j->visible, "CUDA_VISIBLE_DEVICES");
    copy_env(j->preload, sizeof j->preload, "LD_PRELOAD");
    j->anchor_pid = getpid();
    atomic_store_explicit(&j->ready, 1, memory_order_release);
    while (!stop)
        pause();
    return 0;
}

/* The inode of our PID namespace ("pid:[N]"), as the job region records it; 0 when unreadable. */
static uint32_t own_pidns(void)
{
    char buf[64];
    ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *b = strchr(buf, '[');
    return b ? (uint32_t)strtoul(b + 1, NULL, 10) : 0;
}

static uint64_t own_start_ticks(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    /* Field 3 (state) follows ") "; start time is field 22. */
    p += 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

static void map_region(void)
{
    const char *path = getenv("VGPU_REGION");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED)
        usage = (const void *)((const char *)m + VGPU_REGION_LIMITS_SIZE);
}

/* The job region must still charge this live process at least what it holds. */
static void selfcheck(void)
{
    uint64_t held = atomic_load(&me->held);
    if (!usage || atomic_load(&me->drop_kind) != SOAK_DROP_NONE || atomic_load(&me->phase) < 1)
        return;
    atomic_fetch_add(&me->selfchecks, 1);
    uint64_t start = atomic_load(&me->start_ticks);
    uint32_t ns = atomic_load(&me->pidns);
    pid_t pid = getpid();
    for (unsigned i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *s = &usage->slot[i];
        uint64_t o = atomic_load(&s->owner);
        uint32_t sns = atomic_load(&s->pidns);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE || vgpu_slot_pid_of(o) != pid ||
            atomic_load(&s->start_time) != start || (ns && sns && sns != ns))
            continue;
        uint64_t used = atomic_load(&s->used[0]);
        if (used >= held)
            return;
        atomic_store(&me->drop_held, held);
        atomic_store(&me->drop_slot, used);
        atomic_store(&me->drop_kind, SOAK_DROP_LESS);
        return;
    }
    atomic_store(&me->drop_held, held);
    atomic_store(&me->drop_slot, 0);
    atomic_store(&me->drop_kind, SOAK_DROP_NO_SLOT);
}

struct piece {
    CUdeviceptr ptr;
    uint64_t size;
};
static struct piece held[MAX_HELD];
static unsigned nheld;

static bool alloc_one(uint64_t size)
{
    if (nheld >= MAX_HELD)
        return false;
    CUdeviceptr p = 0;
    atomic_store(&me->in_alloc, 1);
    CUresult rc = cuMemAlloc_v2(&p, size);
    atomic_store(&me->in_alloc, 0);
    atomic_fetch_add(&me->ops, 1);
    if (rc != CUDA_SUCCESS) {
        atomic_fetch_add(&me->refused, 1);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY) {
            fprintf(stderr, "soak_worker: cuMemAlloc_v2(%llu) returned %d, not OUT_OF_MEMORY\n",
                    (unsigned long long)size, (int)rc);
            exit(3);
        }
        return false;
    }
    held[nheld].ptr = p;
    held[nheld].size = size;
    nheld++;
    atomic_fetch_add(&me->held, size);
    atomic_fetch_add(&me->allocs, 1);
    return true;
}

static void free_at(unsigned i)
{
    struct piece pc = held[i];
    held[i] = held[--nheld];
    atomic_fetch_sub(&me->held, pc.size);
    atomic_store(&me->in_alloc, 1);
    CUresult rc = cuMemFree_v2(pc.ptr);
    atomic_store(&me->in_alloc, 0);
    atomic_fetch_add(&me->ops, 1);
    atomic_fetch_add(&me->frees, 1);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "soak_worker: cuMemFree_v2 returned %d\n", (int)rc);
        exit(3);
    }
}

static void free_all(void)
{
    while (nheld)
        free_at(nheld - 1);
}

static void alloc_loop(uint64_t max_mib)
{
    uint64_t next_check = 0;
    while (!stop) {
        uint64_t now = now_ns();
        if (now >= next_check) {
            selfcheck();
            next_check = now + 50000000ULL;
        }
        unsigned dice = (unsigned)rnd(100);
        if (dice < 2) {
            /* A burst: 1 MiB allocations and frees back to back for 2-5 ms (the chaos loop aims
             * some of its kills at workers in a burst). */
            uint64_t until = now_ns() + (2 + rnd(4)) * 1000000ULL;
            atomic_store(&me->in_burst, 1);
            while (!stop && now_ns() < until) {
                if (alloc_one(MIB))
                    free_at(nheld - 1);
                beat();
            }
            atomic_store(&me->in_burst, 0);
        } else if (dice < 55 || nheld == 0) {
            if (!alloc_one((1 + rnd(max_mib)) * MIB) && nheld)
                free_at((unsigned)rnd(nheld));      /* refused: make room */
        } else {
            free_at((unsigned)rnd(nheld));
        }
        beat();
        nap_us(1000 + rnd(6000));
    }
}

static void launch_loop(unsigned long long us)
{
    CUmodule mod;
    CUfunction fn;
    CUstream st;
    CUresult lrc = cuModuleLoadData(&mod, "soak image");
    if (lrc == CUDA_ERROR_OUT_OF_MEMORY) {
        /* The fake charges nothing for a module: a refusal is libvgpu.so's. */
        fprintf(stderr, "soak_worker: cuModuleLoadData refused with OUT_OF_MEMORY\n");
        exit(4);
    }
    MUST(lrc);
    MUST(cuModuleGetFunction(&fn, mod, "sleep_us"));
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    void *params[] = { &us };
    uint64_t next_alloc = 0, next_check = 0;
    while (!stop) {
        CUresult rc = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, st, params, NULL);
        if (rc == CUDA_SUCCESS)
            rc = cuStreamSynchronize(st);
        if (rc != CUDA_SUCCESS) {
            fprintf(stderr, "soak_worker: launch returned %d\n", (int)rc);
            exit(3);
        }
        atomic_fetch_add(&me->ops, 1);
        atomic_fetch_add(&me->launches, 1);
        beat();
        uint64_t now = now_ns();
        if (now >= next_alloc) {
            /* A process that launches also allocates now and then (and runs the job's reaper). */
            if (alloc_one(MIB))
                free_at(nheld - 1);
            next_alloc = now + 50000000ULL;
        }
        if (now >= next_check) {
            selfcheck();
            next_check = now + 50000000ULL;
        }
    }
    cuStreamDestroy_v2(st);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: soak_worker BOARD anchor JOB | BOARD alloc IDX SEED MAXMIB | BOARD launch IDX SEED US\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    board = map_board(argv[1]);
    const char *role = argv[2];
    unsigned idx = (unsigned)strtoul(argv[3], NULL, 10);
    if (!strcmp(role, "anchor"))
        return anchor(idx);
    if (argc != 6 || idx >= SOAK_MAX_PROCS) {
        fprintf(stderr, "soak_worker: bad arguments\n");
        return 2;
    }
    me = &board->proc[idx];
    rng = strtoull(argv[4], NULL, 10) | 1;
    uint64_t arg = strtoull(argv[5], NULL, 10);
    atomic_store(&me->pid, getpid());
    atomic_store(&me->start_ticks, own_start_ticks());
    atomic_store(&me->pidns, own_pidns());
    beat();
    map_region();

    CUdevice dev;
    CUcontext ctx;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    CUresult rc = cuCtxCreate_v2(&ctx, 0, dev);
    while (rc == CUDA_ERROR_OUT_OF_MEMORY && !stop) {
        /* The job is full (its limit may just have been lowered): try again later. */
        atomic_fetch_add(&me->refused, 1);
        beat();
        nap_us(20000);
        rc = cuCtxCreate_v2(&ctx, 0, dev);
    }
    if (stop)
        return 0;
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "soak_worker: cuCtxCreate_v2 returned %d\n", (int)rc);
        return 2;
    }
    atomic_store(&me->phase, 1);
    beat();
    if (!strcmp(role, "alloc"))
        alloc_loop(arg ? arg : 1);
    else if (!strcmp(role, "launch"))
        launch_loop(arg ? arg : 1000);
    else {
        fprintf(stderr, "soak_worker: unknown role '%s'\n", role);
        return 2;
    }
    atomic_store(&me->phase, 2);
    selfcheck();
    free_all();
    cuCtxDestroy_v2(ctx);
    beat();
    return 0;
}
