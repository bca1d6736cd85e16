/* Root's policy file (vgpu/policy.h). Moved here from jobcount.c when accounting's retention
 * became a second key: one reader, one set of checks on the file. */
#include "vgpu/policy.h"

#include <errno.h>
#include <fcntl.h>
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

/* One "KEY VALUE" line into p; false when the key is unknown or the value out of its range. */
static bool parse_line(const char *key, const char *val, struct vgpu_policy *p)
{
    struct vgpu_err pe;
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
                         "'acct-retention-days N' (N from 1 to %d), a '#' comment or empty; root must fix the file",
                         dir, no, q, VGPU_MAX_JOBS_LIMIT, VGPU_POLICY_RETENTION_MAX);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}
