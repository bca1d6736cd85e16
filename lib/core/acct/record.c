/* A job's accounting record, built from its region (vgpu/acct.h): by `vgpu run` when the command
 * ends, or by whoever removes an ended job that `vgpu run` could not record (recovery). */
#include "vgpu/acct.h"

#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* argv[0] of the space-joined command line (a program path with a space in it is cut there: the
 * region keeps only the joined line). */
static void first_word(const char *cmdline, char *out, size_t len)
{
    size_t n = strcspn(cmdline, " ");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), cmdline);
}

void vgpu_acct_record_from_region(const struct vgpu_region *r, struct vgpu_acct_record *rec)
{
    const struct vgpu_region_header *info = r->info, *live = r->hdr;
    memset(rec, 0, sizeof *rec);
    snprintf(rec->id, sizeof rec->id, "%.*s", (int)sizeof info->id - 1, info->id);
    snprintf(rec->name, sizeof rec->name, "%.*s", (int)sizeof info->name - 1, info->name);
    rec->uid = vgpu_region_job_uid(r);
    struct passwd *pw = getpwuid(rec->uid);
    snprintf(rec->user, sizeof rec->user, "%s", pw ? pw->pw_name : "");
    char cmd[VGPU_JOB_CMDLINE_LEN];
    snprintf(cmd, sizeof cmd, "%.*s", (int)sizeof info->cmdline - 1, info->cmdline);
    first_word(cmd, rec->command, sizeof rec->command);
    rec->start_ns = info->created_realtime_ns;
    rec->run_as_user = info->layout == VGPU_LAYOUT_SPLIT;
    if (atomic_load(&live->state) == VGPU_JOB_EXITED && atomic_load(&live->exited_realtime_ns)) {
        rec->end_ns = atomic_load(&live->exited_realtime_ns);
        rec->exit_code = atomic_load(&live->exit_code);
        rec->exit_signal = atomic_load(&live->exit_signal);
    } else {
        /* vgpu run died: the command's status is lost, and its end is vgpu run's last look. */
        uint64_t seen = atomic_load(&live->acct_seen_ns);
        rec->end_ns = seen > rec->start_ns ? seen : rec->start_ns;
        rec->end_approximate = true;
        rec->exit_code = -1;
        rec->exit_signal = 0;
    }
    unsigned flags = atomic_load(&live->acct_flags);
    uint64_t mem_total[VGPU_REGION_MAX_DEVICES] = { 0 };
    rec->gpu_count = vgpu_region_device_count(r);
    for (unsigned d = 0; d < rec->gpu_count; d++) {
        const struct vgpu_region_dev_limits *dl = &info->dev[d], *dlive = &live->dev[d];
        struct vgpu_acct_gpu *g = &rec->gpu[d];
        g->ordinal = d;
        snprintf(g->uuid, sizeof g->uuid, "%.*s", (int)sizeof dl->uuid - 1, dl->uuid);
        g->nvml_index = (int)dl->nvml_index;
        g->mem_limit_bytes = atomic_load(&dlive->mem_limit);
        g->core_limit = atomic_load(&dlive->core_limit);
        snprintf(g->core_policy, sizeof g->core_policy, "%s",
                 atomic_load(&dlive->core_policy) == VGPU_CORE_SOFT ? "soft" : "hard");
        g->priority = atomic_load(&dlive->priority);
        g->oversub_device_bytes = atomic_load(&dlive->flags) & VGPU_DEV_OVERSUB ? atomic_load(&dlive->mem_device) : 0;
        const struct vgpu_region_dev_usage *u = &r->use->dev[d];
        g->gpu_ns = atomic_load(&u->gpu_time_ns);
        /* The schedule charges GPU time only to jobs it schedules (a --core cap below 100 on that
         * GPU, at some point of the job's life: vgpu limit may have lifted it since); elsewhere
         * vgpu run added up NVML's per-process samples (nvml_sample.c), or nothing measured it. */
        const char *source = "none";
        if (g->gpu_ns || (g->core_limit && g->core_limit < 100))
            source = "schedule";
        else if (flags & VGPU_ACCT_NVML_DEV(d)) {
            source = "nvml";
            g->gpu_ns = atomic_load(&dlive->acct_nvml_gpu_ns);
        }
        snprintf(g->gpu_time_source, sizeof g->gpu_time_source, "%s", source);
        g->throttled_ns = atomic_load(&u->throttled_ns);
        g->mem_peak_bytes = atomic_load(&u->peak);
        g->mem_byte_seconds = (double)atomic_load(&dlive->acct_mem_byte_s);
        g->mem_request_bytes = vgpu_region_mem_request(r, d);
        g->mem_requested_byte_seconds = (double)atomic_load(&live->acct_request_byte_s[d]);
        g->mem_borrowed_byte_seconds = (double)atomic_load(&live->acct_borrow_byte_s[d]);
        uint64_t mj = atomic_load(&dlive->acct_energy_mj);
        g->energy_known = (flags & VGPU_ACCT_ENERGY_KNOWN) && mj != VGPU_ACCT_ENERGY_UNKNOWN;
        g->energy_j = g->energy_known ? (double)mj / 1000.0 : 0.0;
        mem_total[d] = dl->mem_total;
    }
    /* What the region says can be damaged (issue 36 N13): cut to what the job's GPUs allow, and
     * said so in the record. Among the bounds, one GPU gives a job at most its duration (N7: a
     * recovered record ended when vgpu run died, and held more GPU time than its duration). */
    vgpu_acct_bound(rec, mem_total);
}

/* The last sample's monotonic time, per process (vgpu run samples one job). */
static uint64_t last_sample_ns, first_sample_ns;

