/* The compute limiter's scheduler (lib/core/sched/sched.c): credit arithmetic, who gets the lease,
 * weighted shares over simulated time, overrun carry, soft borrowing, priorities and the
 * low-priority floor, and the shared file (lease CAS, overdue revocation, dead processes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vgpu/sched.h"

#define MS 1000000ULL
#define Q(cap) ((int64_t)vgpu_sched_quantum(cap))

static void test_quantum_and_credit(void **state)
{
    (void)state;
    assert_int_equal(vgpu_sched_quantum(30), 15 * MS);
    assert_int_equal(vgpu_sched_quantum(100), 50 * MS);
    assert_int_equal(vgpu_sched_quantum(250), 50 * MS);
    /* 30% of 10 ms accrues 3 ms */
    assert_int_equal(vgpu_sched_credit_at(0, 100 * MS, 30, 110 * MS), 3 * MS);
    /* never more than two quanta, however long the job idled */
    assert_int_equal(vgpu_sched_credit_at(0, 0, 30, 3600000 * MS), 2 * Q(30));
    /* time going backwards (another process's clock read) accrues nothing */
    assert_int_equal(vgpu_sched_credit_at(5 * MS, 100 * MS, 30, 90 * MS), 5 * MS);
    /* debt is paid back at the cap's rate: -15 ms at 30% takes 100 ms to reach 15 ms */
    assert_int_equal(vgpu_sched_eligible_at(-15 * (int64_t)MS, 0, 30), 100 * MS);
    assert_int_equal(vgpu_sched_eligible_at(Q(30), 7, 30), 7);
}

static void test_charge_overrun_and_borrow(void **state)
{
    (void)state;
    /* a 15 ms lease that ran 40 ms (one long kernel) leaves 25 ms of debt */
    assert_int_equal(vgpu_sched_charge(15 * MS, 40 * MS, false), -25 * (int64_t)MS);
    /* debt is bounded */
    assert_true(vgpu_sched_charge(0, 3600000 * MS, false) >= -(int64_t)(40 * VGPU_SCHED_PERIOD_NS));
    /* borrowed (soft) time: uses what the job had, never puts it in debt */
    assert_int_equal(vgpu_sched_charge(5 * MS, 10 * MS, true), 0);
    assert_int_equal(vgpu_sched_charge(-3 * (int64_t)MS, 10 * MS, true), -3 * (int64_t)MS);
    assert_int_equal(vgpu_sched_charge(20 * MS, 10 * MS, true), 10 * MS);
}

static struct vgpu_sched_cand cand(unsigned job, unsigned cap, int64_t credit, uint64_t want, uint64_t now)
{
    (void)now;
    struct vgpu_sched_cand c = { .job = job, .cap = cap, .credit = credit, .want_since = want,
                                 .eligible_at = vgpu_sched_eligible_at(credit, now, cap) };
    return c;
}

static void test_pick_basics(void **state)
{
    (void)state;
    bool borrow;
    uint64_t len;
    uint64_t now = 1000 * MS;
    /* nobody entitled, nobody soft: the GPU idles (a hard job alone idles out of turn) */
    struct vgpu_sched_cand c[3] = { cand(0, 30, 1 * MS, now, now) };
    assert_int_equal(vgpu_sched_pick(c, 1, now, &borrow, &len), -1);
    /* entitled: lease = its credit, at most two quanta */
    c[0] = cand(0, 30, Q(30), now, now);
    assert_int_equal(vgpu_sched_pick(c, 1, now, &borrow, &len), 0);
    assert_false(borrow);
    assert_int_equal(len, 15 * MS);
    c[0] = cand(0, 30, 2 * Q(30), now, now);
    vgpu_sched_pick(c, 1, now, &borrow, &len);
    assert_int_equal(len, 30 * MS);
    /* the one further ahead of its quantum goes first */
    c[0] = cand(0, 30, Q(30), now, now);
    c[1] = cand(1, 70, 2 * Q(70), now, now);
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 1);
    /* equal: the earlier waiter */
    c[0] = cand(0, 50, Q(50), now - 5 * MS, now);
    c[1] = cand(1, 50, Q(50), now - 1 * MS, now);
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 0);
}

