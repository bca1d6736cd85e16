/* Lent memory: a borrower's free view, and the other jobs' unmet requests (vgpu/lend.h).
 * libc only: linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/lend.h"

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "region_internal.h"

static uint64_t sat_sub(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

uint64_t vgpu_lend_free(uint64_t limit, uint64_t request, uint64_t used, uint64_t device_free, uint64_t others_unmet)
{
    uint64_t room = sat_sub(limit, used);
    uint64_t promised = sat_sub(request, used);                /* ours whatever others borrow */
    uint64_t spare = sat_sub(device_free, others_unmet);       /* nobody's request needs it */
    uint64_t can = promised > spare ? promised : spare;
    return can < room ? can : room;
}

uint64_t vgpu_lend_owner_free(uint64_t limit, uint64_t used, uint64_t device_free, uint64_t others_borrowed)
{
    uint64_t room = sat_sub(limit, used);
    uint64_t can = device_free + others_borrowed < device_free ? UINT64_MAX : device_free + others_borrowed;
    return can < room ? can : room;
}

static void add_sat(uint64_t *sum, uint64_t v)
{
    *sum = *sum + v < *sum ? UINT64_MAX : *sum + v;
}

/* One other job on the GPU named `uuid`, read from the region file at dirfd/name, into *o. */
static void other_of(int dirfd, const char *name, const char *self_id, const char *uuid, struct vgpu_lend_others *o)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    struct vgpu_region_header *h = malloc(sizeof *h);
    if (!h || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h ||
        atomic_load(&h->magic) != VGPU_REGION_MAGIC || h->version != VGPU_REGION_VERSION ||
        h->device_count == 0 || h->device_count > VGPU_REGION_MAX_DEVICES ||
        atomic_load(&h->state) == VGPU_JOB_EXITED || !memchr(h->id, 0, sizeof h->id) ||
        strcmp(h->id, self_id) == 0)
        goto out;
    int ufd = fd;
    off_t base = VGPU_REGION_LIMITS_SIZE;
    if (h->layout & VGPU_LAYOUT_SPLIT) {
        /* "<id>.usage" beside "<id>.region" (vgpu run --user). */
        char usage[VGPU_JOB_ID_LEN + 8];
        snprintf(usage, sizeof usage, "%s.usage", h->id);
        ufd = openat(dirfd, usage, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        base = 0;
        if (ufd < 0)
            goto out;
    }
    for (unsigned d = 0; d < h->device_count; d++) {
        if (!memchr(h->dev[d].uuid, 0, sizeof h->dev[d].uuid) || strcasecmp(h->dev[d].uuid, uuid) != 0)
            continue;
        uint64_t limit = atomic_load(&h->dev[d].mem_limit), req = atomic_load(&h->mem_request[d]);
        bool lends = req && req < limit;
        if (!lends)
            req = limit;                /* no limit: no promise */
        struct vgpu_region_dev_usage u;
        off_t at = base + (off_t)offsetof(struct vgpu_region_usage, dev) + (off_t)(d * sizeof u);
        if (!req || pread(ufd, &u, sizeof u, at) != (ssize_t)sizeof u)
            continue;
        uint64_t used = atomic_load(&u.used), held = used + atomic_load(&u.outside_bytes);
        if (held < used)
            held = UINT64_MAX;
        add_sat(&o->unmet, sat_sub(req, held));
        if (lends)
            add_sat(&o->borrowed, sat_sub(held, req));
    }
    if (ufd != fd)
        close(ufd);
out:
    free(h);
    close(fd);
}

void vgpu_lend_others(const struct vgpu_region *self, unsigned dev, struct vgpu_lend_others *out)
{
    out->unmet = out->borrowed = 0;
    if (!self || !self->info || dev >= vgpu_region_device_count(self) || !self->info->dev[dev].uuid[0])
        return;
    char dir[sizeof self->path];
    snprintf(dir, sizeof dir, "%s", self->path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return;
    DIR *dp = fdopendir(dirfd);
    if (!dp) {
        close(dirfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t n = strlen(de->d_name);
        if (n < 8 || de->d_name[0] == '.' || strcmp(de->d_name + n - 7, ".region") != 0)
            continue;
        other_of(dirfd, de->d_name, self->info->id, self->info->dev[dev].uuid, out);
    }
    closedir(dp);
}
