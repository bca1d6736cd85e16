/* Whether a folder's list of names changed since the last look (lib/core/top/top_watch.c): vgpu top
 * lists the jobs folder again only then. inotify where the kernel offers it (no system call at
 * all while nothing changes, beyond one non-blocking read); else the folder's time stamp. */
#ifndef VGPU_TOP_WATCH_H
#define VGPU_TOP_WATCH_H

#include <stdbool.h>
#include <time.h>

struct top_watch {
    int ifd, wd;                 /* inotify descriptor and watch (-1: none) */
    bool started;
    bool by_mtime;               /* inotify unavailable: compare time stamps */
    struct timespec mtime;
    char path[4200];
};

/* Starts with nothing known (the first top_watch_changed says true). */
void top_watch_init(struct top_watch *w);
/* True when the names in `dir` may have changed since the previous call (a name created,
 * removed or renamed into or out of it, the folder itself replaced or created, lost events),
 * and on the first call. A folder that does not exist yet is watched for by its time stamp
 * until it appears. `dir` must stay the same from call to call. */
bool top_watch_changed(struct top_watch *w, const char *dir);
void top_watch_fini(struct top_watch *w);

#endif
