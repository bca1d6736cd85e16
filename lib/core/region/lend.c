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
#include <time.h>
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

/* Appends "NAME (ID)" (or "ID" for a job without a name) to the list in names[len], ", "
 * between; a list that does not fit ends in "...". */
static void add_name(char *names, size_t len, const struct vgpu_region_header *h)
{
    if (!names || !len)
        return;
    size_t n = strlen(names);
    if (n + 4 >= len)
        return;
    char one[VGPU_JOB_NAME_LEN + VGPU_JOB_ID_LEN + 8];
    if (memchr(h->name, 0, sizeof h->name) && h->name[0])
        snprintf(one, sizeof one, "%s (%s)", h->name, h->id);
    else
        snprintf(one, sizeof one, "%s", h->id);
    if (snprintf(names + n, len - n, "%s%s", n ? ", " : "", one) >= (int)(len - n))
        memcpy(names + len - 4, "...", 4);
}

uint64_t vgpu_lend_target(uint64_t unmet, uint64_t device_free, uint64_t demoted, uint64_t ahead, uint64_t mine)
{
    uint64_t owed = unmet + demoted < unmet ? UINT64_MAX : unmet + demoted;
    uint64_t part = sat_sub(sat_sub(owed, device_free), ahead);
    return part < mine ? part : mine;
}

bool vgpu_lend_gives_first(const struct vgpu_lend_key *a, const struct vgpu_lend_key *b)
{
    if (a->prio != b->prio)
        return a->prio < b->prio;
    if (a->borrowed != b->borrowed)
        return a->borrowed > b->borrowed;
    return strcmp(a->id ? a->id : "", b->id ? b->id : "") < 0;
}

/* What a borrowing job's processes demoted on its job device d, and whether a move is in flight:
 * its slots' words, read from the usage part at ufd/base. */
static void demoted_of(int ufd, off_t base, unsigned d, uint64_t *demoted, bool *moving)
{
    *demoted = 0;
    *moving = false;
    uint32_t end = 0;
    if (pread(ufd, &end, sizeof end, base + (off_t)offsetof(struct vgpu_region_usage, slot_end)) != (ssize_t)sizeof end)
        return;
    unsigned n = end & VGPU_SLOT_END_KEPT ? end & ~VGPU_SLOT_END_KEPT : VGPU_REGION_MAX_SLOTS;
    if (n > VGPU_REGION_MAX_SLOTS)
        n = VGPU_REGION_MAX_SLOTS;
    for (unsigned i = 0; i < n; i++) {
        struct vgpu_region_slot sl;
        off_t at = base + (off_t)offsetof(struct vgpu_region_usage, slot) + (off_t)(i * sizeof sl);
        if (pread(ufd, &sl, sizeof sl, at) != (ssize_t)sizeof sl)
            return;
        uint32_t sd = atomic_load(&sl.spill_dev);
        if (vgpu_slot_state_of(atomic_load(&sl.owner)) == VGPU_SLOT_FREE || (sd & VGPU_SLOT_SPILL_DEV_MASK) != d + 1)
            continue;
        add_sat(demoted, vgpu_slot_demoted_of(sd));
        *moving = *moving || (sd & VGPU_SLOT_MOVING);
    }
}

/* One other job on the GPU named `uuid`, read from the region file at dirfd/name, into *o; a job
 * that borrows there is named in names[len] (len 0: not asked), and set against `me` when given. */
static void other_of(int dirfd, const char *name, const char *self_id, const char *uuid, const struct vgpu_lend_key *me,
                     struct vgpu_lend_others *o, char *names, size_t len)
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
        if (lends && held > req) {
            add_sat(&o->borrowed, held - req);
            add_name(names, len, h);
            if (me) {
                uint64_t demoted;
                bool moving;
                demoted_of(ufd, base, d, &demoted, &moving);
                if (moving)
                    o->moving = true;   /* its demoted bytes may still be on the GPU */
                else
                    add_sat(&o->demoted, demoted);
                struct vgpu_lend_key k = { atomic_load(&h->dev[d].priority), held - req, h->id };
                if (vgpu_lend_gives_first(&k, me))
                    add_sat(&o->ahead, k.borrowed);
            }
        }
    }
    if (ufd != fd)
        close(ufd);
out:
    free(h);
    close(fd);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The arbiter's answer that self's vgpu run wrote beside the region (vgpu_lend_share), when it is
 * there, whole and fresh. */
static bool read_answer(const struct vgpu_region *self, struct vgpu_lend_file *f)
{
    char path[sizeof self->path];
    if (!self || !vgpu_region_sibling_path(self->path, ".lend", path, sizeof path))
        return false;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    ssize_t got = pread(fd, f, sizeof *f, 0);
    close(fd);
    uint64_t now = mono_ns();
    return got == (ssize_t)sizeof *f && f->magic == VGPU_LEND_FILE_MAGIC && f->version == VGPU_LEND_FILE_VERSION &&
           f->count <= VGPU_REGION_MAX_DEVICES && f->at_ns <= now && now - f->at_ns <= VGPU_LEND_FRESH_NS;
}

uint64_t vgpu_lend_answered_at(const struct vgpu_region *self)
{
    struct vgpu_lend_file f;
    return read_answer(self, &f) ? f.at_ns : 0;
}

/* What the other users' jobs on self's GPU add, from the arbiter's answer. */
static void add_remote(const struct vgpu_region *self, unsigned dev, bool look, struct vgpu_lend_others *out,
                       char *names, size_t len)
{
    struct vgpu_lend_file f;
    if (!read_answer(self, &f) || dev >= f.count)
        return;
    const struct vgpu_lend_remote *x = &f.dev[dev];
    add_sat(&out->unmet, x->unmet);
    add_sat(&out->borrowed, x->borrowed);
    if (look) {
        add_sat(&out->demoted, x->demoted);
        add_sat(&out->ahead, x->ahead);
        out->moving = out->moving || x->moving;
    }
    if (x->borrowed && names && len) {
        size_t k = strlen(names);
        if (snprintf(names + k, len - k, "%sother users' jobs", k ? ", " : "") >= (int)(len - k) && len >= 4)
            memcpy(names + len - 4, "...", 4);
    }
}

static void others(const struct vgpu_region *self, unsigned dev, const struct vgpu_lend_key *me,
                   struct vgpu_lend_others *out, char *names, size_t len)
{
    *out = (struct vgpu_lend_others){ 0 };
    if (len)
        names[0] = 0;
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
        other_of(dirfd, de->d_name, self->info->id, self->info->dev[dev].uuid, me, out, names, len);
    }
    closedir(dp);
    add_remote(self, dev, me != NULL, out, names, len);
}

void vgpu_lend_others(const struct vgpu_region *self, unsigned dev, struct vgpu_lend_others *out)
{
    others(self, dev, NULL, out, NULL, 0);
}

void vgpu_lend_look(const struct vgpu_region *self, unsigned dev, const struct vgpu_lend_key *me,
                    struct vgpu_lend_others *out)
{
    others(self, dev, me, out, NULL, 0);
}

void vgpu_lend_borrowers(const struct vgpu_region *self, unsigned dev, struct vgpu_lend_others *out, char *names,
                         size_t len)
{
    others(self, dev, NULL, out, names, len);
}
