/* What tests/fuzz found (make fuzz), one test per finding, so that each stays fixed without
 * clang or the fuzzer. The inputs that found them are kept in tests/fuzz/findings/ and are replayed
 * by `make fuzz` before it fuzzes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/mig.h"

/* fuzz_mig_layout: two layouts pasted into one file were read as the first alone; json-c stops
 * after the first value. Trailing data is an error; trailing white space is not. */
static void test_layout_trailing_data(void **state)
{
    (void)state;
    static struct vgpu_mig_layout lay;
    struct vgpu_err e;
    const char *one = "{\"gpus\":[{\"gpu\":\"0\",\"mig\":false}]}";
    char text[256];
    snprintf(text, sizeof text, "%s %s", one, one);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    assert_non_null(strstr(e.msg, "more after its JSON document"));
    snprintf(text, sizeof text, "%s,", one);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, &e), -1);
    snprintf(text, sizeof text, "%s \n\t\n", one);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, &e), 0);
    assert_int_equal(lay.n, 1);
    /* json-c takes comments: one after the document is white space, but it ends at a newline (a
     * harness false positive of fuzz_mig_layout: the second document was inside the comment). */
    snprintf(text, sizeof text, "%s//note", one);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, &e), 0);
    snprintf(text, sizeof text, "%s//note\n%s", one, one);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, &e), -1);
    assert_int_equal(vgpu_mig_layout_parse("{\"gpus\":[", &lay, &e), -1);
    assert_non_null(strstr(e.msg, "not valid JSON"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_trailing_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
