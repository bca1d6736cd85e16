/* vgpu metrics: the GPUs and the jobs in Prometheus's text exposition format. */
static const char usage[] =
    "usage: vgpu metrics [--textfile DIR | --listen [HOST:]PORT]\n"
    "\n"
    "Print the GPUs and the jobs as Prometheus metrics (text exposition format 0.0.4): per job\n"
    "and GPU its memory limit, use and peak, its core limit (a ratio), its GPU time and the\n"
    "time its launches waited for the limiter (counters, seconds), its memory and processes\n"
    "outside the limiter; per GPU its memory and whether it answers; per user and GPU the\n"
    "GPU time, GiB-seconds (held, requested and borrowed past --mem REQUEST) and jobs of ended\n"
    "jobs (vgpu acct), and per user their jobs, each once (vgpu_user_jobs_total). Labels follow\n"
    "DCGM-exporter's (gpu, UUID, modelName, Hostname) so that series join with DCGM's; jobs\n"
    "have job, job_name, user, and hpc_job (the Slurm job id of a job named\n"
    "slurm-JOB.STEP.TASK, as DCGM's job mapping).\n"
    "\n"
    "  --textfile DIR   write DIR/vgpu.prom atomically (for node_exporter's textfile collector,\n"
    "                   e.g. /var/lib/prometheus/node-exporter) instead of printing; DIR\n"
    "                   must not be empty\n"
    "  --listen ADDR    serve the metrics over HTTP at ADDR ([HOST:]PORT; HOST defaults to\n"
    "                   127.0.0.1) on /metrics, freshly read for every request, until killed;\n"
    "                   clients are served at once, each closed 1 s after it connected\n"
    "  --help           show this help\n"
    "\n"
    "Only the jobs of the caller's state directory are shown, as with vgpu ps (root:\n"
    "/run/vgpu). Without NVML the GPU metrics are left out and vgpu_nvml_up is 0.\n"
    "\n"
    "Exit status: 0 written; 1 the state directory cannot be read or the file or socket cannot\n"
    "be written; 2 bad usage; 6 the state directory is unsafe.\n";

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "metrics/acct.h"
#include "metrics/serve.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"
#include "vgpu/trust.h"

extern const struct vgpu_cmd vgpu_cmd_metrics;

