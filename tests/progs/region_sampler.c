/* region_sampler: reads a job region (read-only, as `vgpu ps` would, without taking part in
 * the job) and samples job device DEV's accounted memory every 50 us for MS milliseconds:
 *     samples=N max=BYTES last=BYTES limit=BYTES
 * Used to check that concurrent processes never pass the limit, at any sampled instant.
 *   region_sampler REGION DEV MS */
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
    if (argc != 4) {
        fprintf(stderr, "usage: region_sampler REGION DEV MS\n");
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
    uint64_t end = now_ms() + (uint64_t)atoll(argv[3]), n = 0, max = 0, last = 0;
    do {
        last = atomic_load(&u->dev[dev].used);
        if (last > max)
            max = last;
        n++;
        usleep(50);
    } while (now_ms() < end);
    printf("samples=%llu max=%llu last=%llu limit=%llu\n", (unsigned long long)n, (unsigned long long)max,
           (unsigned long long)last, (unsigned long long)atomic_load(&h->dev[dev].mem_limit));
    return 0;
}
