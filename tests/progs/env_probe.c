/* env_probe: what the library must leave alone in the application. Sets an unusual umask and
 * signal dispositions (SIGUSR1 ignored, SIGUSR2 handled), then does CUDA work (context,
 * allocation, a launch, NVML) and prints the umask and every signal's disposition before and
 * after:  before umask=0027 sigs=...   /   after umask=0027 sigs=...
 * The two lines must be equal. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "driver.h"
#include "vgpu_nvml.h"

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);

static void on_usr2(int sig)
{
    (void)sig;
}

static void state(const char *when)
{
    mode_t m = umask(0);
    umask(m);
    char sigs[256] = "";
    for (int s = 1; s < 32; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) != 0)
            continue;
        char c = sa.sa_handler == SIG_DFL ? 'D' : sa.sa_handler == SIG_IGN ? 'I' : 'H';
        size_t n = strlen(sigs);
        snprintf(sigs + n, sizeof sigs - n, "%c", c);
    }
    printf("%s umask=%04o sigs=%s\n", when, (unsigned)m, sigs);
}

int main(void)
{
    umask(027);
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, on_usr2);
    state("before");
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUdeviceptr p;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuMemAlloc_v2(&p, 1 << 20));
    MUST(cuModuleLoadData(&mod, "image"));
    MUST(cuModuleGetFunction(&f, mod, "k"));
    MUST(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    MUST(cuCtxSynchronize());
    MUST(cuMemFree_v2(p));
    nvmlDevice_t d;
    nvmlMemory_t m;
    if (nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS)
        (void)nvmlDeviceGetMemoryInfo(d, &m);
    state("after");
    return 0;
}
