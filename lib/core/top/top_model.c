/* vgpu top's model: allocation, history, formatting, sorting and filtering (see vgpu/top.h).
 * Pure functions only; the sampler and the screen are in cmd/top/. */
#include "vgpu/top.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *top_nvml_status_name(enum top_nvml_status s)
{
    switch (s) {
    case TOP_NVML_OK: return "ok";
    case TOP_NVML_NO_LIBRARY: return "no_library";
    case TOP_NVML_NO_DRIVER: return "no_driver";
    case TOP_NVML_NO_GPU: return "no_gpu";
    case TOP_NVML_ERROR: break;
    }
    return "error";
}

struct top_model *top_model_new(void)
{
    return calloc(1, sizeof(struct top_model));
}

void top_model_free(struct top_model *m)
{
    if (!m)
        return;
    free(m->procs);
    free(m);
}

struct top_proc *top_model_add_proc(struct top_model *m)
{
    if (m->nproc == m->proc_cap) {
        size_t cap = m->proc_cap ? m->proc_cap * 2 : 64;
        struct top_proc *p = realloc(m->procs, cap * sizeof *p);
        if (!p)
            return NULL;
        m->procs = p;
        m->proc_cap = cap;
    }
    struct top_proc *p = &m->procs[m->nproc++];
    memset(p, 0, sizeof *p);
    p->job = -1;
    p->gpu = -1;
    return p;
}

static int cmp_pid_ix(const void *a, const void *b)
{
    const struct top_pid_ix *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

size_t top_pid_index(const struct top_model *m, size_t first, size_t last, struct top_pid_ix **out)
{
    *out = NULL;
    if (last > m->nproc)
        last = m->nproc;
    if (first >= last || !(*out = malloc((last - first) * sizeof **out)))
        return 0;
    for (size_t i = first; i < last; i++)
        (*out)[i - first] = (struct top_pid_ix){ m->procs[i].pid, i };
    qsort(*out, last - first, sizeof **out, cmp_pid_ix);
    return last - first;
}

const struct top_pid_ix *top_pid_find(const struct top_pid_ix *ix, size_t n, pid_t pid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ix[lo].pid == pid ? &ix[lo] : NULL;
}

void top_gpu_hist_push(struct top_gpu *g, unsigned util, unsigned mem)
{
    if (g->hist_len == TOP_HIST) {
        memmove(g->hist_util, g->hist_util + 1, TOP_HIST - 1);
        memmove(g->hist_mem, g->hist_mem + 1, TOP_HIST - 1);
        g->hist_len--;
    }
    g->hist_util[g->hist_len] = (uint8_t)(util > 100 ? 255 : util);
    g->hist_mem[g->hist_len] = (uint8_t)(mem > 100 ? 255 : mem);
    g->hist_len++;
}

/* ---- formatting ---- */

char *top_fmt_pct(char *buf, size_t len, bool valid, unsigned pct)
{
    if (!valid)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%u%%", pct);
    return buf;
}

char *top_fmt_mib(char *buf, size_t len, bool valid, uint64_t bytes)
{
    if (!valid)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%lluMiB", (unsigned long long)(bytes >> 20));
    return buf;
}

char *top_fmt_size(char *buf, size_t len, bool valid, uint64_t bytes)
{
    static const char units[] = "BKMGTP";
    if (!valid) {
        snprintf(buf, len, "N/A");
        return buf;
    }
    unsigned u = 0;
    double v = (double)bytes;
    while (v >= 1024 && u < sizeof units - 2) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%lluB", (unsigned long long)bytes);
    else if (v < 10 && v != (double)(uint64_t)v)
        snprintf(buf, len, "%.1f%c", v, units[u]);
    else
        snprintf(buf, len, "%.0f%c", v, units[u]);
    return buf;
}

char *top_fmt_watts(char *buf, size_t len, bool valid, unsigned mw)
{
    if (!valid)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%uW", (mw + 500) / 1000);
    return buf;
}

char *top_fmt_mem_limit(char *buf, size_t len, uint64_t used, uint64_t limit)
{
    char a[16], b[16];
    top_fmt_size(a, sizeof a, true, used);
    if (limit)
        top_fmt_size(b, sizeof b, true, limit);
    else
        snprintf(b, sizeof b, "-");
    snprintf(buf, len, "%s/%s", a, b);
    return buf;
}

char *top_fmt_bar(char *buf, size_t len, unsigned width, double frac)
{
    if (len == 0)
        return buf;
    if (width >= len)
        width = (unsigned)len - 1;
    if (!(frac > 0))   /* also NaN */
        frac = 0;
    if (frac > 1)
        frac = 1;
    unsigned fill = (unsigned)(frac * width + 0.5);
    for (unsigned i = 0; i < width; i++)
        buf[i] = i < fill ? '|' : ' ';
    buf[width] = 0;
    return buf;
}

char *top_fmt_spark(char *buf, size_t len, const uint8_t *hist, unsigned n, unsigned width)
{
    static const char levels[] = " .:-=+*#%@";
    if (len == 0)
        return buf;
    if (width >= len)
        width = (unsigned)len - 1;
    for (unsigned i = 0; i < width; i++) {
        /* right-aligned: cell i shows sample n - width + i */
        long s = (long)n - (long)width + (long)i;
        if (s < 0 || hist[s] > 100)
            buf[i] = s < 0 ? ' ' : '?';
        else
            buf[i] = levels[(hist[s] * 9 + 50) / 100];
    }
    buf[width] = 0;
    return buf;
}

void top_sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            *s = '?';
}

