/* The machine-wide schedule (lib/core/sched/sched.c): preemption and yield requests, the preemptor's
 * claim on the next lease, reads that survive garbage written by another user, and the System V
 * segment's life (one per GPU and machine directory, removed by its last user). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sched.h>
#include <signal.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "vgpu/machinedir.h"
#include "vgpu/proc.h"
#include "vgpu/sched.h"

#define MS 1000000ULL
#define Q(cap) ((int64_t)vgpu_sched_quantum(cap))

struct two {
    struct vgpu_sched s;
    char path[64];
    int ja, jb, pa, pb;
};

/* A file-backed schedule with job A (cap 70, priority pa_prio) holding the lease and job B
 * (cap 30, priority pb_prio) with `credit_b`. */
static void setup_two(struct two *t, int a_prio, int b_prio, int64_t credit_b, uint64_t now)
{
    snprintf(t->path, sizeof t->path, "/tmp/vgpu-test-sched2.XXXXXX");
    int fd = mkstemp(t->path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(&t->s, t->path, &e), 0);
    t->ja = vgpu_sched_job(&t->s, 1, 70, false, a_prio, now);
    t->jb = vgpu_sched_job(&t->s, 2, 30, false, b_prio, now);
    t->pa = vgpu_sched_attach(&t->s, (unsigned)t->ja, getpid(), 1);
    t->pb = vgpu_sched_attach(&t->s, (unsigned)t->jb, getpid(), 2);
    assert_true(t->pa >= 0 && t->pb >= 0);
    uint64_t lease, end;
    assert_true(vgpu_sched_try_acquire(&t->s, t->pa, now, &lease, &end));
    assert_int_equal(end, now + (uint64_t)Q(70));
    atomic_store(&t->s.f->jobs[t->jb].credit, credit_b);
    atomic_store(&t->s.f->jobs[t->jb].credit_t, now);
    /* B competes for the GPU: its last lease ran out, long ago. (A process's first work, or work
     * after a lease given back idle, is a request: test_sched.c, test_request_preempts.) */
    vgpu_sched_note_end(&t->s, t->pb, true, now > 1000 * MS ? now - 1000 * MS : 0);
}

static void teardown_two(struct two *t)
{
    vgpu_sched_close(&t->s);
    unlink(t->path);
}

