/* Enumerating and finding jobs in the state directory (vgpu ps/top/limit/wait). vgpu-side
 * only in practice (libvgpu.so never lists jobs), but libc only all the same. */
#include "vgpu/region.h"

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
#include "vgpu/statedir.h"

static vgpu_jobs_ended_fn ended_hook;
static vgpu_jobs_orphan_fn orphan_hook;

void vgpu_jobs_on_ended(vgpu_jobs_ended_fn fn)
{
    ended_hook = fn;
}

void vgpu_jobs_on_orphan(vgpu_jobs_orphan_fn fn)
{
    orphan_hook = fn;
}

static int by_creation(const void *a, const void *b)
{
    const struct vgpu_job_ref *x = a, *y = b;
    if (x->created_ns != y->created_ns)
        return x->created_ns < y->created_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* How long an ended job is kept, in ns: VGPU_EXITED_KEEP_S (a testing knob) or the default. */
static uint64_t exited_keep_ns(void)
{
    double s = VGPU_EXITED_KEEP_DEFAULT_S;
    const char *v = getenv("VGPU_EXITED_KEEP_S");
    if (v && *v) {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!errno && !*end && x >= 0 && x <= 1e6)
            s = x;
    }
    return (uint64_t)(s * 1e9);
}

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Reaps a readable region and tells whether it is stale. A running job is stale when no
 * process of the job is alive (vgpu_region_job_alive: its `vgpu run`, its slots, its command,
 * or a process carrying its region), so nobody will ever use or remove it: not merely when its
 * vgpu run is gone (a `kill -9` of vgpu run left the command running, and ending the job then
 * let it run unlimited). An ended one (EXITED) is kept `keep` ns after it ended, for vgpu wait
 * and ps, whether its `vgpu run` is still there or not (it exits right after recording the
 * status). */
static bool reap_is_stale(struct vgpu_region *r, uint64_t now, uint64_t keep)
{
    vgpu_region_reap(r);
    if (atomic_load(&r->hdr->state) == VGPU_JOB_EXITED) {
        uint64_t ended = atomic_load(&r->hdr->exited_realtime_ns);
        /* A clock stepped back by more than `keep` must not keep it forever either. */
        return ended == 0 || (now >= ended ? now - ended >= keep : ended - now > keep);
    }
    return !vgpu_region_job_alive(r);
}

/* Removes a stale job: its region, and its output log (vgpu run --detach) beside it. By name
 * in the checked jobs directory: unlinkat never follows a symlink, and the directory cannot be
 * swapped under us (a path would have reached wherever a swapped jobs/ pointed). */
static void remove_job(int jobs, const char *region_name)
{
    char log[VGPU_JOB_ID_LEN + 8];
    size_t len = strlen(region_name);
    unlinkat(jobs, region_name, 0);
    if (len > 7 && len - 7 + 7 <= sizeof log) {
        memcpy(log, region_name, len - 7);
        memcpy(log + len - 7, ".log", 5);
        unlinkat(jobs, log, 0);
        /* A split region's usage (vgpu run --user), after the region it belongs to. */
        memcpy(log + len - 7, ".usage", 7);
        unlinkat(jobs, log, 0);
        /* The arbiter's lending answer (vgpu/lend.h). */
        memcpy(log + len - 7, ".lend", 6);
        unlinkat(jobs, log, 0);
    }
}

/* damaged: also list the regions that cannot be read (damaged set, why in `damaged_why`), for
 * vgpu_jobs_find to name them; vgpu_jobs_list leaves them out (and counts them). */
