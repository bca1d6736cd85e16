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
#include "vgpu/statedir.h"
#include "vgpu/trust.h"

/* The Makefile links build/libvgpu.so into vgpu with `ld -b binary`. */
extern const unsigned char _binary_libvgpu_so_start[];
extern const unsigned char _binary_libvgpu_so_end[];

static bool usable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* `source`: the variable the path came from, or NULL (found beside vgpu). */
static int absolute(const char *path, const char *source, char *buf, size_t len, struct vgpu_err *e)
{
    char real[PATH_MAX];
    /* Root's job preloads it: as root, only a library nobody else can change (vgpu/trust.h),
     * wherever it was found. */
    if (vgpu_trust_path(path, source, 0, e) != 0)
        return -1;
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

/* Is dir/name our own read-only regular file with exactly this content? Opened through the
 * directory handle with O_NOFOLLOW: a symlink or a FIFO planted there is not followed. */
static bool same_content(int dir, const char *name, const unsigned char *blob, size_t n)
{
    struct stat st;
    int fd = vgpu_dir_open(dir, name, O_RDONLY, &st);
    if (fd < 0)
        return false;
    bool same = (size_t)st.st_size == n && st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
                st.st_nlink == 1;
    unsigned char buf[65536];
    for (size_t off = 0; same && off < n;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0 || (size_t)got > n - off || memcmp(buf, blob + off, (size_t)got) != 0)
            same = false;
        else
            off += (size_t)got;
    }
    close(fd);
    return same;
}

/* Writes the blob to dir/tmp: created O_EXCL|O_NOFOLLOW 0500 (the descriptor is still writable,
 * being the creator's), fsync'ed. 0, or -1 with e set and nothing left behind. */
static int write_new(int dir, const char *shown, const char *tmp, const unsigned char *blob, size_t n,
                     struct vgpu_err *e)
{
    int fd = vgpu_dir_create(dir, tmp, O_WRONLY, 0500);
    if (fd < 0 && errno == EEXIST) {
        /* Left by a `vgpu run` that died while writing and had our pid: the name is ours (0700
         * directory), so remove it and try once more. */
        unlinkat(dir, tmp, 0);
        fd = vgpu_dir_create(dir, tmp, O_WRONLY, 0500);
    }
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot write the preload library %s/%s: %s", shown, tmp, strerror(errno));
        return -1;
    }
    const char *why = NULL;
    for (size_t off = 0; off < n && !why;) {
        ssize_t w = write(fd, blob + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            why = w < 0 ? strerror(errno) : "short write";
        else
            off += (size_t)w;
    }
    if (!why && (fchmod(fd, 0500) < 0 || fsync(fd) < 0))
        why = strerror(errno);
    if (close(fd) < 0 && !why)
        why = strerror(errno);
    if (why) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot write the preload library %s/%s: %s (is the file system full?)",
                     shown, tmp, why);
        unlinkat(dir, tmp, 0);
        return -1;
    }
    return 0;
}

/* The copy inside vgpu, unpacked once by content hash into <statedir>/lib. Everything goes
 * through the checked directory handles (vgpu/statedir.h), so nobody but us can put another file
 * under that name; and the path given to LD_PRELOAD is a path nobody else can redirect: the
 * state directory and every directory above it were checked to be ours or root's (or sticky).
 * (A /proc/self/fd/N path would not do: the job's children that close inherited descriptors,
 * as Python's subprocess does by default, would silently lose the library.) The file is checked
 * again after the rename, so what we hand to ld.so is what we wrote. */
static int extract(char *buf, size_t len, struct vgpu_err *e)
{
    const unsigned char *blob = _binary_libvgpu_so_start;
    size_t n = (size_t)(_binary_libvgpu_so_end - _binary_libvgpu_so_start);
    struct vgpu_statedir sd;
    if (vgpu_statedir_open(&sd, true, e) < 0)
        return -1;
    int dir = vgpu_statedir_sub(sd.fd, sd.path, "lib", true, e);
    if (dir < 0) {
        vgpu_statedir_close(&sd);
        return -1;
    }
    char shown[4200], name[64], tmp[96];
    snprintf(shown, sizeof shown, "%s/lib", sd.path);
    vgpu_statedir_close(&sd);
    snprintf(name, sizeof name, "libvgpu-%016llx.so", (unsigned long long)content_hash(blob, n));
    int rc = -1;
    if (!same_content(dir, name, blob, n)) {
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", name, (int)getpid());
        if (write_new(dir, shown, tmp, blob, n, e) < 0)
            goto out;
        /* renameat is atomic: concurrent `vgpu run`s each write their own tmp and one wins. It
         * also replaces whatever was there (a damaged copy, a symlink) without following it. */
        if (renameat(dir, tmp, dir, name) < 0) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot install the preload library %s/%s: %s", shown, name,
                         strerror(errno));
            unlinkat(dir, tmp, 0);
            goto out;
        }
        fsync(dir);
        if (!same_content(dir, name, blob, n)) {
            vgpu_err_set(e, VGPU_EXIT_FAIL,
                         "the preload library %s/%s does not hold what was just written there; is something else "
                         "writing in %s? remove it and try again", shown, name, shown);
            goto out;
        }
    }
    if ((size_t)snprintf(buf, len, "%s/%s", shown, name) >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the path of libvgpu.so is too long: %s/%s", shown, name);
        goto out;
    }
    if (strpbrk(buf, " :\t\n")) {
        vgpu_err_set(e, VGPU_EXIT_FAIL,
                     "the library path '%s' contains a space or ':', which LD_PRELOAD cannot carry; "
                     "use another VGPU_STATE_DIR or set VGPU_LIBRARY", buf);
        goto out;
    }
    rc = 0;
out:
    close(dir);
    return rc;
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
        return absolute(env, "VGPU_LIBRARY", buf, len, e);
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
                    return absolute(cand, NULL, buf, len, e);
            }
        }
    }
    (void)statedir; /* extract() opens it again, as a checked handle */
    return extract(buf, len, e);
}
