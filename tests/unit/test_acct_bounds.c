/* Sanity bounds of accounting records (lib/core/acct/bounds.c, issue 36 N13): the figures of a
 * damaged region are cut to what the job's GPUs allow, said in rec->bounded; an honest record and
 * one bounded already are left as they are. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/acct.h"

#define GIB (1ULL << 30)
#define S 1000000000ULL

static void honest(struct vgpu_acct_record *r)
{
    memset(r, 0, sizeof *r);
    r->start_ns = 1000 * S;
    r->end_ns = 1004 * S;                               /* 4 s */
    r->gpu_count = 2;
    for (unsigned d = 0; d < 2; d++) {
        r->gpu[d].ordinal = d;
        r->gpu[d].mem_limit_bytes = 4 * GIB;
        r->gpu[d].core_limit = 30;
        r->gpu[d].gpu_ns = 4 * S;                       /* its whole duration: allowed */
        r->gpu[d].mem_peak_bytes = 4 * GIB;
        r->gpu[d].mem_byte_seconds = 4.0 * GIB * 4.9;   /* within the 1 s of slack */
    }
}

static const uint64_t h100[2] = { 80 * GIB, 80 * GIB };

static void test_honest_record_untouched(void **state)
{
    (void)state;
    struct vgpu_acct_record r, before;
    honest(&r);
    before = r;
    assert_int_equal(vgpu_acct_bound(&r, h100), 0);
    assert_memory_equal(&r, &before, sizeof r);
    assert_int_equal(vgpu_acct_bound(&r, NULL), 0);     /* GPUs unknown: 1 PiB */
    assert_memory_equal(&r, &before, sizeof r);
}

/* The record: 1.8e19 B, 1753333957 %, 1.2 M GiB-hours for a 4 s job. */
static void test_damaged_region_figures(void **state)
{
    (void)state;
    struct vgpu_acct_record r;
    honest(&r);
    r.gpu[1].mem_limit_bytes = 18014398509481984000ULL;
    r.gpu[1].core_limit = 1753333957u;
    r.gpu[1].mem_byte_seconds = 1.2e6 * 3600.0 * (double)GIB;
    r.gpu[1].gpu_ns = 3600 * S;
    r.gpu[1].mem_peak_bytes = 1ULL << 62;
    unsigned want = VGPU_ACCT_BOUND_MEM_LIMIT | VGPU_ACCT_BOUND_CORE | VGPU_ACCT_BOUND_MEM_TIME |
                    VGPU_ACCT_BOUND_GPU_TIME | VGPU_ACCT_BOUND_MEM_PEAK;
    assert_int_equal(vgpu_acct_bound(&r, h100), want);
    assert_int_equal(r.bounded, want);
    assert_int_equal(r.gpu[1].mem_limit_bytes, 80 * GIB);
    assert_int_equal(r.gpu[1].core_limit, 100);
    assert_int_equal(r.gpu[1].gpu_ns, 4 * S);
    assert_int_equal(r.gpu[1].mem_peak_bytes, 80 * GIB);
    assert_true(r.gpu[1].mem_byte_seconds <= 80.0 * GIB * 5.0);
    /* GPU 0 kept its figures */
    assert_int_equal(r.gpu[0].mem_limit_bytes, 4 * GIB);
    assert_int_equal(r.gpu[0].core_limit, 30);
    /* again: nothing more to cut, the flags stay */
    assert_int_equal(vgpu_acct_bound(&r, h100), 0);
    assert_int_equal(r.bounded, want);
    /* unknown GPU memory: 1 PiB */
    honest(&r);
    r.gpu[0].mem_limit_bytes = UINT64_MAX;
    assert_int_equal(vgpu_acct_bound(&r, NULL), VGPU_ACCT_BOUND_MEM_LIMIT);
    assert_int_equal(r.gpu[0].mem_limit_bytes, VGPU_ACCT_MEM_UNKNOWN_MAX);
}

static void test_end_before_start_and_nan(void **state)
{
    (void)state;
    struct vgpu_acct_record r;
    honest(&r);
    r.end_ns = r.start_ns - 5 * S;
    r.gpu[0].mem_byte_seconds = NAN;
    unsigned cut = vgpu_acct_bound(&r, h100);
    assert_true(cut & VGPU_ACCT_BOUND_TIME);
    assert_int_equal(r.end_ns, r.start_ns);
    assert_true(cut & VGPU_ACCT_BOUND_GPU_TIME);        /* 4 s of GPU time in a 0 s job */
    assert_int_equal(r.gpu[0].gpu_ns, 0);
    assert_true(r.gpu[0].mem_byte_seconds == 0.0);
    assert_string_equal(vgpu_acct_bound_name(VGPU_ACCT_BOUND_TIME, true), "end_time");
    assert_string_equal(vgpu_acct_bound_name(VGPU_ACCT_BOUND_MEM_TIME, false), "GiB-hours");
}

/* --oversubscribe: the limit may pass the GPU's memory (host memory backs it), not its device part. */
static void test_oversubscribed(void **state)
{
    (void)state;
    struct vgpu_acct_record r;
    honest(&r);
    r.gpu[0].mem_limit_bytes = 120 * GIB;
    r.gpu[0].mem_peak_bytes = 100 * GIB;
    r.gpu[0].oversub_device_bytes = 60 * GIB;
    assert_int_equal(vgpu_acct_bound(&r, h100), 0);
    r.gpu[0].oversub_device_bytes = 90 * GIB;
    assert_int_equal(vgpu_acct_bound(&r, h100), VGPU_ACCT_BOUND_MEM_LIMIT);
    assert_int_equal(r.gpu[0].oversub_device_bytes, 80 * GIB);
    assert_int_equal(r.gpu[0].mem_limit_bytes, 120 * GIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_honest_record_untouched),
        cmocka_unit_test(test_damaged_region_figures),
        cmocka_unit_test(test_end_before_start_and_nan),
        cmocka_unit_test(test_oversubscribed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
