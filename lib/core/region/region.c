/* The job region: creation, reading and changing the limits. The file itself (validation,
 * mapping) is region_io.c; per-process slots, reservation and reaping are region_slots.c.
 * libc only: this file is linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/region.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu/exitcode.h"

_Static_assert(sizeof(struct vgpu_region_header) <= VGPU_REGION_LIMITS_SIZE, "the header must fit in page 0");
/* The layout of version 1: exited_realtime_ns took one of the reserved words. */
_Static_assert(offsetof(struct vgpu_region_header, cmd_pid) == 3424 && offsetof(struct vgpu_region_header, adopter) == 3440,
               "the job's command and adopter were appended after dev[]");
/* Lent memory was appended after the adopter, in page 0's tail (zero in older regions). */
_Static_assert(offsetof(struct vgpu_region_header, mem_request) == 3448, "mem_request was appended");
/* ... and its accounting after it. */
_Static_assert(offsetof(struct vgpu_region_header, acct_request_byte_s) == 3448 + 8 * VGPU_REGION_MAX_DEVICES &&
               sizeof(struct vgpu_region_header) == 3448 + 24 * VGPU_REGION_MAX_DEVICES,
               "lent memory's accounting was appended");
_Static_assert(offsetof(struct vgpu_region_header, dev) == 736 &&
               offsetof(struct vgpu_region_header, exited_realtime_ns) == 672,
               "the region header layout of version 1 must not change");
/* Oversubscription took reserved words, so regions of older and newer vgpu read each other. */
_Static_assert(sizeof(struct vgpu_region_dev_limits) == 168 && offsetof(struct vgpu_region_dev_limits, flags) == 132 &&
               offsetof(struct vgpu_region_dev_limits, mem_device) == 136,
               "the per-device limits of version 1 must not change");
_Static_assert(offsetof(struct vgpu_region_header, layout) == 680, "layout took the first reserved word");
_Static_assert(offsetof(struct vgpu_region_header, acct_flags) == 684 &&
               offsetof(struct vgpu_region_header, acct_seen_ns) == 688 &&
               offsetof(struct vgpu_region_dev_limits, acct_mem_byte_s) == 144 &&
               offsetof(struct vgpu_region_dev_limits, acct_energy_mj) == 152,
               "accounting took reserved words");
_Static_assert(offsetof(struct vgpu_region_header, over_limit_bytes) == 696 &&
               offsetof(struct vgpu_region_header, over_limit_ns) == 712 &&
               offsetof(struct vgpu_region_header, over_limit) == 720 &&
               offsetof(struct vgpu_region_header, dev) == 736, "the memory watch took reserved words");
_Static_assert(sizeof(struct vgpu_region_dev_usage) == 64 && offsetof(struct vgpu_region_dev_usage, spilled) == 56,
               "the per-device usage of version 1 must not change");
_Static_assert(sizeof(struct vgpu_region_slot) == 168 && offsetof(struct vgpu_region_slot, spill_dev) == 156 &&
               offsetof(struct vgpu_region_slot, spilled) == 160, "the slot of version 1 must not change");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomics must be plain words");

/* ---- creation ------------------------------------------------------------------------------ */

bool vgpu_job_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= VGPU_JOB_NAME_LEN || s[0] == '.' || s[0] == '-')
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

static void new_id(char *id)
{
    unsigned char rnd[6];
    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
        /* No entropy yet (early boot): uniqueness is all we need, and O_EXCL guards it. */
        uint64_t x = region_monotonic_ns() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(x >> (8 * i));
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof rnd; i++) {
        id[2 * i] = hex[rnd[i] >> 4];
        id[2 * i + 1] = hex[rnd[i] & 15];
    }
    id[2 * sizeof rnd] = '\0';
}

