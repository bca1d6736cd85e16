/* The memory watch of a --user job (see vgpu/overlimit.h). vgpu-side: it uses the NVML loader and
 * prints; libvgpu.so never links it (nothing of the library calls it). */
#include "vgpu/overlimit.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/proc.h"
#include "vgpu/units.h"
#include "vgpu/watchdog.h"

/* ---- words and the record --------------------------------------------------------------------- */

uint64_t vgpu_overlimit_slack(uint64_t limit)
{
    return limit / 20 > VGPU_OVERLIMIT_SLACK_MIN ? limit / 20 : VGPU_OVERLIMIT_SLACK_MIN;
}

static const char *const policy_names[] = { [VGPU_OVERLIMIT_KILL] = "kill", [VGPU_OVERLIMIT_STOP] = "stop",
                                            [VGPU_OVERLIMIT_WARN] = "warn" };
static const char *const action_names[] = { [VGPU_OVERLIMIT_WARNED] = "warned", [VGPU_OVERLIMIT_STOPPED] = "stopped",
                                            [VGPU_OVERLIMIT_KILLED] = "killed" };

int vgpu_overlimit_policy_parse(const char *word)
{
    for (unsigned p = VGPU_OVERLIMIT_KILL; p <= VGPU_OVERLIMIT_WARN; p++)
        if (word && strcmp(word, policy_names[p]) == 0)
            return (int)p;
    return -1;
}

const char *vgpu_overlimit_policy_name(unsigned policy)
{
    return policy >= VGPU_OVERLIMIT_KILL && policy <= VGPU_OVERLIMIT_WARN ? policy_names[policy] : NULL;
}

const char *vgpu_overlimit_action_name(unsigned action)
{
    return action >= VGPU_OVERLIMIT_WARNED && action <= VGPU_OVERLIMIT_KILLED ? action_names[action] : NULL;
}

bool vgpu_overlimit_reason(const struct vgpu_region_header *h, char *buf, size_t len)
{
    uint32_t w = atomic_load_explicit(&h->over_limit, memory_order_acquire);
    const char *act = vgpu_overlimit_action_name(vgpu_overlimit_action_of(w));
    const char *pol = vgpu_overlimit_policy_name(vgpu_overlimit_policy_of(w));
    if (len)
        buf[0] = '\0';
    if (!act || !pol)
        return false;
    unsigned dev = vgpu_overlimit_dev_of(w);
    char used[32], lim[32], times[32] = "";
    if (vgpu_overlimit_count_of(w) > 1)
        snprintf(times, sizeof times, " (%u times)", vgpu_overlimit_count_of(w));
    snprintf(buf, len, "GPU %u: %s used (NVML) over its limit of %s for 2 s: %s%s (--over-limit %s)",
             dev < VGPU_REGION_MAX_DEVICES ? h->dev[dev].nvml_index : dev,
             vgpu_format_size(atomic_load(&h->over_limit_bytes), used, sizeof used),
             vgpu_format_size(atomic_load(&h->over_limit_limit), lim, sizeof lim), act, times, pol);
    return true;
}

/* ---- the decision ----------------------------------------------------------------------------- */

bool vgpu_overlimit_due(struct vgpu_overlimit_dev *d, bool over, uint64_t now_ns)
{
    if (!over) {
        memset(d, 0, sizeof *d);
        return false;
    }
    if (!d->samples++)
        d->since_ns = now_ns;
    if (d->acted || d->samples < 2 || now_ns - d->since_ns < VGPU_OVERLIMIT_GRACE_NS)
        return false;
    d->acted = true;
    return true;
}

/* ---- whose processes -------------------------------------------------------------------------- */

/* The real uid of pid (/proc/PID/status "Uid:"), or -1 when it cannot be read (gone). */
static long real_uid(pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "\nUid:");
    return p ? strtol(p + 5, NULL, 10) : -1;
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The pids the job's live slots name (host pids: the creator's namespace, which is ours), sorted.
 * The job's user wrote them: they are only candidates (see job_process). */
struct slot_pids {
    pid_t pid[VGPU_REGION_MAX_SLOTS];
    unsigned n;
};

static void read_slot_pids(const struct vgpu_region *r, struct slot_pids *s)
{
    pid_t own[VGPU_REGION_MAX_SLOTS];
    int32_t host[VGPU_REGION_MAX_SLOTS];
    unsigned n = vgpu_region_pids(r, own, host, VGPU_REGION_MAX_SLOTS);
    s->n = 0;
    for (unsigned i = 0; i < n && i < VGPU_REGION_MAX_SLOTS; i++)
        if (host[i] > 1)
            s->pid[s->n++] = host[i];
    qsort(s->pid, s->n, sizeof s->pid[0], cmp_pid);
}

/* Whether pid is a process of the job that root may act on: of the job's user, and descending
 * from the job's vgpu run or named by a slot. Never the watcher itself or the job's vgpu run. */
