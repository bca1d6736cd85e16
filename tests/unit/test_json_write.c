/* vgpu_json_plain (lib/core/json_write.c) against json-c's own writer, which it replaces for the
 * one-line output of --json: byte for byte the same text, on every kind of value, every byte
 * in strings and keys, doubles at their edges, and random documents. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/json.h"

static void same(struct json_object *doc)
{
    const char *want = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t len = 0;
    char *got = vgpu_json_plain(doc, &len);
    assert_non_null(got);
    assert_int_equal(len, strlen(want));
    assert_string_equal(got, want);
    free(got);
}

static void test_kinds(void **state)
{
    (void)state;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "null", NULL);
    json_object_object_add(o, "t", json_object_new_boolean(1));
    json_object_object_add(o, "f", json_object_new_boolean(0));
    json_object_object_add(o, "zero", json_object_new_int64(0));
    json_object_object_add(o, "neg", json_object_new_int64(-42));
    json_object_object_add(o, "min", json_object_new_int64(INT64_MIN));
    json_object_object_add(o, "max", json_object_new_int64(INT64_MAX));
    json_object_object_add(o, "umax", json_object_new_uint64(UINT64_MAX));
    json_object_object_add(o, "ubig", json_object_new_uint64((uint64_t)INT64_MAX + 1));
    json_object_object_add(o, "u", json_object_new_uint64(85520809984ULL));
    json_object_object_add(o, "i32", json_object_new_int(-7));
    json_object_object_add(o, "empty_s", json_object_new_string(""));
    json_object_object_add(o, "empty_a", json_object_new_array());
    json_object_object_add(o, "empty_o", json_object_new_object());
    struct json_object *a = json_object_new_array();
    json_object_array_add(a, NULL);
    json_object_array_add(a, json_object_new_string("x/y"));
    json_object_array_add(a, json_object_new_array());
    struct json_object *in = json_object_new_object();
    json_object_object_add(in, "", json_object_new_int(1));
    json_object_array_add(a, in);
    json_object_object_add(o, "arr", a);
    same(o);
    json_object_put(o);
    struct json_object *scalars[] = { json_object_new_int(3), json_object_new_string("s"), json_object_new_double(0.5),
                                      json_object_new_boolean(1), json_object_new_array() };
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        same(scalars[i]);
        json_object_put(scalars[i]);
    }
}

static void test_bytes(void **state)
{
    (void)state;
    char s[256];
    for (int i = 1; i < 256; i++)
        s[i - 1] = (char)i;
    s[255] = 0;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, s, json_object_new_string(s));
    json_object_object_add(o, "with NUL", json_object_new_string_len("a\0b\"c", 5));
    json_object_object_add(o, "utf8", json_object_new_string("GPU-5a1e \xc3\xa9\xe2\x82\xac \\ \"q\" /path/"));
    same(o);
    json_object_put(o);
}

static void test_doubles(void **state)
{
    (void)state;
    double d[] = { 0.0, -0.0, 1.0, -1.0, 0.1, 1.0 / 3, 100.0, 1e15, 1e16, 1e17, 1e21, 1e22, 123456789012345678.0,
                   1e300, -1e300, 1e-300, 5e-324, DBL_MAX, DBL_MIN, 0.15431946784984259, 99.923, 2.5e-7,
                   NAN, INFINITY, -INFINITY };
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        json_object_array_add(a, json_object_new_double(d[i]));
        struct json_object *one = json_object_new_double(d[i]);
        same(one);
        json_object_put(one);
    }
    same(a);
    json_object_put(a);
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static struct json_object *random_value(int depth)
{
    char s[24];
    size_t n = rnd() % sizeof s;
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(rnd() % 4 ? ' ' + rnd() % 95 : rnd() % 256);
    switch (rnd() % (depth < 4 ? 9 : 7)) {
    case 0: return NULL;
    case 1: return json_object_new_boolean((int)(rnd() & 1));
    case 2: return json_object_new_int64((int64_t)rnd());
    case 3: return json_object_new_uint64(rnd());
    case 4: {
        union { uint64_t u; double d; } x = { .u = rnd() };
        return json_object_new_double(rnd() & 1 ? x.d : (double)(int64_t)rnd() / (double)(rnd() % 1000 + 1));
    }
    case 5: case 6: return json_object_new_string_len(s, (int)n);
    case 7: {
        struct json_object *a = json_object_new_array();
        for (unsigned k = rnd() % 6; k > 0; k--)
            json_object_array_add(a, random_value(depth + 1));
        return a;
    }
    default: {
        struct json_object *o = json_object_new_object();
        for (unsigned k = rnd() % 6; k > 0; k--) {
            s[n ? n - 1 : 0] = 0;
            char key[32];
            snprintf(key, sizeof key, "%s%u", n ? s : "", k);   /* keys are C strings */
            json_object_object_add(o, key, random_value(depth + 1));
        }
        return o;
    }
    }
}

static void test_random(void **state)
{
    (void)state;
    for (int i = 0; i < 2000; i++) {
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "v", random_value(0));
        same(o);
        json_object_put(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
