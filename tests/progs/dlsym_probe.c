/* dlsym_probe: looks names up the ways libraries do and prints where each answer lives:
 *     HOW NAME from=hook|driver|libc|null
 * HOW: cuda (dlsym on a dlopen("libcuda.so.1") handle), nvml (on libnvidia-ml.so.1),
 * default (RTLD_DEFAULT), next (RTLD_NEXT from this program).
 *   dlsym_probe HOW NAME [HOW NAME ...] */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *origin(void *p)
{
    Dl_info info;
    if (!p)
        return "null";
    if (!dladdr(p, &info) || !info.dli_fname)
        return "unknown";
    if (strstr(info.dli_fname, "libvgpu"))
        return "hook";
    if (strstr(info.dli_fname, "libcuda") || strstr(info.dli_fname, "libnvidia-ml"))
        return "driver";
    if (strstr(info.dli_fname, "libc.so"))
        return "libc";
    return info.dli_fname;
}

int main(int argc, char **argv)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!cuda || !nvml) {
        fprintf(stderr, "dlsym_probe: %s\n", dlerror());
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *how = argv[i], *name = argv[i + 1];
        void *h = !strcmp(how, "cuda") ? cuda : !strcmp(how, "nvml") ? nvml : !strcmp(how, "next") ? RTLD_NEXT : RTLD_DEFAULT;
        printf("%s %s from=%s\n", how, name, origin(dlsym(h, name)));
    }
    return 0;
}
