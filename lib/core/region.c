/* The job region: creation, validation, lock-free reservation, slots and reaping.
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

#include "vgpu/exitcode.h"

_Static_assert(sizeof(struct vgpu_region_header) <= VGPU_REGION_LIMITS_SIZE, "the header must fit in page 0");
/* The layout of version 1: exited_realtime_ns took one of the reserved words. */
_Static_assert(sizeof(struct vgpu_region_header) == 3424 && offsetof(struct vgpu_region_header, dev) == 736 &&
               offsetof(struct vgpu_region_header, exited_realtime_ns) == 672,
               "the region header layout of version 1 must not change");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomics must be plain words");

/* ---- processes --------------------------------------------------------------------------- */

uint64_t vgpu_proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name (field 2) may contain spaces and parentheses: count from the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    /* After ')' come fields 3..; starttime is field 22, i.e. the 20th from here. */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return 0;
    }
    return strtoull(p + 1, NULL, 10);
}

pid_t vgpu_proc_host_pid(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            char *p = strstr(buf, "\nNSpid:");
            if (p) {
                long v = strtol(p + 7, NULL, 10);
                if (v > 0)
                    return (pid_t)v;
            }
        }
    }
    return getpid();
}

static bool slot_process_alive(pid_t pid, uint64_t start)
{
    uint64_t now = vgpu_proc_start_time(pid);
    return now != 0 && now == start;
}

static bool pid_exists(pid_t pid)
{
    return pid > 0 && vgpu_proc_start_time(pid) != 0;
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- validation and mapping -------------------------------------------------------------- */

static size_t region_file_size(void)
{
    return VGPU_REGION_SIZE;
}

static bool has_nul(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* Checks a header read with pread (before mapping, so a truncated file cannot SIGBUS us). */
static int check_header(const struct vgpu_region_header *h, const struct stat *st, const char *path,
                        struct vgpu_err *e)
{
    const char *fix = "remove the file (the job's processes then run unlimited until restarted)";
    uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (magic != VGPU_REGION_MAGIC) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is not a vgpu job region (bad magic number %#llx); %s", path,
                     (unsigned long long)magic, fix);
        return -1;
    }
    if (h->version != VGPU_REGION_VERSION) {
        vgpu_err_set(e, VGPU_EXIT_STATE,
                     "%s has region format version %u, this vgpu reads version %u; use the vgpu that started the job",
                     path, h->version, VGPU_REGION_VERSION);
        return -1;
    }
    if (h->limits_size != VGPU_REGION_LIMITS_SIZE || h->max_devices != VGPU_REGION_MAX_DEVICES ||
        h->max_slots != VGPU_REGION_MAX_SLOTS || h->total_size != region_file_size()) {
        vgpu_err_set(e, VGPU_EXIT_STATE,
                     "%s is corrupt: its layout (limits %u B, %u devices, %u slots, %llu B) is not this version's; %s",
                     path, h->limits_size, h->max_devices, h->max_slots, (unsigned long long)h->total_size, fix);
        return -1;
    }
    if ((uint64_t)st->st_size != h->total_size) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is truncated or corrupt: %lld bytes, expected %llu; %s", path,
                     (long long)st->st_size, (unsigned long long)h->total_size, fix);
        return -1;
    }
    if (h->device_count == 0 || h->device_count > VGPU_REGION_MAX_DEVICES || !has_nul(h->id, sizeof h->id) ||
        !has_nul(h->name, sizeof h->name) || !has_nul(h->cmdline, sizeof h->cmdline)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is corrupt (device count %u, or unterminated strings); %s", path,
                     h->device_count, fix);
        return -1;
    }
    for (unsigned d = 0; d < h->device_count; d++)
        if (!has_nul(h->dev[d].uuid, sizeof h->dev[d].uuid)) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "%s is corrupt (device %u's UUID is unterminated); %s", path, d, fix);
            return -1;
        }
    return 0;
}

