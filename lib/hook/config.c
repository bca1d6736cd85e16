/* config.c: which job this process belongs to, read once, on the first hook that needs it.
 *
 *   VGPU_REGION=PATH    the job region written by `vgpu run` (authoritative limits, changed
 *                       live by `vgpu limit`);
 *   otherwise HAMi-core's variables (hami.c), which create or open a region of their own;
 *   otherwise no job: every wrapper passes straight through.
 * A configuration that cannot be used is reported loudly on stderr (it is an error, not a
 * warning: the job runs without limits) and the process carries on unlimited; the library
 * never exits. Nothing here runs at load time.
 *
 *   VGPU_FAIL_CLOSED=1  (vgpu run --fail-closed, or an orchestrator) turns "unlimited" into
 *                       "refused": a process with no usable job region gets
 *                       CUDA_ERROR_NOT_PERMITTED from every context creation and
 *                       CUDA_ERROR_OUT_OF_MEMORY from every allocation (vgpu_job_refused). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gate.h"
#include "hami.h"
#include "hook.h"
#include "vgpu/exitcode.h"
#include "vgpu/region.h"
#include "vgpu/trust.h"
#include "vgpu/units.h"

static struct vgpu_region region;
static struct vgpu_region *job;            /* &region once open and attached */
static _Atomic int slot = -1;
static _Atomic pid_t slot_pid;             /* the process that owns `slot` (fork detection) */
static char label[160] = "no job";
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
/* VGPU_REGION names a region that is damaged (corrupt, limits out of range): the process is
 * refused the GPU as under VGPU_FAIL_CLOSED, never run unlimited (issue 36 N14). */
static bool region_damaged;
/* No process slot in the region (all taken): the process could not be limited, so it is refused
 * the GPU the same way, never run "NOT limited" (issue 35). */
static bool no_slot;

static void set_label(void)
{
    const struct vgpu_region_header *k = region.info;   /* validated copy: not the live page */
    char id[VGPU_JOB_ID_LEN + 1], name[VGPU_JOB_NAME_LEN + 1];
    snprintf(id, sizeof id, "%s", k->id);
    snprintf(name, sizeof name, "%s", k->name);
    if (name[0])
        snprintf(label, sizeof label, "job %s (%s)", name, id);
    else
        snprintf(label, sizeof label, "job %s", id);
}

static void set_prefix(void)
{
    char pfx[32];
    snprintf(pfx, sizeof pfx, "vgpu[%d]", (int)getpid());
    vgpu_log_set_prefix(pfx);
}

static bool attach(void)
{
    struct vgpu_err e = { 0 };
    set_prefix();                       /* again in a forked child: its own pid */
    int s = vgpu_region_attach(&region, &e);
    if (s < 0) {
        /* At load (job not set yet) the process is refused; a forked child keeps the slot of the
         * process it was forked from. */
        vgpu_error("%s: cannot register this process in the job region %s: %s; %s End idle processes of the "
                   "job, or start it again.", label, region.path, e.msg,
                   job ? "it counts its memory in the slot of the process it was forked from."
                       : "it could not be limited, so it is refused the GPU (its contexts fail with "
                         "CUDA_ERROR_NOT_PERMITTED, its allocations with CUDA_ERROR_OUT_OF_MEMORY).");
        return false;
    }
    atomic_store(&slot, s);
    atomic_store(&slot_pid, getpid());
    return true;
}

static void load(void)
{
    set_prefix();
    (void)vgpu_log_level();

    const char *path = getenv("VGPU_REGION");
    struct vgpu_err e = { 0 };
    if (path && *path) {
        /* A root process maps the region and takes its limits from it: only a file nobody else
         * can change or replace (vgpu/trust.h; vgpu run puts root's under /run/vgpu). */
        bool trusted = vgpu_trust_path(path, "VGPU_REGION", 0, &e) == 0;
        bool opened = trusted && vgpu_region_open(&region, path, VGPU_REGION_JOB, &e) == 0;
        if (trusted && !opened && e.code == VGPU_EXIT_STATE) {
            region_damaged = true;
            vgpu_error("the job region VGPU_REGION=%s is damaged: %s; this process is refused the GPU (its "
                       "contexts fail with CUDA_ERROR_NOT_PERMITTED), as it cannot be limited. Start the job "
                       "again.", path, e.msg);
            return;
        }
        if (!opened) {
            vgpu_error("cannot open the job region VGPU_REGION=%s: %s; this process runs WITHOUT GPU limits. "
                       "Start the program with `vgpu run`, which sets VGPU_REGION.", path, e.msg);
            return;
        }
    } else {
        int rc = vgpu_hami_open(&region);
        if (rc <= 0)
            return;                         /* no HAMi variables, or an error already reported */
    }
    vgpu_guard_region(&region);             /* before anything touches the mappings */
    set_label();
    if (attach())
        job = &region;
    else
        no_slot = true;
}