/* Records of the own store that no daemon took when they were written go to the daemon at the
 * user's next vgpu run (issue 36), from its first look after the command started: never before
 * it, so the command's start waits for nothing; only when the own store exists (one stat), so a
 * user who never buffered a record pays nothing. */
static void hand_over_once(void)
{
    static bool done;
    char path[4200];
    struct vgpu_err e = { 0 };
    if (done)
        return;
    done = true;
    if (vgpu_acct_own_store_path(path, sizeof path) < 0 || access(path, F_OK) < 0)
        return;
    if (vgpu_acct_hand_over(&e) < 0)
        vgpu_debug("accounting: your own store's records stay there for now: %s", e.msg);
}

static void sample(struct vgpu_region *r, bool look_at_nvml)
{
    /* The file may have been cut short under us (truncated.sh): look before touching it, which
     * also puts private memory in place of a damaged file's pages. */
    if (!r->hdr_rw || r->damaged || vgpu_region_check(r) != 0)
        return;
    uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (last_sample_ns && now > last_sample_ns) {
        /* Rectangles: the memory now, over the time since the last sample. An allocation lives
         * at least as long as the command's start-up, so 250 ms steps miss little of it. */
        double dt = (double)(now - last_sample_ns) / 1e9;
        for (unsigned d = 0; d < vgpu_region_device_count(r); d++) {
            double used = (double)vgpu_region_mem_used(r, d), request = (double)vgpu_region_mem_request(r, d);
            double borrowed = (double)vgpu_region_mem_borrowed(r, d);
            atomic_fetch_add(&r->hdr_rw->dev[d].acct_mem_byte_s, (uint64_t)(used * dt + 0.5));
            /* Lent memory: what was promised (REQUEST, or the limit without one), and what was
             * held past it (borrowed: 0 but for --mem REQUEST:LIMIT). */
            atomic_fetch_add(&r->hdr_rw->acct_request_byte_s[d], (uint64_t)(request * dt + 0.5));
            atomic_fetch_add(&r->hdr_rw->acct_borrow_byte_s[d], (uint64_t)(borrowed * dt + 0.5));
        }
    }
    if (last_sample_ns)
        hand_over_once();     /* the command runs (the first look is before it starts) */
    last_sample_ns = now;
    if (!first_sample_ns)
        first_sample_ns = now;
    /* NVML (GPU time of uncapped GPUs, energy, migration): from the job's 200th millisecond on,
     * so a job that ends at once does not wait for the driver to load (vgpu_acct_nvml_finish
     * looks at a short job that used a GPU). */
    bool oversub = false;
    for (unsigned d = 0; d < vgpu_region_device_count(r); d++)
        oversub |= (atomic_load(&r->hdr->dev[d].flags) & VGPU_DEV_OVERSUB) != 0;
    /* An oversubscribed job from its start (its first allocations migrate at once: the link's
     * counters must be read before), others from their 200th millisecond. */
    if (look_at_nvml && (oversub || now - first_sample_ns >= 200000000ULL))
        vgpu_acct_nvml_poll(r);
    atomic_store(&r->hdr_rw->acct_seen_ns, clock_ns(CLOCK_REALTIME));
}

void vgpu_acct_sample(struct vgpu_region *r)
{
    sample(r, true);
}

void vgpu_acct_sample_end(struct vgpu_region *r)
{
    /* No NVML: the last look reads it (vgpu_acct_nvml_finish), in vgpu run's finisher. A poll
     * here read the energy counter on vgpu run's path after the command's end, which the
     * finisher exists to take off it (tests/cli/run_end.sh: a 1 s read held vgpu run 1 s). */
    sample(r, false);
}

void vgpu_acct_sample_nvml(struct vgpu_region *r)
{
    if (r->hdr_rw && !r->damaged && vgpu_region_check(r) == 0)
        vgpu_acct_nvml_poll(r);
}

/* To the arbiter's database when a daemon answers and takes it, else to the user's own store
 * (handed to the daemon by the next reader that finds one: arb_client.c). */
static int write_record(const struct vgpu_acct_record *rec, struct vgpu_err *e)
{
    struct vgpu_err de = { 0 };
    int rc = vgpu_acct_arb_insert(rec, &de);
    if (rc == 0)
        return 0;
    if (rc < 0)
        vgpu_debug("job %s: %s; its record goes to your own store", rec->id, de.msg);
    struct vgpu_acct_store *s = vgpu_acct_open_user(true, e);
    if (!s)
        return -1;
    rc = vgpu_acct_insert(s, rec, e);
    vgpu_acct_close(s);
    return rc < 0 ? -1 : 0;
}

int vgpu_acct_record_job(struct vgpu_region *r, struct vgpu_err *e)
{
    vgpu_acct_nvml_finish(r);
    struct vgpu_acct_record rec;
    vgpu_acct_record_from_region(r, &rec);
    for (unsigned d = 0; d < rec.gpu_count; d++)
        rec.gpu[d].migrated_known = vgpu_acct_nvml_migrated(d, &rec.gpu[d].migrated_bytes);
    if (write_record(&rec, e) < 0)
        return -1;
    if (r->hdr_rw)
        atomic_fetch_or(&r->hdr_rw->acct_flags, VGPU_ACCT_RECORDED);
    return 0;
}

int vgpu_acct_recover(const struct vgpu_region *r)
{
    if (atomic_load(&r->hdr->acct_flags) & VGPU_ACCT_RECORDED)
        return 0;
    struct vgpu_acct_record rec;
    vgpu_acct_record_from_region(r, &rec);
    rec.recovered = true;
    struct vgpu_err e;
    if (write_record(&rec, &e) < 0) {
        vgpu_debug("job %s ended and is kept until its accounting record can be written: %s", rec.id, e.msg);
        return -1;
    }
    vgpu_debug("job %s: accounting record recovered from its region", rec.id);
    return 0;
}