static bool job_process(const struct vgpu_region *r, const struct slot_pids *s, pid_t pid)
{
    pid_t creator = r->info->creator_pid;
    if (pid <= 1 || pid == getpid() || pid == creator)
        return false;
    if (real_uid(pid) != (long)vgpu_region_job_uid(r))
        return false;
    return (s->n && bsearch(&pid, s->pid, s->n, sizeof s->pid[0], cmp_pid)) || vgpu_proc_descends(pid, &creator, 1);
}

/* ---- acting ----------------------------------------------------------------------------------- */

struct pid_set {
    pid_t *pid;
    unsigned n, cap;
};

static bool set_add(struct pid_set *s, pid_t pid)
{
    for (unsigned i = 0; i < s->n; i++)
        if (s->pid[i] == pid)
            return false;
    if (s->n == s->cap) {
        unsigned cap = s->cap ? s->cap * 2 : 64;
        pid_t *p = realloc(s->pid, cap * sizeof *p);
        if (!p)
            return false;
        s->pid = p;
        s->cap = cap;
    }
    s->pid[s->n++] = pid;
    return true;
}

/* Signals every process of the job once: the NVML ones, the slots', and every process of the
 * job's user under its vgpu run in /proc. Passes repeat while they find new ones (a process
 * forking meanwhile), at most 8. Returns how many were signalled. */
static unsigned signal_job(const struct vgpu_region *r, const struct slot_pids *s, const pid_t *gpu_pids,
                           unsigned ngpu, int sig)
{
    struct pid_set done = { 0 };
    for (unsigned i = 0; i < ngpu; i++)
        if (set_add(&done, gpu_pids[i]))
            kill(gpu_pids[i], sig);
    for (unsigned i = 0; i < s->n; i++)
        if (job_process(r, s, s->pid[i]) && set_add(&done, s->pid[i]))
            kill(s->pid[i], sig);
    for (int pass = 0; pass < 8; pass++) {
        DIR *d = opendir("/proc");
        if (!d)
            break;
        unsigned found = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!isdigit((unsigned char)de->d_name[0]))
                continue;
            pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
            if (job_process(r, s, pid) && set_add(&done, pid)) {
                kill(pid, sig);
                found++;
            }
        }
        closedir(d);
        if (!found)
            break;
    }
    unsigned n = done.n;
    free(done.pid);
    return n;
}

