/* fuzz.h: what every libFuzzer harness of tests/fuzz shares (see tests/fuzz/run.sh and
 * `make fuzz`). Test code, not product. A harness must never exit or print on bad input: the
 * code under test reports errors through struct vgpu_err, and the harness checks invariants
 * with FUZZ_ASSERT, which aborts (a finding) when one does not hold. */
#ifndef VGPU_FUZZ_H
#define VGPU_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* The input as a NUL-terminated string (a NUL inside ends it early, as C strings do). The
 * caller frees it. */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

#endif
