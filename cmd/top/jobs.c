/* vgpu top's view of vgpu's own state: the jobs (limits and limiter-accounted usage from each
 * job region), which processes belong to which job, and live limit changes (owner or root,
 * through the region API, as `vgpu limit` does). Called from the sampler thread only, except
 * the setters, which the UI calls. */
#include "top.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/outside.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"
#include "vgpu/top_watch.h"
#include "vgpu/units.h"

/* GPU time seen at the previous sample, per job, for the share over the last interval. */
struct prev { char id[VGPU_JOB_ID_LEN]; uint64_t gpu_ns, at_ns, dev_ns[TOP_JOB_DEVS]; };
static struct prev prev_tab[TOP_MAX_JOBS];
static unsigned nprev;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* uid -> name, cached: getpwuid_r reads /etc/passwd (or asks NSS) every time. */
void top_owner_name(uid_t uid, char *out, size_t len)
{
    static struct { uid_t uid; char name[32]; } cache[16];
    static unsigned ncache;
    for (unsigned i = 0; i < ncache; i++)
        if (cache[i].uid == uid) {
            snprintf(out, len, "%s", cache[i].name);
            return;
        }
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
        snprintf(out, len, "%s", res->pw_name);
    else
        snprintf(out, len, "%u", (unsigned)uid);
    unsigned slot = ncache < 16 ? ncache++ : uid % 16;
    cache[slot].uid = uid;
    snprintf(cache[slot].name, sizeof cache[slot].name, "%s", out);
}

static int find_gpu(const struct top_model *m, const char *uuid)
{
    for (unsigned i = 0; i < m->ngpu; i++)
        if (uuid[0] && strcmp(m->gpus[i].uuid, uuid) == 0)
            return (int)i;
    return -1;
}

static void job_gpus_text(const struct top_model *m, const struct vgpu_region_header *k, char *out, size_t len)
{
    size_t n = 0;
    out[0] = 0;
    for (unsigned d = 0; d < k->device_count && d < VGPU_REGION_MAX_DEVICES && n < len; d++) {
        int g = find_gpu(m, k->dev[d].uuid);
        char lab[32];
        if (g >= 0 && m->gpus[g].is_mig)
            snprintf(lab, sizeof lab, "%u/%u/%u", m->gpus[g].index, m->gpus[g].gi, m->gpus[g].ci);
        else
            snprintf(lab, sizeof lab, "%u", g >= 0 ? m->gpus[g].index : k->dev[d].nvml_index);
        n += (size_t)snprintf(out + n, len - n, "%s%s", d ? "," : "", lab);
    }
}

/* Marks NVML's processes of this job, and adds the job's processes NVML did not list (no
 * driver, or no context yet) with the limiter's accounting as their memory. */
static void job_procs(struct top_model *m, int j, const struct vgpu_region *r, const struct top_pid_ix *ix,
                      size_t nix)
{
    const struct vgpu_region_header *k = r->info;
    unsigned ndev = k->device_count < VGPU_REGION_MAX_DEVICES ? k->device_count : VGPU_REGION_MAX_DEVICES;
    unsigned nproc = 0;
    for (unsigned s = 0; s < vgpu_region_slot_end(r); s++) {
        const struct vgpu_region_slot *sl = &r->use->slot[s];
        uint64_t owner = atomic_load_explicit(&sl->owner, memory_order_acquire);
        if (vgpu_slot_state_of(owner) != VGPU_SLOT_LIVE)
            continue;
        pid_t hp = vgpu_region_slot_view_pid(r, (int)s);
        nproc++;
        /* NVML's processes (a pid once per GPU), found by the index of the sample */
        bool listed = false;
        for (const struct top_pid_ix *x = top_pid_find(ix, nix, hp); x && x < ix + nix && x->pid == hp; x++) {
            m->procs[x->at].job = j;
            listed = true;
        }
        if (listed)
            continue;
        bool added = false;
        for (unsigned d = 0; d < ndev; d++) {
            uint64_t used = atomic_load_explicit(&sl->used[d], memory_order_relaxed);
            if (!used)
                continue;
            struct top_proc *p = top_model_add_proc(m);
            if (!p)
                return;
            p->pid = hp;
            p->job = j;
            p->gpu = find_gpu(m, k->dev[d].uuid);
            p->gpu_mem = used;
            p->valid |= TOP_PV_MEM;
            added = true;
        }
        if (!added) {
            struct top_proc *p = top_model_add_proc(m);
            if (!p)
                return;
            p->pid = hp;
            p->job = j;
            p->gpu = ndev ? find_gpu(m, k->dev[0].uuid) : -1;
        }
    }
    m->jobs[j].nproc = nproc;
}