static void test_idle_waiter_preempts(void **state)
{
    (void)state;
    /* B has used less than its cap (credit at its burst): it takes the lease from A at once. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, 2 * Q(30), now);
    uint64_t a_lease = atomic_load(&t.s.f->lease);
    uint32_t yseq = atomic_load(&t.s.f->yield_seq);
    assert_true(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_int_equal(vgpu_lease_holder(lease), (unsigned)t.pb + 1);
    assert_true(vgpu_lease_gen(lease) > vgpu_lease_gen(a_lease));
    assert_int_equal(end, now + MS + 2 * (uint64_t)Q(30));   /* a lease of its credit */
    assert_int_equal(vgpu_sched_deadline(&t.s, a_lease), 0);  /* A's lease reads as over */
    assert_int_equal(vgpu_sched_deadline(&t.s, lease), end);
    assert_true(atomic_load(&t.s.f->yield_seq) != yseq);    /* the holder's helper is woken */
    assert_int_equal(atomic_load(&t.s.f->preemptions), 1);
    /* While A drains, B's lease shares the GPU with A's queued work: half of it is B's while B
     * has work, none of it while B has none. */
    uint64_t ov = vgpu_sched_overlap_mark(&t.s);
    assert_true(vgpu_sched_overlapping(&t.s, now + 2 * MS));
    assert_int_equal(vgpu_sched_used_overlapped(now + MS, ov, 0, 2 * MS, now + 3 * MS), MS);   /* half */
    assert_int_equal(vgpu_sched_preempted_at(&t.s, now - 5 * MS, now + 3 * MS), now + MS);
    /* A new grant is busy from its start. */
    assert_int_equal(vgpu_sched_preemptor_busy(&t.s, now + MS, now + 3 * MS), 2 * MS);
    /* B's request was done 1 ms after it preempted: it says so; A drains until +3 ms and is
     * charged its lease and the overlap but the half B had work in. */
    vgpu_sched_note_busy(&t.s, lease, MS, 0);
    vgpu_sched_note_busy(&t.s, a_lease, 0, now + MS);   /* not the holder: ignored */
    uint64_t busy = vgpu_sched_preemptor_busy(&t.s, now + MS, now + 3 * MS);
    assert_int_equal(busy, MS);
    assert_int_equal(vgpu_sched_used_preempted(now - 5 * MS, now + MS, busy, now + 3 * MS), 8 * MS - MS / 2);
    /* Busy again from +2.5 ms: 1 ms closed and 0.5 open at +3 ms. */
    vgpu_sched_note_busy(&t.s, lease, MS, now + 2 * MS + MS / 2);
    assert_int_equal(vgpu_sched_preemptor_busy(&t.s, now + MS, now + 3 * MS), MS + MS / 2);
    /* A drains and gives its lease back: the release reports it gone, and charges A all the same. */
    assert_false(vgpu_sched_release(&t.s, a_lease, 3 * MS, now + 3 * MS));
    assert_int_equal(atomic_load(&t.s.f->jobs[t.ja].used_ns), 3 * MS);
    assert_int_equal(vgpu_lease_holder(atomic_load(&t.s.f->lease)), (unsigned)t.pb + 1);
    vgpu_sched_drained(&t.s, now + 3 * MS);
    assert_false(vgpu_sched_overlapping(&t.s, now + 3 * MS));
    assert_int_equal(vgpu_sched_overlap_mark(&t.s), now + 3 * MS);
    /* Garbage in the busy fields reads as busy throughout (the holder pays half, as before). */
    atomic_store(&t.s.f->holder_busy_from, now + 9 * MS);
    assert_int_equal(vgpu_sched_preemptor_busy(&t.s, now + MS, now + 3 * MS), 2 * MS);
    atomic_store(&t.s.f->holder_busy_from, 0);
    atomic_store(&t.s.f->holder_busy_ns, UINT64_MAX);
    assert_int_equal(vgpu_sched_preemptor_busy(&t.s, now + MS, now + 3 * MS), 2 * MS);
    /* A mark too far ahead (garbage, or a holder that never drained) is not believed. */
    atomic_store(&t.s.f->overlap_until, now + 2 * MS + VGPU_SCHED_OVERLAP_NS + 1);
    assert_false(vgpu_sched_overlapping(&t.s, now + 2 * MS));
    /* A asks again while B holds: A is not at its burst, so it only asks. */
    assert_false(vgpu_sched_try_acquire(&t.s, t.pa, now + 4 * MS, &lease, &end));
    assert_true(vgpu_sched_wanted(&t.s, now + 3 * MS));
    teardown_two(&t);
}

static void test_saturating_waiter_only_asks(void **state)
{
    (void)state;
    /* B was already waiting when A's lease was granted (a saturating job held to its cap, not a
     * request that just arrived): even with its credit at the burst it only asks, and A's
     * deadline stands. Before, it took the lease, and two saturating jobs took it from each
     * other at every turn. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    snprintf(t.path, sizeof t.path, "/tmp/vgpu-test-sched2.XXXXXX");
    int fd = mkstemp(t.path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(&t.s, t.path, &e), 0);
    t.ja = vgpu_sched_job(&t.s, 1, 70, false, 0, now);
    t.jb = vgpu_sched_job(&t.s, 2, 30, false, 0, now);
    t.pa = vgpu_sched_attach(&t.s, (unsigned)t.ja, getpid(), 1);
    t.pb = vgpu_sched_attach(&t.s, (unsigned)t.jb, getpid(), 2);
    atomic_store(&t.s.f->jobs[t.jb].credit, -(int64_t)(5 * MS));   /* B is in debt: A is picked */
    atomic_store(&t.s.f->jobs[t.jb].credit_t, now);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now, &lease, &end));        /* B waits from now */
    assert_true(vgpu_sched_try_acquire(&t.s, t.pa, now + MS, &lease, &end));    /* A is granted after */
    uint64_t a_lease = lease;
    atomic_store(&t.s.f->jobs[t.jb].credit, 2 * Q(30));                       /* B reaches its burst */
    atomic_store(&t.s.f->jobs[t.jb].credit_t, now + 2 * MS);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + 2 * MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->preemptions), 0);
    assert_int_equal(atomic_load(&t.s.f->lease), a_lease);
    assert_true(vgpu_sched_wanted(&t.s, now + MS));                             /* it asked */
    teardown_two(&t);
}