static void test_pick_priority_and_floor(void **state)
{
    (void)state;
    bool borrow;
    uint64_t len;
    uint64_t now = 5000 * MS;
    struct vgpu_sched_cand c[2] = { cand(0, 50, 2 * Q(50), now, now), cand(1, 50, Q(50), now, now) };
    c[0].prio = VGPU_PRIO_LOW;
    c[1].prio = VGPU_PRIO_HIGH;
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 1);   /* high first, whatever the credit */
    /* the floor: a low-priority job eligible for longer than STARVE_NS is served first */
    c[0].eligible_at = now - VGPU_SCHED_STARVE_NS - MS;
    c[0].want_since = c[0].eligible_at;
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 0);
}

static void test_pick_soft_borrow(void **state)
{
    (void)state;
    bool borrow;
    uint64_t len;
    uint64_t now = 1000 * MS;
    struct vgpu_sched_cand c[2] = { cand(0, 50, 0, now, now), cand(1, 50, -40 * (int64_t)MS, now, now) };
    c[0].soft = true;
    /* no one entitled: the soft job borrows, for a short lease */
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 0);
    assert_true(borrow);
    assert_true(len <= VGPU_SCHED_BORROW_NS);
    /* a borrowed lease ends before the next entitled job's turn */
    c[1] = cand(1, 50, Q(50) - 2 * (int64_t)MS, now, now);   /* eligible in 4 ms */
    vgpu_sched_pick(c, 2, now, &borrow, &len);
    assert_true(borrow);
    assert_int_equal(len, 4 * MS);
    /* an entitled hard job always beats a borrower */
    c[1] = cand(1, 50, Q(50), now, now);
    assert_int_equal(vgpu_sched_pick(c, 2, now, &borrow, &len), 1);
    assert_false(borrow);
}

/* Simulates saturating jobs on one GPU with the real pick/charge functions: every lease runs to
 * its length plus `overrun`, then the picker chooses again. Returns each job's GPU share. */
static void simulate(unsigned n, const unsigned *cap, const bool *soft, const int *prio, uint64_t overrun,
                     uint64_t total, double *share)
{
    int64_t credit[8];
    uint64_t ct[8], used[8] = { 0 }, want[8] = { 0 }, now = 0;
    for (unsigned i = 0; i < n; i++) {
        credit[i] = Q(cap[i]);
        ct[i] = 0;
    }
    while (now < total) {
        struct vgpu_sched_cand c[8];
        for (unsigned i = 0; i < n; i++) {
            c[i] = (struct vgpu_sched_cand){ .job = i, .cap = cap[i], .soft = soft && soft[i],
                                             .prio = prio ? prio[i] : 0,
                                             .credit = vgpu_sched_credit_at(credit[i], ct[i], cap[i], now),
                                             .want_since = want[i] + 1, .eligible_at = vgpu_sched_eligible_at(credit[i], ct[i], cap[i]) };
        }
        bool borrow;
        uint64_t len;
        int w = vgpu_sched_pick(c, n, now, &borrow, &len);
        if (w < 0) {
            now += 100000;   /* idle: the waiters sleep until someone is eligible */
            continue;
        }
        uint64_t ran = len + overrun;
        now += ran;
        credit[w] = vgpu_sched_settle(credit[w], ct[w], cap[w], now, ran, borrow);
        ct[w] = now;
        want[w] = now;   /* it asks again right after its turn: the others have waited longer */
        used[w] += ran;
    }
    for (unsigned i = 0; i < n; i++)
        share[i] = (double)used[i] / (double)now;
}

static void test_shares_hard(void **state)
{
    (void)state;
    double s[2];
    for (unsigned cap = 10; cap <= 70; cap += 20) {
        unsigned caps[1] = { cap };
        simulate(1, caps, NULL, NULL, 0, 10000 * MS, s);
        if (s[0] < cap / 100.0 - 0.01 || s[0] > cap / 100.0 + 0.01)
            fail_msg("alone at %u%%: share %.3f", cap, s[0]);
        /* overruns (a kernel 3x the quantum) are carried: the average still holds */
        simulate(1, caps, NULL, NULL, 3 * vgpu_sched_quantum(cap), 20000 * MS, s);
        if (s[0] < cap / 100.0 - 0.02 || s[0] > cap / 100.0 + 0.02)
            fail_msg("alone at %u%% with overruns: share %.3f", cap, s[0]);
    }
    unsigned caps[2] = { 30, 70 };
    simulate(2, caps, NULL, NULL, 0, 10000 * MS, s);
    if (s[0] < 0.28 || s[0] > 0.32 || s[1] < 0.68 || s[1] > 0.72)
        fail_msg("30/70: %.3f / %.3f", s[0], s[1]);
    /* oversubscribed (70 + 70): the GPU is split by the caps' weights */
    unsigned over[2] = { 70, 70 };
    simulate(2, over, NULL, NULL, 0, 10000 * MS, s);
    if (s[0] < 0.45 || s[0] > 0.55 || s[0] + s[1] < 0.97)
        fail_msg("70/70: %.3f / %.3f", s[0], s[1]);
}

