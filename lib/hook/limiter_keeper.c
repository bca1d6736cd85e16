/* limiter_keeper.c: the limiter's helper thread (see limiter.c's top comment). It ends each
 * lease at its deadline even when the application stops launching, gives a lease back once idle
 * (only when someone of another job waits, for a lease whose streams it cannot query), and
 * drains at once when a preemptor wakes it. Moved out of limiter.c when it passed 800 lines. */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hook.h"
#include "gang.h"
#include "leasetrace.h"
#include "limiter_internal.h"

#define GANG_POLL_NS 200000ULL   /* a lease of a job of several GPUs is looked at this often (it
                                  * catches up, or another GPU of the job went out of its turn) */

static pthread_mutex_t keeper_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t keeper_cv;
static bool keeper_started;
/* Kicks so far, under keeper_mu: the helper reads it before it looks at the leases and sleeps only
 * while it is unchanged. A kick that came while it looked (a lease granted after it found none)
 * would otherwise be lost, and the lease kept past its deadline until the helper's next look, up
 * to a second later, all of it charged: a request that ends inside its lease and then idles was
 * billed its idle time (issue 34 item 3). */
static unsigned long keeper_kicks;

void vgpu_lim_keeper_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&keeper_cv, &ca);
    pthread_condattr_destroy(&ca);
}

void vgpu_lim_keeper_reset_child(void)
{
    pthread_mutex_init(&keeper_mu, NULL);
    keeper_started = false;
}

bool vgpu_lim_keeper_started(void)
{
    return keeper_started;
}

/* The futex word the helper sleeps on while it holds one lease (vgpu_lim_kick_keeper wakes it there). */
static _Atomic(_Atomic uint32_t *) keeper_sleeps_on;

