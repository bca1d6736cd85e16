/* vgpu top's screen, painted: the GPU, graph, job and process panels, the help and the
 * banners, from the state (ui_state.h) and its newest model; nothing here changes the state or
 * knows the keys. Where things go is top_layout_compute(). */
#include "ui_draw.h"
#include "ui_state.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/units.h"

/* colour pairs */
enum { C_TITLE = 1, C_OK, C_WARN, C_BAD, C_BANNER, C_DIM };

void ui_draw_colors(struct ui *u)
{
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
}

static void set_color(struct ui *u, int pair, bool on)
{
    if (!u->color)
        return;
    if (on)
        attron(COLOR_PAIR(pair));
    else
        attroff(COLOR_PAIR(pair));
}

static void put_line(int y, int x, int w, const char *text, attr_t a)
{
    if (w <= 0)
        return;
    attron(a);
    mvaddnstr(y, x, text, w);
    attroff(a);
}

/* Splits text into lines of at most w bytes, breaking at spaces where it can. Returns the
 * number of lines (at most max); starts[i]/lens[i] give each. */
static int wrap_lines(const char *text, int w, int max, const char **starts, int *lens)
{
    int n = 0;
    const char *p = text;
    while (*p && n < max && w > 0) {
        while (*p == ' ')
            p++;
        int len = (int)strlen(p);
        if (len > w) {
            len = w;
            for (int k = w; k > w / 2; k--)
                if (p[k] == ' ') {
                    len = k;
                    break;
                }
        }
        starts[n] = p;
        lens[n] = len;
        n++;
        p += len;
    }
    return n;
}

/* A message that does not fit one line is wrapped upward from row `last`, over what is drawn
 * there, never cut at the screen's width (an error must be read whole). */
static void put_wrapped_up(int last, int w, const char *text, attr_t a)
{
    const char *starts[16];
    int lens[16];
    int n = wrap_lines(text, w, last + 1 < 16 ? last + 1 : 16, starts, lens);
    attron(a);
    for (int i = 0; i < n; i++) {
        int y = last - (n - 1) + i;
        move(y, 0);
        clrtoeol();
        addnstr(starts[i], lens[i]);
        for (int k = lens[i]; k < w; k++)
            addch(' ');
    }
    attroff(a);
}

/* ---- painting ---- */

static void draw_table_title(struct ui *u, const struct top_rect *r, const char *text, bool focused)
{
    set_color(u, C_TITLE, true);
    put_line(r->y, r->x, r->w, text, A_BOLD | (focused ? A_REVERSE : 0));
    set_color(u, C_TITLE, false);
}

/* Rows [first, first+n) of a panel with a title line; keeps the selection visible. */
static int scroll_for(struct ui *u, enum panel p, int visible, int total)
{
    if (visible <= 0)
        return 0;
    if (u->sel[p] < u->top[p])
        u->top[p] = u->sel[p];
    if (u->sel[p] >= u->top[p] + visible)
        u->top[p] = u->sel[p] - visible + 1;
    if (u->top[p] > total - visible)
        u->top[p] = total - visible;
    if (u->top[p] < 0)
        u->top[p] = 0;
    return u->top[p];
}

static int level_color(double frac)
{
    return frac >= 0.9 ? C_BAD : frac >= 0.7 ? C_WARN : C_OK;
}

static void draw_gpus(struct ui *u, const struct top_layout *L)
{
    const struct top_model *m = u->m;
    const struct top_rect *r = &L->gpus;
    if (!r->h)
        return;
    char line[1024];
    top_row_gpu_title(line, sizeof line, r->w);
    draw_table_title(u, r, line, u->focus == P_GPUS);
    int rows = r->h - 1;
    int first = scroll_for(u, P_GPUS, L->gpu_lines_each == 2 ? rows : rows, (int)m->ngpu);
    int y = r->y + 1;
    for (unsigned i = (unsigned)first; i < m->ngpu && y < r->y + r->h; i++) {
        const struct top_gpu *g = &m->gpus[i];
        bool hidden = !(u->gpu_mask >> i & 1);
        attr_t a = (u->focus == P_GPUS && (int)i == u->sel[P_GPUS]) ? A_REVERSE : 0;
        if (hidden)
            a |= A_DIM;
        if (g->is_mig)
            top_row_mig(line, sizeof line, r->w, m, g);
        else
            top_row_gpu(line, sizeof line, r->w, g);
        if (g->lost)
            set_color(u, C_BAD, true);
        put_line(y++, 0, r->w, line, a);
        if (g->lost)
            set_color(u, C_BAD, false);
        if (!g->is_mig && L->gpu_lines_each == 2 && y < r->y + r->h) {
            top_row_gpu_detail(line, sizeof line, r->w, g);
            set_color(u, C_DIM, true);
            put_line(y++, 0, r->w, line, hidden ? A_DIM : 0);
            set_color(u, C_DIM, false);
        }
    }
}

