/* vmm.c: virtual memory management (cuMemCreate / cuMemMap ...).
 * A physical allocation on a DEVICE location is charged to that device at cuMemCreate and
 * given back when it has been released and its last mapping is gone, as the driver does;
 * host locations (HOST, HOST_NUMA, HOST_NUMA_CURRENT) cost no device memory. Sizes and
 * addresses must be multiples of the granularity, 2 MiB for every location. */
#include <stdlib.h>

#include "fakecuda.h"

#define GRANULARITY (2ULL * FC_MIB)

struct phys {
    uint32_t magic;
    size_t size;
    int device;              /* -1 for host locations */
    unsigned long long charged;
    int mappings;
    bool released;
};
#define PHYS_MAGIC 0x9A75A000u

struct mapping {
    struct mapping *next;
    CUdeviceptr va;
    size_t size;
    struct phys *phys;
};
static struct mapping *mappings;

static CUresult phys_valid(CUmemGenericAllocationHandle h, struct phys **out)
{
    struct phys *p = (struct phys *)(uintptr_t)h;
    if (!p || p->magic != PHYS_MAGIC || p->released)
        return CUDA_ERROR_INVALID_VALUE;
    *out = p;
    return CUDA_SUCCESS;
}

static void phys_put(struct phys *p)
{
    if (p->released && p->mappings == 0) {
        if (p->charged)
            fc_dev_uncharge(p->device, p->charged);
        p->magic = 0;
        free(p);
    }
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return prop->location.id >= 0 && prop->location.id < fc_ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = check_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    if (!granularity || ((int)option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && (int)option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = check_prop(prop);
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || size == 0 || size % GRANULARITY || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct phys *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->magic = PHYS_MAGIC;
    p->size = size;
    p->device = -1;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        pthread_mutex_lock(&fc_lock);
        r = fc_dev_charge(prop->location.id, size);
        pthread_mutex_unlock(&fc_lock);
        if (r != CUDA_SUCCESS) {
            free(p);
            return r;
        }
        p->device = prop->location.id;
        p->charged = size;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FC_TRACE();
    struct phys *p;
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = phys_valid(handle, &p);
    if (r == CUDA_SUCCESS) {
        p->released = true;
        phys_put(p);
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    FC_TRACE();
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    (void)addr; /* a hint */
    if (!ptr || size == 0 || size % GRANULARITY || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    CUdeviceptr p = fc_va_reserve(size, alignment > GRANULARITY ? alignment : GRANULARITY);
    struct fc_alloc *a = fc_alloc_new(FC_ALLOC_VA, p, size, c->device, c);
    pthread_mutex_unlock(&fc_lock);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(ptr, false);
    if (!a || a->kind != FC_ALLOC_VA || a->size != size)
        r = CUDA_ERROR_INVALID_VALUE;
    else
        for (struct mapping *m = mappings; m; m = m->next)
            if (m->va >= ptr && m->va < ptr + size)
                r = CUDA_ERROR_INVALID_VALUE; /* still mapped */
    if (r == CUDA_SUCCESS)
        fc_alloc_remove(a);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    FC_TRACE();
    struct phys *p;
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = phys_valid(handle, &p);
    struct fc_alloc *va = fc_alloc_find(ptr, true);
    if (r == CUDA_SUCCESS && (flags || size == 0 || size % GRANULARITY || ptr % GRANULARITY ||
                              offset % GRANULARITY || offset + size > p->size || !va ||
                              va->kind != FC_ALLOC_VA || ptr + size > va->base + va->size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (struct mapping *m = mappings; r == CUDA_SUCCESS && m; m = m->next)
        if (ptr < m->va + m->size && m->va < ptr + size)
            r = CUDA_ERROR_ALREADY_MAPPED;
    struct mapping *m = NULL;
    if (r == CUDA_SUCCESS && !(m = calloc(1, sizeof *m)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        m->va = ptr;
        m->size = size;
        m->phys = p;
        m->next = mappings;
        mappings = m;
        p->mappings++;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    bool found = false;
    for (struct mapping **pp = &mappings; *pp;) {
        struct mapping *m = *pp;
        if (m->va >= ptr && m->va + m->size <= ptr + size) {
            *pp = m->next;
            m->phys->mappings--;
            phys_put(m->phys);
            free(m);
            found = true;
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&fc_lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!desc || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE &&
            desc[i].location.type != CU_MEM_LOCATION_TYPE_HOST &&
            desc[i].location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
            (desc[i].location.id < 0 || desc[i].location.id >= fc_ndev))
            return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&fc_lock);
    size_t covered = 0;
    for (struct mapping *m = mappings; m; m = m->next)
        if (m->va >= ptr && m->va + m->size <= ptr + size)
            covered += m->size;
    pthread_mutex_unlock(&fc_lock);
    return covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