static void fill_job(struct top_model *m, struct top_job *jb, const struct vgpu_region *r, struct prev *np,
                     uint64_t now)
{
    const struct vgpu_region_header *h = r->hdr, *k = r->info;
    unsigned ndev = k->device_count < VGPU_REGION_MAX_DEVICES ? k->device_count : VGPU_REGION_MAX_DEVICES;
    snprintf(jb->id, sizeof jb->id, "%s", k->id);
    snprintf(jb->name, sizeof jb->name, "%s", k->name[0] ? k->name : k->id);
    top_sanitize(jb->name);
    jb->uid = k->owner_uid;
    top_owner_name(jb->uid, jb->owner, sizeof jb->owner);
    job_gpus_text(m, k, jb->gpus, sizeof jb->gpus);
    bool all_limited = ndev > 0;
    uint64_t gpu_ns = 0, thr_ns = 0;
    for (unsigned d = 0; d < ndev; d++) {
        uint64_t lim = atomic_load(&h->dev[d].mem_limit);
        jb->mem_used += atomic_load(&r->use->dev[d].used);
        jb->mem_limit += lim;
        jb->mem_request += vgpu_region_mem_request(r, d);
        jb->mem_borrowed += vgpu_region_mem_borrowed(r, d);
        jb->mem_demoted += vgpu_region_mem_demoted(r, d);
        jb->lending |= vgpu_region_lending(r, d, NULL);
        uint64_t share;
        if (d < TOP_JOB_DEVS) {
            jb->ndev = d + 1;
            jb->dev_gpu[d] = find_gpu(m, k->dev[d].uuid);
        }
        if (vgpu_region_oversub(r, d, &share)) {
            jb->oversub = true;
            jb->mem_off_device += vgpu_region_mem_spilled(r, d);
            if (d < TOP_JOB_DEVS) {
                jb->dev_oversub[d] = true;
                jb->dev_off[d] = vgpu_region_mem_spilled(r, d);
            }
            /* Saturating: HAMi's jobs have no fixed share (UINT64_MAX, "what is free"). */
            jb->mem_device_limit = share > UINT64_MAX - jb->mem_device_limit ? UINT64_MAX : jb->mem_device_limit + share;
        }
        all_limited &= lim != 0;
        unsigned core = atomic_load(&h->dev[d].core_limit);
        if (core > jb->core_limit_pct)
            jb->core_limit_pct = core;
        if (atomic_load(&h->dev[d].core_policy) == VGPU_CORE_SOFT)
            jb->soft = true;
        if (d == 0)
            jb->priority = atomic_load(&h->dev[d].priority);
        uint64_t dn = atomic_load(&r->use->dev[d].gpu_time_ns);
        gpu_ns += dn;
        if (d < TOP_JOB_DEVS)
            np->dev_ns[d] = dn;
        thr_ns += atomic_load(&r->use->dev[d].throttled_ns);
    }
    if (!all_limited)
        jb->mem_limit = 0;
    jb->throttled_ns = thr_ns;
    snprintf(np->id, sizeof np->id, "%s", k->id);
    np->gpu_ns = gpu_ns;
    np->at_ns = now;
    /* the limiter's measured share over the last interval, when it measures this job */
    for (unsigned i = 0; i < nprev; i++) {
        if (strcmp(prev_tab[i].id, k->id) != 0)
            continue;
        if (now > prev_tab[i].at_ns && gpu_ns >= prev_tab[i].gpu_ns && (gpu_ns || jb->core_limit_pct)) {
            double pct = (double)(gpu_ns - prev_tab[i].gpu_ns) * 100.0 / (double)(now - prev_tab[i].at_ns) /
                         (ndev ? ndev : 1);
            jb->share_pct = pct > 100 ? 100 : pct;
            jb->share_valid = true;
            /* Each GPU's own: a job of several GPUs has its turns on each (DESIGN.md decision 11). */
            jb->share_ndev = 0;
            for (unsigned d = 0; ndev > 1 && d < ndev && d < TOP_JOB_DEVS; d++) {
                uint64_t a = prev_tab[i].dev_ns[d], b = np->dev_ns[d];
                double p = b >= a ? (double)(b - a) * 100.0 / (double)(now - prev_tab[i].at_ns) : 0.0;
                jb->share_dev_pct[d] = p > 100 ? 100 : p;
                jb->share_ndev = d + 1;
            }
        }
        break;
    }
}

