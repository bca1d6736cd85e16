/* vgpu top's screen: ncurses, drawn from the newest model the sampler published, never waiting
 * on the driver. Where things go is top_layout_compute() (pure, unit-tested); what each row
 * says is top_row_*() (shared with --once). This file is the loop on top of the screen's layers
 * (ui_state.h): samples in, a key to ui_keys, then ui_draw paints. */
#include "ui_draw.h"
#include "ui_keys.h"
#include "ui_state.h"

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
    ui_draw_colors(u);
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
                if (u->show_users)
                    top_users_tick(&u->users);   /* a record that was on its way when it opened */
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