static void test_shares_soft_and_priority(void **state)
{
    (void)state;
    double s[2];
    unsigned caps1[1] = { 50 };
    bool soft1[1] = { true };
    simulate(1, caps1, soft1, NULL, 0, 10000 * MS, s);
    if (s[0] < 0.97)
        fail_msg("soft alone at 50%%: %.3f", s[0]);
    /* soft 50 with a busy hard 30: the soft job takes what the hard one may not */
    unsigned caps2[2] = { 50, 30 };
    bool soft2[2] = { true, false };
    simulate(2, caps2, soft2, NULL, 0, 10000 * MS, s);
    if (s[1] < 0.28 || s[1] > 0.32 || s[0] < 0.65)
        fail_msg("soft 50 + hard 30: %.3f / %.3f", s[0], s[1]);
    /* oversubscribed 80/80, high vs low: high gets its 80, low keeps the rest (never starves) */
    unsigned caps3[2] = { 80, 80 };
    int prio[2] = { VGPU_PRIO_HIGH, VGPU_PRIO_LOW };
    simulate(2, caps3, NULL, prio, 0, 10000 * MS, s);
    if (s[0] < 0.75 || s[1] < 0.15)
        fail_msg("high/low 80/80: %.3f / %.3f", s[0], s[1]);
}

/* ---- the shared file ---------------------------------------------------------------------------- */

static bool fake_dead_pid_alive(pid_t pid, uint64_t start)
{
    (void)start;
    return pid != 999999;
}

static void test_file_lease(void **state)
{
    (void)state;
    char path[] = "/tmp/vgpu-test-sched.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_sched s;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(&s, path, &e), 0);
    uint64_t now = 5000 * MS;
    int ja = vgpu_sched_job(&s, 11, 30, false, 0, now);
    int jb = vgpu_sched_job(&s, 22, 70, false, 0, now);
    assert_true(ja >= 0 && jb >= 0 && ja != jb);
    assert_int_equal(vgpu_sched_job(&s, 11, 30, false, 0, now), ja);   /* same job, same entry */
    int pa = vgpu_sched_attach(&s, (unsigned)ja, getpid(), 0);
    int pb = vgpu_sched_attach(&s, (unsigned)jb, getpid() + 0, 1);
    assert_true(pa >= 0 && pb >= 0 && pa != pb);

    uint64_t la, lb, end;
    /* B (70, credit 35 ms vs its 35 ms quantum) and A (30, 15/15): equal ratio, A asked first */
    assert_true(vgpu_sched_try_acquire(&s, pa, now, &la, &end));
    assert_int_equal(end, now + 15 * MS);
    /* exclusive: B, whose last lease ran out (a saturating job, not a request), waits */
    vgpu_sched_note_end(&s, pb, true, now - 100 * MS);
    assert_false(vgpu_sched_try_acquire(&s, pb, now, &lb, &end));
    assert_true(vgpu_sched_release(&s, la, 15 * MS, now + 15 * MS));
    assert_true(vgpu_sched_try_acquire(&s, pb, now + 15 * MS, &lb, &end));
    assert_true(vgpu_lease_gen(lb) > vgpu_lease_gen(la));
    /* a holder past deadline + grace loses the lease to the next one who asks */
    now = end + VGPU_SCHED_GRACE_NS + MS;
    assert_true(vgpu_sched_try_acquire(&s, pa, now, &la, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&s.f->lease)), (unsigned)pa + 1);
    /* its late release still charges, but reports that the lease was gone */
    assert_false(vgpu_sched_release(&s, lb, 100 * MS, now));
    assert_true(atomic_load(&s.f->jobs[jb].used_ns) >= 100 * MS);

    /* dead processes' entries are reclaimed when the table is full */
    vgpu_sched_alive = fake_dead_pid_alive;
    for (int i = 0; i < VGPU_SCHED_MAX_PROCS; i++)
        vgpu_sched_attach(&s, (unsigned)ja, 999999, (uint64_t)i + 10);
    int pc = vgpu_sched_attach(&s, (unsigned)jb, getpid(), 77);
    assert_true(pc >= 0);
    vgpu_sched_detach(&s, pc);
    assert_int_equal(atomic_load(&s.f->procs[pc].pid), 0);
    vgpu_sched_close(&s);
    unlink(path);
}

