/* procaddr.c: cuGetProcAddress (CUDA 11.3 ABI, 4 arguments) and cuGetProcAddress_v2 (12.0, with
 * the query result), cuGetExportTable, and the error-name functions.
 *
 * The table is vgpu_cuda_fns.def: (symbol, base name, version that introduced the ABI, kind).
 * A request (base, cudaVersion, flags) gets the newest PLAIN variant introduced at or before
 * cudaVersion; with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM it gets the newest _ptsz/_ptds
 * variant at or before cudaVersion where the name has one. cudaVersion above the driver's is
 * INVALID_VALUE. An unknown name is SUCCESS with NULL and SYMBOL_NOT_FOUND (v2) or NOT_FOUND (v1);
 * a known name with no variant old enough is SUCCESS with NULL and VERSION_NOT_SUFFICIENT. */
#include <string.h>

#include "fakecuda.h"

struct entry {
    const char *symbol, *base;
    int version;
    bool per_thread;
    void *fn;
};

#define PER_THREAD_PLAIN false
#define PER_THREAD_PTSZ true
#define PER_THREAD_PTDS true
static const struct entry table[] = {
#define VGPU_CU_FN(symbol, base, version, kind, params) { #symbol, #base, version, PER_THREAD_##kind, (void *)&symbol },
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    if (!fc_initialized)
        (void)fc_shared_init(); /* the driver version; works before cuInit */
    pthread_mutex_unlock(&fc_lock);
    if (cudaVersion > fc_driver_version)
        return CUDA_ERROR_INVALID_VALUE;
    bool want_pt = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    const struct entry *plain = NULL, *pt = NULL;
    bool known = false;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const struct entry *e = &table[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        known = true;
        if (e->version > cudaVersion)
            continue;
        const struct entry **best = e->per_thread ? &pt : &plain;
        if (!*best || e->version > (*best)->version)
            *best = e;
    }
    const struct entry *e = (want_pt && pt) ? pt : plain;
    if (!e) {
        if (status)
            *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return (known || status) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    }
    *pfn = e->fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int driverVersion, cuuint64_t flags)
{
    FC_TRACE();
    return lookup(symbol, pfn, driverVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int driverVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolFound)
{
    FC_TRACE();
    return lookup(symbol, pfn, driverVersion, flags, symbolFound);
}

/* Private driver tables: the fake has none. Does no initialisation work (interception.md 1.6). */
CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    FC_TRACE();
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_FOUND;
}

struct err { CUresult code; const char *name, *text; };
static const struct err errors[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped" },
    { CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture" },
    { CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
    { CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" },
    { CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch" },
    { CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_SYSTEM_NOT_READY, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized" },
    { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
    { CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", "wait operation timed out" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static const struct err *find_error(CUresult e)
{
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == e)
            return &errors[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FC_TRACE();
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err *e = find_error(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FC_TRACE();
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err *e = find_error(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
