/* The user's own accounting store (vgpu/acct.h, issue 36): where it lives, and the records an
 * older vgpu left in the runtime directory, moved once into it.
 *
 * With the arbiter, the own store only buffers the records the daemon could not take until they
 * are handed over; without it, it is the user's whole history. Either way it must outlive a
 * logout, which empties $XDG_RUNTIME_DIR (where the state directory of jobs and regions is): so
 * $XDG_STATE_HOME/vgpu, else ~/.local/state/vgpu (the XDG base directory spec's place for state
 * that should persist), and /var/lib/vgpu/own for root (beside, never in place of, the daemon's
 * /var/lib/vgpu/acct.db: a hand-over from a store into itself would delete what it moved).
 * VGPU_STATE_DIR, when set, still names the one directory of everything (tests, containers). */
#include "vgpu/acct.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/statedir.h"

#define ROOT_OWN_DIR "/var/lib/vgpu/own"

/* The own store's directory when VGPU_STATE_DIR does not name it; 0, or -1 when there is none
 * (no home: then the state directory, as before). */
static int own_dir(char *buf, size_t len)
{
    const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n;
    if (geteuid() == 0)
        n = snprintf(buf, len, "%s", ROOT_OWN_DIR);
    else if (x && x[0] == '/')      /* the spec: a relative value is invalid, and ignored */
        n = snprintf(buf, len, "%s/vgpu", x);
    else {
        struct passwd *pw = home && home[0] == '/' ? NULL : getpwuid(geteuid());
        if (!(home && home[0] == '/') && !(pw && pw->pw_dir && pw->pw_dir[0] == '/'))
            return -1;
        n = snprintf(buf, len, "%s/.local/state/vgpu", home && home[0] == '/' ? home : pw->pw_dir);
    }
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* mkdir -p, each missing directory 0700 (the spec's mode for XDG_STATE_HOME); the checks of
 * vgpu_statedir_open_path then decide whether what is there may be used. */
static int make_dirs(const char *path, struct vgpu_err *e)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0700) < 0 && errno != EEXIST) {
            vgpu_err_set(e, errno == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                         "cannot create %s for your accounting records: %s%s", p, strerror(errno),
                         vgpu_statedir_errno_hint(errno));
            return -1;
        }
        if (!c)
            return 0;
        *s = c;
    }
}

static int move_one(const struct vgpu_acct_record *rec, void *arg)
{
    void **a = arg;
    struct vgpu_acct_store *to = a[0];
    struct vgpu_err *e = a[1];
    return vgpu_acct_insert(to, rec, e) < 0;
}

/* Moves the records of STATEDIR/acct.db (where vgpu kept them before) into `to`, then removes
 * that file, once: a failure leaves it for the next open (said at debug level). */
static void move_old_store(struct vgpu_acct_store *to)
{
    struct vgpu_statedir old;
    struct vgpu_err e = { 0 };
    if (vgpu_statedir_open(&old, false, &e) < 0)
        return;
    if (faccessat(old.fd, VGPU_ACCT_DB_NAME, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        vgpu_statedir_close(&old);
        return;
    }
    struct vgpu_acct_store *from = vgpu_acct_open(old.fd, old.path, VGPU_ACCT_DB_NAME, false, &e);
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    void *a[2] = { to, &e };
    /* Every record is written to the new store before the old file goes: a record found in
     * both after a crash is kept once (records are keyed by job id). */
    if (from && vgpu_acct_query(from, &f, move_one, a, &e) == 0 && !e.msg[0]) {
        vgpu_acct_close(from);
        from = NULL;
        static const char *const files[] = { VGPU_ACCT_DB_NAME, VGPU_ACCT_DB_NAME "-wal", VGPU_ACCT_DB_NAME "-shm" };
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
            unlinkat(old.fd, files[i], 0);
        vgpu_debug("accounting: the records of %s/%s moved to your own store", old.path, VGPU_ACCT_DB_NAME);
    } else {
        vgpu_debug("accounting: the records of %s/%s are not moved yet: %s", old.path, VGPU_ACCT_DB_NAME, e.msg);
    }
    vgpu_acct_close(from);
    vgpu_statedir_close(&old);
}

static int open_dir(struct vgpu_statedir *sd, bool *moved_here, bool create, struct vgpu_err *e)
{
    const char *set = getenv("VGPU_STATE_DIR");
    char dir[4096];
    *moved_here = false;
    if ((set && *set) || own_dir(dir, sizeof dir) < 0)
        return vgpu_statedir_open(sd, create, e);
    /* A home that is not there or not ours (nobody's /nonexistent, a HOME passed on by su):
     * the state directory, as before, rather than no record at all. */
    struct vgpu_err he = { 0 };
    if ((create && make_dirs(dir, &he) < 0) ||
        (vgpu_statedir_open_path(sd, dir, false, &he) < 0 && he.code != VGPU_EXIT_NOT_FOUND)) {
        vgpu_debug("accounting: %s; your own store is in the state directory instead", he.msg);
        return vgpu_statedir_open(sd, create, e);
    }
    if (sd->fd < 0) {
        *e = he;
        *moved_here = true;
        return -1;
    }
    *moved_here = true;
    return 0;
}

int vgpu_acct_own_store_path(char *buf, size_t len)
{
    struct vgpu_statedir sd;
    struct vgpu_err e = { 0 };
    bool own_place;
    char dir[4096];
    if (open_dir(&sd, &own_place, false, &e) == 0) {
        snprintf(dir, sizeof dir, "%s", sd.path);
        vgpu_statedir_close(&sd);
    } else if (!(e.code == VGPU_EXIT_NOT_FOUND && own_place && own_dir(dir, sizeof dir) == 0)) {
        return -1;      /* a state directory not made yet: no store there either */
    }
    int n = snprintf(buf, len, "%s/%s", dir, VGPU_ACCT_DB_NAME);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

struct vgpu_acct_store *vgpu_acct_open_user(bool create, struct vgpu_err *e)
{
    struct vgpu_statedir sd;
    bool own_place;
    struct vgpu_err oe = { 0 };
    int rc = open_dir(&sd, &own_place, create, &oe);
    /* Not there yet, but the old place may hold records: make it for them. */
    if (rc < 0 && oe.code == VGPU_EXIT_NOT_FOUND && own_place && !create) {
        char old[4096];
        struct vgpu_err ie;
        if (vgpu_statedir(old, sizeof old, false, &ie) == 0 && strlen(old) + 9 < sizeof old) {
            strcat(old, "/" VGPU_ACCT_DB_NAME);
            if (access(old, F_OK) == 0)
                return vgpu_acct_open_user(true, e);
        }
    }
    if (rc < 0) {
        *e = oe;
        return NULL;
    }
    /* The state directory's handle is O_PATH: openat through it works, and the checks held. */
    struct vgpu_acct_store *s = vgpu_acct_open(sd.fd, sd.path, VGPU_ACCT_DB_NAME, create, e);
    vgpu_statedir_close(&sd);
    if (s && own_place)
        move_old_store(s);
    return s;
}