static void test_file_cap_change(void **state)
{
    (void)state;
    char path[] = "/tmp/vgpu-test-sched.XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    struct vgpu_sched s;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(&s, path, &e), 0);
    int j = vgpu_sched_job(&s, 5, 10, false, 0, 0);
    atomic_store(&s.f->jobs[j].credit, 0);
    /* 100 ms at 10% = 10 ms, then the cap becomes 50%: the past accrues at the old rate */
    vgpu_sched_job(&s, 5, 50, true, 1, 100 * MS);
    assert_int_equal(atomic_load(&s.f->jobs[j].credit), 10 * MS);
    assert_int_equal(atomic_load(&s.f->jobs[j].cap), 50);
    assert_int_equal(atomic_load(&s.f->jobs[j].soft), 1);
    /* a file of another kind is refused */
    atomic_store(&s.f->magic, 42);
    struct vgpu_sched s2;
    assert_int_equal(vgpu_sched_open_path(&s2, path, &e), -1);
    assert_non_null(strstr(e.msg, "scheduler file"));
    vgpu_sched_close(&s);
    unlink(path);
}

/* The overlap of a preemption (vgpu/sched.h): shared while both have work, then the holder's. */
static void test_overlap_charges(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ULL, t = 1000 * ms;
    /* No overlap (the mark is older than the lease): all of the lease, whatever our busy time. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t - ms, 0, ms, t + 5 * ms), 5 * ms);
    assert_int_equal(vgpu_sched_used_overlapped(t, 0, 0, ms, t + 5 * ms), 5 * ms);
    /* The holder drained until +4 ms, we had work throughout and gave back at +6: half of 4, then 2. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 4 * ms, 4 * ms, 6 * ms, t + 6 * ms), 4 * ms);
    /* An inference request done 1 ms into a 5 ms drain, given back idle at +5.2: half of 1 ms,
     * and the idle tail after the drain. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 5 * ms, ms, ms, t + 5 * ms + ms / 5), ms / 2 + ms / 5);
    /* Two requests inside one long drain (1 ms each): half of both. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 8 * ms, 2 * ms, 2 * ms, t + 9 * ms), ms + ms);
    /* Given back while the holder still drains (mark ahead, believed): half of our busy time. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + VGPU_SCHED_OVERLAP_NS, 0, ms, t + 2 * ms), ms / 2);
    assert_int_equal(vgpu_sched_used_overlapped(t, t + VGPU_SCHED_OVERLAP_NS, 0, 2 * ms, t + 2 * ms), ms);
    /* A mark beyond what any drain is believed: garbage, all of the lease. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 2 * ms + VGPU_SCHED_OVERLAP_NS + 1, 0, 0, t + 2 * ms), 2 * ms);
    /* Busy times beyond what fits are clamped; a lease that ends before it starts costs nothing. */
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 4 * ms, 9 * ms, 9 * ms, t + 6 * ms), 4 * ms);
    assert_int_equal(vgpu_sched_used_overlapped(t, t + VGPU_SCHED_OVERLAP_NS, 0, 9 * ms, t + 2 * ms), ms);
    assert_int_equal(vgpu_sched_used_overlapped(t, t + 4 * ms, 0, 0, t - ms), 0);

    /* The preempted holder: granted at t, preempted at +10, drained at +15. */
    assert_int_equal(vgpu_sched_used_preempted(t, t + 10 * ms, 5 * ms, t + 15 * ms), 15 * ms - 5 * ms / 2);
    assert_int_equal(vgpu_sched_used_preempted(t, t + 10 * ms, ms, t + 15 * ms), 15 * ms - ms / 2);
    assert_int_equal(vgpu_sched_used_preempted(t, t + 10 * ms, 0, t + 15 * ms), 15 * ms);
    /* Out of range: tp reads as start; busy is at most the time since tp. */
    assert_int_equal(vgpu_sched_used_preempted(t, t - ms, 15 * ms, t + 15 * ms), 15 * ms - 15 * ms / 2);
    assert_int_equal(vgpu_sched_used_preempted(t, t + 10 * ms, 99 * ms, t + 15 * ms), 15 * ms - 5 * ms / 2);
    assert_int_equal(vgpu_sched_used_preempted(t, t, 0, t - 1), 0);
    /* Both sides together pay the wall time once: holder 0..15, preemptor 10..17, busy 10..12. */
    uint64_t holder = vgpu_sched_used_preempted(t, t + 10 * ms, 2 * ms, t + 15 * ms);
    uint64_t preemptor = vgpu_sched_used_overlapped(t + 10 * ms, t + 15 * ms, 2 * ms, 2 * ms, t + 17 * ms);
    assert_int_equal(holder + preemptor, 17 * ms);
}

