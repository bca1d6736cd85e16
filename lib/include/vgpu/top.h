/* The model behind `vgpu top`: what the sampler thread gathers (GPUs, MIG devices, jobs,
 * processes) and the pure functions drawn from it: formatting, sorting, filtering, layout and
 * the JSON form. No NVML, no curses, no threads here, so all of it is unit-tested
 * (tests/unit/test_top.c). The sampler lives in cmd/top/sampler.c, the screen in cmd/top/ui.c.
 *
 * "Not available" is kept apart from 0 with validity bits (nvtop's lesson): every optional
 * number of a GPU has a TOP_GV_* bit, every optional number of a process a TOP_PV_* bit. */
#ifndef VGPU_TOP_H
#define VGPU_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TOP_MAX_GPUS 64     /* physical GPUs + MIG devices (as vgpu/gpu.h) */
#define TOP_HIST 120        /* history samples kept per GPU (2 minutes at 1 s) */
#define TOP_MAX_JOBS 256
#define TOP_JOB_DEVS 16     /* GPUs of one job (as VGPU_REGION_MAX_DEVICES) */

/* Why GPU data may be missing: the banner tells these apart (reference/monitor.md §6). */
enum top_nvml_status {
    TOP_NVML_OK = 0,
    TOP_NVML_NO_LIBRARY,    /* libnvidia-ml.so.1 cannot be loaded */
    TOP_NVML_NO_DRIVER,     /* the kernel driver is not loaded (or versions differ) */
    TOP_NVML_NO_GPU,        /* the driver found no GPU */
    TOP_NVML_ERROR,         /* any other failure (permission, init error) */
};
const char *top_nvml_status_name(enum top_nvml_status s);   /* "ok", "no_library", ... */

enum top_gpu_valid {
    TOP_GV_UTIL = 1u << 0, TOP_GV_MEMUTIL = 1u << 1, TOP_GV_MEM = 1u << 2, TOP_GV_TEMP = 1u << 3,
    TOP_GV_POWER = 1u << 4, TOP_GV_PLIMIT = 1u << 5, TOP_GV_SMCLK = 1u << 6, TOP_GV_MEMCLK = 1u << 7,
    TOP_GV_FAN = 1u << 8, TOP_GV_PCIE = 1u << 9, TOP_GV_ENC = 1u << 10, TOP_GV_DEC = 1u << 11,
    TOP_GV_MIG = 1u << 12,
};

struct top_gpu {
    unsigned index;             /* NVML index (of the parent for a MIG device) */
    bool is_mig;
    unsigned gi, ci;            /* MIG GPU / compute instance ids */
    char uuid[96];
    char name[96];
    char profile[32];           /* MIG profile ("1g.10gb"), "" for a physical GPU */
    char pci_bus_id[32];
    unsigned valid;             /* TOP_GV_* */
    bool lost;                  /* the GPU stopped answering (GPU_IS_LOST) */
    unsigned util_pct, mem_util_pct;
    uint64_t mem_used, mem_total;           /* bytes */
    unsigned temp_c;
    unsigned power_mw, power_limit_mw;
    unsigned sm_clock_mhz, mem_clock_mhz;
    unsigned fan_pct;
    unsigned pcie_gen, pcie_width;
    unsigned enc_pct, dec_pct;
    unsigned mig_current, mig_pending;
    /* history, oldest first; 255 = no sample */
    unsigned hist_len;
    uint8_t hist_util[TOP_HIST], hist_mem[TOP_HIST];
};

