/* The hook's memory counters alone (lib/hook/acct.c, the bottom of its accounting; the layers
 * are at the top of that file): one reservation attempt and its answers, release, force and the
 * peak, spilling on an oversubscribed device, and the job's view of a device. acct.c knows only
 * the job (lib/hook/config.c) and the region, so the job here is a real region made by the core
 * library, and config.c's few questions are answered by the test (which job, slot, device). The
 * admission above it (retry after re-measuring, the OOM line) runs in tests/cli/hook_alloc.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../lib/hook/hook.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"

#define MiB (1ULL << 20)

/* ---- the job as config.c would give it ---- */

static struct vgpu_region job;
static bool have_job, fail_closed;
static int job_slot = -1;
static int job_dev_of[4] = { 0, 1, VGPU_NOT_JOB_DEV, -1 };   /* CUDA ordinal -> job device */

struct vgpu_region *vgpu_job(void) { return have_job ? &job : NULL; }
int vgpu_job_slot(void) { return job_slot; }
bool vgpu_job_refused(void) { return !have_job && fail_closed; }
void vgpu_job_guard(struct vgpu_region *r) { (void)r; }
int vgpu_job_dev(int ordinal) { return have_job && ordinal >= 0 && ordinal < 4 ? job_dev_of[ordinal] : -1; }

static char statedir[256];

/* A job on two devices: device 0 limited to 100 MiB; device 1 oversubscribed, 100 MiB cap of
 * which 40 MiB may stay on the GPU. */
