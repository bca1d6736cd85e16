/* array.c: CUDA arrays and mipmapped arrays.
 * Their layout is opaque; the fake charges
 *     pitch = round_up(Width × NumChannels × element size, 512)
 *     level = round_up(pitch × max(Height,1) × max(Depth,1), 64 KiB)
 * per array, and for a mipmapped array the sum over its levels, each level halving every
 * dimension (never below 1). Layered arrays count Depth as the number of layers. */
#include <stdlib.h>

#include "fakecuda.h"

struct fc_array {
    uint32_t magic;
    CUdeviceptr base;         /* of the fc_alloc that carries the charge (freed with the
                               * context too, so it is looked up, never kept as a pointer) */
};
#define ARRAY_MAGIC 0xA2A40000u
#define MIPMAP_MAGIC 0x313A9000u

static unsigned int format_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static unsigned long long level_bytes(size_t w, size_t h, size_t d, unsigned int channels, unsigned int elem)
{
    unsigned long long pitch = fc_round_up((unsigned long long)w * channels * elem, 512);
    return fc_round_up(pitch * (h ? h : 1) * (d ? d : 1), 64 * 1024);
}

static CUresult array_new(uint32_t magic, unsigned long long bytes, void **out)
{
    struct fc_ctx *c;
    CUresult r = fc_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_array *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fc_lock);
    r = fc_dev_charge(c->device, bytes);
    if (r == CUDA_SUCCESS) {
        struct fc_alloc *rec = fc_alloc_new(FC_ALLOC_ARRAY, fc_va_reserve(bytes, 512), bytes, c->device, c);
        if (!rec) {
            fc_dev_uncharge(c->device, bytes);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            rec->charged = bytes;
            a->base = rec->base;
        }
    }
    pthread_mutex_unlock(&fc_lock);
    if (r != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    a->magic = magic;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(void *h, uint32_t magic)
{
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_array *a = h;
    if (!a || a->magic != magic)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&fc_lock);
    /* The context may have gone (and freed the record) already. */
    struct fc_alloc *rec = fc_alloc_find(a->base, false);
    if (rec && rec->kind == FC_ALLOC_ARRAY)
        fc_alloc_remove(rec);
    pthread_mutex_unlock(&fc_lock);
    a->magic = 0;
    free(a);
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    FC_TRACE();
    if (!pHandle || !d || d->Width == 0 || !format_bytes(d->Format) ||
        (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(ARRAY_MAGIC, level_bytes(d->Width, d->Height, 1, d->NumChannels, format_bytes(d->Format)),
                     (void **)pHandle);
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    FC_TRACE();
    if (!pHandle || !d || d->Width == 0 || !format_bytes(d->Format) ||
        (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    return array_new(ARRAY_MAGIC, level_bytes(d->Width, d->Height, d->Depth, d->NumChannels, format_bytes(d->Format)),
                     (void **)pHandle);
}

CUresult cuArrayDestroy(CUarray hArray)
{
    FC_TRACE();
    return array_destroy(hArray, ARRAY_MAGIC);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                unsigned int numMipmapLevels)
{
    FC_TRACE();
    if (!pHandle || !d || d->Width == 0 || numMipmapLevels == 0 || !format_bytes(d->Format) ||
        (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    /* As the driver: no more levels than halving the largest extent down to 1 takes. */
    size_t largest = d->Width > d->Height ? d->Width : d->Height;
    if (!(d->Flags & CUDA_ARRAY3D_LAYERED) && d->Depth > largest)
        largest = d->Depth;
    unsigned int most = 1;
    while (largest >>= 1)
        most++;
    if (numMipmapLevels > most)
        return CUDA_ERROR_INVALID_VALUE;
    bool layered = d->Flags & CUDA_ARRAY3D_LAYERED;
    unsigned long long total = 0;
    size_t w = d->Width, h = d->Height, dep = d->Depth;
    for (unsigned int i = 0; i < numMipmapLevels; i++) {
        total += level_bytes(w, h, dep, d->NumChannels, format_bytes(d->Format));
        w = w > 1 ? w / 2 : 1;
        h = h > 1 ? h / 2 : h;
        if (!layered)
            dep = dep > 1 ? dep / 2 : dep;
    }
    return array_new(MIPMAP_MAGIC, total, (void **)pHandle);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FC_TRACE();
    return array_destroy(hMipmappedArray, MIPMAP_MAGIC);
}
