/* memory.c: linear device memory, managed and pinned host memory, copies and pointer queries.
 *
 * Device pointers are addresses in a private range (from 1 TiB up, never reused) that is not
 * mapped in the process, so a host dereference of a device pointer crashes as on real hardware.
 * Managed and host allocations are real memory, because programs touch them from the host;
 * managed memory is paged (managed.c): only its resident pages take device memory.
 * Every allocation belongs to the context current at the time and is freed with it. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fakecuda.h"

static struct fc_alloc *allocs;
static CUdeviceptr va_next = 0x10000000000ULL; /* 1 TiB */

/* Caller holds fc_lock. */
CUdeviceptr fc_va_reserve(size_t size, size_t align)
{
    if (align < 512)
        align = 512;
    CUdeviceptr p = fc_round_up(va_next, align);
    va_next = fc_round_up(p + (size ? size : 1), 512);
    return p;
}

struct fc_alloc *fc_alloc_new(enum fc_alloc_kind kind, CUdeviceptr base, size_t size, int device,
                              struct fc_ctx *ctx)
{
    struct fc_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->kind = kind;
    a->base = base;
    a->size = size;
    a->device = device;
    a->ctx = ctx;
    a->next = allocs;
    allocs = a;
    return a;
}

struct fc_alloc *fc_alloc_first(void)
{
    return allocs;
}

struct fc_alloc *fc_alloc_find(CUdeviceptr p, bool containing)
{
    for (struct fc_alloc *a = allocs; a; a = a->next) {
        if (a->base == p)
            return a;
        if (containing && p >= a->base && p < a->base + (a->size ? a->size : 1))
            return a;
    }
    return NULL;
}