static void draw_graphs(struct ui *u, const struct top_layout *L)
{
    const struct top_rect *r = &L->graphs;
    if (!r->h)
        return;
    const struct top_model *m = u->m;
    int gw = (r->w - 20) / 2;
    if (gw < 8)
        gw = 8;
    if (gw > TOP_HIST)
        gw = TOP_HIST;
    char t[128];
    snprintf(t, sizeof t, "%-6s %-*s  %-*s", "GPU", gw + 6, "UTIL (history, newest right)", gw + 6, "MEMORY");
    draw_table_title(u, r, t, false);
    int y = r->y + 1;
    for (unsigned i = 0; i < m->ngpu && y < r->y + r->h; i++) {
        const struct top_gpu *g = &m->gpus[i];
        if (g->is_mig)
            continue;
        char su[TOP_HIST + 1], sm[TOP_HIST + 1], line[512];
        top_fmt_spark(su, sizeof su, g->hist_util, g->hist_len, (unsigned)gw);
        top_fmt_spark(sm, sizeof sm, g->hist_mem, g->hist_len, (unsigned)gw);
        char lu[8], lm[8];
        top_fmt_pct(lu, sizeof lu, g->valid & TOP_GV_UTIL, g->util_pct);
        unsigned mp = g->mem_total ? (unsigned)(g->mem_used * 100 / g->mem_total) : 0;
        top_fmt_pct(lm, sizeof lm, (g->valid & TOP_GV_MEM) && g->mem_total, mp);
        snprintf(line, sizeof line, "%-6u [%s]%4s  [%s]%4s", g->index, su, lu, sm, lm);
        set_color(u, C_OK, true);
        put_line(y++, 0, r->w, line, 0);
        set_color(u, C_OK, false);
    }
}

static void draw_jobs(struct ui *u, const struct top_layout *L)
{
    const struct top_rect *r = &L->jobs;
    if (!r->h)
        return;
    char line[1024], t[1024];
    top_row_job_title(line, sizeof line, r->w);
    snprintf(t, sizeof t, "%s", line);
    draw_table_title(u, r, t, u->focus == P_JOBS);
    int rows = r->h - 1;
    int first = scroll_for(u, P_JOBS, rows, (int)u->njorder);
    if (!u->njorder && rows > 0)
        put_line(r->y + 1, 0, r->w, u->m->jobs_msg[0] ? "(jobs cannot be read)" : "(no vgpu jobs)", A_DIM);
    for (int k = 0; k < rows && first + k < (int)u->njorder; k++) {
        int i = first + k;
        const struct top_job *j = &u->m->jobs[u->jorder[i]];
        top_row_job(line, sizeof line, r->w, j);
        attr_t a = (u->focus == P_JOBS && i == u->sel[P_JOBS]) ? A_REVERSE : 0;
        double frac = j->mem_limit ? (double)j->mem_used / (double)j->mem_limit : 0;
        set_color(u, level_color(frac), true);
        put_line(r->y + 1 + k, 0, r->w, line, a);
        set_color(u, level_color(frac), false);
    }
}

static void draw_procs(struct ui *u, const struct top_layout *L)
{
    const struct top_rect *r = &L->procs;
    if (!r->h)
        return;
    char line[1024];
    top_row_proc_title(line, sizeof line, r->w);
    draw_table_title(u, r, line, u->focus == P_PROCS);
    int rows = r->h - 1;
    int first = scroll_for(u, P_PROCS, rows, (int)u->nporder);
    if (!u->nporder && rows > 0)
        put_line(r->y + 1, 0, r->w, "(no GPU processes)", A_DIM);
    for (int k = 0; k < rows && first + k < (int)u->nporder; k++) {
        int i = first + k;
        top_row_proc(line, sizeof line, r->w, u->m, &u->m->procs[u->porder[i]]);
        attr_t a = (u->focus == P_PROCS && i == u->sel[P_PROCS]) ? A_REVERSE : 0;
        put_line(r->y + 1 + k, 0, r->w, line, a);
    }
}

static const char *const help_text[] = {
    "vgpu top - keys",
    "",
    "  q            quit                      h, ?       this help (any key closes it)",
    "  Up/Down j K  move the selection        PgUp/PgDn  move a page",
    "  Tab          next panel (GPUs, jobs, processes)",
    "  s            sort by the next column   S          reverse the sort direction",
    "  /            filter (pid, user, job, command; Enter keeps it, empty clears)",
    "  g            pick GPUs to show (e.g. 0,2 or all)",
    "  Enter        on a job: show only its processes (again: all)",
    "  k (x, F9)    signal the selected process, or the whole selected job",
    "               (the dialog names what will be signalled; 1-6 pick the signal)",
    "  + -          raise / lower the selected job's core limit by 5%",
    "  m            set the selected job's memory limit (e.g. 4G; 0 = none)",
    "               (limits: the job's owner or root only)",
    "  d            refresh interval          space      pause / resume",
    "  u            today's usage per user (jobs, GPU-hours, GiB-hours, energy)",
    "  mouse wheel  scrolls the panel under the pointer",
    "",
    "Columns: UTIL GPU utilisation; MEM USED/TOTAL as nvidia-smi; POWER draw/limit;",
    "MEM USED/LIMIT limiter-accounted memory of a job; GPU-TIME/CORE measured share of",
    "GPU time against the core limit (s = soft); THROTL time launches waited for the limiter;",
    "SM% NVML per-process utilisation (N/A on MIG); N/A = not available (never 0).",
};

