/* What root may load, run or work in: the walk that vgpu/trust.h describes. Path-based (lstat,
 * readlink) on purpose: its callers hand the path to dlopen, execvp or ld.so, which look it up
 * again; that second lookup reaches the same file only because nothing on the way can be changed
 * by anyone but root, which is what this checks. */
#include "vgpu/trust.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

/* The kernel's own limit on symbolic links followed in one lookup. */
#define MAX_LINKS 40

bool vgpu_trust_applies(void)
{
    return geteuid() == 0;
}

struct walk {
    char rest[2 * PATH_MAX];    /* what is left to look up, '/'-separated */
    char done[PATH_MAX];        /* the part looked up: no symlink in it; "" is / */
    char cand[PATH_MAX];
    char link[PATH_MAX];
    const char *path, *source;
};

/* "VGPU_NVML_LIB=/x" or "/x", for the messages. */
static const char *what(const struct walk *w, char *buf, size_t len)
{
    if (w->source)
        snprintf(buf, len, "%s=%.200s", w->source, w->path);
    else
        snprintf(buf, len, "%.200s", w->path);
    return buf;
}

static void refuse(const struct walk *w, struct vgpu_err *e, const char *comp, const struct stat *st, const char *why,
                   const char *fix)
{
    char shown[300];
    vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                 "refusing %s as root: %.200s%s %s (owner uid %u, mode %04o), so another user could change what root "
                 "loads, runs or works in; %s%s%s (vgpu-security(7))",
                 what(w, shown, sizeof shown), comp, S_ISLNK(st->st_mode) ? " (a symbolic link)" : "", why,
                 (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), fix, w->source ? ", or unset " : "",
                 w->source ? w->source : "");
}

/* One component met on the way. `last`: the file named (not a directory above it). */
static int check(const struct walk *w, const char *comp, const struct stat *st, bool last, unsigned flags,
                 struct vgpu_err *e)
{
    char fix[PATH_MAX + 64];
    if (st->st_uid != 0) {
        /* A symlink's own mode means nothing, but its owner may remove it and point a new one
         * elsewhere (even in a sticky directory). */
        snprintf(fix, sizeof fix, "chown root %.200s, or use a copy under directories only root owns", comp);
        refuse(w, e, comp, st, "belongs to another user", fix);
        return -1;
    }
    if (S_ISLNK(st->st_mode) || !(st->st_mode & (S_IWGRP | S_IWOTH)) || (last && (flags & VGPU_TRUST_ANY_MODE)))
        return 0;
    /* Sticky: others may add entries, but only an entry's owner or the directory's owner may
     * rename or remove one; both are root (checked), so what root named here stays. A file, or
     * the directory named when it is not one to work in, must not be writable at all. */
    if (S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && (!last || (flags & VGPU_TRUST_DIR)))
        return 0;
    snprintf(fix, sizeof fix, "run chmod go-w %.200s%s", comp, S_ISDIR(st->st_mode) && !last ? " (or +t)" : "");
    refuse(w, e, comp, st, st->st_mode & S_IWOTH ? "is writable by others" : "is writable by its group", fix);
    return -1;
}

/* The next component of w->rest into comp (NUL-terminated), removed from rest. false: none. */
static bool next_comp(struct walk *w, char *comp, size_t len)
{
    char *p = w->rest;
    while (*p == '/')
        p++;
    if (!*p) {
        w->rest[0] = 0;
        return false;
    }
    size_t n = strcspn(p, "/");
    snprintf(comp, len, "%.*s", (int)(n < len ? n : len - 1), p);
    memmove(w->rest, p + n, strlen(p + n) + 1);
    return true;
}

static bool rest_empty(const struct walk *w)
{
    return w->rest[strspn(w->rest, "/")] == 0;
}

