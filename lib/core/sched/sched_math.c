/* sched_math.c: the arithmetic of the machine-wide schedule (vgpu/sched.h): credit, quanta, the
 * pick among waiters, and what a lease is charged. Pure functions of their arguments, tested by
 * tests/unit/test_sched.c; sched.c keeps the shared segment, sched_lease.c the lease itself. */
#include "vgpu/sched.h"

/* ---- arithmetic ------------------------------------------------------------------------------ */

uint64_t vgpu_sched_job_key(const char *id, size_t len)
{
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a */
    for (size_t i = 0; i < len && id[i]; i++)
        h = (h ^ (unsigned char)id[i]) * 1099511628211ULL;
    return h ? h : 1;
}

uint64_t vgpu_sched_quantum(unsigned cap)
{
    if (cap > 100)
        cap = 100;
    return VGPU_SCHED_PERIOD_NS * cap / 100;
}

static int64_t accrue(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now)
{
    if (now > credit_t) {
        uint64_t dt = now - credit_t;
        if (dt > 1000 * VGPU_SCHED_PERIOD_NS) /* 50 s: beyond any debt or burst; avoids overflow */
            dt = 1000 * VGPU_SCHED_PERIOD_NS;
        credit += (int64_t)(dt * cap / 100);
    }
    return credit;
}

int64_t vgpu_sched_credit_at(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now)
{
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    credit = accrue(credit, credit_t, cap, now);
    return credit > burst ? burst : credit;
}

int64_t vgpu_sched_settle(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now, uint64_t used,
                          bool borrowed)
{
    /* The credit the job had when the lease began is at most the burst already; what accrued
     * while it ran is not idle time and is not clamped away. */
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    int64_t c = vgpu_sched_charge(accrue(credit, credit_t, cap, now), used, borrowed);
    return c > burst ? burst : c;
}

int64_t vgpu_sched_charge(int64_t credit_now, uint64_t used, bool borrowed)
{
    int64_t u = used > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)used;
    int64_t c = credit_now - u;
    if (borrowed) {
        /* Idle time nobody wanted is free: it may use up what the job had, never more. */
        int64_t floor = credit_now < 0 ? credit_now : 0;
        if (c < floor)
            c = floor;
    }
    /* Bound the debt of runaway leases (a 10% job waits at most 2 s to repay it). */
    int64_t min = -(int64_t)VGPU_SCHED_DEBT_NS;
    return c < min ? min : c;
}

uint64_t vgpu_sched_eligible_at(int64_t credit, uint64_t credit_t, unsigned cap)
{
    int64_t q = (int64_t)vgpu_sched_quantum(cap);
    if (credit >= q || cap == 0)
        return cap == 0 ? UINT64_MAX : credit_t;
    return credit_t + (uint64_t)(q - credit) * 100 / cap;
}

/* Orders entitled candidates: >0 when a goes before b. */
static int before(const struct vgpu_sched_cand *a, const struct vgpu_sched_cand *b, uint64_t now)
{
    uint64_t sa = a->eligible_at > a->want_since ? a->eligible_at : a->want_since;
    uint64_t sb = b->eligible_at > b->want_since ? b->eligible_at : b->want_since;
    bool starve_a = now > sa && now - sa > VGPU_SCHED_STARVE_NS;
    bool starve_b = now > sb && now - sb > VGPU_SCHED_STARVE_NS;
    if (starve_a != starve_b)
        return starve_a ? 1 : -1;
    if (a->prio != b->prio)
        return a->prio > b->prio ? 1 : -1;
    /* credit / quantum, compared without division: credit_a * cap_b vs credit_b * cap_a */
    __int128 ra = (__int128)a->credit * (b->cap ? b->cap : 1);
    __int128 rb = (__int128)b->credit * (a->cap ? a->cap : 1);
    if (ra != rb)
        return ra > rb ? 1 : -1;
    if (a->want_since != b->want_since)
        return a->want_since < b->want_since ? 1 : -1;
    return 0;
}

