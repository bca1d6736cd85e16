/* The memory watch's decision and record (lib/core/region/overlimit.c): when a job over its limit
 * is acted on, how often, and what vgpu ps reads back. The signals and NVML: tests/cli/overlimit.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/overlimit.h"

#define MS 1000000ULL

static void test_due_needs_two_samples_over_two_seconds(void **state)
{
    (void)state;
    struct vgpu_overlimit_dev d = { 0 };
    assert_false(vgpu_overlimit_due(&d, true, 1000 * MS));        /* first sample over */
    assert_false(vgpu_overlimit_due(&d, true, 1500 * MS));
    assert_false(vgpu_overlimit_due(&d, true, 2999 * MS));        /* 1.999 s: not yet */
    assert_true(vgpu_overlimit_due(&d, true, 3000 * MS));         /* 2 s, 4 samples */
    assert_false(vgpu_overlimit_due(&d, true, 3500 * MS));        /* once per episode */
    assert_false(vgpu_overlimit_due(&d, true, 9000 * MS));
    assert_false(vgpu_overlimit_due(&d, false, 9500 * MS));       /* under: the episode ends */
    assert_false(vgpu_overlimit_due(&d, true, 10000 * MS));       /* a new one starts */
    assert_true(vgpu_overlimit_due(&d, true, 12000 * MS));
}

static void test_due_one_late_sample_is_not_enough(void **state)
{
    (void)state;
    struct vgpu_overlimit_dev d = { 0 };
    /* One sample, however long ago the grace would have started: two are needed. */
    assert_false(vgpu_overlimit_due(&d, true, 5000 * MS));
    /* A dip under the limit restarts the clock. */
    assert_false(vgpu_overlimit_due(&d, true, 6000 * MS));
    assert_false(vgpu_overlimit_due(&d, false, 6500 * MS));
    assert_false(vgpu_overlimit_due(&d, true, 7000 * MS));
    assert_false(vgpu_overlimit_due(&d, true, 8500 * MS));
    assert_true(vgpu_overlimit_due(&d, true, 9000 * MS));
}

static void test_slack(void **state)
{
    (void)state;
    assert_int_equal(vgpu_overlimit_slack(1ULL << 30), 64ULL << 20);           /* 5% of 1 GiB is less */
    assert_int_equal(vgpu_overlimit_slack(80ULL << 30), (80ULL << 30) / 20);   /* 4 GiB */
}

static void test_words(void **state)
{
    (void)state;
    assert_int_equal(vgpu_overlimit_policy_parse("kill"), VGPU_OVERLIMIT_KILL);
    assert_int_equal(vgpu_overlimit_policy_parse("stop"), VGPU_OVERLIMIT_STOP);
    assert_int_equal(vgpu_overlimit_policy_parse("warn"), VGPU_OVERLIMIT_WARN);
    assert_int_equal(vgpu_overlimit_policy_parse("KILL"), -1);
    assert_int_equal(vgpu_overlimit_policy_parse(""), -1);
    assert_int_equal(vgpu_overlimit_policy_parse(NULL), -1);
    assert_null(vgpu_overlimit_policy_name(VGPU_OVERLIMIT_NONE));
    assert_null(vgpu_overlimit_policy_name(9));
    assert_null(vgpu_overlimit_action_name(VGPU_OVERLIMIT_NOTHING));
    uint32_t w = vgpu_overlimit_word(VGPU_OVERLIMIT_STOP, VGPU_OVERLIMIT_STOPPED, 3, 70000);
    assert_int_equal(vgpu_overlimit_policy_of(w), VGPU_OVERLIMIT_STOP);
    assert_int_equal(vgpu_overlimit_action_of(w), VGPU_OVERLIMIT_STOPPED);
    assert_int_equal(vgpu_overlimit_dev_of(w), 3);
    assert_int_equal(vgpu_overlimit_count_of(w), 0xffff);          /* saturates */
}

static void test_reason(void **state)
{
    (void)state;
    static struct vgpu_region_header h;
    char buf[256];
    h.dev[1].nvml_index = 5;
    atomic_store(&h.over_limit, vgpu_overlimit_word(VGPU_OVERLIMIT_KILL, VGPU_OVERLIMIT_NOTHING, 0, 0));
    assert_false(vgpu_overlimit_reason(&h, buf, sizeof buf));
    assert_string_equal(buf, "");
    atomic_store(&h.over_limit_bytes, 3ULL << 30);
    atomic_store(&h.over_limit_limit, 1ULL << 30);
    atomic_store(&h.over_limit, vgpu_overlimit_word(VGPU_OVERLIMIT_KILL, VGPU_OVERLIMIT_KILLED, 1, 1));
    assert_true(vgpu_overlimit_reason(&h, buf, sizeof buf));
    assert_string_equal(buf, "GPU 5: 3 GiB used (NVML) over its limit of 1 GiB for 2 s: killed (--over-limit kill)");
    atomic_store(&h.over_limit, vgpu_overlimit_word(VGPU_OVERLIMIT_WARN, VGPU_OVERLIMIT_WARNED, 1, 2));
    assert_true(vgpu_overlimit_reason(&h, buf, sizeof buf));
    assert_non_null(strstr(buf, "warned (2 times) (--over-limit warn)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_due_needs_two_samples_over_two_seconds),
        cmocka_unit_test(test_due_one_late_sample_is_not_enough),
        cmocka_unit_test(test_slack),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
