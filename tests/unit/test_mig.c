/* The pure parts of vgpu mig and placement: SPEC parsing, the placement planner, layout
 * parsing and instance matching, and the choice of a GPU by memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/mig.h"
#include "vgpu/placement.h"

static void test_spec(void **state)
{
    (void)state;
    struct vgpu_mig_item it[VGPU_MIG_MAX_ITEMS];
    unsigned n;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_mig_parse_spec("3g.40gb, 2x1g.10gb,1g.10gb:4,MIG 2g.20gb,19", it, VGPU_MIG_MAX_ITEMS, &n, &e), 0);
    assert_int_equal(n, 6);
    assert_string_equal(it[0].profile, "3g.40gb");
    assert_int_equal(it[0].start, -1);
    assert_string_equal(it[1].profile, "1g.10gb");
    assert_string_equal(it[2].profile, "1g.10gb");
    assert_int_equal(it[3].start, 4);
    assert_string_equal(it[4].profile, "MIG 2g.20gb");
    assert_string_equal(it[5].profile, "19");
    const char *bad[] = { "", ",", "1g.10gb,", "0x1g.10gb", "2x1g.10gb:4", "1g.10gb:", "1g.10gb:x", "99x1g" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (vgpu_mig_parse_spec(bad[i], it, VGPU_MIG_MAX_ITEMS, &n, &e) == 0)
            fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(e.code, VGPU_EXIT_USAGE);
    }
}

/* The H100 profiles that matter for planning. */
static void h100(struct vgpu_mig_gpu *g)
{
    memset(g, 0, sizeof *g);
    g->supported = true;
    g->current = 1;
    strcpy(g->name, "NVIDIA H100 80GB HBM3");
    struct { const char *name; unsigned id, slices, size, inst, n; unsigned starts[8]; } t[] = {
        { "1g.10gb", 19, 1, 1, 7, 7, { 0, 1, 2, 3, 4, 5, 6 } },
        { "2g.20gb", 14, 2, 2, 3, 3, { 0, 2, 4 } },
        { "3g.40gb", 9, 3, 4, 2, 2, { 0, 4 } },
        { "4g.40gb", 5, 4, 4, 1, 1, { 0 } },
        { "7g.80gb", 0, 7, 8, 1, 1, { 0 } },
        { "1g.10gb+me", 20, 1, 1, 1, 7, { 0, 1, 2, 3, 4, 5, 6 } },
    };
    for (unsigned i = 0; i < sizeof t / sizeof *t; i++) {
        struct vgpu_mig_profile *p = &g->prof[g->nprof++];
        strcpy(p->name, t[i].name);
        p->id = t[i].id;
        p->slices = t[i].slices;
        p->instances = t[i].inst;
        p->nplace = t[i].n;
        for (unsigned q = 0; q < t[i].n; q++) {
            p->place[q].start = t[i].starts[q];
            p->place[q].size = t[i].size;
        }
    }
}

static int plan(const struct vgpu_mig_gpu *g, uint32_t used, const char *spec, struct vgpu_mig_item *it, unsigned *n)
{
    struct vgpu_err e;
    const struct vgpu_mig_profile *prof[VGPU_MIG_MAX_ITEMS];
    assert_int_equal(vgpu_mig_parse_spec(spec, it, VGPU_MIG_MAX_ITEMS, n, &e), 0);
    for (unsigned i = 0; i < *n; i++) {
        prof[i] = vgpu_mig_find_profile(g, it[i].profile);
        assert_non_null(prof[i]);
    }
    return vgpu_mig_plan(used, it, prof, *n);
}

static void test_plan(void **state)
{
    (void)state;
    static struct vgpu_mig_gpu g;
    h100(&g);
    struct vgpu_mig_item it[VGPU_MIG_MAX_ITEMS];
    unsigned n;
    /* The order trap of the MIG guide: 1g,1g,2g,3g fails in that order on the driver. */
    assert_int_equal(plan(&g, 0, "1g.10gb,1g.10gb,2g.20gb,3g.40gb", it, &n), 0);
    uint32_t seen = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct vgpu_mig_profile *p = vgpu_mig_find_profile(&g, it[i].profile);
        uint32_t m = ((1u << p->place[0].size) - 1) << it[i].start;
        assert_int_equal(seen & m, 0);
        seen |= m;
    }
    assert_int_equal(plan(&g, 0, "7x1g.10gb", it, &n), 0);
    assert_int_not_equal(plan(&g, 0, "8x1g.10gb", it, &n), 0);
    assert_int_not_equal(plan(&g, 0, "3x3g.40gb", it, &n), 0);
    assert_int_equal(plan(&g, 0, "3g.40gb:4,4g.40gb", it, &n), 0);
    assert_int_equal(it[1].start, 0);
    assert_int_not_equal(plan(&g, 0, "1g.10gb:7", it, &n), 0);          /* not a placement */
    assert_int_not_equal(plan(&g, 0x1, "4g.40gb", it, &n), 0);           /* slice 0 taken */
    assert_int_equal(plan(&g, 0x1, "3g.40gb", it, &n), 0);
    assert_int_equal(it[0].start, 4);
    assert_non_null(vgpu_mig_find_profile(&g, "MIG 3G.40GB"));
    assert_non_null(vgpu_mig_find_profile(&g, "14"));
    assert_null(vgpu_mig_find_profile(&g, "2g.30gb"));
}

