/* fuzz_sched: the shared per-GPU scheduler file (lib/core/sched/sched.c) as every capped job on a GPU
 * reads it, from a file filled with the input (harness only: the file's format and its checks
 * belong to sched.c). The input is the file; the harness then registers a job, attaches a
 * process, tries to take the lease and gives it back, as the limiter does at a turn. The point
 * is that damaged or hostile contents never crash and never hang a process. */
#include <fcntl.h>
#include <unistd.h>

#include "fuzz.h"

#include "vgpu/sched.h"

static char path[64];

static void cleanup(void)
{
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "/dev/shm/vgpu-fuzz-sched.%d", (int)getpid());
        atexit(cleanup);
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    struct vgpu_sched s;
    struct vgpu_err e;
    memset(&e, 0, sizeof e);
    if (vgpu_sched_open_path(&s, path, &e) != 0) {
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
        return 0;
    }
    uint64_t now = 1000000000ULL;
    int job = vgpu_sched_job(&s, 0x1234, 30, false, 0, now);
    if (job >= 0) {
        int proc = vgpu_sched_attach(&s, (unsigned)job, getpid(), 1);
        if (proc >= 0) {
            uint64_t lease = 0, end = 0;
            for (int i = 0; i < 3; i++, now += 20000000ULL)
                if (vgpu_sched_try_acquire(&s, proc, now, &lease, &end)) {
                    (void)vgpu_sched_release(&s, lease, 1000000, now + 1000000);
                    break;
                }
            vgpu_sched_unwant(&s, proc);
            vgpu_sched_detach(&s, proc);
        }
    }
    vgpu_sched_close(&s);
    return 0;
}