static void fill_header(struct vgpu_region_header *h, const char *id, const struct vgpu_job_spec *spec)
{
    h->version = VGPU_REGION_VERSION;
    h->limits_size = VGPU_REGION_LIMITS_SIZE;
    h->layout = spec->split ? VGPU_LAYOUT_SPLIT : 0;
    /* Only a split job's limits are root's: a job of the caller's own user is not watched. */
    atomic_store(&h->over_limit, spec->split ? spec->over_limit & 0xfu : 0);
    h->total_size = region_file_size_of(h->layout);
    h->max_devices = VGPU_REGION_MAX_DEVICES;
    h->max_slots = VGPU_REGION_MAX_SLOTS;
    snprintf(h->id, sizeof h->id, "%s", id);
    snprintf(h->name, sizeof h->name, "%s", spec->name ? spec->name : "");
    h->owner_uid = (uint32_t)(spec->split ? spec->job_uid : geteuid());
    h->creator_pid = (int32_t)getpid();
    h->creator_start = vgpu_proc_start_time(getpid());
    h->creator_pidns = vgpu_proc_pidns(0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_realtime_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    const char *cmd = spec->cmdline ? spec->cmdline : "";
    size_t len = strlen(cmd);
    if (len >= sizeof h->cmdline) {
        memcpy(h->cmdline, cmd, sizeof h->cmdline - 4);
        memcpy(h->cmdline + sizeof h->cmdline - 4, "...", 4);
    } else {
        memcpy(h->cmdline, cmd, len + 1);
    }
    h->device_count = spec->device_count;
    atomic_store(&h->state, VGPU_JOB_STARTING);
    for (unsigned d = 0; d < spec->device_count; d++) {
        struct vgpu_region_dev_limits *dl = &h->dev[d];
        snprintf(dl->uuid, sizeof dl->uuid, "%s", spec->dev[d].uuid ? spec->dev[d].uuid : "");
        dl->nvml_index = spec->dev[d].nvml_index;
        dl->is_mig = spec->dev[d].is_mig;
        dl->mem_total = spec->dev[d].mem_total;
        atomic_store(&dl->mem_limit, spec->dev[d].mem_limit);
        atomic_store(&dl->core_limit, spec->dev[d].core_limit);
        atomic_store(&dl->core_policy, (uint32_t)spec->dev[d].core_policy);
        atomic_store(&dl->priority, spec->dev[d].priority);
        if (spec->dev[d].oversub) {
            atomic_store(&dl->mem_device, spec->dev[d].mem_device);
            atomic_store(&dl->flags, VGPU_DEV_OVERSUB);
        }
        /* REQUEST equal to LIMIT is stored as 0, as an older vgpu wrote it: nothing is lent. */
        uint64_t req = spec->dev[d].mem_request;
        atomic_store(&h->mem_request[d], req && req < spec->dev[d].mem_limit ? req : 0);
    }
}

int vgpu_region_create(struct vgpu_region *r, const char *statedir, const struct vgpu_job_spec *spec,
                       struct vgpu_err *e)
{
    region_reset(r);
    if (spec->device_count == 0 || spec->device_count > VGPU_REGION_MAX_DEVICES) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "a job has 1 to %d GPUs, not %u", VGPU_REGION_MAX_DEVICES,
                     spec->device_count);
        return -1;
    }
    if (spec->name && *spec->name && !vgpu_job_name_valid(spec->name)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE,
                     "bad job name '%s': use 1 to %d letters, digits, '.', '_' or '-', not starting with '.' or '-'",
                     spec->name, VGPU_JOB_NAME_LEN - 1);
        return -1;
    }
    for (unsigned d = 0; d < spec->device_count; d++)
        if (spec->dev[d].core_limit > 100 ||
            (spec->dev[d].mem_total && spec->dev[d].mem_limit > spec->dev[d].mem_total && !spec->dev[d].oversub) ||
            (spec->dev[d].oversub && (spec->dev[d].mem_device > spec->dev[d].mem_limit ||
                                      (spec->dev[d].mem_total && spec->dev[d].mem_device > spec->dev[d].mem_total))) ||
            (spec->dev[d].mem_request && (spec->dev[d].mem_request > spec->dev[d].mem_limit || spec->dev[d].oversub))) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "job device %u: limit larger than the device", d);
            return -1;
        }

    if (spec->split && geteuid() != 0) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "only root can make a job whose limits its user cannot change "
                     "(vgpu run --user)");
        return -1;
    }
    char id[VGPU_JOB_ID_LEN], tmp[sizeof r->path], final[sizeof r->path], usage[sizeof r->path] = "";
    if (strlen(statedir) > sizeof tmp - 64) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %.64s...", statedir);
        return -1;
    }
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        new_id(id);
        if (snprintf(tmp, sizeof tmp, "%s/jobs/.%s.creating", statedir, id) >= (int)sizeof tmp ||
            snprintf(final, sizeof final, "%s/jobs/%s.region", statedir, id) >= (int)sizeof final)
            break;
        if (access(final, F_OK) == 0)
            continue;
        fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno != EEXIST) {
            vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                         "cannot create the job region %s: %s", tmp, strerror(errno));
            return -1;
        }
    }
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot find a free job id in %s/jobs", statedir);
        return -1;
    }
    /* The umask may have taken bits away (never added any); set the mode we mean explicitly. Split
     * (vgpu run --user): root's file, which the job user's group may read but nobody else write. */
    size_t size = region_file_size_of(spec->split ? VGPU_LAYOUT_SPLIT : 0);
    if ((spec->split ? fchown(fd, 0, spec->job_gid) < 0 || fchmod(fd, 0640) < 0 : fchmod(fd, 0600) < 0) ||
        ftruncate(fd, (off_t)size) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up the job region %s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (spec->split) {
        /* The usage file first, under its final name: readers look for ID.region, which appears
         * (rename below) only once its ID.usage exists. */
        snprintf(usage, sizeof usage, "%s/jobs/%s.usage", statedir, id);
        int ufd = open(usage, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        int uerr = ufd < 0 ? errno : 0;
        if (ufd >= 0 && (fchown(ufd, spec->job_uid, spec->job_gid) < 0 || fchmod(ufd, 0600) < 0 ||
                         ftruncate(ufd, (off_t)sizeof(struct vgpu_region_usage)) < 0))
            uerr = errno;
        if (!uerr)
            uerr = posix_fallocate(ufd, 0, (off_t)sizeof(struct vgpu_region_usage));
        if (uerr) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up the job's usage file %s: %s", usage, strerror(uerr));
            if (ufd >= 0)
                close(ufd);
            else
                usage[0] = 0;   /* not ours to remove */
            goto fail;
        }
        r->use_fd = ufd;
    }
    /* Every block now: a page of a sparse file that cannot be allocated when first written (a full
     * file system) kills the writer, vgpu run or a process of the job, with SIGBUS. */
    int ferr = posix_fallocate(fd, 0, (off_t)size);
    if (ferr) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up the job region %s: %s%s", tmp, strerror(ferr),
                     ferr == ENOSPC ? " (the state directory's file system is full: free space there, or set "
                                      "VGPU_STATE_DIR)" : "");
        goto fail;
    }
    r->fd = fd;
    snprintf(r->path, sizeof r->path, "%s", tmp);
    r->file_uid = geteuid();
    if (region_map(r, VGPU_REGION_ADMIN, size, fd, e) < 0)
        goto fail;
    fill_header(r->hdr_rw, id, spec);
    r->info = malloc(sizeof *r->info);
    if (!r->info) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory creating the job region %s", tmp);
        goto fail;
    }
    memcpy(r->info, r->hdr_rw, sizeof *r->info);
    atomic_store(&r->use->slot_end, VGPU_SLOT_END_KEPT);   /* no slot claimed yet: scans stop at 0 */
    /* The magic goes in last: a reader never sees a valid magic with a half-written header. */
    atomic_store_explicit(&r->hdr_rw->magic, VGPU_REGION_MAGIC, memory_order_release);
    /* The file appears complete, under its final name, in one step. */
    if (rename(tmp, final) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot publish the job region %s: %s", final, strerror(errno));
        goto fail;
    }
    snprintf(r->path, sizeof r->path, "%s", final);
    return 0;
