/* The job region's file: validation of an existing one, mapping, closing, removing.
 * libc only: linked into libvgpu.so. Never prints, never exits. */
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu/exitcode.h"

/* ---- validation and mapping -------------------------------------------------------------- */

static bool has_nul(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* Checks a header read with pread (before mapping, so a truncated file cannot SIGBUS us). */
/* Limits no `vgpu run` or `vgpu limit` can write (issue 36 N13/N14: a damaged region read as a
 * core limit of 1753333957 % and a memory limit of 1.8e19 bytes, which the library took as "no
 * limit"). NULL when they are sane, else which one is not. */
static const char *limits_insane(const struct vgpu_region_dev_limits *l)
{
    uint64_t mem = atomic_load(&l->mem_limit);
    uint32_t flags = atomic_load(&l->flags);
    if (atomic_load(&l->core_limit) > 100)
        return "core limit";
    if (atomic_load(&l->core_policy) > VGPU_CORE_SOFT)
        return "core policy";
    int32_t p = atomic_load(&l->priority);
    if (p < -1 || p > 1)
        return "priority";
    if (flags & ~VGPU_DEV_OVERSUB)
        return "device flags";
    /* --mem is at most the GPU's memory; an oversubscribed cap, a few times that (vgpu run
     * bounds it); 2^50 bytes (1 PiB) is past both for any GPU. */
    if (mem > (1ULL << 50))
        return "memory limit";
    /* UINT64_MAX: no fixed device share (HAMi's CUDA_OVERSUBSCRIBE, lib/hook/hami.c: spill when
     * the GPU itself is full). */
    uint64_t dev = atomic_load(&l->mem_device);
    if ((flags & VGPU_DEV_OVERSUB) && mem && dev != UINT64_MAX && dev > mem)
        return "device part of the memory limit";
    return NULL;
}

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
        h->max_slots != VGPU_REGION_MAX_SLOTS || (h->layout & ~VGPU_LAYOUT_SPLIT) ||
        h->total_size != region_file_size_of(h->layout)) {
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
    for (unsigned d = 0; d < h->device_count; d++) {
        if (!has_nul(h->dev[d].uuid, sizeof h->dev[d].uuid)) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "%s is corrupt (device %u's UUID is unterminated); %s", path, d, fix);
            return -1;
        }
        const char *bad = limits_insane(&h->dev[d]);
        uint64_t req = atomic_load(&h->mem_request[d]);
        if (!bad && req && (req > atomic_load(&h->dev[d].mem_limit) || (atomic_load(&h->dev[d].flags) & VGPU_DEV_OVERSUB)))
            bad = "memory request";
        if (bad) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "%s is corrupt (device %u's %s is out of range); %s", path, d, bad, fix);
            return -1;
        }
    }
    return 0;
}

/* Page 0 (the limits) from lim_fd, writable only when `admin`, and the usage from use_fd at
 * use_off: two mappings, so that the limits can be read-only while the usage is not. */
static int map_apart(struct vgpu_region *r, int lim_fd, bool admin, int use_fd, off_t use_off, size_t use_len)
{
    void *lim = mmap(NULL, VGPU_REGION_LIMITS_SIZE, PROT_READ | (admin ? PROT_WRITE : 0), MAP_SHARED, lim_fd, 0);
    if (lim == MAP_FAILED)
        return -1;
    void *use = mmap(NULL, use_len, PROT_READ | PROT_WRITE, MAP_SHARED, use_fd, use_off);
    if (use == MAP_FAILED) {
        int err = errno;
        munmap(lim, VGPU_REGION_LIMITS_SIZE);
        errno = err;
        return -1;
    }
    r->map_limits = lim;
    r->map_limits_len = VGPU_REGION_LIMITS_SIZE;
    r->map_usage = use;
    r->map_usage_len = use_len;
    r->hdr = lim;
    r->hdr_rw = admin ? lim : NULL;
    r->use = use;
    return 0;
}