static void test_lease_ran_out_is_not_new_work(void **state)
{
    (void)state;
    /* B's last lease ran out and B wants again at once (it had work throughout: saturating),
     * although after A's grant: it only asks. Had B given its lease back idle, the same want is
     * a request that arrived, and B (credit at its burst) preempts. */
    for (int held_out = 1; held_out >= 0; held_out--) {
        struct two t;
        uint64_t now = 1000 * MS, lease, end;
        setup_two(&t, 0, 0, 2 * Q(30), now);
        vgpu_sched_note_end(&t.s, t.pb, held_out, now + MS / 2);
        atomic_store(&t.s.f->jobs[t.jb].credit_t, now + MS);
        bool took = vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end);
        assert_int_equal(took, !held_out);
        assert_int_equal(atomic_load(&t.s.f->preemptions), held_out ? 0 : 1);
        teardown_two(&t);
    }
}

static void test_draining_holder_is_not_revoked(void **state)
{
    (void)state;
    /* A past its deadline + grace but draining (its kernels are long): B waits for it instead of
     * revoking the lease; once A releases, the mark no longer exempts anyone. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, 0, now);   /* entitled by then (accrued), not near its burst: no preemption */
    uint64_t a_lease = atomic_load(&t.s.f->lease);
    uint64_t late = now + (uint64_t)Q(70) + VGPU_SCHED_GRACE_NS + MS;
    vgpu_sched_draining(&t.s, a_lease, late - 10 * MS);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, late, &lease, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&t.s.f->lease)), vgpu_lease_holder(a_lease));
    assert_true(vgpu_sched_release(&t.s, a_lease, 10 * MS, late + MS));
    assert_int_equal(atomic_load(&t.s.f->overlap_until), late + MS);
    assert_false(vgpu_sched_overlapping(&t.s, late + 2 * MS));
    teardown_two(&t);
    /* Without the mark, or with one too far ahead, the overdue lease is revoked. */
    setup_two(&t, 0, 0, 0, now);   /* entitled by then (accrued), not near its burst: no preemption */
    a_lease = atomic_load(&t.s.f->lease);
    atomic_store(&t.s.f->overlap_until, late + VGPU_SCHED_OVERLAP_NS + MS);
    (void)vgpu_sched_try_acquire(&t.s, t.pb, late, &lease, &end);
    assert_true(atomic_load(&t.s.f->lease) != a_lease);
    teardown_two(&t);
}

static void test_busy_waiter_only_asks(void **state)
{
    (void)state;
    /* B is entitled (one quantum) but not below its cap lately: it asks A to yield once idle,
     * and A's deadline stands. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, Q(30), now);
    uint64_t deadline = atomic_load(&t.s.f->lease_end);
    assert_false(vgpu_sched_wanted(&t.s, now));
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    assert_int_equal(atomic_load(&t.s.f->preemptions), 0);
    assert_true(vgpu_sched_wanted(&t.s, now));
    /* a waiter that is not entitled at all asks too (idle lease time is lost to everyone) */
    atomic_store(&t.s.f->want_ns, 0);
    atomic_store(&t.s.f->jobs[t.jb].credit, -(int64_t)(10 * MS));
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + 2 * MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    assert_true(vgpu_sched_wanted(&t.s, now));
    teardown_two(&t);
}

static void test_priority_preempts(void **state)
{
    (void)state;
    /* High priority preempts a normal holder as soon as it is entitled, whatever its credit... */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, VGPU_PRIO_NORMAL, VGPU_PRIO_HIGH, Q(30), now);
    assert_true(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_true(end >= now + MS + (uint64_t)Q(30) && end <= now + MS + (uint64_t)Q(30) + MS);
    teardown_two(&t);
    /* ...but never before it is entitled: its cap still holds. */
    setup_two(&t, VGPU_PRIO_NORMAL, VGPU_PRIO_HIGH, Q(30) / 2, now);
    uint64_t deadline = atomic_load(&t.s.f->lease_end);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    teardown_two(&t);
    /* Low priority never preempts normal, even with full credit... it only asks. */
    setup_two(&t, VGPU_PRIO_NORMAL, VGPU_PRIO_LOW, Q(30) + Q(30) / 4, now);
    deadline = atomic_load(&t.s.f->lease_end);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    teardown_two(&t);
}

