/* region_sampler: reads a job region (read-only, as `vgpu ps` would, without taking part in
 * the job) and samples job device DEV's accounted memory every 50 us for MS milliseconds:
 *     samples=N max=BYTES last=BYTES limit=BYTES host_pids=P,...
 * host_pids: the host pids recorded in the job's live process slots (by the process itself, or
 * by a reader in the creator's namespace that saw it alive: vgpu run's walk), "-" when none.
 * Used to check that concurrent processes never pass the limit, at any sampled instant.
 *   region_sampler REGION DEV MS [STOPFILE]
 * With STOPFILE it samples until STOPFILE exists (the test says when its scenario is over), MS
 * being then a deadline: reaching it first prints "timeout=1" and exits 1. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/region.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: region_sampler REGION DEV MS [STOPFILE]\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror(argv[1]);
        return 2;
    }
    void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    const struct vgpu_region_header *h = m;
    const struct vgpu_region_usage *u = (const void *)((const char *)m + VGPU_REGION_LIMITS_SIZE);
    unsigned dev = (unsigned)atoi(argv[2]);
    if (dev >= VGPU_REGION_MAX_DEVICES)
        return 2;
    const char *stop = argc == 5 ? argv[4] : NULL;
    uint64_t end = now_ms() + (uint64_t)atoll(argv[3]), n = 0, max = 0, last = 0;
    int stopped = 0;
    do {
        /* Checked every 1024 samples: access() is a system call, the read is not. */
        if (stop && (n & 1023) == 0 && access(stop, F_OK) == 0) {
            stopped = 1;
            break;
        }
        last = atomic_load(&u->dev[dev].used);
        if (last > max)
            max = last;
        n++;
        usleep(50);
    } while (now_ms() < end);
    int timed_out = stop && !stopped;
    if (timed_out)
        printf("timeout=1 ");
    printf("samples=%llu max=%llu last=%llu limit=%llu host_pids=", (unsigned long long)n, (unsigned long long)max,
           (unsigned long long)last, (unsigned long long)atomic_load(&h->dev[dev].mem_limit));
    int listed = 0;
    for (unsigned i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        uint64_t o = atomic_load(&u->slot[i].owner);
        int32_t hp = atomic_load(&u->slot[i].host_pid);
        if (vgpu_slot_state_of(o) == VGPU_SLOT_LIVE && hp > 0)
            printf("%s%d", listed++ ? "," : "", (int)hp);
    }
    printf("%s\n", listed ? "" : "-");
    return timed_out;
}