void ui_draw(struct ui *u)
{
    erase();
    int rows = LINES, cols = COLS;
    const struct top_model *m = u->m;
    char banner[1024] = "";
    unsigned nmig = 0;
    if (m) {
        top_row_banner(banner, sizeof banner, cols, m);
        for (unsigned i = 0; i < m->ngpu; i++)
            nmig += m->gpus[i].is_mig;
    }
    struct top_layout_in in = {
        .rows = rows, .cols = cols, .ngpu_shown = m ? m->ngpu : 0, .nmig = nmig,
        .banner = banner[0] != 0, .graphs = true, .help = u->help || u->show_users,
    };
    struct top_layout L;
    top_layout_compute(&in, &L);
    if (L.too_small) {
        /* Wrapped over the rows there are, so that even 20x5 shows the whole message. */
        char small[200];
        snprintf(small, sizeof small, "vgpu top: the terminal is %dx%d, too small: it needs 40x10 at least. "
                 "Enlarge it, or use vgpu top --once. q quits.", cols, rows);
        const char *starts[16];
        int lens[16];
        int n = wrap_lines(small, cols, rows < 16 ? rows : 16, starts, lens);
        for (int i = 0; i < n; i++)
            mvaddnstr(i, 0, starts[i], lens[i]);
        refresh();
        return;
    }
    char hdr[512], ts[16] = "";
    if (m) {
        time_t t = (time_t)(m->time_ms / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(ts, sizeof ts, "%H:%M:%S", &tm);
        unsigned nphys = m->ngpu - nmig;
        snprintf(hdr, sizeof hdr, "vgpu top - %s  driver %s  %u GPU%s  %u job%s  %zu proc  every %.1fs%s%s%s", ts,
                 m->driver_version[0] ? m->driver_version : "N/A", nphys, nphys == 1 ? "" : "s", m->njob,
                 m->njob == 1 ? "" : "s", m->nproc, u->delay_ms / 1000.0, u->paused ? "  [PAUSED]" : "",
                 u->filter[0] ? "  filter: " : "", u->filter);
    } else {
        snprintf(hdr, sizeof hdr, "vgpu top - sampling...");
    }
    set_color(u, C_TITLE, true);
    put_line(L.header.y, 0, cols, hdr, A_BOLD);
    set_color(u, C_TITLE, false);
    if (L.banner.h) {
        set_color(u, C_BANNER, true);
        put_line(L.banner.y, 0, cols, banner, A_BOLD);
        set_color(u, C_BANNER, false);
    }
    if (u->help) {
        for (int i = 0; i < L.help.h && i < (int)(sizeof help_text / sizeof help_text[0]); i++)
            put_line(L.help.y + i, 0, cols, help_text[i], i == 0 ? A_BOLD : 0);
    } else if (u->show_users) {
        top_users_draw(&u->users, L.help.y, L.help.h, cols);   /* in the help's place */
    } else if (m) {
        draw_gpus(u, &L);
        draw_graphs(u, &L);
        draw_jobs(u, &L);
        draw_procs(u, &L);
    }
    /* footer: a prompt, a message, or the key hints */
    char foot[1280];
    switch (u->prompt) {
    case PR_FILTER: snprintf(foot, sizeof foot, "Filter: %s", u->input); break;
    case PR_GPUS: snprintf(foot, sizeof foot, "GPUs to show (e.g. 0,2 or all): %s", u->input); break;
    case PR_MEM: snprintf(foot, sizeof foot, "Memory limit (4G, 50%%, none): %s", u->input); break;
    case PR_DELAY: snprintf(foot, sizeof foot, "Refresh interval in seconds: %s", u->input); break;
    case PR_KILL:
        snprintf(foot, sizeof foot, "Send SIG%s to %s? y/n (1-6: TERM KILL INT HUP STOP CONT)", ui_sig_name(u->kill.sig),
                 u->kill.what);
        break;
    case PR_NONE:
        if (u->msg[0])
            snprintf(foot, sizeof foot, "%s", u->msg);
        else
            snprintf(foot, sizeof foot, "q quit  h help  Tab panel  s sort:%s%s  / filter  k kill  +/- core  m mem",
                     u->focus == P_JOBS ? top_job_key_name(u->jkey) : top_proc_key_name(u->pkey),
                     (u->focus == P_JOBS ? u->jdesc : u->pdesc) ? "v" : "^");
        break;
    }
    if ((int)strlen(foot) > cols && u->prompt == PR_NONE)
        put_wrapped_up(L.footer.y, cols, foot, A_REVERSE);
    else
        put_line(L.footer.y, 0, cols, foot, u->prompt == PR_KILL ? A_BOLD : A_REVERSE);
    if (u->prompt == PR_KILL) {
        set_color(u, C_BAD, true);
        mvchgat(L.footer.y, 0, cols, A_BOLD, u->color ? C_BAD : 0, NULL);
        set_color(u, C_BAD, false);
    }
    refresh();
}
