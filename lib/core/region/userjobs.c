/* Jobs that root starts as another user (see vgpu/userjobs.h). */
#include "vgpu/userjobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/machinedir.h"
#include "vgpu/statedir.h"

/* Opens (making it first when missing) the directory `name` in dfd, owned by root with group
 * `gid` and mode `mode`, and checks that it is exactly that: a directory someone else made
 * there first (the machine directory is writable by all) is refused, never used. */
static int root_dir(int dfd, const char *shown, const char *name, gid_t gid, mode_t mode, struct vgpu_err *e)
{
    if (mkdirat(dfd, name, 0700) == 0) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* Explicit owner and mode (the umask may have narrowed the mode, never widened it). */
        if (fd >= 0 && (fchown(fd, 0, gid) < 0 || fchmod(fd, mode) < 0)) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot set up %s/%s: %s", shown, name, strerror(errno));
            close(fd);
            return -1;
        }
        if (fd >= 0)
            return fd;
    } else if (errno != EEXIST) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot create %s/%s: %s", shown, name, strerror(errno));
        return -1;
    }
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot open %s/%s: %s (a symbolic link or not a directory?); remove it",
                     shown, name, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != 0 || st.st_gid != gid || (st.st_mode & 07777) != mode) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "refusing %s/%s: it belongs to uid %u, group %u, mode %04o, not root, group %u, mode %04o (made by "
                     "someone else first?); remove it, and vgpu run --user makes it again",
                     shown, name, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777),
                     (unsigned)gid, (unsigned)mode);
        close(fd);
        return -1;
    }
    return fd;
}

int vgpu_userjobs_prepare(uid_t uid, gid_t gid, char *out, size_t len, struct vgpu_err *e)
{
    if (geteuid() != 0) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "only root can start a job as another user");
        return -1;
    }
    const char *mdir = vgpu_machinedir_path();
    int m = vgpu_machinedir_open(true, e);
    if (m < 0)
        return -1;
    char shown[4200], uname[16];
    snprintf(uname, sizeof uname, "%u", (unsigned)uid);
    int top = root_dir(m, mdir, "userjobs", 0, 0755, e);
    close(m);
    if (top < 0)
        return -1;
    snprintf(shown, sizeof shown, "%s/userjobs", mdir);
    int u = root_dir(top, shown, uname, gid, 0750, e);
    close(top);
    if (u < 0)
        return -1;
    snprintf(shown, sizeof shown, "%s/userjobs/%s", mdir, uname);
    int j = root_dir(u, shown, "jobs", gid, 0750, e);
    close(u);
    if (j < 0)
        return -1;
    close(j);
    if ((size_t)snprintf(out, len, "%s", shown) >= len) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the machine-wide directory's path is too long: %s", mdir);
        return -1;
    }
    return 0;
}

size_t vgpu_userjobs_dirs(char (**dirs)[4096])
{
    *dirs = NULL;
    char top[4200];
    snprintf(top, sizeof top, "%s/userjobs", vgpu_machinedir_path());
    size_t n = 0, cap = 0;
    if (geteuid() != 0) {
        char mine[4300];
        snprintf(mine, sizeof mine, "%s/%u", top, (unsigned)geteuid());
        struct stat st;
        if (strlen(mine) >= 4096 || lstat(mine, &st) < 0 || !S_ISDIR(st.st_mode))
            return 0;
        *dirs = malloc(sizeof **dirs);
        if (!*dirs)
            return 0;
        memcpy((*dirs)[0], mine, strlen(mine) + 1);   /* fits: checked above */
        return 1;
    }
    DIR *d = opendir(top);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!de->d_name[0] || strspn(de->d_name, "0123456789") != strlen(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char (*nd)[4096] = realloc(*dirs, cap * sizeof *nd);
            if (!nd)
                break;
            *dirs = nd;
        }
        if ((size_t)snprintf((*dirs)[n], sizeof (*dirs)[n], "%s/%s", top, de->d_name) < sizeof (*dirs)[n])
            n++;
    }
    closedir(d);
    return n;
}

