/* Sizes and percents: the grammar users type, and every trap of a naive parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/units.h"

static void good(const char *text, uint64_t want)
{
    struct vgpu_err e = { 0 };
    uint64_t got = 12345;
    if (vgpu_parse_size(text, &got, "--mem", &e) != 0)
        fail_msg("'%s' rejected: %s", text, e.msg);
    if (got != want)
        fail_msg("'%s' parsed as %llu, want %llu", text, (unsigned long long)got, (unsigned long long)want);
}

static void bad(const char *text, const char *msg_part)
{
    struct vgpu_err e = { 0 };
    uint64_t got = 777;
    if (vgpu_parse_size(text, &got, "--mem", &e) == 0)
        fail_msg("'%s' accepted as %llu", text, (unsigned long long)got);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    assert_int_equal(got, 777); /* untouched on error */
    assert_non_null(strstr(e.msg, "--mem"));
    if (*text)
        assert_non_null(strstr(e.msg, text)); /* the message quotes the bad text */
    if (msg_part)
        assert_non_null(strstr(e.msg, msg_part));
}

static void test_sizes_accepted(void **state)
{
    (void)state;
    good("4G", 4ULL << 30);
    good("4GiB", 4ULL << 30);
    good("4gb", 4ULL << 30);
    good("4Gi", 4ULL << 30);        /* HAMi's trap: "1Gi" must not be one byte */
    good("4096M", 4ULL << 30);
    good("4096m", 4ULL << 30);      /* what HAMi's device plugin writes */
    good("1024MB", 1ULL << 30);     /* binary, as documented */
    good("1.5G", 3ULL << 29);
    good("0.5GiB", 1ULL << 29);
    good("512MiB", 512ULL << 20);
    good("1T", 1ULL << 40);
    good("123", 123);
    good("123B", 123);
    good("010G", 10ULL << 30);      /* decimal, never octal */
    good("0", 0);
    good("1.25K", 1280);
}

static void test_sizes_rejected(void **state)
{
    (void)state;
    bad("", "empty");
    bad("4X", "not a size");
    bad("-1G", "not a size");
    bad("+1G", "not a size");
    bad("1e99", "not a size");
    bad("0x10", "not a size");
    bad("G", "not a size");
    bad("4 G", "not a size");
    bad("4G ", "not a size");
    bad(".5G", "not a size");
    bad("1.", "not a size");
    bad("1.5", "whole number of bytes");
    bad("1.0000000001G", "not a size");
    bad("18446744073709551616", "too large");
    bad("17179869184G", "too large");
    bad("99999999999999999999999G", "too large");
}

static void test_percent(void **state)
{
    (void)state;
    struct vgpu_err e;
    unsigned p = 0;
    assert_int_equal(vgpu_parse_percent("30", &p, "--core", &e), 0);
    assert_int_equal(p, 30);
    assert_int_equal(vgpu_parse_percent("30%", &p, "--core", &e), 0);
    assert_int_equal(p, 30);
    assert_int_equal(vgpu_parse_percent("100", &p, "--core", &e), 0);
    assert_int_equal(p, 100);
    assert_int_equal(vgpu_parse_percent("0", &p, "--core", &e), 0);
    assert_int_equal(p, 0);
    const char *bads[] = { "", "101", "50g", "-5", "30.5", "%", "30%%", "1000", "0x10", " 30", NULL };
    for (int i = 0; bads[i]; i++) {
        p = 99;
        if (vgpu_parse_percent(bads[i], &p, "--core", &e) == 0)
            fail_msg("'%s' accepted as a percent", bads[i]);
        assert_int_equal(p, 99);
        assert_int_equal(e.code, VGPU_EXIT_USAGE);
        assert_non_null(strstr(e.msg, "--core"));
    }
}

/* Issue 13: the message states the range the caller accepts, and a bare number below 1 MiB
 * is not a memory limit (was: "0 to 100" printed when 0 was refused; "50" meant 50 bytes). */
