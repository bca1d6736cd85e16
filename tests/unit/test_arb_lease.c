/* The arbiter's lease rules (cmd/daemon/arbiter.c), through its request handler alone: no
 * socket, no daemon, no timing. A lease's age is made by moving the daemon's own record of its
 * grant back; everything else is what a client could send. Root's jobs are the victim, nobody's
 * the attacker (issue 35): every end of a lease is charged, a drain is bounded, credit does not
 * survive leaving and coming back, a client's clock and its measure are believed only within
 * bounds, the per-user job quota is exactly 8, requests that get no reply have no effect on
 * what is not the sender's, and a priority is granted by root's policy file, an uncapped one only
 * within a fair share. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "daemon/server.h"
#include "vgpu/exitcode.h"
#include "vgpu/policy.h"
#include "vgpu/sched.h"

#define MS 1000000ULL
#define NOBODY 65534

struct world {
    struct arbiter a;
    struct arb_gpu *g;
    struct arb_client root, nobody;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One GPU's schedule, opened on both clients' connections (as OPEN would leave it). */
static int setup(void **state)
{
    struct world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->g = calloc(1, sizeof *w->g);
    assert_non_null(w->g);
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_create_memfd(&w->g->s, &w->g->ro_fd, &e), 0);
    snprintf(w->g->uuid, sizeof w->g->uuid, "GPU-00000000-0000-0000-0000-000000000001");
    w->a.gpus[0] = w->g;
    w->a.ngpus = 1;
    w->root = (struct arb_client){ .fd = -1, .id = 1, .pid = getpid(), .uid = 0 };
    w->nobody = (struct arb_client){ .fd = -1, .id = 2, .pid = getppid(), .uid = NOBODY };
    w->root.opened[0] = w->nobody.opened[0] = true;
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    vgpu_sched_close(&w->g->s);
    close(w->g->ro_fd);
    free(w->a.charged);   /* charged.c's table, one allocation made at the first charge (the daemon's lives as long as it) */
    free(w->g);
    free(w);
    return 0;
}

static struct vgpu_arb_rep call(struct world *w, struct arb_client *c, uint32_t op, int proc, uint64_t a0,
                                uint64_t a1, uint64_t a2, uint64_t a3)
{
    struct vgpu_arb_req q = { .op = op, .gpu = 0, .proc = proc, .a = { a0, a1, a2, a3 } };
    struct vgpu_arb_rep r;
    static char out[VGPU_ARB_MAX_PAYLOAD];
    int send_fd;
    arb_handle(&w->a, c, &q, NULL, -1, &r, out, &send_fd);
    return r;
}

static int job(struct world *w, struct arb_client *c, uint64_t key, unsigned cap)
{
    return (int)call(w, c, VGPU_ARB_JOB, -1, key, cap, 0, 0).rc;
}

static int attach(struct world *w, struct arb_client *c, int j)
{
    return (int)call(w, c, VGPU_ARB_ATTACH, -1, (uint64_t)j, 0, 0, 0).rc;
}

/* The lease word, or 0 when not granted. */
static uint64_t acquire(struct world *w, struct arb_client *c, int p)
{
    struct vgpu_arb_rep r = call(w, c, VGPU_ARB_ACQUIRE, p, now_ns(), 0, 0, 0);
    return r.rc == 1 ? r.v[0] : 0;
}

/* The lease of `p` was granted `ago` ns before now (its deadline `len` after that). */
static void age_lease(struct world *w, int p, uint64_t ago, uint64_t len)
{
    uint64_t now = now_ns();
    w->g->grant_at[p] = now - ago;
    atomic_store(&w->g->s.f->lease_start, now - ago);
    atomic_store(&w->g->s.f->lease_end, now - ago + len);
}

static uint64_t used(struct world *w, int j)
{
    return atomic_load(&w->g->s.f->jobs[j].used_ns);
}

