/* The fuzz_sched findings (tests/fuzz/findings/fuzz_sched-*): a job's credit in the shared
 * scheduler segment is whatever its writer put there, and a credit near INT64_MAX or INT64_MIN
 * made the arithmetic of credit accrual and eligibility overflow (signed overflow, caught by
 * UBSan: `make asan` runs this test with it, and it aborted there on the sched.c of the time).
 * The readers now clamp what they read; this replays the findings through the file, as every
 * capped process reads it, and checks that what comes out stays sane. */
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

static void replay(int64_t credit, uint64_t credit_t, uint32_t cap)
{
    char path[] = "/tmp/vgpu-test-fuzz-sched.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_sched s;
    struct vgpu_err e;
    assert_int_equal(vgpu_sched_open_path(&s, path, &e), 0);
    uint64_t now = 60ULL * 1000000000ULL;
    int job = vgpu_sched_job(&s, 0x1234, 30, false, 0, now);
    assert_true(job >= 0);
    int proc = vgpu_sched_attach(&s, (unsigned)job, getpid(), 1);
    assert_true(proc >= 0);
    /* What a hostile or damaged writer leaves. */
    atomic_store(&s.f->jobs[job].credit, credit);
    atomic_store(&s.f->jobs[job].credit_t, credit_t);
    atomic_store(&s.f->jobs[job].cap, cap);
    uint64_t lease = 0, end = 0;
    bool got = false;
    for (int i = 0; i < 4 && !got; i++, now += 20000000ULL)
        got = vgpu_sched_try_acquire(&s, proc, now, &lease, &end);
    if (got) {
        assert_true(end > now - 20000000ULL);
        (void)vgpu_sched_release(&s, lease, 1000000, now);
    } else {
        /* Not granted: the wait it asks for stays short (a few ms), whatever the file said. */
        assert_true(vgpu_sched_retry_in(&s, proc, now) <= 100ULL * 1000000ULL);
    }
    vgpu_sched_unwant(&s, proc);
    vgpu_sched_detach(&s, proc);
    vgpu_sched_close(&s);
    unlink(path);
}

static void test_credit_near_max(void **state)
{
    (void)state;
    replay(INT64_MAX - 1000, 0, 30);
    replay(INT64_MAX, 0, UINT32_MAX);
}

static void test_credit_near_min(void **state)
{
    (void)state;
    replay(INT64_MIN, 0, 30);
    replay(INT64_MIN + 1, UINT64_MAX, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credit_near_max),
        cmocka_unit_test(test_credit_near_min),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
