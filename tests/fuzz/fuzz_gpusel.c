/* fuzz_gpusel: the --gpu selector (lib/core/gpu/gpu.c: indexes, UUIDs and prefixes, PCI bus ids,
 * MIG UUIDs, comma lists, "all") against a fixed machine of two H100s, the second in MIG mode
 * with two MIG devices. Invariants: a selection names only positions of the list, each once. */
#include "fuzz.h"

#include "vgpu/gpu.h"

static struct vgpu_gpu_list machine;

static void add_gpu(unsigned index, const char *uuid, const char *pci, bool mig_mode)
{
    struct vgpu_gpu *g = &machine.gpu[machine.count++];
    g->index = index;
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    snprintf(g->name, sizeof g->name, "NVIDIA H100 80GB HBM3");
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", pci);
    g->mem_total = 80ULL << 30;
    g->has_mig_mode = true;
    g->mig_current = g->mig_pending = mig_mode;
    g->compute_mode = 0;
}

static void add_mig(unsigned parent, unsigned gi, unsigned ci, const char *uuid)
{
    struct vgpu_gpu *g = &machine.gpu[machine.count++];
    g->index = parent;
    g->is_mig = true;
    g->mig_gi = gi;
    g->mig_ci = ci;
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    snprintf(g->name, sizeof g->name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
    g->mem_total = 40ULL << 30;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!machine.count) {
        add_gpu(0, "GPU-8f3a1c2e-0000-4000-8000-000000000001", "00000000:18:00.0", false);
        add_gpu(1, "GPU-8f3b7d00-0000-4000-8000-000000000002", "00000000:3B:00.0", true);
        add_mig(1, 1, 0, "MIG-11111111-2222-5333-8444-555555555555");
        add_mig(1, 2, 0, "MIG-11111111-9999-5333-8444-666666666666");
    }
    char *s = fuzz_string(data, size);
    struct vgpu_gpu_sel sel;
    struct vgpu_err e;
    memset(&sel, 0xA5, sizeof sel);
    memset(&e, 0, sizeof e);
    if (vgpu_gpus_select(&machine, s, &sel, &e) == 0) {
        FUZZ_ASSERT(sel.count <= machine.count);
        for (unsigned i = 0; i < sel.count; i++) {
            FUZZ_ASSERT(sel.pos[i] < machine.count);
            for (unsigned j = 0; j < i; j++)
                FUZZ_ASSERT(sel.pos[i] != sel.pos[j]);
        }
    } else {
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
    }
    free(s);
    return 0;
}
