/* shared.c: TEMPORARY process-local device model, until tests/fakegpu/common/fakestate.h lands. */
#include <stdio.h>
#include <string.h>

#include "fakecuda.h"

int fc_ndev;
struct fc_device fc_devs[FC_MAX_DEVICES];
int fc_driver_version = 13000;
unsigned long long fc_ctx_overhead = 543162368ULL;
static unsigned long long used[FC_MAX_DEVICES];
static uint64_t busy_until[FC_MAX_DEVICES];

CUresult fc_shared_init(void)
{
    fc_ndev = 1;
    struct fc_device *d = &fc_devs[0];
    snprintf(d->name, sizeof d->name, "NVIDIA H100 80GB HBM3");
    snprintf(d->uuid, sizeof d->uuid, "GPU-00000000-0000-0000-0000-000000000000");
    snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "00000000:1B:00.0");
    d->pci_bus = 0x1b;
    d->total_mem = 85520809984ULL;
    d->sm_count = 132;
    d->cc_major = 9;
    d->mig = -1;
    return CUDA_SUCCESS;
}

CUresult fc_dev_charge(int ordinal, unsigned long long bytes)
{
    if (used[ordinal] + bytes > fc_devs[ordinal].total_mem)
        return CUDA_ERROR_OUT_OF_MEMORY;
    used[ordinal] += bytes;
    return CUDA_SUCCESS;
}

void fc_dev_uncharge(int ordinal, unsigned long long bytes)
{
    used[ordinal] = used[ordinal] > bytes ? used[ordinal] - bytes : 0;
}

void fc_dev_meminfo(int ordinal, unsigned long long *free_bytes, unsigned long long *total)
{
    *total = fc_devs[ordinal].total_mem;
    *free_bytes = *total - used[ordinal];
}

uint64_t fc_dev_run(int ordinal, uint64_t earliest_ns, uint64_t dur_ns)
{
    uint64_t start = earliest_ns > busy_until[ordinal] ? earliest_ns : busy_until[ordinal];
    busy_until[ordinal] = start + dur_ns;
    return start + dur_ns;
}

void fc_dev_attach(int ordinal, bool attached) { (void)ordinal; (void)attached; }
void fc_shared_release_all(void) {}
void fc_dev_parent_uuid(int ordinal, unsigned char out[16]) { memcpy(out, fc_devs[ordinal].uuid_bytes, 16); }