/* A holder asked to yield waits, before giving the lease back, for a tenth of the work it did
 * (a service's short request: the usual 0.2 ms). */
static void test_idle_need(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ULL;
    assert_int_equal(vgpu_sched_idle_need(0), VGPU_SCHED_IDLE_NS);
    assert_int_equal(vgpu_sched_idle_need(ms), VGPU_SCHED_IDLE_NS);            /* a request */
    assert_int_equal(vgpu_sched_idle_need(20 * ms), 2 * ms);                   /* a saturating lease */
    assert_int_equal(vgpu_sched_idle_need(1000 * ms), VGPU_SCHED_IDLE_MAX_NS); /* bounded */
}

/* Keeping clear of a job expected back (vgpu/sched.h): a holder queues no work that would still
 * run when a job it would yield to returns, unless that work could never fit between two of the
 * job's requests, and no guess that is past or too far ahead is believed. */
static void test_clear_until(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ULL, now = 1000 * ms, tol = VGPU_SCHED_CLEAR_TOL_NS;
    assert_int_equal(vgpu_sched_clear_until(now, 2 * ms, ms, 0, 0, 0, tol), 0);                  /* no guess */
    assert_int_equal(vgpu_sched_clear_until(now, 2 * ms, ms, now + 5 * ms, 5 * ms, 0, tol), 0);  /* ends in time */
    assert_int_equal(vgpu_sched_clear_until(now, 5 * ms + tol, ms, now + 5 * ms, 5 * ms, 0, tol), 0); /* just */
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now + 5 * ms, 5 * ms, 0, tol), now + 5 * ms + tol);
    /* the new work alone is longer than its gaps: keeping clear would only idle the GPU */
    assert_int_equal(vgpu_sched_clear_until(now, 12 * ms, 6 * ms, now + 5 * ms, 5 * ms, 0, tol), 0);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol, 5 * ms, 0, tol), 0);     /* past */
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol + 1, 5 * ms, 0, tol), now + 1);
    assert_int_equal(vgpu_sched_clear_until(now, 200 * ms, ms, now + VGPU_SCHED_CLEAR_AHEAD_NS + 1, 5 * ms, 0, tol), 0);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now + 5 * ms, 0, 0, tol), 0);       /* no gap: garbage */
    /* A return that may come late: before it is due, as without (the work must end by back_at +
     * tol); once due and not back, clear until the late bound, whatever the work; past that bound,
     * go ahead. Lateness beyond a whole gap is taken as a gap. */
    const uint64_t late = ms;
    assert_int_equal(vgpu_sched_clear_until(now, 2 * ms, ms, now + 5 * ms, 5 * ms, late, tol), 0);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now + 5 * ms, 5 * ms, late, tol), now + 5 * ms + tol);
    assert_int_equal(vgpu_sched_clear_until(now, ms / 10, ms, now - tol, 5 * ms, late, tol), now - tol + late + tol);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol - late + 1, 5 * ms, late, tol), now + 1);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol - late, 5 * ms, late, tol), 0);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol - 5 * ms, 5 * ms, 50 * ms, tol), 0);
    assert_int_equal(vgpu_sched_clear_until(now, 6 * ms, ms, now - tol - 4 * ms, 5 * ms, 50 * ms, tol), now + ms);
    /* the word the schedule keeps both in */
    uint64_t w = vgpu_sched_back_word(5 * ms, late);
    assert_int_equal(vgpu_sched_back_gap(w), 5 * ms);
    assert_int_equal(vgpu_sched_back_late(w), late);
    assert_int_equal(vgpu_sched_back_late(vgpu_sched_back_word(5 * ms, 1ULL << 40)), 0xffffffffULL);
}