static void test_both_under_cap_take_turns(void **state)
{
    (void)state;
    /* Caps adding up to more than 100 %: the holder is under its cap too (credit at its burst),
     * so the waiter only asks; no lease is taken at every turn. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, 2 * Q(30), now);
    atomic_store(&t.s.f->jobs[t.ja].credit, 2 * Q(70));
    atomic_store(&t.s.f->jobs[t.ja].credit_t, now);
    uint64_t deadline = atomic_load(&t.s.f->lease_end);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    assert_int_equal(atomic_load(&t.s.f->preemptions), 0);
    assert_true(vgpu_sched_wanted(&t.s, now));
    /* once the holder has used its lease down below one and a half quanta, it may be preempted */
    assert_true(vgpu_sched_try_acquire(&t.s, t.pb, now + (uint64_t)Q(70), &lease, &end));
    teardown_two(&t);
}

static void test_same_job_never_preempts(void **state)
{
    (void)state;
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, 2 * Q(30), now);
    int pa2 = vgpu_sched_attach(&t.s, (unsigned)t.ja, getpid(), 3);
    atomic_store(&t.s.f->jobs[t.ja].credit, 2 * Q(70));
    uint64_t deadline = atomic_load(&t.s.f->lease_end);
    assert_false(vgpu_sched_try_acquire(&t.s, pa2, now + MS, &lease, &end));
    assert_int_equal(atomic_load(&t.s.f->lease_end), deadline);
    assert_false(vgpu_sched_wanted(&t.s, now));
    teardown_two(&t);
}

static void test_garbage_is_bounded(void **state)
{
    (void)state;
    /* What a hostile user may write into the shared schedule: a deadline far away, an absurd
     * cap and credit, job and holder indexes out of range. Nothing crashes; a lease no valid
     * grant could have made is revoked at once; values are clamped. */
    struct two t;
    uint64_t now = 1000 * MS, lease, end;
    setup_two(&t, 0, 0, 0, now);
    uint64_t a_lease = atomic_load(&t.s.f->lease);
    atomic_store(&t.s.f->lease_end, UINT64_MAX - 5);
    assert_int_equal(vgpu_sched_deadline(&t.s, a_lease), 0);
    atomic_store(&t.s.f->jobs[t.jb].cap, 5000);
    atomic_store(&t.s.f->jobs[t.jb].credit, INT64_MAX);
    atomic_store(&t.s.f->jobs[t.jb].credit_t, UINT64_MAX);
    atomic_store(&t.s.f->jobs[t.jb].prio, 77);
    assert_true(vgpu_sched_try_acquire(&t.s, t.pb, now + MS, &lease, &end));
    assert_true(end - (now + MS) <= VGPU_SCHED_MAX_LEASE_NS);
    /* the job's entry is repaired by its own process at its next turn */
    vgpu_sched_job(&t.s, 2, 30, false, 0, now + 2 * MS);
    assert_int_equal(atomic_load(&t.s.f->jobs[t.jb].cap), 30);
    assert_true(atomic_load(&t.s.f->jobs[t.jb].credit) <= 2 * Q(30));
    assert_true(atomic_load(&t.s.f->jobs[t.jb].credit_t) <= now + 2 * MS);
    /* a holder index out of range, a job index out of range */
    atomic_store(&t.s.f->lease, ((uint64_t)9 << 16) | 0xfff0);
    atomic_store(&t.s.f->procs[t.pa].job, 9999);
    assert_false(vgpu_sched_try_acquire(&t.s, t.pa, now + 3 * MS, &lease, &end));
    assert_int_equal(vgpu_lease_holder(atomic_load(&t.s.f->lease)), 0);   /* revoked */
    assert_true(vgpu_sched_retry_in(&t.s, t.pa, now + 3 * MS) <= 5 * MS);
    atomic_store(&t.s.f->procs[t.pa].job, (uint32_t)t.ja);
    assert_true(vgpu_sched_try_acquire(&t.s, t.pa, now + 4 * MS, &lease, &end));
    teardown_two(&t);
}

