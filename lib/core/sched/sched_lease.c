/* sched_lease.c: the lease of the machine-wide schedule (vgpu/sched.h): taking it, preempting
 * or asking its holder, giving it back, waiting for it, and what the overlap of a preemption is
 * charged. The lease is one 64-bit word taken and given back by compare-and-swap; waiters sleep
 * on futexes in the segment, bounded. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "sched_internal.h"

uint64_t vgpu_sched_deadline(struct vgpu_sched *s, uint64_t lease)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t end = atomic_load(&f->lease_end), start = atomic_load(&f->lease_start);
    if (atomic_load(&f->lease) != lease || end < start || end - start > VGPU_SCHED_MAX_LEASE_NS)
        return 0;
    return end;
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void wake_all(struct vgpu_sched_file *f)
{
    atomic_fetch_add(&f->seq, 1);
    futex_wake(&f->seq);
}

bool vgpu_sched_overdue(struct vgpu_sched *s, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t lease = atomic_load(&f->lease);
    unsigned h = vgpu_lease_holder(lease);
    if (!h)
        return false;
    uint64_t end = atomic_load(&f->lease_end), start = atomic_load(&f->lease_start);
    bool invalid = h > VGPU_SCHED_MAX_PROCS || end < start || end - start > VGPU_SCHED_MAX_LEASE_NS ||
                   start > now + VGPU_SCHED_MAX_LEASE_NS || !atomic_load(&f->procs[h - 1].pid);
    if (!invalid && now < end + VGPU_SCHED_GRACE_NS)
        return false;
    /* A holder past its deadline that said it is draining (vgpu_sched_draining) is waiting for
     * the work it queued, however long its kernels: believed for VGPU_SCHED_OVERLAP_NS. Taking
     * the lease from it then made the next job overlap the drain, pay for it, and wait to be
     * eligible again with the GPU idle (H100, 15 ms kernels: 17 % of the time). */
    uint64_t ov = atomic_load(&f->overlap_until);
    return invalid || !(ov > now && ov - now <= VGPU_SCHED_OVERLAP_NS);
}

/* Frees the lease of a holder that is past its deadline + grace (dead, stopped, or idle), or
 * whose lease word or deadline no valid grant could have written. Through the arbiter, the daemon
 * ends such a lease first and charges it (cmd/daemon/arbiter.c, end_lease). */
static void revoke_overdue(struct vgpu_sched *s, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t lease = atomic_load(&f->lease);
    if (!vgpu_sched_overdue(s, now))
        return;
    uint64_t freed = lease & ~(uint64_t)0xffff;
    if (atomic_compare_exchange_strong(&f->lease, &lease, freed))
        wake_all(f);
}

void vgpu_sched_note_end(struct vgpu_sched *s, int proc, bool held_out, uint64_t now)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return;
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_NOTE_END, s->handle, proc, held_out, now, 0);
        return;
    }
    atomic_store(&s->f->procs[proc].held_out, held_out ? 1u : 0u);
    atomic_store(&s->f->procs[proc].released, now);
}

void vgpu_sched_want_from(struct vgpu_sched *s, int proc, uint64_t t)
{
    if (!s->f || proc < 0 || proc >= VGPU_SCHED_MAX_PROCS || !t)
        return;
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_WANT_FROM, s->handle, proc, t, 0, 0);
        return;
    }
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&s->f->procs[proc].want_since, &zero, t);
}

