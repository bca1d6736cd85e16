/* The fake libcuda.so.1 (tests/fakegpu/cuda): memory accounting (linear, pools, VMM, arrays,
 * OOM), cuGetProcAddress versions and PTDS, the call trace, kernel timing on the simulated
 * clock, CUDA_VISIBLE_DEVICES and what another process sees. Loaded with dlopen by path from
 * $VGPU_FAKE_LIBDIR, like a program that dlopens libcuda.so.1. */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "fakecuda_load.h"

static const char *self_exe;

static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    CK(p_cuInit(0));
    CK(p_cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(p_cuCtxSetCurrent(ctx));
    return 0;
}

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CK(p_cuMemGetInfo_v2(&f, &t));
    assert_true(f <= t);
    return f;
}

static void test_device_queries(void **state)
{
    (void)state;
    int n = 0, v = 0, sms = 0;
    CK(p_cuDeviceGetCount(&n));
    assert_true(n >= 1);
    CK(p_cuDriverGetVersion(&v));
    assert_int_equal(v, 13000);
    CK(p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    assert_true(sms > 0);
    char name[96];
    CK(p_cuDeviceGetName(name, sizeof name, 0));
    assert_true(strlen(name) > 0);
    size_t total = 0;
    CK(p_cuDeviceTotalMem_v2(&total, 0));
    unsigned int total32 = 0;
    CK(p_cuDeviceTotalMem(&total32, 0));
    assert_true(total > 0xFFFFFFFFULL ? total32 == 0xFFFFFFFFu : total32 == total);
    assert_int_equal(p_cuDeviceGet(&n, 999), CUDA_ERROR_INVALID_DEVICE);
}

static void test_linear_memory_and_oom(void **state)
{
    (void)state;
    size_t before = free_mem();
    CUdeviceptr p = 0;
    CK(p_cuMemAlloc_v2(&p, 256 * 1024 * 1024));
    assert_int_equal(before - free_mem(), 256 * 1024 * 1024);
    CUdeviceptr big;
    assert_int_equal(p_cuMemAlloc_v2(&big, free_mem() + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CK(p_cuMemsetD8_v2(p, 0, 256 * 1024 * 1024));
    assert_int_equal(p_cuMemsetD8_v2(p, 0, 256 * 1024 * 1024 + 1), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuMemFree_v2(p));
    assert_int_equal(free_mem(), before);
    assert_int_equal(p_cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE); /* double free */

    size_t pitch = 0;
    CK(p_cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4));
    assert_int_equal(pitch, 1024);
    assert_int_equal(before - free_mem(), 10240);
    CK(p_cuMemFree_v2(p));

    CUdeviceptr_v1 p32 = 0;
    CK(p_cuMemAlloc(&p32, 1 << 20));
    assert_int_equal(before - free_mem(), 1 << 20);
    CK(p_cuMemsetD8_v2(p32, 0, 1 << 20)); /* the 32-bit pointer is a valid device address */
    CK(p_cuMemFree(p32));
    unsigned int pitch32 = 0;
    CK(p_cuMemAllocPitch(&p32, &pitch32, 100, 4, 8));
    assert_int_equal(pitch32, 512);
    assert_int_equal(before - free_mem(), 2048);
    CK(p_cuMemFree_v2(p32));

    CK(p_cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)p, 7, 4096); /* managed memory is host-accessible */
    assert_int_equal(before - free_mem(), 0);   /* host pages until they migrate (managed.c) */
    CK(p_cuMemPrefetchAsync(p, 4096, 0, NULL));
    assert_int_equal(before - free_mem(), 2 << 20);   /* one 2 MiB page made resident */
    unsigned int managed = 0;
    CK(p_cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    assert_int_equal(managed, 1);
    CK(p_cuMemFree_v2(p));

    void *host = NULL;
    CK(p_cuMemAllocHost_v2(&host, 1 << 20));
    assert_int_equal(free_mem(), before); /* pinned host memory is not device memory */
    CK(p_cuMemFreeHost(host));

    size_t heap = 0;
    CK(p_cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8388608 + (64 << 20)));
    assert_int_equal(before - free_mem(), 64 << 20);
    CK(p_cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
    assert_int_equal(heap, 8388608 + (64 << 20));
    CK(p_cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8388608));
    assert_int_equal(free_mem(), before);
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CK(p_cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

static void test_pools(void **state)
{
    (void)state;
    size_t before = free_mem();
    CUmemoryPool pool;
    CK(p_cuDeviceGetDefaultMemPool(&pool, 0));
    CUstream s;
    CK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    CK(p_cuMemAllocAsync(&p, 1 << 20, s));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1 << 20);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 << 20);
    assert_int_equal(before - free_mem(), 32 << 20); /* the reservation occupies the GPU */
    CK(p_cuMemFreeAsync(p, s));
    assert_int_equal(before - free_mem(), 32 << 20); /* kept until a synchronize */
    CK(p_cuStreamSynchronize(s));
    assert_int_equal(free_mem(), before); /* release threshold 0 */

    cuuint64_t keep = UINT64_MAX;
    CK(p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CK(p_cuMemAllocAsync(&p, 100 << 20, s));
    CK(p_cuMemFreeAsync(p, s));
    CK(p_cuStreamSynchronize(s));
    assert_int_equal(before - free_mem(), 100 << 20);
    CK(p_cuMemPoolTrimTo(pool, 0));
    assert_int_equal(free_mem(), before);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 100 << 20);
    keep = 0;
    CK(p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));

    /* An explicit pool, and OOM through it. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool mine;
    CK(p_cuMemPoolCreate(&mine, &props));
    CK(p_cuMemAllocFromPoolAsync(&p, 3 << 20, mine, s));
    assert_int_equal(before - free_mem(), 32 << 20);
    CUdeviceptr q;
    assert_int_equal(p_cuMemAllocFromPoolAsync(&q, free_mem() + (64 << 20), mine, s), CUDA_ERROR_OUT_OF_MEMORY);
    CK(p_cuMemFreeAsync(p, s));
    CK(p_cuMemPoolDestroy(mine));
    assert_int_equal(free_mem(), before);
    CK(p_cuStreamDestroy_v2(s));
}

static void test_vmm(void **state)
{
    (void)state;
    size_t before = free_mem();
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CK(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(gran, 2 << 20);
    CUmemGenericAllocationHandle h;
    assert_int_equal(p_cuMemCreate(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CK(p_cuMemCreate(&h, 4 * gran, &prop, 0));
    assert_int_equal(before - free_mem(), 4 * gran);
    CUdeviceptr va;
    CK(p_cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CK(p_cuMemMap(va, 4 * gran, 0, h, 0));
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(p_cuMemSetAccess(va, 4 * gran, &acc, 1));
    CK(p_cuMemRelease(h));
    assert_int_equal(before - free_mem(), 4 * gran); /* still mapped */
    CK(p_cuMemUnmap(va, 4 * gran));
    assert_int_equal(free_mem(), before);
    CK(p_cuMemAddressFree(va, 4 * gran));

    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    CK(p_cuMemCreate(&h, 4 * gran, &prop, 0));
    assert_int_equal(free_mem(), before); /* host memory */
    CK(p_cuMemRelease(h));
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    assert_int_equal(p_cuMemCreate(&h, (free_mem() / gran + 1) * gran, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_arrays(void **state)
{
    (void)state;
    size_t before = free_mem();
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 1000, .Height = 1000, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUarray a;
    CK(p_cuArrayCreate_v2(&a, &d));
    assert_int_equal(before - free_mem(), 63 * 65536); /* pitch 4000 -> 4096; 4096000 -> 64 KiB multiple */
    CK(p_cuArrayDestroy(a));
    assert_int_equal(free_mem(), before);
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 256, .Height = 256, .Depth = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
    CUmipmappedArray m;
    CK(p_cuMipmappedArrayCreate(&m, &d3, 2));
    /* level 0: 1024 B x 256 = 256 KiB; level 1: 512 B x 128 = 64 KiB */
    assert_int_equal(before - free_mem(), 320 * 1024);
    CK(p_cuMipmappedArrayDestroy(m));
    assert_int_equal(free_mem(), before);
}

static void *proc(const char *name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    void *fn = (void *)1;
    CK(p_cuGetProcAddress_v2(name, &fn, version, flags, st));
    return fn;
}

static void test_get_proc_address(void **state)
{
    (void)state;
    CUdriverProcAddressQueryResult st;
    assert_ptr_equal(proc("cuMemAlloc", 12000, 0, &st), dlsym(lib, "cuMemAlloc_v2"));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(proc("cuMemAlloc", 3000, 0, &st), dlsym(lib, "cuMemAlloc"));
    assert_ptr_equal(proc("cuMemPrefetchAsync", 12010, 0, &st), dlsym(lib, "cuMemPrefetchAsync"));
    assert_ptr_equal(proc("cuMemPrefetchAsync", 12020, 0, &st), dlsym(lib, "cuMemPrefetchAsync_v2"));
    assert_ptr_equal(proc("cuMemPrefetchAsync", 12080, 2, &st), dlsym(lib, "cuMemPrefetchAsync_v2_ptsz"));
    assert_ptr_equal(proc("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     dlsym(lib, "cuLaunchKernel_ptsz"));
    assert_ptr_equal(proc("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st), dlsym(lib, "cuLaunchKernel"));
    assert_ptr_equal(proc("cuMemcpyHtoD", 12000, 2, &st), dlsym(lib, "cuMemcpyHtoD_v2_ptds"));
    assert_ptr_equal(proc("cuMemAlloc", 12000, 2, &st), dlsym(lib, "cuMemAlloc_v2")); /* no PTDS form */
    assert_ptr_equal(proc("cuCtxCreate", 11040, 0, &st), dlsym(lib, "cuCtxCreate_v3"));
    assert_ptr_equal(proc("cuGraphAddKernelNode", 11080, 0, &st), dlsym(lib, "cuGraphAddKernelNode"));
    assert_ptr_equal(proc("cuGraphAddKernelNode", 12000, 0, &st), dlsym(lib, "cuGraphAddKernelNode_v2"));
    assert_ptr_equal(proc("cuGetProcAddress", 12000, 0, &st), dlsym(lib, "cuGetProcAddress_v2"));
    assert_ptr_equal(proc("cuGetProcAddress", 11030, 0, &st), dlsym(lib, "cuGetProcAddress"));
    assert_ptr_equal(proc("cuCtxSynchronize", 12090, 0, &st), dlsym(lib, "cuCtxSynchronize"));
    assert_ptr_equal(proc("cuCtxSynchronize", 13000, 0, &st), dlsym(lib, "cuCtxSynchronize_v2"));

    assert_null(proc("cuNoSuchThing", 12000, 0, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_null(proc("cuMemAllocAsync", 11000, 0, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    void *fn;
    assert_int_equal(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 99000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(p_cuGetProcAddress("cuNoSuchThing", &fn, 12000, 0), CUDA_ERROR_NOT_FOUND);
    CK(p_cuGetProcAddress("cuMemGetInfo", &fn, 11030, 0));
    assert_ptr_equal(fn, dlsym(lib, "cuMemGetInfo_v2"));
}

static void test_trace_shows_variant(void **state)
{
    (void)state;
    char path[] = "/tmp/vgpu-fakecuda-trace.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    setenv("VGPU_FAKE_TRACE", path, 1);
    CUmodule mod;
    CUfunction f;
    CK(p_cuModuleLoadData(&mod, "fake image"));
    CK(p_cuModuleGetFunction(&f, mod, "noop"));
    vgpu_cuLaunchKernel_ptsz_fn ptsz = (vgpu_cuLaunchKernel_ptsz_fn)proc("cuLaunchKernel", 12000, 2, NULL);
    CK(ptsz(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CK(p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    unsetenv("VGPU_FAKE_TRACE");
    char buf[4096] = { 0 };
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    unlink(path);
    buf[n] = 0;
    assert_non_null(strstr(buf, "cuLaunchKernel_ptsz\ncuLaunchKernel\n"));
    CK(p_cuModuleUnload(mod));
}

static void test_kernel_timing(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f;
    CK(p_cuModuleLoadData(&mod, "fake image"));
    CK(p_cuModuleGetFunction(&f, mod, "sleep_us"));
    CUstream s;
    CK(p_cuStreamCreate(&s, 0));
    CUevent e0, e1;
    CK(p_cuEventCreate(&e0, 0));
    CK(p_cuEventCreate(&e1, 0));
    /* 200 ms: long enough that the NOT_READY checks hold on a busy 2-core machine. */
    unsigned long long us = 200000;
    void *params[] = { &us };
    double t0 = now_ms();
    CK(p_cuEventRecord(e0, s));
    CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CK(p_cuEventRecord(e1, s));
    assert_true(now_ms() - t0 < 150); /* launches are asynchronous */
    assert_int_equal(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(p_cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    float ms = 0;
    assert_int_equal(p_cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
    CK(p_cuStreamSynchronize(s));
    assert_true(now_ms() - t0 >= 199.9);
    CK(p_cuStreamQuery(s));
    CK(p_cuEventElapsedTime(&ms, e0, e1));
    assert_true(ms >= 199.9 && ms < 300);

    /* A graph of two sleep kernels occupies the device for their sum. */
    CUgraph g;
    CK(p_cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = f;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    unsigned long long us2 = 20000;
    void *params2[] = { &us2 };
    kp.kernelParams = params2;
    CUgraphNode n1, n2;
    CK(p_cuGraphAddKernelNode_v2(&n1, g, NULL, 0, &kp));
    CK(p_cuGraphAddKernelNode_v2(&n2, g, &n1, 1, &kp));
    CUgraphExec ge;
    CK(p_cuGraphInstantiateWithFlags(&ge, g, 0));
    t0 = now_ms();
    CK(p_cuGraphLaunch(ge, s));
    CK(p_cuStreamSynchronize(s));
    assert_true(now_ms() - t0 >= 39.9);
    CK(p_cuGraphExecDestroy(ge));
    CK(p_cuGraphDestroy(g));
    CK(p_cuEventDestroy_v2(e0));
    CK(p_cuEventDestroy_v2(e1));
    CK(p_cuStreamDestroy_v2(s));
    CK(p_cuModuleUnload(mod));
}

static void test_cooperative_and_default_durations(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction sleep_fn, plain;
    CK(p_cuModuleLoadData(&mod, "fake image"));
    CK(p_cuModuleGetFunction(&sleep_fn, mod, "sleep_us"));
    CK(p_cuModuleGetFunction(&plain, mod, "saxpy"));
    unsigned long long us = 30000;
    void *params[] = { &us };
    double t0 = now_ms();
    CK(p_cuLaunchCooperativeKernel(sleep_fn, 4, 1, 1, 128, 1, 1, 0, NULL, params));
    CK(p_cuCtxSynchronize());
    assert_true(now_ms() - t0 >= 29.9);
    int sms = 0;
    CK(p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    /* 1024-thread blocks: two per SM fit, so 2 x SMs + 1 blocks cannot be co-resident. */
    assert_int_equal(p_cuLaunchCooperativeKernel(plain, (unsigned)(2 * sms + 1), 1, 1, 1024, 1, 1, 0, NULL, NULL),
                     CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    CUlaunchConfig cfg = { .gridDimX = (unsigned)(2 * sms + 1), .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1024,
                           .blockDimY = 1, .blockDimZ = 1, .attrs = &attr, .numAttrs = 1 };
    assert_int_equal(p_cuLaunchKernelEx(&cfg, plain, NULL, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    cfg.gridDimX = 2;
    t0 = now_ms();
    CK(p_cuLaunchKernelEx(&cfg, sleep_fn, params, NULL));
    CK(p_cuCtxSynchronize());
    assert_true(now_ms() - t0 >= 29.9);

    setenv("VGPU_FAKE_KERNEL_US", "40000", 1);
    t0 = now_ms();
    CK(p_cuLaunchKernel(plain, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CK(p_cuCtxSynchronize());
    unsetenv("VGPU_FAKE_KERNEL_US");
    assert_true(now_ms() - t0 >= 39.9);
    /* From the shape: 1000 waves of 10 µs on a full device = at least 10 ms. */
    t0 = now_ms();
    CK(p_cuLaunchKernel(plain, (unsigned)(2 * sms * 1000), 1, 1, 1024, 1, 1, 0, NULL, NULL, NULL));
    CK(p_cuCtxSynchronize());
    assert_true(now_ms() - t0 >= 9.9);
    CK(p_cuModuleUnload(mod));
}

static int host_fn_ran;
static void host_fn(void *data)
{
    (void)data;
    __atomic_store_n(&host_fn_ran, 1, __ATOMIC_SEQ_CST);
}

static void test_host_func_runs_in_stream_order(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f;
    CK(p_cuModuleLoadData(&mod, "fake image"));
    CK(p_cuModuleGetFunction(&f, mod, "sleep_us"));
    CUstream s;
    CK(p_cuStreamCreate(&s, 0));
    unsigned long long us = 200000;
    void *params[] = { &us };
    CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CK(p_cuLaunchHostFunc(s, host_fn, NULL));
    assert_int_equal(__atomic_load_n(&host_fn_ran, __ATOMIC_SEQ_CST), 0);
    CK(p_cuStreamSynchronize(s));
    assert_int_equal(__atomic_load_n(&host_fn_ran, __ATOMIC_SEQ_CST), 1);
    CK(p_cuStreamDestroy_v2(s));
    CK(p_cuModuleUnload(mod));
}

static void test_graph_memory(void **state)
{
    (void)state;
    size_t before = free_mem();
    CUgraph g;
    CK(p_cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.bytesize = 3 << 20;
    CUgraphNode an, fn;
    CK(p_cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
    assert_true(ap.dptr != 0);
    CK(p_cuGraphAddMemFreeNode(&fn, g, &an, 1, ap.dptr));
    CUgraphExec ge;
    CK(p_cuGraphInstantiateWithFlags(&ge, g, 0));
    CK(p_cuGraphLaunch(ge, NULL));
    CK(p_cuCtxSynchronize());
    cuuint64_t v = 0;
    CK(p_cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v));
    assert_int_equal(v, 4 << 20);
    CK(p_cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v));
    assert_int_equal(v, 0);
    assert_int_equal(before - free_mem(), 4 << 20);
    CK(p_cuDeviceGraphMemTrim(0));
    assert_int_equal(free_mem(), before);
    CK(p_cuGraphExecDestroy(ge));
    CK(p_cuGraphDestroy(g));
}

/* When set, children run on this scenario with their own state file. */
static const char *child_scenario;
static char child_state[64];

/* Re-runs this binary in a mode that prints what a fresh process sees (fresh library state). */
static int run_child(const char *mode, const char *visible, char *out, size_t outsz)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        if (child_scenario) {
            setenv("VGPU_FAKE_SCENARIO", child_scenario, 1);
            setenv("VGPU_FAKE_STATE", child_state, 1);
        }
        if (visible)
            setenv("CUDA_VISIBLE_DEVICES", visible, 1);
        else
            unsetenv("CUDA_VISIBLE_DEVICES");
        execl(self_exe, self_exe, mode, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < outsz - 1 && (r = read(pipefd[0], out + n, outsz - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int child_list(void)
{
    load();
    CUresult r = p_cuInit(0);
    if (r != CUDA_SUCCESS) {
        printf("init %d\n", r);
        return 0;
    }
    int n;
    p_cuDeviceGetCount(&n);
    for (int i = 0; i < n; i++) {
        char name[96];
        size_t total;
        CUuuid u;
        p_cuDeviceGetName(name, sizeof name, i);
        p_cuDeviceTotalMem_v2(&total, i);
        p_cuDeviceGetUuid_v2(&u, i);
        printf("%d %zu %02x%02x%02x%02x\n", i, total, (unsigned char)u.bytes[0], (unsigned char)u.bytes[1],
               (unsigned char)u.bytes[2], (unsigned char)u.bytes[3]);
    }
    return 0;
}

static void test_visible_devices(void **state)
{
    (void)state;
    char all[4096], out[4096];
    assert_int_equal(run_child("--child-list", NULL, all, sizeof all), 0);
    int n = 0;
    for (const char *p = all; (p = strchr(p, '\n')); p++)
        n++;
    assert_true(n >= 1);
    assert_int_equal(run_child("--child-list", "", out, sizeof out), 0);
    assert_string_equal(out, "init 100\n"); /* no device */
    assert_int_equal(run_child("--child-list", "0", out, sizeof out), 0);
    assert_int_equal(strncmp(out, all, strlen(out)), 0);
    assert_int_equal(run_child("--child-list", "0,99,0", out, sizeof out), 0); /* an invalid entry ends the list */
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));

    /* By UUID (and by unique prefix): the same device as index 0. */
    int dev_count = 0;
    CK(p_cuDeviceGetCount(&dev_count));
    CUuuid u;
    CK(p_cuDeviceGetUuid_v2(&u, dev_count - 1));
    char uuid[64];
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    assert_int_equal(run_child("--child-list", uuid, out, sizeof out), 0);
    char want[64];
    snprintf(want, sizeof want, " %02x%02x%02x%02x\n", b[0], b[1], b[2], b[3]);
    assert_non_null(strstr(out, want));
    assert_int_equal(strncmp(out, "0 ", 2), 0);
    assert_null(strchr(out, '\n') + 1 == NULL ? NULL : strchr(strchr(out, '\n') + 1, '\n'));
    uuid[12] = 0; /* "GPU-xxxxxxxx" */
    assert_int_equal(run_child("--child-list", uuid, out, sizeof out), 0);
    assert_non_null(strstr(out, want));
}

/* Several GPUs (scenarios/mixed.json: H100 4f6c2a51, H100 7d3e9b20, A100 a1000040). */
static void test_visible_devices_several_gpus(void **state)
{
    (void)state;
    const char *src = getenv("VGPU_SRC");
    char scenario[4096];
    snprintf(scenario, sizeof scenario, "%s/tests/fakegpu/scenarios/mixed.json", src ? src : ".");
    if (access(scenario, R_OK) != 0)
        skip();
    child_scenario = scenario;
    snprintf(child_state, sizeof child_state, "/tmp/vgpu-fakecuda-state.%d", (int)getpid());
    char out[4096];
    assert_int_equal(run_child("--child-list", NULL, out, sizeof out), 0);
    assert_int_equal(strncmp(out, "0 ", 2), 0);
    assert_non_null(strstr(out, " 4f6c2a51\n1 "));
    assert_non_null(strstr(out, "2 "));
    assert_int_equal(run_child("--child-list", "GPU-7d3e", out, sizeof out), 0);
    assert_int_equal(strncmp(out, "0 ", 2), 0);
    assert_non_null(strstr(out, " 7d3e9b20\n"));
    assert_null(strstr(out, "1 "));
    assert_int_equal(run_child("--child-list", "GPU-a1000040-5e1d-4b2a-9c3f-17d2e4f6a8b0, 0", out, sizeof out), 0);
    assert_int_equal(strncmp(out, "0 ", 2), 0);
    assert_non_null(strstr(out, " a1000040\n1 "));
    assert_non_null(strstr(out, " 4f6c2a51\n"));
    assert_int_equal(run_child("--child-list", "2,GPU-,1", out, sizeof out), 0); /* "GPU-" names nothing */
    assert_non_null(strstr(out, " a1000040\n"));
    assert_null(strstr(out, "1 "));
    assert_int_equal(run_child("--child-list", "MIG-00000000-0000-0000-0000-000000000000", out, sizeof out), 0);
    assert_string_equal(out, "init 100\n");
    /* A lost GPU is not enumerated; the others close up. */
    setenv("VGPU_FAKE_FAIL", "gpu_lost=0", 1);
    assert_int_equal(run_child("--child-list", NULL, out, sizeof out), 0);
    assert_int_equal(strncmp(out, "0 ", 2), 0);
    assert_non_null(strstr(out, " 7d3e9b20\n1 "));
    assert_null(strstr(out, "4f6c2a51"));
    /* Injected cuInit failure. */
    setenv("VGPU_FAKE_FAIL", "cuda_init=system_driver_mismatch", 1);
    assert_int_equal(run_child("--child-list", NULL, out, sizeof out), 0);
    assert_string_equal(out, "init 803\n");
    unsetenv("VGPU_FAKE_FAIL");
    unlink(child_state);
    child_scenario = NULL;
}

/* Prints how long a 100 ms kernel took from launch to synchronize. */
static int child_sleep(void)
{
    load();
    CUcontext c;
    CUmodule m;
    CUfunction f;
    if (p_cuInit(0) || p_cuDevicePrimaryCtxRetain(&c, 0) || p_cuCtxSetCurrent(c) ||
        p_cuModuleLoadData(&m, "fake image") || p_cuModuleGetFunction(&f, m, "sleep_us"))
        return 1;
    unsigned long long us = 100000;
    void *params[] = { &us };
    double t0 = now_ms();
    if (p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) || p_cuCtxSynchronize())
        return 1;
    printf("%.0f\n", now_ms() - t0);
    return 0;
}

/* Kernels of two processes on one GPU take turns in time slices (a few ms each), not first come
 * first served: the child's 100 ms kernel, launched while our 1 s kernel runs, gets every other
 * slice, so it takes about 200 ms; ours ends 100 ms later than alone. */
static void test_processes_time_slice_on_the_device(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f;
    CK(p_cuModuleLoadData(&mod, "fake image"));
    CK(p_cuModuleGetFunction(&f, mod, "sleep_us"));
    unsigned long long us = 1000000;
    void *params[] = { &us };
    double t0 = now_ms();
    CK(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    char out[64];
    assert_int_equal(run_child("--child-sleep", NULL, out, sizeof out), 0);
    double child_ms = strtod(out, NULL);
    /* FIFO would make the child wait for the rest of our second. */
    assert_true(child_ms >= 190);
    assert_true(child_ms <= 400);
    CK(p_cuCtxSynchronize());
    double ours = now_ms() - t0;
    assert_true(ours >= 1095);
    assert_true(ours <= 1300);
    CK(p_cuModuleUnload(mod));
}

static int child_hold(void)
{
    load();
    CUcontext c;
    CUdeviceptr p;
    if (p_cuInit(0) || p_cuDevicePrimaryCtxRetain(&c, 0) || p_cuCtxSetCurrent(c) || p_cuMemAlloc_v2(&p, 1ULL << 30))
        return 1;
    printf("ready\n");
    fflush(stdout);
    char buf[8];
    if (read(0, buf, sizeof buf) < 0) /* holds until the parent closes our stdin */
        return 1;
    return 0;
}

static void test_other_process_sees_memory(void **state)
{
    (void)state;
    size_t before = free_mem();
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[1]);
        close(from_child[0]);
        unsetenv("CUDA_VISIBLE_DEVICES");
        execl(self_exe, self_exe, "--child-hold", (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    char buf[16] = { 0 };
    assert_true(read(from_child[0], buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "ready\n");
    size_t during = free_mem();
    close(to_child[1]);
    int status;
    waitpid(pid, &status, 0);
    close(from_child[0]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The child's context overhead and its 1 GiB were visible here, and are gone with it. */
    assert_true(before - during >= (1ULL << 30));
    assert_int_equal(free_mem(), before);
}

int main(int argc, char **argv)
{
    self_exe = argv[0];
    if (argc > 1 && strcmp(argv[1], "--child-list") == 0)
        return child_list();
    if (argc > 1 && strcmp(argv[1], "--child-hold") == 0)
        return child_hold();
    if (argc > 1 && strcmp(argv[1], "--child-sleep") == 0)
        return child_sleep();
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("VGPU_FAKE_KERNEL_US");
    load();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_queries),
        cmocka_unit_test(test_linear_memory_and_oom),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_get_proc_address),
        cmocka_unit_test(test_trace_shows_variant),
        cmocka_unit_test(test_kernel_timing),
        cmocka_unit_test(test_cooperative_and_default_durations),
        cmocka_unit_test(test_host_func_runs_in_stream_order),
        cmocka_unit_test(test_graph_memory),
        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_visible_devices_several_gpus),
        cmocka_unit_test(test_other_process_sees_memory),
        cmocka_unit_test(test_processes_time_slice_on_the_device),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
