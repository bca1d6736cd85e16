/* fuzz_units: the size and percent parsers (lib/core/base/units.c), which read --mem, --core,
 * `vgpu limit` and the HAMi-core variables. Invariants: a parsed percent is 0..100; a parsed
 * size formats without overflowing its buffer and the error message is a terminated string. */
#include "fuzz.h"

#include "vgpu/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    struct vgpu_err e;
    uint64_t bytes = 0;
    memset(&e, 0, sizeof e);
    if (vgpu_parse_size(s, &bytes, "--mem", &e) == 0) {
        char buf[32];
        vgpu_format_size(bytes, buf, sizeof buf);
        FUZZ_ASSERT(strlen(buf) < sizeof buf);
        vgpu_format_size_short(bytes, buf, sizeof buf);
        FUZZ_ASSERT(strlen(buf) < sizeof buf);
    } else {
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
    }
    unsigned pct = 999;
    memset(&e, 0, sizeof e);
    if (vgpu_parse_percent(s, &pct, "--core", &e) == 0)
        FUZZ_ASSERT(pct <= 100);
    else
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
    free(s);
    return 0;
}