void vgpu_sched_draining(struct vgpu_sched *s, uint64_t lease, uint64_t now)
{
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_DRAINING, s->handle, -1, lease, now, 0);
        return;
    }
    /* A drain is bounded: one lease's overrun at most (believed until the lease's own length past
     * its deadline, at most VGPU_SCHED_OVERLAP_NS), however often it is said: the grant and the
     * deadline are the grant's, which the holder cannot move. Said again every 100 ms, it once
     * kept the lease from every waiter for 3.1 s. Past it the lease is revoked, and through the
     * daemon charged its wall time. */
    struct vgpu_sched_file *f = s->f;
    uint64_t end = atomic_load(&f->lease_end), start = atomic_load(&f->lease_start);
    if (atomic_load(&f->lease) != lease || end < start || end - start > VGPU_SCHED_MAX_LEASE_NS)
        return;
    uint64_t overrun = end - start < VGPU_SCHED_OVERLAP_NS ? end - start : VGPU_SCHED_OVERLAP_NS;
    uint64_t until = now + VGPU_SCHED_OVERLAP_NS, bound = end + overrun;
    if (until > bound)
        until = bound;
    uint64_t ov = atomic_load(&f->overlap_until);
    if (until > now && (until > ov || ov > now + VGPU_SCHED_OVERLAP_NS))
        atomic_store(&f->overlap_until, until);
}

/* Whether a waiter of job `w` may preempt a holder of job `h` whose lease began at `start` (see
 * vgpu/sched.h). Only an entitled waiter (credit of a quantum) preempts: one of higher priority
 * always; one of equal priority with new work (it began to wait during this lease) when its last
 * lease was given back idle or it never had one (`request`: a service's, or a new process's first
 * work; not a saturating job's), or else when its
 * credit is near its burst (under its cap) and the holder's is not. Caps adding up to more than
 * 100 % leave two saturating jobs both under their caps: they would take the lease from each
 * other at every turn. A service's request needed the same until a holder that keeps clear of it
 * (vgpu_sched_keep_clear) fell under its cap now and then, or one slow request spent the
 * service's credit: the next request then waited for the whole lease, 14-48 ms on the simulated
 * GPU (core_clear.sh). */
bool vgpu_sched_outranks(const struct vgpu_sched_job *w, const struct vgpu_sched_job *h, uint64_t start,
                         uint64_t now, bool new_work, bool request)
{
    if (!ld_cap(w) || ld_background(w))
        return false;   /* background takes only what others leave: it never preempts */
    int64_t q, credit = vgpu_sched_credit_now(w, now, now, &q);
    if (credit < q)
        return false;   /* only an entitled waiter preempts */
    if (ld_prio(w) > ld_prio(h) || ld_background(h))
        return true;
    if (!new_work || ld_prio(w) != ld_prio(h))
        return false;
    if (request)
        return true;
    return credit >= 2 * q - q / 2 && !vgpu_sched_under_cap(h, start, now);
}

int64_t vgpu_sched_credit_now(const struct vgpu_sched_job *j, uint64_t start, uint64_t now, int64_t *quantum)
{
    unsigned cap = ld_cap(j);
    int64_t cr;
    uint64_t ct;
    ld_credit(j, cap, now, &cr, &ct);
    *quantum = (int64_t)vgpu_sched_quantum(cap);
    if (ld_uncapped(j))
        return 2 * *quantum;   /* no budget: always at its burst, never under a cap */
    int64_t held = start < now ? (int64_t)(now - start) : 0;
    return vgpu_sched_credit_at(cr, ct, cap, now) - held;   /* not settled yet */
}

bool vgpu_sched_under_cap(const struct vgpu_sched_job *j, uint64_t start, uint64_t now)
{
    int64_t q, credit = vgpu_sched_credit_now(j, start, now, &q);   /* q is set by the call: read it after */
    return credit >= 2 * q - q / 2;
}

/* A waiter of another job: take the lease from the holder at once (vgpu_sched_outranks), or ask
 * it to give the lease back once idle (see vgpu/sched.h). true when the lease is now ours
 * (*lease_out, *end). */
