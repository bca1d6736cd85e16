/* limiter.c: the compute limiter (see limiter.h and vgpu/sched.h).
 *
 * Per job device, this process keeps: the scheduler file of that GPU, its entries there, and
 * the lease it holds (0 when none) with its deadline. A launch under a valid lease on a stream
 * already seen during that lease passes after loading the local lease word (again after
 * counting itself as inside the driver), and every 8th launch also the shared one (which a
 * preemptor takes) and the clock against the shared deadline; the helper thread ends each
 * lease at its deadline or when a preemptor wakes it, zeroing the local word before it drains. Anything
 * else takes the device's mutex: track the stream, or end an expired lease, or wait for the
 * next turn (futex sleeps in the shared file, bounded; never a spin).
 *
 * Ending a lease ("draining"): synchronize every stream used during it (legacy default stream
 * included; a per-thread default stream cannot be reached from another thread, so then the
 * whole context), through the real driver, and charge the wall time from the grant until the
 * work finished. Leases are exclusive on the GPU, so that time is exactly the GPU time the
 * job occupied, whatever its kernels look like; an overrun (a kernel longer than the lease)
 * is charged too and paid back by the next turns. A helper thread (started with the first
 * lease, all signals blocked) ends leases at their deadline even when the application stops
 * launching; a launching thread that sees an expired lease ends it itself.
 *
 * Pacing: an application that never synchronizes (a PyTorch training loop) can queue seconds
 * of GPU work inside one lease of a few milliseconds; the drain then runs all of it, and the
 * overrun, although charged and paid back, shows as a burst at 100% followed by a long stall.
 * So every F-th launch under a lease records a fence (an event) on its stream, and at most two
 * fences may be outstanding: the launch waits for the older one first. F adapts so that one
 * interval between fences holds about FENCE_TARGET_NS of GPU work, measured: when a fence is
 * found done, the GPU time from the previous done fence to it (cuEventElapsedTime) is the work
 * of F launches, and F is scaled towards the target (long kernels: down to a fence every
 * launch, whose cost is nothing next to the kernel; short kernels: up to every 256th launch, so
 * the cost per launch stays a few ns). Measuring matters: the earlier rule (halve after a long
 * wait, double whenever the older fence was already done) doubled F after every synchronize of
 * the application, and a loop that synchronizes every 64 launches of 2.7 ms kernels kept tens
 * of ms queued: drains of up to 65 ms, preemptions that overlapped the two jobs for as long,
 * and two 30/70 jobs that reached 87 % of the GPU together where time-slicing reaches 89 %
 * (tests/gpu/core.sh "together"). The fast path pays one thread-local increment and compare.
 *
 * Jobs of several GPUs (DESIGN.md decision 11) are not paced. A thread that drives several GPUs
 * waited at one GPU's fence while the others had nothing queued, so the GPUs took turns inside the
 * job's own leases, which are charged whole: one process round robin over two GPUs got 32 % per
 * GPU at --core 50 (2 x H200, PyTorch; the simulated GPU the same), and the ranks of a collective
 * job (NCCL), each waiting at its fence with a collective queued that spins until its peer's
 * starts, kept 3 % of their rate on the H200 and 34-38 % on the simulated GPU. Unpaced, each
 * process queues a whole step on every GPU before it waits: each GPU at its cap (30/50 % within a
 * point) and collective jobs of 2 and 4 ranks at 50-51 % of their rate under --core 50, beside a
 * single-GPU job as alone (tests/cli/multi_gpu.sh). The cost: what such a job queues before its
 * next synchronize is drained at the end of its lease (an overrun, charged and paid back by its
 * next turns), and another job's request waits for it, as under plain time-slicing. Its turns on
 * its GPUs open and close together (gang.c): a device does not launch past the others while one
 * of them waits for its turn, and a device behind the others keeps its lease past the deadline
 * (bounded) until it has caught up, so no turn ends between two ranks' launches of a collective.
 *
 * Preemption (vgpu/sched.h, "Latency"): the deadline a launch compares against is the one in the
 * shared schedule, so a waiter that preempts us (by setting it to now) stops our launches at the
 * next one; the helper thread sleeps on the schedule's yield futex, so it drains and passes the
 * lease on at once even when the application is not launching. When a waiter only asks, or
 * nobody does, the helper gives the lease back once no launch came and nothing was in flight for
 * VGPU_SCHED_IDLE_NS (`touched`): held idle, it would be charged for GPU time nobody used.
 *
 * A launch never waits longer than VGPU_SCHED_STALL_NS: a schedule that keeps it out that long
 * is damaged or held by someone hostile, and the process then runs unscheduled (the driver's
 * plain time-slicing) until the schedule moves again, saying so once. */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hook.h"
#include "leasetrace.h"
#include "limiter.h"
#include "limiter_internal.h"
#include "fairshare.h"
#include "gang.h"
#include "vgpu/arbiter.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"

struct dstate vgpu_lim_devs[MAX_DEV];
/* The launch path's thread-local state. initial-exec: libvgpu.so is preloaded, so its TLS sits
 * in the static block and an access is one %fs-relative load, not a __tls_get_addr call. */
#define LAUNCH_TLS static __thread __attribute__((tls_model("initial-exec")))
LAUNCH_TLS uint64_t t_lease[MAX_DEV];
LAUNCH_TLS CUstream t_stream[MAX_DEV];
LAUNCH_TLS unsigned t_since_fence[MAX_DEV];

#define FENCE_EVERY_MIN   1
#define FENCE_EVERY_MAX   256
#define FENCE_EVERY_START 1      /* grows x4 per measured interval: 256 after four */
#define ARB_LOOK_NS       500000000ULL  /* look for a (re)started arbiter twice a second: jobs
                                           * rejoin within a second */
#define CLOCK_EVERY       8      /* the fast path checks the shared schedule and the clock every 8th launch */
#define FENCE_TARGET_NS   500000ULL     /* GPU work between two fences: with two outstanding, about
                                           * 1 ms is queued, which is what a drain or a preempting
                                           * waiter waits for (reference/latency.md) */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* ---- the real driver functions draining needs -------------------------------------------------- */

