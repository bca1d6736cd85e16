/* ctx_start: one process of a simultaneous start (tests/cli/ctx_starts.sh). Initialises the
 * driver, prints "ready PID", waits until the file GO exists, then creates its context at once,
 * as each rank of a PyTorch job does, and prints
 *     ctx rc=N pid=PID
 * (rc is the CUresult of cuDevicePrimaryCtxRetain, or of cuCtxCreate_v2 with `create`). It then
 * keeps the context until the file RELEASE exists, so that every context of the start exists at
 * the same time while the test looks at the job.
 *   ctx_start GO RELEASE [create]
 *   ctx_start --churn N     creates and destroys N contexts one after the other (cuCtxCreate_v2,
 *                           cuCtxDestroy_v2), then retains and releases the primary context N
 *                           times, and prints "churn created=K retained=R used=BYTES" (the job's
 *                           view, cuMemGetInfo_v2, while one more context is current)
 * Exit status 0; 2 when the driver cannot be initialised; 3 when GO or RELEASE does not appear
 * within 30 s (the test then fails on the missing line). */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

static bool wait_for(const char *path)
{
    for (int i = 0; i < 30000; i++) {
        if (access(path, F_OK) == 0)
            return true;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "ctx_start: %s did not appear within 30 s\n", path);
    return false;
}

static int churn(int n)
{
    CUdevice dev;
    CUcontext ctx, keep;
    int created = 0, retained = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    for (; created < n; created++) {
        if (cuCtxCreate_v2(&ctx, 0, dev) != CUDA_SUCCESS)
            break;
        MUST(cuCtxDestroy_v2(ctx));
    }
    for (; retained < n; retained++) {
        if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
            break;
        MUST(cuDevicePrimaryCtxRelease_v2(dev));
    }
    MUST(cuCtxCreate_v2(&keep, 0, dev));
    size_t fr = 0, to = 0;
    MUST(cuMemGetInfo_v2(&fr, &to));
    printf("churn created=%d retained=%d used=%zu\n", created, retained, to - fr);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--churn") == 0)
        return churn(atoi(argv[2]));
    if (argc < 3) {
        fprintf(stderr, "usage: ctx_start GO RELEASE [create] | ctx_start --churn N\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    printf("ready %d\n", (int)getpid());
    if (!wait_for(argv[1]))
        return 3;
    CUcontext ctx = NULL;
    CUresult rc = argc > 3 && strcmp(argv[3], "create") == 0 ? cuCtxCreate_v2(&ctx, 0, dev)
                                                                : cuDevicePrimaryCtxRetain(&ctx, dev);
    printf("ctx rc=%d pid=%d\n", (int)rc, (int)getpid());
    return wait_for(argv[2]) ? 0 : 3;
}