static bool preempt_or_ask(struct vgpu_sched_file *f, int proc, uint64_t lease, uint64_t now, uint64_t *lease_out,
                           uint64_t *end)
{
    unsigned h = vgpu_lease_holder(lease) - 1;
    const struct vgpu_sched_job *mine = ld_job_of(f, (unsigned)proc), *theirs = ld_job_of(f, h);
    if (!mine || !theirs || mine == theirs)
        return false;   /* processes of one job share its turn */
    if (!ld_cap(mine))
        return false;
    int64_t q, credit = vgpu_sched_credit_now(mine, now, now, &q);
    /* Anyone waiting who may not preempt asks the holder to give back a lease it is not using
     * (idle lease time is charged, and would be lost to everyone). New work arrived during this
     * lease: a job that was already waiting when the lease was granted is a saturating one kept
     * to its cap; taking the lease from a holder whose queue is full makes the two overlap for
     * the whole drain (tens of ms with long kernels), and two such jobs then take it from each
     * other at every turn (on the H100, a 30/70 pair of 15 ms kernels reached 75 % of the GPU
     * together, every lease preempted). */
    uint64_t ws = atomic_load(&f->procs[proc].want_since);
    uint64_t rel = atomic_load(&f->procs[proc].released);
    bool held_out = atomic_load(&f->procs[proc].held_out) != 0;
    bool saturating = held_out && ws < rel + VGPU_SCHED_NEW_WORK_NS;
    uint64_t start = atomic_load(&f->lease_start);
    bool new_work = ws >= start && !saturating;
    /* A request: its last lease was given back idle, or it never had one (new work then). A new
     * process's first work counts, so that a service's first request does not wait for the
     * holder's lease (it starts with one quantum of credit, and needed one and a half); a
     * saturating job preempts once that way, then its lease runs out (held_out) and it no longer
     * counts. A service's request counts even when it began to wait before this lease: it waited
     * for credit (a slow request spent it), and became entitled while the lease ran; it waited
     * for the whole lease, 40 ms on the simulated GPU (bench/latency.sh). */
    bool request = !held_out && (new_work || rel != 0);
    bool urgent = vgpu_sched_outranks(mine, theirs, start, now, new_work || request, request);
    if (urgent) {
        /* The lease passes now; the holder sees it gone at its next launch (or its helper, woken
         * below), stops launching and charges its time until its queued work is done. That work
         * and ours share the GPU meanwhile under the driver's time-slicing: we wait no longer than
         * plain time-slicing would make us, and the holder is charged the overlap. */
        uint64_t len = credit > 2 * q ? (uint64_t)(2 * q) : (uint64_t)credit;
        if (len < VGPU_SCHED_MIN_LEASE_NS)
            len = VGPU_SCHED_MIN_LEASE_NS;
        uint64_t granted = ((vgpu_lease_gen(lease) + 1) << 16) | (uint64_t)(proc + 1);
        if (!atomic_compare_exchange_strong(&f->lease, &lease, granted))
            return false;
        atomic_store(&f->lease_start, now);
        atomic_store(&f->lease_end, now + len);
        atomic_store(&f->borrowed, 0u);
        /* The holder drains from now on: until it says when it finished, our lease is not
         * charged (vgpu_sched_charge_from); it pays the overlap. */
        atomic_store(&f->overlap_until, now + VGPU_SCHED_OVERLAP_NS);
        atomic_store(&f->holder_busy_ns, 0);
        atomic_store(&f->holder_busy_from, now);
        atomic_store(&f->procs[proc].want_since, 0);
        atomic_fetch_add(&f->preemptions, 1);
        *lease_out = granted;
        *end = now + len;
    } else {
        uint64_t w = atomic_load(&f->want_ns);
        if (w + VGPU_SCHED_IDLE_NS / 2 > now && w <= now)
            return false;   /* asked a moment ago: the holder is already looking */
        atomic_store(&f->want_ns, now);
    }
    atomic_fetch_add(&f->yield_seq, 1);
    futex_wake(&f->yield_seq);
    return urgent;
}