/* nobody's --core 30 job, one process holding the lease; *jp, *pp its entries. */
static uint64_t nobody_holds(struct world *w, int *jp, int *pp)
{
    int j = job(w, &w->nobody, 0x6e6f626f, 30);
    assert_true(j >= 0);
    int p = attach(w, &w->nobody, j);
    assert_true(p >= 0);
    uint64_t lease = acquire(w, &w->nobody, p);
    assert_true(lease != 0);
    *jp = j;
    *pp = p;
    return lease;
}

/* ---- every end of a lease is charged --------------------------------------------------------- */

/* Reporting 0 used for a lease held 50 ms is charged the 50 ms (charge()'s floor). */
static void test_release_floor(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 50 * MS, 15 * MS);
    assert_int_equal(call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 0, now_ns(), 0).rc, 1);
    assert_true(used(w, j) >= 50 * MS);
}

/* A release that says it happened at the grant (its clock read as sent) is charged its length. */
static void test_release_clock_believed_within_skew(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 50 * MS, 15 * MS);
    uint64_t granted = w->g->grant_at[p];
    call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 50 * MS, granted, 0);
    assert_true(used(w, j) >= 49 * MS);
}

static void test_detach_charged(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 40 * MS, 15 * MS);
    call(w, &w->nobody, VGPU_ARB_DETACH, p, 0, 0, 0, 0);
    assert_true(used(w, j) >= 40 * MS);
    assert_int_equal(vgpu_lease_holder(atomic_load(&w->g->s.f->lease)), 0);
    (void)lease;
}

static void test_closed_connection_charged(void **state)
{
    struct world *w = *state;
    int j, p;
    nobody_holds(w, &j, &p);
    age_lease(w, p, 40 * MS, 15 * MS);
    arb_client_gone(&w->a, &w->nobody);
    assert_true(used(w, j) >= 40 * MS);
    assert_int_equal(vgpu_lease_holder(atomic_load(&w->g->s.f->lease)), 0);
}

/* A lease past its deadline + grace, never released: the waiter that revokes it has it charged,
 * and the holder's late RELEASE is charged nothing more. */
static void test_revoke_charged_once(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 100 * MS, 15 * MS);
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    assert_true(acquire(w, &w->root, rp) != 0);
    uint64_t charged = used(w, j);
    assert_true(charged >= 100 * MS);
    assert_int_equal(call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 0, now_ns(), 0).rc, 0);
    assert_int_equal(used(w, j), charged);
}

/* Taken by a preemptor and never given back: paid for (at the preempted floor, half its length
 * when the moment of the preemption is not known) when the entry is next granted or leaves. */
/* Preempted by root's request 40 ms into its lease, drained 20 ms later: charged all 40 ms before
 * the preemption and at least half the overlap, not half of the whole. */
static void test_preempted_charged_to_preemption(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 40 * MS, 60 * MS);
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    assert_true(acquire(w, &w->root, rp) != 0);   /* a new process's first work: a request, it preempts */
    assert_int_not_equal(atomic_load(&w->g->s.f->lease), lease);
    w->g->grant_at[p] -= 20 * MS;     /* 20 ms of overlap since, as if drained now */
    w->g->taken_at[p] -= 20 * MS;
    call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 0, now_ns(), 0);
    assert_true(used(w, j) >= 50 * MS);
}

static void test_preempted_never_released(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 40 * MS, 60 * MS);
    /* As a preemptor would: the lease word moves on. */
    atomic_store(&w->g->s.f->lease, ((vgpu_lease_gen(lease) + 1) << 16) | 0);
    call(w, &w->nobody, VGPU_ARB_DETACH, p, 0, 0, 0, 0);
    assert_true(used(w, j) >= 20 * MS);
}

static void set_credit(struct world *w, int j, int64_t credit)
{
    atomic_store(&w->g->s.f->jobs[j].credit, credit);
    atomic_store(&w->g->s.f->jobs[j].credit_t, now_ns());
}