static void *keeper(void *arg)
{
    (void)arg;
    uint32_t seen[MAX_DEV] = { 0 };
    for (;;) {
        pthread_mutex_lock(&keeper_mu);
        unsigned long kicks = keeper_kicks;
        pthread_mutex_unlock(&keeper_mu);
        uint64_t next = UINT64_MAX, now = vgpu_now_ns();
        struct dstate *only = NULL;
        unsigned held = 0;
        for (unsigned i = 0; i < MAX_DEV; i++) {
            struct dstate *d = &vgpu_lim_devs[i];
            uint64_t lease = atomic_load(&d->lease);
            if (!lease || !d->s.f)
                continue;
            uint64_t end = vgpu_sched_deadline(&d->s, lease);
            /* A job of several GPUs keeps a lease past its deadline while this device catches up
             * with its others (gang.c): looked at again every GANG_POLL_NS meanwhile. */
            bool catching_up = now >= end && d->gang && vgpu_gang_hold((int)i, end, now);
            bool give_back = now >= end && !catching_up;
            /* ... and ends it with the job's other GPUs when one of them goes out of its turn
             * (gang.c, "one clock"), looked at every GANG_POLL_NS while it holds one. */
            if (!give_back && d->gang && vgpu_gang_should_close((int)i, d->gang_outs, now)) {
                pthread_mutex_lock(&d->mu);
                if (atomic_load(&d->lease) == lease)
                    vgpu_lim_drain_and_release(d, (int)i, true, 0);
                pthread_mutex_unlock(&d->mu);
                continue;
            }
            /* Every lease is watched for idleness and given back once idle long enough for the
             * work it did (vgpu_sched_idle_need), whether or not anyone waits: the time a lease is
             * held is what it is charged, and an idle stretch held to the deadline was charged as
             * GPU time although the GPU did nothing for it. Held that way, a request-response
             * client capped at 30 % whose kernels kept the GPU busy 16 % of the time was held to
             * 6 % and billed 30 %; bursts of work between long pauses were billed 3x their kernel
             * time (tests/cli/acct_capped.sh). A service (it publishes when it expects its next
             * request) must be seen going idle when it happens, too: holders keeping clear of it
             * do not ask. The exception is a lease whose work the helper cannot see (a per-thread
             * default stream, or too many streams: whole_ctx), where only launches tell: it is
             * given back idle only when someone of another job waits, as before. */
            bool wanted = !give_back && (atomic_load(&d->service) ||
                                         vgpu_sched_wanted(&d->s, atomic_load_explicit(&d->start, memory_order_relaxed)));
            if (!give_back) {
                /* Idle is no launch and nothing in flight for a whole VGPU_SCHED_IDLE_NS, so that a
                 * process between a synchronize and its next launch is not taken for idle. */
                bool quiet = atomic_exchange(&d->touched, 0) == 0;
                /* Launched since the last look, seen busy then too, and no overlap that just
                 * ended: nothing changes, and d->mu (which a launch holds through a fence wait) is
                 * not taken. Within a lease idle_since == 0 exactly while busy_from != 0. */
                bool look = quiet || atomic_load(&d->idle_since) ||
                            (d->in_overlap && !vgpu_sched_overlapping(&d->s, now));
                if (look)
                    pthread_mutex_lock(&d->mu);
                if (look && atomic_load(&d->lease) == lease) {
                    if (quiet)
                        quiet = !vgpu_lim_work_in_flight(d);
                    if (!quiet) {
                        atomic_store(&d->idle_since, 0);
                        if (!d->busy_from) {
                            d->busy_from = now;
                            vgpu_sched_note_busy(&d->s, lease, d->busy_ns, d->busy_from);
                            vgpu_lt_record(VGPU_LT_IDLE, (int)i, now, 0);
                        }
                    } else if (!atomic_load(&d->idle_since)) {
                        atomic_store(&d->idle_since, now);
                        if (d->busy_from) {
                            d->busy_ns += now - d->busy_from;
                            d->busy_from = 0;
                            vgpu_sched_note_busy(&d->s, lease, d->busy_ns, 0);
                            vgpu_lt_record(VGPU_LT_IDLE, (int)i, now, 1);
                        }
                    } else if ((wanted || !d->whole_ctx) &&
                               now - atomic_load(&d->idle_since) >= vgpu_sched_idle_need(d->busy_ns)) {
                        give_back = true;   /* idle long enough for the work it did (vgpu_sched_idle_need) */
                    }
                    if (d->in_overlap && !vgpu_sched_overlapping(&d->s, now)) {
                        d->in_overlap = false;   /* the holder we preempted drained */
                        d->busy_in_ov = d->busy_ns + (d->busy_from ? now - d->busy_from : 0);
                    }
                }
                if (look)
                    pthread_mutex_unlock(&d->mu);
                if (!give_back && now + VGPU_SCHED_IDLE_NS < next)
                    next = now + VGPU_SCHED_IDLE_NS;
                if (give_back)
                    vgpu_sched_note_yield(&d->s);
            }
            if (give_back) {
                pthread_mutex_lock(&d->mu);
                if (atomic_load(&d->lease) == lease)
                    vgpu_lim_drain_and_release(d, (int)i, now >= end, now >= end ? 0 : atomic_load(&d->idle_since));
                pthread_mutex_unlock(&d->mu);
                continue;
            }
            if ((catching_up || d->gang) && now + GANG_POLL_NS < next)
                next = now + GANG_POLL_NS;
            else if (!catching_up && end < next)
                next = end;
            held++;
            only = d;
        }
        now = vgpu_now_ns();
        if (held == 1) {
            /* Sleep where a preempting waiter wakes us. */
            unsigned i = (unsigned)(only - vgpu_lim_devs);
            atomic_store(&keeper_sleeps_on, &only->s.f->yield_seq);
            vgpu_sched_wait_yield(&only->s, &seen[i], next > now ? next - now : 0);
            atomic_store(&keeper_sleeps_on, NULL);
            continue;
        }
        if (held > 1 && next > now + 1000000ULL)
            next = now + 1000000ULL;   /* several GPUs: poll their yield requests every ms */
        pthread_mutex_lock(&keeper_mu);
        if (keeper_kicks != kicks) {
            pthread_mutex_unlock(&keeper_mu);
            continue;   /* kicked while we looked: look again */
        }
        if (next == UINT64_MAX) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&keeper_cv, &keeper_mu, &ts);
        } else {
            struct timespec ts = { (time_t)(next / 1000000000ULL), (long)(next % 1000000000ULL) };
            pthread_cond_timedwait(&keeper_cv, &keeper_mu, &ts);
        }
        pthread_mutex_unlock(&keeper_mu);
    }
    return NULL;
}

void vgpu_lim_kick_keeper(void)
{
    pthread_mutex_lock(&keeper_mu);
    if (!keeper_started) {
        sigset_t all, old;
        sigfillset(&all);
        /* A fault in a thread that blocks its signal kills the process, whatever the handler:
         * SIGBUS must reach guard.c's when a truncated region faults here (issue 12 item 3). */
        sigdelset(&all, SIGBUS);
        sigdelset(&all, SIGSEGV);
        sigdelset(&all, SIGFPE);
        sigdelset(&all, SIGILL);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* the application's handlers never run on it */
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 * 1024);
        keeper_started = pthread_create(&t, &a, keeper, NULL) == 0;
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!keeper_started) {
            /* Without it nobody ends a lease at its deadline: every launch takes the slow path,
             * which reads the clock (F = 0 fails the fast path's fence count). */
            for (unsigned i = 0; i < MAX_DEV; i++)
                atomic_store(&vgpu_lim_devs[i].fence_every, 0);
            vgpu_warn("%s: cannot start the limiter's helper thread; every launch now checks the clock",
                      vgpu_job_label());
        }
    }
    keeper_kicks++;
    pthread_cond_signal(&keeper_cv);
    pthread_mutex_unlock(&keeper_mu);
    _Atomic uint32_t *w = atomic_load(&keeper_sleeps_on);
    if (w)
        syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