int region_map(struct vgpu_region *r, enum vgpu_region_mode mode, size_t size, int rw_fd, struct vgpu_err *e)
{
    long page = sysconf(_SC_PAGESIZE);
    if (r->use_fd >= 0) {
        /* Split (VGPU_LAYOUT_SPLIT): page 0 from the .region, the usage from the .usage. */
        if (map_apart(r, r->fd, mode == VGPU_REGION_ADMIN, r->use_fd, 0, sizeof(struct vgpu_region_usage)) < 0)
            goto fail;
        return 0;
    }
    if (mode == VGPU_REGION_ADMIN || page != VGPU_REGION_LIMITS_SIZE) {
        /* With pages larger than 4 KiB the limits page cannot be mapped apart: one writable
         * mapping (then the read-only protection is a guard against bugs, not a security
         * boundary; vgpu-security(7)). */
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw_fd, 0);
        if (m == MAP_FAILED)
            goto fail;
        r->map_limits = m;
        r->map_limits_len = size;
        r->hdr = m;
        r->hdr_rw = mode == VGPU_REGION_ADMIN ? m : NULL;
        r->use = (struct vgpu_region_usage *)((char *)m + VGPU_REGION_LIMITS_SIZE);
        return 0;
    }
    /* Page 0 from the read-only descriptor (r->fd): the kernel refuses mprotect(PROT_WRITE) on
     * a shared mapping of a file opened O_RDONLY, so a process of the job cannot make its
     * limits writable through the library's mapping. */
    if (map_apart(r, r->fd, false, rw_fd, VGPU_REGION_LIMITS_SIZE, size - VGPU_REGION_LIMITS_SIZE) < 0)
        goto fail;
    return 0;
fail:
    vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot map the job region %s: %s", r->path, strerror(errno));
    return -1;
}

/* A copy's contents, read again: page 0, then the usage (from the .usage of a split region).
 * false when a file was shorter than that (truncated: the copy may be half new, half zero). */
static bool copy_read(struct vgpu_region *r)
{
    char *m = r->map_limits;
    size_t ulen = sizeof(struct vgpu_region_usage);
    if (pread(r->fd, m, VGPU_REGION_LIMITS_SIZE, 0) != (ssize_t)VGPU_REGION_LIMITS_SIZE)
        return false;
    ssize_t n = r->use_fd >= 0 ? pread(r->use_fd, m + VGPU_REGION_LIMITS_SIZE, ulen, 0)
                               : pread(r->fd, m + VGPU_REGION_LIMITS_SIZE, ulen, VGPU_REGION_LIMITS_SIZE);
    return n == (ssize_t)ulen;
}

/* VGPU_REGION_VIEW of another user's files: one private mapping, laid out as the file's, so
 * that every reader of r->hdr and r->use works unchanged, and nothing the file's owner does to
 * the file can make a load fault. */
static int region_copy(struct vgpu_region *r, struct vgpu_err *e)
{
    size_t len = region_file_size();
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot read the job region %s: %s", r->path, strerror(errno));
        return -1;
    }
    r->map_limits = m;
    r->map_limits_len = len;
    r->hdr = m;
    r->hdr_rw = NULL;
    r->use = (struct vgpu_region_usage *)((char *)m + VGPU_REGION_LIMITS_SIZE);
    r->copy = true;
    if (!copy_read(r)) {
        munmap(m, len);
        r->map_limits = NULL;
        r->hdr = NULL;
        r->use = NULL;
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s is truncated (it changed while it was read); try again", r->path);
        return -1;
    }
    return 0;
}

/* The usage part needs a writable descriptor; page 0 (r->fd) stays read-only in JOB mode. The
 * second open is by path, so it must be the same file as the first (not one renamed in between). */
static int open_rw_again(const struct vgpu_region *r, const struct stat *st, int *errp, struct vgpu_err *e)
{
    int fd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st2;
    *errp = fd < 0 ? errno : 0;
    if (fd < 0) {
        int err = errno;
        vgpu_err_set(e, (err == EACCES || err == EPERM) ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                     "cannot open the job region %s for its usage counters: %s", r->path, strerror(err));
        return -1;
    }
    if (fstat(fd, &st2) < 0 || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "the job region %s was replaced while it was being opened; try again",
                     r->path);
        close(fd);
        return -1;
    }
    return fd;
}

/* The .usage file of a split region: a regular file of the usage part's size, owned by the job's
 * user (the header's owner_uid), writable by nobody else. Returns its read-write descriptor. */