static void test_segment_life(void **state)
{
    (void)state;
    const char *uuid = "GPU-00000000-1111-2222-3333-444444444444";
    int key = vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid(), 0);
    assert_true(key != IPC_PRIVATE);
    assert_true(vgpu_sched_key("/other/dir", uuid, (unsigned)geteuid(), 0) != key);
    /* each user has a schedule of its own when no arbiter runs */
    assert_true(vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid() + 1, 0) != key);
    assert_true(vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid(), 1) != key);
    struct vgpu_sched a, b;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open(&a, uuid, &e), 0);
    assert_int_equal(vgpu_sched_open(&b, uuid, &e), 0);
    int j = vgpu_sched_job(&a, 7, 50, false, 0, 1);
    assert_int_equal(vgpu_sched_job(&b, 7, 50, false, 0, 1), j);   /* one schedule */
    int p = vgpu_sched_attach(&a, (unsigned)j, getpid(), 0);
    assert_true(p >= 0);
    vgpu_sched_close(&b);   /* a process is still in it: kept */
    assert_true(shmget(key, 0, 0) >= 0);
    vgpu_sched_detach(&a, p);
    vgpu_sched_close(&a);   /* the last one: removed */
    assert_true(shmget(key, 0, 0) < 0);
    /* a schedule left behind (its last user could not remove it) is swept by a reader */
    assert_int_equal(vgpu_sched_open(&a, uuid, &e), 0);
    int j2 = vgpu_sched_job(&a, 8, 50, false, 0, 1);
    assert_true(vgpu_sched_attach(&a, (unsigned)j2, 999999, 1) >= 0);   /* a process long dead */
    shmdt(a.f);                                                          /* left without retiring */
    assert_true(shmget(key, 0, 0) >= 0);
    assert_int_equal(vgpu_sched_sweep(), 1);
    assert_true(shmget(key, 0, 0) < 0);
    /* A segment under our key that is not ours alone (another size, or open to others: another
     * user made it first, to steer our jobs) is passed over for the next key. */
    int id = shmget(key, 100, IPC_CREAT | IPC_EXCL | 0666);
    assert_true(id >= 0);
    assert_int_equal(vgpu_sched_open(&a, uuid, &e), 0);
    assert_true(a.shmid != id);
    assert_int_equal(a.shmid, shmget(vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid(), 1), 0, 0));
    vgpu_sched_close(&a);
    shmctl(id, IPC_RMID, NULL);
    /* with every key taken, it is refused, saying what to do */
    int ids[VGPU_SCHED_KEY_ATTEMPTS];
    for (unsigned i = 0; i < VGPU_SCHED_KEY_ATTEMPTS; i++)
        ids[i] = shmget(vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid(), i),
                        sizeof(struct vgpu_sched_file), IPC_CREAT | IPC_EXCL | 0644);
    assert_int_equal(vgpu_sched_open(&a, uuid, &e), -1);
    assert_non_null(strstr(e.msg, "ipcrm -m"));
    assert_non_null(strstr(e.msg, "vgpu daemon"));
    for (unsigned i = 0; i < VGPU_SCHED_KEY_ATTEMPTS; i++)
        shmctl(ids[i], IPC_RMID, NULL);
}

/* A process of the schedule in another PID namespace (vgpu run -- unshare -pf PROG) that has not
 * polled for minutes is alive all the same: judged in its namespace, its entry is kept (before,
 * any entry of another namespace silent for 60 s was freed, and its index given to the next
 * process). Once it is dead, the entry goes. Needs root (a new PID namespace). */