struct top_job {
    char id[64];                /* the job's id (region file name) */
    char name[64];
    uid_t uid;
    char owner[32];
    char gpus[96];              /* the job's GPUs as text ("0,1" or "all") */
    uint64_t mem_used, mem_limit;           /* limiter-accounted; limit 0 = none */
    bool mem_nvml_valid;
    uint64_t mem_nvml;          /* Σ NVML usedGpuMemory of its processes (includes contexts) */
    unsigned core_limit_pct;    /* 0 = none */
    bool share_valid;
    double share_pct;           /* measured GPU-time share (limiter), or Σ SM %: the mean over its GPUs */
    unsigned share_ndev;        /* per GPU (the limiter's measure only; 0: not measured per GPU) */
    double share_dev_pct[TOP_JOB_DEVS];
    uint64_t throttled_ns;
    int priority;
    unsigned nproc;
    bool soft;                  /* core limit is soft */
    uint64_t mem_outside;       /* NVML memory of its processes outside the limiter (no LD_PRELOAD) */
    unsigned outside_count;     /* how many such processes */
    pid_t outside_pid;          /* one of them */
    bool oversub;               /* vgpu run --oversubscribe on some GPU of the job */
    uint64_t mem_off_device;    /* of mem_used: spilled to pageable memory off the device */
    uint64_t mem_device_limit;  /* Σ device shares of its oversubscribed GPUs */
    /* Lent memory (--mem REQUEST:LIMIT): Σ REQUESTs (a GPU that lends nothing counts its limit),
     * and Σ use past them; lending: some GPU of the job has REQUEST < LIMIT. */
    bool lending;
    uint64_t mem_request;
    uint64_t mem_borrowed;
    uint64_t mem_demoted;       /* of mem_borrowed: demoted to host memory for another job (the squeeze) */
    /* Per GPU of the job (for the rate of migration): its model GPU (index into model.gpus,
     * -1 when not shown), whether it is oversubscribed there, and how much is off the device. */
    unsigned ndev;
    int dev_gpu[TOP_JOB_DEVS];
    bool dev_oversub[TOP_JOB_DEVS];
    uint64_t dev_off[TOP_JOB_DEVS];
    bool migration_valid;       /* migration_bps is known (cmd/top/migration.c) */
    double migration_bps;       /* its share of its GPUs' PCIe traffic, bytes/s (vgpu/migration.h) */
};

enum top_proc_valid { TOP_PV_MEM = 1u << 0, TOP_PV_SM = 1u << 1, TOP_PV_CPU = 1u << 2 };

struct top_proc {
    pid_t pid;
    unsigned long long start;   /* start time in clock ticks (/proc/pid/stat 22): re-checked before kill */
    uid_t uid;
    char user[32];
    int job;                    /* index into model.jobs, -1 when not in a vgpu job */
    int gpu;                    /* index into model.gpus, -1 when unknown */
    unsigned valid;             /* TOP_PV_* */
    uint64_t gpu_mem;
    unsigned sm_pct;
    double cpu_pct;
    char cmd[160];
    bool outside;               /* descends from job `job` but runs without the limiter */
};

struct top_model {
    uint64_t seq;               /* increases with each sample */
    int64_t time_ms;            /* wall clock of the sample (Unix ms) */
    enum top_nvml_status nvml;
    char nvml_msg[512];         /* why GPU data is missing (empty when ok) */
    char driver_version[80];
    char cuda_version[16];
    char jobs_msg[512];         /* why jobs could not be read (empty when ok) */
    int jobs_code;              /* its exit status (vgpu(1)), as vgpu ps would exit; 0 when ok */
    unsigned ngpu;
    struct top_gpu gpus[TOP_MAX_GPUS];
    unsigned njob;
    struct top_job jobs[TOP_MAX_JOBS];
    size_t nproc, proc_cap;
    struct top_proc *procs;
};

struct top_model *top_model_new(void);
void top_model_free(struct top_model *m);
/* Adds a process (grows the array); NULL when out of memory. */
struct top_proc *top_model_add_proc(struct top_model *m);
/* The processes procs[first..last) sorted by pid, for lookups by pid in O(log n) (a pid may be
 * listed once per GPU: top_pid_find gives the first, the equal ones follow). The sampler joins
 * NVML's processes with jobs and utilization samples this way: scans made those joins grow with
 * the square of the processes. *out is malloc'd (NULL and 0 when empty or out of memory). */
struct top_pid_ix { pid_t pid; size_t at; };
size_t top_pid_index(const struct top_model *m, size_t first, size_t last, struct top_pid_ix **out);
const struct top_pid_ix *top_pid_find(const struct top_pid_ix *ix, size_t n, pid_t pid);
/* Appends one history sample (255 = none) to a GPU, dropping the oldest when full. */
void top_gpu_hist_push(struct top_gpu *g, unsigned util, unsigned mem);

/* ---- formatting (every function writes "N/A" for an invalid value and returns buf) ---- */
char *top_fmt_pct(char *buf, size_t len, bool valid, unsigned pct);             /* "42%" */
char *top_fmt_mib(char *buf, size_t len, bool valid, uint64_t bytes);           /* "1234MiB" */
char *top_fmt_size(char *buf, size_t len, bool valid, uint64_t bytes);          /* "1.5G", "512M" */
char *top_fmt_watts(char *buf, size_t len, bool valid, unsigned mw);            /* "250W" */
char *top_fmt_mem_limit(char *buf, size_t len, uint64_t used, uint64_t limit);  /* "1.5G/4G", "1.5G/-" */
/* A bar of `width` cells: '|' for the filled part, ' ' else; filled = frac of width (clamped).
 * Returns buf (width+1 bytes needed). */
