/* vgpu top's users view (see users.h): today's jobs, GPU-hours, GiB-hours (held, and, where the
 * screen is wide enough, requested and borrowed past --mem REQUEST) and energy per user, added
 * up from the records of jobs that ended since local midnight. Jobs are counted from the
 * records themselves, not from vgpu acct --totals' per-GPU rows, where a job on two GPUs would
 * count twice. */
#include "top/users.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/acct.h"
#include "vgpu/userjobs.h"

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t local_midnight_ns(uint64_t now)
{
    time_t t = (time_t)(now / 1000000000ULL);
    struct tm tm;
    if (!localtime_r(&t, &tm))
        return 0;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    time_t m = mktime(&tm);
    return m > 0 ? (uint64_t)m * 1000000000ULL : 0;
}

static int add(const struct vgpu_acct_record *rec, void *arg)
{
    struct top_users *v = arg;
    size_t i = 0;
    while (i < v->n && v->t[i].uid != rec->uid)
        i++;
    if (i == v->n) {
        struct top_user_total *t = realloc(v->t, (v->n + 1) * sizeof *t);
        if (!t) {
            snprintf(v->msg, sizeof v->msg, "out of memory adding up the records");
            return 1;
        }
        v->t = t;
        memset(&t[i], 0, sizeof t[i]);
        t[i].uid = rec->uid;
        if (rec->user[0])
            snprintf(t[i].user, sizeof t[i].user, "%s", rec->user);
        else
            snprintf(t[i].user, sizeof t[i].user, "%u", (unsigned)rec->uid);
        v->n++;
    }
    struct top_user_total *t = &v->t[i];
    t->jobs++;
    for (unsigned d = 0; d < rec->gpu_count; d++) {
        const struct vgpu_acct_gpu *g = &rec->gpu[d];
        t->gpu_hours += (double)g->gpu_ns / 3.6e12;
        t->gib_hours += g->mem_byte_seconds / (1073741824.0 * 3600.0);
        t->req_gib_hours += g->mem_requested_byte_seconds / (1073741824.0 * 3600.0);
        t->borrow_gib_hours += g->mem_borrowed_byte_seconds / (1073741824.0 * 3600.0);
        if (g->energy_known) {
            t->energy_j += g->energy_j;
            t->energy_known = true;
        }
    }
    return 0;
}

/* The view's width with the lent memory's columns: 66 without them, two of 1 + 12 more. */
#define USERS_WIDTH_LENT 92

static int by_gpu_hours(const void *a, const void *b)
{
    const struct top_user_total *x = a, *y = b;
    if (x->gpu_hours != y->gpu_hours)
        return x->gpu_hours < y->gpu_hours ? 1 : -1;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

void top_users_free(struct top_users *v)
{
    free(v->t);
    v->t = NULL;
    v->n = 0;
}

/* The caller's jobs whose records are still being written, counted before the records are read
 * so that one landing in between is read on the next tick rather than missed. */
static int count_finishing(void)
{
    char dir[4096];
    struct vgpu_err e = { 0 };
    int n;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0 || (n = vgpu_jobs_await_records(dir, 0, &e)) < 0)
        return 0;
    return n;
}

void top_users_read(struct top_users *v)
{
    top_users_free(v);
    v->msg[0] = 0;
    v->finishing = count_finishing();
    v->read_ns = realtime_ns();
    v->since_ns = local_midnight_ns(v->read_ns);
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    f.since_ns = v->since_ns;
    struct vgpu_err e = { 0 };
    if (vgpu_acct_read_query(&f, add, v, &e) < 0)
        snprintf(v->msg, sizeof v->msg, "cannot read the accounting records: %s", e.msg);
    struct vgpu_acct_origin from;
    vgpu_acct_origin(&from);
    v->partial = from.source != VGPU_ACCT_FROM_ARBITER && from.partial;
    if (v->n)
        qsort(v->t, v->n, sizeof *v->t, by_gpu_hours);
}

void top_users_tick(struct top_users *v)
{
    if (v->finishing)
        top_users_read(v);
}

void top_users_draw(const struct top_users *v, int y, int h, int cols)
{
    if (h <= 0 || cols <= 0)
        return;
    char line[512], at[16] = "";
    time_t t = (time_t)(v->read_ns / 1000000000ULL);
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(at, sizeof at, "%H:%M:%S", &tm);
    snprintf(line, sizeof line, "Today's usage per user (jobs that ended since midnight), as of %s; u closes "
             "(open it again to read anew)", at);
    attron(A_BOLD);
    mvaddnstr(y, 0, line, cols);
    attroff(A_BOLD);
    if (v->finishing && h >= 2) {
        snprintf(line, sizeof line, "%d job%s of yours that just ended %s still writing %s record: read again as "
                 "%s in", v->finishing, v->finishing == 1 ? "" : "s", v->finishing == 1 ? "is" : "are",
                 v->finishing == 1 ? "its" : "their", v->finishing == 1 ? "it comes" : "they come");
        mvaddnstr(y + 1, 0, line, cols);
    } else if (v->partial && h >= 2)
        mvaddnstr(y + 1, 0, "PARTIAL: the arbiter (vgpu daemon) does not answer; only your own store's records "
                  "(jobs that ended while it was down) are added up", cols);
    if (h < 3)
        return;
    /* The lent memory's columns come after the others, and only whole: left out on a screen
     * narrower than all of them (the first five are the 80-column view's). */
    bool lent = cols >= USERS_WIDTH_LENT;
    int n = snprintf(line, sizeof line, "%-16s %8s %12s %12s %14s", "USER", "JOBS", "GPU-HOURS", "GIB-HOURS",
                     "ENERGY-KJ");
    if (lent)
        snprintf(line + n, sizeof line - (size_t)n, " %12s %12s", "REQ-GIB-H", "BORROW-GIB-H");
    attron(A_REVERSE);
    mvaddnstr(y + 2, 0, line, cols);
    for (int k = (int)strlen(line); k < cols; k++)
        addch(' ');
    attroff(A_REVERSE);
    int row = y + 3;
    if (v->msg[0]) {
        mvaddnstr(row, 0, v->msg, cols);
        return;
    }
    if (!v->n && row < y + h)
        mvaddnstr(row, 0, v->partial ? "no job of your own store ended today (partial)" : "no job has ended today",
                  cols);
    for (size_t i = 0; i < v->n && row < y + h; i++, row++) {
        const struct top_user_total *u = &v->t[i];
        char energy[32] = "-";
        if (u->energy_known)
            snprintf(energy, sizeof energy, "%.3f", u->energy_j / 1000.0);
        n = snprintf(line, sizeof line, "%-16.16s %8llu %12.4f %12.4f %14s", u->user, (unsigned long long)u->jobs,
                     u->gpu_hours, u->gib_hours, energy);
        if (lent)
            snprintf(line + n, sizeof line - (size_t)n, " %12.4f %12.4f", u->req_gib_hours, u->borrow_gib_hours);
        mvaddnstr(row, 0, line, cols);
    }
}