int vgpu_sched_pick(const struct vgpu_sched_cand *c, unsigned n, uint64_t now, bool *borrow, uint64_t *len)
{
    int best = -1;
    for (unsigned i = 0; i < n; i++) {
        if (c[i].cap == 0 || now < c[i].eligible_at)
            continue;
        if (best < 0 || before(&c[i], &c[best], now) > 0)
            best = (int)i;
    }
    if (best >= 0) {
        uint64_t q = vgpu_sched_quantum(c[best].cap);
        uint64_t l = c[best].credit > 0 ? (uint64_t)c[best].credit : 0;
        if (l > 2 * q)
            l = 2 * q;
        if (l < VGPU_SCHED_MIN_LEASE_NS)
            l = VGPU_SCHED_MIN_LEASE_NS;
        *borrow = false;
        *len = l;
        return best;
    }
    /* Nobody is entitled: a soft job may borrow, until the first one that will be. */
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < n; i++)
        if (c[i].eligible_at < next)
            next = c[i].eligible_at;
    for (unsigned i = 0; i < n; i++) {
        if (!c[i].soft || c[i].cap == 0)
            continue;
        if (best < 0 || c[i].prio > c[best].prio ||
            (c[i].prio == c[best].prio && c[i].want_since < c[best].want_since))
            best = (int)i;
    }
    if (best < 0)
        return -1;
    uint64_t l = VGPU_SCHED_BORROW_NS;
    if (next != UINT64_MAX && next > now && next - now < l)
        l = next - now;
    if (l < VGPU_SCHED_MIN_LEASE_NS)
        l = VGPU_SCHED_MIN_LEASE_NS;
    *borrow = true;
    *len = l;
    return best;
}

/* ---- what a lease is charged (see vgpu/sched.h, "The overlap of a preemption") ---------------- */

uint64_t vgpu_sched_used_overlapped(uint64_t start, uint64_t ov, uint64_t busy_in_ov, uint64_t busy, uint64_t now)
{
    if (now < start)
        return 0;
    if (busy > now - start)
        busy = now - start;
    if (ov <= start || (ov > now && ov - now > VGPU_SCHED_OVERLAP_NS))
        return now - start;   /* no overlap; or a mark too far ahead: garbage, not believed */
    if (ov >= now)
        return busy / 2;      /* the holder still drains: every moment of ours was shared */
    if (busy_in_ov > ov - start)
        busy_in_ov = ov - start;
    return busy_in_ov / 2 + (now - ov);
}

uint64_t vgpu_sched_used_preempted(uint64_t start, uint64_t tp, uint64_t busy, uint64_t now)
{
    if (now < start)
        return 0;
    if (tp < start || tp > now)
        tp = start;
    if (busy > now - tp)
        busy = now - tp;
    return (now - start) - busy / 2;
}

uint64_t vgpu_sched_idle_need(uint64_t busy)
{
    uint64_t need = busy / 10;
    return need < VGPU_SCHED_IDLE_NS ? VGPU_SCHED_IDLE_NS : need > VGPU_SCHED_IDLE_MAX_NS ? VGPU_SCHED_IDLE_MAX_NS : need;
}

/* ---- keeping clear of a job expected back ------------------------------------------------------ */

uint64_t vgpu_sched_clear_until(uint64_t now, uint64_t work_ns, uint64_t new_ns, uint64_t back_at, uint64_t gap,
                                uint64_t late, uint64_t tol)
{
    if (late > gap)
        late = gap;   /* later than a whole gap is not a late return but none */
    if (!back_at || !gap || back_at + late + tol <= now || back_at > now + VGPU_SCHED_CLEAR_AHEAD_NS)
        return 0;   /* no guess, past (it came back, or it did not), or not believable */
    uint64_t until = back_at + tol;
    if (until <= now)
        return back_at + late + tol;   /* due and not back yet: it comes any moment */
    if (work_ns <= until - now)
        return 0;   /* ends in time */
    if (new_ns > gap + tol)
        return 0;   /* would not fit between two of its requests either: waiting only idles the GPU */
    return until;
}