bool vgpu_sched_try_acquire(struct vgpu_sched *s, int proc, uint64_t now, uint64_t *lease_out, uint64_t *end)
{
    struct vgpu_sched_file *f = s->f;
    if (proc < 0 || proc >= VGPU_SCHED_MAX_PROCS)
        return false;
    if (s->remote) {
        uint64_t a[4] = { now, 0, 0, 0 }, v[2];
        int64_t rc = vgpu_arb_call(s->gen, VGPU_ARB_ACQUIRE, s->handle, proc, a, -1, v);
        s->lost |= rc == -EPIPE;
        if (rc != 1)
            return false;
        *lease_out = v[0];
        *end = v[1];
        return true;
    }
    struct vgpu_sched_proc *me = &f->procs[proc];
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&me->want_since, &zero, now);
    atomic_store(&me->polled, now);

    revoke_overdue(s, now);
    uint64_t lease = atomic_load(&f->lease);
    if (vgpu_lease_holder(lease))
        return preempt_or_ask(f, proc, lease, now, lease_out, end);

    /* Everyone who waits, as the picker sees them; absent waiters are passed over. */
    struct vgpu_sched_cand c[VGPU_SCHED_MAX_PROCS];
    unsigned who[VGPU_SCHED_MAX_PROCS], n = 0;
    for (unsigned i = 0; i < VGPU_SCHED_MAX_PROCS; i++) {
        struct vgpu_sched_proc *p = &f->procs[i];
        uint64_t ws = atomic_load(&p->want_since);
        if (!ws || !atomic_load(&p->pid))
            continue;
        uint64_t polled = atomic_load(&p->polled);
        if ((int)i != proc && (polled > now || now - polled > VGPU_SCHED_ABSENT_NS))
            continue;
        const struct vgpu_sched_job *j = ld_job_of(f, i);
        if (!j)
            continue;
        unsigned cap = ld_cap(j);
        int64_t cr;
        uint64_t ct;
        ld_credit(j, cap, now, &cr, &ct);
        c[n] = (struct vgpu_sched_cand){
            .job = atomic_load(&p->job), .cap = cap, .soft = atomic_load(&j->soft) != 0, .prio = ld_prio(j),
            .credit = vgpu_sched_credit_at(cr, ct, cap, now), .want_since = ws > now ? now : ws,
            .eligible_at = vgpu_sched_eligible_at(cr, ct, cap),
        };
        /* Uncapped classes: high is always entitled at its burst; background never is, and runs
         * only on borrowed turns (vgpu/sched.h, "Uncapped priority classes"). */
        if (ld_uncapped(j)) {
            c[n].credit = 2 * (int64_t)vgpu_sched_quantum(cap);
            c[n].eligible_at = ld_background(j) ? UINT64_MAX : now;
        }
        who[n++] = i;
    }
    bool borrow = false;
    uint64_t len = 0;
    int w = vgpu_sched_pick(c, n, now, &borrow, &len);
    if (w < 0 || who[w] != (unsigned)proc)
        return false;
    uint64_t granted = ((vgpu_lease_gen(lease) + 1) << 16) | (uint64_t)(proc + 1);
    /* Deadline first, so nobody sees the new lease with the old deadline and revokes it. */
    atomic_store(&f->lease_start, now);
    atomic_store(&f->lease_end, now + len);
    if (!atomic_compare_exchange_strong(&f->lease, &lease, granted))
        return false;
    atomic_store(&f->lease_start, now);
    atomic_store(&f->lease_end, now + len);
    atomic_store(&f->borrowed, borrow ? 1u : 0u);
    atomic_store(&f->holder_busy_ns, 0);
    atomic_store(&f->holder_busy_from, now);
    atomic_store(&me->want_since, 0);
    *lease_out = granted;
    *end = now + len;
    return true;
}

