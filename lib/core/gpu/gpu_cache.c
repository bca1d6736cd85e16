/* The GPU list kept between jobs (see vgpu/gpu_cache.h for when it is used, and why). */
#include "vgpu/gpu_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/statedir.h"
#include "vgpu/trust.h"

#define CACHE_FILE "gpus.cache"
#define CACHE_NEW "gpus.cache.new"
#define CACHE_MAGIC 0x3165686361637067ull   /* "gpcache1" */
#define DEFAULT_KEEP_S 60
#define BOOT_ID_LEN 36
#define MAX_NAMES 256                       /* entries of one /proc directory that are hashed */

struct cache_head {
    uint64_t magic;
    uint32_t entry_size;                    /* sizeof(struct vgpu_gpu): another build's file is not read */
    uint32_t count;
    uint64_t fingerprint;                   /* the driver's /proc files (below) */
    uint64_t written_s;                     /* CLOCK_BOOTTIME */
    char boot_id[BOOT_ID_LEN + 1];
    char pad[7];
};

static unsigned keep_s(void)
{
    const char *s = getenv("VGPU_GPU_CACHE_S");
    if (!s || !*s)
        return DEFAULT_KEEP_S;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return *end || v > 86400 ? DEFAULT_KEEP_S : (unsigned)v;
}

static const char *proc_root(void)
{
    const char *p = getenv("VGPU_NVIDIA_PROC");
    if (!p || !*p)
        return "/proc/driver/nvidia";
    /* As root, only files nobody else can change say the driver is unchanged (vgpu/trust.h; the
     * dispatcher refused such a variable already, this is for callers that bypass it). */
    struct vgpu_err e;
    if (vgpu_trust_path(p, "VGPU_NVIDIA_PROC", VGPU_TRUST_DIR | VGPU_TRUST_MAY_BE_MISSING, &e) != 0) {
        vgpu_debug("GPU list: %s", e.msg);
        return NULL;
    }
    return p;
}

static uint64_t boot_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

static bool read_boot_id(char out[BOOT_ID_LEN + 1])
{
    memset(out, 0, BOOT_ID_LEN + 1);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, out, BOOT_ID_LEN);
    close(fd);
    out[n > 0 ? n : 0] = 0;
    return n == BOOT_ID_LEN;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Hashes the file's bytes (its first 64 KiB) into h; false when it cannot be read. */
static bool hash_file(const char *path, uint64_t *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    char buf[4096];
    ssize_t n;
    size_t total = 0;
    while (total < 65536 && (n = read(fd, buf, sizeof buf)) > 0) {
        *h = fnv(*h, buf, (size_t)n);
        total += (size_t)n;
    }
    close(fd);
    return n >= 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in dir (no dot entries), at most MAX_NAMES; -1 when it cannot be read. */
static int names_in(const char *dir, char **names)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < MAX_NAMES) {
        if (de->d_name[0] == '.')
            continue;
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    return n;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
}

/* The names below capabilities/ (gpuN/mig/giM/ciK/...), depth-first, into h. */
static void hash_tree(const char *dir, int depth, uint64_t *h)
{
    char *names[MAX_NAMES];
    int n = depth < 6 ? names_in(dir, names) : -1;
    for (int i = 0; i < n; i++) {
        char sub[4096];
        *h = fnv(*h, names[i], strlen(names[i]) + 1);
        if (snprintf(sub, sizeof sub, "%s/%s", dir, names[i]) < (int)sizeof sub)
            hash_tree(sub, depth + 1, h);
    }
    if (n >= 0)
        free_names(names, n);
    *h = fnv(*h, "/", 1);
}

/* The driver's files that say which GPUs there are; false without them (no driver, a container
 * that hides them). *gpus: the entries of gpus/, one per physical GPU. */