struct vgpu_region *vgpu_job(void)
{
    pthread_once(&once, load);
    return job;
}

/* VGPU_FAIL_CLOSED: "1" on, unset/""/"0" off; anything else is a mistake of whoever set it,
 * said once and taken as on (the safe reading of a variable that asks for safety). */
static int fail_closed = -1;
static pthread_once_t fail_once = PTHREAD_ONCE_INIT;

static void read_fail_closed(void)
{
    const char *v = getenv("VGPU_FAIL_CLOSED");
    if (!v || !*v || strcmp(v, "0") == 0) {
        fail_closed = 0;
        return;
    }
    if (strcmp(v, "1") != 0)
        vgpu_error("VGPU_FAIL_CLOSED='%s': write 1 (or 0); taken as 1", v);
    fail_closed = 1;
}

bool vgpu_job_refused(void)
{
    if (__builtin_expect(vgpu_job() != NULL, 1))
        return false;
    if (region_damaged || no_slot)
        return true;        /* said once by load() */
    pthread_once(&fail_once, read_fail_closed);
    if (!fail_closed)
        return false;
    static _Atomic bool said;
    if (!atomic_exchange(&said, true))
        vgpu_error("VGPU_FAIL_CLOSED=1 and this process has no usable job region (see above, or VGPU_REGION is "
                   "not set): its GPU contexts are refused with CUDA_ERROR_NOT_PERMITTED and its allocations with "
                   "CUDA_ERROR_OUT_OF_MEMORY. Start it under vgpu run, and keep VGPU_REGION and LD_PRELOAD as set.");
    return true;
}

/* A region truncated under us (issue 12 item 3) is fenced off, by vgpu_region_check here (the
 * allocation path, a limits change seen by a launch, exit) or by guard.c's SIGBUS handler (a
 * launch or the compute limiter touched it first): the process keeps the limits it last saw,
 * counts only its own memory from then on, and says so once, from here (never from the
 * handler). */
static _Atomic bool damage_said;

void vgpu_job_guard(struct vgpu_region *r)
{
    if (!r)
        return;
    (void)vgpu_region_check(r);
    if (!__atomic_load_n(&r->damaged, __ATOMIC_ACQUIRE) || atomic_exchange(&damage_said, true))
        return;
    char lim[32] = "no", core[16] = "no";
    uint64_t l = vgpu_region_mem_limit(r, 0);
    if (l)
        vgpu_format_size(l, lim, sizeof lim);
    unsigned c = atomic_load(&r->info->dev[0].core_limit);
    if (c && c < 100)
        snprintf(core, sizeof core, "%u %%", c);
    vgpu_error("%s: the job region is damaged: %s. This process keeps the limits it last saw (%s memory limit "
               "and %s GPU time limit on its GPU 0%s) and from now on counts only its own memory, not the rest "
               "of the job's. Start the job again to share one accounting.", label, r->damaged_why, lim, core,
               vgpu_region_device_count(r) > 1 ? ", and the others'" : "");
}

int vgpu_job_slot(void)
{
    if (!vgpu_job())
        return -1;
    /* A forked child inherits the mapping but not the parent's slot: take its own. */
    if (__builtin_expect(atomic_load_explicit(&slot_pid, memory_order_relaxed) != getpid(), 0)) {
        pthread_mutex_lock(&attach_lock);
        if (atomic_load(&slot_pid) != getpid())
            (void)attach();
        pthread_mutex_unlock(&attach_lock);
    }
    return atomic_load_explicit(&slot, memory_order_relaxed);
}

const char *vgpu_job_label(void)
{
    return label;
}

struct vgpu_gate_state vgpu_gate = { .seen_seq = UINT32_MAX };

/* The slow half of gate.h's check: the job is not known yet, or `vgpu limit` changed the limits
 * since they were last looked at (limits_seq moved). Recounts, then publishes the new sequence
 * last, so that the inline check never pairs a new sequence with an old answer. */