/* ---- sorting ---- */

const char *top_proc_key_name(enum top_proc_key k)
{
    static const char *const n[TOP_PK_COUNT] = { "PID", "USER", "JOB", "GPU", "GPU-MEM", "SM%", "CPU%", "COMMAND" };
    return (unsigned)k < TOP_PK_COUNT ? n[k] : "?";
}

const char *top_job_key_name(enum top_job_key k)
{
    static const char *const n[TOP_JK_COUNT] = { "JOB", "OWNER", "MEM", "MEM-LIMIT", "GPU-TIME", "CORE",
                                                 "THROTTLED", "PRIO", "PROCS" };
    return (unsigned)k < TOP_JK_COUNT ? n[k] : "?";
}

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }
static int cmp_dbl(double a, double b) { return (a > b) - (a < b); }
/* N/A below every value, whatever the direction of the key. */
static int cmp_opt_u64(bool va, uint64_t a, bool vb, uint64_t b)
{
    if (va != vb)
        return va ? 1 : -1;
    return va ? cmp_u64(a, b) : 0;
}

static const char *proc_job_name(const struct top_model *m, const struct top_proc *p)
{
    return p->job >= 0 && (unsigned)p->job < m->njob ? m->jobs[p->job].name : "";
}

int top_proc_cmp(const struct top_model *m, const struct top_proc *a, const struct top_proc *b,
                 enum top_proc_key k, bool desc)
{
    int c = 0;
    switch (k) {
    case TOP_PK_PID: c = cmp_u64((uint64_t)a->pid, (uint64_t)b->pid); break;
    case TOP_PK_USER: c = strcmp(a->user, b->user); break;
    case TOP_PK_JOB: c = strcmp(proc_job_name(m, a), proc_job_name(m, b)); break;
    case TOP_PK_GPU: c = (a->gpu > b->gpu) - (a->gpu < b->gpu); break;
    case TOP_PK_MEM: c = cmp_opt_u64(a->valid & TOP_PV_MEM, a->gpu_mem, b->valid & TOP_PV_MEM, b->gpu_mem); break;
    case TOP_PK_SM: c = cmp_opt_u64(a->valid & TOP_PV_SM, a->sm_pct, b->valid & TOP_PV_SM, b->sm_pct); break;
    case TOP_PK_CPU:
        if ((a->valid & TOP_PV_CPU) != (b->valid & TOP_PV_CPU))
            c = (a->valid & TOP_PV_CPU) ? 1 : -1;
        else
            c = cmp_dbl(a->cpu_pct, b->cpu_pct);
        break;
    case TOP_PK_CMD: c = strcmp(a->cmd, b->cmd); break;
    case TOP_PK_COUNT: break;
    }
    c = c > 0 ? 1 : c < 0 ? -1 : 0;
    if (desc)
        c = -c;
    if (c == 0)   /* tie-break, always ascending: pid then GPU (one process can use several GPUs) */
        c = cmp_u64((uint64_t)a->pid, (uint64_t)b->pid);
    if (c == 0)
        c = (a->gpu > b->gpu) - (a->gpu < b->gpu);
    return c;
}