/* A schedule in a new file at `path` (a mkstemp template) with a --core 70 training job (key 1,
 * priority tprio) and a --core 30 service (key 2, soft when it has high priority), one process
 * each. */
static void training_and_service(struct vgpu_sched *s, char *path, uint64_t now, int tprio, int cprio, int *jt,
                                 int *jc, int *pt, int *pc)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(s, path, &e), 0);
    *jt = vgpu_sched_job(s, 1, 70, false, tprio, now);
    *jc = vgpu_sched_job(s, 2, 30, cprio == VGPU_PRIO_HIGH, cprio, now);
    *pt = vgpu_sched_attach(s, (unsigned)*jt, getpid(), 1);
    *pc = vgpu_sched_attach(s, (unsigned)*jc, getpid(), 2);
    assert_true(*jt >= 0 && *jc >= 0 && *pt >= 0 && *pc >= 0);
}

/* On a schedule: a --core 70 holder keeps clear of a --priority high service due back, of an equal
 * one only while that one is under its cap, never of a low one, and not at all once it is under
 * its own cap. */
static void test_keep_clear(void **state)
{
    (void)state;
    char path[] = "/tmp/vgpu-test-sched.XXXXXX";
    struct vgpu_sched s;
    const uint64_t ms = 1000000ULL;
    uint64_t now = 5000 * ms;
    int jt, jc, pt, pc;
    training_and_service(&s, path, now, VGPU_PRIO_LOW, VGPU_PRIO_HIGH, &jt, &jc, &pt, &pc);
    uint64_t lease, end;
    assert_true(vgpu_sched_try_acquire(&s, pt, now, &lease, &end));
    now += 30 * ms;                         /* the holder has used most of its credit */
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), 0);   /* no guess yet */
    vgpu_sched_expect(&s, pc, now + 3 * ms, 5 * ms, ms);
    uint64_t until = now + 3 * ms + VGPU_SCHED_CLEAR_TOL_NS;
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), until);
    /* due and not back: clear until its late bound */
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, until, ms / 10, 2 * ms), until + ms);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, until + ms, ms / 10, 2 * ms), 0);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 3 * ms, 2 * ms), 0);   /* ends in time */
    /* the service never clears for the holder: it outranks it, not the other way round */
    assert_int_equal(vgpu_sched_keep_clear(&s, pc, now, 50 * ms, 2 * ms), 0);
    /* equal priority: the service would preempt only while it is under its cap and the holder not */
    vgpu_sched_job(&s, 2, 30, true, VGPU_PRIO_NORMAL, now);
    vgpu_sched_job(&s, 1, 70, false, VGPU_PRIO_NORMAL, now);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), until);
    atomic_store(&s.f->jobs[jc].credit, 0);  /* the service spent its credit: no preemption */
    atomic_store(&s.f->jobs[jc].credit_t, now);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), 0);
    vgpu_sched_job(&s, 2, 30, true, VGPU_PRIO_HIGH, now);
    atomic_store(&s.f->jobs[jc].credit, 30 * ms);
    /* a holder under its own cap (credit past one and a half quanta) may end its work later */
    atomic_store(&s.f->jobs[jt].credit, 60 * ms);
    atomic_store(&s.f->jobs[jt].credit_t, now);
    atomic_store(&s.f->lease_start, now);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), now + 3 * ms + VGPU_SCHED_CLEAR_LATE_NS);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 3 * ms + VGPU_SCHED_CLEAR_LATE_NS, 2 * ms), 0);
    /* the wait ends where the credit would reach the burst: (70 - 69.5) ms at 70 % */
    atomic_store(&s.f->jobs[jt].credit, 69 * ms + ms / 2 - VGPU_SCHED_MIN_LEASE_NS);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), now + (ms / 2 + VGPU_SCHED_MIN_LEASE_NS) * 100 / 70);
    /* one whose credit is at its burst (losing what it is owed) goes ahead */
    atomic_store(&s.f->jobs[jt].credit, 70 * ms);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), 0);
    /* a low-priority service is never kept clear of */
    atomic_store(&s.f->jobs[jt].credit, 0);
    vgpu_sched_job(&s, 2, 30, true, VGPU_PRIO_LOW, now);
    vgpu_sched_job(&s, 1, 70, false, VGPU_PRIO_NORMAL, now);
    assert_int_equal(vgpu_sched_keep_clear(&s, pt, now, 5 * ms, 2 * ms), 0);
    vgpu_sched_close(&s);
    unlink(path);
}