fail:
    unlink(tmp);
    if (usage[0])
        unlink(usage);
    if (r->use_fd >= 0 && r->fd < 0) {
        close(r->use_fd);
        r->use_fd = -1;
    }
    if (r->fd >= 0) {
        vgpu_region_close(r);
    } else {
        close(fd);
    }
    return -1;
}

/* ---- reading ------------------------------------------------------------------------------------ */

unsigned vgpu_region_device_count(const struct vgpu_region *r)
{
    if (!r || !r->hdr)
        return 0;
    unsigned n = r->info ? r->info->device_count : r->hdr->device_count;
    return n > VGPU_REGION_MAX_DEVICES ? VGPU_REGION_MAX_DEVICES : n;
}

uint64_t vgpu_region_mem_limit(const struct vgpu_region *r, unsigned dev)
{
    return r && r->hdr && region_dev_ok(r, dev) ? atomic_load(&r->hdr->dev[dev].mem_limit) : 0;
}

uint64_t vgpu_region_mem_used(const struct vgpu_region *r, unsigned dev)
{
    return r && r->use && region_dev_ok(r, dev) ? atomic_load(&r->use->dev[dev].used) : 0;
}

bool vgpu_region_oversub(const struct vgpu_region *r, unsigned dev, uint64_t *device_bytes)
{
    if (!r || !r->hdr || !region_dev_ok(r, dev) || !(atomic_load(&r->hdr->dev[dev].flags) & VGPU_DEV_OVERSUB))
        return false;
    if (device_bytes)
        *device_bytes = atomic_load(&r->hdr->dev[dev].mem_device);
    return true;
}

