/* models.c: facts of the GPU models a scenario can name ("model": "h100-80gb"), so scenario
 * files stay short. Numbers from shared/reference/nvml.md §3, §8 and §10; clocks, power and
 * the reserved size are plausible values, not measurements. */
#include <stdio.h>
#include <string.h>

#include "fs_internal.h"

#define MIB (1024ULL * 1024ULL)

struct gi_row {
    unsigned index, id;
    const char *name;
    unsigned slices, instances, sm, ce, dec, enc, jpg, ofa;
    unsigned long long mb;
    unsigned size, nstarts, starts[8];
};

#define ALL7 7, {0, 1, 2, 3, 4, 5, 6}

static const struct gi_row h100_rows[] = {
    {0, 19, "1g.10gb", 1, 7, 16, 1, 1, 0, 1, 0, 9984, 1, ALL7},
    {7, 20, "1g.10gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 9984, 1, ALL7},
    {9, 15, "1g.20gb", 1, 4, 26, 1, 1, 0, 1, 0, 20096, 2, 4, {0, 2, 4, 6}},
    {1, 14, "2g.20gb", 2, 3, 32, 2, 2, 0, 2, 0, 20096, 2, 3, {0, 2, 4}},
    {2, 9, "3g.40gb", 3, 2, 60, 3, 3, 0, 3, 0, 40448, 4, 2, {0, 4}},
    {3, 5, "4g.40gb", 4, 1, 64, 4, 4, 0, 4, 0, 40448, 4, 1, {0}},
    {4, 0, "7g.80gb", 7, 1, 132, 8, 7, 0, 7, 1, 81152, 8, 1, {0}},
};

static const struct gi_row h200_rows[] = {
    {0, 19, "1g.18gb", 1, 7, 16, 1, 1, 0, 1, 0, 16384, 1, ALL7},
    {7, 20, "1g.18gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 16384, 1, ALL7},
    {9, 15, "1g.35gb", 1, 4, 26, 1, 1, 0, 1, 0, 33280, 2, 4, {0, 2, 4, 6}},
    {1, 14, "2g.35gb", 2, 3, 32, 2, 2, 0, 2, 0, 33280, 2, 3, {0, 2, 4}},
    {2, 9, "3g.71gb", 3, 2, 60, 3, 3, 0, 3, 0, 71424, 4, 2, {0, 4}},
    {3, 5, "4g.71gb", 4, 1, 64, 4, 4, 0, 4, 0, 71424, 4, 1, {0}},
    {4, 0, "7g.141gb", 7, 1, 132, 8, 7, 0, 7, 1, 143360, 8, 1, {0}},
};

static const struct gi_row a100_40_rows[] = {
    {0, 19, "1g.5gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864, 1, ALL7},
    {7, 20, "1g.5gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 4864, 1, ALL7},
    {9, 15, "1g.10gb", 1, 4, 14, 1, 1, 0, 0, 0, 9856, 2, 4, {0, 2, 4, 6}},
    {1, 14, "2g.10gb", 2, 3, 28, 2, 1, 0, 0, 0, 9856, 2, 3, {0, 2, 4}},
    {2, 9, "3g.20gb", 3, 2, 42, 3, 2, 0, 0, 0, 19968, 4, 2, {0, 4}},
    {3, 5, "4g.20gb", 4, 1, 56, 4, 2, 0, 0, 0, 19968, 4, 1, {0}},
    {4, 0, "7g.40gb", 7, 1, 98, 7, 5, 0, 1, 1, 40192, 8, 1, {0}},
};

struct model {
    const char *key, *name;
    unsigned pci_device_id, pci_subsystem_id;
    unsigned long long total, reserved, ctx_overhead;
    unsigned sm, cc_major, cc_minor;
    unsigned max_gr, max_mem, max_video, idle_gr;
    unsigned temp, power_mw, limit_mw, pcie_gen;
    const struct gi_row *rows;
    unsigned nrows;
    struct fs_uvm_rates uvm;   /* managed memory's rates: only where measured (else 0: no time) */
};

/* Measured on an H200 (PCIe Gen5 x16, driver 580.159.04) on 2026-12-02 with
 * tests/fakegpu/tools/uvm_rates.py, 4 GiB each: a kernel faulting pages in 6.3-6.5 GB/s (fresh
 * pages and pages with data alike), a prefetch to the device 50.8 / 45.4 GB/s, of never-touched
 * pages 262 GB/s, a prefetch to the host 15.4-15.6 GB/s (README.md "Managed memory's time"). */
#define H200_UVM { .fault_mbps = 6300, .prefetch_mbps = 50000, .populate_mbps = 262000, .prefetch_host_mbps = 15500 }

static const struct model models[] = {
    {"h100-80gb", "NVIDIA H100 80GB HBM3", 0x233010DE, 0x16C110DE, 85520809984ULL, 566 * MIB, 536870912ULL, 132, 9, 0,
     1980, 2619, 1545, 345, 33, 71000, 700000, 5, h100_rows, sizeof h100_rows / sizeof h100_rows[0], {0}},
    {"h200", "NVIDIA H200", 0x233510DE, 0x18B010DE, 150754820096ULL, 644939776ULL, 536870912ULL, 132, 9, 0, 1980, 3201,
     1545, 345, 31, 76000, 700000, 5, h200_rows, sizeof h200_rows / sizeof h200_rows[0], H200_UVM},
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 0x20B010DE, 0x134F10DE, 42949672960ULL, 422 * MIB, 452984832ULL, 108, 8,
     0, 1410, 1215, 1275, 210, 30, 52000, 400000, 4, a100_40_rows, sizeof a100_40_rows / sizeof a100_40_rows[0], {0}},
};

const char *fs_model_names(void) { return "h100-80gb, h200, a100-40gb"; }

/* Valid CI sizes in a GI of g slices (reference §9): c <= g and not (c < g and 2c > g + 1). */
static void add_ci_profiles(struct fs_profile *p)
{
    static const unsigned sizes[] = {1, 2, 3, 4, 7}; /* CI profile index = position here */
    unsigned g = p->slices;
    p->nci = 0;
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned c = sizes[i];
        if (c > g || (c < g && 2 * c > g + 1))
            continue;
        struct fs_ci_profile *ci = &p->ci[p->nci++];
        ci->index = ci->id = i;
        ci->slices = c;
        ci->instances = g / c;
        /* SMs split evenly over compute slices, rounded down to a TPC (2 SMs); unconfirmed on Hopper. */
        ci->sm = c == g ? p->sm : (p->sm * c / g) & ~1u;
        char gi_name[sizeof p->name];
        memcpy(gi_name, p->name, sizeof gi_name);
        if (c == g)
            snprintf(ci->name, sizeof ci->name, "%s", gi_name);
        else
            snprintf(ci->name, sizeof ci->name, "%uc.%s", c, gi_name);
    }
}

bool fs_model_apply(const char *key, struct fs_gpu_static *g)
{
    const struct model *m = NULL;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (strcmp(models[i].key, key) == 0)
            m = &models[i];
    if (!m)
        return false;
    snprintf(g->name, sizeof g->name, "%s", m->name);
    g->pci_device_id = m->pci_device_id;
    g->pci_subsystem_id = m->pci_subsystem_id;
    g->mem_total = m->total;
    g->mem_reserved = m->reserved;
    g->ctx_overhead = m->ctx_overhead;
    g->sm_count = m->sm;
    g->cc_major = m->cc_major;
    g->cc_minor = m->cc_minor;
    g->max_graphics = g->max_sm = m->max_gr;
    g->max_mem = g->clock_mem = m->max_mem;
    g->max_video = m->max_video;
    g->clock_graphics = g->clock_sm = m->idle_gr;
    g->clock_video = m->max_video / 2;
    g->temperature = m->temp;
    g->power_mw = m->power_mw;
    g->power_limit_mw = m->limit_mw;
    g->fan = 0; /* SXM parts have no fan of their own: NVML says NOT_SUPPORTED */
    g->pcie_gen = m->pcie_gen;
    g->pcie_width = 16;
    g->mig_capable = true;
    g->uvm = m->uvm;
    g->nprofiles = m->nrows;
    for (unsigned i = 0; i < m->nrows; i++) {
        const struct gi_row *r = &m->rows[i];
        struct fs_profile *p = &g->profiles[i];
        memset(p, 0, sizeof *p);
        p->index = r->index;
        p->id = r->id;
        snprintf(p->name, sizeof p->name, "%s", r->name);
        p->slices = r->slices;
        p->instances = r->instances;
        p->sm = r->sm;
        p->ce = r->ce;
        p->dec = r->dec;
        p->enc = r->enc;
        p->jpg = r->jpg;
        p->ofa = r->ofa;
        p->mem_mb = r->mb;
        p->placement_size = r->size;
        p->nplacements = r->nstarts;
        memcpy(p->placements, r->starts, sizeof r->starts);
        add_ci_profiles(p);
    }
    return true;
}

unsigned fs_gi_swizzle_id(unsigned start, unsigned size)
{
    switch (size) {
    case 8: return 0;
    case 4: return 1 + start / 4;
    case 2: return 3 + start / 2;
    default: return 7 + start;
    }
}