static void test_layout(void **state)
{
    (void)state;
    static struct vgpu_mig_layout lay;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_mig_layout_parse("{\"schema\":1,\"gpus\":[{\"gpu\":0,\"mig\":true,\"instances\":"
                                           "[\"3g.40gb:4\",\"2x1g.10gb\",{\"profile\":\"4g.40gb\",\"placement\":0,"
                                           "\"ci\":\"none\"}]},{\"gpu\":\"all\",\"mig\":false}]}", &lay, &e), 0);
    assert_int_equal(lay.n, 2);
    assert_string_equal(lay.gpu[0].sel, "0");
    assert_true(lay.gpu[0].mig);
    assert_int_equal(lay.gpu[0].n, 4);
    assert_int_equal(lay.gpu[0].items[0].start, 4);
    assert_string_equal(lay.gpu[0].items[3].ci, "none");
    assert_false(lay.gpu[1].mig);
    const char *bad[] = { "", "[]", "{\"gpus\":{}}", "{\"schema\":2,\"gpus\":[]}", "{\"gpus\":[],\"x\":1}",
                          "{\"gpus\":[{\"gpu\":\"0\"}]}", "{\"gpus\":[{\"gpu\":\"0\",\"mig\":false,\"instances\":[\"1g.10gb\"]}]}",
                          "{\"gpus\":[{\"gpu\":\"0\",\"mig\":true,\"instances\":[{\"placement\":1}]}]}",
                          "{\"gpus\":[{\"gpu\":\"0\",\"mig\":true,\"instances\":[{\"profile\":\"1g\",\"size\":1}]}]}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (vgpu_mig_layout_parse(bad[i], &lay, &e) == 0)
            fail_msg("layout '%s' accepted", bad[i]);
}

/* apply checks a layout against the GPU's profile table before it changes anything. */
static int check(const struct vgpu_mig_gpu *g, const char *instances, struct vgpu_err *e)
{
    static struct vgpu_mig_layout lay;
    char text[512];
    snprintf(text, sizeof text, "{\"gpus\":[{\"gpu\":\"0\",\"mig\":true,\"instances\":[%s]}]}", instances);
    assert_int_equal(vgpu_mig_layout_parse(text, &lay, e), 0);
    memset(e, 0, sizeof *e);
    return vgpu_mig_layout_check(g, &lay.gpu[0], e);
}