/* ---- a drain is bounded ------------------------------------------------------------------------- */

static void test_draining_bounded(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    /* A 15 ms lease whose deadline passed 45 ms ago, more than one lease's length: DRAINING is
     * no longer believed. */
    age_lease(w, p, 60 * MS, 15 * MS);
    call(w, &w->nobody, VGPU_ARB_DRAINING, -1, lease, now_ns(), 0, 0);
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    set_credit(w, rj, 0);   /* not entitled: it cannot preempt, the lease can only be revoked */
    acquire(w, &w->root, rp);
    assert_int_not_equal(atomic_load(&w->g->s.f->lease), lease);
    assert_true(used(w, j) >= 60 * MS);
}

/* Within the bound a drain is still believed (a holder waiting for its long kernels). */
static void test_draining_believed_within_bound(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 75 * MS, 50 * MS);   /* 25 ms past its deadline (and the grace), 25 ms before the bound */
    call(w, &w->nobody, VGPU_ARB_DRAINING, -1, lease, now_ns(), 0, 0);
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    set_credit(w, rj, 0);   /* not entitled: it could not preempt, only revoke */
    assert_int_equal(acquire(w, &w->root, rp), 0);
    assert_int_equal(atomic_load(&w->g->s.f->lease), lease);
}

/* ---- credit never survives leaving ------------------------------------------------------------ */

static void test_detach_attach_forfeits_credit(void **state)
{
    struct world *w = *state;
    int j = job(w, &w->nobody, 0x6e6f626f, 30);
    int p = attach(w, &w->nobody, j);
    set_credit(w, j, 2 * (int64_t)vgpu_sched_quantum(30));
    call(w, &w->nobody, VGPU_ARB_DETACH, p, 0, 0, 0, 0);
    assert_int_equal(job(w, &w->nobody, 0x6e6f626f, 30), j);
    assert_true(attach(w, &w->nobody, j) >= 0);
    assert_true(atomic_load(&w->g->s.f->jobs[j].credit) <= 0);
}

static void test_reconnect_forfeits_credit_keeps_debt(void **state)
{
    struct world *w = *state;
    int j = job(w, &w->nobody, 0x6e6f626f, 30);
    attach(w, &w->nobody, j);
    set_credit(w, j, 2 * (int64_t)vgpu_sched_quantum(30));
    arb_client_gone(&w->a, &w->nobody);
    struct arb_client again = { .fd = -1, .id = 3, .pid = getppid(), .uid = NOBODY, .opened = { true } };
    assert_int_equal(job(w, &again, 0x6e6f626f, 30), j);
    assert_true(attach(w, &again, j) >= 0);
    assert_true(atomic_load(&w->g->s.f->jobs[j].credit) <= 0);

    set_credit(w, j, -100 * (int64_t)MS);   /* debt is kept */
    arb_client_gone(&w->a, &again);
    assert_true(atomic_load(&w->g->s.f->jobs[j].credit) <= -(int64_t)(99 * MS));
}

static int64_t credit_of(struct world *w, int j)
{
    return atomic_load(&w->g->s.f->jobs[j].credit);
}

/* Job-key cycling: nobody's job overruns its lease, ends, and comes back under a new job key. The
 * new job starts with the ended job's debt, not with the quantum a new job got before (its
 * overrun forgotten, a fresh turn each lease). */
