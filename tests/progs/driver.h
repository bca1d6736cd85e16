/* driver.h: prototypes of every driver entry point of lib/include/vgpu_cuda_fns.def, for test
 * programs that link libcuda.so.1 directly (as programs built with -lcuda do), plus tiny
 * helpers shared by the libvgpu.so test programs. Test code, not product. */
#ifndef VGPU_TEST_DRIVER_H
#define VGPU_TEST_DRIVER_H

#include <stdio.h>
#include <stdlib.h>

#include "vgpu_cuda.h"

#define VGPU_CU_FN(symbol, base, version, kind, params) CUresult symbol params;
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN

/* Exits 2 with a message when a setup call fails (test programs only). */
#define MUST(call)                                                                   \
    do {                                                                             \
        CUresult must_rc_ = (call);                                                  \
        if (must_rc_ != CUDA_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)must_rc_); \
            exit(2);                                                                 \
        }                                                                            \
    } while (0)

#endif
