/* Changes to a folder's list of names, for vgpu top's jobs folder (see vgpu/top_watch.h).
 *
 * Only the list matters: a job region is created under a temporary name and renamed into place
 * (IN_MOVED_TO), and removed by name (IN_DELETE); its contents change through shared memory,
 * which no event reports and which vgpu top reads directly anyway. */
#include "vgpu/top_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

void top_watch_init(struct top_watch *w)
{
    memset(w, 0, sizeof *w);
    w->ifd = w->wd = -1;
}

void top_watch_fini(struct top_watch *w)
{
    if (w->ifd >= 0)
        close(w->ifd);
    top_watch_init(w);
}

/* The time stamp test, for a folder without a watch. A time stamp within the last second may
 * hide a second change in the same clock tick: that counts as changed. */
static bool mtime_changed(struct top_watch *w)
{
    struct stat st;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    if (stat(w->path, &st) < 0) {
        bool was = w->mtime.tv_sec || w->mtime.tv_nsec;
        memset(&w->mtime, 0, sizeof w->mtime);
        return was;                     /* gone: changed once, then nothing to list */
    }
    bool changed = st.st_mtim.tv_sec != w->mtime.tv_sec || st.st_mtim.tv_nsec != w->mtime.tv_nsec;
    w->mtime = st.st_mtim;
    return changed || wall.tv_sec - st.st_mtim.tv_sec <= 1;
}

/* Adds the watch; false when the folder is not there (or cannot be watched). */
static bool add_watch(struct top_watch *w)
{
    if (w->ifd < 0)
        return false;
    w->wd = inotify_add_watch(w->ifd, w->path, WATCH_MASK);
    return w->wd >= 0;
}

/* Reads every pending event; true when one of them changes the list (or events were lost). */
static bool drain(struct top_watch *w)
{
    bool changed = false;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ifd, buf, sizeof buf);
        if (n <= 0)
            break;                      /* EAGAIN: nothing more */
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
                changed = true;
                if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
                    if (w->wd >= 0)
                        inotify_rm_watch(w->ifd, w->wd);
                    w->wd = -1;         /* the folder went: watch whatever comes in its place */
                }
            } else if (ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) {
                changed = true;
            }
            p += sizeof *ev + ev->len;
        }
    }
    return changed;
}

bool top_watch_changed(struct top_watch *w, const char *dir)
{
    if (!w->started) {
        /* The first look: everything is new. The inotify instance waits for a second look, so
         * a single snapshot (vgpu top --once) never pays for one: closing it waits for the
         * kernel's grace period, 15 ms of a 50 ms --once. */
        w->started = true;
        snprintf(w->path, sizeof w->path, "%s", dir);
        (void)mtime_changed(w);
        return true;
    }
    if (w->ifd < 0 && !w->by_mtime) {
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        w->by_mtime = w->ifd < 0;       /* no inotify here (or no descriptor left) */
        /* Watch first, then what changed before the watch: the time stamp tells. */
        if (!w->by_mtime)
            add_watch(w);
        return mtime_changed(w);
    }
    if (w->by_mtime)
        return mtime_changed(w);
    bool changed = drain(w);
    if (w->wd < 0) {
        /* Not there yet (no job was ever started), or replaced: watch it once it exists; the
         * time stamp says when it appeared. */
        if (add_watch(w))
            changed = true;
        else
            changed |= mtime_changed(w);
    }
    return changed;
}