static void test_new_key_keeps_ended_jobs_debt(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 60 * MS, 15 * MS);
    assert_int_equal(call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 0, now_ns(), 0).rc, 1);
    int64_t owed = credit_of(w, j);
    assert_true(owed < -(int64_t)(40 * MS));   /* 60 ms held against one 15 ms quantum */
    call(w, &w->nobody, VGPU_ARB_DETACH, p, 0, 0, 0, 0);
    int k = job(w, &w->nobody, 0x6e6f626f + 1, 30);
    assert_true(k >= 0 && k != j);
    /* What it owed, less what it repaid since at 30 % of the time passed (a loaded machine's
     * few ms), and nowhere near the +15 ms quantum a new job got before. */
    assert_true(credit_of(w, k) < -(int64_t)(20 * MS));
    /* Another user's new job is not touched: its first turn is one quantum, as before. */
    int r = job(w, &w->root, 0x726f6f74, 30);
    assert_int_equal(credit_of(w, r), (int64_t)vgpu_sched_quantum(30));
}

/* A job that ends holding credit (its burst) forfeits it, and a new key of its login starts at
 * what that job would have now: no fresh quantum right away. Past the bound it is forgotten. */
static void test_new_key_no_fresh_credit(void **state)
{
    struct world *w = *state;
    int j = job(w, &w->nobody, 0x6e6f626f, 30);
    int p = attach(w, &w->nobody, j);
    set_credit(w, j, 2 * (int64_t)vgpu_sched_quantum(30));
    call(w, &w->nobody, VGPU_ARB_DETACH, p, 0, 0, 0, 0);
    for (uint64_t key = 0x100; key < 0x104; key++) {
        int k = job(w, &w->nobody, key, 30);
        assert_true(k >= 0);
        assert_true(credit_of(w, k) < (int64_t)vgpu_sched_quantum(30) / 2);
        int kp = attach(w, &w->nobody, k);
        call(w, &w->nobody, VGPU_ARB_DETACH, kp, 0, 0, 0, 0);
    }
    for (unsigned i = 0; i < ARB_DEBTS; i++)
        if (w->g->debts[i].at)
            w->g->debts[i].at -= 11000000000ULL;   /* 11 s ago: past the bound */
    int k = job(w, &w->nobody, 0x200, 30);
    assert_int_equal(credit_of(w, k), (int64_t)vgpu_sched_quantum(30));
}

/* A job with another process still attached keeps its credit when one leaves. */
static void test_leaving_process_of_live_job_keeps_credit(void **state)
{
    struct world *w = *state;
    int j = job(w, &w->root, 0x726f6f74, 30);
    int p1 = attach(w, &w->root, j);
    struct arb_client second = { .fd = -1, .id = 4, .pid = 1, .uid = 0, .opened = { true } };
    assert_true(attach(w, &second, j) >= 0);
    int64_t burst = 2 * (int64_t)vgpu_sched_quantum(30);
    set_credit(w, j, burst);
    call(w, &w->root, VGPU_ARB_DETACH, p1, 0, 0, 0, 0);
    assert_true(atomic_load(&w->g->s.f->jobs[j].credit) >= burst - (int64_t)MS);
}

/* ---- the per-user job quota is exactly VGPU_ARB_USER_JOBS -------------------------------------- */

static void test_user_job_quota_exact(void **state)
{
    struct world *w = *state;
    for (unsigned i = 0; i < VGPU_ARB_USER_JOBS; i++)
        assert_true(job(w, &w->nobody, 0x1000 + i, 30) >= 0);
    struct vgpu_arb_rep r = call(w, &w->nobody, VGPU_ARB_JOB, -1, 0x2000, 30, 0, 0);
    assert_int_equal(r.rc, -EDQUOT);
    assert_non_null(strstr(r.msg, "most jobs"));
    assert_true(job(w, &w->nobody, 0x1000, 30) >= 0);   /* its own known job: still served */
    assert_true(job(w, &w->root, 0x2000, 30) >= 0);     /* root is not limited */
}

/* ---- requests that get no reply: no effect on another user's entries ---------------------------- */

