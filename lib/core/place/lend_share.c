/* Lending across users (vgpu/lend.h, issue 37 item 4): vgpu run's walk tells the arbiter what its
 * job holds on each GPU and keeps the answer, what the other users' jobs there add to the order of
 * giving way, in "<id>.lend" beside the job's region, for the job's processes (lib/core/region/
 * lend.c reads it with the regions of the user's own jobs). The daemon's side is cmd/daemon/lend.c. */
#include "vgpu/lend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "vgpu/log.h"

void vgpu_lend_share_end(const struct vgpu_region *r)
{
    char path[sizeof r->path];
    if (r && vgpu_region_sibling_path(r->path, ".lend", path, sizeof path))
        unlink(path);
}

/* The answer written whole (a new file renamed over the old), readable as the region is: a
 * process of a --user job runs as the job's user and reads root's files of it. */
static void write_file(const struct vgpu_region *r, const struct vgpu_lend_file *f)
{
    char path[sizeof r->path], tmp[sizeof r->path];
    if (!vgpu_region_sibling_path(r->path, ".lend", path, sizeof path) ||
        !vgpu_region_sibling_path(r->path, ".lend.new", tmp, sizeof tmp))
        return;
    struct stat st;
    mode_t mode = r->fd >= 0 && fstat(r->fd, &st) == 0 ? st.st_mode & 0644 : 0600;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    bool ok = fchmod(fd, mode) == 0 && write(fd, f, sizeof *f) == (ssize_t)sizeof *f;
    close(fd);
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

void vgpu_lend_share(struct vgpu_region *r)
{
    if (!r || !r->info || !r->hdr || !r->use)
        return;
    if (!vgpu_arb_gen()) {
        vgpu_lend_share_end(r);          /* no arbiter now: the user's own jobs only */
        return;
    }
    static struct vgpu_lend_report rep[VGPU_REGION_MAX_DEVICES];
    static struct vgpu_lend_remote back[VGPU_REGION_MAX_DEVICES];
    unsigned ndev = vgpu_region_device_count(r), k = 0, of[VGPU_REGION_MAX_DEVICES];
    for (unsigned d = 0; d < ndev && d < VGPU_REGION_MAX_DEVICES; d++) {
        if (!vgpu_region_mem_limit(r, d) || !memchr(r->info->dev[d].uuid, 0, sizeof r->info->dev[d].uuid) ||
            !r->info->dev[d].uuid[0])
            continue;
        struct vgpu_lend_report *x = &rep[k];
        memset(x, 0, sizeof *x);
        snprintf(x->uuid, sizeof x->uuid, "%s", r->info->dev[d].uuid);
        uint64_t used = vgpu_region_mem_used(r, d), out = atomic_load(&r->use->dev[d].outside_bytes);
        x->request = vgpu_region_mem_request(r, d);
        x->held = used + out < used ? UINT64_MAX : used + out;
        x->borrowed = vgpu_region_mem_borrowed(r, d);
        x->moving = vgpu_region_mem_moving(r, d);
        x->demoted = x->moving ? 0 : vgpu_region_mem_demoted(r, d);
        x->prio = atomic_load(&r->hdr->dev[d].priority);
        of[k++] = d;
    }
    if (!k)
        return;
    uint64_t a[4] = { strtoull(r->info->id, NULL, 16) };
    size_t got = 0;
    struct vgpu_arb_rep ans;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_LEND_SHARE, a, rep, k * sizeof *rep, back, sizeof back, &got, &ans);
    if (rc < 0 || got != k * sizeof *back) {
        vgpu_debug("lending across users: the arbiter gave no answer (%s): the job's processes see their own "
                   "user's jobs only", rc < 0 ? (rc == -EPIPE ? "it went away" : ans.msg[0] ? ans.msg : strerror((int)-rc))
                                              : "an answer of the wrong size");
        vgpu_lend_share_end(r);          /* an older daemon (ENOSYS), or gone: nothing stale stays */
        return;
    }
    struct vgpu_lend_file f;
    memset(&f, 0, sizeof f);
    f.magic = VGPU_LEND_FILE_MAGIC;
    f.version = VGPU_LEND_FILE_VERSION;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    f.at_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    f.count = ndev < VGPU_REGION_MAX_DEVICES ? ndev : VGPU_REGION_MAX_DEVICES;
    for (unsigned i = 0; i < k; i++)
        f.dev[of[i]] = back[i];
    write_file(r, &f);
}
