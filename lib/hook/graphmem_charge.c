/* graphmem_charge.c: what the devices' graph pools hold, charged to the job (issue 11, part 6).
 *
 * The driver serves graph allocations from one graph pool per device; what that pool has
 * reserved (RESERVED_MEM_CURRENT) is what the job is charged, settled here whenever it is
 * measured: growth is forced (the memory is the driver's already), shrinking is released.
 * This is the measuring half of graph memory, below the admission (admit.c re-measures it
 * before refusing an allocation; graphmem.c asks it before a launch): it calls down into the
 * counters (acct.c) only, so that both can call it without a cycle. Nothing happens until the
 * process has seen graph memory at all (vgpu_graphmem_saw), which keeps the common path free. */
#include <stdatomic.h>

#include "hook.h"
#include "vgpu/region.h"

#define MAXDEV VGPU_REGION_MAX_DEVICES

static _Atomic bool graph_mem_seen;
static _Atomic uint64_t graph_charged[MAXDEV];   /* the device's graph pool as charged to the job */

static bool graph_attr(int dev, CUgraphMem_attribute attr, uint64_t *v)
{
    vgpu_cuDeviceGetGraphMemAttribute_fn f =
        (vgpu_cuDeviceGetGraphMemAttribute_fn)vgpu_real_cuda_sym("cuDeviceGetGraphMemAttribute");
    cuuint64_t x = 0;
    if (!f || f(dev, attr, &x) != CUDA_SUCCESS)
        return false;
    *v = x;
    return true;
}

void vgpu_graphmem_reconcile(int dev)
{
    if (!atomic_load_explicit(&graph_mem_seen, memory_order_relaxed) || dev < 0 || dev >= MAXDEV)
        return;
    uint64_t reserved;
    if (!graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved))
        return;
    uint64_t old = atomic_exchange(&graph_charged[dev], reserved);
    if (reserved > old)
        vgpu_acct_force(dev, reserved - old);
    else if (old > reserved)
        vgpu_acct_release(dev, old - reserved);
}

bool vgpu_graphmem_seen(void)
{
    return atomic_load_explicit(&graph_mem_seen, memory_order_relaxed);
}

void vgpu_graph_launched(void)
{
    if (__builtin_expect(atomic_load_explicit(&graph_mem_seen, memory_order_relaxed), 0) && vgpu_job())
        vgpu_graphmem_reconcile(vgpu_current_device());
}

void vgpu_graphmem_saw(void)
{
    if (!atomic_load_explicit(&graph_mem_seen, memory_order_relaxed))
        atomic_store(&graph_mem_seen, true);
}

/* Memory the device's graph pool holds, charged to the job, that no graph uses now. */
uint64_t vgpu_graphmem_spare(int dev)
{
    uint64_t used, charged = atomic_load(&graph_charged[dev]);
    if (!graph_attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used))
        return 0;
    return charged > used ? charged - used : 0;
}