static int walk(struct walk *w, unsigned flags, struct vgpu_err *e)
{
    char shown[300];
    struct stat st;
    if (lstat("/", &st) != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "%s: cannot check /: %s", what(w, shown, sizeof shown), strerror(errno));
        return -1;
    }
    if (check(w, "/", &st, false, flags, e) != 0)
        return -1;
    char comp[NAME_MAX + 1];
    int links = 0;
    while (next_comp(w, comp, sizeof comp)) {
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            /* done has no symlink in it, so its parent is its lexical parent (already checked). */
            char *slash = strrchr(w->done, '/');
            if (slash)
                *slash = 0;
            continue;
        }
        if ((size_t)snprintf(w->cand, sizeof w->cand, "%s/%s", w->done, comp) >= sizeof w->cand) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "%s: the path is too long to check", what(w, shown, sizeof shown));
            return -1;
        }
        bool last = rest_empty(w);
        if (lstat(w->cand, &st) != 0) {
            int err = errno;
            if (err == ENOENT && last && (flags & VGPU_TRUST_MAY_BE_MISSING))
                return 0;
            vgpu_err_set(e, err == ENOENT ? VGPU_EXIT_NOT_FOUND : VGPU_EXIT_FAIL, "%s: %.200s: %s",
                         what(w, shown, sizeof shown), w->cand, strerror(err));
            return -1;
        }
        if (check(w, w->cand, &st, last && !S_ISLNK(st.st_mode), flags, e) != 0)
            return -1;
        if (!S_ISLNK(st.st_mode)) {
            memcpy(w->done, w->cand, sizeof w->done);
            continue;
        }
        /* A symbolic link (itself root's, checked): what it points to is walked as if written
         * in its place, every component checked in turn, so a link to a user's file, or through
         * a user's directory, or to another link of a user's, is refused like the path itself. */
        ssize_t n = readlink(w->cand, w->link, sizeof w->link - 1);
        if (++links > MAX_LINKS || n <= 0 || (size_t)n >= sizeof w->link - 1) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "%s: %.200s: %s", what(w, shown, sizeof shown), w->cand,
                         n < 0 ? strerror(errno) : "too many or too long symbolic links");
            return -1;
        }
        w->link[n] = 0;
        char tail[sizeof w->rest];
        memcpy(tail, w->rest, sizeof tail);
        if ((size_t)snprintf(w->rest, sizeof w->rest, "%s/%s", w->link, tail) >= sizeof w->rest) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "%s: the path is too long to check", what(w, shown, sizeof shown));
            return -1;
        }
        if (w->link[0] == '/')
            w->done[0] = 0;     /* from / again (checked above) */
    }
    return 0;
}

int vgpu_trust_path(const char *path, const char *source, unsigned flags, struct vgpu_err *e)
{
    if (!vgpu_trust_applies() || !path || !*path)
        return 0;
    if ((flags & VGPU_TRUST_SEARCHED) && !strchr(path, '/'))
        return 0;
    struct walk *w = calloc(1, sizeof *w);
    if (!w) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory checking %.200s", path);
        return -1;
    }
    w->path = path;
    w->source = source;
    int rc = -1;
    /* A relative path is looked up from the working directory: all of it is checked too. */
    if (path[0] != '/' && !getcwd(w->done, sizeof w->done)) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot check %.200s: the working directory: %s", path, strerror(errno));
        goto out;
    }
    if ((size_t)snprintf(w->rest, sizeof w->rest, "%s/%s", w->done, path) >= sizeof w->rest) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot check %.200s: the path is too long", path);
        goto out;
    }
    w->done[0] = 0;
    rc = walk(w, flags, e);
out:
    free(w);
    return rc;
}

int vgpu_trust_env(struct vgpu_err *e)
{
    static const struct {
        const char *name;
        unsigned flags;
    } vars[] = {
        { "VGPU_NVML_LIB", VGPU_TRUST_SEARCHED },
        { "VGPU_NVIDIA_SMI", VGPU_TRUST_SEARCHED },
        { "VGPU_MPS_CONTROL", VGPU_TRUST_SEARCHED },
        { "VGPU_LIBRARY", 0 },
        { "VGPU_MACHINE_DIR", VGPU_TRUST_DIR | VGPU_TRUST_MAY_BE_MISSING },
        { "VGPU_NVIDIA_PROC", VGPU_TRUST_DIR | VGPU_TRUST_MAY_BE_MISSING },
    };
    if (!vgpu_trust_applies())
        return 0;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i].name);
        /* Only a path someone else could change stops every command here; a missing or unusable
         * one is for the command that uses it to report, in its own words. */
        if (v && *v && vgpu_trust_path(v, vars[i].name, vars[i].flags, e) != 0 && e->code == VGPU_EXIT_PERMISSION)
            return -1;
    }
    return 0;
}