bool vgpu_sched_release(struct vgpu_sched *s, uint64_t lease, uint64_t used, uint64_t now)
{
    if (s->remote) {
        uint64_t a[4] = { lease, used, now, 0 };
        int64_t rc = vgpu_arb_call(s->gen, VGPU_ARB_RELEASE, s->handle, -1, a, -1, NULL);
        s->lost |= rc == -EPIPE;
        return rc == 1;
    }
    struct vgpu_sched_file *f = s->f;
    unsigned holder = vgpu_lease_holder(lease);
    if (!holder || holder > VGPU_SCHED_MAX_PROCS)
        return false;
    bool borrowed = atomic_load(&f->borrowed) != 0;
    unsigned jn = atomic_load(&f->procs[holder - 1].job);
    if (now && jn < VGPU_SCHED_MAX_JOBS) {
        struct vgpu_sched_job *j = &f->jobs[jn];
        unsigned cap = ld_cap(j);
        int64_t cr;
        uint64_t ct;
        ld_credit(j, cap, now, &cr, &ct);
        /* An uncapped class owes nothing: its credit stays at its burst. */
        atomic_store(&j->credit, ld_uncapped(j) ? 2 * (int64_t)vgpu_sched_quantum(cap)
                                                : vgpu_sched_settle(cr, ct, cap, now, used, borrowed));
        atomic_store(&j->credit_t, now);
        atomic_fetch_add(&j->used_ns, used);
        atomic_store(&j->seen_ns, now);
    }
    uint64_t freed = lease & ~(uint64_t)0xffff;
    bool ok = atomic_compare_exchange_strong(&f->lease, &lease, freed);
    if (ok) {
        /* Drained: a "draining" mark of ours must not exempt the next holder's charge. */
        uint64_t ov = atomic_load(&f->overlap_until);
        if (now && ov > now)
            atomic_compare_exchange_strong(&f->overlap_until, &ov, now);
        wake_all(f);
    }
    return ok;
}

void vgpu_sched_unwant(struct vgpu_sched *s, int proc)
{
    if (s->f && proc >= 0 && proc < VGPU_SCHED_MAX_PROCS) {
        if (s->remote) {
            /* Always said: a want still on its way would otherwise outlive us in the view. */
            vgpu_arb_send(s->gen, VGPU_ARB_UNWANT, s->handle, proc, 0, 0, 0);
        } else {
            atomic_store(&s->f->procs[proc].want_since, 0);
        }
    }
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t max_ns)
{
    if (max_ns < 20000)
        max_ns = 20000;
    struct timespec ts = { (time_t)(max_ns / 1000000000ULL), (long)(max_ns % 1000000000ULL) };
    /* The word may have changed between our look and now: the futex returns at once then. */
    syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
}

void vgpu_sched_wait(struct vgpu_sched *s, uint64_t max_ns)
{
    futex_wait(&s->f->seq, atomic_load(&s->f->seq), max_ns);
}

void vgpu_sched_drained(struct vgpu_sched *s, uint64_t now)
{
    if (s->remote) {
        vgpu_arb_send(s->gen, VGPU_ARB_DRAINED, s->handle, -1, now, 0, 0);
        return;
    }
    atomic_store(&s->f->overlap_until, now);
}

uint64_t vgpu_sched_overlap_mark(struct vgpu_sched *s)
{
    return atomic_load(&s->f->overlap_until);
}

bool vgpu_sched_overlapping(struct vgpu_sched *s, uint64_t now)
{
    uint64_t ov = atomic_load(&s->f->overlap_until);
    return ov > now && ov - now <= VGPU_SCHED_OVERLAP_NS;
}

uint64_t vgpu_sched_preempted_at(struct vgpu_sched *s, uint64_t start, uint64_t now)
{
    uint64_t t = atomic_load(&s->f->lease_start);
    return t > start && t <= now ? t : start;
}