void fc_alloc_remove(struct fc_alloc *a)
{
    for (struct fc_alloc **pp = &allocs; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    if (a->charged)
        fc_dev_uncharge(a->device, a->charged);
    if (a->kind == FC_ALLOC_MANAGED)
        fc_managed_release(a);
    if (a->host) {
        if (a->kind == FC_ALLOC_MANAGED)
            munmap(a->host, a->size ? a->size : 1);
        else
            free(a->host);
    }
    free(a);
}

/* Caller holds fc_lock. */
void fc_ctx_free_allocations(struct fc_ctx *ctx)
{
    fc_pool_forget_ctx(ctx);
    fc_graph_forget_ctx(ctx);
    struct fc_alloc *a = allocs, *next;
    for (; a; a = next) {
        next = a->next;
        if (a->ctx != ctx)
            continue;
        if (a->kind == FC_ALLOC_POOL)
            fc_pool_free(a);
        else
            fc_alloc_remove(a);
    }
}

/* Caller holds fc_lock. */
CUresult fc_check_range(CUdeviceptr p, size_t n)
{
    struct fc_alloc *a = fc_alloc_find(p, true);
    if (!a || a->kind == FC_ALLOC_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    if (p + n > a->base + a->size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult fc_check_host_range(const void *p, size_t n)
{
    return (p || n == 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult device_alloc(CUdeviceptr *dptr, size_t size, size_t align, enum fc_alloc_kind kind)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    /* Real allocations take whole 2 MiB pages of device memory for large sizes; the fake
     * charges what was asked, rounded to 512 bytes, so tests can reason in exact bytes. */
    unsigned long long charge = fc_round_up(size, 512);
    r = fc_dev_charge_block(c->device, charge);
    if (r == CUDA_SUCCESS) {
        CUdeviceptr p = fc_va_reserve(size, align);
        struct fc_alloc *a = fc_alloc_new(kind, p, size, c->device, c);
        if (!a) {
            fc_dev_uncharge(c->device, charge);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            a->charged = charge;
            *dptr = p;
        }
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FC_TRACE();
    return device_alloc(dptr, bytesize, 512, FC_ALLOC_DEVICE);
}

/* The CUDA 2.x ABIs return a 32-bit pointer: the allocation moves to a low range kept for
 * them (the 64-bit record stays the one that is charged). Frees the allocation on failure. */
static CUresult rehome_low(CUdeviceptr p, size_t size, CUdeviceptr_v1 *out)
{
    static CUdeviceptr low_next = 0x10000000ULL;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(p, false);
    CUdeviceptr low = fc_round_up(low_next, 512);
    if (!a || low + size > 0xFFFFFFFFULL) {
        if (a)
            fc_alloc_remove(a);
        pthread_mutex_unlock(&fc_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    low_next = low + (size ? size : 1);
    a->base = low;
    pthread_mutex_unlock(&fc_lock);
    *out = (CUdeviceptr_v1)low;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    FC_TRACE();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p;
    CUresult r = device_alloc(&p, bytesize, 512, FC_ALLOC_DEVICE);
    return r != CUDA_SUCCESS ? r : rehome_low(p, bytesize, dptr);
}

/* The pitch is the row width rounded up to 512 bytes, the texture-pitch granularity the real
 * driver uses for ElementSizeBytes 4..16. */
static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height, unsigned int elem)
{
    if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (size_t)fc_round_up(width, 512);
    CUresult r = device_alloc(dptr, p * height, 512, FC_ALLOC_DEVICE);
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    FC_TRACE();
    return alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes)
{
    FC_TRACE();
    CUdeviceptr p;
    size_t pitch;
    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = alloc_pitch(&p, &pitch, WidthInBytes, Height, ElementSizeBytes);
    if (r == CUDA_SUCCESS)
        r = rehome_low(p, pitch * Height, dptr);
    if (r == CUDA_SUCCESS)
        *pPitch = (unsigned int)pitch;
    return r;
}

static CUresult mem_free(CUdeviceptr dptr)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    struct fc_ctx *cur;
    if (fc_current(&cur) == CUDA_ERROR_ILLEGAL_ADDRESS)
        return CUDA_ERROR_ILLEGAL_ADDRESS;   /* a broken context frees nothing until it is destroyed */
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(dptr, false);
    if (!a || a->kind == FC_ALLOC_HOST || a->kind == FC_ALLOC_VA || a->kind == FC_ALLOC_ARRAY ||
        a->kind == FC_ALLOC_POOL_FREEING) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (a->kind == FC_ALLOC_GRAPH) {
        r = fc_graph_alloc_free(a);
    } else if (a->kind == FC_ALLOC_POOL) {
        /* cuMemFree on a pool allocation frees it synchronously back to its pool. */
        fc_pool_free(a);
    } else {
        fc_alloc_remove(a);
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FC_TRACE();
    return mem_free(dptr);
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    FC_TRACE();
    return mem_free(dptr);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(dptr, true);
    if (!a || a->kind == FC_ALLOC_HOST) {
        r = CUDA_ERROR_NOT_FOUND;
    } else {
        if (pbase)
            *pbase = a->base;
        if (psize)
            *psize = a->size;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult mem_get_info(unsigned long long *free_b, unsigned long long *total)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    fc_managed_sync_evictions(c->device);
    pthread_mutex_unlock(&fc_lock);
    fc_dev_meminfo(c->device, free_b, total);
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    FC_TRACE();
    unsigned long long f, t;
    if (!free_b || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = mem_get_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free_b = f;
        *total = t;
    }
    return r;
}

CUresult cuMemGetInfo(unsigned int *free_b, unsigned int *total)
{
    FC_TRACE();
    unsigned long long f, t;
    if (!free_b || !total)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = mem_get_info(&f, &t);
    if (r == CUDA_SUCCESS) {
        *free_b = f > 0xFFFFFFFFULL ? 0xFFFFFFFFu : (unsigned int)f;
        *total = t > 0xFFFFFFFFULL ? 0xFFFFFFFFu : (unsigned int)t;
    }
    return r;
}

/* ---- pinned host memory: real memory, never charged to the device ---- */

static CUresult host_alloc(void **pp, size_t size)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pp || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = calloc(1, size);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_new(FC_ALLOC_HOST, (CUdeviceptr)(uintptr_t)p, size, c->device, c);
    if (a)
        a->host = p;
    pthread_mutex_unlock(&fc_lock);
    if (!a) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FC_TRACE();
    return host_alloc(pp, bytesize);
}

CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    FC_TRACE();
    return host_alloc(pp, bytesize);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FC_TRACE();
    if (Flags & ~0x7u)
        return CUDA_ERROR_INVALID_VALUE;
    return host_alloc(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find((CUdeviceptr)(uintptr_t)p, false);
    if (!a || a->kind != FC_ALLOC_HOST)
        r = CUDA_ERROR_INVALID_VALUE;
    else
        fc_alloc_remove(a);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

static CUresult host_register(void *p, size_t size)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    return (p && size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    FC_TRACE();
    (void)Flags;
    return host_register(p, bytesize);
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    FC_TRACE();
    (void)Flags;
    return host_register(p, bytesize);
}

CUresult cuMemHostUnregister(void *p)
{
    FC_TRACE();
    return host_register(p, 1);
}

/* ---- copies and memsets: the fake moves no data, but validates like the driver ---- */

static CUresult check_dev_range(CUdeviceptr p, size_t n)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_check_range(p, n);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

/* Managed memory is real: copies into and out of it really happen. */
static void *managed_host(CUdeviceptr p)
{
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(p, true);
    void *h = (a && a->kind == FC_ALLOC_MANAGED) ? (char *)a->host + (p - a->base) : NULL;
    pthread_mutex_unlock(&fc_lock);
    return h;
}

/* A copy between host memory and device memory crosses the PCIe link: the GPU's NVML byte
 * counters see it (rx into the device, tx out of it). Managed and host memory are on the host
 * side here (copies into managed memory do not migrate it, see managed.c). */
static void count_link(CUdeviceptr dev, size_t n, bool to_device)
{
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(dev, true);
    int device = a && a->kind != FC_ALLOC_MANAGED && a->kind != FC_ALLOC_HOST ? a->device : -1;
    pthread_mutex_unlock(&fc_lock);
    if (device >= 0)
        fc_dev_pcie(device, to_device ? 0 : n, to_device ? n : 0);
}

static CUresult htod(CUdeviceptr dst, const void *src, size_t n)
{
    CUresult r = check_dev_range(dst, n);
    if (r == CUDA_SUCCESS)
        r = fc_check_host_range(src, n);
    void *h;
    if (r == CUDA_SUCCESS && n && (h = managed_host(dst)))
        memmove(h, src, n);
    else if (r == CUDA_SUCCESS && n)
        count_link(dst, n, true);
    return r;
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t n)
{
    CUresult r = check_dev_range(src, n);
    if (r == CUDA_SUCCESS)
        r = fc_check_host_range(dst, n);
    void *h;
    if (r == CUDA_SUCCESS && n) {
        if ((h = managed_host(src))) {
            memmove(dst, h, n);
        } else {
            memset(dst, 0, n); /* device contents are not simulated */
            count_link(src, n, false);
        }
    }
    return r;
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    CUresult r = check_dev_range(dst, n);
    if (r == CUDA_SUCCESS)
        r = check_dev_range(src, n);
    return r;
}

/* cuMemcpy takes unified addresses: either side may be host memory. */
static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    bool dst_dev = fc_alloc_find(dst, true) != NULL, src_dev = fc_alloc_find(src, true) != NULL;
    pthread_mutex_unlock(&fc_lock);
    if (dst_dev && src_dev)
        return dtod(dst, src, n);
    if (dst_dev)
        return htod(dst, (const void *)(uintptr_t)src, n);
    if (src_dev)
        return dtoh((void *)(uintptr_t)dst, src, n);
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

static CUresult stream_ok(CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ FC_TRACE(); return htod(dstDevice, srcHost, ByteCount); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ FC_TRACE(); return htod(dstDevice, srcHost, ByteCount); }
CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ FC_TRACE(); return dtoh(dstHost, srcDevice, ByteCount); }
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ FC_TRACE(); return dtoh(dstHost, srcDevice, ByteCount); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ FC_TRACE(); return dtod(dstDevice, srcDevice, ByteCount); }
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ FC_TRACE(); return dtod(dstDevice, srcDevice, ByteCount); }
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ FC_TRACE(); return copy_unified(dst, src, ByteCount); }
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ FC_TRACE(); return copy_unified(dst, src, ByteCount); }

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, false);
    return r != CUDA_SUCCESS ? r : copy_unified(dst, src, ByteCount);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, true);
    return r != CUDA_SUCCESS ? r : copy_unified(dst, src, ByteCount);
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, false);
    return r != CUDA_SUCCESS ? r : htod(dstDevice, srcHost, ByteCount);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, true);
    return r != CUDA_SUCCESS ? r : htod(dstDevice, srcHost, ByteCount);
}
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, false);
    return r != CUDA_SUCCESS ? r : dtoh(dstHost, srcDevice, ByteCount);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, true);
    return r != CUDA_SUCCESS ? r : dtoh(dstHost, srcDevice, ByteCount);
}

