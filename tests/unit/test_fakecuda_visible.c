/* CUDA_VISIBLE_DEVICES as the fake libcuda reads it (tests/fakegpu/cuda/visible.c, compiled in
 * here so that MIG layouts can be tested without building them through the fake NVML). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../fakegpu/cuda/visible.c"

static const char *const mig1[] = { "MIG-11111111-aaaa-bbbb-cccc-000000000001", "MIG-11111111-aaaa-bbbb-cccc-000000000002" };
static const struct fc_phys_gpu gpus[] = {
    { "GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91", false, 0, NULL },
    { "GPU-4f6c9999-1a4c-4f8e-b6d1-2c9a0e5f3b47", true, 2, mig1 },   /* MIG on, two MIG devices */
    { "GPU-a1000040-5e1d-4b2a-9c3f-17d2e4f6a8b0", true, 0, NULL },   /* MIG on, none created */
};

static int pick(const char *env, struct fc_pick *out)
{
    return fc_visible_select(env, gpus, 3, out, 8);
}

static void test_unset_lists_gpus_and_first_mig_device(void **state)
{
    (void)state;
    struct fc_pick p[8];
    assert_int_equal(pick(NULL, p), 2);
    assert_int_equal(p[0].gpu, 0);
    assert_int_equal(p[0].mig, -1);
    assert_int_equal(p[1].gpu, 1);
    assert_int_equal(p[1].mig, 0);
}

static void test_entries(void **state)
{
    (void)state;
    struct fc_pick p[8];
    assert_int_equal(pick("", p), 0);
    assert_int_equal(pick("-1", p), 0);
    assert_int_equal(pick("1", p), 1);
    assert_int_equal(p[0].mig, 0);
    assert_int_equal(pick("2", p), 0);                    /* MIG on, no MIG device */
    assert_int_equal(pick("0,2,1", p), 1);                /* the invalid entry ends the list */
    assert_int_equal(pick("GPU-4f6c", p), 0);             /* ambiguous prefix */
    assert_int_equal(pick("GPU-4F6C2A51", p), 1);         /* case-insensitive unique prefix */
    assert_int_equal(p[0].gpu, 0);
    assert_int_equal(pick("MIG-11111111-aaaa-bbbb-cccc-000000000002, 0", p), 2);
    assert_int_equal(p[0].gpu, 1);
    assert_int_equal(p[0].mig, 1);
    assert_int_equal(p[1].gpu, 0);
    assert_int_equal(pick("MIG-11111111", p), 0);         /* ambiguous */
    assert_int_equal(pick("0,0", p), 1);                  /* a repeat ends the list */
    assert_int_equal(pick("GPU-", p), 0);
    assert_int_equal(pick("foo,0", p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_lists_gpus_and_first_mig_device),
        cmocka_unit_test(test_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