static void region_reset(struct vgpu_region *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

static int map_region(struct vgpu_region *r, enum vgpu_region_mode mode, size_t size, struct vgpu_err *e)
{
    long page = sysconf(_SC_PAGESIZE);
    if (mode == VGPU_REGION_ADMIN || page != VGPU_REGION_LIMITS_SIZE) {
        /* With pages larger than 4 KiB the limits page cannot be mapped apart: one writable
         * mapping (the read-only protection is a guard against bugs, not a security boundary). */
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
        if (m == MAP_FAILED)
            goto fail;
        r->map_limits = m;
        r->map_limits_len = size;
        r->hdr = m;
        r->hdr_rw = mode == VGPU_REGION_ADMIN ? m : NULL;
        r->use = (struct vgpu_region_usage *)((char *)m + VGPU_REGION_LIMITS_SIZE);
        return 0;
    }
    void *lim = mmap(NULL, VGPU_REGION_LIMITS_SIZE, PROT_READ, MAP_SHARED, r->fd, 0);
    if (lim == MAP_FAILED)
        goto fail;
    void *use = mmap(NULL, size - VGPU_REGION_LIMITS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
                     VGPU_REGION_LIMITS_SIZE);
    if (use == MAP_FAILED) {
        munmap(lim, VGPU_REGION_LIMITS_SIZE);
        goto fail;
    }
    r->map_limits = lim;
    r->map_limits_len = VGPU_REGION_LIMITS_SIZE;
    r->map_usage = use;
    r->map_usage_len = size - VGPU_REGION_LIMITS_SIZE;
    r->hdr = lim;
    r->hdr_rw = NULL;
    r->use = use;
    return 0;
fail:
    vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map the job region %s: %s", r->path, strerror(errno));
    return -1;
}

int vgpu_region_open(struct vgpu_region *r, const char *path, enum vgpu_region_mode mode, struct vgpu_err *e)
{
    region_reset(r);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (r->fd < 0) {
        int err = errno;
        int code = err == ENOENT ? VGPU_EXIT_NOT_FOUND
                   : (err == EACCES || err == EPERM) ? VGPU_EXIT_PERMISSION
                   : err == ELOOP ? VGPU_EXIT_STATE : VGPU_EXIT_FAIL;
        vgpu_err_set(e, code, "cannot open the job region %s: %s%s", path, strerror(err),
                     code == VGPU_EXIT_PERMISSION ? " (another user's job: only its owner or root may use it)" : "");
        return -1;
    }
    struct stat st;
    if (fstat(r->fd, &st) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot stat the job region %s: %s", path, strerror(errno));
        goto fail;
    }
    r->file_uid = st.st_uid;
    if (!S_ISREG(st.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is not a regular file; remove it", path);
        goto fail;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing the job region %s: it is writable by group or others (mode %03o), so its limits cannot "
                     "be trusted; remove it and start the job again",
                     path, (unsigned)(st.st_mode & 0777));
        goto fail;
    }
    if (mode == VGPU_REGION_ADMIN && geteuid() != 0 && st.st_uid != geteuid()) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "job region %s belongs to uid %u: only its owner or root may change it",
                     path, (unsigned)st.st_uid);
        goto fail;
    }
    struct vgpu_region_header *h = malloc(sizeof *h);
    if (!h) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory reading %s", path);
        goto fail;
    }
    memset(h, 0, sizeof *h);
    ssize_t n = pread(r->fd, h, sizeof *h, 0);
    int rc;
    if (n < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot read the job region %s: %s", path, strerror(errno));
        rc = -1;
    } else if ((size_t)n < sizeof *h) {
        vgpu_err_set(e, VGPU_EXIT_STATE,
                     "%s is truncated (%zd bytes, not even a header); remove the file", path, n);
        rc = -1;
    } else {
        rc = check_header(h, &st, path, e);
    }
    free(h);
    if (rc < 0 || map_region(r, mode, (size_t)st.st_size, e) < 0)
        goto fail;
    return 0;
fail:
    close(r->fd);
    r->fd = -1;
    return -1;
}

void vgpu_region_close(struct vgpu_region *r)
{
    if (!r)
        return;
    if (r->map_limits)
        munmap(r->map_limits, r->map_limits_len);
    if (r->map_usage)
        munmap(r->map_usage, r->map_usage_len);
    if (r->fd >= 0)
        close(r->fd);
    region_reset(r);
}

int vgpu_region_remove(struct vgpu_region *r, struct vgpu_err *e)
{
    if (unlink(r->path) < 0 && errno != ENOENT) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot remove the job region %s: %s", r->path, strerror(errno));
        return -1;
    }
    return 0;
}

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
        uint64_t x = monotonic_ns() ^ ((uint64_t)getpid() << 32);
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
    h->total_size = region_file_size();
    h->max_devices = VGPU_REGION_MAX_DEVICES;
    h->max_slots = VGPU_REGION_MAX_SLOTS;
    snprintf(h->id, sizeof h->id, "%s", id);
    snprintf(h->name, sizeof h->name, "%s", spec->name ? spec->name : "");
    h->owner_uid = (uint32_t)geteuid();
    h->creator_pid = (int32_t)getpid();
    h->creator_start = vgpu_proc_start_time(getpid());
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
        if (spec->dev[d].core_limit > 100 || (spec->dev[d].mem_total && spec->dev[d].mem_limit > spec->dev[d].mem_total)) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "job device %u: limit larger than the device", d);
            return -1;
        }

    char id[VGPU_JOB_ID_LEN], tmp[sizeof r->path], final[sizeof r->path];
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
    /* The umask may have taken bits away (never added any); set the mode we mean explicitly. */
    size_t size = region_file_size();
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)size) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up the job region %s: %s", tmp, strerror(errno));
        goto fail;
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
    if (map_region(r, VGPU_REGION_ADMIN, size, e) < 0)
        goto fail;
    fill_header(r->hdr_rw, id, spec);
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
    if (r->fd >= 0) {
        vgpu_region_close(r);
    } else {
        close(fd);
    }
    return -1;
}