static void test_ranges(void **state)
{
    (void)state;
    struct vgpu_err e;
    unsigned p = 99;
    assert_int_equal(vgpu_parse_percent_range("0", 1, 100, &p, "--core", &e), -1);
    assert_non_null(strstr(e.msg, "from 1 to 100"));
    assert_int_equal(p, 99);
    assert_int_equal(vgpu_parse_percent_range("1", 1, 100, &p, "--core", &e), 0);
    assert_int_equal(p, 1);
    assert_int_equal(vgpu_parse_percent("101", &p, "--core", &e), -1);
    assert_non_null(strstr(e.msg, "from 0 to 100"));
    uint64_t b = 7;
    assert_int_equal(vgpu_parse_mem_limit("50", &b, "--mem", &e), -1);
    assert_non_null(strstr(e.msg, "write the unit"));
    assert_int_equal(b, 7);
    assert_int_equal(vgpu_parse_mem_limit("1048575", &b, "--mem", &e), -1);
    assert_int_equal(vgpu_parse_mem_limit("1048576", &b, "--mem", &e), 0);
    assert_int_equal(b, 1048576);
    assert_int_equal(vgpu_parse_mem_limit("50B", &b, "--mem", &e), 0); /* a unit says it is meant */
    assert_int_equal(b, 50);
    assert_int_equal(vgpu_parse_mem_limit("0", &b, "--mem", &e), 0);  /* callers say what 0 means */
    assert_int_equal(b, 0);
    assert_int_equal(vgpu_parse_mem_limit("4Q", &b, "--mem", &e), -1);
    assert_non_null(strstr(e.msg, "'4Q' is not a size"));
}

/* The K suffix (issue 27: one test guarded it): every spelling is 1024, a fraction of a K must
 * be whole bytes, and K * huge overflows instead of wrapping. A K read as 1000, or as a byte,
 * fails here. */
static void test_k_suffix(void **state)
{
    (void)state;
    good("1K", 1024);
    good("1k", 1024);
    good("1KB", 1024);
    good("1kb", 1024);
    good("1KiB", 1024);
    good("1Ki", 1024);
    good("1kib", 1024);
    good("1048576K", 1ULL << 30);
    good("0.5K", 512);
    good("0.25K", 256);
    good("0.001953125K", 2);
    good("0K", 0);
    good("18014398509481983K", 18014398509481983ULL * 1024);   /* the largest whole-K size */
    bad("18014398509481984K", "too large");
    bad("0.1K", "whole number of bytes");                      /* 102.4 bytes */
    bad("1KK", "not a size");
    bad("1Kb ", "not a size");
    bad("K", "not a size");
    bad("1 K", "not a size");
    bad("1e3K", "not a size");
    uint64_t b = 0;
    struct vgpu_err e;
    assert_int_equal(vgpu_parse_mem_limit("1024K", &b, "--mem", &e), 0);   /* a unit: 1 MiB, allowed */
    assert_int_equal(b, 1ULL << 20);
    assert_int_equal(vgpu_parse_mem_limit("1023K", &b, "--mem", &e), 0);   /* a unit says it is meant */
    assert_int_equal(b, 1023ULL * 1024);
}

/* Advice in a refusal is itself a valid value (issue 27: "--mem 1048575" suggested 1048575%),
 * and sizes that print alike are told apart in bytes ("79.65 GiB is larger than 79.65 GiB"). */
static void test_advice(void **state)
{
    (void)state;
    struct vgpu_err e;
    uint64_t b = 0, total = 85520809984ULL;
    assert_int_equal(vgpu_parse_mem_limit("1048575", &b, "--mem", &e), -1);
    assert_null(strstr(e.msg, "1048575%"));
    assert_null(strstr(e.msg, "1048575G"));
    assert_int_equal(vgpu_parse_mem_limit("50", &b, "--mem", &e), -1);
    assert_non_null(strstr(e.msg, "50%"));
    assert_int_equal(vgpu_mem_limit_value("85520809985", total, "GPU 0", false, &b, &e), -1);
    assert_non_null(strstr(e.msg, "85520809985 bytes"));
    assert_non_null(strstr(e.msg, "85520809984 bytes"));
    const char *at = strstr(e.msg, "give at most ");
    assert_non_null(at);
    char advice[32];
    assert_int_equal(sscanf(at, "give at most %31s", advice), 1);
    assert_int_equal(vgpu_mem_limit_value(advice, total, "GPU 0", false, &b, &e), 0);
    assert_true(b <= total);
    assert_int_equal(vgpu_mem_limit_value("81G", total, "GPU 0", false, &b, &e), -1);
    assert_null(strstr(e.msg, "bytes"));                        /* 81 GiB and 79.65 GiB differ */
    char s[64];
    assert_string_equal(vgpu_format_size_near(4ULL << 30, 3ULL << 30, s, sizeof s), "4 GiB");
    assert_string_equal(vgpu_format_size_near(total + 1, total, s, sizeof s), "79.65 GiB = 85520809985 bytes");
    /* --oversubscribe's value is named as such. */
    assert_int_equal(vgpu_mem_value("--oversubscribe", "0", total, "GPU 0", false, &b, &e), -1);
    assert_non_null(strstr(e.msg, "--oversubscribe"));
    assert_null(strstr(e.msg, "--mem"));
    assert_int_equal(vgpu_mem_value("--oversubscribe", "101%", total, "GPU 0", false, &b, &e), -1);
    assert_non_null(strstr(e.msg, "--oversubscribe"));
}

