/* squeeze.c: borrowed memory gives way (issue 37 item 2, decision 13's squeeze).
 *
 * A borrower (--mem REQUEST:LIMIT) holds what it allocated past its REQUEST as managed memory
 * prefetched onto the GPU (spill.c). When another job's request that is not yet allocated needs
 * that room (the device's free memory is less than the other jobs' unmet requests, which
 * vgpu_lend_others adds up from their regions), this process demotes some of its borrowed
 * allocations: preferred location the host (CU_DEVICE_CPU), then a prefetch to the host. The
 * program keeps every pointer and runs on, slower: the GPU reads demoted pages over the link,
 * where they are, instead of migrating them back (the simulated GPU models this as measured on an
 * H200, tests/fakegpu/README.md "Managed memory's time"). Nothing is ever killed. When the room
 * comes back (free beyond the others' unmet requests covers a demoted allocation, and has for
 * PROMOTE_AFTER_NS since the last demotion) it is promoted: preferred location the device again,
 * a prefetch to it.
 *
 * Which allocations: only those vgpu itself served from managed memory past the REQUEST
 * (cuMemAlloc, spill.c). Managed memory the program allocated keeps the advice the program gave
 * it; the driver still evicts its pages for another process's allocation (the safety net).
 * In which order: the smallest single allocation that covers what is needed, else the largest
 * and again. That moves as few allocations as can be and overshoots by less than the last one
 * moved, which is also smaller than every other allocation demoted, so the room left over never
 * covers one of them and the next look does not promote it straight back.
 *
 * Where it runs: on a helper thread of its own, started by this process's first borrowed
 * allocation and looking every TICK_NS while the process holds borrowed allocations, asleep on a
 * condition variable while it holds none. A job that borrows nothing never starts it, and the
 * launch path never sees it: a look reads the other jobs' region files (a directory walk and one
 * pread each) and asks the driver for free memory, a few hundred microseconds that must not sit
 * on an allocation or a launch. 200 ms keeps an owner's wait (giveway.c, at most 1 s) to about
 * a look and a move. A move in flight (its stream not done) is waited for before the next one:
 * the room it frees shows only as it lands, and deciding again before that would move twice.
 *
 * What this process demoted is published in its slot of the job region (vgpu_region_set_demoted,
 * in MiB), so vgpu ps/top/metrics show it, and it goes with the slot when the process dies. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "hook.h"
#include "vgpu/lend.h"
#include "vgpu/region.h"
#include "vgpu/units.h"

#ifndef CU_DEVICE_CPU
#define CU_DEVICE_CPU ((CUdevice)-1)   /* the host, as cuda.h spells it */
#endif

#define TICK_NS 200000000ULL           /* a look this often while the process borrows */
#define PROMOTE_AFTER_NS 1000000000ULL /* room that stayed this long since the last demotion */
/* A shortfall (free less than the others' unmet requests) that lasted this long: a borrower
 * behind in the order gives as if it were first. Those ahead may be stopped, starved of CPU, or
 * lying about what they borrow (a figure another user sends the arbiter); an owner's allocation
 * waits 1 s at most (giveway.c), so it must not wait for them much longer than two looks. */
#define PATIENCE_NS 500000000ULL

struct loan {
    CUdeviceptr p;
    uint64_t bytes;
    CUcontext ctx;                     /* current at the allocation: where to move it from */
    int dev;                           /* CUDA ordinal */
    bool demoted;
};

/* Per CUDA ordinal: the stream the moves go on (non-blocking, in ctx: never the program's
 * default stream, which would order them with its work), when the last demotion was, and whether
 * a move is in flight. */
struct devstate {
    CUcontext ctx;
    CUstream stream;
    uint64_t demoted_at_ns;
    uint64_t short_since_ns;           /* when the GPU's free fell short of the unmet requests, 0: not */
    bool moving;                       /* a move was issued on stream and not seen done yet */
};

typedef CUresult (*advise_fn)(CUdeviceptr, size_t, CUmem_advise, CUdevice);
typedef CUresult (*prefetch_fn)(CUdeviceptr, size_t, CUdevice, CUstream);
typedef CUresult (*setcur_fn)(CUcontext);
typedef CUresult (*stream_create_fn)(CUstream *, unsigned int);
typedef CUresult (*stream_query_fn)(CUstream);

