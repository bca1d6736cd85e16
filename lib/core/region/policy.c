/* Root's policy file (vgpu/policy.h). Moved here from jobcount.c when accounting's retention
 * became a second key: one reader, one set of checks on the file. */
#include "vgpu/policy.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/jobcount.h"
#include "vgpu/machinedir.h"

/* What to do about an errno, for messages: running out of descriptors has its own fix. */
static const char *remedy(int err)
{
    return err == EMFILE || err == ENFILE ? "; raise the open-file limit (ulimit -n)" : "";
}

/* A list of names or numbers, comma-separated, no empty item. */
static bool list_ok(const char *val)
{
    if (!*val || *val == ',' || val[strlen(val) - 1] == ',' || strstr(val, ",,"))
        return false;
    for (const char *c = val; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == ',' || *c == '_' || *c == '-' || *c == '.'))
            return false;
    return true;
}

static const char *const KEYS[] = { "max-jobs-per-gpu", "acct-retention-days", "priority-high-users",
                                    "priority-high-groups", "priority-default" };
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static int key_index(const char *key)
{
    for (unsigned i = 0; i < NKEYS; i++)
        if (strcmp(key, KEYS[i]) == 0)
            return (int)i;
    return -1;
}

/* One "KEY VALUE" line into p; false when the key is unknown or the value out of its range. */
static bool parse_line(const char *key, const char *val, struct vgpu_policy *p)
{
    struct vgpu_err pe;
    if (strcmp(key, "priority-high-users") == 0 || strcmp(key, "priority-high-groups") == 0) {
        char *dst = key[14] == 'u' ? p->high_users : p->high_groups;
        if (!list_ok(val) || strlen(val) >= sizeof p->high_users)
            return false;
        strcpy(dst, val);
        return true;
    }
    if (strcmp(key, "priority-default") == 0) {
        if (strcmp(val, "low") && strcmp(val, "normal"))
            return false;
        p->default_prio = val[0] == 'l' ? -1 : 0;
        return true;
    }
    if (strcmp(key, "max-jobs-per-gpu") == 0)
        return vgpu_jobcount_parse(val, "max-jobs-per-gpu", &p->max_jobs_per_gpu, &pe) == 0;
    if (strcmp(key, "acct-retention-days") == 0) {
        char *end;
        errno = 0;
        unsigned long v = val[0] >= '0' && val[0] <= '9' ? strtoul(val, &end, 10) : 0;
        if (val[0] < '0' || val[0] > '9' || *end || errno || v < 1 || v > VGPU_POLICY_RETENTION_MAX)
            return false;
        p->acct_retention_days = (unsigned)v;
        return true;
    }
    return false;
}

int vgpu_policy_read(struct vgpu_policy *p, struct vgpu_err *e)
{
    memset(p, 0, sizeof *p);
    struct vgpu_err me;
    int dfd = vgpu_machinedir_open(false, &me);
    if (dfd < 0)
        return 0;                       /* no machine-wide directory: root set nothing */
    const char *dir = vgpu_machinedir_path();
    int fd = openat(dfd, "policy", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    close(dfd);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        int err = errno;
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot read %s/policy: %s (root's policy file must be a regular file, "
                     "mode 0644)%s", dir, strerror(err), remedy(err));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 07777) != 0644 ||
        st.st_size > 65536) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "%s/policy is not root's policy file (it must be a regular file owned "
                     "by root, mode 0644, under 64 KiB); as root: chown root: %s/policy && chmod 0644 %s/policy",
                     dir, dir, dir);
        close(fd);
        return -1;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        int err = errno;
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot read %s/policy: %s%s", dir, strerror(err), remedy(err));
        return -1;
    }
    char line[256];
    int rc = 0;
    unsigned seen[NKEYS] = { 0 };   /* the line each key was given on */
    for (unsigned no = 1; rc == 0 && fgets(line, sizeof line, f); no++) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = 0;
        else if (!feof(f))
            len = sizeof line;          /* a line too long: refused below */
        char *q = line + strspn(line, " \t");
        if (*q == 0 || *q == '#')
            continue;
        char key[64], val[64], extra;
        if (len >= sizeof line - 1 || sscanf(q, "%63s %63s %c", key, val, &extra) != 2 || !parse_line(key, val, p)) {
            vgpu_err_set(e, VGPU_EXIT_STATE, "%s/policy line %u: '%.80s' is not 'max-jobs-per-gpu N' (N from 1 to %d), "
                         "'acct-retention-days N' (N from 1 to %d), 'priority-high-users NAME,...', "
                         "'priority-high-groups NAME,...', 'priority-default low|normal', a '#' comment or empty; "
                         "root must fix the file", dir, no, q, VGPU_MAX_JOBS_LIMIT, VGPU_POLICY_RETENTION_MAX);
            rc = -1;
        } else {
            /* The last one winning would hide the first from whoever reads the file top down. */
            int k = key_index(key);
            if (k >= 0 && seen[k]) {
                vgpu_err_set(e, VGPU_EXIT_STATE, "%s/policy: '%s' given twice (lines %u and %u); root must keep "
                             "one of them", dir, key, seen[k], no);
                rc = -1;
            } else if (k >= 0) {
                seen[k] = no;
            }
        }
    }
    fclose(f);
    return rc;
}

/* Whether `item` (a name or a number) is in the comma-separated `list`. */
static bool listed(const char *list, const char *name, unsigned long id)
{
    char buf[sizeof ((struct vgpu_policy *)0)->high_users];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long n = strtoul(it, &end, 10);
        if ((name && strcmp(it, name) == 0) || (isdigit((unsigned char)it[0]) && !*end && n == id))
            return true;
    }
    return false;
}

bool vgpu_policy_may_high(const struct vgpu_policy *p, uid_t uid)
{
    if (uid == 0)
        return true;
    struct passwd pw, *pwp = NULL;
    char buf[4096];
    getpwuid_r(uid, &pw, buf, sizeof buf, &pwp);
    if (listed(p->high_users, pwp ? pwp->pw_name : NULL, uid))
        return true;
    if (!p->high_groups[0] || !pwp)
        return false;
    gid_t groups[256];
    int n = 256;
    if (getgrouplist(pwp->pw_name, pwp->pw_gid, groups, &n) < 0)
        n = 256;   /* more than that: the first ones */
    for (int i = 0; i < n; i++) {
        struct group gr, *grp = NULL;
        char gbuf[4096];
        getgrgid_r(groups[i], &gr, gbuf, sizeof gbuf, &grp);
        if (listed(p->high_groups, grp ? grp->gr_name : NULL, groups[i]))
            return true;
    }
    return false;
}
