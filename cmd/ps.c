/* vgpu ps: the jobs, their limits and their usage. */
static const char usage[] =
    "usage: vgpu ps [--json] [-q]\n"
    "\n"
    "List the jobs started with vgpu run: id, name, owner, live processes, GPUs, memory limit,\n"
    "memory used as vgpu accounts it (USED) and as the driver reports it for the job's\n"
    "processes (NVML), core limit, GPU time share (frozen at the job's end), priority (high,\n"
    "normal or low, as vgpu top and acct spell it) and age. The\n"
    "table fits COLUMNS or the terminal (not a pipe); a cut value ends in '+'.\n"
    "Processes that died are reaped first, so their memory no longer counts, and GPU-time\n"
    "schedules no process is in any more are removed.\n"
    "GPU processes that descend from a job but run without the limiter (a child that unset\n"
    "LD_PRELOAD, a static binary) count in the job's NVML figure and are flagged under its\n"
    "row: '! 3.2 GiB outside the limiter (pid 1234)'; the job's own allocations are refused\n"
    "while the whole is over its limit.\n"
    "An oversubscribed job (vgpu run --oversubscribe) gets a line per GPU: '~ 3 GiB of 4.50 GiB\n"
    "off the device (at most 2 GiB on GPU 0)', ending ', migrating 6.2 GB/s' while that memory\n"
    "moves at 100 MB/s or more: its share of the GPU's PCIe traffic (which also counts\n"
    "host<->device copies) over 100 ms, which ps waits for only when a job has memory off the\n"
    "device (see vgpu-ps(1)).\n"
    "A job of vgpu run --user found over its memory limit by NVML's count (it forged its usage)\n"
    "gets '! over its memory limit: GPU 0: 3.39 GiB used (NVML) ... killed\n"
    "(--over-limit kill)'. A job whose command has ended is shown for 60 s more, with its\n"
    "status in the PIDS column ('exited 3', 'killed SIGTERM') and no memory in use, so that\n"
    "vgpu wait can still get it.\n"
    "\n"
    "  --json      one JSON document (schema 1); sizes in bytes, ages in seconds\n"
    "  -q, --quiet job ids only, one a line\n"
    "  --help      show this help\n"
    "\n"
    "Only jobs you can read are shown (job files are 0600): your own, or, for root, every job\n"
    "in the state directory (root's is /run/vgpu; see VGPU_STATE_DIR in vgpu-run(1)).\n"
    "\n"
    "Exit status: 0 listed (also when there are no jobs); 1 the state directory cannot be read;\n"
    "6 the state directory is unsafe (another user's, or group/world-writable).\n";

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "common.h"
#include "ps/migrate.h"
#include "ps/table.h"
#include "vgpu/exitcode.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/sched.h"
#include "vgpu/outside.h"
#include "vgpu/overlimit.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_ps;

static const struct option options[] = {
    { "json", no_argument, NULL, 'j' },
    { "quiet", no_argument, NULL, 'q' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

#define MAX_PIDS VGPU_REGION_MAX_SLOTS   /* every process: the NVML figure sums them all */

/* What ps shows of one job, gathered once so the table and JSON agree. */
struct job_view {
    const struct vgpu_region *r;
    unsigned npids;                       /* may exceed MAX_PIDS */
    pid_t pids[MAX_PIDS];
    int32_t host_pids[MAX_PIDS];
    bool nvml_ok[VGPU_REGION_MAX_DEVICES];
    uint64_t nvml_used[VGPU_REGION_MAX_DEVICES];
    struct vgpu_outside outside[VGPU_REGION_MAX_DEVICES];  /* its GPU processes outside the limiter */
    uint64_t age_s;
    uint64_t life_ns;                     /* running time: to its end once it has ended */
    bool exited;                          /* the command ended: nothing of it counts any more */
    char log[4200];                       /* the job's output log (vgpu run --detach), or "" */
};

/* One NVML process list per GPU for the whole listing: asking for it once per job made ps
 * with J jobs on a GPU of P processes cost J x P (issue 14, item 5). Likewise the parents read
 * for the outside-the-limiter check are kept for the whole listing. */
static struct gpu_procs {
    char uuid[VGPU_REGION_UUID_LEN];
    bool ok;
    unsigned count;
    nvmlProcessInfo_t *infos;
} gpu_procs[64];
static unsigned ngpu_procs;
static struct vgpu_outside_memo parents;
/* The rate of migration of oversubscribed jobs, measured once, at the first such job (ps/migrate.h). */
static struct ps_migration *migration;

static const struct gpu_procs *procs_of(struct vgpu_nvml *nv, const char *uuid)
{
    for (unsigned i = 0; i < ngpu_procs; i++)
        if (strcmp(gpu_procs[i].uuid, uuid) == 0)
            return &gpu_procs[i];
    static struct gpu_procs none;
    struct gpu_procs *g = ngpu_procs < sizeof gpu_procs / sizeof gpu_procs[0] ? &gpu_procs[ngpu_procs++] : &none;
    free(g->infos);
    memset(g, 0, sizeof *g);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    nvmlDevice_t h;
    if (!nv || !nv->nvmlDeviceGetHandleByUUID || !nv->nvmlDeviceGetComputeRunningProcesses_v3 ||
        nv->nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS)
        return g;
    unsigned count = 0;
    nvmlReturn_t rc = nv->nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL);
    /* The two-call protocol; processes may appear between the calls, so leave room. */
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        count += 8;
        g->infos = calloc(count, sizeof *g->infos);
        if (!g->infos)
            return g;
        rc = nv->nvmlDeviceGetComputeRunningProcesses_v3(h, &count, g->infos);
    }
    if (rc != NVML_SUCCESS)
        return g;
    g->ok = true;
    g->count = g->infos ? count : 0;
    return g;
}

