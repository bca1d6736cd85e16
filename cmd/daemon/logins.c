/* Who a uid counts as for the daemon's quotas (issue 35): a login's subordinate uids
 * (/etc/subuid, the uids of its user-namespace containers) count as that login, so a user with a
 * container of 65536 uids gets one user's connections and schedule entries, not 65536 users'.
 * Only quotas read this: what an entry may do is still decided by the uid that made it. */
#include "daemon/server.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "vgpu/machinedir.h"

#define LOGINS_MAX_RANGES 4096
#define LOGINS_LOOK_NS    1000000000ULL   /* the file is looked at again (stat) at most this often */

struct arb_range {
    uid_t first, owner;
    unsigned long count;
};

struct arb_logins {
    char path[4096];
    struct timespec mtime;
    off_t size;
    bool loaded;
    uint64_t looked_at;
    unsigned n;
    struct arb_range r[LOGINS_MAX_RANGES];
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The subordinate-uid file: /etc/subuid. VGPU_SUBUID_FILE replaces it only for a daemon that
 * VGPU_MACHINE_DIR relocates (the tests'): a daemon serving the machine's own directory counts
 * logins as the machine says, whatever its environment was left holding. */
static void choose_path(struct arb_logins *l)
{
    const char *alt = getenv("VGPU_SUBUID_FILE");
    bool relocated = strcmp(vgpu_machinedir_path(), VGPU_MACHINEDIR_DEFAULT) != 0;
    snprintf(l->path, sizeof l->path, "%s", relocated && alt && alt[0] == '/' ? alt : "/etc/subuid");
}

/* "login:first:count" lines (login may be a uid number); others are skipped. */
static void load(struct arb_logins *l, FILE *f)
{
    char line[512];
    l->n = 0;
    while (fgets(line, sizeof line, f) && l->n < LOGINS_MAX_RANGES) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *end;
        if (!c1 || !c2 || line[0] == '#')
            continue;
        *c1 = 0;
        errno = 0;
        unsigned long first = strtoul(c1 + 1, &end, 10);
        if (errno || end != c2 || first > (uid_t)-2)
            continue;
        unsigned long count = strtoul(c2 + 1, &end, 10);
        if (errno || end == c2 + 1 || (*end && *end != '\n') || count == 0)
            continue;
        uid_t owner;
        struct passwd *pw = getpwnam(line);
        if (pw) {
            owner = pw->pw_uid;
        } else {
            unsigned long u = strtoul(line, &end, 10);
            if (!line[0] || *end || u > (uid_t)-2)
                continue;   /* a login this machine does not know: nobody to count it as */
            owner = (uid_t)u;
        }
        if (owner == 0)
            continue;   /* root's containers' uids are not root: each counts as itself, with quotas */
        l->r[l->n++] = (struct arb_range){ .first = (uid_t)first, .owner = owner, .count = count };
    }
}

/* Reads the file again when it changed (looked at, at most once a second). */
static void refresh(struct arb_logins *l)
{
    uint64_t now = mono_ns();
    if (l->loaded && now - l->looked_at < LOGINS_LOOK_NS)
        return;
    l->looked_at = now;
    struct stat st;
    if (stat(l->path, &st) != 0) {
        l->n = 0;   /* no file: every uid is its own login */
        l->loaded = true;
        return;
    }
    if (l->loaded && st.st_mtim.tv_sec == l->mtime.tv_sec && st.st_mtim.tv_nsec == l->mtime.tv_nsec &&
        st.st_size == l->size)
        return;
    FILE *f = fopen(l->path, "re");
    if (!f)
        return;   /* kept as it was: an unreadable moment is not a reason to forget the ranges */
    load(l, f);
    fclose(f);
    l->mtime = st.st_mtim;
    l->size = st.st_size;
    l->loaded = true;
}

uid_t arb_login_of(struct arbiter *a, uid_t uid)
{
    if (uid == 0)
        return 0;
    if (!a->logins) {
        a->logins = calloc(1, sizeof *a->logins);
        if (!a->logins)
            return uid;
        choose_path(a->logins);
    }
    struct arb_logins *l = a->logins;
    refresh(l);
    for (unsigned i = 0; i < l->n; i++)
        if (uid >= l->r[i].first && uid - l->r[i].first < l->r[i].count)
            return l->r[i].owner;
    return uid;
}

void arb_logins_free(struct arbiter *a)
{
    free(a->logins);
    a->logins = NULL;
}
