/* fs_internal.h: what the files of tests/fakegpu/common share with each other only. */
#ifndef VGPU_FS_INTERNAL_H
#define VGPU_FS_INTERNAL_H

#include <stddef.h>

#include "fakestate.h"

#pragma GCC visibility push(hidden)

/* Fills st (zeroed by the caller) from the scenario JSON at path (NULL: the built-in single
 * H100). Returns false with a message in err. (scenario.c) */
bool fs_scenario_load(const char *path, struct fs_state *st, char *err, size_t errlen);

/* Fills the static facts and MIG profile table of a known model ("h100-80gb", "h200",
 * "a100-40gb"); false when unknown. (models.c) */
bool fs_model_apply(const char *model, struct fs_gpu_static *g);
const char *fs_model_names(void);

/* Parses a failure name ("driver_not_loaded", "no_device", ...) for nvml_init or cuda_init
 * into the code the library returns; -1 when unknown. (scenario.c) */
int fs_nvml_failure_code(const char *name);
int fs_cuda_failure_code(const char *name);
/* Applies "key=value[,key=value...]" (VGPU_FAKE_FAIL) to f; false with err on a bad item. */
bool fs_failures_parse(const char *spec, struct fs_failures *f, struct fs_state *st, char *err, size_t errlen);

/* Derives the GI ID the driver gives a GI at (start, size) memory slices (reference §9). */
unsigned fs_gi_swizzle_id(unsigned start, unsigned size);

#pragma GCC visibility pop

#endif
