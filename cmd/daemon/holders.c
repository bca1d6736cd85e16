/* The holders file (server.h, ARB_HOLDERS_FILE): whom the daemon serves promises and places in the
 * job count to, kept beside its socket so that a daemon started after this one (killed, restarted,
 * upgraded) knows which running jobs will make theirs again, and holds new placements back until
 * they have (place.c). The daemon's memory is the ledger; this file only names its holders.
 *
 *     vgpu-holders 1 BOOT_ID
 *     PID START UID KINDS JOB
 *
 * one line a holder: its pid as the daemon saw it (SO_PEERCRED) and its start time
 * (/proc/PID/stat field 22), so a pid used again by another process is not taken for it; its
 * uid; what it holds (ARB_HELD_PROMISE | ARB_HELD_COUNT); its job's id ("-": not named yet). The
 * boot id (/proc/sys/kernel/random/boot_id) keeps a file that outlived a reboot (a machine
 * directory on a disk) from naming the processes of another boot, whose pids and start times may
 * repeat.
 *
 * Written whole to a new file and renamed over the old one (openat on the daemon's own directory,
 * 0600, O_NOFOLLOW), so a reader sees the old list or the new one: before the reply to a request
 * that made a holder hold more, and at most every 0.1 s for those that hold less (place.c,
 * holders_sync). Read only when it is what this
 * daemon would have written: a regular file of the daemon's own user, closed to others, one link,
 * of bounded size, every line well formed; anything else is ignored, saying why (never trusted:
 * a forged list could hold every placement back). No fsync: the list matters only while its
 * processes live, and they do not survive what loses the page cache. */
#include "daemon/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/region.h"

_Static_assert(sizeof(((struct arb_holder *)0)->job) == VGPU_JOB_ID_LEN, "a holder's job is a job id");

#define HEADER       "vgpu-holders 1 "
#define MAX_BYTES    (1u << 20)
#define BOOT_ID_LEN  36

/* The boot id (lower-case UUID), or "" when it cannot be read. */
static void boot_id(char out[BOOT_ID_LEN + 1])
{
    out[0] = 0;
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char b[64];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n < BOOT_ID_LEN)
        return;
    for (int i = 0; i < BOOT_ID_LEN; i++)
        if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f') || b[i] == '-'))
            return;
    memcpy(out, b, BOOT_ID_LEN);
    out[BOOT_ID_LEN] = 0;
}