static void procs_forget(void)
{
    for (unsigned i = 0; i < ngpu_procs; i++)
        free(gpu_procs[i].infos);
    memset(gpu_procs, 0, sizeof gpu_procs);
    ngpu_procs = 0;
    vgpu_outside_memo_free(&parents);
}

static int cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The driver's view: memory of the job's processes (by host pid) on each job GPU. */
static void nvml_usage(struct vgpu_nvml *nv, struct job_view *v)
{
    unsigned ndev = vgpu_region_device_count(v->r);
    /* The job's host pids, sorted, so each NVML process is a binary search (it was a scan). */
    unsigned nmine = v->npids < MAX_PIDS ? v->npids : MAX_PIDS;
    int32_t *mine = malloc((nmine + 1) * sizeof *mine);
    if (mine) {
        memcpy(mine, v->host_pids, nmine * sizeof *mine);
        qsort(mine, nmine, sizeof *mine, cmp_int32);
    }
    for (unsigned d = 0; d < ndev; d++) {
        v->nvml_ok[d] = false;
        v->nvml_used[d] = 0;
        const struct gpu_procs *g = procs_of(nv, v->r->info->dev[d].uuid);
        if (!g->ok || !mine)
            continue;
        unsigned count = g->count;
        const nvmlProcessInfo_t *infos = g->infos;
        v->nvml_ok[d] = true;
        unsigned *pids = calloc(count + 1, sizeof *pids);
        uint64_t *bytes = calloc(count + 1, sizeof *bytes);
        for (unsigned i = 0; i < count && infos; i++) {
            int32_t key = (int32_t)infos[i].pid;
            if (bsearch(&key, mine, nmine, sizeof *mine, cmp_int32)) {
                if (infos[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE)
                    v->nvml_ok[d] = false;   /* no per-process figure (some MIG setups): unknown */
                else
                    v->nvml_used[d] += infos[i].usedGpuMemory;
            }
            if (pids && bytes) {
                pids[i] = infos[i].pid;
                bytes[i] = infos[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE ? 0 : infos[i].usedGpuMemory;
            }
        }
        if (pids && bytes && vgpu_outside_find_memo(v->r, pids, bytes, count, &parents, &v->outside[d])) {
            v->nvml_used[d] += v->outside[d].bytes;
            /* The job's processes learn it from here too (they count it against the limit). */
            vgpu_region_set_outside((struct vgpu_region *)v->r, d, v->outside[d].bytes,
                                    v->outside[d].count ? v->outside[d].pid[0] : 0, v->outside[d].count);
        }
        free(pids);
        free(bytes);
    }
    free(mine);
}

static void gather(struct vgpu_nvml *nv, const struct vgpu_region *r, struct job_view *v)
{
    memset(v, 0, sizeof *v);
    v->r = r;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    uint64_t created = r->hdr->created_realtime_ns;
    v->age_s = now > created ? (now - created) / 1000000000ULL : 0;
    size_t len = strlen(r->path);
    struct stat st;
    if (len > 7 && len - 7 + 5 <= sizeof v->log) {
        memcpy(v->log, r->path, len - 7);
        memcpy(v->log + len - 7, ".log", 5);
        if (stat(v->log, &st) < 0)
            v->log[0] = '\0';
    }
    v->exited = atomic_load(&r->hdr->state) == VGPU_JOB_EXITED;
    /* GPU% is GPU time over the time the job ran: frozen at its end (it was divided by the
     * growing age, so an ended 50% job showed 6% twenty seconds later). */
    uint64_t ended = v->exited ? atomic_load(&r->hdr->exited_realtime_ns) : 0;
    uint64_t until = ended && ended < now ? ended : now;
    v->life_ns = until > created ? until - created : 0;
    if (v->exited) {
        /* The job is over: processes it left behind no longer belong to it. */
        v->npids = 0;
        return;
    }
    v->npids = vgpu_region_pids(r, v->pids, v->host_pids, MAX_PIDS);
    nvml_usage(nv, v);
}

/* "exited 3" or "killed SIGTERM". */
static void exit_text(const struct vgpu_region_header *h, char *buf, size_t len)
{
    int sig = atomic_load(&h->exit_signal);
    char s[16];
    if (sig)
        snprintf(buf, len, "killed %s", vgpu_signal_name(sig, s, sizeof s));
    else
        snprintf(buf, len, "exited %d", atomic_load(&h->exit_code));
}

static const char *user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(buf, len, "%s", pw->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
    return buf;
}

/* "4G" when every GPU has the same value, else "4G,8G" in job GPU order; "-" for none. */
static void per_device(const struct job_view *v, uint64_t (*get)(const struct job_view *, unsigned, bool *),
                       char *buf, size_t len)
{
    unsigned n = vgpu_region_device_count(v->r);
    bool all_same = true, ok0;
    uint64_t first = get(v, 0, &ok0);
    for (unsigned d = 1; d < n; d++) {
        bool ok;
        if (get(v, d, &ok) != first || ok != ok0)
            all_same = false;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned d = 0; d < (all_same ? 1 : n) && used < len; d++) {
        bool ok;
        uint64_t val = get(v, d, &ok);
        char s[32];
        if (!ok)
            snprintf(s, sizeof s, "-");
        else
            vgpu_format_size_short(val, s, sizeof s);
        used += (size_t)snprintf(buf + used, len - used, "%s%s", d ? "," : "", s);
    }
}

static uint64_t get_limit(const struct job_view *v, unsigned d, bool *ok)
{
    uint64_t l = vgpu_region_mem_limit(v->r, d);
    *ok = l != 0;
    return l;
}

static uint64_t get_used(const struct job_view *v, unsigned d, bool *ok)
{
    *ok = !v->exited;
    return v->exited ? 0 : vgpu_region_mem_used(v->r, d);
}

static uint64_t get_nvml(const struct job_view *v, unsigned d, bool *ok)
{
    *ok = v->nvml_ok[d];
    return v->nvml_used[d];
}

static uint64_t get_core(const struct job_view *v, unsigned d, bool *ok)
{
    uint32_t c = atomic_load(&v->r->hdr->dev[d].core_limit);
    *ok = c != 0;
    return c;
}

/* "  ! 3.2 GiB outside the limiter (pid 1234)" under a job with such processes. */
static void print_outside(struct ps_table *t, const struct job_view *v)
{
    uint64_t total = 0;
    unsigned count = 0;
    char list[56] = "";   /* fits the note cell with the rest of the line */
    size_t n = 0;
    for (unsigned d = 0; d < vgpu_region_device_count(v->r); d++) {
        total += v->outside[d].bytes;
        count += v->outside[d].count;
        for (unsigned i = 0; i < v->outside[d].count && i < VGPU_OUTSIDE_MAX_PIDS && n < sizeof list - 16; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", (int)v->outside[d].pid[i]);
    }
    if (!count)
        return;
    char size[32], line[PS_TABLE_CELL];
    /* The result is checked so that a long pid list is cut visibly (and -O1 builds do not warn). */
    if (snprintf(line, sizeof line, "  ! %s outside the limiter (%s %s%s)", vgpu_format_size(total, size, sizeof size),
                 count == 1 ? "pid" : "pids", list, count > VGPU_OUTSIDE_MAX_PIDS ? ", ..." : "") >= (int)sizeof line)
        memcpy(line + sizeof line - 5, "...)", 5);
    if (ps_table_note(t, line) < 0)
        vgpu_warn("out of memory: a job's processes outside the limiter are not shown");
}

/* "  ~ 2 GiB of 3.5 GiB off the device (at most 2 GiB on GPU 0)" under an oversubscribed job,
 * and ", migrating 1.2 GB/s" while its share of the GPU's PCIe traffic is high (ps/migrate.h). */
static void print_oversub(struct ps_table *t, const struct job_view *v)
{
    unsigned ndev = vgpu_region_device_count(v->r);
    for (unsigned d = 0; d < ndev && !v->exited; d++) {
        uint64_t share;
        if (!vgpu_region_oversub(v->r, d, &share))
            continue;
        char off[32], used[32], sh[32], line[PS_TABLE_CELL], rate[48] = "", rt[24];
        uint64_t u = vgpu_region_mem_used(v->r, d);
        double bps;
        if (ps_migration_of(migration, v->r, d, &bps) && bps >= VGPU_MIGRATION_HIGH_BPS)
            snprintf(rate, sizeof rate, ", migrating %s", vgpu_format_rate(bps, rt, sizeof rt));
        if (snprintf(line, sizeof line, "  ~ %s of %s off the device (at most %s on GPU %u)%s",
                     vgpu_format_size(vgpu_region_mem_spilled(v->r, d), off, sizeof off),
                     vgpu_format_size(u, used, sizeof used),
                     share == UINT64_MAX ? "what is free" : vgpu_format_size(share, sh, sizeof sh),
                     v->r->hdr->dev[d].nvml_index, rate) >= (int)sizeof line)
            memcpy(line + sizeof line - 5, "...)", 5);
        if (ps_table_note(t, line) < 0)
            vgpu_warn("out of memory: a job's oversubscription is not shown");
    }
}

/* "  + 3 GiB borrowed past its request of 2 GiB on GPU 0 (limit 8 GiB, 1 GiB demoted)" under a job
 * that lends (--mem REQUEST:LIMIT): demoted is what its processes moved to host memory to give
 * way to another job's request (decision 13's squeeze, lib/hook/squeeze.c). */
static void print_lent(struct ps_table *t, const struct job_view *v)
{
    unsigned ndev = vgpu_region_device_count(v->r);
    for (unsigned d = 0; d < ndev && !v->exited; d++) {
        uint64_t req;
        if (!vgpu_region_lending(v->r, d, &req))
            continue;
        char bo[32], rq[32], lim[32], dm[32], line[PS_TABLE_CELL];
        if (snprintf(line, sizeof line, "  + %s borrowed past its request of %s on GPU %u (limit %s, %s demoted)",
                     vgpu_format_size(vgpu_region_mem_borrowed(v->r, d), bo, sizeof bo),
                     vgpu_format_size(req, rq, sizeof rq), v->r->hdr->dev[d].nvml_index,
                     vgpu_format_size(vgpu_region_mem_limit(v->r, d), lim, sizeof lim),
                     vgpu_format_size(vgpu_region_mem_demoted(v->r, d), dm, sizeof dm)) >= (int)sizeof line)
            memcpy(line + sizeof line - 5, "...)", 5);
        if (ps_table_note(t, line) < 0)
            vgpu_warn("out of memory: a job's borrowed memory is not shown");
    }
}

/* "  ! over its memory limit: GPU 0: 3.9 GiB used (NVML) ... killed (--over-limit kill)" under a
 * --user job that its watcher found over its limit (vgpu/overlimit.h). */
static void print_over_limit(struct ps_table *t, const struct job_view *v)
{
    char reason[200], line[PS_TABLE_CELL];
    if (!vgpu_overlimit_reason(v->r->hdr, reason, sizeof reason))
        return;
    if (snprintf(line, sizeof line, "  ! over its memory limit: %s", reason) >= (int)sizeof line)
        memcpy(line + sizeof line - 5, "...)", 5);
    if (ps_table_note(t, line) < 0)
        vgpu_warn("out of memory: a job's memory watch is not shown");
}

/* The table's columns (cmd/ps/table.c fits them to the terminal). */
enum { C_ID, C_NAME, C_USER, C_PIDS, C_GPUS, C_LIMIT, C_USED, C_NVML, C_CORE, C_SHARE, C_THROTL, C_PRIO, C_AGE, NCOL };
static const struct ps_col columns[NCOL] = {
    [C_ID] = { "ID", 12, 12, 0 },         [C_NAME] = { "NAME", 6, 14, 1 },      [C_USER] = { "USER", 4, 8, 2 },
    [C_PIDS] = { "PIDS", 4, 0, 3 },       [C_GPUS] = { "GPUS", 4, 0, 0 },       [C_LIMIT] = { "MEM LIMIT", 9, 0, 0 },
    [C_USED] = { "USED", 4, 0, 0 },       [C_NVML] = { "NVML USED", 9, 0, 0 },  [C_CORE] = { "CORE", 4, 0, 0 },
    [C_SHARE] = { "GPU%", 4, 0, 0 },      [C_THROTL] = { "THROTL", 6, 0, 0 },   [C_AGE] = { "AGE", 3, 0, 0 },
    [C_PRIO] = { "PRIO", 4, 0, 0 },
};

static void print_row(struct ps_table *t, const struct job_view *v)
{
    const struct vgpu_region_header *h = v->r->hdr, *k = v->r->info;
    char user[64], pids[96] = "", gpus[96] = "", lim[96], used[96], nvu[96], core[64] = "", age[32];
    size_t n = 0;
    for (unsigned p = 0; p < v->npids && p < MAX_PIDS && n < sizeof pids - 16; p++)
        n += (size_t)snprintf(pids + n, sizeof pids - n, "%s%d", p ? "," : "", (int)v->pids[p]);
    if (v->npids > MAX_PIDS || n >= sizeof pids - 16)
        snprintf(pids + (n < sizeof pids - 4 ? n : sizeof pids - 4), 4, "...");
    if (!v->npids)
        snprintf(pids, sizeof pids, "-");
    if (v->exited)
        exit_text(h, pids, sizeof pids);
    n = 0;
    unsigned ndev = vgpu_region_device_count(v->r);
    for (unsigned d = 0; d < ndev && n < sizeof gpus; d++)
        n += (size_t)snprintf(gpus + n, sizeof gpus - n, "%s%u", d ? "," : "", k->dev[d].nvml_index);
    per_device(v, get_limit, lim, sizeof lim);
    per_device(v, get_used, used, sizeof used);
    per_device(v, get_nvml, nvu, sizeof nvu);
    /* Percent values: reuse the table helper through a tiny formatter. */
    n = 0;
    bool any_core = false;
    for (unsigned d = 0; d < ndev; d++) {
        bool ok;
        uint64_t c = get_core(v, d, &ok);
        any_core |= ok;
        if (n < sizeof core)
            n += ok ? (size_t)snprintf(core + n, sizeof core - n, "%s%llu%%", d ? "," : "", (unsigned long long)c)
                    : (size_t)snprintf(core + n, sizeof core - n, "%s-", d ? "," : "");
    }
    if (!any_core)
        snprintf(core, sizeof core, "-");
    /* The compute limiter's counters: GPU time used as a share of the job's lifetime, on each of
     * its GPUs as CORE lists their caps (a job of several GPUs has a turn on each: DESIGN.md
     * decision 11), and the time its launches waited for their turn (all GPUs). */
    char share[96] = "-", throt[16] = "-";
    uint64_t waited = 0;
    size_t sn = 0;
    for (unsigned d = 0; d < ndev; d++) {
        uint64_t g = atomic_load(&v->r->use->dev[d].gpu_time_ns);
        waited += atomic_load(&v->r->use->dev[d].throttled_ns);
        if (any_core && v->life_ns >= 1000000000ULL && sn < sizeof share)
            sn += (size_t)snprintf(share + sn, sizeof share - sn, "%s%llu%%", d ? "," : "",
                                   (unsigned long long)(g * 100 / v->life_ns));
    }
    if (any_core)
        snprintf(throt, sizeof throt, "%.1fs", waited / 1e9);
    vgpu_format_duration(v->age_s, age, sizeof age);
    const char *cells[NCOL] = {
        [C_ID] = k->id, [C_NAME] = k->name[0] ? k->name : "-", [C_USER] = user_name(vgpu_region_job_uid(v->r), user, sizeof user),
        [C_PIDS] = pids, [C_GPUS] = gpus, [C_LIMIT] = lim, [C_USED] = used, [C_NVML] = nvu, [C_CORE] = core,
        [C_SHARE] = share, [C_THROTL] = throt, [C_AGE] = age,
        [C_PRIO] = vgpu_priority_name(atomic_load(&h->dev[0].priority)),
    };
    if (ps_table_add(t, cells) < 0)
        vgpu_warn("out of memory: job %s is not shown", k->id);
    print_outside(t, v);
    print_oversub(t, v);
    print_lent(t, v);
    print_over_limit(t, v);
}

/* A job whose region cannot be read (issue 36 N14): it was left out, so that it seemed gone while
 * its processes ran on. Listed by id and owner, marked damaged, with why. Its processes keep the
 * limits they last saw (libvgpu.so never takes limits out of range, and a new process of it is
 * refused the GPU); vgpu limit and vgpu wait refuse it with exit 11. */
static void damaged_job(struct ps_table *t, struct json_object *damaged, const struct vgpu_job_ref *ref, bool quiet,
                        bool json)
{
    char user[64];
    if (quiet)
        return;             /* -q lists the jobs that commands can use */
    if (json) {
        struct json_object *o = json_object_new_object();
        vgpu_json_str(o, "id", ref->id);
        vgpu_json_u64(o, "owner_uid", ref->owner);
        vgpu_json_str(o, "owner", user_name(ref->owner, user, sizeof user));
        vgpu_json_str(o, "why", ref->damaged_why);
        json_object_array_add(damaged, o);
        return;
    }
    const char *cells[NCOL] = {
        [C_ID] = ref->id, [C_NAME] = "-", [C_USER] = user_name(ref->owner, user, sizeof user), [C_PIDS] = "damaged",
        [C_GPUS] = "-", [C_LIMIT] = "-", [C_USED] = "-", [C_NVML] = "-", [C_CORE] = "-", [C_SHARE] = "-",
        [C_THROTL] = "-", [C_AGE] = "-", [C_PRIO] = "-",
    };
    char note[700];
    snprintf(note, sizeof note, "  ! region damaged: %s", ref->damaged_why);
    if (ps_table_add(t, cells) < 0 || ps_table_note(t, note) < 0)
        vgpu_warn("out of memory: job %s is not shown", ref->id);
}

static struct json_object *json_job(const struct job_view *v)
{
    const struct vgpu_region_header *h = v->r->hdr, *k = v->r->info;
    struct json_object *o = json_object_new_object();
    char user[64];
    vgpu_json_str(o, "id", k->id);
    vgpu_json_str(o, "name", k->name[0] ? k->name : NULL);
    vgpu_json_u64(o, "owner_uid", vgpu_region_job_uid(v->r));
    vgpu_json_str(o, "owner", user_name(vgpu_region_job_uid(v->r), user, sizeof user));
    vgpu_json_str(o, "command", k->cmdline);
    vgpu_json_i64(o, "creator_pid", k->creator_pid);
    vgpu_json_u64(o, "age_seconds", v->age_s);
    /* Milliseconds: nanoseconds since 1970 pass 2^53, which jq and JavaScript cannot hold. */
    vgpu_json_u64(o, "created_unix_ms", k->created_realtime_ns / 1000000);
    uint32_t st = atomic_load(&h->state);
    vgpu_json_str(o, "state", st == VGPU_JOB_RUNNING ? "running" : st == VGPU_JOB_EXITED ? "exited" : "starting");
    int sig = v->exited ? atomic_load(&h->exit_signal) : 0;
    char sigbuf[16];
    bool normal = v->exited && !sig;
    vgpu_json_u64_or_null(o, "exit_code", normal, normal ? (uint64_t)(atomic_load(&h->exit_code) & 0xff) : 0);
    vgpu_json_str(o, "exit_signal", sig ? vgpu_signal_name(sig, sigbuf, sizeof sigbuf) : NULL);
    vgpu_json_str(o, "log", v->log[0] ? v->log : NULL);
    /* The memory watch of a --user job (vgpu/overlimit.h): its policy, and what it last did. */
    uint32_t ow = atomic_load_explicit(&h->over_limit, memory_order_acquire);
    char reason[200];
    bool over_rec = vgpu_overlimit_reason(h, reason, sizeof reason);
    vgpu_json_str(o, "over_limit_policy", vgpu_overlimit_policy_name(vgpu_overlimit_policy_of(ow)));
    vgpu_json_str(o, "over_limit", over_rec ? vgpu_overlimit_action_name(vgpu_overlimit_action_of(ow)) : NULL);
    vgpu_json_str(o, "over_limit_reason", over_rec ? reason : NULL);
    struct json_object *pids = json_object_new_array();
    for (unsigned p = 0; p < v->npids && p < MAX_PIDS; p++) {
        struct json_object *po = json_object_new_object();
        vgpu_json_i64(po, "pid", v->pids[p]);
        vgpu_json_u64_or_null(po, "host_pid", v->host_pids[p] > 0, (uint64_t)v->host_pids[p]);
        json_object_array_add(pids, po);
    }
    json_object_object_add(o, "processes", pids);
    struct json_object *gpus = json_object_new_array();
    unsigned ndev = vgpu_region_device_count(v->r);
    uint64_t sum_used = 0, sum_outside = 0, sum_off = 0, sum_borrowed = 0, sum_demoted = 0;
    double sum_rate = 0;
    bool rate_known = false, rate_unknown = false;
    struct json_object *outside = json_object_new_array();
    for (unsigned d = 0; d < ndev; d++) {
        const struct vgpu_region_dev_limits *dl = &h->dev[d];
        struct json_object *g = json_object_new_object();
        bool ok;
        vgpu_json_u64(g, "job_index", d);
        vgpu_json_u64(g, "nvml_index", dl->nvml_index);
        vgpu_json_str(g, "uuid", dl->uuid);
        vgpu_json_u64_or_null(g, "mem_total_bytes", dl->mem_total != 0, dl->mem_total);
        uint64_t lim = get_limit(v, d, &ok);
        vgpu_json_u64_or_null(g, "mem_limit_bytes", ok, lim);
        /* Lent memory (--mem REQUEST:LIMIT): the promise, what is used past it, and of that what
         * was demoted to host memory to give way to another job's request (the squeeze). */
        uint64_t req = vgpu_region_mem_request(v->r, d);
        uint64_t borrowed = v->exited ? 0 : vgpu_region_mem_borrowed(v->r, d);
        uint64_t demoted = v->exited ? 0 : vgpu_region_mem_demoted(v->r, d);
        vgpu_json_u64_or_null(g, "mem_request_bytes", ok && lim, req);
        vgpu_json_u64(g, "mem_borrowed_bytes", borrowed);
        vgpu_json_u64(g, "mem_demoted_bytes", demoted);
        sum_borrowed += borrowed;
        sum_demoted += demoted;
        uint64_t used = v->exited ? 0 : vgpu_region_mem_used(v->r, d);
        sum_used += used;
        vgpu_json_u64(g, "mem_used_bytes", used);
        vgpu_json_u64(g, "mem_peak_bytes", atomic_load(&v->r->use->dev[d].peak));
        vgpu_json_u64_or_null(g, "nvml_used_bytes", v->nvml_ok[d], v->nvml_used[d]);
        vgpu_json_u64_or_null(g, "outside_bytes", v->nvml_ok[d], v->outside[d].bytes);
        uint64_t share = 0, off = v->exited ? 0 : vgpu_region_mem_spilled(v->r, d);
        bool over = vgpu_region_oversub(v->r, d, &share);
        sum_off += off;
        vgpu_json_bool(g, "oversubscribed", over);
        vgpu_json_u64_or_null(g, "mem_device_limit_bytes", over && share != UINT64_MAX, share);
        vgpu_json_u64(g, "mem_on_device_bytes", used > off ? used - off : 0);
        vgpu_json_u64(g, "mem_off_device_bytes", off);
        double bps = 0;
        bool known = ps_migration_of(migration, v->r, d, &bps);
        vgpu_json_u64_or_null(g, "migration_bytes_per_s", known, (uint64_t)(bps + 0.5));
        sum_rate += known ? bps : 0;
        rate_known |= known;
        rate_unknown |= over && !known;
        sum_outside += v->outside[d].bytes;
        for (unsigned i = 0; i < v->outside[d].count && i < VGPU_OUTSIDE_MAX_PIDS; i++) {
            struct json_object *po = json_object_new_object();
            vgpu_json_i64(po, "pid", v->outside[d].pid[i]);
            vgpu_json_u64(po, "job_index", d);
            vgpu_json_u64(po, "used_bytes", v->outside[d].pid_bytes[i]);
            json_object_array_add(outside, po);
        }
        uint64_t core = get_core(v, d, &ok);
        vgpu_json_u64_or_null(g, "core_limit_percent", ok, core);
        uint32_t pol = atomic_load(&dl->core_policy);
        vgpu_json_str(g, "core_policy", ok ? (pol == VGPU_CORE_SOFT ? "soft" : "hard") : NULL);
        vgpu_json_str(g, "priority", vgpu_priority_name(atomic_load(&dl->priority)));
        vgpu_json_u64(g, "gpu_time_ns", atomic_load(&v->r->use->dev[d].gpu_time_ns));
        vgpu_json_u64(g, "throttled_ns", atomic_load(&v->r->use->dev[d].throttled_ns));
        json_object_array_add(gpus, g);
    }
    json_object_object_add(o, "gpus", gpus);
    vgpu_json_u64(o, "mem_used_bytes", sum_used);
    vgpu_json_u64(o, "mem_borrowed_bytes", sum_borrowed);
    vgpu_json_u64(o, "mem_demoted_bytes", sum_demoted);
    vgpu_json_u64(o, "outside_bytes", sum_outside);
    json_object_object_add(o, "outside_processes", outside);
    vgpu_json_u64(o, "mem_on_device_bytes", sum_used > sum_off ? sum_used - sum_off : 0);
    vgpu_json_u64(o, "mem_off_device_bytes", sum_off);
    /* Known only when known on every GPU where the job is oversubscribed. */
    vgpu_json_u64_or_null(o, "migration_bytes_per_s", rate_known && !rate_unknown, (uint64_t)(sum_rate + 0.5));
    return o;
}

static int cmd_ps(int argc, char **argv)
{
    bool json = false, quiet = false;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_ps, argc, argv, "q")) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'q': quiet = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_ps, "unexpected argument '%s'", argv[optind]);

    struct vgpu_err e;
    char statedir[4096];
    struct vgpu_job_ref *refs = NULL;
    size_t n = 0;
    unsigned corrupt = 0;
    /* No state directory (""): no job was ever started by this user, but root may have started
     * some as this user (vgpu run --user). */
    if (vgpu_statedir_or_none(statedir, sizeof statedir, &e) < 0 ||
        vgpu_jobs_list_all_damaged(statedir, &refs, &n, &corrupt, &e) < 0)
        return vgpu_err_report(&e);
    /* Like dead processes, GPU-time schedules nobody is in any more are cleaned up by readers:
     * their last user may have been another user, who may not remove them (vgpu/sched.h). */
    vgpu_sched_sweep();
    /* Said, so that nobody takes the jobs' files for bad ones: they are read by copy there. */
    struct statvfs fs;
    if (statedir[0] && statvfs(statedir, &fs) == 0 && (fs.f_flag & ST_RDONLY))
        vgpu_warn("the state directory %s is on a read-only file system: jobs are shown as they are, but dead "
                  "processes are not reaped and ended jobs not removed until it is writable again", statedir);
    /* Damaged regions are listed below, marked so; the count is of the other files (a symlink or a
     * FIFO named like a job). */
    for (size_t i = 0; i < n; i++)
        if (refs[i].damaged && !refs[i].misnamed && corrupt)
            corrupt--;
    if (corrupt)
        vgpu_warn("%u job file%s in %s/jobs could not be read (corrupt or from another vgpu version); "
                  "run with VGPU_LOG=debug, or remove them", corrupt, corrupt == 1 ? "" : "s", statedir);

    /* NVML is optional here: without it the driver's view is shown as unavailable. */
    struct vgpu_nvml *nv = NULL;
    if (!quiet) {
        nv = vgpu_nvml_open(&e);
        if (!nv)
            vgpu_debug("no driver view of memory: %s", e.msg);
        migration = ps_migration_new(nv, refs, n);
    }
    struct json_object *doc = NULL, *jobs = NULL, *damaged = NULL;
    if (json) {
        doc = vgpu_json_doc();
        jobs = json_object_new_array();
        damaged = json_object_new_array();
    }
    struct ps_table table;
    ps_table_init(&table, columns, NCOL);
    unsigned hidden = 0;
    struct job_view *v = malloc(sizeof *v);
    for (size_t i = 0; i < n && v; i++) {
        if (refs[i].misnamed)
            continue;               /* a copy of a job under another name is no job (counted above) */
        if (refs[i].damaged) {
            damaged_job(&table, damaged, &refs[i], quiet, json);
            continue;
        }
        if (!refs[i].readable) {
            hidden++;
            continue;
        }
        struct vgpu_region r;
        if (vgpu_region_open(&r, refs[i].path, VGPU_REGION_VIEW, &e) < 0) {
            if (e.code != VGPU_EXIT_NOT_FOUND)   /* gone since the listing: it ended */
                vgpu_warn("%s", e.msg);
            continue;
        }
        if (vgpu_region_check(&r) != 0) {        /* truncated since it was opened */
            vgpu_warn("%s; job %s is not shown", r.damaged_why, r.info->id);
            vgpu_region_close(&r);
            continue;
        }
        if (quiet) {
            if (json)
                json_object_array_add(jobs, json_object_new_string(r.info->id));
            else
                printf("%s\n", r.info->id);
        } else {
            gather(nv, &r, v);
            if (json)
                json_object_array_add(jobs, json_job(v));
            else
                print_row(&table, v);
        }
        vgpu_region_close(&r);
    }
    free(v);
    free(refs);
    procs_forget();
    ps_migration_free(migration);
    migration = NULL;
    if (nv)
        vgpu_nvml_close(nv);
    if (hidden)
        vgpu_info("%u job%s of other users not shown (their files are private to them)", hidden,
                  hidden == 1 ? "" : "s");
    if (json) {
        json_object_object_add(doc, "jobs", jobs);
        if (!quiet)
            json_object_object_add(doc, "damaged_jobs", damaged);
        else
            json_object_put(damaged);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
        return 0;
    }
    if (!quiet)
        ps_table_print(stdout, &table, ps_table_width());
    ps_table_free(&table);
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
    return 0;
}

const struct vgpu_cmd vgpu_cmd_ps = {
    .name = "ps",
    .fn = cmd_ps,
    .summary = "list the jobs: limits, processes, memory used",
    .usage = usage,
    .options = options,
};
