/* vgpu top's private pieces: the sampler thread (sampler.c), host facts (host.c), the job
 * reader (jobs.c), the
 * text snapshot (text.c) and the ncurses screen (ui.c, ui_keys.c, ui_draw.c, ui_state.c,
 * users.c: layered, see ui_state.h). The model itself is vgpu/top.h. */
#ifndef VGPU_CMD_TOP_H
#define VGPU_CMD_TOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/top.h"
#include "vgpu_nvml.h"

struct vgpu_nvml;
struct top_cpu_ent;
struct top_parent;
struct pollfd;

struct top_sampler {
    /* shared with the UI thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct top_model *latest;      /* newest sample not yet taken by the UI (owned) */
    bool stop, wake;
    unsigned delay_ms;
    bool started;
    pthread_t thread;
    int notify[2];                 /* a byte written for each new sample (pipe; -1: none) */
    /* the sampler's own state (only the sampler thread touches it once started) */
    struct vgpu_nvml *nv;
    enum top_nvml_status nvml;
    char nvml_msg[512];
    struct vgpu_gpu_list *list;
    bool shown[VGPU_MAX_GPUS];     /* list positions in the model (--gpu) */
    struct top_gpu hist[VGPU_MAX_GPUS];       /* history carried between samples */
    unsigned long long util_cursor[VGPU_MAX_GPUS];
    nvmlProcessInfo_v2_t *pbuf;    /* NVML's process list, kept between samples */
    unsigned pcap;
    nvmlProcessUtilizationSample_t *ubuf;   /* NVML's per-process utilisation, kept */
    unsigned ucap;
    struct top_cpu_ent *cpu;       /* host facts per pid, sorted (host.c) */
    size_t ncpu, cpu_cap;
    struct top_parent *par;        /* their parents, watched (host.c) */
    size_t npar, par_cap;
    struct pollfd *pfd;            /* host.c's poll array */
    size_t pfd_cap;
    unsigned nfds;                 /* pidfds kept open (host.c) */
    int fast;                      /* pidfds and CPU clocks usable (host.c) */
    bool no_kept_fds;              /* a single sample: keep none */
    uint64_t seq;
    long clk_tck;
    unsigned long long boot_ms;    /* boot time, for lifetime CPU % */
};

/* Opens NVML (its failure is not an error: it becomes the banner) and parses --gpu (a bad
 * selector is: returns -1 with e set). */
int top_sampler_init(struct top_sampler *s, const char *gpusel, struct vgpu_err *e);
void top_sampler_fini(struct top_sampler *s);
/* One sample, now, on the calling thread. NULL when out of memory. */
struct top_model *top_sampler_sample(struct top_sampler *s);
/* The thread: samples every delay_ms and publishes; the UI takes the newest with
 * top_sampler_take (NULL when nothing new). */
int top_sampler_start(struct top_sampler *s, unsigned delay_ms);
struct top_model *top_sampler_take(struct top_sampler *s);
/* Readable when a new sample may be there (after top_sampler_start; -1 when there is no such
 * descriptor): the screen sleeps on it and on the terminal, not waking up to look. */
int top_sampler_notify_fd(const struct top_sampler *s);
void top_sampler_set_delay(struct top_sampler *s, unsigned delay_ms);
void top_sampler_wake(struct top_sampler *s);   /* sample again now (after a limit change) */
void top_sampler_stop(struct top_sampler *s);

/* The rate of migration of oversubscribed jobs (migration.c): after top_jobs_read, sets each
 * job's migration_valid and migration_bps from its GPUs' PCIe byte counters. */
void top_migration_update(struct top_sampler *s, struct top_model *m);

/* Jobs from vgpu's own state (jobs.c): fills m->jobs and adds the jobs' processes that NVML
 * did not list. Sets m->jobs_msg when the state cannot be read. */
void top_jobs_read(struct top_model *m);
/* The sampler read pid's parent (in /proc/PID/stat, for CPU %): the next top_jobs_read uses it
 * rather than reading it again. */
void top_jobs_note_parent(pid_t pid, pid_t ppid);
/* Live limit changes through the job region (owner or root only). 0, or -1 with e set. */
int top_job_set_core(const struct top_job *j, unsigned pct, struct vgpu_err *e);
/* The + and - keys: the region's current core limit (of the job's first GPU) plus delta,
 * kept within 5..100, set on every GPU of the job. 1 with *pct set; 0 when the job has no
 * core limit and delta is positive (nothing to raise); -1 with e filled. */
int top_job_change_core(const struct top_job *j, int delta, unsigned *pct, struct vgpu_err *e);
/* TEXT as vgpu limit --mem takes it (SIZE, PCT%, none), with the same check. */
int top_job_set_mem(const struct top_job *j, const char *text, struct vgpu_err *e);
/* The pids of a job now (for signalling a whole job); returns the count (≤ cap). */
size_t top_job_pids(const struct top_job *j, pid_t *pids, unsigned long long *starts, size_t cap);

/* Host facts of GPU processes (host.c): top_host_poll once per sample, before top_host_facts
 * for each process, then top_host_sweep. */
void top_host_init(struct top_sampler *s);
void top_host_poll(struct top_sampler *s);
void top_host_facts(struct top_sampler *s, struct top_proc *p, uint64_t mono_ms);
void top_host_sweep(struct top_sampler *s);
void top_host_fini(struct top_sampler *s);
/* A process's start time (clock ticks since boot), from /proc. */
bool top_proc_start(pid_t pid, unsigned long long *start);
/* Sends sig to pid only if it still is the process that started at `start`. 0 or -errno
 * (-ESRCH when it is gone or was replaced). */
int top_signal_checked(pid_t pid, unsigned long long start, int sig);

/* The text snapshot (text.c), as `top -b -n1`, width columns wide. */
void top_print_text(FILE *f, const struct top_model *m, int width);

struct top_ui_opts {
    unsigned delay_ms;
    long count;                    /* refreshes before exiting, 0 = until q */
    bool color;
};
int top_ui_run(struct top_sampler *s, const struct top_ui_opts *o);

/* uid -> user name (the uid as a number when it has none), cached (jobs.c). */
void top_owner_name(uid_t uid, char *out, size_t len);

#endif