/* Regions stay open from one sample to the next: opening, mapping and unmapping every job's
 * region each second (and faulting its pages in again) was most of vgpu top's CPU with 50
 * jobs. The listing (which also reaps every region, and removes stale and expired jobs) is
 * redone only when it can change: when the jobs folder's names change (top_watch: inotify, or
 * the time stamp), when an ended job's time to be kept has passed, and when a running job has
 * become stale (its `vgpu run` gone and no live process: nobody else would remove it). It was
 * redone every 10 s as well, whether anything changed or not. */
struct open_job {
    char path[sizeof ((struct vgpu_job_ref *)0)->path];
    struct vgpu_region r;
    bool open, listed;
};
static struct open_job open_jobs[TOP_MAX_JOBS];
static struct vgpu_job_ref *list_refs;
static size_t list_n;
static struct top_watch jobs_watch;
static uint64_t relist_at_ns;           /* CLOCK_REALTIME when an ended job expires (0: none) */
static uint64_t stale_check_at;         /* CLOCK_MONOTONIC of the last careful stale check */
static unsigned long relists;           /* how many listings (tests) */
static uint64_t job_list_at, job_gap_ns = 1000000000ULL;   /* relistings a job asked for */

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static bool relist_due(const char *statedir)
{
    char jobs[4200];
    snprintf(jobs, sizeof jobs, "%s/jobs", statedir);
    if (!jobs_watch.started)
        top_watch_init(&jobs_watch);
    return top_watch_changed(&jobs_watch, jobs);
}

/* How long ended jobs are kept: vgpu_jobs_list's rule (VGPU_EXITED_KEEP_S, vgpu/region.h). */
static uint64_t keep_ns(void)
{
    double sec = VGPU_EXITED_KEEP_DEFAULT_S;
    const char *v = getenv("VGPU_EXITED_KEEP_S");
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (!*end && x >= 0 && x <= 1e6)
            sec = x;
    }
    return (uint64_t)(sec * 1e9);
}

/* Whether the listing must be redone because of this job itself, which no folder event tells:
 * it ended and its time to be kept will pass (the time is noted), or it is running with no live
 * process and its `vgpu run` has gone. That last test is a kill(2) each sample, and the careful
 * one (the start time, against a reused pid) every 10 s. */
static bool job_due(const struct vgpu_region *r, bool careful)
{
    if (atomic_load(&r->hdr->state) == VGPU_JOB_EXITED) {
        uint64_t ended = atomic_load(&r->hdr->exited_realtime_ns);
        uint64_t at = ended ? ended + keep_ns() : 1;
        if (!relist_at_ns || at < relist_at_ns)
            relist_at_ns = at;
        return false;
    }
    if (vgpu_region_pids(r, NULL, NULL, 0) != 0)
        return false;
    pid_t c = r->hdr->creator_pid;
    if (c > 0 && kill(c, 0) < 0 && errno == ESRCH)
        return true;
    return careful && !vgpu_region_creator_alive(r);
}

/* The open region of a listed, readable job (opened on first use), or NULL. An open region has
 * just been checked against truncation by top_jobs_read, in this sample: not again here (an
 * fstat(2) per job per refresh). */
static struct vgpu_region *job_region(const struct vgpu_job_ref *ref)
{
    struct open_job *free_slot = NULL;
    for (unsigned i = 0; i < TOP_MAX_JOBS; i++) {
        if (open_jobs[i].open && strcmp(open_jobs[i].path, ref->path) == 0)
            return &open_jobs[i].r;
        if (!open_jobs[i].open && !free_slot)
            free_slot = &open_jobs[i];
    }
    struct vgpu_err e;
    if (!free_slot || vgpu_region_open(&free_slot->r, ref->path, VGPU_REGION_VIEW, &e) < 0)
        return NULL;
    snprintf(free_slot->path, sizeof free_slot->path, "%s", ref->path);
    free_slot->open = true;
    return &free_slot->r;
}

