/* fuzz_placement: the machine-wide placement ledger (lib/core/place/placement.c) as vgpu run --mem
 * reads it when it chooses a GPU: every user may write a promise file there, so its contents are
 * untrusted (harness only: the ledger's format and checks belong to placement.c). The input's first
 * line names the GPU asked about; the rest is this process's promise file. The harness then sums
 * the promises on that GPU. Invariant: a file that promises nothing on that GPU sums to 0. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#include "vgpu/placement.h"
#include "vgpu/proc.h"

static char dir[64], promise[160];

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_placement: could not remove %s\n", dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/vgpu-fuzz-machine.%d", (int)getpid());
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            abort();
        setenv("VGPU_MACHINE_DIR", dir, 1);
        snprintf(promise, sizeof promise, "%s/promises/%d.%llu", dir, (int)getpid(),
                 (unsigned long long)vgpu_proc_start_time(getpid()));
        atexit(cleanup);
        (void)vgpu_place_promised(dir, NULL);       /* makes promises/ and queue/ */
    }
    char *s = fuzz_string(data, size);
    char *nl = strchr(s, '\n');
    const char *body = nl ? nl + 1 : "";
    if (nl)
        *nl = 0;
    int fd = open(promise, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        abort();
    size_t n = strlen(body);
    if (n && write(fd, body, n) != (ssize_t)n)
        abort();
    close(fd);
    uint64_t sum = vgpu_place_promised(dir, s);
    if (*s && !strstr(body, s))
        FUZZ_ASSERT(sum == 0);
    free(s);
    return 0;
}