static bool job_ok(const char *s, size_t len)
{
    if (len == 0 || len >= VGPU_JOB_ID_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* A decimal number of the line at *s up to the next space or the end (max: its largest value);
 * false when it is not one. */
static bool number(const char **s, const char *end, uint64_t max, uint64_t *v)
{
    const char *p = *s;
    uint64_t x = 0;
    if (p == end || *p < '0' || *p > '9' || (*p == '0' && p + 1 < end && p[1] != ' '))
        return false;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (d > max || x > (max - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *s = p;
    *v = x;
    return true;
}

static bool space(const char **s, const char *end)
{
    if (*s >= end || **s != ' ')
        return false;
    (*s)++;
    return true;
}

/* One line (without its newline) into h; false when it does not parse. */
static bool parse_line(const char *s, const char *end, struct arb_holder *h)
{
    uint64_t pid, start, uid, kinds;
    if (!number(&s, end, 0x7fffffff, &pid) || pid == 0 || !space(&s, end) ||
        !number(&s, end, UINT64_MAX, &start) || start == 0 || !space(&s, end) ||
        !number(&s, end, UINT32_MAX - 1, &uid) || !space(&s, end) ||
        !number(&s, end, ARB_HELD_PROMISE | ARB_HELD_COUNT, &kinds) || kinds == 0 || !space(&s, end))
        return false;
    size_t jl = (size_t)(end - s);
    memset(h, 0, sizeof *h);
    if (!(jl == 1 && *s == '-')) {
        if (!job_ok(s, jl))
            return false;
        memcpy(h->job, s, jl);
    }
    h->pid = (pid_t)pid;
    h->start = start;
    h->uid = (uid_t)uid;
    h->kinds = (unsigned)kinds;
    return true;
}

int arb_holders_read(int dir, const char *shown, struct arb_holder **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = openat(dir, ARB_HOLDERS_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    char why[160] = "";
    struct stat st = { 0 };
    char *buf = NULL;
    if (fd < 0)
        snprintf(why, sizeof why, "%s", errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    else if (fstat(fd, &st) != 0)
        snprintf(why, sizeof why, "fstat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(why, sizeof why, "it is not a regular file");
    else if (st.st_uid != geteuid())
        snprintf(why, sizeof why, "it is uid %u's, not the daemon's (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
    else if (st.st_mode & 077)
        snprintf(why, sizeof why, "it is mode %04o: others may read or write it (the daemon writes 0600)",
                 (unsigned)(st.st_mode & 07777));
    else if (st.st_nlink != 1)
        snprintf(why, sizeof why, "it has %lu links", (unsigned long)st.st_nlink);
    else if (st.st_size > MAX_BYTES)
        snprintf(why, sizeof why, "it is larger than %u bytes", MAX_BYTES);
    else if (!(buf = malloc((size_t)st.st_size + 1)))
        snprintf(why, sizeof why, "out of memory");
    size_t len = 0;
    while (!why[0] && len < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(why, sizeof why, "reading it: %s", k < 0 ? strerror(errno) : "it got shorter");
            break;
        }
        len += (size_t)k;
    }
    if (fd >= 0)
        close(fd);
    struct arb_holder *h = NULL;
    size_t nh = 0, cap = 0;
    char boot[BOOT_ID_LEN + 1];
    boot_id(boot);
    unsigned lineno = 1;
    const char *p = buf, *end = buf ? buf + len : NULL;
    if (!why[0]) {
        const char *nl = memchr(p, '\n', len);
        size_t hl = strlen(HEADER);
        if (!nl || (size_t)(nl - p) != hl + BOOT_ID_LEN || memcmp(p, HEADER, hl))
            snprintf(why, sizeof why, "its first line is not a vgpu daemon's");
        else if (!boot[0] || memcmp(p + hl, boot, BOOT_ID_LEN)) {
            free(buf);   /* another boot's (or ours unknown): its processes are not these */
            return 0;
        } else
            p = nl + 1;
    }
    while (!why[0] && p < end) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            snprintf(why, sizeof why, "line %u is cut short", lineno);
            break;
        }
        struct arb_holder one;
        if (!parse_line(p, nl, &one)) {
            snprintf(why, sizeof why, "line %u does not parse", lineno);
            break;
        }
        p = nl + 1;
        size_t i = 0;
        while (i < nh && !(h[i].pid == one.pid && h[i].start == one.start))
            i++;
        if (i < nh) {   /* a holder named twice (one line a kind): one holder */
            h[i].kinds |= one.kinds;
            if (!h[i].job[0])
                memcpy(h[i].job, one.job, sizeof one.job);
            continue;
        }
        if (nh == ARB_HOLDERS_MAX) {
            snprintf(why, sizeof why, "it names more than %u holders", ARB_HOLDERS_MAX);
            break;
        }
        if (nh == cap) {
            size_t c = cap ? cap * 2 : 16;
            struct arb_holder *m = realloc(h, c * sizeof *m);
            if (!m) {
                snprintf(why, sizeof why, "out of memory");
                break;
            }
            h = m;
            cap = c;
        }
        h[nh++] = one;
    }
    free(buf);
    if (why[0]) {
        free(h);
        vgpu_warn("ignored %s: %s; placements do not wait for the jobs of the daemon before this one to "
                  "promise again (the daemon writes its own list next)", shown, why);
        return -1;
    }
    *out = h;
    *n = nh;
    return 0;
}

/* v in decimal at o: the end (20 digits at most). */
static char *put_u64(char *o, uint64_t v)
{
    char t[20];
    int k = 0;
    do
        t[k++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (k)
        *o++ = t[--k];
    return o;
}

int arb_holders_write(int dir, const struct arb_holder *h, size_t n)
{
    char boot[BOOT_ID_LEN + 1];
    boot_id(boot);
    if (!boot[0])
        memset(boot, '0', BOOT_ID_LEN), boot[BOOT_ID_LEN] = 0;   /* read back as another boot's */
    size_t cap = strlen(HEADER) + BOOT_ID_LEN + 2 + n * 80, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    len += (size_t)snprintf(buf, cap, "%s%s\n", HEADER, boot);
    /* Written before the reply of every request that changes it, on the scheduling thread: by
     * hand, not snprintf (4000 holders: 0.9 ms a write with it, most of it formatting). */
    for (size_t i = 0; i < n; i++) {
        char *o = buf + len;
        o = put_u64(o, (uint64_t)(h[i].pid > 0 ? h[i].pid : 0));
        *o++ = ' ';
        o = put_u64(o, h[i].start);
        *o++ = ' ';
        o = put_u64(o, h[i].uid);
        *o++ = ' ';
        o = put_u64(o, h[i].kinds & (ARB_HELD_PROMISE | ARB_HELD_COUNT));
        *o++ = ' ';
        size_t jl = strnlen(h[i].job, sizeof h[i].job - 1);
        if (jl && job_ok(h[i].job, jl)) {
            memcpy(o, h[i].job, jl);
            o += jl;
        } else {
            *o++ = '-';
        }
        *o++ = '\n';
        len = (size_t)(o - buf);
    }
    static const char tmp[] = ARB_HOLDERS_FILE ".new";
    (void)unlinkat(dir, tmp, 0);   /* a dead daemon's; nobody else writes this directory */
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = fd < 0 ? errno : 0;
    for (size_t off = 0; !err && off < len;) {
        ssize_t k = write(fd, buf + off, len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            err = k < 0 ? errno : EIO;
        else
            off += (size_t)k;
    }
    free(buf);
    if (fd >= 0 && close(fd) != 0 && !err)
        err = errno;
    if (!err && renameat(dir, tmp, dir, ARB_HOLDERS_FILE) != 0)
        err = errno;
    if (err)
        (void)unlinkat(dir, tmp, 0);
    return -err;
}