/* After a new listing: closes the regions of jobs that are gone. */
static void close_unlisted(void)
{
    for (unsigned i = 0; i < TOP_MAX_JOBS; i++)
        open_jobs[i].listed = false;
    for (size_t k = 0; k < list_n; k++)
        for (unsigned i = 0; i < TOP_MAX_JOBS; i++)
            if (open_jobs[i].open && strcmp(open_jobs[i].path, list_refs[k].path) == 0)
                open_jobs[i].listed = true;
    for (unsigned i = 0; i < TOP_MAX_JOBS; i++)
        if (open_jobs[i].open && !open_jobs[i].listed) {
            vgpu_region_close(&open_jobs[i].r);
            open_jobs[i].open = false;
        }
}

/* NVML's processes of each GPU that may be outside the limiter (no job, memory known), as
 * positions in m->procs: gathered once per sample, not scanned again for every job. */
struct outside_cands {
    size_t *at;                         /* grouped by GPU: at[first[g] .. first[g + 1]) */
    size_t first[TOP_MAX_GPUS + 1];
};

static bool outside_cands(const struct top_model *m, struct outside_cands *c)
{
    size_t count[TOP_MAX_GPUS] = { 0 };
    for (size_t i = 0; i < m->nproc; i++)
        if (m->procs[i].job < 0 && (m->procs[i].valid & TOP_PV_MEM) && m->procs[i].gpu >= 0 &&
            m->procs[i].gpu < TOP_MAX_GPUS)
            count[m->procs[i].gpu]++;
    c->first[0] = 0;
    for (unsigned g = 0; g < TOP_MAX_GPUS; g++)
        c->first[g + 1] = c->first[g] + count[g];
    c->at = malloc((c->first[TOP_MAX_GPUS] ? c->first[TOP_MAX_GPUS] : 1) * sizeof *c->at);
    if (!c->at)
        return false;
    size_t fill[TOP_MAX_GPUS];
    memcpy(fill, c->first, sizeof fill);
    for (size_t i = 0; i < m->nproc; i++)
        if (m->procs[i].job < 0 && (m->procs[i].valid & TOP_PV_MEM) && m->procs[i].gpu >= 0 &&
            m->procs[i].gpu < TOP_MAX_GPUS)
            c->at[fill[m->procs[i].gpu]++] = i;
    return true;
}

/* The job's GPU processes outside the limiter (vgpu/outside.h): NVML's processes on its GPUs
 * that belong to no job yet and descend from it. Marked as the job's, summed, and recorded in
 * the region, where the job's own processes count them against the limit. */
static void job_outside(struct top_model *m, unsigned j, struct vgpu_region *r, const struct outside_cands *c,
                        struct vgpu_outside_memo *memo)
{
    const struct vgpu_region_header *info = r->info;
    unsigned ndev = vgpu_region_device_count(r);
    struct top_job *jb = &m->jobs[j];
    for (unsigned d = 0; d < ndev; d++) {
        int g = find_gpu(m, info->dev[d].uuid);
        if (g < 0 || g >= TOP_MAX_GPUS)
            continue;
        unsigned pids[128];
        uint64_t bytes[128];
        unsigned n = 0;
        for (size_t k = c->first[g]; k < c->first[g + 1] && n < 128; k++) {
            const struct top_proc *p = &m->procs[c->at[k]];
            if (p->job < 0) {           /* an earlier job may have taken it */
                pids[n] = (unsigned)p->pid;
                bytes[n++] = p->gpu_mem;
            }
        }
        struct vgpu_outside o;
        if (!vgpu_outside_find_memo(r, pids, bytes, n, memo, &o))
            return;                     /* NVML's pids are not ours to read (another PID namespace) */
        vgpu_region_set_outside(r, d, o.bytes, o.count ? o.pid[0] : 0, o.count);
        if (!o.count)
            continue;
        for (unsigned k = 0; k < o.count && k < VGPU_OUTSIDE_MAX_PIDS; k++)
            for (size_t x = c->first[g]; x < c->first[g + 1]; x++) {
                struct top_proc *p = &m->procs[c->at[x]];
                if (p->job < 0 && p->pid == o.pid[k]) {
                    p->job = (int)j;
                    p->outside = true;
                }
            }
        jb->mem_outside += o.bytes;
        if (!jb->outside_count)
            jb->outside_pid = o.pid[0];
        jb->outside_count += o.count;
    }
}