static void test_forged_silent_requests_no_effect(void **state)
{
    struct world *w = *state;
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    uint64_t lease = acquire(w, &w->root, rp);
    assert_true(lease != 0);
    int nj = job(w, &w->nobody, 0x6e6f626f, 30);
    assert_true(attach(w, &w->nobody, nj) >= 0);   /* the attacker has entries of its own */
    uint64_t now = now_ns();
    const struct { uint32_t op; int proc; uint64_t a0, a1, a2; const char *what; } forged[] = {
        { VGPU_ARB_DETACH, rp, 0, 0, 0, "DETACH" },
        { VGPU_ARB_UNWANT, rp, 0, 0, 0, "UNWANT" },
        { VGPU_ARB_WANT_FROM, rp, now, 0, 0, "WANT_FROM" },
        { VGPU_ARB_NOTE_END, rp, 1, now, 0, "NOTE_END" },
        { VGPU_ARB_DRAINING, -1, lease, now, 0, "DRAINING" },
        { VGPU_ARB_NOTE_BUSY, -1, lease, 5 * MS, now, "NOTE_BUSY" },
        { VGPU_ARB_EXPECT, rp, now + 10 * MS, 5 * MS, 0, "EXPECT" },
        { VGPU_ARB_SPILLING, -1, (uint64_t)rj, 1, 0, "SPILLING" },
        { VGPU_ARB_DRAINED, -1, now, 0, 0, "DRAINED" },   /* from a client with entries of its own */
    };
    static struct vgpu_sched_file before;
    struct arb_gpu gbefore;
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        memcpy(&before, w->g->s.f, sizeof before);
        memcpy(&gbefore, w->g, sizeof gbefore);
        uint64_t refused = w->a.refused;
        struct vgpu_arb_req q = { .op = forged[i].op, .proc = forged[i].proc,
                                  .a = { forged[i].a0, forged[i].a1, forged[i].a2, 0 } };
        struct vgpu_arb_rep r;
        static char out[VGPU_ARB_MAX_PAYLOAD];
        int send_fd;
        assert_false(arb_handle(&w->a, &w->nobody, &q, NULL, -1, &r, out, &send_fd));
        if (memcmp(&before, w->g->s.f, sizeof before) || memcmp(&gbefore, w->g, sizeof gbefore))
            fail_msg("nobody's forged %s changed root's entries", forged[i].what);
        assert_int_equal(w->a.refused, refused + 1);
    }
}

/* DRAINED ends a preemption's overlap (drained_at): believed only from the holder whose RELEASE
 * just found its lease taken, and once. Any client with an entry on the GPU could say it before,
 * and end the overlap another job's lease was charged by. */
static void test_drained_only_from_preempted_holder(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    age_lease(w, p, 10 * MS, 60 * MS);
    int rj = job(w, &w->root, 0x726f6f74, 30);
    int rp = attach(w, &w->root, rj);
    assert_true(acquire(w, &w->root, rp) != 0);   /* root's first work preempts nobody's lease */
    struct arb_client third = { .fd = -1, .id = 5, .pid = 1, .uid = NOBODY, .opened = { true } };
    int tj = job(w, &third, 0x74686972, 30);
    assert_true(attach(w, &third, tj) >= 0);
    uint64_t ov = atomic_load(&w->g->s.f->overlap_until), refused = w->a.refused;
    /* Neither the preemptor nor another client of the GPU ends the overlap. */
    assert_false(call(w, &w->root, VGPU_ARB_DRAINED, -1, now_ns(), 0, 0, 0).rc);
    call(w, &third, VGPU_ARB_DRAINED, -1, now_ns(), 0, 0, 0);
    /* Nor the holder before its RELEASE found the lease gone. */
    call(w, &w->nobody, VGPU_ARB_DRAINED, -1, now_ns(), 0, 0, 0);
    assert_int_equal(w->g->drained_at, 0);
    assert_int_equal(atomic_load(&w->g->s.f->overlap_until), ov);
    assert_int_equal(w->a.refused, refused + 3);
    /* The preempted holder, after its RELEASE: believed, once. */
    assert_int_equal(call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, 0, now_ns(), 0).rc, 0);
    call(w, &w->nobody, VGPU_ARB_DRAINED, -1, now_ns(), 0, 0, 0);
    uint64_t at = w->g->drained_at;
    assert_true(at != 0);
    assert_int_equal(w->a.refused, refused + 3);
    call(w, &w->nobody, VGPU_ARB_DRAINED, -1, now_ns(), 0, 0, 0);
    assert_int_equal(w->g->drained_at, at);
    assert_int_equal(w->a.refused, refused + 4);
}