uint64_t vgpu_region_mem_spilled(const struct vgpu_region *r, unsigned dev)
{
    /* A borrower's managed memory is counted in `spilled` too (what reservations compare with its
     * REQUEST), but it is prefetched onto the GPU: not off the device (vgpu_region_mem_borrowed). */
    if (!vgpu_region_oversub(r, dev, NULL))
        return 0;
    return r && r->use && region_dev_ok(r, dev) ? atomic_load(&r->use->dev[dev].spilled) : 0;
}

uint64_t vgpu_region_mem_request(const struct vgpu_region *r, unsigned dev)
{
    uint64_t req;
    return vgpu_region_lending(r, dev, &req) ? req : vgpu_region_mem_limit(r, dev);
}

bool vgpu_region_lending(const struct vgpu_region *r, unsigned dev, uint64_t *request)
{
    if (!r || !r->hdr || !region_dev_ok(r, dev))
        return false;
    uint64_t req = atomic_load(&r->hdr->mem_request[dev]), limit = atomic_load(&r->hdr->dev[dev].mem_limit);
    if (!req || !limit || req >= limit)
        return false;
    if (request)
        *request = req;
    return true;
}

uint64_t vgpu_region_mem_borrowed(const struct vgpu_region *r, unsigned dev)
{
    uint64_t req;
    if (!vgpu_region_lending(r, dev, &req) || !r->use)
        return 0;
    uint64_t used = atomic_load(&r->use->dev[dev].used), out = atomic_load(&r->use->dev[dev].outside_bytes);
    uint64_t all = used + out < used ? UINT64_MAX : used + out;
    return all > req ? all - req : 0;
}

/* ---- changing ---------------------------------------------------------------------------------- */