static void test_other_pidns_entry(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {   /* a new PID namespace; its first child is pid 1 there and waits */
        if (unshare(CLONE_NEWPID) != 0)
            _exit(3);
        pid_t in = fork();
        if (in < 0)
            _exit(4);
        if (in == 0) {
            char c;
            close(go[1]);
            (void)!read(go[0], &c, 1);
            _exit(0);
        }
        close(go[0]);
        close(go[1]);   /* only the parent holds the write end: closing it ends the child */
        int st;
        waitpid(in, &st, 0);
        _exit(0);
    }
    close(go[0]);
    /* The namespaced process: mid's only child. */
    pid_t inner = 0;
    for (int tries = 0; tries < 200 && !inner; tries++) {
        char path[64], buf[256];
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)mid, (int)mid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(buf, sizeof buf, f))
                inner = (pid_t)atoi(buf);
            fclose(f);
        }
        if (!inner)
            usleep(10000);
    }
    if (!inner) {   /* no new PID namespace here (a container without the capability) */
        close(go[1]);
        waitpid(mid, NULL, 0);
        skip();
        return;
    }
    uint32_t ns = vgpu_proc_pidns(inner);
    uint64_t start = vgpu_proc_start_time(inner);
    assert_true(ns != 0 && ns != vgpu_proc_pidns(0) && start != 0);

    const char *uuid = "GPU-00000000-1111-2222-3333-555555555555";
    struct vgpu_sched a;
    struct vgpu_err e = { 0 };
    int key = vgpu_sched_key(vgpu_machinedir_path(), uuid, (unsigned)geteuid(), 0);
    assert_int_equal(vgpu_sched_open(&a, uuid, &e), 0);
    int j = vgpu_sched_job(&a, 9, 50, false, 0, 1);
    int p = vgpu_sched_attach(&a, (unsigned)j, 1, start);   /* pid 1 in its own namespace */
    assert_true(p >= 0);
    atomic_store(&a.f->procs[p].pidns, (uint64_t)ns);
    atomic_store(&a.f->procs[p].polled, 1);                 /* silent since boot */
    shmdt(a.f);                                             /* as a reader that is not in it */
    assert_int_equal(vgpu_sched_sweep(), 0);                /* alive in its namespace: kept */
    assert_true(shmget(key, 0, 0) >= 0);
    close(go[1]);                                           /* it ends */
    int st;
    assert_int_equal(waitpid(mid, &st, 0), mid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(vgpu_sched_sweep(), 1);                /* dead (or unseen and silent): freed */
    assert_true(shmget(key, 0, 0) < 0);
}

/* Uncapped classes (vgpu/sched.h, "Uncapped priority classes"; the recipe of issue 27): a service
 * (cap 0, high) and background (cap 0, low) beside a capped job of low priority. */
