/* fuzz_region: the job-region reader (lib/core/region/region.c), which vgpu ps/top/limit/wait and
 * every process of a job run on a file that the job's own user can write. The first input byte
 * picks the file's length: the input as it is (truncated files), padded to the size a region
 * has, or padded to the size its header claims (capped at 64 MiB); the rest is the file. A region
 * that opens is then read the ways the readers read it, and reaped; and the state directory that
 * holds it is listed and searched as vgpu ps and vgpu limit do (lib/core/region/jobs.c), which may remove
 * it as stale. Invariants: what the readers report stays within the region's fixed bounds. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#include "vgpu/region.h"

static char dir[64], path[128];

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_region: could not remove %s\n", dir);
}

static void write_file(const uint8_t *data, size_t size, uint8_t mode)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    off_t len = (off_t)size;
    if (mode % 3 == 1) {
        len = (off_t)VGPU_REGION_SIZE;
    } else if (mode % 3 == 2 && size >= sizeof(struct vgpu_region_header)) {
        uint64_t claimed;
        memcpy(&claimed, data + offsetof(struct vgpu_region_header, total_size), sizeof claimed);
        len = claimed < (64u << 20) ? (off_t)claimed : (off_t)VGPU_REGION_SIZE;
    }
    if (len > (off_t)size && ftruncate(fd, len) != 0)
        abort();
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/vgpu-fuzz-region.%d", (int)getpid());
        snprintf(path, sizeof path, "%s/jobs/0123456789ab.region", dir);
        char jobs[80];
        snprintf(jobs, sizeof jobs, "%s/jobs", dir);
        if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || (mkdir(jobs, 0700) != 0 && errno != EEXIST))
            abort();
        atexit(cleanup);
    }
    if (size < 1)
        return 0;
    write_file(data + 1, size - 1, data[0]);
    struct vgpu_region r;
    struct vgpu_err e;
    memset(&e, 0, sizeof e);
    if (vgpu_region_open(&r, path, VGPU_REGION_JOB, &e) == 0) {
        unsigned n = vgpu_region_device_count(&r);
        FUZZ_ASSERT(n <= VGPU_REGION_MAX_DEVICES);
        for (unsigned d = 0; d <= n && d < VGPU_REGION_MAX_DEVICES; d++) {
            (void)vgpu_region_mem_limit(&r, d);
            (void)vgpu_region_mem_used(&r, d);
        }
        pid_t pids[VGPU_REGION_MAX_SLOTS];
        int32_t host[VGPU_REGION_MAX_SLOTS];
        unsigned np = vgpu_region_pids(&r, pids, host, VGPU_REGION_MAX_SLOTS);
        FUZZ_ASSERT(np <= VGPU_REGION_MAX_SLOTS);
        (void)vgpu_region_creator_alive(&r);
        FUZZ_ASSERT(memchr(r.info->id, 0, sizeof r.info->id) && memchr(r.info->name, 0, sizeof r.info->name));
        (void)vgpu_region_reap(&r);
        if (data[0] & 0x80) {
            /* Truncated under the mapping (issue 12 item 3): fenced off, nothing faults. */
            FUZZ_ASSERT(truncate(path, data[0] & 0x40 ? 0 : 100) == 0);
            FUZZ_ASSERT(vgpu_region_check(&r) == 1 && r.damaged);
            (void)vgpu_region_reap(&r);
            for (unsigned d = 0; d < n; d++)
                (void)vgpu_region_mem_used(&r, d);
        }
        vgpu_region_close(&r);
    } else {
        FUZZ_ASSERT(e.code != 0 && memchr(e.msg, 0, sizeof e.msg));
    }
    struct vgpu_job_ref *refs = NULL;
    size_t n = 0;
    unsigned corrupt = 0;
    if (vgpu_jobs_list(dir, &refs, &n, &corrupt, &e) == 0) {
        FUZZ_ASSERT(n <= 1 && corrupt <= 1);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(memchr(refs[i].name, 0, sizeof refs[i].name) && memchr(refs[i].id, 0, sizeof refs[i].id));
        free(refs);
    }
    if (vgpu_jobs_find(dir, "0123", VGPU_REGION_JOB, &r, &e) == 0)
        vgpu_region_close(&r);
    return 0;
}