/* Parents read once per sample for all jobs: with 50 jobs and 300 GPU processes outside them,
 * reading each candidate's parent chain once per job was 90% of top's CPU. The sampler puts
 * in those it read anyway (top_jobs_note_parent). */
static struct vgpu_outside_memo parents;

void top_jobs_note_parent(pid_t pid, pid_t ppid)
{
    vgpu_outside_memo_put(&parents, pid, ppid);
}

void top_jobs_read(struct top_model *m)
{
    static struct vgpu_region *regions[TOP_MAX_JOBS];
    memset(regions, 0, sizeof regions);
    char dir[4096];
    struct vgpu_err e;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0) {
        snprintf(m->jobs_msg, sizeof m->jobs_msg, "%s", e.msg);
        m->jobs_code = e.code;
        return;
    }
    uint64_t now = mono_ns();
    bool careful = now - stale_check_at >= 10000000000ULL, jobs_due = false;
    for (unsigned i = 0; i < TOP_MAX_JOBS; i++) {
        if (!open_jobs[i].open)
            continue;
        /* Truncated since we opened it: touching the mapping would kill vgpu top (SIGBUS); the
         * listing that follows drops or reopens it. */
        if (vgpu_region_check(&open_jobs[i].r) != 0) {
            vgpu_debug("%s; not shown", open_jobs[i].r.damaged_why);
            vgpu_region_close(&open_jobs[i].r);
            open_jobs[i].open = false;
            jobs_due = true;
            continue;
        }
        if (job_due(&open_jobs[i].r, careful))
            jobs_due = true;
    }
    if (careful)
        stale_check_at = now;
    jobs_due |= relist_at_ns && real_ns() >= relist_at_ns;
    /* A job the listing should remove but cannot (a file we may not unlink) would make every
     * sample list again: such relistings back off, 1 s doubling to 64 s, while one stays due. */
    if (!jobs_due)
        job_gap_ns = 1000000000ULL;
    else if (now - job_list_at < job_gap_ns)
        jobs_due = false;
    if (relist_due(dir) || jobs_due) {
        if (jobs_due) {
            job_list_at = now;
            job_gap_ns = job_gap_ns < 64000000000ULL ? job_gap_ns * 2 : job_gap_ns;
        }
        relist_at_ns = 0;               /* the open regions note the next expiry again */
        relists++;
        struct vgpu_job_ref *refs = NULL;
        size_t n = 0;
        if (vgpu_jobs_list_all(dir, &refs, &n, NULL, &e) < 0) {
            snprintf(m->jobs_msg, sizeof m->jobs_msg, "%s", e.msg);
            m->jobs_code = e.code;
            return;
        }
        free(list_refs);
        list_refs = refs;
        list_n = n;
        close_unlisted();
    }
    static struct prev next[TOP_MAX_JOBS];
    unsigned nnext = 0;
    struct top_pid_ix *ix;
    size_t nix = top_pid_index(m, 0, m->nproc, &ix);   /* NVML's processes, before jobs add theirs */
    for (size_t i = 0; i < list_n && m->njob < TOP_MAX_JOBS; i++) {
        const struct vgpu_job_ref *ref = &list_refs[i];
        struct top_job *jb = &m->jobs[m->njob];
        memset(jb, 0, sizeof *jb);
        struct vgpu_region *r = ref->readable ? job_region(ref) : NULL;
        if (!r) {
            /* another user's job: only what the file name and owner say */
            snprintf(jb->id, sizeof jb->id, "%s", ref->id);
            snprintf(jb->name, sizeof jb->name, "%s", ref->name[0] ? ref->name : ref->id);
            top_sanitize(jb->name);
            jb->uid = ref->owner;
            top_owner_name(jb->uid, jb->owner, sizeof jb->owner);
            m->njob++;
            continue;
        }
        if (atomic_load(&r->hdr->state) == VGPU_JOB_EXITED)
            continue;
        vgpu_region_reap_maybe(r);   /* a dead process's slot: at most one walk a second */
        fill_job(m, jb, r, &next[nnext++], now);
        job_procs(m, (int)m->njob, r, ix, nix);
        regions[m->njob] = r;
        m->njob++;
    }
    free(ix);
    memcpy(prev_tab, next, nnext * sizeof next[0]);
    nprev = nnext;
    struct outside_cands cands;
    if (m->nvml == TOP_NVML_OK && outside_cands(m, &cands)) {
        for (unsigned j = 0; j < m->njob; j++)
            if (regions[j])
                job_outside(m, j, regions[j], &cands, &parents);
        free(cands.at);
    }
    vgpu_outside_memo_reset(&parents);   /* parents change: the next sample reads them again */
}

