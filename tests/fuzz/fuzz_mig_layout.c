/* fuzz_mig_layout: the declarative MIG layout reader (lib/core/mig/mig_layout.c, `vgpu mig apply`).
 * Invariants: a layout that parses has at most VGPU_MIG_LAYOUT_MAX GPUs, each with at most
 * VGPU_MIG_MAX_ITEMS instances and a terminated selector; and a document followed by anything
 * but white space is refused (one file is one layout). */
#include <ctype.h>

#include "fuzz.h"

#include "vgpu/mig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    static struct vgpu_mig_layout out;
    struct vgpu_err e;
    memset(&e, 0, sizeof e);
    if (vgpu_mig_layout_parse(s, &out, &e) == 0) {
        FUZZ_ASSERT(out.n <= VGPU_MIG_LAYOUT_MAX);
        for (unsigned i = 0; i < out.n; i++) {
            FUZZ_ASSERT(out.gpu[i].n <= VGPU_MIG_MAX_ITEMS);
            FUZZ_ASSERT(memchr(out.gpu[i].sel, 0, sizeof out.gpu[i].sel));
        }
        /* The same document with a second one after it must be refused. A newline between them:
         * json-c takes comments, and a // comment at the end of the first would hide the second. */
        size_t n = strlen(s);
        char *twice = malloc(2 * n + 2);
        if (!twice)
            abort();
        memcpy(twice, s, n);
        twice[n] = '\n';
        memcpy(twice + n + 1, s, n + 1);
        FUZZ_ASSERT(vgpu_mig_layout_parse(twice, &out, &e) != 0);
        free(twice);
    } else {
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
    }
    free(s);
    return 0;
}