static int admin_dev(struct vgpu_region *r, unsigned dev, struct vgpu_err *e)
{
    if (!r || !r->hdr_rw) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "the job region is open read-only: only its owner or root may change it");
        return -1;
    }
    if (vgpu_region_check(r) != 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s; the limit cannot be changed (the job keeps the limits it last saw)",
                     r->damaged_why);
        return -1;
    }
    if (!region_dev_ok(r, dev)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the job has no GPU %u (it has %u: 0..%u)", dev, r->hdr->device_count,
                     r->hdr->device_count - 1);
        return -1;
    }
    return 0;
}

int vgpu_region_set_mem_limit(struct vgpu_region *r, unsigned dev, uint64_t bytes, struct vgpu_err *e)
{
    if (admin_dev(r, dev, e) < 0)
        return -1;
    /* A REQUEST at or above the new limit goes (the job borrows nothing more), before the limit
     * is stored: no reader ever sees a request above the cap. */
    uint64_t req = atomic_load(&r->hdr->mem_request[dev]);
    if (req && (!bytes || req >= bytes))
        atomic_store(&r->hdr_rw->mem_request[dev], 0);
    atomic_store(&r->hdr_rw->dev[dev].mem_limit, bytes);
    atomic_fetch_add(&r->hdr_rw->limits_seq, 1);
    return 0;
}

int vgpu_region_set_mem(struct vgpu_region *r, unsigned dev, uint64_t request, uint64_t limit, struct vgpu_err *e)
{
    if (admin_dev(r, dev, e) < 0)
        return -1;
    if (limit && request > limit) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "a memory REQUEST is at most its LIMIT (REQUEST:LIMIT)");
        return -1;
    }
    if (atomic_load(&r->hdr->dev[dev].flags) & VGPU_DEV_OVERSUB && request && request < limit) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the job runs with --oversubscribe, which has a device share of its own: it "
                     "cannot also borrow (REQUEST:LIMIT); give one size");
        return -1;
    }
    /* The request first: a reader between the two stores sees a request that is at most the old
     * limit or the new one, never a borrower with a request above its cap. */
    uint64_t req = request && limit && request < limit ? request : 0;
    if (req && req > atomic_load(&r->hdr->dev[dev].mem_limit)) {
        atomic_store(&r->hdr_rw->dev[dev].mem_limit, limit);
        atomic_store(&r->hdr_rw->mem_request[dev], req);
    } else {
        atomic_store(&r->hdr_rw->mem_request[dev], req);
        atomic_store(&r->hdr_rw->dev[dev].mem_limit, limit);
    }
    atomic_fetch_add(&r->hdr_rw->limits_seq, 1);
    return 0;
}

int vgpu_region_set_core_limit(struct vgpu_region *r, unsigned dev, unsigned pct, enum vgpu_core_policy pol,
                               struct vgpu_err *e)
{
    if (admin_dev(r, dev, e) < 0)
        return -1;
    if (pct > 100) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "a core limit is 1 to 100 percent (0 for none), not %u", pct);
        return -1;
    }
    atomic_store(&r->hdr_rw->dev[dev].core_limit, pct);
    atomic_store(&r->hdr_rw->dev[dev].core_policy, (uint32_t)pol);
    atomic_fetch_add(&r->hdr_rw->limits_seq, 1);
    return 0;
}

int vgpu_region_set_state(struct vgpu_region *r, enum vgpu_job_state st, int exit_code, int exit_signal,
                          struct vgpu_err *e)
{
    if (!r || !r->hdr_rw) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "the job region is open read-only");
        return -1;
    }
    if (vgpu_region_check(r) != 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s: the job's state cannot be recorded there", r->damaged_why);
        return -1;
    }
    uint64_t when = 0;
    if (st == VGPU_JOB_EXITED) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        when = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    }
    atomic_store(&r->hdr_rw->exit_code, exit_code);
    atomic_store(&r->hdr_rw->exit_signal, exit_signal);
    atomic_store(&r->hdr_rw->exited_realtime_ns, when);
    atomic_store(&r->hdr_rw->state, (uint32_t)st);
    return 0;
}
