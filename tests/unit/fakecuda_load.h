/* fakecuda_load.h: for the unit tests that drive the simulated GPU's libcuda.so.1 directly
 * (test_fakecuda.c, test_fakecuda_sched.c). Loads it with dlopen by path from
 * $VGPU_FAKE_LIBDIR, like a program that dlopens libcuda.so.1, into p_<symbol> pointers for
 * every function of vgpu_cuda_fns.def. Included once per test program (static definitions). */
#ifndef VGPU_TESTS_FAKECUDA_LOAD_H
#define VGPU_TESTS_FAKECUDA_LOAD_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vgpu_cuda.h"

#define VGPU_CU_FN(symbol, base, version, kind, params) static vgpu_##symbol##_fn p_##symbol;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

static void *lib;
static char lib_path[4096];

static void load(void)
{
    const char *dir = getenv("VGPU_FAKE_LIBDIR");
    snprintf(lib_path, sizeof lib_path, "%s/libcuda.so.1", dir ? dir : "build/fakegpu");
    lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s (run through tests/run.sh)\n", lib_path, dlerror());
        exit(1);
    }
#define VGPU_CU_FN(symbol, base, version, kind, params) p_##symbol = (vgpu_##symbol##_fn)dlsym(lib, #symbol);
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN
}

/* The host's monotonic clock in ms. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CK(call) assert_int_equal((call), CUDA_SUCCESS)

#endif