static struct {
    vgpu_cuCtxGetCurrent_fn get_ctx;
    vgpu_cuCtxSetCurrent_fn set_ctx;
    vgpu_cuCtxSynchronize_fn ctx_sync;
    vgpu_cuStreamSynchronize_fn stream_sync;
    vgpu_cuStreamQuery_fn stream_query;
    vgpu_cuStreamIsCapturing_fn capturing;
    vgpu_cuEventCreate_fn ev_create;
    vgpu_cuEventRecord_fn ev_record;
    vgpu_cuEventQuery_fn ev_query;
    vgpu_cuEventSynchronize_fn ev_sync;
    vgpu_cuEventDestroy_v2_fn ev_destroy;
    vgpu_cuEventElapsedTime_fn ev_elapsed;
} drv;

static void reset_child(void);

static void init(void)
{
    drv.get_ctx = (vgpu_cuCtxGetCurrent_fn)vgpu_real_cuda_sym("cuCtxGetCurrent");
    drv.set_ctx = (vgpu_cuCtxSetCurrent_fn)vgpu_real_cuda_sym("cuCtxSetCurrent");
    drv.ctx_sync = (vgpu_cuCtxSynchronize_fn)vgpu_real_cuda_sym("cuCtxSynchronize");
    drv.stream_sync = (vgpu_cuStreamSynchronize_fn)vgpu_real_cuda_sym("cuStreamSynchronize");
    drv.stream_query = (vgpu_cuStreamQuery_fn)vgpu_real_cuda_sym("cuStreamQuery");
    drv.capturing = (vgpu_cuStreamIsCapturing_fn)vgpu_real_cuda_sym("cuStreamIsCapturing");
    drv.ev_create = (vgpu_cuEventCreate_fn)vgpu_real_cuda_sym("cuEventCreate");
    drv.ev_record = (vgpu_cuEventRecord_fn)vgpu_real_cuda_sym("cuEventRecord");
    drv.ev_query = (vgpu_cuEventQuery_fn)vgpu_real_cuda_sym("cuEventQuery");
    drv.ev_sync = (vgpu_cuEventSynchronize_fn)vgpu_real_cuda_sym("cuEventSynchronize");
    drv.ev_destroy = (vgpu_cuEventDestroy_v2_fn)vgpu_real_cuda_sym("cuEventDestroy_v2");
    drv.ev_elapsed = (vgpu_cuEventElapsedTime_fn)vgpu_real_cuda_sym("cuEventElapsedTime");
    vgpu_lim_keeper_init();
    for (unsigned i = 0; i < MAX_DEV; i++) {
        pthread_mutex_init(&vgpu_lim_devs[i].mu, NULL);
        vgpu_lim_devs[i].s.fd = -1;
        vgpu_lim_devs[i].proc = -1;
        atomic_store(&vgpu_lim_devs[i].fence_every, FENCE_EVERY_START);
    }
    pthread_atfork(NULL, NULL, reset_child);
}

/* A forked child holds no lease and has no helper thread; its parent's entries are not its own. */
static void reset_child(void)
{
    vgpu_lim_keeper_reset_child();
    for (unsigned i = 0; i < MAX_DEV; i++) {
        struct dstate *d = &vgpu_lim_devs[i];
        pthread_mutex_init(&d->mu, NULL);
        atomic_store(&d->lease, 0);
        atomic_store(&d->inflight, 0u);
        d->proc = -1;
        d->ready = d->ready == 1 ? 0 : d->ready;
        d->nstreams = 0;
        d->whole_ctx = false;
        d->nfence = 0;           /* the parent's events are not the child's */
        d->have_done = false;
        d->fence_ctx = NULL;
        if (d->s.f)
            vgpu_sched_close(&d->s);
    }
    memset(t_lease, 0, sizeof t_lease);
    memset(t_since_fence, 0, sizeof t_since_fence);
}

static uint64_t job_key(const struct vgpu_region *r)
{
    return vgpu_sched_job_key(r->info->id, VGPU_JOB_ID_LEN);
}

struct limits {
    unsigned cap;
    bool soft;
    int prio;
    bool uncapped;   /* no cap, a priority: an uncapped class (vgpu/sched.h); cap is 0 then */
};

/* The job's own core limit on `dev` as set: 0 none (a spilling job's fair share applies), 100 no
 * limit asked for explicitly (`--core 100`: no fair share either). */
static unsigned own_cap(const struct vgpu_region *r, int dev)
{
    unsigned c = atomic_load(&r->info->dev[dev].core_limit);
    return c > 100 ? 100 : c;
}

/* From r->info, the copy config.c refreshes (after an fstat) when the gate sees the limits change:
 * a region cut inside its limits page reads as zeros there, no limit (issue 12 item 3). Without a
 * core limit of its own, a spilling job's fair share (vgpu_fair_cap). */
static struct limits read_limits(const struct vgpu_region *r, int dev)
{
    const struct vgpu_region_dev_limits *l = &r->info->dev[dev];
    struct limits x = { own_cap(r, dev), atomic_load(&l->core_policy) == VGPU_CORE_SOFT, atomic_load(&l->priority), false };
    if (x.cap == 100)
        x.cap = 0;   /* 100% is no limit: nothing to schedule */
    else if (!x.cap && (x.cap = vgpu_fair_cap(r, dev)) != 0)
        x.soft = false;
    x.prio = x.prio > 0 ? VGPU_PRIO_HIGH : x.prio < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
    /* A priority without a cap (vgpu run --priority high|low alone): the job joins the schedule
     * uncapped, as a service or as background (vgpu/sched.h, "Uncapped priority classes"). */
    x.uncapped = !x.cap && own_cap(r, dev) == 0 && x.prio != VGPU_PRIO_NORMAL;
    return x;
}