char *top_fmt_bar(char *buf, size_t len, unsigned width, double frac);
/* One sparkline cell per sample (ASCII: " .:-=+*#%@"), the newest on the right. */
char *top_fmt_spark(char *buf, size_t len, const uint8_t *hist, unsigned n, unsigned width);
/* Replaces control characters and non-printable bytes with '?', in place. */
void top_sanitize(char *s);

/* ---- sorting and filtering ---- */
enum top_proc_key {
    TOP_PK_PID, TOP_PK_USER, TOP_PK_JOB, TOP_PK_GPU, TOP_PK_MEM, TOP_PK_SM, TOP_PK_CPU, TOP_PK_CMD,
    TOP_PK_COUNT
};
enum top_job_key {
    TOP_JK_NAME, TOP_JK_OWNER, TOP_JK_MEM, TOP_JK_MEMLIM, TOP_JK_SHARE, TOP_JK_CORE, TOP_JK_THROTTLE,
    TOP_JK_PRIO, TOP_JK_NPROC, TOP_JK_COUNT
};
const char *top_proc_key_name(enum top_proc_key k);   /* "PID", "USER", ... (column titles) */
const char *top_job_key_name(enum top_job_key k);
/* Three-way comparators, total orders (N/A sorts below every value; ties broken by pid / id),
 * so qsort gives one answer whatever the input order. desc reverses the key, never the tie-break. */
int top_proc_cmp(const struct top_model *m, const struct top_proc *a, const struct top_proc *b,
                 enum top_proc_key k, bool desc);
int top_job_cmp(const struct top_job *a, const struct top_job *b, enum top_job_key k, bool desc);
/* Fills order[] (capacity m->nproc / m->njob) with indexes of the rows that pass the filter,
 * sorted; returns how many. filter: case-insensitive substring of pid, user, job, command
 * (NULL or "" = all). gpu_mask: bit i set = show processes on m->gpus[i] (~0 = all);
 * only_job >= 0 shows only that job's processes. */
size_t top_sort_procs(const struct top_model *m, size_t *order, enum top_proc_key k, bool desc,
                      const char *filter, uint64_t gpu_mask, int only_job);
size_t top_sort_jobs(const struct top_model *m, size_t *order, enum top_job_key k, bool desc,
                     const char *filter);

/* ---- layout: a pure function of the terminal size and the model ---- */
struct top_rect { int y, x, h, w; };          /* h == 0: not shown */
struct top_layout_in {
    int rows, cols;
    unsigned ngpu_shown;        /* GPU rows to show (physical GPUs and MIG devices) */
    unsigned nmig;              /* of which MIG devices */
    bool banner;                /* a one-line banner (no NVML, jobs unreadable) */
    bool graphs;                /* history graphs wanted */
    bool help;                  /* the help screen replaces the panels */
};
struct top_layout {
    bool too_small;             /* below 40x10: only a message is drawn */
    struct top_rect header;     /* title line */
    struct top_rect banner;
    struct top_rect gpus;       /* one line per GPU (two when wide enough for the details) */
    int gpu_lines_each;         /* 1 or 2 */
    struct top_rect graphs;     /* history sparklines, one line per physical GPU */
    struct top_rect jobs;       /* title line + rows */
    struct top_rect procs;      /* title line + rows */
    struct top_rect footer;     /* key hints / prompt */
    struct top_rect help;
};
void top_layout_compute(const struct top_layout_in *in, struct top_layout *out);

/* ---- rows: the text of one table line, shared by the snapshot and the screen ----
 * Each writes at most width columns (ASCII) into buf and returns buf. */
char *top_row_gpu_title(char *buf, size_t len, int width);
char *top_row_gpu(char *buf, size_t len, int width, const struct top_gpu *g);
/* The second line of a physical GPU: clocks, power limit, fan, PCIe, encoder/decoder, MIG. */
char *top_row_gpu_detail(char *buf, size_t len, int width, const struct top_gpu *g);
/* A MIG device's line names the jobs that have processes in it. */
char *top_row_mig(char *buf, size_t len, int width, const struct top_model *m, const struct top_gpu *g);
char *top_row_job_title(char *buf, size_t len, int width);
char *top_row_job(char *buf, size_t len, int width, const struct top_job *j);
char *top_row_proc_title(char *buf, size_t len, int width);
char *top_row_proc(char *buf, size_t len, int width, const struct top_model *m, const struct top_proc *p);
/* The one-line banner ("no GPU data: ...") or "" when everything was read. */
char *top_row_banner(char *buf, size_t len, int width, const struct top_model *m);

/* ---- JSON (json-c) ---- */
struct json_object;
/* The whole model as one object ("schema": 1, numbers with units in keys, null for N/A). */
struct json_object *top_model_json(const struct top_model *m);

#endif
