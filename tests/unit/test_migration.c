/* The rate of migration of spilled memory (vgpu/migration.h, issue 15 item 4): the pure parts.
 * Counter arithmetic (wrap, reset, a 32-bit counter that could have wrapped unseen), the window
 * ps measures over, the attribution among jobs, the text, and what vgpu top's row and JSON
 * show from it: the rate only while high, null when unknown, never a made-up 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "vgpu/migration.h"
#include "vgpu/top.h"

static struct vgpu_pcie_count at(uint64_t ms, uint64_t tx, uint64_t rx, unsigned bits)
{
    return (struct vgpu_pcie_count){ .ok = true, .bits = bits, .tx = tx, .rx = rx, .at_ns = ms * 1000000ULL };
}

static void test_rate(void **state)
{
    (void)state;
    double bps = -1;
    struct vgpu_pcie_count a = at(1000, 100, 200, 64), b = at(2000, 100 + 3000000000ULL, 200 + 1000000000ULL, 64);
    assert_true(vgpu_pcie_rate(&a, &b, &bps));
    assert_true(bps > 3.999e9 && bps < 4.001e9);   /* both directions, per second */
    /* half a second: twice the rate for the same bytes */
    b.at_ns = 1500 * 1000000ULL;
    assert_true(vgpu_pcie_rate(&a, &b, &bps));
    assert_true(bps > 7.999e9 && bps < 8.001e9);
    /* no time passed, or b before a: unknown */
    b.at_ns = a.at_ns;
    assert_false(vgpu_pcie_rate(&a, &b, &bps));
    /* a 64-bit counter that went back is a reset, not traffic */
    b = at(2000, 50, 300, 64);
    assert_false(vgpu_pcie_rate(&a, &b, &bps));
    /* a reading that failed */
    b = at(2000, 100, 200, 64);
    b.ok = false;
    assert_false(vgpu_pcie_rate(&a, &b, &bps));
    /* nothing moved: a real 0 */
    b = at(2000, 100, 200, 64);
    assert_true(vgpu_pcie_rate(&a, &b, &bps));
    assert_true(bps == 0);
}

static void test_rate_32bit(void **state)
{
    (void)state;
    double bps = -1;
    /* A 32-bit counter wraps at 4 GiB: 20 ms apart, the wrap is undone. */
    struct vgpu_pcie_count a = at(1000, 0xFFFFFF00u, 0, 32), b = at(1020, 0x100, 1000000, 32);
    assert_true(vgpu_pcie_rate(&a, &b, &bps));
    double want = (0x200 + 1000000) / 0.020;
    assert_true(bps > want * 0.999 && bps < want * 1.001);
    /* A second apart, the link could have moved 2^32 bytes unseen: unknown, not a guess. */
    b.at_ns = 2000 * 1000000ULL;
    assert_false(vgpu_pcie_rate(&a, &b, &bps));
    /* widths that differ (a driver update between readings): unknown */
    b = at(1020, 0x100, 1000000, 64);
    assert_false(vgpu_pcie_rate(&a, &b, &bps));
}

static void test_window(void **state)
{
    (void)state;
    assert_int_equal(vgpu_pcie_window_ms(64, 100), 100);
    unsigned w = vgpu_pcie_window_ms(32, 100);
    /* 2^32 bytes at 128 GB/s take 33.5 ms: the window stays below that */
    assert_true(w >= 20 && w < 34);
    assert_int_equal(vgpu_pcie_window_ms(32, 5), 5);
    /* a window of that length gives a rate */
    struct vgpu_pcie_count a = at(0, 0, 0, 32), b = at(w, 1, 1, 32);
    double bps;
    assert_true(vgpu_pcie_rate(&a, &b, &bps));
}

static void test_share(void **state)
{
    (void)state;
    assert_true(vgpu_migration_share(6e9, 1ULL << 30, 3ULL << 30) > 1.999e9);
    assert_true(vgpu_migration_share(6e9, 1ULL << 30, 3ULL << 30) < 2.001e9);
    assert_true(vgpu_migration_share(6e9, 3ULL << 30, 3ULL << 30) == 6e9);   /* the only such job */
    assert_true(vgpu_migration_share(6e9, 0, 3ULL << 30) == 0);              /* nothing off the device */
    assert_true(vgpu_migration_share(6e9, 4ULL << 30, 3ULL << 30) == 6e9);   /* grew since the total: capped */
    assert_true(vgpu_migration_share(0, 1, 1) == 0);
}

static void test_format(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(vgpu_format_rate(1.24e9, b, sizeof b), "1.2 GB/s");
    assert_string_equal(vgpu_format_rate(350e6, b, sizeof b), "350 MB/s");
    assert_string_equal(vgpu_format_rate(12e3, b, sizeof b), "12 kB/s");
    assert_string_equal(vgpu_format_rate(0, b, sizeof b), "0 B/s");
}

/* vgpu top: the flag only while the rate is high; the JSON key null when unknown. */
static void test_top_row_and_json(void **state)
{
    (void)state;
    struct top_model *m = top_model_new();
    assert_non_null(m);
    m->njob = 1;
    struct top_job *j = &m->jobs[0];
    snprintf(j->id, sizeof j->id, "abc");
    snprintf(j->name, sizeof j->name, "big");
    j->oversub = true;
    j->mem_used = 5ULL << 30;
    j->mem_off_device = 3ULL << 30;
    char b[512];
    struct json_object *doc, *jobs, *v;
    /* unknown (no counter): no flag, null */
    top_row_job(b, sizeof b, 200, j);
    assert_non_null(strstr(b, "~ 3 GiB off the device"));
    assert_null(strstr(b, "migrating"));
    doc = top_model_json(m);
    assert_true(json_object_object_get_ex(doc, "jobs", &jobs));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(jobs, 0), "migration_bytes_per_s", &v));
    assert_null(v);
    json_object_put(doc);
    /* known and low: a number, no flag */
    j->migration_valid = true;
    j->migration_bps = VGPU_MIGRATION_HIGH_BPS / 2;
    top_row_job(b, sizeof b, 200, j);
    assert_null(strstr(b, "migrating"));
    doc = top_model_json(m);
    json_object_object_get_ex(doc, "jobs", &jobs);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(jobs, 0), "migration_bytes_per_s", &v));
    assert_non_null(v);
    assert_int_equal(json_object_get_int64(v), 50000000);
    json_object_put(doc);
    /* high: the flag says how fast */
    j->migration_bps = 1.24e9;
    top_row_job(b, sizeof b, 200, j);
    assert_non_null(strstr(b, "~ 3 GiB off the device, migrating 1.2 GB/s"));
    /* a job that is not oversubscribed: null, whatever is set */
    j->oversub = false;
    doc = top_model_json(m);
    json_object_object_get_ex(doc, "jobs", &jobs);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(jobs, 0), "migration_bytes_per_s", &v));
    assert_null(v);
    json_object_put(doc);
    top_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate),         cmocka_unit_test(test_rate_32bit), cmocka_unit_test(test_window),
        cmocka_unit_test(test_share),        cmocka_unit_test(test_format),     cmocka_unit_test(test_top_row_and_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