/* The cap the schedule is told: 0 for an uncapped class. */
static unsigned sched_cap(const struct limits *x)
{
    return x->uncapped ? 0 : x->cap ? x->cap : 1;
}

/* The UUID of job device `dev`: the region's, or the driver's when the region names none (a job
 * made from HAMi-core's variables knows only memory sizes). */
static bool device_uuid(const struct vgpu_region *r, int dev, char *buf, size_t len)
{
    if (r->info->dev[dev].uuid[0]) {
        snprintf(buf, len, "%.*s", (int)sizeof r->info->dev[dev].uuid, r->info->dev[dev].uuid);
        return true;
    }
    vgpu_cuDeviceGet_fn get = (vgpu_cuDeviceGet_fn)vgpu_real_cuda_sym("cuDeviceGet");
    vgpu_cuDeviceGetUuid_fn get_uuid = (vgpu_cuDeviceGetUuid_fn)vgpu_real_cuda_sym("cuDeviceGetUuid");
    CUdevice d;
    CUuuid u;
    if (!get || !get_uuid || get(&d, dev) != CUDA_SUCCESS || get_uuid(&u, d) != CUDA_SUCCESS)
        return false;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return true;
}

/* Joins the machine-wide schedule of the GPU (vgpu/sched.h). */
static bool setup(struct dstate *d, const struct vgpu_region *r, int dev)
{
    if (d->ready)
        return d->ready > 0;
    d->ready = -1;
    d->full = false;   /* set again below when it is the reason */
    char uuid[128];
    if (!device_uuid(r, dev, uuid, sizeof uuid)) {
        vgpu_error("%s: cannot tell which GPU device %d is (cuDeviceGetUuid failed); GPU time there is NOT "
                   "limited", vgpu_job_label(), dev);
        return false;
    }
    struct vgpu_err e = { 0 };
    struct limits x = read_limits(r, dev);
    /* The last user of a schedule may remove it just as we join: then join the new one. */
    for (int attempt = 0; attempt < 5; attempt++) {
        if (vgpu_sched_open(&d->s, uuid, &e) != 0) {
            vgpu_error("%s: %s; GPU time on %s is NOT limited", vgpu_job_label(), e.msg, uuid);
            return false;
        }
        /* The daemon reads the cap of a job whose limits are root's (vgpu run --user) from the file
         * itself, not from us. */
        d->s.limits_fd = r->file_uid == 0 && geteuid() != 0 ? r->fd : -1;
        d->job = vgpu_sched_job(&d->s, job_key(r), sched_cap(&x), x.soft, x.prio, vgpu_now_ns());
        d->proc = d->job >= 0 ? vgpu_sched_attach(&d->s, (unsigned)d->job, getpid(), vgpu_proc_start_time(getpid()))
                              : -1;
        if (d->proc < 0 || !vgpu_sched_removed(&d->s))
            break;
        vgpu_sched_detach(&d->s, d->proc);
        vgpu_sched_close(&d->s);
        d->proc = -1;
    }
    if (d->job < 0 || d->proc < 0) {
        /* Never "NOT limited" (issue 35): the launch waits for room (slow_path), and joins again. */
        if (!d->warned_full)
            vgpu_error("%s: the GPU scheduler of %s has no room for this job now (%d jobs, %d processes at most; "
                       "a user may hold %d jobs of it through the daemon): its launches wait until there is "
                       "room, rather than run with GPU time not limited. End some of your jobs on this GPU",
                       vgpu_job_label(), uuid, VGPU_SCHED_MAX_JOBS, VGPU_SCHED_MAX_PROCS, VGPU_ARB_USER_JOBS);
        d->warned_full = true;
        d->full = true;
        d->ready = 0;   /* joined again at the next look */
        vgpu_sched_close(&d->s);
        return false;
    }
    if (d->warned_full)
        vgpu_warn("%s: the GPU scheduler of %s has room again: this job's launches go on", vgpu_job_label(), uuid);
    d->full = d->warned_full = false;
    d->ready = 1;
    d->gang = vgpu_region_device_count(r) > 1;
    d->arb_look_at = vgpu_now_ns() + ARB_LOOK_NS;
    vgpu_fair_join(dev, &d->s, d->job);   /* a spilling job marks itself there */
    return true;
}

/* Leaves the schedule and joins the GPU's schedule anew: the arbiter went away (our user's own
 * schedule, until it is back), or came back (its schedule). Called with d->mu held and no lease. */
static bool rejoin(struct dstate *d, const struct vgpu_region *r, int dev)
{
    if (d->s.f) {
        vgpu_sched_detach(&d->s, d->proc);
        vgpu_sched_close(&d->s);
    }
    d->proc = -1;
    d->job = -1;
    d->ready = 0;
    d->clear_until = 0;
    return setup(d, r, dev);
}

/* Whether to rejoin now: the arbiter's schedule is lost, or we are on our own user's schedule and
 * a daemon answers (looked for once every ARB_LOOK_NS, at lease boundaries only: never on the
 * launch fast path). */
static bool schedule_moved(struct dstate *d, uint64_t now)
{
    if (d->s.remote)
        return vgpu_sched_lost(&d->s);
    if (now < d->arb_look_at)
        return false;
    d->arb_look_at = now + ARB_LOOK_NS;
    return vgpu_arb_available();
}

static void track(struct dstate *d, CUstream stream, bool ptsz)
{
    if (stream == CU_STREAM_PER_THREAD || (ptsz && stream == NULL)) {
        d->whole_ctx = true;
        return;
    }
    for (unsigned i = 0; i < d->nstreams; i++)
        if (d->streams[i] == stream)
            return;
    if (d->nstreams < MAX_STREAMS)
        d->streams[d->nstreams++] = stream;
    else
        d->whole_ctx = true;
}

/* The idle gap we expect before our next want: the second shortest of the last GAPS (one early
 * request does not move it), once there are four; 0 before. */
