/* The soak's shared board: one file that the soak driver (tests/soak/soak.c) creates and maps,
 * and that every worker and job anchor (tests/soak/worker.c) maps MAP_SHARED to report to it.
 * Test code, not product.
 *
 * Workers write their own record only; the driver reads every record and writes only the
 * fields marked "driver". Records are never reused while their worker may be alive, so a
 * record index names one process for the whole run. */
#ifndef VGPU_SOAK_BOARD_H
#define VGPU_SOAK_BOARD_H

#include <stdatomic.h>
#include <stdint.h>

#define SOAK_MAGIC     0x314B414F53555047ULL /* "GPUSOAK1" */
#define SOAK_MAX_JOBS  16
#define SOAK_MAX_PROCS 4096

/* What `vgpu run` gave the job's command: a worker started with this environment is a
 * process of the job, exactly as one the command itself started would be. */
struct soak_job_env {
    _Atomic uint32_t ready;        /* the anchor wrote the fields below (release) */
    int32_t anchor_pid;
    char region[1024];             /* VGPU_REGION */
    char visible[256];             /* CUDA_VISIBLE_DEVICES */
    char preload[2048];            /* LD_PRELOAD */
};

enum soak_drop { SOAK_DROP_NONE = 0, SOAK_DROP_NO_SLOT = 1, SOAK_DROP_LESS = 2 };

struct soak_proc {
    _Atomic uint64_t hb_ns;        /* CLOCK_MONOTONIC of the last heartbeat; 0 = not started */
    _Atomic uint64_t ops;          /* allocations + frees + launches attempted */
    _Atomic uint64_t allocs, frees, launches, refused;
    _Atomic uint64_t held;         /* bytes its own allocations hold: raised after a successful
                                    * allocation, lowered before the free, so it never exceeds
                                    * what the job region charges to the process */
    _Atomic uint64_t start_ticks;  /* /proc/self/stat field 22 */
    _Atomic int32_t pid;           /* getpid() as the worker sees it (1 in a new PID namespace) */
    _Atomic uint32_t in_alloc;     /* inside cuMemAlloc/cuMemFree right now */
    _Atomic uint32_t in_burst;     /* in a burst of back-to-back allocations (a kill lands inside one) */
    _Atomic uint32_t drop_kind;    /* enum soak_drop: the worker found its usage dropped while alive */
    _Atomic uint32_t phase;        /* 0 starting, 1 has a context, 2 ending (SIGTERM) */
    _Atomic uint32_t pidns;        /* inode of its PID namespace: two workers that are each pid 1 of
                                    * their own, started in the same clock tick, differ only there */
    _Atomic uint64_t drop_held, drop_slot; /* what it held / what its slot said, at the first drop */
    _Atomic uint64_t selfchecks;
};

struct soak_board {
    uint64_t magic;
    uint32_t njobs, nprocs;
    struct soak_job_env job[SOAK_MAX_JOBS];
    struct soak_proc proc[SOAK_MAX_PROCS];
};

#endif