static int by_creation(const void *a, const void *b)
{
    const struct vgpu_job_ref *x = a, *y = b;
    if (x->created_ns != y->created_ns)
        return x->created_ns < y->created_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

int vgpu_statedir_or_none(char *buf, size_t len, struct vgpu_err *e)
{
    if (vgpu_statedir(buf, len, false, e) == 0)
        return 0;
    if (e->code != VGPU_EXIT_NOT_FOUND)
        return -1;
    buf[0] = 0;
    return 0;
}

static int list_all(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt, bool damaged,
                    struct vgpu_err *e)
{
    int (*list)(const char *, struct vgpu_job_ref **, size_t *, unsigned *, struct vgpu_err *) =
        damaged ? vgpu_jobs_list_damaged : vgpu_jobs_list;
    *out = NULL;
    *count = 0;
    if (corrupt)
        *corrupt = 0;
    if (statedir[0] && list(statedir, out, count, corrupt, e) < 0)
        return -1;
    char (*dirs)[4096];
    size_t nd = vgpu_userjobs_dirs(&dirs);
    for (size_t i = 0; i < nd; i++) {
        struct vgpu_job_ref *more;
        size_t nm;
        unsigned bad = 0;
        struct vgpu_err de;
        if (list(dirs[i], &more, &nm, &bad, &de) < 0) {
            vgpu_debug("jobs started by root as this user, in %s: %s", dirs[i], de.msg);
            continue;
        }
        if (corrupt)
            *corrupt += bad;
        if (!nm)
            continue;
        struct vgpu_job_ref *all = realloc(*out, (*count + nm) * sizeof *all);
        if (!all) {
            free(more);
            continue;
        }
        memcpy(all + *count, more, nm * sizeof *all);
        free(more);
        *out = all;
        *count += nm;
    }
    free(dirs);
    if (*count)
        qsort(*out, *count, sizeof **out, by_creation);
    return 0;
}

int vgpu_jobs_list_all(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                       struct vgpu_err *e)
{
    return list_all(statedir, out, count, corrupt, false, e);
}

int vgpu_jobs_await_records(const char *statedir, int timeout_ms, struct vgpu_err *e)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct vgpu_job_ref *refs = NULL;
        size_t n = 0;
        if (list_all(statedir, &refs, &n, NULL, false, e) < 0)
            return -1;
        int waiting = 0;
        for (size_t i = 0; i < n; i++)
            waiting += refs[i].readable && refs[i].finishing && refs[i].owner == geteuid();
        free(refs);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L;
        if (!waiting || ms >= timeout_ms)
            return waiting;
        const struct timespec tick = { 0, 10 * 1000000L };
        nanosleep(&tick, NULL);
    }
}

int vgpu_jobs_list_all_damaged(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                               struct vgpu_err *e)
{
    return list_all(statedir, out, count, corrupt, true, e);
}

int vgpu_jobs_find_all(const char *statedir, const char *key, enum vgpu_region_mode mode, struct vgpu_region *r,
                       struct vgpu_err *e)
{
    /* An empty word names no job: a usage error (2), not "no such job" (8). */
    if (!*key) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the job is empty (''): give a job id, a unique start of one, or a job name "
                     "(see vgpu ps)");
        return -1;
    }
    if (statedir[0]) {
        if (vgpu_jobs_find(statedir, key, mode, r, e) == 0)
            return 0;
        if (e->code != VGPU_EXIT_NOT_FOUND)
            return -1;
    } else {
        vgpu_err_set(e, VGPU_EXIT_NOT_FOUND, "no job '%s': no job of yours is running (see vgpu ps)", key);
    }
    struct vgpu_err first = *e;
    char (*dirs)[4096];
    size_t nd = vgpu_userjobs_dirs(&dirs);
    for (size_t i = 0; i < nd; i++) {
        struct vgpu_err de;
        if (vgpu_jobs_find(dirs[i], key, mode, r, &de) == 0) {
            free(dirs);
            return 0;
        }
        if (de.code != VGPU_EXIT_NOT_FOUND) {
            *e = de;
            free(dirs);
            return -1;
        }
    }
    free(dirs);
    *e = first;
    return -1;
}
