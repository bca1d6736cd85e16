/* collective: a job that spans GPUs, for the multi-GPU tests (issue 26).
 *
 *   collective [-m ranks|rr] [-n N] [-p procs|threads] [-c US] [-k US] [-K N] [-t SEC] [-i ID] [-s N] [-j US] [-w US]
 *     -m ranks  (default) N ranks, rank r on device r, each running steps of one collective
 *               (the fake GPU's "collective_us": it waits, busy, for the other ranks' kernels
 *               of the same step, as an NCCL all-reduce does) and -K compute kernels, then a
 *               synchronize: a data-parallel training step
 *     -m rr     one thread drives N devices round robin: per step -K kernels on each device
 *               in turn, then a synchronize of each (one PyTorch process on several GPUs)
 *     -p procs|threads   ranks as N processes (default) or as N threads of one process
 *     -c US     the collective's own time once all ranks are there (default 2000)
 *     -k US     each compute kernel's time (default 1000)      -K N  compute kernels a step (default 8)
 *     -t SEC    run time (default 2)                          -i ID communicator id (default: pid)
 *     -s N      synchronize every N steps (default 1): the CPU runs up to N steps ahead
 *     -j US     each compute kernel (of a rank, or of rr) takes -k +- up to US (uniform, per
 *               kernel; default 0): real GPUs never finish two ranks' steps at exactly the same
 *               time, and a limiter that ends each GPU's turn on its own lets a turn close
 *               between two ranks' launches of one collective only then (lib/hook/gang.c); nor
 *               do one process's GPUs use their turns alike, so their turns drift apart
 *     -w US     rr: the first step launches on device 0, then waits US before it launches on the
 *               others (a library's first use of a device: on 2 x H200, PyTorch's first matmul
 *               on GPU 1 put its turns 14 ms behind GPU 0's for the whole run, and the thread,
 *               held on whichever GPU was between turns, kept 82 % of its rate at --core 90)
 *
 * Prints one line: "steps=... elapsed_s=... steps_per_s=... share0=... share1=... min_share=...
 * max_share=...": shareG = the kernel time of device G's completed steps (the collective's own
 * time and the compute kernels, not the waiting) over wall time, which on the serialized
 * simulated GPU is the job's useful share of that GPU. All ranks run the same number of steps:
 * a rank that stops early would leave the others' collectives waiting for ever, as in NCCL. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vgpu_cuda.h"

#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

#define MAX_RANKS 16

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "collective: %s failed: %d\n", #x, (int)r_); exit(1); } } while (0)

/* What the ranks share (anonymous shared memory, so processes and threads alike). */
struct shared {
    pthread_barrier_t start;
    _Atomic uint64_t stop_step;          /* every rank runs the steps below this (UINT64_MAX: not yet set) */
    double elapsed[MAX_RANKS];
    uint64_t steps[MAX_RANKS];
};

static struct shared *sh;
static unsigned nranks = 2, nkern = 8, sync_every = 1;
static unsigned long long coll_us = 2000, kern_us = 1000, jitter_us, late_us, comm_id;
static double secs = 2;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Called at each synchronize (done: the steps synchronized, a multiple of -s N). The first rank
 * past the run time decides the last step: every other rank is then at most one batch of N
 * steps ahead of it (a synchronize returns only once all ranks started the batch's
 * collectives), so all can stop after the next batch without leaving a collective half
 * started. */
static bool keep_going(uint64_t done, double t0)
{
    uint64_t stop = atomic_load(&sh->stop_step);
    if (stop == UINT64_MAX && now_s() - t0 >= secs) {
        uint64_t want = done + sync_every;
        atomic_compare_exchange_strong(&sh->stop_step, &stop, want);
        stop = atomic_load(&sh->stop_step);
    }
    return done < stop;
}

static void *rank_main(void *arg)
{
    unsigned rank = (unsigned)(uintptr_t)arg;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction coll, kern;
    CUstream s;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, (int)rank));
    CK(cuCtxCreate_v2(&ctx, 0, dev));
    CK(cuModuleLoadData(&mod, "collective image"));
    CK(cuModuleGetFunction(&coll, mod, "collective_us"));
    CK(cuModuleGetFunction(&kern, mod, "sleep_us"));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long n = nranks, seq = 0;
    void *cp[] = { &coll_us, &comm_id, &seq, &n };
    unsigned long long k_us = kern_us;
    void *kp[] = { &k_us };
    unsigned seed = (unsigned)getpid() * 2654435761u + rank;
    pthread_barrier_wait(&sh->start);
    double t0 = now_s();
    uint64_t done = 0;
    while (keep_going(done, t0)) {
        for (unsigned b = 0; b < sync_every; b++) {
            seq = done + b;
            CK(cuLaunchKernel(coll, 1, 1, 1, 32, 1, 1, 0, s, cp, NULL));
            for (unsigned i = 0; i < nkern; i++) {
                k_us = kern_us + (jitter_us ? (unsigned long long)(rand_r(&seed) % (2 * jitter_us + 1)) : 0) - jitter_us;
                CK(cuLaunchKernel(kern, 1, 1, 1, 32, 1, 1, 0, s, kp, NULL));
            }
        }
        CK(cuStreamSynchronize(s));
        done += sync_every;
    }
    sh->elapsed[rank] = now_s() - t0;
    sh->steps[rank] = done;
    CK(cuCtxDestroy_v2(ctx));
    return NULL;
}