void vgpu_sched_note_busy(struct vgpu_sched *s, uint64_t lease, uint64_t busy_ns, uint64_t busy_from)
{
    if (s->remote) {
        if (atomic_load(&s->f->lease) == lease)
            vgpu_arb_send(s->gen, VGPU_ARB_NOTE_BUSY, s->handle, -1, lease, busy_ns, busy_from);
        return;
    }
    if (atomic_load(&s->f->lease) != lease)
        return;
    atomic_store(&s->f->holder_busy_from, busy_from);
    atomic_store(&s->f->holder_busy_ns, busy_ns);
}

uint64_t vgpu_sched_preemptor_busy(struct vgpu_sched *s, uint64_t tp, uint64_t now)
{
    if (now <= tp)
        return 0;
    uint64_t closed = atomic_load(&s->f->holder_busy_ns), from = atomic_load(&s->f->holder_busy_from);
    if (from > now || (from && from < tp) || closed > now - tp)
        return now - tp;   /* garbage (or another grant's): busy throughout */
    uint64_t busy = closed + (from ? now - from : 0);
    return busy > now - tp ? now - tp : busy;
}

bool vgpu_sched_wanted(struct vgpu_sched *s, uint64_t since)
{
    uint64_t w = atomic_load(&s->f->want_ns);
    return w > since;
}

void vgpu_sched_wait_yield(struct vgpu_sched *s, uint32_t *seen, uint64_t max_ns)
{
    uint32_t cur = atomic_load(&s->f->yield_seq);
    if (cur == *seen)
        futex_wait(&s->f->yield_seq, cur, max_ns);
    *seen = atomic_load(&s->f->yield_seq);
}

/* When proc's job reaches a quantum of credit (now or before when it has); false: no job. */
static bool job_eligible_at(const struct vgpu_sched_file *f, int proc, uint64_t now, uint64_t *at)
{
    const struct vgpu_sched_job *j = ld_job_of(f, (unsigned)proc);
    if (!j)
        return false;
    unsigned cap = ld_cap(j);
    int64_t cr;
    uint64_t ct;
    ld_credit(j, cap, now, &cr, &ct);
    *at = vgpu_sched_eligible_at(cr, ct, cap);
    return true;
}

uint64_t vgpu_sched_retry_in(struct vgpu_sched *s, int proc, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t wait = 5000000ULL;   /* 5 ms: below VGPU_SCHED_ABSENT_NS */
    uint64_t at;
    if (job_eligible_at(f, proc, now, &at)) {
        if (at > now && at - now < wait)
            wait = at - now;
        else if (at <= now)
            wait = 1000000ULL;   /* entitled: someone else holds the lease; the futex wakes us */
    }
    uint64_t lease = atomic_load(&f->lease);
    if (vgpu_lease_holder(lease)) {
        uint64_t overdue = atomic_load(&f->lease_end) + VGPU_SCHED_GRACE_NS;
        if (overdue > now && overdue - now < wait)
            wait = overdue - now;
    }
    return wait;
}

uint64_t vgpu_sched_turn_at(struct vgpu_sched *s, int proc, uint64_t now)
{
    struct vgpu_sched_file *f = s->f;
    uint64_t at = now, e;
    if (job_eligible_at(f, proc, now, &e) && e > at)
        at = e;
    /* Another's lease, until its deadline (a value that cannot be a deadline is not believed). */
    uint64_t lease = atomic_load(&f->lease), end = atomic_load(&f->lease_end);
    if (vgpu_lease_holder(lease) && vgpu_lease_holder(lease) != (unsigned)proc + 1 && end > at &&
        end - now <= VGPU_SCHED_MAX_LEASE_NS)
        at = end;
    return at - now > VGPU_SCHED_PERIOD_NS ? now + VGPU_SCHED_PERIOD_NS : at;
}

void vgpu_sched_note_yield(struct vgpu_sched *s)
{
    if (s->remote)
        vgpu_arb_send(s->gen, VGPU_ARB_YIELDED, s->handle, -1, 0, 0, 0);
    else
        atomic_fetch_add(&s->f->yields, 1);
}