/* ---- slots -------------------------------------------------------------------------------- */

static uint64_t owner_word(pid_t pid, unsigned state)
{
    return ((uint64_t)(uint32_t)pid << 8) | state;
}

static bool slot_ok(const struct vgpu_region *r, int slot)
{
    return r && r->use && slot >= 0 && slot < VGPU_REGION_MAX_SLOTS;
}

static bool dev_ok(const struct vgpu_region *r, unsigned dev)
{
    return dev < VGPU_REGION_MAX_DEVICES && dev < r->hdr->device_count;
}

/* Subtracts v from a counter without ever going below zero. */
static void sub_saturating(_Atomic uint64_t *c, uint64_t v)
{
    uint64_t cur = atomic_load(c);
    while (!atomic_compare_exchange_weak(c, &cur, cur > v ? cur - v : 0))
        ;
}

/* Returns everything a slot holds to the device counters. The exchange makes each byte
 * returned exactly once even when two reapers meet on one slot. */
static void slot_drain(struct vgpu_region *r, struct vgpu_region_slot *s)
{
    for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
        uint64_t v = atomic_exchange(&s->used[d], 0);
        if (v)
            sub_saturating(&r->use->dev[d].used, v);
    }
}

static void slot_free(struct vgpu_region *r, struct vgpu_region_slot *s, uint64_t expected)
{
    slot_drain(r, s);
    atomic_store(&s->start_time, 0);
    atomic_store(&s->host_pid, 0);
    /* Only the holder of `expected` frees it; a later takeover changed the word. */
    atomic_compare_exchange_strong(&s->owner, &expected, VGPU_SLOT_FREE);
}

static int try_claim(struct vgpu_region *r, pid_t pid, uint64_t start, pid_t host)
{
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (o != VGPU_SLOT_FREE)
            continue;
        if (!atomic_compare_exchange_strong(&s->owner, &o, owner_word(pid, VGPU_SLOT_CLAIMING)))
            continue;
        for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++)
            atomic_store(&s->used[d], 0);
        atomic_store(&s->start_time, start);
        atomic_store(&s->host_pid, host);
        atomic_store(&s->owner, owner_word(pid, VGPU_SLOT_LIVE));
        return i;
    }
    return -1;
}

int vgpu_region_attach(struct vgpu_region *r, struct vgpu_err *e)
{
    if (!r || !r->use) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "no job region is open");
        return -1;
    }
    pid_t pid = getpid();
    uint64_t start = vgpu_proc_start_time(pid);
    pid_t host = vgpu_proc_host_pid();
    int slot = try_claim(r, pid, start, host);
    if (slot < 0 && vgpu_region_reap(r) > 0)
        slot = try_claim(r, pid, start, host);
    if (slot < 0)
        vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "the job region %s has no free process slot (%d live processes)",
                     r->path, VGPU_REGION_MAX_SLOTS);
    return slot;
}

void vgpu_region_detach(struct vgpu_region *r, int slot)
{
    if (!slot_ok(r, slot))
        return;
    struct vgpu_region_slot *s = &r->use->slot[slot];
    uint64_t o = atomic_load(&s->owner);
    if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE || vgpu_slot_pid_of(o) != getpid())
        return;
    uint64_t reaping = owner_word(getpid(), VGPU_SLOT_REAPING);
    if (atomic_compare_exchange_strong(&s->owner, &o, reaping))
        slot_free(r, s, reaping);
}

/* ---- reservation ---------------------------------------------------------------------------- */

int vgpu_region_reserve(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !dev_ok(r, dev)) {
        errno = EINVAL;
        return -1;
    }
    struct vgpu_region_dev_usage *u = &r->use->dev[dev];
    uint64_t cur = atomic_load(&u->used), next;
    for (;;) {
        /* Re-read the limit every round: `vgpu limit` may change it meanwhile. */
        uint64_t limit = atomic_load(&r->hdr->dev[dev].mem_limit);
        if (__builtin_add_overflow(cur, bytes, &next)) {
            errno = EOVERFLOW;
            return -1;
        }
        if (limit && next > limit) {
            errno = ENOSPC;
            return -1;
        }
        if (atomic_compare_exchange_weak(&u->used, &cur, next))
            break;
    }
    /* Counted in the device total first: a death right here over-counts (safe), never under-counts. */
    atomic_fetch_add(&r->use->slot[slot].used[dev], bytes);
    uint64_t peak = atomic_load(&u->peak);
    while (next > peak && !atomic_compare_exchange_weak(&u->peak, &peak, next))
        ;
    return 0;
}