static int list_jobs(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                     bool damaged, struct vgpu_err *e)
{
    char dir[3800];
    *out = NULL;
    *count = 0;
    if (corrupt)
        *corrupt = 0;
    /* The state directory and jobs/ are opened as checked handles (vgpu/statedir.h): a jobs/ that
     * is a symlink, or another user's, is refused rather than listed and reaped. */
    struct vgpu_statedir sd;
    if (vgpu_statedir_open_path(&sd, statedir, false, e) < 0)
        return e->code == VGPU_EXIT_NOT_FOUND ? 0 : -1;
    int jobs = vgpu_statedir_sub(sd.fd, sd.path, "jobs", false, e);
    if (strlen(sd.path) > sizeof dir - 8) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "the state directory path is too long: %s", sd.path);
        if (jobs >= 0)
            close(jobs);
        jobs = -1;
    }
    snprintf(dir, sizeof dir, "%.3790s/jobs", sd.path);
    vgpu_statedir_close(&sd);
    if (jobs < 0)
        return e->code == VGPU_EXIT_NOT_FOUND ? 0 : -1;     /* ENOENT: no job was ever started here */
    DIR *d = fdopendir(jobs);
    if (!d) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot list the jobs in %s: %s", dir, strerror(errno));
        close(jobs);
        return -1;
    }
    size_t cap = 0, n = 0;
    struct vgpu_job_ref *refs = NULL;
    uint64_t now = realtime_ns(), keep = exited_keep_ns();
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 8 || strcmp(de->d_name + len - 7, ".region") != 0 ||
            len - 7 >= VGPU_JOB_ID_LEN)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct vgpu_job_ref *nr = realloc(refs, ncap * sizeof *nr);
            if (!nr) {
                closedir(d);
                free(refs);
                vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory listing the jobs");
                return -1;
            }
            refs = nr;
            cap = ncap;
        }
        struct vgpu_job_ref *ref = &refs[n];
        memset(ref, 0, sizeof *ref);
        memcpy(ref->id, de->d_name, len - 7);
        snprintf(ref->path, sizeof ref->path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (fstatat(jobs, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;           /* removed meanwhile */
        if (!S_ISREG(st.st_mode)) {
            if (corrupt)
                (*corrupt)++;   /* a symlink or a FIFO named like a job: never opened */
            continue;
        }
        ref->owner = st.st_uid;
        ref->created_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
        struct vgpu_region r;
        struct vgpu_err oe;
        if (vgpu_region_open(&r, ref->path, VGPU_REGION_VIEW, &oe) < 0) {
            if (oe.code == VGPU_EXIT_NOT_FOUND)
                continue;
            if (oe.code == VGPU_EXIT_PERMISSION) {
                n++;            /* another user's job: listed by id and owner only */
                continue;
            }
            /* Damaged: say why (VGPU_LOG=debug, as vgpu ps suggests), and keep it for find. */
            vgpu_debug("damaged job region %s: %s", ref->path, oe.msg);
            if (corrupt)
                (*corrupt)++;
            if (damaged) {
                ref->damaged = true;
                snprintf(ref->damaged_why, sizeof ref->damaged_why, "%s", oe.msg);
                n++;
            }
            continue;
        }
        /* A region copied or renamed under another id would be a second live job with the same
         * id, and vgpu limit would change the copy: its id must be its file name. */
        if (strncmp(r.info->id, ref->id, sizeof ref->id) != 0) {
            char why[300];
            snprintf(why, sizeof why, "the region's job id is '%.*s', not its file name's '%s' (a copy or a "
                     "renamed file?); remove it", (int)sizeof r.info->id, r.info->id, ref->id);
            vgpu_debug("damaged job region %s: %s", ref->path, why);
            vgpu_region_close(&r);
            if (corrupt)
                (*corrupt)++;
            if (damaged) {
                ref->damaged = true;
                ref->misnamed = true;
                snprintf(ref->damaged_why, sizeof ref->damaged_why, "%s", why);
                n++;
            }
            continue;
        }
        /* Ended, and vgpu run's finisher (its adopter) still writing its record: listed as
         * finishing (vgpu_jobs_await_records waits for it), never removed meanwhile. */
        bool finishing = atomic_load(&r.hdr->state) == VGPU_JOB_EXITED && vgpu_region_adopted(&r);
        if (reap_is_stale(&r, now, keep) && !finishing) {
            /* Its accounting record first, when vgpu run could not write it (vgpu/acct.h): only
             * the region's owner, whose database it goes to. Kept until that works. */
            if (ended_hook && st.st_uid == geteuid() && ended_hook(&r) < 0) {
                vgpu_region_close(&r);
                continue;
            }
            remove_job(jobs, de->d_name);
            vgpu_region_close(&r);
            continue;
        }
        /* Running, its vgpu run dead (kill -9), its processes alive: someone must watch it as
         * vgpu run did, and write its record when its last process ends. Its owner (root for a
         * split job, whose region file is root's) hands it to the adopter unless one lives. */
        if (orphan_hook && st.st_uid == geteuid() && atomic_load(&r.hdr->state) != VGPU_JOB_EXITED &&
            !vgpu_region_creator_alive(&r) &&
            !vgpu_region_adopted(&r))
            orphan_hook(ref->path);
        /* Ended, and its vgpu run gone without recording it (a full disk, a locked database):
         * recorded now, not only when the job is removed VGPU_EXITED_KEEP_S later. Not while
         * an adopter lives: vgpu run's finisher, writing it (cmd/run/finisher.c). */
        if (ended_hook && st.st_uid == geteuid() && atomic_load(&r.hdr->state) == VGPU_JOB_EXITED &&
            !vgpu_region_creator_alive(&r) && !vgpu_region_adopted(&r))
            (void)ended_hook(&r);
        ref->readable = true;
        ref->owner = vgpu_region_job_uid(&r);   /* a split region is root's file, the job the user's */
        ref->state = atomic_load(&r.hdr->state);
        ref->finishing = finishing;
        /* Bounded: the file is the job user's, and may have changed since it was validated; a
         * name without its NUL must not make us read past it. */
        snprintf(ref->name, sizeof ref->name, "%.*s", (int)sizeof r.info->name - 1, r.info->name);
        ref->created_ns = r.hdr->created_realtime_ns;
        vgpu_region_close(&r);
        n++;
    }
    closedir(d);
    if (n)
        qsort(refs, n, sizeof *refs, by_creation);
    *out = refs;
    *count = n;
    if (!n)
        free(refs), *out = NULL;
    return 0;
}

int vgpu_jobs_list(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                   struct vgpu_err *e)
{
    return list_jobs(statedir, out, count, corrupt, false, e);
}

int vgpu_jobs_list_damaged(const char *statedir, struct vgpu_job_ref **out, size_t *count, unsigned *corrupt,
                           struct vgpu_err *e)
{
    return list_jobs(statedir, out, count, corrupt, true, e);
}

/* The lookup order (vgpu-limit(1), vgpu-wait(1)): exact id, then name, then unique id prefix.
 * A key that is the name of one job and the exact id or the id start of another is ambiguous:
 * an error, never a silent choice. */
static bool id_starts(const struct vgpu_job_ref *j, const char *key)
{
    return *key && strncmp(j->id, key, strlen(key)) == 0;
}

/* "no job 'X'; jobs: ...": the running jobs first, as many as fit, then how many more and how
 * many ended ones there are, so nothing is left out without saying so. */
static void not_found(const struct vgpu_job_ref *refs, size_t n, const char *key, struct vgpu_err *e)
{
    char list[360] = "";
    size_t used = 0, running = 0, shown = 0, ended = 0;
    for (size_t i = 0; i < n; i++) {
        if (!refs[i].readable)
            continue;
        if (refs[i].state == VGPU_JOB_EXITED) {
            ended++;
            continue;
        }
        running++;
        char one[VGPU_JOB_ID_LEN + VGPU_JOB_NAME_LEN + 8];
        int len = snprintf(one, sizeof one, "%s %s%s%s%s", shown ? "," : "", refs[i].id, refs[i].name[0] ? " (" : "",
                           refs[i].name, refs[i].name[0] ? ")" : "");
        if (len > 0 && used + (size_t)len < sizeof list && shown == running - 1) {
            memcpy(list + used, one, (size_t)len + 1);
            used += (size_t)len;
            shown++;
        }
    }
    char more[96] = "", ends[64] = "";
    if (running > shown)
        snprintf(more, sizeof more, ", and %zu more", running - shown);
    if (ended)
        snprintf(ends, sizeof ends, "; %zu ended job%s kept for vgpu wait", ended, ended == 1 ? "" : "s");
    if (running)
        vgpu_err_set(e, VGPU_EXIT_NOT_FOUND, "no job '%s' (by id, id prefix or name); running:%s%s%s (see vgpu ps)",
                     key, list, more, ends);
    else
        vgpu_err_set(e, VGPU_EXIT_NOT_FOUND, "no job '%s': no job of yours is running%s (see vgpu ps)", key, ends);
}

int vgpu_jobs_find(const char *statedir, const char *key, enum vgpu_region_mode mode, struct vgpu_region *r,
                   struct vgpu_err *e)
{
    struct vgpu_job_ref *refs;
    size_t n;
    if (list_jobs(statedir, &refs, &n, NULL, true, e) < 0)
        return -1;
    /* An exact id always names its job: ids are unique, and an id must reach its job whatever
     * another job is called. Then a name; then a unique start of an id (vgpu-limit(1)). */
    const struct vgpu_job_ref *exact = NULL;
    for (size_t i = 0; i < n && !exact; i++)
        if (strcmp(refs[i].id, key) == 0)
            exact = &refs[i];
    const struct vgpu_job_ref *named = NULL;
    for (size_t i = 0; i < n && !named && !exact; i++)
        if (refs[i].readable && refs[i].name[0] && strcmp(refs[i].name, key) == 0 && refs[i].state != VGPU_JOB_EXITED)
            named = &refs[i];
    for (size_t i = n; i-- > 0 && !named && !exact;)
        if (refs[i].readable && refs[i].name[0] && strcmp(refs[i].name, key) == 0)
            named = &refs[i];
    for (size_t i = 0; named && i < n; i++)
        if (&refs[i] != named && id_starts(&refs[i], key)) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "'%s' is ambiguous: it is the name of job %s and the %s of job %s; give "
                         "the full id of the one you mean (see vgpu ps)", key, named->id,
                         strcmp(refs[i].id, key) == 0 ? "id" : "start of the id", refs[i].id);
            free(refs);
            return -1;
        }
    const struct vgpu_job_ref *hit = NULL;
    size_t prefix_hits = 0;
    const struct vgpu_job_ref *prefix_hit = NULL;
    for (size_t i = 0; i < n && !hit; i++)
        if (strcmp(refs[i].id, key) == 0)
            hit = &refs[i];
    /* A name may be reused once its job has ended: the job that has not ended wins, else the
     * newest (refs are sorted oldest first); see `named` above. */
    if (!hit)
        hit = named;
    if (!hit && *key) {
        for (size_t i = 0; i < n; i++)
            if (strncmp(refs[i].id, key, strlen(key)) == 0) {
                prefix_hits++;
                prefix_hit = &refs[i];
            }
        if (prefix_hits > 1) {
            char list[300] = "";
            for (size_t i = 0, used = 0; i < n && used < sizeof list - 20; i++)
                if (strncmp(refs[i].id, key, strlen(key)) == 0)
                    used += (size_t)snprintf(list + used, sizeof list - used, " %s", refs[i].id);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "job id prefix '%s' is ambiguous: it matches%s; give more digits", key,
                         list);
            free(refs);
            return -1;
        }
        hit = prefix_hit;
    }
    if (!hit) {
        not_found(refs, n, key, e);
        free(refs);
        return -1;
    }
    if (hit->damaged) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "job %s cannot be used: its region file %s is damaged: %s", hit->id, hit->path,
                     hit->damaged_why);
        free(refs);
        return -1;
    }
    if (!hit->readable) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION,
                     "job %s belongs to uid %u: only its owner or root may read or change it", hit->id,
                     (unsigned)hit->owner);
        free(refs);
        return -1;
    }
    char path[sizeof hit->path];
    memcpy(path, hit->path, sizeof path);
    free(refs);
    return vgpu_region_open(r, path, mode, e);
}