static uint64_t expected_gap(const struct dstate *d)
{
    if (d->ngaps < 4)
        return 0;
    uint64_t a = UINT64_MAX, b = UINT64_MAX;   /* shortest, second shortest */
    for (unsigned i = 0; i < d->ngaps; i++) {
        uint64_t g = d->gaps[i];
        if (g < a) {
            b = a;
            a = g;
        } else if (g < b) {
            b = g;
        }
    }
    return b;
}

/* How much later than the expected gap our return may come: the longest of the last GAPS gaps
 * over the expected one, and at least a quarter of it. A client's sleep is now and then woken a
 * millisecond late (an H200, 5 ms gaps: 0.97 ms once in ~400 requests), which no window of 8
 * gaps foresees: without the floor, a training job that had kept clear until the expected return
 * queued a 2.7 ms kernel 0.1 ms before the late one (issue 34). The holder waits for it only
 * while we are due and not back, so a return on time costs it nothing. */
static uint64_t late_spread(const struct dstate *d, uint64_t expected)
{
    uint64_t longest = 0;
    for (unsigned i = 0; i < d->ngaps; i++)
        if (d->gaps[i] > longest)
            longest = d->gaps[i];
    uint64_t late = longest > expected ? longest - expected : 0;
    return late < expected / 4 ? expected / 4 : late > expected ? expected : late;
}

static void note_gap(struct dstate *d, uint64_t arrived)
{
    if (d->gone_idle_at && arrived > d->gone_idle_at && arrived - d->gone_idle_at < VGPU_SCHED_CLEAR_AHEAD_NS) {
        d->gaps[d->gap_next] = arrived - d->gone_idle_at;
        d->gap_next = (d->gap_next + 1) % GAPS;
        if (d->ngaps < GAPS)
            d->ngaps++;
        atomic_store(&d->service, expected_gap(d) != 0);
    }
    d->gone_idle_at = 0;
}

/* GPU work that would be queued with one more interval launched now: the outstanding fences'
 * intervals, the launches since the last fence (when the lease launched anything) and the new
 * interval, each as long as the last one measured. */
static uint64_t interval_of(const struct dstate *d)
{
    return d->interval_ns ? d->interval_ns : FENCE_TARGET_NS;
}

static uint64_t queued_after(const struct dstate *d)
{
    return (d->nfence + (d->nstreams || d->whole_ctx ? 2 : 1)) * interval_of(d);
}

/* Waits for the lease's work and passes the lease on. Called with d->mu held. */
/* at_deadline: the lease ran out (rather than being given back idle); see vgpu_sched_note_end.
 * idle_at: when the helper first saw the lease idle, for a lease given back idle (else 0). */
