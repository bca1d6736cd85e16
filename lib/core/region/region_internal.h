/* Private to lib/core/region*.c: helpers the region's files share. */
#ifndef VGPU_REGION_INTERNAL_H
#define VGPU_REGION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "vgpu/region.h"

static inline uint64_t region_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline size_t region_file_size(void)
{
    return VGPU_REGION_SIZE;
}

static inline void region_reset(struct vgpu_region *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->use_fd = -1;
}

/* The size of the .region file of a header: page 0 alone in the split layout. */
static inline size_t region_file_size_of(uint32_t layout)
{
    return layout & VGPU_LAYOUT_SPLIT ? VGPU_REGION_LIMITS_SIZE : region_file_size();
}

/* "<...>/<id>.usage" for "<...>/<id>.region" into out. false when it does not fit or the name
 * does not end in .region. */
static inline bool region_usage_path(const char *region, char *out, size_t len)
{
    return vgpu_region_sibling_path(region, ".usage", out, len);
}

static inline bool region_dev_ok(const struct vgpu_region *r, unsigned dev)
{
    return dev < VGPU_REGION_MAX_DEVICES && dev < (r->info ? r->info->device_count : r->hdr->device_count);
}

/* Maps an open region's file (r->fd, r->path set) in `mode`: page 0 from r->fd (read-only in
 * JOB mode), the usage part from rw_fd (r->fd itself in ADMIN mode). region_io.c. */
int region_map(struct vgpu_region *r, enum vgpu_region_mode mode, size_t size, int rw_fd, struct vgpu_err *e);

#endif