static int open_admin(const struct top_job *j, struct vgpu_region *r, struct vgpu_err *e)
{
    uid_t me = geteuid();
    if (me != 0 && me != j->uid) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "job %s belongs to %s: only its owner or root may change its limits",
                     j->name, j->owner);
        return -1;
    }
    char dir[4096];
    if (vgpu_statedir_or_none(dir, sizeof dir, e) < 0)
        return -1;
    return vgpu_jobs_find_all(dir, j->id, VGPU_REGION_ADMIN, r, e);
}

int top_job_set_core(const struct top_job *j, unsigned pct, struct vgpu_err *e)
{
    struct vgpu_region r;
    if (open_admin(j, &r, e) < 0)
        return -1;
    int rc = 0;
    for (unsigned d = 0; d < vgpu_region_device_count(&r) && rc == 0; d++) {
        enum vgpu_core_policy pol = (enum vgpu_core_policy)atomic_load(&r.hdr->dev[d].core_policy);
        rc = vgpu_region_set_core_limit(&r, d, pct, pol, e);
    }
    vgpu_region_close(&r);
    return rc;
}

int top_job_change_core(const struct top_job *j, int delta, unsigned *pct, struct vgpu_err *e)
{
    struct vgpu_region r;
    if (open_admin(j, &r, e) < 0)
        return -1;
    unsigned cur = atomic_load(&r.hdr->dev[0].core_limit);
    if (cur == 0 && delta > 0) {
        vgpu_region_close(&r);
        return 0;
    }
    int v = (int)(cur ? cur : 100) + delta;
    v = v < 5 ? 5 : v > 100 ? 100 : v;
    int rc = 0;
    for (unsigned d = 0; d < vgpu_region_device_count(&r) && rc == 0; d++) {
        enum vgpu_core_policy pol = (enum vgpu_core_policy)atomic_load(&r.hdr->dev[d].core_policy);
        rc = vgpu_region_set_core_limit(&r, d, (unsigned)v, pol, e);
    }
    vgpu_region_close(&r);
    *pct = (unsigned)v;
    return rc < 0 ? -1 : 1;
}

int top_job_set_mem(const struct top_job *j, const char *text, struct vgpu_err *e)
{
    struct vgpu_region r;
    if (open_admin(j, &r, e) < 0)
        return -1;
    /* The check vgpu limit makes (cmd/common.c), on every GPU before changing any. */
    uint64_t bytes[VGPU_REGION_MAX_DEVICES];
    unsigned n = vgpu_region_device_count(&r);
    int rc = 0;
    for (unsigned d = 0; d < n && rc == 0; d++) {
        char desc[160];
        snprintf(desc, sizeof desc, "the job's GPU %u (%s)", d, r.info->dev[d].uuid);
        rc = vgpu_mem_limit_value(text, r.hdr->dev[d].mem_total, desc, true, &bytes[d], e);
    }
    for (unsigned d = 0; d < n && rc == 0; d++)
        rc = vgpu_region_set_mem_limit(&r, d, bytes[d], e);
    vgpu_region_close(&r);
    return rc;
}

size_t top_job_pids(const struct top_job *j, pid_t *pids, unsigned long long *starts, size_t cap)
{
    char dir[4096];
    struct vgpu_err e;
    struct vgpu_region r;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0 || vgpu_jobs_find_all(dir, j->id, VGPU_REGION_VIEW, &r, &e) < 0)
        return 0;
    size_t n = 0;
    for (unsigned s = 0; s < vgpu_region_slot_end(&r) && n < cap; s++) {
        const struct vgpu_region_slot *sl = &r.use->slot[s];
        uint64_t owner = atomic_load_explicit(&sl->owner, memory_order_acquire);
        if (vgpu_slot_state_of(owner) != VGPU_SLOT_LIVE)
            continue;
        pid_t hp = vgpu_region_slot_view_pid(&r, (int)s);
        if (hp <= 0)
            continue;                   /* in a namespace we cannot see: never a guess */
        pids[n] = hp;
        starts[n] = atomic_load(&sl->start_time);
        n++;
    }
    vgpu_region_close(&r);
    return n;
}