static int setup(void **state)
{
    (void)state;
    snprintf(statedir, sizeof statedir, "/tmp/vgpu-test-hook-acct.XXXXXX");
    if (!mkdtemp(statedir))
        return -1;
    setenv("VGPU_STATE_DIR", statedir, 1);
    char buf[512];
    struct vgpu_err e;
    if (vgpu_statedir(buf, sizeof buf, true, &e) != 0)
        return -1;
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "test";
    spec.device_count = 2;
    for (unsigned d = 0; d < 2; d++) {
        spec.dev[d].uuid = d ? "GPU-00000000-0000-0000-0000-000000000001" : "GPU-00000000-0000-0000-0000-000000000000";
        spec.dev[d].mem_total = 80ULL << 30;
        spec.dev[d].mem_limit = 100 * MiB;
    }
    spec.dev[1].oversub = true;
    spec.dev[1].mem_device = 40 * MiB;
    if (vgpu_region_create(&job, statedir, &spec, &e) != 0) {
        fprintf(stderr, "create: %s\n", e.msg);
        return -1;
    }
    job_slot = vgpu_region_attach(&job, &e);
    have_job = job_slot >= 0;
    fail_closed = false;
    return have_job ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    vgpu_region_detach(&job, job_slot);
    vgpu_region_close(&job);
    have_job = false;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", statedir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_try_within_and_over_the_limit(void **state)
{
    (void)state;
    assert_true(vgpu_acct_tracked(0));
    assert_int_equal(vgpu_acct_try(0, 60 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    assert_int_equal(vgpu_acct_used(0), 60 * MiB);
    /* 60 + 50 > 100: over, and nothing was taken (the admission may re-measure and try again). */
    assert_int_equal(vgpu_acct_try(0, 50 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_OVER);
    assert_int_equal(vgpu_acct_used(0), 60 * MiB);
    assert_int_equal(vgpu_acct_try(0, 40 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    assert_int_equal(vgpu_acct_used(0), 100 * MiB);
    assert_int_equal(vgpu_acct_try(0, 1, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_OVER);
    vgpu_acct_release(0, 100 * MiB);
    assert_int_equal(vgpu_acct_used(0), 0);
    /* The other device's counter is its own. */
    assert_int_equal(vgpu_acct_used(1), 0);
}

static void test_force_passes_the_limit_and_keeps_the_peak(void **state)
{
    (void)state;
    assert_int_equal(vgpu_acct_try(0, 90 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    vgpu_acct_force(0, 30 * MiB);   /* memory the driver has handed out already */
    assert_int_equal(vgpu_acct_used(0), 120 * MiB);
    assert_int_equal(atomic_load(&job.use->dev[0].peak), 120 * MiB);
    assert_int_equal(atomic_load(&job.use->slot[job_slot].used[0]), 120 * MiB);
    assert_int_equal(vgpu_acct_try(0, 1, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_OVER);
    vgpu_acct_release(0, 120 * MiB);
    assert_int_equal(vgpu_acct_used(0), 0);
    assert_int_equal(atomic_load(&job.use->dev[0].peak), 120 * MiB);   /* a peak stays */
    /* Release never underflows: at most what the slot holds goes back. */
    vgpu_acct_release(0, 5 * MiB);
    assert_int_equal(vgpu_acct_used(0), 0);
}

static void test_not_the_jobs_gpu_and_no_job(void **state)
{
    (void)state;
    /* A GPU that is not the job's gets no memory at all, but a 0-byte request is not refused. */
    assert_false(vgpu_acct_tracked(2));
    assert_int_equal(vgpu_acct_try(2, MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_REFUSED);
    assert_int_equal(vgpu_acct_try(2, 0, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    /* An ordinal the job cannot map (-1): not accounted, never failed. */
    assert_int_equal(vgpu_acct_try(3, MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    /* No job: everything passes, unless VGPU_FAIL_CLOSED refuses memory without a job. */
    have_job = false;
    assert_false(vgpu_acct_tracked(0));
    assert_int_equal(vgpu_acct_try(0, 1ULL << 40, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    assert_int_equal(vgpu_acct_limit(0), 0);
    fail_closed = true;
    assert_int_equal(vgpu_acct_try(0, MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_REFUSED);
    assert_int_equal(vgpu_acct_try(0, 0, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    have_job = true;
    fail_closed = false;
    assert_int_equal(vgpu_acct_used(0), 0);
}

static void test_oversubscribed_device_spills(void **state)
{
    (void)state;
    assert_false(vgpu_acct_oversub(0));
    assert_true(vgpu_acct_oversub(1));
    bool sp = true;
    assert_int_equal(vgpu_acct_try(1, 30 * MiB, VGPU_ACCT_SPILLABLE, &sp), VGPU_ACCT_GRANTED);
    assert_false(sp);                                    /* fits in the 40 MiB share */
    /* Past the share: memory that cannot be paged is over; spillable memory is spilled. */
    assert_int_equal(vgpu_acct_try(1, 20 * MiB, VGPU_ACCT_ON_DEVICE, &sp), VGPU_ACCT_OVER);
    assert_false(sp);
    assert_int_equal(vgpu_acct_try(1, 20 * MiB, VGPU_ACCT_SPILLABLE, &sp), VGPU_ACCT_GRANTED);
    assert_true(sp);
    /* Managed memory the program asked for counts off the device on an oversubscribed GPU. */
    assert_int_equal(vgpu_acct_try(1, 10 * MiB, VGPU_ACCT_PAGED, &sp), VGPU_ACCT_GRANTED);
    assert_true(sp);
    assert_int_equal(vgpu_region_mem_spilled(&job, 1), 30 * MiB);
    assert_int_equal(vgpu_acct_used(1), 60 * MiB);
    /* The cap still holds: 60 + 50 > 100. */
    assert_int_equal(vgpu_acct_try(1, 50 * MiB, VGPU_ACCT_SPILLABLE, &sp), VGPU_ACCT_OVER);
    vgpu_acct_release_spilled(1, 30 * MiB);
    vgpu_acct_release(1, 30 * MiB);
    assert_int_equal(vgpu_region_mem_spilled(&job, 1), 0);
    assert_int_equal(vgpu_acct_used(1), 0);
    /* On a device that is not oversubscribed, managed memory is charged in full, not spilled. */
    assert_int_equal(vgpu_acct_try(0, 10 * MiB, VGPU_ACCT_PAGED, &sp), VGPU_ACCT_GRANTED);
    assert_false(sp);
    assert_false(vgpu_acct_mark_spilled(0, 10 * MiB));
    vgpu_acct_release(0, 10 * MiB);
}

static void test_view_adds_up(void **state)
{
    (void)state;
    uint64_t fr, to, used;
    assert_int_equal(vgpu_acct_limit(0), 100 * MiB);
    assert_int_equal(vgpu_acct_try(0, 30 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_GRANTED);
    vgpu_acct_view(0, 70ULL << 30, 80ULL << 30, &fr, &to, &used);
    assert_int_equal(to, 100 * MiB);
    assert_int_equal(used, 30 * MiB);
    assert_int_equal(fr + used, to);
    /* The device itself has less free than the job's share: never promise more. */
    vgpu_acct_view(0, 50 * MiB, 80ULL << 30, &fr, &to, &used);
    assert_int_equal(fr, 50 * MiB);
    assert_int_equal(fr + used, to);
    /* The job's memory outside the limiter counts as used. */
    vgpu_region_set_outside(&job, 0, 20 * MiB, 4242, 1);
    vgpu_acct_view(0, 70ULL << 30, 80ULL << 30, &fr, &to, &used);
    assert_int_equal(used, 50 * MiB);
    assert_int_equal(fr + used, to);
    assert_int_equal(vgpu_acct_try(0, 60 * MiB, VGPU_ACCT_ON_DEVICE, NULL), VGPU_ACCT_OVER);
    vgpu_region_set_outside(&job, 0, 0, 0, 0);
    /* Oversubscribed: the job's memory is its cap, whatever the GPU has free. */
    vgpu_acct_view(1, 10 * MiB, 20 * MiB, &fr, &to, &used);
    assert_int_equal(to, 100 * MiB);
    assert_int_equal(fr, 100 * MiB);
    /* No limit known (not the job's GPU): the device's own figures, used + free = total. */
    vgpu_acct_view(2, 30 * MiB, 80 * MiB, &fr, &to, &used);
    assert_int_equal(to, 80 * MiB);
    assert_int_equal(used, 50 * MiB);
    vgpu_acct_release(0, 30 * MiB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_try_within_and_over_the_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_force_passes_the_limit_and_keeps_the_peak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_the_jobs_gpu_and_no_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversubscribed_device_spills, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_adds_up, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