/* mu guards everything below; the helper holds it across its driver calls (a few async ones),
 * so that a free or a context's end never races a move of the memory it gives up. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct loan *loans;
static size_t nloans, cap;
static struct devstate devs[VGPU_REGION_MAX_DEVICES];
static bool started;
static _Atomic size_t tracked;         /* nloans, for the free path's one load */

static void reset_child(void)
{
    /* The child has no helper and none of the parent's contexts (CUDA does not survive fork). */
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&cv, NULL);
    free(loans);
    loans = NULL;
    nloans = cap = 0;
    atomic_store(&tracked, 0);
    for (unsigned i = 0; i < VGPU_REGION_MAX_DEVICES; i++)
        devs[i] = (struct devstate){ 0 };
    started = false;
}

static void once_init(void)
{
    pthread_atfork(NULL, NULL, reset_child);
}

/* Caller holds mu. What this process has demoted on CUDA ordinal dev, published in its slot, and
 * whether a move is in flight there (the other borrowers' looks do not count it as gone yet). */
static void publish(int dev)
{
    bool moving = devs[dev].moving;
    uint64_t sum = 0;
    for (size_t i = 0; i < nloans; i++)
        if (loans[i].dev == dev && loans[i].demoted)
            sum += loans[i].bytes;
    int jdev = vgpu_job_dev(dev);
    if (jdev >= 0)
        vgpu_region_set_demoted(vgpu_job(), vgpu_job_slot(), (unsigned)jdev, sum, moving);
}

static void remove_at(size_t i)
{
    loans[i] = loans[--nloans];
    atomic_store(&tracked, nloans);
}

/* Caller holds mu. The stream for moves on dev in ctx (made current on this thread). */
static CUstream stream_of(int dev, CUcontext ctx)
{
    struct devstate *ds = &devs[dev];
    if (ds->ctx == ctx && ds->stream)
        return ds->stream;
    stream_create_fn create = (stream_create_fn)vgpu_real_cuda_sym("cuStreamCreate");
    CUstream s = NULL;
    if (!create || create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        vgpu_warn("%s: cannot create a stream to move borrowed memory on GPU %d; it cannot give way until one "
                  "can be made (tried again at the next look)", vgpu_job_label(), dev);
        return NULL;
    }
    ds->ctx = ctx;
    ds->stream = s;
    return s;
}

/* Caller holds mu, with l's context current. Moves l to the host (demote) or back to its device. */
static bool move(struct loan *l, CUstream s, bool demote)
{
    advise_fn advise = (advise_fn)vgpu_real_cuda_sym("cuMemAdvise");
    prefetch_fn prefetch = (prefetch_fn)vgpu_real_cuda_sym("cuMemPrefetchAsync");
    if (!advise || !prefetch)
        return false;
    CUdevice where = demote ? CU_DEVICE_CPU : l->dev;
    CUresult a = advise(l->p, l->bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, where);
    CUresult p = a == CUDA_SUCCESS ? prefetch(l->p, l->bytes, where, s) : a;
    if (p != CUDA_SUCCESS) {
        char sz[32];
        vgpu_warn("%s: %s %s of borrowed memory on GPU %d failed (CUresult %d); it stays where it is", vgpu_job_label(),
                  demote ? "demoting" : "promoting", vgpu_format_size(l->bytes, sz, sizeof sz), l->dev, (int)p);
        return false;
    }
    l->demoted = demote;
    return true;
}

/* Caller holds mu. Demotes this process's borrowed allocations on dev until `need` bytes moved
 * (the order is explained at the top); returns what moved. */
static uint64_t demote(int dev, CUstream s, uint64_t need)
{
    uint64_t moved = 0;
    while (moved < need) {
        uint64_t rest = need - moved;
        struct loan *fit = NULL, *big = NULL;
        for (size_t i = 0; i < nloans; i++) {
            struct loan *l = &loans[i];
            if (l->dev != dev || l->demoted || l->ctx != devs[dev].ctx)
                continue;
            if (l->bytes >= rest && (!fit || l->bytes < fit->bytes))
                fit = l;
            if (!big || l->bytes > big->bytes)
                big = l;
        }
        struct loan *l = fit ? fit : big;
        if (!l || !move(l, s, true))
            break;
        moved += l->bytes;
    }
    return moved;
}