bool vgpu_job_core_limited(void)
{
    struct vgpu_region *r = vgpu_job();
    if (!r)
        return false;
    struct vgpu_region_header *h = (struct vgpu_region_header *)r->hdr;
    uint32_t seq = atomic_load_explicit(&h->limits_seq, memory_order_acquire);
    if (__builtin_expect(seq == atomic_load_explicit(&vgpu_gate.seen_seq, memory_order_acquire), 1))
        return atomic_load_explicit(&vgpu_gate.core_any, memory_order_relaxed);
    /* One recount at a time: two threads publishing answers of two sequences could otherwise
     * leave one sequence paired with the other's answer. */
    static pthread_mutex_t recount = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&recount);
    /* The limits from the copy vgpu_region_check refreshes once it has seen the file whole (a
     * file cut inside the limits page does not fault: the rest of the page reads as zeros, no
     * limits). The compute limiter reads the same copy. A damaged region is said here too. */
    vgpu_job_guard(r);
    const struct vgpu_region_header *k = r->info;
    seq = atomic_load_explicit(&k->limits_seq, memory_order_acquire);
    bool any = false;
    unsigned n = vgpu_region_device_count(r);
    for (unsigned i = 0; i < n && i < VGPU_REGION_MAX_DEVICES; i++)
        /* An oversubscribed device: a spilling job's fair share; a priority alone: an uncapped
         * class of the schedule (limiter.c). */
        if (atomic_load(&k->dev[i].core_limit) != 0 || vgpu_region_oversub(r, i, NULL) ||
            atomic_load(&k->dev[i].priority) != 0)
            any = true;
    atomic_store(&vgpu_gate.one_device, n == 1);
    atomic_store(&vgpu_gate.core_any, any);
    atomic_store_explicit(&vgpu_gate.seen_seq, seq, memory_order_release);
    atomic_store_explicit(&vgpu_gate.limits_seq, &h->limits_seq, memory_order_release);
    pthread_mutex_unlock(&recount);
    return any;
}

/* A clean exit gives the process's usage back at once instead of waiting for a reaper. */
__attribute__((destructor)) static void detach_at_exit(void)
{
    if (job && atomic_load(&slot_pid) == getpid() && atomic_load(&slot) >= 0) {
        vgpu_job_guard(job);    /* damage nothing faulted on (cut inside page 0) is said at least here */
        vgpu_region_detach(job, atomic_load(&slot));
    }
}

/* ---- CUDA ordinals -> job devices, by UUID ----
 * The job's GPUs are written in the region by UUID, in the order `vgpu run` put them in
 * CUDA_VISIBLE_DEVICES. A child that unsets or changes that variable sees other GPUs, or the
 * same ones under other ordinals: the ordinal alone would charge the wrong device (or none). */

static _Atomic int ordinal_map[64];        /* 0: not known yet; job index + 1; or VGPU_NOT_JOB_DEV */

/* "GPU-xxxxxxxx-..." or "MIG-xxxxxxxx-..." without its prefix. */
static const char *uuid_hex(const char *u)
{
    return (strncmp(u, "GPU-", 4) == 0 || strncmp(u, "MIG-", 4) == 0) ? u + 4 : u;
}

int vgpu_job_dev(int ordinal)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || ordinal < 0)
        return -1;
    unsigned n = vgpu_region_device_count(r);
    if (!r->info->dev[0].uuid[0] || ordinal >= 64)
        return (unsigned)ordinal < n ? ordinal : -1;
    int m = atomic_load_explicit(&ordinal_map[ordinal], memory_order_relaxed);
    if (__builtin_expect(m != 0, 1))
        return m > 0 ? m - 1 : m;
    vgpu_cuDeviceGetUuid_v2_fn get = (vgpu_cuDeviceGetUuid_v2_fn)vgpu_real_cuda_sym("cuDeviceGetUuid_v2");
    if (!get)
        get = (vgpu_cuDeviceGetUuid_v2_fn)vgpu_real_cuda_sym("cuDeviceGetUuid");
    CUuuid u;
    if (!get || get(&u, ordinal) != CUDA_SUCCESS)
        return (unsigned)ordinal < n ? ordinal : -1;   /* cannot tell (not initialised yet): as numbered */
    const unsigned char *b = (const unsigned char *)u.bytes;
    char hex[40];
    snprintf(hex, sizeof hex, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    int found = VGPU_NOT_JOB_DEV;
    for (unsigned i = 0; i < n && found < 0; i++)
        if (strcasecmp(uuid_hex(r->info->dev[i].uuid), hex) == 0)
            found = (int)i;
    if (found == VGPU_NOT_JOB_DEV) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        vgpu_warn("%s: CUDA device %d (UUID %s) is not one of the job's GPUs (CUDA_VISIBLE_DEVICES=%s; the job "
                  "was given %s%s): allocations on it are refused with CUDA_ERROR_OUT_OF_MEMORY. Leave "
                  "CUDA_VISIBLE_DEVICES as vgpu run set it.",
                  label, ordinal, hex, cvd ? cvd : "(unset)", r->info->dev[0].uuid, n > 1 ? ",..." : "");
    }
    atomic_store(&ordinal_map[ordinal], found >= 0 ? found + 1 : found);
    return found;
}
