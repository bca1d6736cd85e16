/* Exhaustion of a job region (issue 12, item 6): with all VGPU_REGION_MAX_SLOTS process slots
 * taken, one more process gets a clear error (the library then runs that process without limits
 * and says so, see vgpu-security(7)); the job's accounting and every other job are untouched, and
 * a slot given back is usable again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"

static char statedir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(statedir, sizeof statedir, "/tmp/vgpu-test-exhaust.XXXXXX");
    if (!mkdtemp(statedir))
        return -1;
    setenv("VGPU_STATE_DIR", statedir, 1);
    char buf[512];
    struct vgpu_err e;
    return vgpu_statedir(buf, sizeof buf, true, &e);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", statedir);
    return system(cmd) == 0 ? 0 : -1;
}

static void make_job(struct vgpu_region *r, uint64_t limit)
{
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "test";
    spec.device_count = 1;
    spec.dev[0].uuid = "GPU-00000000-0000-0000-0000-000000000000";
    spec.dev[0].mem_total = 80ULL << 30;
    spec.dev[0].mem_limit = limit;
    struct vgpu_err e = { 0 };
    if (vgpu_region_create(r, statedir, &spec, &e) != 0)
        fail_msg("create: %s", e.msg);
}

static void test_all_slots_taken(void **state)
{
    (void)state;
    struct vgpu_region a, b;
    struct vgpu_err e;
    make_job(&a, 1000);
    make_job(&b, 2000);
    static int slots[VGPU_REGION_MAX_SLOTS];
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        slots[i] = vgpu_region_attach(&a, &e);
        if (slots[i] < 0)
            fail_msg("attach %d: %s", i, e.msg);
    }
    assert_int_equal(vgpu_region_reserve(&a, slots[7], 0, 600), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(vgpu_region_attach(&a, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_NO_CAPACITY);
    assert_non_null(strstr(e.msg, "no free process slot"));
    /* The full job still accounts and enforces its limit. */
    assert_int_equal(vgpu_region_mem_used(&a, 0), 600);
    assert_int_equal(vgpu_region_reserve(&a, slots[8], 0, 500), -1);
    assert_int_equal(vgpu_region_reserve(&a, slots[8], 0, 400), 0);
    assert_int_equal(vgpu_region_mem_limit(&a, 0), 1000);
    /* Another job is untouched. */
    int sb = vgpu_region_attach(&b, &e);
    assert_true(sb >= 0);
    assert_int_equal(vgpu_region_mem_used(&b, 0), 0);
    assert_int_equal(vgpu_region_mem_limit(&b, 0), 2000);
    assert_int_equal(vgpu_region_reserve(&b, sb, 0, 2000), 0);
    /* A slot given back can be taken again, and its usage went back with it. */
    vgpu_region_detach(&a, slots[7]);
    assert_int_equal(vgpu_region_mem_used(&a, 0), 400);
    assert_true(vgpu_region_attach(&a, &e) >= 0);
    vgpu_region_close(&a);
    vgpu_region_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_slots_taken, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
