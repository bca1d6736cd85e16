/* vgpu run --gpus N: the choice of N GPUs together (vgpu_place_choose_group): all or nothing,
 * nearest first (NVLink, then one PCIe switch, then one CPU), then binpack or spread, then the
 * lowest positions; overcommit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "vgpu/placement.h"
#include "vgpu/topology.h"

static const uint64_t G = 1ULL << 30;

/* Eight GPUs as tests/fakegpu/scenarios/h100x8.json: NVLink islands 0-3 and 4-7, PCIe
 * switches {0,1} {2,3} {4,5} {6,7}, a CPU per island. */
static void hgx(uint8_t *near)
{
    for (unsigned i = 0; i < 8; i++)
        for (unsigned j = 0; j < 8; j++)
            near[i * 8 + j] = i == j ? VGPU_NEAR_SAME_GPU : i / 4 == j / 4 ? VGPU_NEAR_NVLINK : VGPU_NEAR_SYSTEM;
}

/* Eight PCIe GPUs, no NVLink: switches {0,1} {2,3} {4,5} {6,7}, CPUs {0-3} {4-7}. */
static void pcie(uint8_t *near)
{
    for (unsigned i = 0; i < 8; i++)
        for (unsigned j = 0; j < 8; j++)
            near[i * 8 + j] = i == j ? VGPU_NEAR_SAME_GPU : i / 2 == j / 2 ? VGPU_NEAR_PCIE_SWITCH
                            : i / 4 == j / 4 ? VGPU_NEAR_CPU : VGPU_NEAR_SYSTEM;
}

static void empty(struct vgpu_place_cand *c, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        c[i] = (struct vgpu_place_cand){ 80 * G, 0, 0 };
}

static void test_binpack_spread(void **state)
{
    (void)state;
    struct vgpu_place_cand c[8];
    uint8_t near[64];
    unsigned p[8];
    hgx(near);
    empty(c, 8);
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_NVLINK);
    assert_int_equal(p[0], 0);   /* ties: the lowest positions */
    assert_int_equal(p[1], 1);
    c[0].promised = c[5].promised = 40 * G;
    /* binpack: the fullest that fit, both in one island */
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_NVLINK);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 1);
    /* spread: the emptiest */
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_SPREAD, false, 2, near, p), VGPU_NEAR_NVLINK);
    assert_int_equal(p[0], 1);
    assert_int_equal(p[1], 2);
}

static void test_topology_first(void **state)
{
    (void)state;
    struct vgpu_place_cand c[8];
    uint8_t near[64];
    unsigned p[8];
    hgx(near);
    empty(c, 8);
    c[3].promised = c[4].promised = 40 * G;
    /* by memory alone binpack takes 3 and 4, which share no NVLink */
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, NULL, p), 0);
    assert_int_equal(p[0], 3);
    assert_int_equal(p[1], 4);
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_NVLINK);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 3);
    /* four in one island */
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 4, near, p), VGPU_NEAR_NVLINK);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[3], 3);
    /* no island has four with room: across islands */
    c[0].promised = c[5].promised = 75 * G;
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 4, near, p), VGPU_NEAR_SYSTEM);
    /* without NVLink, one PCIe switch, then one CPU */
    pcie(near);
    empty(c, 8);
    c[2].promised = 40 * G;
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_PCIE_SWITCH);
    assert_int_equal(p[0], 2);
    assert_int_equal(p[1], 3);
    c[3].promised = 75 * G;   /* 2's switch partner is full: one CPU */
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_PCIE_SWITCH);
    assert_int_equal(p[0], 0);   /* a pair behind one switch beats the fullest GPU beside a far one */
    assert_int_equal(p[1], 1);
    assert_int_equal(vgpu_place_choose_group(c, 8, 10 * G, VGPU_PLACE_BINPACK, false, 3, near, p), VGPU_NEAR_CPU);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 1);
    assert_int_equal(p[2], 2);
}

static void test_all_or_nothing(void **state)
{
    (void)state;
    struct vgpu_place_cand c[2] = { { 80 * G, 60 * G, 0 }, { 80 * G, 0, 0 } };
    unsigned p[2];
    assert_int_equal(vgpu_place_choose_group(c, 2, 30 * G, VGPU_PLACE_BINPACK, false, 2, NULL, p), -1);
    assert_int_equal(vgpu_place_choose_group(c, 2, 30 * G, VGPU_PLACE_BINPACK, false, 1, NULL, p), 0);
    assert_int_equal(p[0], 1);
    assert_int_equal(vgpu_place_choose_group(c, 2, 10 * G, VGPU_PLACE_BINPACK, false, 3, NULL, p), -1);
    /* overcommit: both are large enough */
    assert_int_equal(vgpu_place_choose_group(c, 2, 30 * G, VGPU_PLACE_BINPACK, true, 2, NULL, p), 0);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 1);
    struct vgpu_place_cand small[2] = { { 80 * G, 0, 0 }, { 40 * G, 0, 1 } };
    assert_int_equal(vgpu_place_choose_group(small, 2, 50 * G, VGPU_PLACE_BINPACK, true, 2, NULL, p), -1);
}

/* Issue 36 N16: two H100s and an A100 (scenario mixed.json: one CPU, no NVLink). binpack put
 * an H100 with the A100 (the fuller) while both H100s were free; GPUs of one model come first,
 * and a mixed group only when no group of one model fits. */
static void test_one_model_first(void **state)
{
    (void)state;
    struct vgpu_place_cand c[3] = { { 80 * G, 0, 0 }, { 80 * G, 0, 0 }, { 40 * G, 0, 2 } };
    uint8_t near[9];
    unsigned p[3];
    for (unsigned i = 0; i < 9; i++)
        near[i] = i % 4 == 0 ? VGPU_NEAR_SAME_GPU : VGPU_NEAR_CPU;
    for (int pol = VGPU_PLACE_BINPACK; pol <= VGPU_PLACE_SPREAD; pol++) {
        assert_int_equal(vgpu_place_choose_group(c, 3, 10 * G, pol, false, 2, near, p), VGPU_NEAR_CPU);
        assert_int_equal(p[0], 0);
        assert_int_equal(p[1], 1);
    }
    /* one model before nearness: the H100s one CPU apart, an H100 and the A100 on a switch */
    near[0 * 3 + 2] = near[2 * 3 + 0] = VGPU_NEAR_PCIE_SWITCH;
    assert_int_equal(vgpu_place_choose_group(c, 3, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_CPU);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 1);
    /* an H100 full: the mixed pair is the only one that fits */
    c[1].promised = 75 * G;
    assert_int_equal(vgpu_place_choose_group(c, 3, 10 * G, VGPU_PLACE_BINPACK, false, 2, near, p), VGPU_NEAR_PCIE_SWITCH);
    assert_int_equal(p[0], 0);
    assert_int_equal(p[1], 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binpack_spread),
        cmocka_unit_test(test_topology_first),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_one_model_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