static bool driver_fingerprint(uint64_t *out, unsigned *gpus)
{
    const char *root = proc_root();
    char path[4096];
    if (!root)
        return false;
    uint64_t h = 0xcbf29ce484222325ull;
    snprintf(path, sizeof path, "%s/version", root);
    if (!hash_file(path, &h))
        return false;
    char *names[MAX_NAMES];
    snprintf(path, sizeof path, "%s/gpus", root);
    int n = names_in(path, names);
    if (n <= 0)
        return false;                        /* no GPU directory: nothing allocated either */
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        h = fnv(h, names[i], strlen(names[i]) + 1);
        ok = snprintf(path, sizeof path, "%s/gpus/%s/information", root, names[i]) < (int)sizeof path &&
             hash_file(path, &h);
    }
    free_names(names, n);
    if (!ok)
        return false;
    snprintf(path, sizeof path, "%s/capabilities", root);
    hash_tree(path, 0, &h);
    *out = h;
    *gpus = (unsigned)n;
    return true;
}

static bool keepable(const struct vgpu_gpu_list *list, unsigned proc_gpus)
{
    unsigned whole = 0;
    for (unsigned i = 0; i < list->count; i++) {
        const struct vgpu_gpu *g = &list->gpu[i];
        if (g->is_mig || g->lost || g->unreachable[0] || !g->uuid[0] || g->mig_current || g->mig_pending)
            return false;
        whole++;
    }
    /* NVML lists every GPU the driver has; /proc one directory each: a difference is a driver
     * state this file cannot describe. */
    return whole && whole == proc_gpus;
}

static bool strings_ok(const struct vgpu_gpu *g)
{
    return memchr(g->uuid, 0, sizeof g->uuid) && memchr(g->name, 0, sizeof g->name) &&
           memchr(g->pci_bus_id, 0, sizeof g->pci_bus_id) && memchr(g->unreachable, 0, sizeof g->unreachable);
}

static int open_dir(struct vgpu_statedir *sd, bool create)
{
    struct vgpu_err e;
    if (vgpu_statedir_open(sd, create, &e) < 0) {
        vgpu_debug("GPU list: not kept: %s", e.msg);
        return -1;
    }
    return 0;
}

int vgpu_gpu_cache_load(struct vgpu_gpu_list *out)
{
    unsigned keep = keep_s();
    if (!keep)
        return 0;
    struct vgpu_statedir sd;
    if (open_dir(&sd, false) < 0)
        return 0;
    struct stat st;
    int fd = vgpu_dir_open(sd.fd, CACHE_FILE, O_RDONLY, &st);
    vgpu_statedir_close(&sd);
    if (fd < 0)
        return 0;                            /* none kept yet */
    struct cache_head h;
    const char *why = NULL;
    static struct vgpu_gpu_list got;
    size_t body = 0;
    memset(&got, 0, sizeof got);
    if (read(fd, &h, sizeof h) != (ssize_t)sizeof h || h.magic != CACHE_MAGIC || h.entry_size != sizeof got.gpu[0] ||
        !h.count || h.count > VGPU_MAX_GPUS || (uint64_t)st.st_size != sizeof h + (body = h.count * sizeof got.gpu[0]) ||
        read(fd, got.gpu, body) != (ssize_t)body || !memchr(h.boot_id, 0, sizeof h.boot_id))
        why = "damaged or from another vgpu";
    close(fd);
    char boot[BOOT_ID_LEN + 1];
    uint64_t fp = 0, now = boot_s();
    unsigned proc_gpus = 0;
    if (!why && (!read_boot_id(boot) || strcmp(boot, h.boot_id) != 0))
        why = "from another boot";
    else if (!why && (h.written_s > now || now - h.written_s > keep))
        why = "too old";
    else if (!why && (!driver_fingerprint(&fp, &proc_gpus) || fp != h.fingerprint))
        why = "the driver's GPUs changed since";
    got.count = why ? 0 : h.count;      /* a header not read whole says nothing */
    for (unsigned i = 0; !why && i < got.count; i++)
        if (!strings_ok(&got.gpu[i]))
            why = "damaged";
    if (!why && !keepable(&got, proc_gpus))
        why = "not a list that is kept";
    if (why) {
        vgpu_debug("GPU list kept in %s: %s: asking NVML", CACHE_FILE, why);
        return 0;
    }
    for (unsigned i = 0; i < got.count; i++) {
        got.gpu[i].handle = NULL;            /* no NVML in this process */
        got.gpu[i].mem_used = got.gpu[i].mem_reserved = 0;
    }
    *out = got;
    vgpu_debug("placing by the GPU list kept %llu s ago (%u GPU%s)", (unsigned long long)(now - h.written_s),
               out->count, out->count == 1 ? "" : "s");
    return 1;
}