static int open_usage(const struct vgpu_region *r, uid_t job_uid, struct vgpu_err *e)
{
    char upath[sizeof r->path];
    if (!region_usage_path(r->path, upath, sizeof upath)) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s: a split job region must be named ID.region", r->path);
        return -1;
    }
    int fd = open(upath, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        vgpu_err_set(e, err == ENOENT ? VGPU_EXIT_STATE : (err == EACCES || err == EPERM) ? VGPU_EXIT_PERMISSION
                                                                                            : VGPU_EXIT_FAIL,
                     "cannot open the job's usage file %s: %s%s", upath, strerror(err),
                     err == EACCES || err == EPERM ? " (the job runs as another user)" : "");
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if ((uint64_t)st.st_size != sizeof(struct vgpu_region_usage))
        why = "truncated or corrupt (wrong size)";
    else if (st.st_uid != job_uid)
        why = "not owned by the job's user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "writable by group or others";
    if (why) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "the job's usage file %s is damaged: %s; remove the job's files", upath, why);
        close(fd);
        return -1;
    }
    return fd;
}

/* Why an ADMIN open of a split region fails for its own user: a clear answer, not EACCES.
 * true when it was one (e set). */
static bool admin_refused_split(const char *path, struct vgpu_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct vgpu_region_header h;
    bool split = false;
    if (fd < 0)
        return false;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && (h.layout & VGPU_LAYOUT_SPLIT) &&
        has_nul(h.id, sizeof h.id)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "job %s runs as uid %u, but its limits were set by root (vgpu run --user): they can be read, not "
                     "changed, by the job's user; ask root to change them (vgpu limit as root)",
                     h.id, (unsigned)h.owner_uid);
        split = true;
    }
    close(fd);
    return split;
}

