/* Finding (or unpacking) the libvgpu.so that `vgpu run` preloads. */
#include "run/library.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

/* The Makefile links build/libvgpu.so into vgpu with `ld -b binary`. */
extern const unsigned char _binary_libvgpu_so_start[];
extern const unsigned char _binary_libvgpu_so_end[];

static bool usable(const char *path)
{
    return access(path, R_OK) == 0;
}

static int absolute(const char *path, char *buf, size_t len, struct vgpu_err *e)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot resolve %s: %s", path, strerror(errno));
        return -1;
    }
    if ((size_t)snprintf(buf, len, "%s", real) >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the path of libvgpu.so is too long: %s", real);
        return -1;
    }
    /* LD_PRELOAD splits on spaces and colons: such a path would preload something else. */
    if (strpbrk(buf, " :\t\n")) {
        vgpu_err_set(e, VGPU_EXIT_FAIL,
                     "the library path '%s' contains a space or ':', which LD_PRELOAD cannot carry; "
                     "install vgpu elsewhere or set VGPU_LIBRARY", buf);
        return -1;
    }
    return 0;
}

/* FNV-1a: a content name, not a security measure (the directory is ours and 0700). */
static uint64_t content_hash(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static bool same_content(const char *path, const unsigned char *blob, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    struct stat st;
    bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == n && st.st_uid == geteuid() &&
                !(st.st_mode & (S_IWGRP | S_IWOTH));
    unsigned char buf[65536];
    for (size_t off = 0; same && off < n;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0 || memcmp(buf, blob + off, (size_t)got) != 0)
            same = false;
        else
            off += (size_t)got;
    }
    close(fd);
    return same;
}

static int extract(const char *statedir, char *buf, size_t len, struct vgpu_err *e)
{
    const unsigned char *blob = _binary_libvgpu_so_start;
    size_t n = (size_t)(_binary_libvgpu_so_end - _binary_libvgpu_so_start);
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/lib/libvgpu-%016llx.so", statedir,
             (unsigned long long)content_hash(blob, n));
    if (same_content(path, blob, n))
        return absolute(path, buf, len, e);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    /* 0500: created read-only; the fd we get is still writable, being the creator's. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0500);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot write the preload library %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, blob + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot write the preload library %s: %s", tmp,
                         w < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, 0500) < 0 || fsync(fd) < 0 || close(fd) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot finish the preload library %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* rename is atomic: concurrent `vgpu run`s each write their own tmp and one wins. */
    if (rename(tmp, path) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot install the preload library %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return absolute(path, buf, len, e);
}

int vgpu_run_find_library(const char *statedir, char *buf, size_t len, struct vgpu_err *e)
{
    const char *env = getenv("VGPU_LIBRARY");
    if (env && *env) {
        if (!usable(env)) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "VGPU_LIBRARY=%s: %s; point it at libvgpu.so or unset it", env,
                         strerror(errno));
            return -1;
        }
        return absolute(env, buf, len, e);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            static const char *const beside[] = { "libvgpu.so", "../lib/vgpu/libvgpu.so" };
            for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
                char cand[PATH_MAX + 32];
                snprintf(cand, sizeof cand, "%s/%s", self, beside[i]);
                if (usable(cand))
                    return absolute(cand, buf, len, e);
            }
        }
    }
    return extract(statedir, buf, len, e);
}
