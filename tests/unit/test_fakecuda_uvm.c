/* The simulated GPU's managed-memory time (tests/fakegpu/cuda/managed.c, issue 37): a kernel
 * whose page faults migrate pages in runs longer by bytes / uvm_fault; a prefetch is a copy on
 * its stream (stream order) at uvm_prefetch, uvm_populate (pages never touched) or
 * uvm_prefetch_host, which takes no SMs: a kernel of another stream runs beside it at full speed.
 * The scenario here has round rates (1, 2, 4, 1 GB/s: 64 MiB take 67.1, 33.6, 16.8, 67.1 ms).
 * Times come from events (the simulated clock): exact but for the host's own time between an
 * event record and the call after it, which only lengthens them: the lower bounds are exact, the
 * upper ones allow 20 ms of it (a loaded 2-CPU machine took more than 3 ms) and still fail a
 * time charged twice or a copy that took the SMs. On the fake before issue 37 every migration
 * took no time. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fakecuda_load.h"

#define MB64 (64ULL << 20)
#define TO_HOST ((CUdevice)-1)   /* CU_DEVICE_CPU */

static CUfunction sleep_fn;

static int setup(void **state)
{
    (void)state;
    CUcontext c;
    CUmodule m;
    CK(p_cuInit(0));
    CK(p_cuDevicePrimaryCtxRetain(&c, 0));
    CK(p_cuCtxSetCurrent(c));
    CK(p_cuModuleLoadData(&m, "fake image"));
    CK(p_cuModuleGetFunction(&sleep_fn, m, "sleep_us"));
    return 0;
}

static void launch(CUstream s, unsigned long long us)
{
    void *params[] = { &us };
    CK(p_cuLaunchKernel(sleep_fn, 1, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

/* Microseconds between two events. */
static long us_between(CUevent a, CUevent b)
{
    float ms = -1;
    CK(p_cuEventElapsedTime(&ms, a, b));
    return (long)(ms * 1000);
}

static CUevent event(void)
{
    CUevent e;
    CK(p_cuEventCreate(&e, 0));
    return e;
}

/* 64 MiB faulted in at 1 GB/s: the kernel that touches them first runs 67.1 ms longer. */
static void test_fault_migration_takes_time(void **state)
{
    (void)state;
    CUstream s;
    CUdeviceptr p;
    CUevent e0 = event(), e1 = event(), e2 = event(), e3 = event();
    CK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(p_cuMemAllocManaged(&p, MB64, CU_MEM_ATTACH_GLOBAL));
    CK(p_cuEventRecord(e0, s));
    launch(s, 1000);
    CK(p_cuEventRecord(e1, s));
    CK(p_cuStreamSynchronize(s));
    assert_in_range(us_between(e0, e1), 68100, 88100);   /* 67.1 ms of faults + the 1 ms kernel */
    CK(p_cuEventRecord(e2, s));
    launch(s, 1000);
    CK(p_cuEventRecord(e3, s));
    double t0 = now_ms();
    CK(p_cuStreamSynchronize(s));
    assert_in_range(us_between(e2, e3), 990, 21000);      /* resident now: the kernel alone */
    assert_true(now_ms() - t0 < 1000);
    CK(p_cuMemFree_v2(p));
}

/* Prefetches run in stream order, each at its rate, and beside another stream's kernel, which
 * they do not slow (no SMs). */
static void test_prefetch_is_a_copy_in_stream_order(void **state)
{
    (void)state;
    CUstream a, b;
    CUdeviceptr p;
    CUevent e[6], eb = event();
    for (int i = 0; i < 6; i++)
        e[i] = event();
    CK(p_cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(p_cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(p_cuMemAllocManaged(&p, MB64, CU_MEM_ATTACH_GLOBAL));
    CK(p_cuEventRecord(e[0], a));
    CK(p_cuMemPrefetchAsync(p, MB64, 0, a));               /* never touched: populated, 16.8 ms */
    launch(b, 50000);                                      /* 50 ms over the whole device, beside */
    CK(p_cuEventRecord(eb, b));
    CK(p_cuEventRecord(e[1], a));
    CK(p_cuMemPrefetchAsync(p, MB64, TO_HOST, a));   /* to the host: 67.1 ms */
    CK(p_cuEventRecord(e[2], a));
    CK(p_cuMemPrefetchAsync(p, MB64, 0, a));               /* its data back: 33.6 ms */
    CK(p_cuEventRecord(e[3], a));
    launch(a, 1000);                                       /* resident: no faults */
    CK(p_cuEventRecord(e[4], a));
    CK(p_cuCtxSynchronize());
    assert_in_range(us_between(e[0], e[1]), 16700, 36700);
    assert_in_range(us_between(e[1], e[2]), 67100, 87100);
    assert_in_range(us_between(e[2], e[3]), 33500, 53500);
    assert_in_range(us_between(e[3], e[4]), 990, 21000);
    /* The kernel beside was not slowed: had the copies (117 ms) taken the SMs, it would end near 100 ms. */
    assert_in_range(us_between(e[0], eb), 49900, 75000);
    CK(p_cuMemFree_v2(p));
}

int main(void)
{
    /* A scenario of round rates, and a state of its own (run.sh gives the h100 one, which has none). */
    char dir[] = "/tmp/vgpu-uvm-test.XXXXXX", scen[128], st[128];
    if (!mkdtemp(dir))
        return 1;
    snprintf(scen, sizeof scen, "%s/uvm.json", dir);
    snprintf(st, sizeof st, "%s/uvm.state", dir);
    FILE *f = fopen(scen, "w");
    if (!f)
        return 1;
    fputs("{ \"gpus\": [ { \"model\": \"h100-80gb\", \"uvm_fault_gbps\": 1, \"uvm_prefetch_gbps\": 2,"
          " \"uvm_populate_gbps\": 4, \"uvm_prefetch_host_gbps\": 1 } ] }\n", f);
    fclose(f);
    setenv("VGPU_FAKE_SCENARIO", scen, 1);
    setenv("VGPU_FAKE_STATE", st, 1);
    load();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_migration_takes_time),
        cmocka_unit_test(test_prefetch_is_a_copy_in_stream_order),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    unlink(st);
    unlink(scen);
    rmdir(dir);
    return rc;
}
