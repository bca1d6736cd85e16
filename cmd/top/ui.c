/* vgpu top's screen: ncurses, drawn from the newest model the sampler published, never waiting
 * on the driver. Where things go is top_layout_compute() (pure, unit-tested); what each row
 * says is top_row_*() (shared with --once). This file is the loop (samples in, keys in, paint),
 * and the rows and selection; painting is ui_draw.c, keys and actions ui_keys.c (see ui.h). */
#include "ui.h"

#include <curses.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/units.h"

static volatile sig_atomic_t got_quit;
static void on_quit(int sig) { (void)sig; got_quit = 1; }

int ui_job_index(const struct top_model *m, const char *id)
{
    for (unsigned j = 0; m && j < m->njob; j++)
        if (strcmp(m->jobs[j].id, id) == 0)
            return (int)j;
    return -1;
}

/* Re-sorts the rows and keeps the selection on the same job / process. */
void ui_refresh_rows(struct ui *u)
{
    const struct top_model *m = u->m;
    if (!m)
        return;
    u->njorder = top_sort_jobs(m, u->jorder, u->jkey, u->jdesc, u->filter);
    size_t *po = realloc(u->porder, (m->nproc ? m->nproc : 1) * sizeof *po);
    if (!po)
        return;
    u->porder = po;
    int oj = u->only_job[0] ? ui_job_index(m, u->only_job) : -1;
    if (u->only_job[0] && oj < 0)
        u->only_job[0] = 0;   /* the job ended */
    u->nporder = top_sort_procs(m, u->porder, u->pkey, u->pdesc, u->filter, u->gpu_mask, oj);
    for (size_t i = 0; i < u->njorder; i++)
        if (strcmp(m->jobs[u->jorder[i]].id, u->sel_job) == 0)
            u->sel[P_JOBS] = (int)i;
    for (size_t i = 0; i < u->nporder; i++)
        if (m->procs[u->porder[i]].pid == u->sel_pid)
            u->sel[P_PROCS] = (int)i;
    int counts[P_COUNT] = { (int)m->ngpu, (int)u->njorder, (int)u->nporder };
    for (int p = 0; p < P_COUNT; p++) {
        if (u->sel[p] >= counts[p])
            u->sel[p] = counts[p] - 1;
        if (u->sel[p] < 0)
            u->sel[p] = 0;
    }
}

void ui_remember_sel(struct ui *u)
{
    if (!u->m)
        return;
    if (u->njorder && u->sel[P_JOBS] < (int)u->njorder)
        snprintf(u->sel_job, sizeof u->sel_job, "%s", u->m->jobs[u->jorder[u->sel[P_JOBS]]].id);
    if (u->nporder && u->sel[P_PROCS] < (int)u->nporder)
        u->sel_pid = u->m->procs[u->porder[u->sel[P_PROCS]]].pid;
}

const struct top_job *ui_sel_job(struct ui *u)
{
    if (!u->m || !u->njorder)
        return NULL;
    return &u->m->jobs[u->jorder[u->sel[P_JOBS]]];
}

const struct top_proc *ui_sel_proc(struct ui *u)
{
    if (!u->m || !u->nporder)
        return NULL;
    return &u->m->procs[u->porder[u->sel[P_PROCS]]];
}

int top_ui_run(struct top_sampler *s, const struct top_ui_opts *o)
{
    struct ui *u = calloc(1, sizeof *u);
    if (!u)
        return 1;
    u->s = s;
    u->color = o->color;
    u->delay_ms = o->delay_ms;
    u->gpu_mask = ~0ULL;
    u->pkey = TOP_PK_MEM;
    u->pdesc = true;
    u->jkey = TOP_JK_NAME;
    u->focus = P_PROCS;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!getenv("ESCDELAY"))
        set_escdelay(25);
    if (!initscr()) {
        free(u);
        return 1;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    mousemask(BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
              | BUTTON5_PRESSED
#endif
              , NULL);
    if (u->color && has_colors()) {
        start_color();
        use_default_colors();   /* the terminal's own background (light or dark) */
        init_pair(C_TITLE, COLOR_CYAN, -1);
        init_pair(C_OK, COLOR_GREEN, -1);
        init_pair(C_WARN, COLOR_YELLOW, -1);
        init_pair(C_BAD, COLOR_RED, -1);
        init_pair(C_BANNER, COLOR_RED, -1);
        init_pair(C_DIM, COLOR_BLUE, -1);
    } else {
        u->color = false;
    }
    int rc = 0;
    if (top_sampler_start(s, o->delay_ms) < 0) {
        endwin();
        free(u);
        return 1;
    }
    ui_draw(u);   /* at once, before the first sample */
    long refreshes = 0;
    /* Sleeps in poll(2) until a key or a new sample (the sampler's pipe); getch() then only
     * collects what has come. It looked every 50 ms, 20 wake-ups a second with nothing to do.
     * Signals (SIGWINCH for KEY_RESIZE, the quit signals) interrupt the poll. */
    int wake = top_sampler_notify_fd(s);
    timeout(wake >= 0 ? 0 : 50);
    bool first = true;
    while (!u->quit && !got_quit) {
        if (!first && wake >= 0) {
            struct pollfd pf[2] = { { .fd = STDIN_FILENO, .events = POLLIN }, { .fd = wake, .events = POLLIN } };
            if (poll(pf, 2, 1000) > 0 && (pf[1].revents & POLLIN)) {
                char drain[64];
                while (read(wake, drain, sizeof drain) > 0) {
                }
            }
        }
        first = false;
        struct top_model *nm = top_sampler_take(s);
        bool dirty = false;
        if (nm) {
            if (u->paused && u->m) {
                top_model_free(nm);
            } else {
                top_model_free(u->m);
                u->m = nm;
                ui_refresh_rows(u);
                dirty = true;
                if (o->count && ++refreshes >= o->count) {
                    ui_draw(u);
                    break;
                }
            }
        }
        for (int ch; !u->quit && (ch = getch()) != ERR;) {
            if (dirty)
                ui_draw(u);             /* each key acts on the screen as drawn */
            ui_key(u, ch);
            ui_refresh_rows(u);
            dirty = true;
            if (wake < 0)
                break;                  /* one key per look, as getch() waited 50 ms */
        }
        if (dirty)
            ui_draw(u);
    }
    top_sampler_stop(s);
    endwin();
    top_model_free(u->m);
    free(u->porder);
    top_users_free(&u->users);
    free(u);
    return rc;
}