/* At equal priority, a request (its last lease given back idle, or a process's first work)
 * preempts with a quantum of credit even a holder under its cap; a saturating job's next want
 * (its lease ran out) does not. */
static void test_request_preempts(void **state)
{
    (void)state;
    char path[] = "/tmp/vgpu-test-sched.XXXXXX";
    struct vgpu_sched s;
    const uint64_t ms = 1000000ULL;
    uint64_t now = 5000 * ms;
    int jt, jc, pt, pc;
    training_and_service(&s, path, now, VGPU_PRIO_NORMAL, VGPU_PRIO_NORMAL, &jt, &jc, &pt, &pc);
    uint64_t lt, lc, end;
    /* the holder is under its cap (credit at its burst), the waiter has one quantum */
    atomic_store(&s.f->jobs[jt].credit, 70 * ms);
    atomic_store(&s.f->jobs[jt].credit_t, now);
    atomic_store(&s.f->jobs[jc].credit, 15 * ms);
    atomic_store(&s.f->jobs[jc].credit_t, now);
    assert_true(vgpu_sched_try_acquire(&s, pt, now, &lt, &end));
    /* never had a lease: a new process's first work preempts (before: it waited for the lease) */
    assert_true(vgpu_sched_try_acquire(&s, pc, now + ms, &lc, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&s.f->lease)), (unsigned)pc + 1);
    vgpu_sched_release(&s, lc, ms, now + 2 * ms);
    vgpu_sched_note_end(&s, pc, true, now + 2 * ms);                    /* ran out: saturating */
    now += 10 * ms;
    atomic_store(&s.f->jobs[jc].credit, 15 * ms);
    atomic_store(&s.f->jobs[jc].credit_t, now);
    assert_true(vgpu_sched_try_acquire(&s, pt, now, &lt, &end));
    assert_false(vgpu_sched_try_acquire(&s, pc, now + ms, &lc, &end));
    vgpu_sched_unwant(&s, pc);
    vgpu_sched_note_end(&s, pc, false, now);                             /* given back idle */
    assert_true(vgpu_sched_try_acquire(&s, pc, now + 3 * ms, &lc, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&s.f->lease)), (unsigned)pc + 1);
    /* a service that began to wait before the holder's lease, for credit (a slow request spent
     * it), preempts once entitled; before, it waited for the whole lease (40 ms, bench) */
    vgpu_sched_release(&s, lc, ms, now + 4 * ms);
    vgpu_sched_note_end(&s, pc, false, now + 4 * ms);                    /* given back idle */
    now += 20 * ms;
    atomic_store(&s.f->jobs[jc].credit, 0);
    atomic_store(&s.f->jobs[jc].credit_t, now);
    assert_false(vgpu_sched_try_acquire(&s, pc, now, &lc, &end));       /* not entitled: waits */
    assert_true(vgpu_sched_try_acquire(&s, pt, now + ms, &lt, &end));
    atomic_store(&s.f->jobs[jc].credit, 15 * ms);
    atomic_store(&s.f->jobs[jc].credit_t, now + 2 * ms);
    assert_true(vgpu_sched_try_acquire(&s, pc, now + 2 * ms, &lc, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&s.f->lease)), (unsigned)pc + 1);
    vgpu_sched_close(&s);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantum_and_credit),
        cmocka_unit_test(test_charge_overrun_and_borrow),
        cmocka_unit_test(test_pick_basics),
        cmocka_unit_test(test_pick_priority_and_floor),
        cmocka_unit_test(test_pick_soft_borrow),
        cmocka_unit_test(test_shares_hard),
        cmocka_unit_test(test_shares_soft_and_priority),
        cmocka_unit_test(test_file_lease),
        cmocka_unit_test(test_file_cap_change),
        cmocka_unit_test(test_overlap_charges),
        cmocka_unit_test(test_idle_need),
        cmocka_unit_test(test_clear_until),
        cmocka_unit_test(test_keep_clear),
        cmocka_unit_test(test_request_preempts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