static void round_robin(void)
{
    CUcontext ctx[MAX_RANKS];
    CUstream s[MAX_RANKS];
    CUfunction kern[MAX_RANKS];
    CK(cuInit(0));
    for (unsigned g = 0; g < nranks; g++) {
        CUdevice dev;
        CUmodule mod;
        CK(cuDeviceGet(&dev, (int)g));
        CK(cuCtxCreate_v2(&ctx[g], 0, dev));
        CK(cuModuleLoadData(&mod, "collective image"));
        CK(cuModuleGetFunction(&kern[g], mod, "sleep_us"));
        CK(cuStreamCreate(&s[g], CU_STREAM_NON_BLOCKING));
    }
    unsigned long long k_us = kern_us;
    void *kp[] = { &k_us };
    unsigned seed = (unsigned)getpid() * 2654435761u;
    double t0 = now_s();
    uint64_t done = 0;
    while (now_s() - t0 < secs) {
        for (unsigned g = 0; g < nranks; g++) {
            CK(cuCtxSetCurrent(ctx[g]));
            if (g == 1 && done == 0 && late_us) {
                struct timespec ts = { (time_t)(late_us / 1000000), (long)(late_us % 1000000) * 1000 };
                nanosleep(&ts, NULL);
            }
            for (unsigned i = 0; i < nkern; i++) {
                k_us = kern_us + (jitter_us ? (unsigned long long)(rand_r(&seed) % (2 * jitter_us + 1)) : 0) - jitter_us;
                CK(cuLaunchKernel(kern[g], 1, 1, 1, 32, 1, 1, 0, s[g], kp, NULL));
            }
        }
        for (unsigned g = 0; g < nranks; g++) {
            CK(cuCtxSetCurrent(ctx[g]));
            CK(cuStreamSynchronize(s[g]));
        }
        done++;
    }
    for (unsigned g = 0; g < nranks; g++) {
        sh->elapsed[g] = now_s() - t0;
        sh->steps[g] = done;
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: collective [-m ranks|rr] [-n N] [-p procs|threads] [-c US] [-k US] [-K N] [-t SEC] [-i ID] [-s N] [-j US] [-w US]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *mode = "ranks", *as = "procs";
    int opt;
    comm_id = (unsigned long long)getpid();
    while ((opt = getopt(argc, argv, "m:n:p:c:k:K:t:i:s:j:w:")) != -1) {
        switch (opt) {
        case 'm': mode = optarg; break;
        case 'n': nranks = (unsigned)atoi(optarg); break;
        case 'p': as = optarg; break;
        case 'c': coll_us = strtoull(optarg, NULL, 10); break;
        case 'k': kern_us = strtoull(optarg, NULL, 10); break;
        case 'K': nkern = (unsigned)atoi(optarg); break;
        case 't': secs = atof(optarg); break;
        case 'i': comm_id = strtoull(optarg, NULL, 10); break;
        case 's': sync_every = (unsigned)atoi(optarg); break;
        case 'j': jitter_us = strtoull(optarg, NULL, 10); break;
        case 'w': late_us = strtoull(optarg, NULL, 10); break;
        default: return usage();
        }
    }
    if (nranks < 1 || nranks > MAX_RANKS || secs <= 0 || sync_every < 1 || jitter_us >= kern_us || (strcmp(mode, "ranks") && strcmp(mode, "rr")) ||
        (strcmp(as, "procs") && strcmp(as, "threads"))) {
        fprintf(stderr, "collective: -n must be 1..%d, -t and -s positive, -j below -k, -m ranks|rr, -p procs|threads\n", MAX_RANKS);
        return usage();
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("collective: mmap");
        return 1;
    }
    atomic_store(&sh->stop_step, UINT64_MAX);
    bool rr = !strcmp(mode, "rr"), procs = !strcmp(as, "procs");
    if (rr) {
        round_robin();
    } else {
        pthread_barrierattr_t ba;
        pthread_barrierattr_init(&ba);
        pthread_barrierattr_setpshared(&ba, procs ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE);
        pthread_barrier_init(&sh->start, &ba, nranks);
        if (procs) {
            pid_t pids[MAX_RANKS];
            for (unsigned r = 0; r < nranks; r++) {
                pids[r] = fork();
                if (pids[r] < 0) {
                    perror("collective: fork");
                    return 1;
                }
                if (pids[r] == 0) {
                    rank_main((void *)(uintptr_t)r);
                    exit(0);   /* (not _exit: the limiter's lease trace is written at exit) */
                }
            }
            int failed = 0;
            for (unsigned r = 0; r < nranks; r++) {
                int st;
                if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    failed = 1;
            }
            if (failed) {
                fprintf(stderr, "collective: a rank failed\n");
                return 1;
            }
        } else {
            pthread_t th[MAX_RANKS];
            for (unsigned r = 0; r < nranks; r++)
                if (pthread_create(&th[r], NULL, rank_main, (void *)(uintptr_t)r) != 0) {
                    fprintf(stderr, "collective: cannot start a thread\n");
                    return 1;
                }
            for (unsigned r = 0; r < nranks; r++)
                pthread_join(th[r], NULL);
        }
    }
    double el = 0, mn = 1e9, mx = 0;
    uint64_t steps = sh->steps[0];
    for (unsigned r = 0; r < nranks; r++)
        if (sh->elapsed[r] > el)
            el = sh->elapsed[r];
    if (el <= 0)
        return 1;
    double step_us = (double)(rr ? 0 : coll_us) + (double)nkern * (double)kern_us;
    printf("mode=%s ranks=%u steps=%llu elapsed_s=%.3f steps_per_s=%.2f", mode, nranks, (unsigned long long)steps,
           el, (double)steps / el);
    for (unsigned r = 0; r < nranks; r++) {
        double share = (double)sh->steps[r] * step_us / 1e6 / sh->elapsed[r];
        printf(" share%u=%.3f", r, share);
        mn = share < mn ? share : mn;
        mx = share > mx ? share : mx;
    }
    printf(" min_share=%.3f max_share=%.3f\n", mn, mx);
    return 0;
}