static void test_format(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(vgpu_format_size(0, b, sizeof b), "0 B");
    assert_string_equal(vgpu_format_size(1023, b, sizeof b), "1023 B");
    assert_string_equal(vgpu_format_size(4ULL << 30, b, sizeof b), "4 GiB");
    assert_string_equal(vgpu_format_size(3ULL << 29, b, sizeof b), "1.50 GiB");
    assert_string_equal(vgpu_format_size_short(4ULL << 30, b, sizeof b), "4G");
    assert_string_equal(vgpu_format_size_short(3ULL << 29, b, sizeof b), "1.5G");
    assert_string_equal(vgpu_format_size_short(512ULL << 20, b, sizeof b), "512M");
    assert_string_equal(vgpu_format_size_short(81559ULL << 20, b, sizeof b), "79.6G");
    assert_string_equal(vgpu_format_duration(5, b, sizeof b), "5s");
    assert_string_equal(vgpu_format_duration(185, b, sizeof b), "3m05s");
    assert_string_equal(vgpu_format_duration(3720, b, sizeof b), "1h02m");
    assert_string_equal(vgpu_format_duration(90000, b, sizeof b), "1d01h");
}

/* --mem REQUEST:LIMIT (issue 37): both parts by the --mem grammar, REQUEST <= LIMIT, one size is
 * both; the per-GPU form is told apart by digits alone before the first ':'. */
static void test_request_limit(void **state)
{
    (void)state;
    struct vgpu_err e;
    uint64_t r = 1, l = 1, total = 80ULL << 30;
    assert_int_equal(vgpu_mem_request_limit("20G:40G", total, "GPU 0", false, &r, &l, &e), 0);
    assert_true(r == 20ULL << 30 && l == 40ULL << 30);
    assert_int_equal(vgpu_mem_request_limit("4G", total, "GPU 0", false, &r, &l, &e), 0);
    assert_true(r == 4ULL << 30 && l == 4ULL << 30);
    assert_int_equal(vgpu_mem_request_limit("25%:50%", total, "GPU 0", false, &r, &l, &e), 0);
    assert_true(r == 20ULL << 30 && l == 40ULL << 30);
    assert_int_equal(vgpu_mem_request_limit("4G:4G", total, "GPU 0", false, &r, &l, &e), 0);
    assert_true(r == l);
    r = l = 7;
    assert_int_equal(vgpu_mem_request_limit("40G:20G", total, "GPU 0", false, &r, &l, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    assert_non_null(strstr(e.msg, "REQUEST (40 GiB) is more than LIMIT (20 GiB)"));
    assert_true(r == 7 && l == 7);                              /* nothing written on error */
    assert_int_equal(vgpu_mem_request_limit("4G:", total, "GPU 0", false, &r, &l, &e), -1);
    assert_int_equal(vgpu_mem_request_limit(":4G", total, "GPU 0", false, &r, &l, &e), -1);
    assert_int_equal(vgpu_mem_request_limit("1G:2G:3G", total, "GPU 0", false, &r, &l, &e), -1);
    assert_int_equal(vgpu_mem_request_limit("1G:100G", total, "GPU 0", false, &r, &l, &e), -1);
    assert_non_null(strstr(e.msg, "--mem LIMIT"));
    assert_int_equal(vgpu_mem_request_limit("1X:2G", total, "GPU 0", false, &r, &l, &e), -1);
    assert_non_null(strstr(e.msg, "--mem REQUEST"));
    assert_int_equal(vgpu_mem_request_limit("none", total, "GPU 0", true, &r, &l, &e), 0);
    assert_true(r == 0 && l == 0);
    assert_int_equal(vgpu_mem_request_limit("none:4G", total, "GPU 0", true, &r, &l, &e), -1);
    assert_true(vgpu_mem_per_gpu("0:4G"));
    assert_true(vgpu_mem_per_gpu("12:4G:8G,1:2G"));
    assert_false(vgpu_mem_per_gpu("20G:100G"));
    assert_false(vgpu_mem_per_gpu("4G"));
    assert_false(vgpu_mem_per_gpu("50%:80%"));
    assert_false(vgpu_mem_per_gpu(":4G"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_accepted),
        cmocka_unit_test(test_sizes_rejected),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_k_suffix),
        cmocka_unit_test(test_advice),
        cmocka_unit_test(test_request_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