/* DRAINING with a lease word of the client's own entry that is no longer the GPU's lease: no
 * lease, no drain (refused, nothing written). */
static void test_draining_old_lease_refused(void **state)
{
    struct world *w = *state;
    int j, p;
    uint64_t lease = nobody_holds(w, &j, &p);
    assert_int_equal(call(w, &w->nobody, VGPU_ARB_RELEASE, -1, lease, MS, now_ns(), 0).rc, 1);
    static struct vgpu_sched_file before;
    memcpy(&before, w->g->s.f, sizeof before);
    uint64_t refused = w->a.refused;
    call(w, &w->nobody, VGPU_ARB_DRAINING, -1, lease, now_ns(), 0, 0);
    assert_memory_equal(&before, w->g->s.f, sizeof before);
    assert_int_equal(w->a.refused, refused + 1);
}

/* ---- priority is a right, not a wish ------------------------------------------------------------ */

/* Root's policy file in the machine-wide directory (VGPU_MACHINE_DIR, set by tests/run.sh);
 * NULL: none. */
static void policy(const char *text)
{
    char path[512];
    const char *dir = getenv("VGPU_MACHINE_DIR");
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/policy", dir);
    unlink(path);
    if (!text)
        return;
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, 0644), 0);
}

static int prio_of(struct world *w, int j)
{
    return atomic_load(&w->g->s.f->jobs[j].prio);
}

/* Root's --core 30 job with a process; its entry. */
static int root_core30(struct world *w)
{
    int rj = job(w, &w->root, 0x726f6f74, 30);
    assert_true(rj >= 0);
    assert_true(attach(w, &w->root, rj) >= 0);
    return rj;
}

/* `vgpu run --priority high -- loop` as nobody: no policy names it, so high is not granted; it is
 * an uncapped job held to a fair share beside root's --core 30 job (soft: it may still use what
 * root leaves). */
static void test_high_not_granted_without_policy(void **state)
{
    struct world *w = *state;
    policy(NULL);
    root_core30(w);
    int j = (int)call(w, &w->nobody, VGPU_ARB_JOB, -1, 0x6e6f626f, 0, 0, VGPU_PRIO_HIGH).rc;
    assert_true(j >= 0);
    assert_int_equal(prio_of(w, j), VGPU_PRIO_NORMAL);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 50);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].soft), VGPU_SCHED_SOFT);
}

/* Named by the policy, it is granted high, still within a fair share, recomputed at each turn as
 * jobs come and go. */
static void test_high_granted_within_fair_share(void **state)
{
    struct world *w = *state;
    policy("priority-high-users nobody\n");
    int j = (int)call(w, &w->nobody, VGPU_ARB_JOB, -1, 0x6e6f626f, 0, 0, VGPU_PRIO_HIGH).rc;
    assert_true(j >= 0);
    int p = attach(w, &w->nobody, j);
    assert_int_equal(prio_of(w, j), VGPU_PRIO_HIGH);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 100);   /* alone */
    root_core30(w);
    uint64_t lease = acquire(w, &w->nobody, p);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 50);
    (void)lease;
    policy(NULL);
}

static unsigned cap_of(struct world *w, int j)
{
    return atomic_load(&w->g->s.f->jobs[j].cap);
}

/* Fair shares count users, not jobs: nobody's four uncapped jobs share one half of the GPU, and
 * root's one uncapped job gets the other (before: a fifth each, nobody's four fifths). */
