/* bus_probe: a program under libvgpu.so that launches kernels and never allocates (unless told),
 * and the program's own SIGBUS cases, for tests/cli/truncated_launch.sh and tests/cli/sigbus.sh.
 * Steps run in the order given; each prints one line on stdout (line-buffered):
 *
 *   init              cuInit, a context, a module: the library opens the job region here
 *   launch MS [US]    kernels of US µs (the simulated GPU's sleep_us, default 2000) back to back
 *                     for MS ms, synchronizing every 8; prints "launch rc=0 n=N share=F"
 *                     (share: kernel time over wall time, the job's part of the simulated GPU)
 *   launchuntil FILE  the same until FILE exists (prints "launching" after the first 8, so a
 *                     test can act while it launches), then "launchuntil rc=0 n=N"
 *   alloc SIZE        cuMemAlloc_v2 of SIZE (K/M/G): "alloc rc=N size=BYTES"
 *   handler           installs the program's own SIGBUS handler: it writes "own handler
 *                     si_code=N" on stderr and _exits 42
 *   raise             raise(SIGBUS)
 *   ownfault          maps a file of its own MAP_SHARED, truncates it and reads it: SIGBUS from
 *                     the program's own mapping
 *   flap FILE UNTIL   truncates FILE to 0 and back to its size, over and over, until UNTIL exists
 *                     (prints "flapping" after the first round, then "flap rounds=N"): a job that
 *                     damages its own usage file while others read it (truncated_user.sh)
 * Exit status 0, 2 when a setup step fails, 3 for a bad step. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

static CUfunction fn;
static CUstream stream;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t size_arg(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'G': v <<= 10; /* fall through */
    case 'M': v <<= 10; /* fall through */
    case 'K': v <<= 10; break;
    default: break;
    }
    return v;
}

/* Launches 8 kernels of `us` and synchronizes; returns the rc of the first failure. */
static CUresult burst(unsigned long long us)
{
    void *params[] = { &us };
    for (int i = 0; i < 8; i++) {
        CUresult rc = cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, NULL);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return cuStreamSynchronize(stream);
}

static void on_bus(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    char msg[64] = "own handler si_code=";
    size_t n = strlen(msg);
    int c = si->si_code;
    if (c < 0) {
        msg[n++] = '-';
        c = -c;
    }
    char d[12];
    int k = 0;
    do {
        d[k++] = (char)('0' + c % 10);
        c /= 10;
    } while (c);
    while (k)
        msg[n++] = d[--k];
    msg[n++] = '\n';
    if (write(2, msg, n) < 0) {
        /* nothing to do: the status says it anyway */
    }
    _exit(42);
}

static void own_fault(void)
{
    char path[] = "/tmp/bus_probe.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, 8192) != 0) {
        perror("bus_probe: ownfault setup");
        exit(2);
    }
    volatile char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
    unlink(path);
    if (m == MAP_FAILED || ftruncate(fd, 0) != 0) {
        perror("bus_probe: ownfault setup");
        exit(2);
    }
    printf("ownfault read=%d\n", m[4096]);   /* SIGBUS here */
}

static void flap(const char *file, const char *until)
{
    int fd = open(file, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror("bus_probe: flap");
        exit(2);
    }
    unsigned long long n = 0;
    do {
        if (ftruncate(fd, 0) != 0 || ftruncate(fd, st.st_size) != 0) {
            perror("bus_probe: flap: ftruncate");
            exit(2);
        }
        if (++n == 1)
            printf("flapping\n");
    } while ((n & 63) || access(until, F_OK) != 0);
    printf("flap rounds=%llu\n", n);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        if (!strcmp(op, "init")) {
            CUdevice dev;
            CUcontext ctx;
            CUmodule mod;
            MUST(cuInit(0));
            MUST(cuDeviceGet(&dev, 0));
            MUST(cuCtxCreate_v2(&ctx, 0, dev));
            MUST(cuModuleLoadData(&mod, "bus_probe image"));
            MUST(cuModuleGetFunction(&fn, mod, "sleep_us"));
            MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
            printf("init rc=0\n");
        } else if (!strcmp(op, "launch") && i + 1 < argc) {
            double ms = atof(argv[++i]);
            unsigned long long us = i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9'
                                        ? strtoull(argv[++i], NULL, 10) : 2000;
            unsigned long long n = 0;
            CUresult rc = CUDA_SUCCESS;
            double t0 = now_ms();
            while (now_ms() - t0 < ms && (rc = burst(us)) == CUDA_SUCCESS)
                n += 8;
            double el = now_ms() - t0;
            printf("launch rc=%d n=%llu share=%.3f\n", (int)rc, n, el > 0 ? (double)n * us / 1e3 / el : 0.0);
        } else if (!strcmp(op, "launchuntil") && i + 1 < argc) {
            const char *file = argv[++i];
            unsigned long long n = 0;
            CUresult rc;
            while ((rc = burst(100)) == CUDA_SUCCESS) {
                if ((n += 8) == 8)
                    printf("launching\n");
                if (access(file, F_OK) == 0)
                    break;
            }
            printf("launchuntil rc=%d n=%llu\n", (int)rc, n);
        } else if (!strcmp(op, "alloc") && i + 1 < argc) {
            uint64_t size = size_arg(argv[++i]);
            CUdeviceptr p;
            CUresult rc = cuMemAlloc_v2(&p, size);
            printf("alloc rc=%d size=%llu\n", (int)rc, (unsigned long long)size);
        } else if (!strcmp(op, "handler")) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_bus;
            sa.sa_flags = SA_SIGINFO;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGBUS, &sa, NULL) != 0) {
                perror("bus_probe: sigaction");
                return 2;
            }
            printf("handler\n");
        } else if (!strcmp(op, "raise")) {
            printf("raise\n");
            raise(SIGBUS);
            printf("raise returned\n");
        } else if (!strcmp(op, "ownfault")) {
            own_fault();
        } else if (!strcmp(op, "flap") && i + 2 < argc) {
            flap(argv[i + 1], argv[i + 2]);
            i += 2;
        } else {
            fprintf(stderr, "bus_probe: bad step '%s'\n", op);
            return 3;
        }
    }
    return 0;
}