int vgpu_region_open(struct vgpu_region *r, const char *path, enum vgpu_region_mode mode, struct vgpu_err *e)
{
    region_reset(r);
    snprintf(r->path, sizeof r->path, "%s", path);
    /* ADMIN writes the limits: read-write. JOB reads them: read-only (see region_map). */
    r->fd = open(path, (mode == VGPU_REGION_ADMIN ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
    if (r->fd < 0) {
        int err = errno;
        int code = err == ENOENT ? VGPU_EXIT_NOT_FOUND
                   : (err == EACCES || err == EPERM) ? VGPU_EXIT_PERMISSION
                   : err == ELOOP ? VGPU_EXIT_STATE : VGPU_EXIT_FAIL;
        vgpu_err_set(e, code, "cannot open the job region %s: %s%s", path, strerror(err),
                     code == VGPU_EXIT_PERMISSION ? " (another user's job: only its owner or root may use it)" : "");
        if (code == VGPU_EXIT_PERMISSION && mode == VGPU_REGION_ADMIN)
            (void)admin_refused_split(path, e);
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
        if (admin_refused_split(path, e))
            goto fail;
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
    if (rc < 0) {
        free(h);
        goto fail;
    }
    r->info = h;    /* validated once: strings are read from this copy from now on */
    bool split = h->layout & VGPU_LAYOUT_SPLIT;
    bool copy = mode == VGPU_REGION_VIEW && (st.st_uid != geteuid() || (split && h->owner_uid != geteuid()));
    int rw_fd;
    if (h->layout & VGPU_LAYOUT_SPLIT) {
        /* Kept open: vgpu_region_check looks at its size too. */
        r->use_fd = open_usage(r, (uid_t)h->owner_uid, e);
        if (r->use_fd < 0)
            goto fail;
        rw_fd = r->use_fd;
    } else {
        int err = 0;
        rw_fd = mode == VGPU_REGION_ADMIN || copy ? r->fd : open_rw_again(r, &st, &err, e);
        /* A state directory on a read-only file system (issue 36 N11): the file is intact, and a
         * tool that only looks reads it by copy, as it reads another user's (nobody can reap or
         * account there anyway). Calling it damaged sent users to remove good files. */
        if (rw_fd < 0 && err == EROFS && mode == VGPU_REGION_VIEW) {
            copy = true;
            rw_fd = r->fd;
        }
        if (rw_fd < 0)
            goto fail;
    }
    rc = copy ? region_copy(r, e) : region_map(r, mode, (size_t)st.st_size, rw_fd, e);
    /* The mappings keep what they need: no writable descriptor of the limits stays open in the job. */
    if (rw_fd != r->fd && rw_fd != r->use_fd)
        close(rw_fd);
    if (rc < 0)
        goto fail;
    return 0;
fail:
    close(r->fd);
    if (r->use_fd >= 0)
        close(r->use_fd);
    free(r->info);
    r->info = NULL;
    r->fd = -1;
    r->use_fd = -1;
    return -1;
}

uid_t vgpu_region_job_uid(const struct vgpu_region *r)
{
    return vgpu_region_split(r) ? (uid_t)r->info->owner_uid : r->file_uid;
}

bool vgpu_region_split(const struct vgpu_region *r)
{
    return r && r->info && (r->info->layout & VGPU_LAYOUT_SPLIT);
}

/* ---- damage: a file truncated under the mappings ------------------------------------------- */

/* The limits and state now in page 0 into r->info, so that a damaged job keeps the last ones
 * seen. Called only after fstat found the file whole. */
static void refresh_info(struct vgpu_region *r)
{
    const struct vgpu_region_header *h = r->hdr;
    uint32_t seq = atomic_load_explicit(&h->limits_seq, memory_order_acquire);
    if (seq == atomic_load_explicit(&r->info->limits_seq, memory_order_relaxed) &&
        atomic_load_explicit(&h->state, memory_order_relaxed) == atomic_load(&r->info->state))
        return;
    /* Damaged limits are not taken: the process keeps the last sane ones it saw (fails closed,
     * never open). vgpu_jobs_find calls such a region damaged, so vgpu limit cannot be misled. */
    for (unsigned d = 0; d < r->info->device_count && d < VGPU_REGION_MAX_DEVICES; d++)
        if (limits_insane(&h->dev[d]))
            return;
    for (unsigned d = 0; d < r->info->device_count && d < VGPU_REGION_MAX_DEVICES; d++) {
        struct vgpu_region_dev_limits *k = &r->info->dev[d];
        const struct vgpu_region_dev_limits *l = &h->dev[d];
        atomic_store(&k->mem_limit, atomic_load(&l->mem_limit));
        atomic_store(&k->core_limit, atomic_load(&l->core_limit));
        atomic_store(&k->core_policy, atomic_load(&l->core_policy));
        atomic_store(&k->priority, atomic_load(&l->priority));
        atomic_store(&k->flags, atomic_load(&l->flags));
        atomic_store(&k->mem_device, atomic_load(&l->mem_device));
        atomic_store(&r->info->mem_request[d], atomic_load(&h->mem_request[d]));
    }
    atomic_store(&r->info->state, atomic_load(&h->state));
    atomic_store(&r->info->limits_seq, seq);
}

/* Moves private memory over [at, at+len) in one step (mremap onto it replaces the old mapping
 * atomically): a thread reading there sees the old page or the new one, never a hole. `page0`
 * is copied to the start first when not NULL; `ro` makes the result read-only. Raw system calls
 * and memcpy only: this also runs in a SIGBUS handler (vgpu_region_fence_fault), where the
 * sanitizers' interceptors of mmap are not to be entered. false when it could not be done. */
static bool replace_mapping(void *at, size_t len, const void *page0, size_t page0_len, bool ro)
{
    long m = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == -1)
        return false;
    if (page0)
        memcpy((void *)m, page0, page0_len);
    if (ro)
        (void)syscall(SYS_mprotect, m, len, PROT_READ);
    if (syscall(SYS_mremap, m, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == -1) {
        (void)syscall(SYS_munmap, m, len);
        return false;
    }
    return true;
}

/* Appends s to r->damaged_why (async-signal-safe: no snprintf). */
static void why_append(struct vgpu_region *r, const char *s)
{
    size_t n = 0;
    while (n < sizeof r->damaged_why - 1 && r->damaged_why[n])
        n++;
    while (*s && n + 1 < sizeof r->damaged_why)
        r->damaged_why[n++] = *s++;
    r->damaged_why[n] = '\0';
}

/* Replaces r's mappings by private memory: page 0 holds r->info (the last limits seen), the
 * usage is empty. One thread does it (r->fence WHOLE -> FENCING), and only it writes
 * r->damaged_why: `why`, then, when why_path is not NULL, why_path (less its ".region" when
 * as_usage: the split layout's ID.usage is beside ID.region) and why_tail. In pieces, for a
 * caller that cannot format (a signal handler). Returns 1 when this call fenced it, 0 when
 * another had or is doing it. */
static int fence(struct vgpu_region *r, const char *why, const char *why_path, bool as_usage, const char *why_tail)
{
    int expect = VGPU_FENCE_WHOLE;
    if (!__atomic_compare_exchange_n(&r->fence, &expect, VGPU_FENCE_FENCING, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0;
    r->damaged_why[0] = '\0';
    why_append(r, why);
    if (why_path) {
        why_append(r, why_path);
        size_t n = strlen(r->damaged_why);
        if (as_usage && n > 7 && !strcmp(r->damaged_why + n - 7, ".region")) {
            r->damaged_why[n - 7] = '\0';
            why_append(r, ".usage");
        }
        why_append(r, why_tail);
    }
    /* Both, whatever the first gave. */
    bool ok = replace_mapping(r->map_limits, r->map_limits_len, r->info, sizeof *r->info,
                              r->map_usage && r->hdr_rw == NULL);
    if (r->map_usage && !replace_mapping(r->map_usage, r->map_usage_len, NULL, 0, false))
        ok = false;
    __atomic_store_n(&r->damaged, true, __ATOMIC_RELEASE);
    __atomic_store_n(&r->fence, ok ? VGPU_FENCE_FENCED : VGPU_FENCE_FAILED, __ATOMIC_RELEASE);
    return 1;
}

int vgpu_region_check(struct vgpu_region *r)
{
    if (!r || !r->hdr || !r->info)
        return 0;
    if (__atomic_load_n(&r->fence, __ATOMIC_ACQUIRE) != VGPU_FENCE_WHOLE)
        return 2;
    struct stat st;
    uint64_t want = r->info->total_size;
    struct stat ust;
    bool use_ok = r->use_fd < 0 || fstat(r->use_fd, &ust) < 0 ||
                  (uint64_t)ust.st_size >= sizeof(struct vgpu_region_usage);
    char why[sizeof r->damaged_why], upath[sizeof r->path];
    if ((fstat(r->fd, &st) < 0 || (uint64_t)st.st_size >= want) && use_ok) {
        if (!r->copy || copy_read(r)) {
            refresh_info(r);
            return 0;
        }
        snprintf(why, sizeof why, "%s was truncated while it was read", r->path);
        return fence(r, why, NULL, false, NULL) ? 1 : 2;
    }
    if (!use_ok)
        snprintf(why, sizeof why, "the job's usage file %s was truncated to %lld bytes (expected %zu)",
                 region_usage_path(r->path, upath, sizeof upath) ? upath : r->path, (long long)ust.st_size,
                 sizeof(struct vgpu_region_usage));
    else
        snprintf(why, sizeof why, "%s was truncated to %lld bytes (expected %llu)", r->path, (long long)st.st_size,
                 (unsigned long long)want);
    return fence(r, why, NULL, false, NULL) ? 1 : 2;
}

bool vgpu_region_maps(const struct vgpu_region *r, const void *addr)
{
    const char *a = addr;
    const char *l = r ? r->map_limits : NULL, *u = r ? r->map_usage : NULL;
    return (l && a >= l && a < l + r->map_limits_len) || (u && a >= u && a < u + r->map_usage_len);
}

int vgpu_region_fence_fault(struct vgpu_region *r, const void *addr)
{
    if (!r || !r->info || !vgpu_region_maps(r, addr))
        return 0;
    const char *u = r->map_usage;
    bool in_usage = u && (const char *)addr >= u && (const char *)addr < u + r->map_usage_len;
    bool split_usage = in_usage && r->use_fd >= 0;
    fence(r, split_usage ? "the job's usage file " : "", r->path, split_usage,
          in_usage ? " was truncated under this process (a store or load in its usage part faulted)"
                   : " was truncated under this process (a load of its limits faulted)");
    for (;;) {
        switch (__atomic_load_n(&r->fence, __ATOMIC_ACQUIRE)) {
        case VGPU_FENCE_FENCED:
            return 1;
        case VGPU_FENCE_FENCING:
            /* Another thread is replacing them (it cannot be this one: fence() touches none of
             * the mappings it replaces). The retried access would fault again until it is done. */
            (void)syscall(SYS_sched_yield);
            continue;
        default:
            return 0;       /* FAILED: part of it is still the file's */
        }
    }
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
    if (r->use_fd >= 0)
        close(r->use_fd);
    free(r->info);
    region_reset(r);
}

int vgpu_region_remove(struct vgpu_region *r, struct vgpu_err *e)
{
    if (unlink(r->path) < 0 && errno != ENOENT) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot remove the job region %s: %s", r->path, strerror(errno));
        return -1;
    }
    char upath[sizeof r->path];
    if (vgpu_region_split(r) && region_usage_path(r->path, upath, sizeof upath))
        unlink(upath);      /* after the .region: a reader never finds a region without its usage */
    char lpath[sizeof r->path];
    if (vgpu_region_sibling_path(r->path, ".lend", lpath, sizeof lpath))
        unlink(lpath);      /* the arbiter's answer of lending across users (vgpu/lend.h) */
    return 0;
}
