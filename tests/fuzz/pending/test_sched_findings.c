/* The fuzz_sched findings (tests/fuzz/findings/fuzz_sched-*), as unit tests. lib/core/sched.c
 * belongs to the lead engineer, who is hardening it: these fail on sched.c as it is (signed
 * overflow on credits read from the shared file), so the file waits here, outside the Makefile's
 * tests/unit/test_*.c, to move to tests/unit/ with the fix. The first fails in any build; the
 * second only under UBSan (make asan), where the overflow itself stops the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/sched.h"

/* fuzz_sched: a job's credit in the shared scheduler file is whatever the file says. A credit
 * near INT64_MAX plus the time accrued since overflowed (signed overflow: undefined; in practice
 * a huge negative credit that starves the job, or, the other way round, a debt that wraps to a
 * huge credit). The credit a reader derives must stay within [what the file says, the burst]. */
static void test_sched_credit_overflow(void **state)
{
    (void)state;
    unsigned cap = 100;
    int64_t burst = (int64_t)(2 * vgpu_sched_quantum(cap));
    uint64_t now = 60ULL * 1000000000ULL;
    assert_int_equal(vgpu_sched_credit_at(INT64_MAX - 1000, 0, cap, now), burst);
    assert_int_equal(vgpu_sched_credit_at(INT64_MAX, 0, cap, now), burst);
    int64_t low = vgpu_sched_credit_at(INT64_MIN, 0, cap, now);
    assert_true(low <= burst && low < 0);
    /* A cap from the file beyond 100 accrues no faster than 100. */
    assert_true(vgpu_sched_credit_at(0, 0, UINT32_MAX, now) <= (int64_t)(2 * vgpu_sched_quantum(100)));
}

/* fuzz_sched: eligible_at computed q - credit with a credit near INT64_MIN from the file (signed
 * overflow), and (q - credit) * 100 / cap can wrap: the job would become eligible at a bogus time.
 * A debt is bounded (vgpu_sched_charge keeps it above -40 periods), so a time more than that far
 * ahead is never right. */
static void test_sched_eligible_overflow(void **state)
{
    (void)state;
    uint64_t t = 5ULL * 1000000000ULL;
    uint64_t at = vgpu_sched_eligible_at(INT64_MIN, t, 30);
    assert_true(at >= t);
    assert_true(at - t <= 100ULL * 1000000000ULL);
    at = vgpu_sched_eligible_at(INT64_MIN + 1, t, 1);
    assert_true(at >= t && at != UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sched_credit_overflow),
        cmocka_unit_test(test_sched_eligible_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