int top_job_cmp(const struct top_job *a, const struct top_job *b, enum top_job_key k, bool desc)
{
    int c = 0;
    switch (k) {
    case TOP_JK_NAME: c = strcmp(a->name, b->name); break;
    case TOP_JK_OWNER: c = strcmp(a->owner, b->owner); break;
    case TOP_JK_MEM: c = cmp_u64(a->mem_used, b->mem_used); break;
    /* no limit = unlimited: above every limit */
    case TOP_JK_MEMLIM: c = cmp_u64(a->mem_limit ? a->mem_limit : UINT64_MAX, b->mem_limit ? b->mem_limit : UINT64_MAX); break;
    case TOP_JK_SHARE:
        if (a->share_valid != b->share_valid)
            c = a->share_valid ? 1 : -1;
        else
            c = a->share_valid ? cmp_dbl(a->share_pct, b->share_pct) : 0;
        break;
    case TOP_JK_CORE: c = cmp_u64(a->core_limit_pct ? a->core_limit_pct : 101, b->core_limit_pct ? b->core_limit_pct : 101); break;
    case TOP_JK_THROTTLE: c = cmp_u64(a->throttled_ns, b->throttled_ns); break;
    case TOP_JK_PRIO: c = (a->priority > b->priority) - (a->priority < b->priority); break;
    case TOP_JK_NPROC: c = cmp_u64(a->nproc, b->nproc); break;
    case TOP_JK_COUNT: break;
    }
    c = c > 0 ? 1 : c < 0 ? -1 : 0;
    if (desc)
        c = -c;
    if (c == 0)
        c = strcmp(a->id, b->id);
    return c > 0 ? 1 : c < 0 ? -1 : 0;
}

/* qsort has no context argument; a merge sort with one is short and stable. */
typedef int (*cmp_ctx_fn)(const void *ctx, size_t a, size_t b);

static void merge_sort(size_t *v, size_t *tmp, size_t n, cmp_ctx_fn cmp, const void *ctx)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(v, tmp, h, cmp, ctx);
    merge_sort(v + h, tmp, n - h, cmp, ctx);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n)
        tmp[o++] = cmp(ctx, v[i], v[j]) <= 0 ? v[i++] : v[j++];
    while (i < h)
        tmp[o++] = v[i++];
    while (j < n)
        tmp[o++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

struct proc_ctx { const struct top_model *m; enum top_proc_key k; bool desc; };
static int proc_ctx_cmp(const void *ctx, size_t a, size_t b)
{
    const struct proc_ctx *c = ctx;
    return top_proc_cmp(c->m, &c->m->procs[a], &c->m->procs[b], c->k, c->desc);
}

struct job_ctx { const struct top_model *m; enum top_job_key k; bool desc; };
static int job_ctx_cmp(const void *ctx, size_t a, size_t b)
{
    const struct job_ctx *c = ctx;
    return top_job_cmp(&c->m->jobs[a], &c->m->jobs[b], c->k, c->desc);
}

static bool match(const char *hay, const char *needle)
{
    return strcasestr(hay, needle) != NULL;
}

static bool proc_passes(const struct top_model *m, const struct top_proc *p, const char *filter)
{
    if (!filter || !*filter)
        return true;
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    return match(pid, filter) || match(p->user, filter) || match(proc_job_name(m, p), filter) ||
           match(p->cmd, filter);
}

size_t top_sort_procs(const struct top_model *m, size_t *order, enum top_proc_key k, bool desc,
                      const char *filter, uint64_t gpu_mask, int only_job)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nproc; i++) {
        const struct top_proc *p = &m->procs[i];
        if (only_job >= 0 && p->job != only_job)
            continue;
        if (p->gpu >= 0 && p->gpu < 64 && !(gpu_mask >> p->gpu & 1))
            continue;
        if (!proc_passes(m, p, filter))
            continue;
        order[n++] = i;
    }
    size_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (tmp) {
        struct proc_ctx c = { m, k, desc };
        merge_sort(order, tmp, n, proc_ctx_cmp, &c);
        free(tmp);
    }
    return n;
}

size_t top_sort_jobs(const struct top_model *m, size_t *order, enum top_job_key k, bool desc, const char *filter)
{
    size_t n = 0;
    for (size_t i = 0; i < m->njob; i++) {
        const struct top_job *j = &m->jobs[i];
        if (filter && *filter && !match(j->name, filter) && !match(j->owner, filter) && !match(j->id, filter))
            continue;
        order[n++] = i;
    }
    size_t tmp[TOP_MAX_JOBS];
    struct job_ctx c = { m, k, desc };
    merge_sort(order, tmp, n, job_ctx_cmp, &c);
    return n;
}