void vgpu_gpu_cache_store(const struct vgpu_gpu_list *list)
{
    struct cache_head h;
    memset(&h, 0, sizeof h);
    unsigned proc_gpus = 0;
    if (!keep_s() || !read_boot_id(h.boot_id) || !driver_fingerprint(&h.fingerprint, &proc_gpus) ||
        !keepable(list, proc_gpus))
        return;
    h.magic = CACHE_MAGIC;
    h.entry_size = sizeof list->gpu[0];
    h.count = list->count;
    h.written_s = boot_s();
    static struct vgpu_gpu kept[VGPU_MAX_GPUS];
    memset(kept, 0, sizeof kept);
    for (unsigned i = 0; i < list->count; i++) {
        kept[i] = list->gpu[i];
        kept[i].handle = NULL;
        kept[i].mem_used = kept[i].mem_reserved = 0;   /* a figure of that moment, never read back */
    }
    struct vgpu_statedir sd;
    if (open_dir(&sd, true) < 0)
        return;
    (void)unlinkat(sd.fd, CACHE_NEW, 0);
    int fd = vgpu_dir_create(sd.fd, CACHE_NEW, O_WRONLY, 0600);
    size_t body = list->count * sizeof kept[0];
    bool ok = fd >= 0 && write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, kept, body) == (ssize_t)body;
    int err = errno;
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    if (!ok || renameat(sd.fd, CACHE_NEW, sd.fd, CACHE_FILE) != 0) {
        if (ok)
            err = errno;
        vgpu_debug("GPU list: not kept in %s/%s: %s", sd.path, CACHE_FILE, strerror(err));
        (void)unlinkat(sd.fd, CACHE_NEW, 0);
    }
    vgpu_statedir_close(&sd);
}

void vgpu_gpu_cache_forget(void)
{
    struct vgpu_statedir sd;
    if (open_dir(&sd, false) < 0)
        return;
    (void)unlinkat(sd.fd, CACHE_FILE, 0);
    vgpu_statedir_close(&sd);
}

static const struct vgpu_gpu *find(const struct vgpu_gpu_list *l, const char *uuid)
{
    for (unsigned i = 0; i < l->count; i++)
        if (!l->gpu[i].is_mig && strcmp(l->gpu[i].uuid, uuid) == 0)
            return &l->gpu[i];
    return NULL;
}

bool vgpu_gpu_cache_agrees(const struct vgpu_gpu_list *kept, const struct vgpu_gpu_list *now, const char *uuid,
                           char *why, size_t len)
{
    const struct vgpu_gpu *k = find(kept, uuid), *n = find(now, uuid);
    /* A lost GPU has no UUID in NVML's list: it is the one at the kept index. */
    for (unsigned i = 0; k && !n && i < now->count; i++)
        if (!now->gpu[i].is_mig && now->gpu[i].index == k->index && (now->gpu[i].lost || now->gpu[i].unreachable[0]))
            n = &now->gpu[i];
    if (!k || !n)
        snprintf(why, len, "%s is %s now", uuid, n ? "listed" : "not listed by NVML");
    else if (n->lost || n->unreachable[0])
        snprintf(why, len, "%s %s now", uuid, n->lost ? "is lost" : "cannot be reached");
    else if (n->index != k->index)
        snprintf(why, len, "%s is GPU %u now, GPU %u was kept", uuid, n->index, k->index);
    else if (n->mem_total != k->mem_total)
        snprintf(why, len, "%s has %llu MiB now, %llu MiB were kept", uuid, (unsigned long long)(n->mem_total >> 20),
                 (unsigned long long)(k->mem_total >> 20));
    else if (n->mig_current || n->mig_pending)
        snprintf(why, len, "%s is in MIG mode now", uuid);
    else
        return true;
    return false;
}