void vgpu_lim_drain_and_release(struct dstate *d, int dev, bool at_deadline, uint64_t idle_at)
{
    /* The lease word goes to 0 first: launches compare it and stop at once (they then wait for
     * d->mu, which we hold until the lease has been passed on). */
    uint64_t lease = atomic_exchange(&d->lease, 0);
    if (!lease)
        return;
    if (d->gang)
        vgpu_gang_mark(dev, false, false);
    uint64_t t_end = vgpu_now_ns();
    vgpu_lt_record(VGPU_LT_END, dev, t_end, 0);
    /* Launches that passed under the lease may still be inside the driver (blocked on a full
     * push buffer): their kernels are this lease's. The exchange above and their count are both
     * sequentially consistent, so a launch either sees the lease gone or is counted here.
     * Bounded: a launch that never returns does not hold the GPU's schedule. */
    for (unsigned spins = 0; atomic_load(&d->inflight) != 0 && spins < 20000; spins++) {
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
    /* The drain end of a holder we preempted, read before our own "draining" mark replaces it. */
    uint64_t ov = vgpu_sched_overlap_mark(&d->s);
    vgpu_sched_draining(&d->s, lease, t_end);
    CUcontext prev = NULL;
    bool switched = false;
    if (drv.get_ctx && drv.set_ctx && drv.get_ctx(&prev) == CUDA_SUCCESS && prev != d->ctx && d->ctx)
        switched = drv.set_ctx(d->ctx) == CUDA_SUCCESS;
    if (d->whole_ctx && drv.ctx_sync) {
        drv.ctx_sync();
    } else if (drv.stream_sync) {
        for (unsigned i = 0; i < d->nstreams; i++) {
            CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
            /* A capturing stream runs nothing, and synchronizing it would break the capture. */
            if (drv.capturing && drv.capturing(d->streams[i], &st) == CUDA_SUCCESS &&
                st != CU_STREAM_CAPTURE_STATUS_NONE)
                continue;
            drv.stream_sync(d->streams[i]);
        }
    }
    if (switched)
        drv.set_ctx(prev);
    uint64_t now = vgpu_now_ns();
    /* A preemption's overlap is shared while both have work, then the drain is the holder's
     * (vgpu/sched.h, "The overlap of a preemption"). */
    bool preempted = vgpu_sched_deadline(&d->s, lease) == 0;
    uint64_t start = atomic_load(&d->start), used;
    if (preempted) {
        uint64_t tp = vgpu_sched_preempted_at(&d->s, start, now);
        used = vgpu_sched_used_preempted(start, tp, vgpu_sched_preemptor_busy(&d->s, tp, now), now);
    } else {
        /* Our busy time ends at the drain, or where the helper saw the lease go idle. */
        uint64_t end_busy = idle_at && idle_at >= start && idle_at <= now ? idle_at : now;
        if (d->busy_from && end_busy > d->busy_from)
            d->busy_ns += end_busy - d->busy_from;
        d->busy_from = 0;
        if (d->in_overlap && ov > start && ov <= now)
            d->busy_in_ov = d->busy_ns;   /* the drain ended before the helper saw it: an upper bound */
        used = vgpu_sched_used_overlapped(start, ov, d->busy_in_ov, d->busy_ns, now);
        vgpu_sched_note_busy(&d->s, lease, d->busy_ns, 0);   /* for a holder we preempted, still draining */
    }
    /* It had work to the end when the lease ran out, and when a preemptor took it: either way its
     * next launch, right after, is more of the same work, not a request that can preempt (a
     * preempted job that counted as new work took the lease straight back, and two saturating
     * --core 60 jobs preempted each other hundreds of times a second: core_preempt.sh). */
    vgpu_sched_note_end(&d->s, d->proc, at_deadline || preempted, now);
    /* Given back idle: our next want measures the gap, and holders we would preempt keep clear
     * of our expected return (published before the release wakes them). */
    d->gone_idle_at = idle_at && !at_deadline && !preempted ? idle_at : 0;
    if (d->gone_idle_at) {
        uint64_t gap = expected_gap(d);
        vgpu_sched_expect(&d->s, d->proc, gap ? idle_at + gap : 0, gap, gap ? late_spread(d, gap) : 0);
    }
    if (!vgpu_sched_release(&d->s, lease, used, now)) {
        vgpu_sched_drained(&d->s, now);   /* preempted: our work ran until now */
        vgpu_lt_record(VGPU_LT_PREEMPTED, dev, now, used);
    } else {
        vgpu_lt_record(VGPU_LT_RELEASE, dev, now, used);
    }
    struct vgpu_region *r = vgpu_job();
    if (r && r->use)
        atomic_fetch_add(&r->use->dev[dev].gpu_time_ns, used);
    d->nstreams = 0;
    d->whole_ctx = false;
    d->nfence = 0;               /* drained: every fence recorded so far is done */
    d->have_done = false;        /* and the next interval would span other jobs' turns */
    atomic_store(&d->end, 0);
    atomic_store(&d->lease, 0);
}

/* True when the lease has work on the GPU (a tracked stream not done). A process waiting for its
 * kernel is not idle; one whose streams are done and that launches nothing is. A per-thread
 * default stream cannot be queried from the helper thread: then only launches count. Called
 * with d->mu held. */
bool vgpu_lim_work_in_flight(struct dstate *d)
{
    if (!drv.stream_query || d->whole_ctx)
        return false;
    CUcontext prev = NULL;
    bool switched = false;
    if (drv.get_ctx && drv.set_ctx && drv.get_ctx(&prev) == CUDA_SUCCESS && prev != d->ctx && d->ctx)
        switched = drv.set_ctx(d->ctx) == CUDA_SUCCESS;
    bool busy = false;
    for (unsigned i = 0; i < d->nstreams && !busy; i++)
        busy = drv.stream_query(d->streams[i]) == CUDA_ERROR_NOT_READY;
    if (switched)
        drv.set_ctx(prev);
    return busy;
}

/* ---- pacing: bound the work in flight under a lease ------------------------------------------------- */

/* Called with d->mu held, by a launch under our lease, every F-th launch: waits until one more
 * fence may be outstanding. true when pace_record should then record it on `rec` (*ovl: recorded
 * during an overlap). */
static bool pace_wait(struct dstate *d, CUstream rec, bool *ovl_out)
{
    if (!drv.ev_create || !drv.ev_record || !drv.ev_query || !drv.ev_sync || !drv.get_ctx || !vgpu_lim_keeper_started())
        return false;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    /* An event recorded on a capturing stream would become a node of the application's graph. */
    if (drv.capturing && (drv.capturing(rec, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE))
        return false;
    /* While a holder we preempted drains, our work shares the GPU with its queued kernels under
     * the driver's time-slicing: a fence then completes only after the holder's time slice, so
     * waiting for one made each of our launches wait a slice (an inference request of 8 kernels
     * took 6.8 ms instead of 0.6 on the H100), and the interval it measured included the other
     * job's kernels (F fell to 1 for good). So during the overlap OVERLAP_FENCES more intervals
     * may be outstanding (still bounded: without any fence an unsynchronized preemptor queued
     * 1.4 s of work in the 10 ms of a drain), and no interval recorded then is measured. */
    bool ovl = vgpu_sched_overlapping(&d->s, vgpu_now_ns());
    *ovl_out = ovl;
    CUcontext ctx = NULL;
    if (drv.get_ctx(&ctx) != CUDA_SUCCESS || !ctx)
        return false;
    if (ctx != d->fence_ctx) {
        /* Events belong to a context: make new ones, and free the old ones (a process that
         * alternates between two contexts would otherwise leak events at every switch; an
         * event may be destroyed while its record is pending, and destroying one of a context
         * that is gone just fails). Timing events: the interval's GPU time sets F. */
        if (d->fence_ctx && drv.ev_destroy) {
            for (unsigned i = 0; i < MAX_FENCES; i++)
                drv.ev_destroy(d->fence[i]);
            drv.ev_destroy(d->done);
        }
        d->nfence = 0;
        d->have_done = false;
        d->fence_ctx = NULL;
        CUevent ev[MAX_FENCES + 1];
        unsigned made = 0;
        while (made < MAX_FENCES + 1 && drv.ev_create(&ev[made], CU_EVENT_DEFAULT) == CUDA_SUCCESS)
            made++;
        if (made < MAX_FENCES + 1) {
            while (made > 0 && drv.ev_destroy)
                drv.ev_destroy(ev[--made]);
            return false;
        }
        for (unsigned i = 0; i < MAX_FENCES; i++)
            d->fence[i] = ev[i];
        d->done = ev[MAX_FENCES];
        d->fence_ctx = ctx;
    }
    unsigned every = atomic_load_explicit(&d->fence_every, memory_order_relaxed);
    if (d->max_fences < 1 || d->max_fences > 2)
        d->max_fences = 2;
    unsigned limit = d->max_fences + (ovl ? OVERLAP_FENCES : 0);
    while (d->nfence >= limit) {
        uint64_t t0 = vgpu_now_ns();
        bool waited = drv.ev_query(d->fence[0]) != CUDA_SUCCESS;
        if (waited) {
            drv.ev_sync(d->fence[0]);
            uint64_t t1 = vgpu_now_ns();
            vgpu_lt_record(VGPU_LT_FENCE, (int)(d - vgpu_lim_devs), t1, t1 - t0);
        }
        float ms = 0;
        if (d->have_done && !d->done_ovl && !d->fence_ovl[0] && drv.ev_elapsed &&
            drv.ev_elapsed(&ms, d->done, d->fence[0]) == CUDA_SUCCESS) {
            /* The time from one fence's completion to the next: the GPU time of the last F
             * launches when the GPU was busy throughout, which it was when we had to wait (the
             * GPU is behind). When the fence was already done, the GPU may have waited for the
             * application (a CPU-bound or bursty loop) and the figure is only an upper bound:
             * then it may raise F, never lower it (lowering it there put a fence on every
             * launch of a bursty loop, at a microsecond each). */
            uint64_t took = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
            if (waited && took)
                d->interval_ns = took;   /* the GPU was behind: the interval's work, for keeping clear */
            uint64_t want = took ? (uint64_t)every * FENCE_TARGET_NS / took : (uint64_t)every * 4;
            if (want > (uint64_t)every * 4)
                want = (uint64_t)every * 4;   /* grow gently: one short interval proves little */
            if (!waited && want < every)
                want = every;
            every = want < FENCE_EVERY_MIN ? FENCE_EVERY_MIN : want > FENCE_EVERY_MAX ? FENCE_EVERY_MAX : (unsigned)want;
            atomic_store_explicit(&d->fence_every, every, memory_order_relaxed);
            /* Kernels longer than two intervals: one fence, so that the launch waits for the one
             * before last, and two kernels are queued, not three (the drain and a preemptor's
             * wait: on the H100, 4096² fp32 matmuls of over 10 ms queued 30 ms). */
            if (waited || every > FENCE_EVERY_MIN)
                d->max_fences = every == FENCE_EVERY_MIN && took > 2 * FENCE_TARGET_NS ? 1 : 2;
        }
        /* fence[0] is done: it starts the next interval; the old `done` is free to record. */
        CUevent free_ev = d->done;
        d->done = d->fence[0];
        d->done_ovl = d->fence_ovl[0];
        d->have_done = true;
        for (unsigned i = 0; i + 1 < d->nfence; i++) {
            d->fence[i] = d->fence[i + 1];
            d->fence_ovl[i] = d->fence_ovl[i + 1];
        }
        d->fence[d->nfence - 1] = free_ev;
        d->nfence--;
    }
    return true;
}

static void pace_record(struct dstate *d, CUstream rec, bool ovl)
{
    d->fence_ovl[d->nfence] = ovl;
    if (drv.ev_record(d->fence[d->nfence], rec) == CUDA_SUCCESS)
        d->nfence++;
}

/* ---- the gate ------------------------------------------------------------------------------------------ */

/* Whether launches may pass under `lease`: before its deadline, or, for a job of several GPUs,
 * after it while this device catches up with the job's others (gang.c). */
static bool lease_live(struct dstate *d, int dev, uint64_t lease, uint64_t now)
{
    uint64_t deadline = vgpu_sched_deadline(&d->s, lease);
    return now < deadline || (d->gang && vgpu_gang_hold(dev, deadline, now));
}

/* The longest a launch of a job capped at `cap` may wait for its turn: the time to repay the
 * largest debt and earn a quantum, twice, and never under VGPU_SCHED_STALL_NS. */
static uint64_t stall_bound(unsigned cap)
{
    uint64_t repay = (vgpu_sched_quantum(cap) + VGPU_SCHED_DEBT_NS) * 100 / (cap ? cap : 1);
    return 2 * repay > VGPU_SCHED_STALL_NS ? 2 * repay : VGPU_SCHED_STALL_NS;
}

/* After a join that failed: when it failed for want of room in the schedule (d->full), waits,
 * sleeping, and joins again every FULL_LOOK_NS until it gets in; true then. false for any other
 * failure (said by setup). A full table is never a reason to launch uncapped: the room comes back
 * as the user's own other jobs end, or as other users' do (root always has room: the daemon keeps
 * entries only root's jobs take). Called with d->mu held; it is let go while sleeping. */
#define FULL_LOOK_NS 100000000ULL
static bool wait_for_room(struct dstate *d, const struct vgpu_region *r, int dev)
{
    while (d->full) {
        pthread_mutex_unlock(&d->mu);
        struct timespec ts = { 0, (long)FULL_LOOK_NS };
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&d->mu);
        if (d->ready == 1 || setup(d, r, dev))
            return true;
    }
    return false;
}

/* Returns whether the launch was counted in d->inflight (it runs under our lease). Never inlined:
 * in vgpu_limiter_gate it made the fast path spill the stream to the stack and load it back. */
__attribute__((noinline)) static bool slow_path(int dev, struct dstate *d, CUstream stream, bool ptsz)
{
    struct vgpu_region *r = vgpu_job();
    if (!r || (unsigned)dev >= vgpu_region_device_count(r))
        return false;
    pthread_once(&init_once, init);
    /* When the launch arrived: a saturating loop's launch arrives as its lease ends and then
     * waits here for the drain; its want must say so, or a loaded machine's late wake-up after
     * the drain would look like new work, which may preempt (vgpu_sched_note_end). */
    uint64_t arrived = vgpu_now_ns();
    pthread_mutex_lock(&d->mu);
    if (!setup(d, r, dev) && !wait_for_room(d, r, dev)) {
        pthread_mutex_unlock(&d->mu);
        return false;
    }
    bool counted = false;
    uint64_t waited_from = 0;
    for (;;) {
        uint64_t now = vgpu_now_ns();
        uint64_t lease = atomic_load(&d->lease);
        if (!lease && now < d->bypass_until)
            break;                       /* the schedule looked damaged: unscheduled for now */
        if (lease && lease_live(d, dev, lease, now)) {
            if (d->gang && vgpu_gang_should_close(dev, d->gang_outs, now)) {
                /* Another GPU of the job is out of its turn: end ours too, charged what it used,
                 * and open the next one with it (gang.c, "one clock"). */
                vgpu_lim_drain_and_release(d, dev, true, 0);
                continue;
            }
            if (d->gang && vgpu_gang_ahead_of_waiter(dev, d->gang_seen)) {
                /* Another rank of the job waits for its turn: launching on would queue a
                 * collective it cannot join before then (gang.c). Hold the lease, launch nothing. */
                pthread_mutex_unlock(&d->mu);
                struct timespec ts = { 0, 100000 };
                nanosleep(&ts, NULL);
                pthread_mutex_lock(&d->mu);
                continue;
            }
            if (t_since_fence[dev] + 1 >= atomic_load_explicit(&d->fence_every, memory_order_relaxed)) {
                CUstream rec = ptsz && stream == NULL ? CU_STREAM_PER_THREAD : stream;
                /* A job of several GPUs is not paced (see "Jobs of several GPUs" above). */
                bool ovl = false, fenced = vgpu_region_device_count(r) == 1 && pace_wait(d, rec, &ovl);
                now = vgpu_now_ns();
                if (!lease_live(d, dev, lease, now))
                    continue;            /* preempted (or out of time) while we waited: queue no more */
                /* A job that would preempt us is due back before this work would end: give the
                 * lease back now and queue nothing until then (vgpu/sched.h, "Keeping clear"). */
                uint64_t until = vgpu_sched_keep_clear(&d->s, d->proc, now, queued_after(d), interval_of(d));
                if (until) {
                    vgpu_lt_record(VGPU_LT_CLEAR, dev, now, until - now);
                    d->clear_until = until;
                    vgpu_lim_drain_and_release(d, dev, true, 0);
                    continue;
                }
                if (fenced)
                    pace_record(d, rec, ovl);
                t_since_fence[dev] = 0;
            } else {
                t_since_fence[dev]++;
            }
            atomic_store_explicit(&d->touched, 1, memory_order_relaxed);
            atomic_fetch_add(&d->inflight, 1);   /* under d->mu: a drain waits for it */
            counted = true;
            if (d->gang)
                vgpu_gang_launched(dev);
            track(d, stream, ptsz);
            t_lease[dev] = lease;
            t_stream[dev] = stream;
            break;
        }
        if (lease)
            vgpu_lim_drain_and_release(d, dev, true, 0);   /* expired: pass it on before asking again */
        if (schedule_moved(d, now)) {
            bool was_remote = d->s.remote;
            if (!rejoin(d, r, dev) && !wait_for_room(d, r, dev))
                break;                   /* said why; launches pass unscheduled */
            if (was_remote && !d->s.remote && !d->warned_lost)
                vgpu_warn("%s: the arbiter (vgpu daemon) went away; this job keeps its cap on its user's own "
                          "schedule and rejoins the arbiter when it is back", vgpu_job_label());
            d->warned_lost |= was_remote && !d->s.remote;
            waited_from = 0;
            continue;
        }
        struct limits x = read_limits(r, dev);
        if (!x.cap && !x.uncapped) {     /* no limit (any more) on this device */
            vgpu_sched_unwant(&d->s, d->proc);
            break;
        }
        now = vgpu_now_ns();
        if (now < d->clear_until) {
            /* Keeping clear: the job we gave way to has its turn first. A lease freed meanwhile
             * (its request done) ends the wait early. */
            uint32_t seq = atomic_load(&d->s.f->seq);
            vgpu_sched_wait(&d->s, d->clear_until - now);
            if (atomic_load(&d->s.f->seq) != seq || vgpu_now_ns() >= d->clear_until)
                d->clear_until = 0;
            continue;
        }
        if (!waited_from) {
            waited_from = now;
            note_gap(d, arrived);
            vgpu_lt_record(VGPU_LT_WANT, dev, now, 0);
        }
        if (x.uncapped && x.prio == VGPU_PRIO_LOW) {
            /* Background waits as long as others keep the GPU busy: that is its class, not a
             * damaged schedule. Only a lease that stops moving is (the bound runs from then). */
            uint64_t gen = vgpu_lease_gen(atomic_load(&d->s.f->lease));
            if (gen != d->stall_gen) {
                d->stall_gen = gen;
                waited_from = now;
            }
        }
        if (now - waited_from > stall_bound(x.cap ? x.cap : 100)) {
            /* Bounded: nothing legitimate keeps a job of this cap out this long. */
            d->bypass_until = now + VGPU_SCHED_PERIOD_NS;
            vgpu_sched_unwant(&d->s, d->proc);
            if (!d->warned_stall)
                vgpu_warn("%s: waited %.1f s for GPU time, longer than the schedule allows (damaged, or held by a "
                          "process that ignores it); running without the compute limit until it moves again",
                          vgpu_job_label(), (double)(now - waited_from) / 1e9);
            d->warned_stall = true;
            break;
        }
        if (d->gang) {
            vgpu_gang_mark(dev, false, true);
            /* The job's next turn opens on all its GPUs together, when the last can take it: wait
             * for it without a lease (nothing charged), a period at most (gang.c). */
            uint64_t open = vgpu_gang_open_at(NULL);
            if (open > now && now - waited_from < VGPU_SCHED_PERIOD_NS) {
                vgpu_sched_wait(&d->s, open - now);
                continue;
            }
        }
        vgpu_sched_want_from(&d->s, d->proc, arrived);
        /* Limits are re-read at every turn: `vgpu limit` applies from the next lease on. */
        vgpu_sched_job(&d->s, job_key(r), sched_cap(&x), x.soft, x.prio, now);
        uint64_t granted, end;
        if (vgpu_sched_try_acquire(&d->s, d->proc, now, &granted, &end)) {
            CUcontext ctx = NULL;
            if (drv.get_ctx)
                drv.get_ctx(&ctx);
            d->ctx = ctx;
            atomic_store(&d->start, now);
            d->nstreams = 0;
            d->whole_ctx = false;
            atomic_store(&d->idle_since, 0);
            d->busy_ns = 0;
            d->busy_from = now;   /* a launch is waiting: busy from the grant */
            d->busy_in_ov = 0;
            d->in_overlap = vgpu_sched_overlapping(&d->s, now);   /* we preempted a holder */
            atomic_store(&d->touched, 1);
            atomic_store(&d->end, end);
            atomic_store(&d->lease, granted);
            if (d->gang) {
                vgpu_gang_snapshot(d->gang_seen);
                (void)vgpu_gang_open_at(&d->gang_outs);
                vgpu_gang_mark(dev, true, false);
            }
            vgpu_lt_record(VGPU_LT_GRANT, dev, now, end - now);
            if (now > waited_from && r->use)
                atomic_fetch_add(&r->use->dev[dev].throttled_ns, now - waited_from);
            vgpu_lim_kick_keeper();
            continue;
        }
        /* Out of its turn: a capped job's other GPUs end theirs and wait for this one (gang.c). */
        if (d->gang && x.cap)
            vgpu_gang_out_until(vgpu_sched_turn_at(&d->s, d->proc, now), now);
        vgpu_sched_wait(&d->s, vgpu_sched_retry_in(&d->s, d->proc, now));
    }
    if (d->gang)
        vgpu_gang_mark(dev, atomic_load(&d->lease) != 0, false);
    pthread_mutex_unlock(&d->mu);
    return counted;
}

int vgpu_limiter_gate(int dev, CUstream stream, bool ptsz)
{
    if (dev < 0) {
        /* A job of one GPU sees only that GPU (CUDA_VISIBLE_DEVICES), as ordinal 0: no need to
         * ask the driver. On an H100 that query was the whole added cost of a capped launch
         * under budget: a median +168..+224 ns, and -27/+1 ns without it (tests/gpu/core.sh). */
        struct vgpu_region *r = vgpu_job();
        dev = r && vgpu_region_device_count(r) == 1 ? 0 : vgpu_current_device();
    }
    if (dev < 0 || dev >= MAX_DEV)
        return -1;
    struct dstate *d = &vgpu_lim_devs[dev];
    uint64_t lease = atomic_load_explicit(&d->lease, memory_order_acquire);
    /* Our lease (the helper thread zeroes d->lease at the deadline, before draining, and when a
     * preemptor wakes it), on the stream the last launch used, and not due for a fence. Every
     * CLOCK_EVERY-th launch also checks, itself, that the lease is still ours in the shared
     * schedule (not taken by a preemptor or revoked) and not past its deadline: the helper can
     * be late on a loaded machine, and without any check an unsynchronized loop kept queueing
     * past the deadline until it woke (a 30 % job showed 96 % in a 200 ms sample,
     * tests/cli/core_limit.sh). A clock read on every launch cost +70 ns on the H100 (the whole
     * difference between +44 and +117 ns in tests/gpu/RESULTS.md); one in CLOCK_EVERY costs a
     * few, and lets at most CLOCK_EVERY - 1 launches past a deadline the helper missed. */
    if (__builtin_expect(lease != 0 && lease == t_lease[dev] && stream == t_stream[dev], 1)) {
        unsigned n = ++t_since_fence[dev];
        if (__builtin_expect(n < atomic_load_explicit(&d->fence_every, memory_order_relaxed), 1)) {
            struct vgpu_sched_file *f = d->s.f;
            /* Counted first, then the lease looked at again: a drain zeroes the lease first,
             * then waits for the count (both sequentially consistent). */
            atomic_fetch_add(&d->inflight, 1);
            if (atomic_load(&d->lease) == lease &&
                (__builtin_expect(n % CLOCK_EVERY != 0, 1) ||
                 (atomic_load_explicit(&f->lease, memory_order_relaxed) == lease &&
                  vgpu_now_ns() < atomic_load_explicit(&f->lease_end, memory_order_relaxed)))) {
                if (!atomic_load_explicit(&d->touched, memory_order_relaxed))
                    atomic_store_explicit(&d->touched, 1, memory_order_relaxed);
                if (d->gang)
                    vgpu_gang_launched(dev);
                return dev;
            }
            atomic_fetch_sub(&d->inflight, 1);
        }
    }
    /* A job gated only for its fair share while it spills (no core limit of its own): nothing to
     * do unless it spills now beside busy processes (a few loads; NVML once a second). */
    if (!lease) {
        struct vgpu_region *r = vgpu_job();
        unsigned own = r && (unsigned)dev < vgpu_region_device_count(r) ? own_cap(r, dev) : 1;
        if (own == 100 || (own == 0 && !vgpu_fair_cap(r, dev) && !atomic_load(&r->info->dev[dev].priority)))
            return -1;   /* ... and an uncapped job without a priority class is not scheduled */
    }
    return slow_path(dev, d, stream, ptsz) ? dev : -1;
}

void vgpu_limiter_launched(int dev)
{
    if (dev >= 0 && dev < MAX_DEV)
        atomic_fetch_sub(&vgpu_lim_devs[dev].inflight, 1);
}

/* At exit, a held lease is given back at once instead of lingering until its deadline. */
__attribute__((destructor)) static void limiter_exit(void)
{
    for (unsigned i = 0; i < MAX_DEV; i++) {
        struct dstate *d = &vgpu_lim_devs[i];
        if (d->ready != 1 || !d->s.f)
            continue;
        if (pthread_mutex_trylock(&d->mu) != 0)
            continue;
        uint64_t lease = atomic_load(&d->lease);
        if (lease) {
            uint64_t now = vgpu_now_ns(), used = now - atomic_load(&d->start);
            vgpu_sched_release(&d->s, lease, used, now);
            atomic_store(&d->lease, 0);
            /* The job's own figure counts it too, as the schedule does (the arbiter checks the
             * record against its charges: cmd/daemon/charged.c). */
            struct vgpu_region *r = vgpu_job();
            if (r && r->use)
                atomic_fetch_add(&r->use->dev[i].gpu_time_ns, used);
        }
        vgpu_sched_detach(&d->s, d->proc);
        /* Other threads may still launch: remove a schedule nobody uses, but keep it mapped. */
        vgpu_sched_retire(&d->s);
        pthread_mutex_unlock(&d->mu);
    }
}