static CUresult memset_n(CUdeviceptr dst, unsigned int value, size_t n, size_t elem)
{
    CUresult r = check_dev_range(dst, n * elem);
    void *h;
    if (r == CUDA_SUCCESS && n && (h = managed_host(dst))) {
        if (elem == 1) {
            memset(h, (int)(value & 0xFF), n);
        } else {
            for (size_t i = 0; i < n; i++)
                memcpy((char *)h + i * 4, &value, 4);
        }
    }
    return r;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{ FC_TRACE(); return memset_n(dstDevice, uc, N, 1); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{ FC_TRACE(); return memset_n(dstDevice, uc, N, 1); }
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{ FC_TRACE(); return (dstDevice & 3) ? CUDA_ERROR_INVALID_VALUE : memset_n(dstDevice, ui, N, 4); }
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{ FC_TRACE(); return (dstDevice & 3) ? CUDA_ERROR_INVALID_VALUE : memset_n(dstDevice, ui, N, 4); }
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, false);
    return r != CUDA_SUCCESS ? r : memset_n(dstDevice, uc, N, 1);
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    FC_TRACE();
    CUresult r = stream_ok(hStream, true);
    return r != CUDA_SUCCESS ? r : memset_n(dstDevice, uc, N, 1);
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(ptr, true);
    if (!a) {
        pthread_mutex_unlock(&fc_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch ((int)attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)a->ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = a->kind == FC_ALLOC_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!a->host) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        *(void **)data = (char *)a->host + (ptr - a->base);
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = a->kind == FC_ALLOC_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a->device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a->base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = (CUmemoryPool)a->pool; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}