static void test_layout_check(void **state)
{
    (void)state;
    static struct vgpu_mig_gpu g;
    h100(&g);
    g.current = 0;  /* MIG off: the profile table is there all the same */
    struct vgpu_err e;
    const char *good[] = { "", "\"3g.40gb:4\",\"2x1g.10gb\"", "\"7g.80gb\"", "\"4g.40gb\",\"3g.40gb\"",
                           "\"7x1g.10gb\"", "\"MIG 2g.20gb\",\"14\",\"14\"",
                           "{\"profile\":\"3g.40gb\",\"ci\":\"1c.3g.40gb\"}",
                           "{\"profile\":\"3g.40gb\",\"ci\":\"2c\"}", "{\"profile\":\"1g.10gb\",\"ci\":\"none\"}",
                           "{\"profile\":\"1g.10gb\",\"ci\":\"1g.10gb\"}" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (check(&g, good[i], &e) != 0)
            fail_msg("[%s] refused: %s", good[i], e.msg);
    struct { const char *instances, *says; } bad[] = {
        { "\"9g.90gb\"", "unknown profile '9g.90gb'; valid: 1g.10gb (ID 19), " },
        { "\"3g.40gb\",\"99\"", "unknown profile '99'" },
        { "\"1g.10gb:7\"", "1g.10gb cannot start at slice 7; possible starts: 0,1,2,3,4,5,6" },
        { "{\"profile\":\"3g.40gb\",\"placement\":2}", "possible starts: 0,4" },
        { "\"2x1g.10gb+me\"", "2 instances of 1g.10gb+me asked; the GPU holds at most 1" },
        { "\"3x3g.40gb\"", "at most 2" },
        { "\"2x3g.40gb\",\"1g.10gb\"", "they need 9 memory slices, it has 8" },
        { "\"4g.40gb\",\"3g.40gb:0\"", "no arrangement of their placements exists" },
        { "\"7g.80gb\",\"1g.10gb\"", "they need 9 memory slices" },
        { "{\"profile\":\"1g.10gb\",\"ci\":\"2c\"}", "'2c' does not fit a 1g.10gb GPU instance (1 compute slice)" },
        { "{\"profile\":\"3g.40gb\",\"ci\":\"1c.2g.20gb\"}", "does not fit a 3g.40gb GPU instance" },
        { "{\"profile\":\"3g.40gb\",\"ci\":\"0c\"}", "does not fit" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (check(&g, bad[i].instances, &e) == 0)
            fail_msg("[%s] accepted", bad[i].instances);
        assert_int_equal(e.code, VGPU_EXIT_USAGE);
        if (!strstr(e.msg, bad[i].says))
            fail_msg("[%s]: '%s' does not say '%s'", bad[i].instances, e.msg, bad[i].says);
    }
    /* "mig": false asks for nothing to check. */
    static struct vgpu_mig_layout lay;
    assert_int_equal(vgpu_mig_layout_parse("{\"gpus\":[{\"gpu\":\"0\",\"mig\":false}]}", &lay, &e), 0);
    assert_int_equal(vgpu_mig_layout_check(&g, &lay.gpu[0], &e), 0);
}

static void test_match(void **state)
{
    (void)state;
    static struct vgpu_mig_gpu g;
    h100(&g);
    /* 3g.40gb at 0 with its default CI, 1g.10gb at 4 without a CI. */
    g.ngi = 2;
    strcpy(g.gi[0].profile, "3g.40gb");
    g.gi[0].profile_id = 9;
    g.gi[0].slices = 3;
    g.gi[0].place.start = 0;
    g.gi[0].nci = 1;
    g.gi[0].ci[0].slices = 3;
    strcpy(g.gi[0].ci[0].profile, "3g.40gb");
    strcpy(g.gi[1].profile, "1g.10gb");
    g.gi[1].profile_id = 19;
    g.gi[1].slices = 1;
    g.gi[1].place.start = 4;
    struct vgpu_mig_item it[4];
    unsigned n;
    struct vgpu_err e;
    bool keep[VGPU_MIG_MAX_GI], have[4];
    assert_int_equal(vgpu_mig_parse_spec("3g.40gb,1g.10gb:4", it, 4, &n, &e), 0);
    strcpy(it[1].ci, "none");
    assert_true(vgpu_mig_match(&g, it, n, keep, have));
    it[1].ci[0] = 0;  /* wants a CI: the 1g instance does not match */
    assert_false(vgpu_mig_match(&g, it, n, keep, have));
    assert_true(keep[0]);
    assert_false(keep[1]);
    assert_false(have[1]);
}

static void test_choose(void **state)
{
    (void)state;
    const uint64_t G = 1ULL << 30;
    struct vgpu_place_cand c[3] = { { 80 * G, 10 * G, 0 }, { 80 * G, 50 * G, 0 }, { 40 * G, 0, 0 } };
    assert_int_equal(vgpu_place_choose(c, 3, 20 * G, VGPU_PLACE_BINPACK, false), 1);  /* 30 left: fullest */
    assert_int_equal(vgpu_place_choose(c, 3, 20 * G, VGPU_PLACE_SPREAD, false), 0);   /* 70 left */
    assert_int_equal(vgpu_place_choose(c, 3, 35 * G, VGPU_PLACE_BINPACK, false), 2);  /* 40 left */
    assert_int_equal(vgpu_place_choose(c, 3, 75 * G, VGPU_PLACE_BINPACK, false), -1);
    assert_int_equal(vgpu_place_choose(c, 3, 75 * G, VGPU_PLACE_BINPACK, true), 0);   /* most room */
    struct vgpu_place_cand t[2] = { { 80 * G, 0, 0 }, { 80 * G, 0, 0 } };
    assert_int_equal(vgpu_place_choose(t, 2, G, VGPU_PLACE_BINPACK, false), 0);       /* ties: lower */
    assert_int_equal(vgpu_place_choose(t, 2, G, VGPU_PLACE_SPREAD, false), 0);
    struct vgpu_place_cand over[1] = { { 10 * G, 12 * G, 0 } };                          /* overcommitted */
    assert_int_equal(vgpu_place_choose(over, 1, 0, VGPU_PLACE_BINPACK, false), 0);
    assert_int_equal(vgpu_place_choose(over, 1, 1, VGPU_PLACE_BINPACK, false), -1);
    /* overcommit picks among GPUs large enough: two H100s with 70G jobs and an empty A100 40G,
     * a 70G job goes to an H100, not to the A100 where it could never fit (issue 13) */
    struct vgpu_place_cand mixed[3] = { { 80 * G, 70 * G, 0 }, { 80 * G, 70 * G, 0 }, { 40 * G, 0, 0 } };
    assert_int_equal(vgpu_place_choose(mixed, 3, 70 * G, VGPU_PLACE_BINPACK, true), 0);
    assert_int_equal(vgpu_place_choose(mixed, 3, 90 * G, VGPU_PLACE_BINPACK, true), -1);   /* none large enough */
    assert_int_equal(vgpu_place_policy_parse("spread"), VGPU_PLACE_SPREAD);
    assert_int_equal(vgpu_place_policy_parse("fit"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_layout_check),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_choose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