static void test_uncapped_classes(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/vgpu-test-sched3.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_sched s;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_open_path(&s, path, &e), 0);
    uint64_t now = 1000 * MS, lease, end, ls, lb, lc;
    int js = vgpu_sched_job(&s, 1, 0, false, VGPU_PRIO_HIGH, now);
    int jb = vgpu_sched_job(&s, 2, 0, false, VGPU_PRIO_LOW, now);
    int jc = vgpu_sched_job(&s, 3, 30, false, VGPU_PRIO_LOW, now);   /* capped, low priority too */
    assert_true(js >= 0 && jb >= 0 && jc >= 0);
    assert_int_equal(atomic_load(&s.f->jobs[jb].soft), VGPU_SCHED_SOFT | VGPU_SCHED_UNCAPPED);
    assert_int_equal(atomic_load(&s.f->jobs[jc].soft), 0);
    /* Cap 0 at normal priority is no class: it reads as 100. */
    int jn = vgpu_sched_job(&s, 4, 0, false, VGPU_PRIO_NORMAL, now);
    assert_int_equal(atomic_load(&s.f->jobs[jn].soft), 0);
    assert_int_equal(atomic_load(&s.f->jobs[jn].cap), 100);
    int ps = vgpu_sched_attach(&s, (unsigned)js, getpid(), 1);
    int pb = vgpu_sched_attach(&s, (unsigned)jb, getpid(), 2);
    int pc = vgpu_sched_attach(&s, (unsigned)jc, getpid(), 3);
    assert_true(ps >= 0 && pb >= 0 && pc >= 0);

    /* Background alone takes a free GPU, on a borrowed turn. */
    assert_true(vgpu_sched_try_acquire(&s, pb, now, &lb, &end));
    assert_int_equal(atomic_load(&s.f->borrowed), 1);
    /* The service preempts it at once. */
    assert_true(vgpu_sched_try_acquire(&s, ps, now + MS, &ls, &end));
    assert_true(end >= now + MS + 2 * (uint64_t)Q(100) - MS);   /* as long as anyone's */
    vgpu_sched_release(&s, lb, MS, now + 2 * MS);   /* background drained: its release finds the lease gone */
    /* Background never preempts the service, however long it waited: it only asks. */
    uint64_t deadline = atomic_load(&s.f->lease_end);
    assert_false(vgpu_sched_try_acquire(&s, pb, now + 3 * MS, &lease, &end));
    assert_int_equal(atomic_load(&s.f->lease_end), deadline);
    assert_true(vgpu_sched_wanted(&s, now + 2 * MS));
    /* The service owes nothing, whatever it used. */
    assert_true(vgpu_sched_release(&s, ls, 90 * MS, now + 91 * MS));
    assert_int_equal(atomic_load(&s.f->jobs[js].credit), 2 * Q(100));
    /* An entitled capped job is served before background on a free lease... */
    vgpu_sched_want_from(&s, pc, now + 92 * MS);
    atomic_store(&s.f->procs[pc].polled, now + 92 * MS);   /* it is looking too */
    assert_false(vgpu_sched_try_acquire(&s, pb, now + 92 * MS, &lease, &end));
    assert_true(vgpu_sched_try_acquire(&s, pc, now + 92 * MS, &lc, &end));
    /* ... background does not preempt it ... */
    assert_false(vgpu_sched_try_acquire(&s, pb, now + 93 * MS, &lease, &end));
    assert_true(vgpu_sched_release(&s, lc, 5 * MS, now + 97 * MS));
    /* ... and preempts background at once while entitled, though of the same priority and
     * saturating (its last turn ran out: it would only ask a capped holder). */
    vgpu_sched_unwant(&s, pc);
    vgpu_sched_note_end(&s, pc, true, now + 97 * MS);
    atomic_store(&s.f->jobs[jc].credit, Q(30));
    atomic_store(&s.f->jobs[jc].credit_t, now + 98 * MS);
    assert_true(vgpu_sched_try_acquire(&s, pb, now + 98 * MS, &lb, &end));
    assert_int_equal(atomic_load(&s.f->borrowed), 1);
    assert_true(vgpu_sched_try_acquire(&s, pc, now + 98 * MS + 100, &lc, &end));
    vgpu_sched_release(&s, lb, MS, now + 99 * MS);
    assert_true(vgpu_sched_release(&s, lc, MS, now + 100 * MS));
    /* Background holding keeps clear of the service's expected request (2 ms ahead, 10 ms
     * apart), which a capped low job at its burst would not (it would lose what it is owed). */
    uint64_t t = now + 200 * MS;
    vgpu_sched_unwant(&s, pc);
    assert_true(vgpu_sched_try_acquire(&s, pb, t, &lb, &end));
    vgpu_sched_note_end(&s, ps, false, t - 8 * MS);   /* the service gave its last turn back idle */
    vgpu_sched_expect(&s, ps, t + 2 * MS, 10 * MS, 0);
    assert_true(vgpu_sched_keep_clear(&s, pb, t, 3 * MS, MS) > t);
    assert_int_equal(vgpu_sched_keep_clear(&s, pb, t, MS, MS / 2), 0);   /* ends in time */
    vgpu_sched_close(&s);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_waiter_preempts),
        cmocka_unit_test(test_busy_waiter_only_asks),
        cmocka_unit_test(test_saturating_waiter_only_asks),
        cmocka_unit_test(test_draining_holder_is_not_revoked),
        cmocka_unit_test(test_lease_ran_out_is_not_new_work),
        cmocka_unit_test(test_priority_preempts),
        cmocka_unit_test(test_uncapped_classes),
        cmocka_unit_test(test_both_under_cap_take_turns),
        cmocka_unit_test(test_same_job_never_preempts),
        cmocka_unit_test(test_garbage_is_bounded),
        cmocka_unit_test(test_segment_life),
        cmocka_unit_test(test_other_pidns_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