/* `vgpu run --priority high` without --core: an uncapped job's entry. */
static int uncapped(struct world *w, struct arb_client *c, uint64_t key)
{
    return (int)call(w, c, VGPU_ARB_JOB, -1, key, 0, 0, VGPU_PRIO_HIGH).rc;
}

static void test_fair_share_per_user(void **state)
{
    struct world *w = *state;
    policy(NULL);   /* --priority high: granted to root, not to nobody; either way held to a fair share */
    int rj = uncapped(w, &w->root, 0x726f6f74);
    int rp = attach(w, &w->root, rj);
    assert_true(rp >= 0);
    int nj[4];
    for (int i = 0; i < 4; i++) {
        nj[i] = uncapped(w, &w->nobody, 0x6e6f626f + (uint64_t)i);
        assert_true(nj[i] >= 0);
        assert_true(attach(w, &w->nobody, nj[i]) >= 0);
    }
    for (int i = 0; i < 4; i++)
        uncapped(w, &w->nobody, 0x6e6f626f + (uint64_t)i);   /* each asks again at its next turn */
    acquire(w, &w->root, rp);                               /* root's share is written at its turn */
    assert_int_equal(cap_of(w, rj), 50);
    for (int i = 0; i < 4; i++)
        assert_int_equal(cap_of(w, nj[i]), 12);
    /* A subordinate uid of nobody's would count as nobody: here another user is a share of its
     * own, the three logins a third each, nobody's four jobs a quarter of its third. */
    struct arb_client other = { .fd = -1, .id = 6, .pid = 1, .uid = 1234, .opened = { true } };
    int oj = uncapped(w, &other, 0x6f746865);
    assert_true(attach(w, &other, oj) >= 0);
    assert_int_equal(cap_of(w, uncapped(w, &other, 0x6f746865)), 33);
    assert_int_equal(cap_of(w, uncapped(w, &w->nobody, 0x6e6f626f)), 8);
}

static void test_high_granted_to_group(void **state)
{
    struct world *w = *state;
    policy("priority-high-groups nogroup\n");
    int j = (int)call(w, &w->nobody, VGPU_ARB_JOB, -1, 0x6e6f626f, 20, 0, VGPU_PRIO_HIGH).rc;
    assert_int_equal(prio_of(w, j), VGPU_PRIO_HIGH);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 20);   /* its own cap holds */
    policy(NULL);
}

static void test_default_priority_low(void **state)
{
    struct world *w = *state;
    policy("priority-default low\n");
    int j = job(w, &w->nobody, 0x6e6f626f, 30);
    assert_int_equal(prio_of(w, j), VGPU_PRIO_LOW);
    assert_int_equal(prio_of(w, root_core30(w)), VGPU_PRIO_NORMAL);   /* root's word holds */
    policy(NULL);
}

/* Issue 36 row L21: a key given twice is an error naming both lines, never "the last wins". */
static void test_policy_key_twice(void **state)
{
    (void)state;
    policy("priority-default low\npriority-default normal\n");
    struct vgpu_policy p;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_policy_read(&p, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_STATE);
    assert_non_null(strstr(e.msg, "given twice (lines 1 and 2)"));
    policy("priority-high-users nobody,,root\n");
    assert_int_equal(vgpu_policy_read(&p, &e), -1);
    policy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_release_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_clock_believed_within_skew, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach_charged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_closed_connection_charged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_revoke_charged_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempted_never_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempted_charged_to_preemption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_draining_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_draining_believed_within_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach_attach_forfeits_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reconnect_forfeits_credit_keeps_debt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaving_process_of_live_job_keeps_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_key_keeps_ended_jobs_debt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_key_no_fresh_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_job_quota_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_silent_requests_no_effect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drained_only_from_preempted_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_draining_old_lease_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_not_granted_without_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_granted_within_fair_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_share_per_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_granted_to_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_priority_low, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_key_twice, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
