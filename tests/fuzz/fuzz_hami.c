/* fuzz_hami: HAMi-core's variables as libvgpu.so parses them (lib/hook/hami.c, included here
 * to reach its static parser). The input is lines "V=VALUE": the first byte V picks the variable
 * (CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_SM_LIMIT, their _<i> forms for i = 0..17, past the
 * last device, and CUDA_DEVICE_MEMORY_SHARED_CACHE). Invariants: a percent that is kept is
 * below 100 (100 means none); when nothing is set, nothing is reported set. */
#include "fuzz.h"

#include "../../lib/hook/hami.c"

#define NVARS (2 + 2 * 18 + 1)

static void var_name(unsigned v, char *buf, size_t len)
{
    v %= NVARS;
    if (v == 0)
        snprintf(buf, len, "CUDA_DEVICE_MEMORY_LIMIT");
    else if (v == 1)
        snprintf(buf, len, "CUDA_DEVICE_SM_LIMIT");
    else if (v == NVARS - 1)
        snprintf(buf, len, "CUDA_DEVICE_MEMORY_SHARED_CACHE");
    else
        snprintf(buf, len, "%s_%u", (v - 2) % 2 ? "CUDA_DEVICE_SM_LIMIT" : "CUDA_DEVICE_MEMORY_LIMIT", (v - 2) / 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size), name[64];
    bool set_any = false;
    for (char *save = NULL, *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!line[0] || line[1] != '=')
            continue;
        var_name((unsigned char)line[0], name, sizeof name);
        setenv(name, line + 2, 1);
    }
    for (unsigned v = 0; v < NVARS; v++) {
        var_name(v, name, sizeof name);
        const char *val = getenv(name);
        if (val && *val && (v < NVARS - 1 - 2 * 2 || v == NVARS - 1))
            set_any = true;     /* _16 and _17 are past the last device: never read */
    }
    struct hami_limits l;
    bool any = false;
    bool ok = parse(&l, &any);
    FUZZ_ASSERT(any == set_any);
    if (ok)
        for (int i = 0; i < VGPU_REGION_MAX_DEVICES; i++)
            FUZZ_ASSERT(l.sm[i] < 100);
    for (unsigned v = 0; v < NVARS; v++) {
        var_name(v, name, sizeof name);
        unsetenv(name);
    }
    free(s);
    return 0;
}