int vgpu_region_release(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !dev_ok(r, dev)) {
        errno = EINVAL;
        return -1;
    }
    _Atomic uint64_t *mine = &r->use->slot[slot].used[dev];
    uint64_t have = atomic_load(mine), take;
    do {
        take = have < bytes ? have : bytes;
    } while (!atomic_compare_exchange_weak(mine, &have, have - take));
    if (take)
        sub_saturating(&r->use->dev[dev].used, take);
    return 0;
}

/* ---- reaping --------------------------------------------------------------------------------- */

int vgpu_region_reap(struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    pid_t me = getpid();
    int reaped = 0;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        unsigned st = vgpu_slot_state_of(o);
        pid_t pid = vgpu_slot_pid_of(o);
        bool dead;
        switch (st) {
        case VGPU_SLOT_FREE:
            continue;
        case VGPU_SLOT_LIVE:
            dead = !slot_process_alive(pid, atomic_load(&s->start_time));
            break;
        case VGPU_SLOT_CLAIMING:     /* the claimer died between its CAS and going live */
            dead = !pid_exists(pid);
            break;
        case VGPU_SLOT_REAPING:      /* a reaper died mid-reap: take over */
            dead = pid != me && !pid_exists(pid);
            break;
        default:                     /* garbage: reclaim it */
            dead = true;
            break;
        }
        if (!dead)
            continue;
        uint64_t mine = owner_word(me, VGPU_SLOT_REAPING);
        if (!atomic_compare_exchange_strong(&s->owner, &o, mine))
            continue;                /* someone else changed it first */
        slot_free(r, s, mine);
        atomic_fetch_add(&r->use->reaped_total, 1);
        reaped++;
    }
    atomic_store(&r->use->last_reap_ns, monotonic_ns());
    return reaped;
}

int vgpu_region_reap_maybe(struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    uint64_t now = monotonic_ns();
    uint64_t last = atomic_load_explicit(&r->use->last_reap_ns, memory_order_relaxed);
    if (now - last < 1000000000ULL && last <= now)
        return 0;
    /* One process per second does the walk; the others go on. */
    if (!atomic_compare_exchange_strong(&r->use->last_reap_ns, &last, now))
        return 0;
    return vgpu_region_reap(r);
}

/* ---- reading ------------------------------------------------------------------------------------ */

unsigned vgpu_region_device_count(const struct vgpu_region *r)
{
    if (!r || !r->hdr)
        return 0;
    unsigned n = r->hdr->device_count;
    return n > VGPU_REGION_MAX_DEVICES ? VGPU_REGION_MAX_DEVICES : n;
}

uint64_t vgpu_region_mem_limit(const struct vgpu_region *r, unsigned dev)
{
    return r && r->hdr && dev_ok(r, dev) ? atomic_load(&r->hdr->dev[dev].mem_limit) : 0;
}

uint64_t vgpu_region_mem_used(const struct vgpu_region *r, unsigned dev)
{
    return r && r->use && dev_ok(r, dev) ? atomic_load(&r->use->dev[dev].used) : 0;
}

unsigned vgpu_region_pids(const struct vgpu_region *r, pid_t *pids, int32_t *host_pids, unsigned max)
{
    unsigned n = 0;
    if (!r || !r->use)
        return 0;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        if (n < max) {
            if (pids)
                pids[n] = vgpu_slot_pid_of(o);
            if (host_pids)
                host_pids[n] = atomic_load(&s->host_pid);
        }
        n++;
    }
    return n;
}

bool vgpu_region_creator_alive(const struct vgpu_region *r)
{
    return r && r->hdr && r->hdr->creator_pid > 0 && slot_process_alive(r->hdr->creator_pid, r->hdr->creator_start);
}

/* ---- changing ---------------------------------------------------------------------------------- */

static int admin_dev(struct vgpu_region *r, unsigned dev, struct vgpu_err *e)
{
    if (!r || !r->hdr_rw) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "the job region is open read-only: only its owner or root may change it");
        return -1;
    }
    if (!dev_ok(r, dev)) {
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
    atomic_store(&r->hdr_rw->dev[dev].mem_limit, bytes);
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