static void record(struct vgpu_region *r, unsigned action, unsigned dev, uint64_t bytes, uint64_t limit)
{
    struct vgpu_region_header *h = r->hdr_rw;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t w = atomic_load(&h->over_limit);
    atomic_store(&h->over_limit_bytes, bytes);
    atomic_store(&h->over_limit_limit, limit);
    atomic_store(&h->over_limit_ns, (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec);
    atomic_store_explicit(&h->over_limit,
                          vgpu_overlimit_word(vgpu_overlimit_policy_of(w), action, dev,
                                              vgpu_overlimit_count_of(w) + 1),
                          memory_order_release);
}

static int act(struct vgpu_region *r, const struct slot_pids *s, unsigned dev, uint64_t bytes, uint64_t limit,
               const pid_t *gpu_pids, unsigned ngpu)
{
    unsigned policy = vgpu_overlimit_policy_of(atomic_load(&r->hdr->over_limit));
    unsigned action = policy == VGPU_OVERLIMIT_KILL ? VGPU_OVERLIMIT_KILLED
                      : policy == VGPU_OVERLIMIT_STOP ? VGPU_OVERLIMIT_STOPPED : VGPU_OVERLIMIT_WARNED;
    unsigned n = 0;
    /* Stopped first, then killed: a process stopped cannot fork away between the passes. */
    if (action == VGPU_OVERLIMIT_STOPPED || action == VGPU_OVERLIMIT_KILLED)
        n = signal_job(r, s, gpu_pids, ngpu, SIGSTOP);
    if (action == VGPU_OVERLIMIT_KILLED)
        n = signal_job(r, s, gpu_pids, ngpu, SIGKILL);
    record(r, action, dev, bytes, limit);
    char reason[256];
    vgpu_overlimit_reason(r->hdr, reason, sizeof reason);
    if (action == VGPU_OVERLIMIT_WARNED)
        vgpu_warn("job %s is over its memory limit on %s; it keeps running", r->info->id, reason);
    else if (action == VGPU_OVERLIMIT_STOPPED)
        vgpu_error("job %s is over its memory limit on %s: stopped %u process%s (SIGSTOP); resume them with "
                   "kill -CONT, or end the job", r->info->id, reason, n, n == 1 ? "" : "es");
    else
        vgpu_error("job %s is over its memory limit on %s: killed %u process%s (SIGKILL)", r->info->id, reason, n,
                   n == 1 ? "" : "es");
    return (int)action;
}

/* ---- sampling --------------------------------------------------------------------------------- */

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* NVML's compute processes of `uuid` (two-call protocol; the list may grow between the calls).
 * malloc'd into *out; the count, or -1 when NVML cannot tell. */
static int gpu_processes(struct vgpu_nvml *nv, const char *uuid, nvmlProcessInfo_t **out)
{
    *out = NULL;
    nvmlDevice_t h;
    if (!nv->nvmlDeviceGetHandleByUUID || !nv->nvmlDeviceGetComputeRunningProcesses_v3 ||
        nv->nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS)
        return -1;
    nvmlProcessInfo_t *info = NULL;
    unsigned n = 0;
    nvmlReturn_t rc = NVML_ERROR_UNKNOWN;
    for (int tries = 0; tries < 4; tries++) {
        rc = nv->nvmlDeviceGetComputeRunningProcesses_v3(h, &n, info);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        free(info);
        n += 16;
        if (!(info = calloc(n, sizeof *info)))
            return -1;
    }
    if (rc != NVML_SUCCESS) {
        free(info);
        return -1;
    }
    *out = info;
    return info ? (int)n : 0;
}

struct vgpu_overlimit *vgpu_overlimit_start(struct vgpu_region *r, struct vgpu_nvml *nv)
{
    if (!r || !r->hdr || !r->hdr_rw || !vgpu_region_split(r) ||
        vgpu_overlimit_policy_of(atomic_load(&r->hdr->over_limit)) == VGPU_OVERLIMIT_NONE)
        return NULL;
    if (r->info->creator_pidns && r->info->creator_pidns != vgpu_proc_view_ns()) {
        vgpu_warn("job %s: its processes are in another pid namespace than this one; its memory is not watched",
                  r->info->id);
        return NULL;
    }
    struct vgpu_overlimit *w = calloc(1, sizeof *w);
    if (!w) {
        vgpu_warn("job %s: out of memory; its memory is not watched", r->info->id);
        return NULL;
    }
    w->nv = nv;
    if (!nv) {
        struct vgpu_err e;
        if (!(w->nv = vgpu_nvml_open(&e))) {
            vgpu_warn("job %s: its memory is not watched (NVML: %s)", r->info->id, e.msg);
            free(w);
            return NULL;
        }
        w->own_nv = true;
    }
    return w;
}

void vgpu_overlimit_stop(struct vgpu_overlimit *w)
{
    if (!w)
        return;
    if (w->own_nv)
        vgpu_nvml_close(w->nv);
    free(w);
}

int vgpu_overlimit_tick(struct vgpu_overlimit *w, struct vgpu_region *r)
{
    uint64_t now = monotonic_ns();
    if (!w || (w->last_ns && now - w->last_ns < VGPU_OVERLIMIT_PERIOD_NS))
        return VGPU_OVERLIMIT_NOTHING;
    w->last_ns = now;
    if (atomic_load(&r->hdr->state) == VGPU_JOB_EXITED)
        return VGPU_OVERLIMIT_NOTHING;
    /* The usage file is the user's: it may have been truncated under the mapping (fenced then). */
    (void)vgpu_region_check(r);
    struct slot_pids slots;
    read_slot_pids(r, &slots);
    int taken = VGPU_OVERLIMIT_NOTHING;
    unsigned ndev = vgpu_region_device_count(r);
    for (unsigned d = 0; d < ndev; d++) {
        uint64_t limit = atomic_load(&r->hdr->dev[d].mem_limit);
        if (!limit) {
            vgpu_overlimit_due(&w->dev[d], false, now);
            continue;
        }
        nvmlProcessInfo_t *info;
        vgpu_watchdog_arm("NVML's nvmlDeviceGetComputeRunningProcesses (the memory watch of a --user job)");
        int n = gpu_processes(w->nv, r->info->dev[d].uuid, &info);
        vgpu_watchdog_disarm();
        if (n < 0)
            continue;                   /* cannot tell: the episode neither starts nor ends */
        uint64_t bytes = 0;
        bool unknown = false;
        pid_t *mine = calloc((size_t)n + 1, sizeof *mine);
        unsigned nmine = 0;
        for (int i = 0; i < n && mine; i++) {
            pid_t pid = (pid_t)info[i].pid;
            if (!job_process(r, &slots, pid))
                continue;
            mine[nmine++] = pid;
            if (info[i].usedGpuMemory == VGPU_NVML_VALUE_NOT_AVAILABLE)
                unknown = true;
            else
                bytes += info[i].usedGpuMemory;
        }
        free(info);
        if (unknown && !w->unknown_said) {
            /* Some MIG and container setups: NVML has no per-process figure to check against. */
            vgpu_warn("job %s: NVML gives no per-process memory on GPU %u; its memory is not watched there",
                      r->info->id, r->info->dev[d].nvml_index);
            w->unknown_said = true;
        }
        if (!mine || unknown) {
            free(mine);
            continue;
        }
        if (vgpu_overlimit_due(&w->dev[d], bytes > limit + vgpu_overlimit_slack(limit), now)) {
            taken = act(r, &slots, d, bytes, limit, mine, nmine);
            /* A kill ends the episode: whatever survived it (forked meanwhile) is found again. */
            if (taken == VGPU_OVERLIMIT_KILLED)
                memset(&w->dev[d], 0, sizeof w->dev[d]);
        }
        free(mine);
    }
    return taken;
}