/* Caller holds mu. Promotes demoted allocations on dev, largest first, while `spare` covers one. */
static uint64_t promote(int dev, CUstream s, uint64_t spare)
{
    uint64_t moved = 0;
    for (;;) {
        struct loan *best = NULL;
        for (size_t i = 0; i < nloans; i++) {
            struct loan *l = &loans[i];
            if (l->dev == dev && l->demoted && l->ctx == devs[dev].ctx && l->bytes <= spare - moved &&
                (!best || l->bytes > best->bytes))
                best = l;
        }
        if (!best || !move(best, s, false))
            return moved;
        moved += best->bytes;
    }
}

/* Caller holds mu. One look at CUDA ordinal dev, whose newest loan was made in ctx. */
static void look(int dev, CUcontext ctx, uint64_t now)
{
    struct vgpu_region *r = vgpu_job();
    int jdev = vgpu_job_dev(dev);
    setcur_fn setcur = (setcur_fn)vgpu_real_cuda_sym("cuCtxSetCurrent");
    stream_query_fn query = (stream_query_fn)vgpu_real_cuda_sym("cuStreamQuery");
    if (!r || jdev < 0 || !setcur || !query || setcur(ctx) != CUDA_SUCCESS)
        return;
    CUstream s = stream_of(dev, ctx);
    if (!s || query(s) == CUDA_ERROR_NOT_READY)
        return;                          /* a move still lands: its room is not counted yet */
    struct devstate *ds = &devs[dev];
    if (ds->moving) {
        ds->moving = false;              /* landed: the other borrowers may count it off the GPU */
        publish(dev);
    }
    uint64_t free_b, total_b;
    if (!vgpu_real_meminfo(&free_b, &total_b))
        return;
    /* Our part of what the borrowers owe the other jobs' unmet requests, in the order of giving
     * way (vgpu_lend_target): never more than the job borrows; memory within its REQUEST is its
     * own (a REQUEST raised by vgpu limit makes some loans no longer borrowed). */
    uint64_t borrowed = vgpu_region_mem_borrowed(r, (unsigned)jdev), demoted = vgpu_region_mem_demoted(r, (unsigned)jdev);
    struct vgpu_lend_key me = { r->hdr ? atomic_load(&r->hdr->dev[jdev].priority) : 0, borrowed, r->info->id };
    struct vgpu_lend_others o;
    vgpu_lend_look(r, (unsigned)jdev, &me, &o);
    uint64_t gone = o.demoted + demoted < demoted ? UINT64_MAX : o.demoted + demoted;
    if (free_b >= o.unmet)
        ds->short_since_ns = 0;
    else if (!ds->short_since_ns)
        ds->short_since_ns = now;
    bool impatient = ds->short_since_ns && now - ds->short_since_ns >= PATIENCE_NS;
    uint64_t target = vgpu_lend_target(o.unmet, free_b, gone, impatient ? 0 : o.ahead, borrowed);
    char a[32], b[32], c[32];
    if (demoted < target) {
        uint64_t moved = demote(dev, s, target - demoted);
        if (moved) {
            ds->demoted_at_ns = now;
            ds->moving = true;
            vgpu_info("%s: demoted %s of borrowed memory on GPU %d to host memory: other jobs' requests need %s "
                      "that the GPU does not have free (%s free); the job runs on, slower", vgpu_job_label(),
                      vgpu_format_size(moved, a, sizeof a), dev, vgpu_format_size(o.unmet, b, sizeof b),
                      vgpu_format_size(free_b, c, sizeof c));
            publish(dev);
        }
    } else if (demoted > target && !o.moving && now - ds->demoted_at_ns >= PROMOTE_AFTER_NS) {
        /* Not while another borrower's move is in flight: the sum leaves its demoted bytes out
         * until it lands, which would read as room that is not there. */
        uint64_t moved = promote(dev, s, demoted - target);
        if (moved) {
            ds->moving = true;
            vgpu_info("%s: promoted %s of borrowed memory on GPU %d back to the device (%s free, %s of it "
                      "requested by other jobs)", vgpu_job_label(), vgpu_format_size(moved, a, sizeof a), dev,
                      vgpu_format_size(free_b, b, sizeof b), vgpu_format_size(o.unmet, c, sizeof c));
            publish(dev);
        }
    }
}

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!nloans)
            pthread_cond_wait(&cv, &mu);   /* nothing borrowed: no look at all */
        uint64_t now = vgpu_now_ns();
        for (int dev = 0; dev < VGPU_REGION_MAX_DEVICES; dev++) {
            CUcontext ctx = NULL;
            for (size_t i = 0; i < nloans; i++)
                if (loans[i].dev == dev)
                    ctx = loans[i].ctx;     /* the newest loan's: most likely still alive */
            if (ctx)
                look(dev, ctx, now);
        }
        pthread_mutex_unlock(&mu);
        nanosleep(&(struct timespec){ 0, (long)TICK_NS }, NULL);
        pthread_mutex_lock(&mu);
    }
    return NULL;
}