static const struct option options[] = {
    { "textfile", required_argument, NULL, 't' },
    { "listen", required_argument, NULL, 'l' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "textfile", VGPU_ARG_DIR, NULL },
    { "listen", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

/* A label value, escaped as the exposition format requires: \ " and newline. */
static void put_label(FILE *f, const char *name, const char *val, bool first)
{
    fprintf(f, "%s%s=\"", first ? "" : ",", name);
    for (const char *p = val; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '"')
            fputs("\\\"", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* What one job looks like, read once so every family shows the same instant. */
struct job_snap {
    struct vgpu_region r;
    char user[64];
    char hpc_job[32];                   /* "" when not a Slurm task */
    const char *state;
    unsigned npids;
    uint64_t life_ns;
};

struct snap {
    char host[256];
    bool nvml_up;
    struct vgpu_gpu_list *gpus;         /* NULL without NVML */
    struct job_snap *jobs;
    size_t njobs;
    struct vgpu_acct_total *totals;     /* per user and GPU, from the job records */
    size_t ntotals;
    struct vgpu_acct_origin acct_from;  /* where they came from */
};

static void user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(buf, len, "%s", pw->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
}

/* slurm-JOB.STEP.TASK (lib/slurm, vgpu-slurm(7)) → JOB. */
static void hpc_job_of(const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    if (strncmp(name, "slurm-", 6) != 0)
        return;
    const char *p = name + 6;
    size_t n = strspn(p, "0123456789");
    if (n == 0 || (p[n] != '.' && p[n] != '\0') || n >= len)
        return;
    memcpy(buf, p, n);
    buf[n] = '\0';
}

static uint64_t now_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int take_snapshot(struct snap *s, struct vgpu_err *e)
{
    memset(s, 0, sizeof *s);
    if (gethostname(s->host, sizeof s->host - 1) != 0)
        snprintf(s->host, sizeof s->host, "localhost");
    struct vgpu_err ne = { 0 };
    struct vgpu_nvml *nv = vgpu_nvml_open(&ne);
    if (nv) {
        s->gpus = calloc(1, sizeof *s->gpus);
        if (s->gpus && vgpu_gpus_enumerate(nv, s->gpus, &ne) == 0) {
            s->nvml_up = true;
        } else {
            free(s->gpus);
            s->gpus = NULL;
        }
        vgpu_nvml_close(nv);
    }
    if (!s->nvml_up)
        vgpu_debug("vgpu metrics: no GPU metrics: %s", ne.msg);

    char dir[4096];
    if (vgpu_statedir_or_none(dir, sizeof dir, e) < 0)
        return -1;
    struct vgpu_job_ref *refs = NULL;
    size_t n = 0;
    if (vgpu_jobs_list_all(dir, &refs, &n, NULL, e) < 0)
        return -1;
    s->jobs = calloc(n ? n : 1, sizeof *s->jobs);
    if (!s->jobs) {
        free(refs);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    uint64_t now = now_realtime_ns();
    for (size_t i = 0; i < n; i++) {
        struct job_snap *j = &s->jobs[s->njobs];
        struct vgpu_err je = { 0 };
        if (!refs[i].readable || vgpu_region_open(&j->r, refs[i].path, VGPU_REGION_VIEW, &je) < 0)
            continue;   /* another user's, or gone meanwhile */
        if (vgpu_region_check(&j->r) != 0) {    /* truncated since the listing */
            vgpu_region_close(&j->r);
            continue;
        }
        const struct vgpu_region_header *h = j->r.hdr;
        user_name(vgpu_region_job_uid(&j->r), j->user, sizeof j->user);
        hpc_job_of(j->r.info->name, j->hpc_job, sizeof j->hpc_job);
        bool exited = atomic_load(&h->state) == VGPU_JOB_EXITED;
        j->state = exited ? "exited" : atomic_load(&h->state) == VGPU_JOB_RUNNING ? "running" : "starting";
        j->npids = exited ? 0 : vgpu_region_pids(&j->r, NULL, NULL, 0);
        uint64_t ended = exited ? atomic_load(&h->exited_realtime_ns) : 0;
        uint64_t until = ended && ended < now ? ended : now;
        j->life_ns = until > h->created_realtime_ns ? until - h->created_realtime_ns : 0;
        s->njobs++;
    }
    free(refs);
    s->ntotals = vgpu_metrics_user_totals(&s->totals, &s->acct_from);
    return 0;
}

static void free_snapshot(struct snap *s)
{
    free(s->totals);
    for (size_t i = 0; i < s->njobs; i++)
        vgpu_region_close(&s->jobs[i].r);
    free(s->jobs);
    free(s->gpus);
}

static void gpu_labels(FILE *f, const struct snap *s, const struct vgpu_gpu *g)
{
    char idx[32];
    if (g->is_mig)
        snprintf(idx, sizeof idx, "%u.%u", g->index, g->mig_gi);
    else
        snprintf(idx, sizeof idx, "%u", g->index);
    put_label(f, "gpu", idx, true);
    put_label(f, "UUID", g->uuid, false);
    put_label(f, "modelName", g->name, false);
    put_label(f, "Hostname", s->host, false);
}

static void job_labels(FILE *f, const struct snap *s, const struct job_snap *j)
{
    put_label(f, "job", j->r.info->id, true);
    put_label(f, "job_name", j->r.info->name, false);
    put_label(f, "user", j->user, false);
    if (j->hpc_job[0])
        put_label(f, "hpc_job", j->hpc_job, false);
    put_label(f, "Hostname", s->host, false);
}

/* A job's device: the job labels and the GPU's (its NVML index as the job was created). */
static void job_dev_labels(FILE *f, const struct snap *s, const struct job_snap *j, unsigned d)
{
    job_labels(f, s, j);
    char idx[16];
    snprintf(idx, sizeof idx, "%u", j->r.hdr->dev[d].nvml_index);
    put_label(f, "gpu", idx, false);
    put_label(f, "UUID", j->r.info->dev[d].uuid, false);
}

enum jd_metric { JD_LIMIT, JD_REQUEST, JD_BORROWED, JD_DEMOTED, JD_USED, JD_PEAK, JD_CORE, JD_SHARE, JD_GPUTIME, JD_THROTTLED,
                 JD_OUT_BYTES, JD_OUT_PROCS };

/* One value of a job's device; false when the series is absent (no limit, an ended job's use). */
static bool jd_value(const struct job_snap *j, unsigned d, enum jd_metric m, double *v)
{
    const struct vgpu_region_header *h = j->r.hdr;
    const struct vgpu_region_dev_usage *u = &j->r.use->dev[d];
    bool exited = atomic_load(&h->state) == VGPU_JOB_EXITED;
    switch (m) {
    case JD_LIMIT: *v = (double)atomic_load(&h->dev[d].mem_limit); return *v > 0;
    /* Lent memory (--mem REQUEST:LIMIT): the promise (the limit when nothing is lent), and the use
     * past it. */
    case JD_REQUEST: *v = (double)vgpu_region_mem_request(&j->r, d); return *v > 0;
    case JD_BORROWED: *v = exited ? 0 : (double)vgpu_region_mem_borrowed(&j->r, d); return true;
    /* ... and of that, what the squeeze demoted to host memory for another job's request. */
    case JD_DEMOTED: *v = exited ? 0 : (double)vgpu_region_mem_demoted(&j->r, d); return true;
    case JD_USED: *v = exited ? 0 : (double)atomic_load(&u->used); return true;
    case JD_PEAK: *v = (double)atomic_load(&u->peak); return true;
    case JD_CORE: *v = atomic_load(&h->dev[d].core_limit) / 100.0; return *v > 0;
    case JD_SHARE:
        *v = j->life_ns ? (double)atomic_load(&u->gpu_time_ns) / (double)j->life_ns : 0;
        return j->life_ns > 0;
    case JD_GPUTIME: *v = atomic_load(&u->gpu_time_ns) / 1e9; return true;
    case JD_THROTTLED: *v = atomic_load(&u->throttled_ns) / 1e9; return true;
    case JD_OUT_BYTES: *v = exited ? 0 : (double)atomic_load(&u->outside_bytes); return true;
    case JD_OUT_PROCS: *v = exited ? 0 : atomic_load(&u->outside_count); return true;
    }
    return false;
}

static const struct {
    enum jd_metric m;
    const char *name, *type, *help;
} jd_families[] = {
    { JD_LIMIT, "vgpu_job_memory_limit_bytes", "gauge", "GPU memory limit of the job on the GPU (absent: no limit)." },
    { JD_REQUEST, "vgpu_job_mem_request_bytes", "gauge",
      "GPU memory promised to the job on the GPU: its REQUEST (--mem REQUEST:LIMIT), else its limit (absent: no limit)." },
    { JD_BORROWED, "vgpu_job_mem_borrowed_bytes", "gauge",
      "GPU memory the job uses on the GPU past its REQUEST (borrowed; 0 when it lends nothing)." },
    { JD_DEMOTED, "vgpu_job_mem_demoted_bytes", "gauge",
      "Of the job's borrowed memory on the GPU, what it demoted to host memory to give way to another job's request." },
    { JD_USED, "vgpu_job_memory_used_bytes", "gauge", "GPU memory the job's processes hold on the GPU, as vgpu accounts it." },
    { JD_PEAK, "vgpu_job_memory_peak_bytes", "gauge", "Highest GPU memory the job held on the GPU." },
    { JD_CORE, "vgpu_job_core_limit_ratio", "gauge", "Cap on the job's share of the GPU's time, 0 to 1 (absent: no cap)." },
    { JD_SHARE, "vgpu_job_gpu_time_share_ratio", "gauge", "GPU time the job used over the time it ran, 0 to 1." },
    { JD_GPUTIME, "vgpu_job_gpu_time_seconds_total", "counter", "GPU time the job's kernels used, as the limiter measured it." },
    { JD_THROTTLED, "vgpu_job_throttled_seconds_total", "counter", "Time the job's launches waited for the compute limiter." },
    { JD_OUT_BYTES, "vgpu_job_outside_memory_bytes", "gauge",
      "GPU memory of the job's processes that run without the limiter (counted against the limit)." },
    { JD_OUT_PROCS, "vgpu_job_outside_processes", "gauge", "The job's GPU processes that run without the limiter." },
};

/* vgpu_user_jobs_total: each user's ended jobs, a job of several GPUs once (issue 36: the per-GPU
 * series, summed, counted it once per GPU): user_jobs counts each job at its first GPU only. */
static void user_jobs(FILE *f, const struct snap *s)
{
    family(f, "vgpu_user_jobs_total", "counter", "The user's ended jobs (vgpu acct), each once, whatever its number "
           "of GPUs.");
    for (size_t i = 0; i < s->ntotals; i++) {
        const struct vgpu_acct_total *t = &s->totals[i];
        bool seen = false;   /* one series a user, even if its rows were not together */
        for (size_t k = 0; k < i && !seen; k++)
            seen = s->totals[k].uid == t->uid;
        if (seen)
            continue;
        uint64_t jobs = 0;
        const char *name = t->user;
        for (size_t k = i; k < s->ntotals; k++) {
            if (s->totals[k].uid != t->uid)
                continue;
            jobs += s->totals[k].user_jobs;
            if (strcmp(s->totals[k].user, name) > 0)
                name = s->totals[k].user;
        }
        fprintf(f, "vgpu_user_jobs_total{");
        put_label(f, "user", name, true);
        put_label(f, "Hostname", s->host, false);
        fprintf(f, "} %llu\n", (unsigned long long)jobs);
    }
}

static void render(FILE *f, const struct snap *s)
{
    family(f, "vgpu_nvml_up", "gauge", "1 when NVML answered (GPU metrics are present), else 0.");
    fprintf(f, "vgpu_nvml_up{");
    put_label(f, "Hostname", s->host, true);
    fprintf(f, "} %d\n", s->nvml_up ? 1 : 0);
    if (s->gpus && s->gpus->count) {
        family(f, "vgpu_gpu_info", "gauge", "A GPU or MIG device vgpu sees (always 1; labels name it).");
        for (unsigned i = 0; i < s->gpus->count; i++) {
            fprintf(f, "vgpu_gpu_info{");
            gpu_labels(f, s, &s->gpus->gpu[i]);
            fprintf(f, ",mig=\"%s\"} 1\n", s->gpus->gpu[i].is_mig ? "true" : "false");
        }
        family(f, "vgpu_gpu_up", "gauge", "1 when the GPU answers the driver, 0 when it is lost or unreachable.");
        for (unsigned i = 0; i < s->gpus->count; i++) {
            const struct vgpu_gpu *g = &s->gpus->gpu[i];
            fprintf(f, "vgpu_gpu_up{");
            gpu_labels(f, s, g);
            fprintf(f, "} %d\n", g->lost || g->unreachable[0] ? 0 : 1);
        }
        family(f, "vgpu_gpu_memory_total_bytes", "gauge", "GPU memory of the GPU.");
        for (unsigned i = 0; i < s->gpus->count; i++) {
            const struct vgpu_gpu *g = &s->gpus->gpu[i];
            if (g->lost || g->unreachable[0])
                continue;
            fprintf(f, "vgpu_gpu_memory_total_bytes{");
            gpu_labels(f, s, g);
            fprintf(f, "} %llu\n", (unsigned long long)g->mem_total);
        }
        family(f, "vgpu_gpu_memory_used_bytes", "gauge", "GPU memory in use on the GPU, as the driver reports it.");
        for (unsigned i = 0; i < s->gpus->count; i++) {
            const struct vgpu_gpu *g = &s->gpus->gpu[i];
            if (g->lost || g->unreachable[0])
                continue;
            fprintf(f, "vgpu_gpu_memory_used_bytes{");
            gpu_labels(f, s, g);
            fprintf(f, "} %llu\n", (unsigned long long)g->mem_used);
        }
    }
    /* Where the per-user series come from (issue 36 L14): with the arbiter down they hold the
     * scraper's own store only, and a dashboard must see that, not just fewer jobs. */
    family(f, "vgpu_acct_records_source", "gauge", "Where the vgpu_user_* series come from: 1 for the source in "
           "use (arbiter: its database, every job; own: the scraping user's own store; none: no records).");
    for (int k = VGPU_ACCT_FROM_NONE; k <= VGPU_ACCT_FROM_ARBITER; k++) {
        fprintf(f, "vgpu_acct_records_source{");
        put_label(f, "source", vgpu_acct_source_name((enum vgpu_acct_source)k), true);
        put_label(f, "Hostname", s->host, false);
        fprintf(f, "} %d\n", s->acct_from.source == (enum vgpu_acct_source)k);
    }
    family(f, "vgpu_acct_records_partial", "gauge", "1 when the arbiter, which ran on this machine, does not answer: "
           "the vgpu_user_* series hold only the scraping user's own store.");
    fprintf(f, "vgpu_acct_records_partial{");
    put_label(f, "Hostname", s->host, true);
    fprintf(f, "} %d\n", s->acct_from.source != VGPU_ACCT_FROM_ARBITER && s->acct_from.partial);
    if (s->ntotals) {
        /* The lent memory's two (issue 37) are named and typed as the memory's, in GiB-seconds. */
        static const char *const names[5] = { "vgpu_user_gpu_seconds_total", "vgpu_user_memory_gib_seconds_total",
                                              "vgpu_user_gpu_jobs_total",
                                              "vgpu_user_memory_requested_gib_seconds_total",
                                              "vgpu_user_memory_borrowed_gib_seconds_total" };
        static const char *const helps[5] = {
            "GPU time of the user's ended jobs on the GPU, in seconds, as the schedule charged it (vgpu acct).",
            "GPU memory the user's ended jobs held on the GPU, integrated over time, in GiB-seconds (vgpu acct).",
            "The user's ended jobs that used the GPU (vgpu acct): a job of N GPUs is in N of them; "
            "vgpu_user_jobs_total counts it once.",
            "GPU memory promised to the user's ended jobs on the GPU (REQUEST of --mem REQUEST:LIMIT, else the "
            "memory limit), integrated over time, in GiB-seconds (vgpu acct).",
            "GPU memory the user's ended jobs held on the GPU past their REQUEST (borrowed, --mem REQUEST:LIMIT), "
            "integrated over time, in GiB-seconds (vgpu acct).",
        };
        user_jobs(f, s);
        for (int k = 0; k < 5; k++) {
            family(f, names[k], "counter", helps[k]);
            for (size_t i = 0; i < s->ntotals; i++) {
                const struct vgpu_acct_total *t = &s->totals[i];
                char idx[16];
                snprintf(idx, sizeof idx, "%d", t->nvml_index);
                fprintf(f, "%s{", names[k]);
                put_label(f, "user", t->user, true);
                put_label(f, "gpu", idx, false);
                put_label(f, "UUID", t->uuid, false);
                put_label(f, "Hostname", s->host, false);
                if (k == 2)
                    fprintf(f, "} %llu\n", (unsigned long long)t->jobs);
                else
                    fprintf(f, "} %.9g\n", k == 0   ? t->gpu_seconds
                                            : k == 1 ? t->mem_gib_seconds
                                            : k == 3 ? t->mem_requested_gib_seconds
                                                     : t->mem_borrowed_gib_seconds);
            }
        }
    }
    family(f, "vgpu_jobs", "gauge", "Jobs in the state directory (running and recently ended).");
    fprintf(f, "vgpu_jobs{");
    put_label(f, "Hostname", s->host, true);
    fprintf(f, "} %zu\n", s->njobs);
    if (!s->njobs)
        return;
    family(f, "vgpu_job_info", "gauge", "A job (always 1; labels name it, state is starting, running or exited).");
    for (size_t i = 0; i < s->njobs; i++) {
        fprintf(f, "vgpu_job_info{");
        job_labels(f, s, &s->jobs[i]);
        put_label(f, "state", s->jobs[i].state, false);
        fprintf(f, "} 1\n");
    }
    family(f, "vgpu_job_start_time_seconds", "gauge", "When the job was started, in seconds since the epoch.");
    for (size_t i = 0; i < s->njobs; i++) {
        fprintf(f, "vgpu_job_start_time_seconds{");
        job_labels(f, s, &s->jobs[i]);
        fprintf(f, "} %.3f\n", s->jobs[i].r.hdr->created_realtime_ns / 1e9);
    }
    family(f, "vgpu_job_processes", "gauge", "Live processes of the job under the limiter.");
    for (size_t i = 0; i < s->njobs; i++) {
        fprintf(f, "vgpu_job_processes{");
        job_labels(f, s, &s->jobs[i]);
        fprintf(f, "} %u\n", s->jobs[i].npids);
    }
    for (size_t k = 0; k < sizeof jd_families / sizeof jd_families[0]; k++) {
        bool any = false;
        for (size_t i = 0; i < s->njobs; i++) {
            const struct job_snap *j = &s->jobs[i];
            for (unsigned d = 0; d < vgpu_region_device_count(&j->r); d++) {
                double v;
                if (!jd_value(j, d, jd_families[k].m, &v))
                    continue;
                if (!any)
                    family(f, jd_families[k].name, jd_families[k].type, jd_families[k].help);
                any = true;
                fprintf(f, "%s{", jd_families[k].name);
                job_dev_labels(f, s, j, d);
                /* Integers (bytes, counts) exactly; ratios and seconds with 9 digits. */
                if (v >= 0 && v < 9007199254740992.0 && v == (double)(uint64_t)v)
                    fprintf(f, "} %llu\n", (unsigned long long)v);
                else
                    fprintf(f, "} %.9g\n", v);
            }
        }
    }
}

/* The whole exposition in a malloc'd string. */
static char *exposition(size_t *len, struct vgpu_err *e)
{
    struct snap s;
    if (take_snapshot(&s, e) < 0) {
        free_snapshot(&s);
        return NULL;
    }
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) {
        free_snapshot(&s);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return NULL;
    }
    render(f, &s);
    free_snapshot(&s);
    if (fclose(f) != 0) {
        free(buf);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return NULL;
    }
    return buf;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* DIR/vgpu.prom through DIR/vgpu.prom.PID and rename(): node_exporter reads only *.prom, and
 * never half a file. */
static int write_textfile(const char *dir, const char *text, size_t len)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    if ((size_t)snprintf(path, sizeof path, "%s/vgpu.prom", dir) >= sizeof path)
        return vgpu_fail(VGPU_EXIT_USAGE, "--textfile %s: the path is too long", dir);
    /* Root creates and renames files there: only in a directory nobody else can change. */
    struct vgpu_err e;
    if (vgpu_trust_path(dir, "--textfile", VGPU_TRUST_DIR, &e) != 0 && e.code != VGPU_EXIT_NOT_FOUND)
        return vgpu_err_report(&e);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "--textfile %s: cannot write %s: %s%s", dir, tmp, strerror(errno),
                         errno == ENOENT ? " (create the directory first)" : "");
    int err = 0;
    if (fchmod(fd, 0644) != 0 || write_all(fd, text, len) != 0)
        err = errno ? errno : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return vgpu_fail(VGPU_EXIT_FAIL, "--textfile %s: cannot write %s: %s", dir, path, strerror(err));
    }
    return 0;
}

static int listen_on(const char *addr)
{
    char host[256] = "127.0.0.1", port[32];
    const char *colon = strrchr(addr, ':');
    if (colon) {
        size_t hl = (size_t)(colon - addr);
        if (hl >= sizeof host || strlen(colon + 1) >= sizeof port)
            return vgpu_usage_error(&vgpu_cmd_metrics, "--listen '%s': too long", addr);
        if (hl) {
            memcpy(host, addr, hl);
            host[hl] = '\0';
        }
        snprintf(port, sizeof port, "%s", colon + 1);
    } else if (strlen(addr) < sizeof port) {
        snprintf(port, sizeof port, "%s", addr);
    }
    char *end;
    long pn = strtol(port, &end, 10);
    if (!port[0] || *end || pn < 1 || pn > 65535)
        return vgpu_usage_error(&vgpu_cmd_metrics, "--listen '%s': give [HOST:]PORT with a port from 1 to 65535",
                                addr);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    int gr = getaddrinfo(host, port, &hints, &ai);
    if (gr != 0)
        return vgpu_usage_error(&vgpu_cmd_metrics, "--listen '%s': %s", addr, gai_strerror(gr));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
        int err = errno;
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return vgpu_fail(VGPU_EXIT_FAIL, "--listen %s: %s", addr, strerror(err));
    }
    freeaddrinfo(ai);
    signal(SIGPIPE, SIG_IGN);
    vgpu_info("serving the metrics on http://%s:%s/metrics", host, port);
    return vgpu_metrics_serve(fd, addr, exposition);
}

static int cmd_metrics(int argc, char **argv)
{
    const char *textfile = NULL, *listen_addr = NULL;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_metrics, argc, argv, "")) != -1) {
        switch (c) {
        case 't':
            /* "" would make the file /vgpu.prom, at the root of the machine. */
            if (!*optarg)
                return vgpu_usage_error(&vgpu_cmd_metrics, "--textfile needs a directory, not an empty string");
            textfile = optarg;
            break;
        case 'l': listen_addr = optarg; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_metrics, "unexpected operand '%s'", argv[optind]);
    if (textfile && listen_addr)
        return vgpu_usage_error(&vgpu_cmd_metrics, "give --textfile or --listen, not both");
    if (listen_addr)
        return listen_on(listen_addr);
    struct vgpu_err e = { 0 };
    size_t len = 0;
    char *text = exposition(&len, &e);
    if (!text)
        return vgpu_err_report(&e);
    int rc = 0;
    if (textfile)
        rc = write_textfile(textfile, text, len);
    else if (write_all(STDOUT_FILENO, text, len) != 0)
        rc = vgpu_fail(VGPU_EXIT_FAIL, "cannot write the metrics: %s", strerror(errno));
    free(text);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_metrics = {
    .name = "metrics",
    .fn = cmd_metrics,
    .summary = "print the GPUs and jobs as Prometheus metrics (or serve them)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
};