/* Caller holds mu. */
static void start_helper(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* As the limiter's helper: the program's handlers never run here, but a fault must still
     * reach guard.c's SIGBUS handler (a truncated region). */
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 * 1024);   /* the driver's calls and a 4 KiB path */
    started = pthread_create(&t, &a, helper, NULL) == 0;
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started)
        vgpu_warn("%s: cannot start the thread that makes borrowed memory give way; this process's borrowed "
                  "memory stays on the GPU, where only the driver evicts it for another job's allocation",
                  vgpu_job_label());
}

void vgpu_squeeze_track(CUdeviceptr p, uint64_t bytes, int dev)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (dev < 0 || dev >= VGPU_REGION_MAX_DEVICES || !bytes)
        return;
    pthread_once(&once, once_init);
    CUcontext ctx = NULL;
    typedef CUresult (*getcur_fn)(CUcontext *);
    getcur_fn getcur = (getcur_fn)vgpu_real_cuda_sym("cuCtxGetCurrent");
    if (!getcur || getcur(&ctx) != CUDA_SUCCESS || !ctx)
        return;                          /* no context to move it in: the driver's safety net only */
    pthread_mutex_lock(&mu);
    if (nloans == cap) {
        size_t ncap = cap ? cap * 2 : 16;
        struct loan *n = realloc(loans, ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&mu);
            vgpu_warn("%s: out of memory: a borrowed allocation cannot give way to other jobs", vgpu_job_label());
            return;
        }
        loans = n;
        cap = ncap;
    }
    loans[nloans++] = (struct loan){ p, bytes, ctx, dev, false };
    atomic_store(&tracked, nloans);
    if (!started)
        start_helper();
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

void vgpu_squeeze_forget(CUdeviceptr p)
{
    if (!atomic_load_explicit(&tracked, memory_order_relaxed))
        return;                          /* nothing borrowed: the free path pays one load */
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nloans; i++)
        if (loans[i].p == p) {
            int dev = loans[i].dev;
            bool was = loans[i].demoted;
            remove_at(i);
            if (was)
                publish(dev);
            break;
        }
    pthread_mutex_unlock(&mu);
}

void vgpu_squeeze_drop_ctx(uint64_t ctx)
{
    if (!ctx || !atomic_load(&tracked))
        return;
    pthread_mutex_lock(&mu);
    unsigned changed = 0;
    for (size_t i = nloans; i-- > 0;)
        if ((uint64_t)(uintptr_t)loans[i].ctx == ctx) {
            if (loans[i].demoted)
                changed |= 1u << loans[i].dev;
            remove_at(i);
        }
    for (int d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
        if ((uint64_t)(uintptr_t)devs[d].ctx == ctx)
            devs[d].ctx = NULL, devs[d].stream = NULL, devs[d].moving = false;   /* the driver destroyed the stream */
        if (changed & 1u << d)
            publish(d);
    }
    pthread_mutex_unlock(&mu);
}
