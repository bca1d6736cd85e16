/* vgpu top's screen: ncurses, drawn from the newest model the sampler published, never waiting
 * on the driver. Where things go is top_layout_compute() (pure, unit-tested); what each row
 * says is top_row_*() (shared with --once). This file is input handling and painting. */
#include "top.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/units.h"

enum panel { P_GPUS, P_JOBS, P_PROCS, P_COUNT };
enum prompt { PR_NONE, PR_FILTER, PR_GPUS, PR_MEM, PR_DELAY, PR_KILL };

struct ui {
    struct top_sampler *s;
    struct top_model *m;
    bool paused, help, color, quit;
    enum panel focus;
    int sel[P_COUNT], top[P_COUNT];
    enum top_proc_key pkey;
    bool pdesc;
    enum top_job_key jkey;
    bool jdesc;
    char filter[64];
    uint64_t gpu_mask;           /* over model GPU positions */
    char only_job[VGPU_UUID_LEN];   /* job id whose processes are shown, "" = all */
    enum prompt prompt;
    char input[64];
    size_t input_len;
    char msg[1024];
    /* the kill dialog: what will be signalled, fixed when the dialog opens */
    struct {
        bool job;
        char what[200];
        pid_t pid[64];
        unsigned long long start[64];
        size_t n;
        int sig;
    } kill;
    char sel_job[VGPU_UUID_LEN];    /* the selected job's id (kept across samples) */
    pid_t sel_pid;
    unsigned delay_ms;
    /* the rows of the current model, sorted and filtered */
    size_t *porder, nporder;
    size_t jorder[TOP_MAX_JOBS], njorder;
};

static volatile sig_atomic_t got_quit;
static void on_quit(int sig) { (void)sig; got_quit = 1; }

enum { C_TITLE = 1, C_OK, C_WARN, C_BAD, C_BANNER, C_DIM };

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

static int job_index(const struct top_model *m, const char *id)
{
    for (unsigned j = 0; m && j < m->njob; j++)
        if (strcmp(m->jobs[j].id, id) == 0)
            return (int)j;
    return -1;
}

/* Re-sorts the rows and keeps the selection on the same job / process. */
static void refresh_rows(struct ui *u)
{
    const struct top_model *m = u->m;
    if (!m)
        return;
    u->njorder = top_sort_jobs(m, u->jorder, u->jkey, u->jdesc, u->filter);
    size_t *po = realloc(u->porder, (m->nproc ? m->nproc : 1) * sizeof *po);
    if (!po)
        return;
    u->porder = po;
    int oj = u->only_job[0] ? job_index(m, u->only_job) : -1;
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

static void remember_sel(struct ui *u)
{
    if (!u->m)
        return;
    if (u->njorder && u->sel[P_JOBS] < (int)u->njorder)
        snprintf(u->sel_job, sizeof u->sel_job, "%s", u->m->jobs[u->jorder[u->sel[P_JOBS]]].id);
    if (u->nporder && u->sel[P_PROCS] < (int)u->nporder)
        u->sel_pid = u->m->procs[u->porder[u->sel[P_PROCS]]].pid;
}

static const struct top_job *sel_job(struct ui *u)
{
    if (!u->m || !u->njorder)
        return NULL;
    return &u->m->jobs[u->jorder[u->sel[P_JOBS]]];
}

static const struct top_proc *sel_proc(struct ui *u)
{
    if (!u->m || !u->nporder)
        return NULL;
    return &u->m->procs[u->porder[u->sel[P_PROCS]]];
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
    "  mouse wheel  scrolls the panel under the pointer",
    "",
    "Columns: UTIL GPU utilisation; MEM USED/TOTAL as nvidia-smi; POWER draw/limit;",
    "MEM USED/LIMIT limiter-accounted memory of a job; GPU-TIME/CORE measured share of",
    "GPU time against the core limit (s = soft); THROTL time launches waited for the limiter;",
    "SM% NVML per-process utilisation (N/A on MIG); N/A = not available (never 0).",
};

static const struct { int sig; const char *name; } sigs[] = {
    { SIGTERM, "TERM" }, { SIGKILL, "KILL" }, { SIGINT, "INT" }, { SIGHUP, "HUP" }, { SIGSTOP, "STOP" }, { SIGCONT, "CONT" },
};

static const char *sig_name(int sig)
{
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigs[i].sig == sig)
            return sigs[i].name;
    return "?";
}

static void draw(struct ui *u)
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
        .banner = banner[0] != 0, .graphs = true, .help = u->help,
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
        snprintf(foot, sizeof foot, "Send SIG%s to %s? y/n (1-6: TERM KILL INT HUP STOP CONT)", sig_name(u->kill.sig),
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

/* ---- actions ---- */

static void open_kill(struct ui *u)
{
    u->kill.n = 0;
    u->kill.sig = SIGTERM;
    if (u->focus == P_JOBS) {
        const struct top_job *j = sel_job(u);
        if (!j) {
            snprintf(u->msg, sizeof u->msg, "no job selected");
            return;
        }
        u->kill.job = true;
        u->kill.n = top_job_pids(j, u->kill.pid, u->kill.start, 64);
        if (!u->kill.n) {
            snprintf(u->msg, sizeof u->msg, "job %s has no live process to signal", j->name);
            return;
        }
        int n = snprintf(u->kill.what, sizeof u->kill.what, "job %s (%zu process%s:", j->name, u->kill.n,
                         u->kill.n == 1 ? "" : "es");
        for (size_t i = 0; i < u->kill.n && n < (int)sizeof u->kill.what - 12; i++)
            n += snprintf(u->kill.what + n, sizeof u->kill.what - (size_t)n, " %d", (int)u->kill.pid[i]);
        snprintf(u->kill.what + n, sizeof u->kill.what - (size_t)n, ")");
    } else {
        const struct top_proc *p = sel_proc(u);
        if (!p) {
            snprintf(u->msg, sizeof u->msg, "no process selected (Tab to the process panel)");
            return;
        }
        u->kill.job = false;
        u->kill.pid[0] = p->pid;
        u->kill.start[0] = p->start;
        u->kill.n = 1;
        snprintf(u->kill.what, sizeof u->kill.what, "pid %d (%s: %.60s)", (int)p->pid, p->user, p->cmd);
    }
    u->prompt = PR_KILL;
}

static void do_kill(struct ui *u)
{
    size_t sent = 0;
    int err = 0;
    for (size_t i = 0; i < u->kill.n; i++) {
        int rc = top_signal_checked(u->kill.pid[i], u->kill.start[i], u->kill.sig);
        if (rc == 0)
            sent++;
        else
            err = -rc;
    }
    if (err && !sent)
        snprintf(u->msg, sizeof u->msg, "SIG%s not sent to %s: %s", sig_name(u->kill.sig), u->kill.what,
                 err == ESRCH ? "the process is gone (or its pid was reused)" : strerror(err));
    else
        snprintf(u->msg, sizeof u->msg, "sent SIG%s to %zu process%s%s", sig_name(u->kill.sig), sent,
                 sent == 1 ? "" : "es", err ? " (some were gone)" : "");
    top_sampler_wake(u->s);
}

static void change_core(struct ui *u, int delta)
{
    const struct top_job *j = sel_job(u);
    if (u->focus != P_JOBS || !j) {
        snprintf(u->msg, sizeof u->msg, "select a job first (Tab to the job panel)");
        return;
    }
    /* Relative to the region's limit, not to the last sample: a second key pressed before
     * the next sample would otherwise undo the first (30 -5 +5 gave 35). */
    struct vgpu_err e;
    unsigned pct;
    int r = top_job_change_core(j, delta, &pct, &e);
    if (r < 0)
        snprintf(u->msg, sizeof u->msg, "%s", e.msg);
    else if (r == 0)
        snprintf(u->msg, sizeof u->msg, "job %s has no core limit", j->name);
    else
        snprintf(u->msg, sizeof u->msg, "job %s: core limit %u%%", j->name, pct);
    top_sampler_wake(u->s);
}

static void apply_gpus(struct ui *u, const char *text)
{
    if (!*text || strcmp(text, "all") == 0) {
        u->gpu_mask = ~0ULL;
        return;
    }
    uint64_t mask = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        char *end;
        unsigned long idx = strtoul(t, &end, 10);
        if (*end || end == t) {
            snprintf(u->msg, sizeof u->msg, "'%s' is not a GPU index", t);
            return;
        }
        for (unsigned i = 0; u->m && i < u->m->ngpu; i++)
            if (u->m->gpus[i].index == idx)
                mask |= 1ULL << i;
    }
    if (!mask) {
        snprintf(u->msg, sizeof u->msg, "no such GPU: %s", text);
        return;
    }
    u->gpu_mask = mask;
}

static void finish_prompt(struct ui *u)
{
    const char *in = u->input;
    struct vgpu_err e;
    switch (u->prompt) {
    case PR_FILTER: snprintf(u->filter, sizeof u->filter, "%s", in); break;
    case PR_GPUS: apply_gpus(u, in); break;
    case PR_MEM: {
        const struct top_job *j = sel_job(u);
        if (!j)
            snprintf(u->msg, sizeof u->msg, "no job selected");
        else if (top_job_set_mem(j, in, &e) < 0)
            snprintf(u->msg, sizeof u->msg, "%s", e.msg);
        else
            snprintf(u->msg, sizeof u->msg, "job %s: memory limit %s", j->name, in);
        top_sampler_wake(u->s);
        break;
    }
    case PR_DELAY: {
        char *end;
        double d = strtod(in, &end);
        if (end == in || *end || !(d >= 0.1 && d <= 3600))
            snprintf(u->msg, sizeof u->msg, "the refresh interval is in seconds, 0.1 to 3600");
        else {
            u->delay_ms = (unsigned)(d * 1000 + 0.5);
            top_sampler_set_delay(u->s, u->delay_ms);
        }
        break;
    }
    case PR_KILL: case PR_NONE: break;
    }
    u->prompt = PR_NONE;
}

static void prompt_key(struct ui *u, int ch)
{
    if (u->prompt == PR_KILL) {
        if (ch == 'y' || ch == 'Y') {
            do_kill(u);
            u->prompt = PR_NONE;
        } else if (ch >= '1' && ch <= '6') {
            u->kill.sig = sigs[ch - '1'].sig;
        } else if (ch != KEY_RESIZE && ch != ERR) {
            snprintf(u->msg, sizeof u->msg, "nothing signalled");
            u->prompt = PR_NONE;
        }
        return;
    }
    if (ch == 27) {
        u->prompt = PR_NONE;
    } else if (ch == '\n' || ch == KEY_ENTER || ch == '\r') {
        finish_prompt(u);
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (u->input_len)
            u->input[--u->input_len] = 0;
    } else if (ch >= 32 && ch < 127 && u->input_len < sizeof u->input - 1) {
        u->input[u->input_len++] = (char)ch;
        u->input[u->input_len] = 0;
    }
    if (u->prompt == PR_FILTER)   /* filter as you type */
        snprintf(u->filter, sizeof u->filter, "%s", u->input);
}

static void start_prompt(struct ui *u, enum prompt p, const char *initial)
{
    u->prompt = p;
    snprintf(u->input, sizeof u->input, "%s", initial ? initial : "");
    u->input_len = strlen(u->input);
}

static void move_sel(struct ui *u, int delta)
{
    int counts[P_COUNT] = { u->m ? (int)u->m->ngpu : 0, (int)u->njorder, (int)u->nporder };
    int p = u->focus;
    u->sel[p] += delta;
    if (u->sel[p] >= counts[p])
        u->sel[p] = counts[p] - 1;
    if (u->sel[p] < 0)
        u->sel[p] = 0;
    remember_sel(u);
}

static void key(struct ui *u, int ch)
{
    if (u->prompt != PR_NONE) {
        prompt_key(u, ch);
        return;
    }
    if (ch != ERR && ch != KEY_RESIZE && ch != KEY_MOUSE)
        u->msg[0] = 0;
    if (u->help && ch != ERR && ch != KEY_RESIZE) {
        u->help = false;
        if (ch != 'q')
            return;
    }
    switch (ch) {
    case 'q': case 'Q': u->quit = true; break;
    case 'h': case '?': u->help = true; break;
    case KEY_UP: case 'K': move_sel(u, -1); break;
    case KEY_DOWN: case 'j': move_sel(u, 1); break;
    case KEY_PPAGE: move_sel(u, -(LINES / 3)); break;
    case KEY_NPAGE: move_sel(u, LINES / 3); break;
    case KEY_HOME: move_sel(u, -100000); break;
    case KEY_END: move_sel(u, 100000); break;
    case '\t': u->focus = (enum panel)((u->focus + 1) % P_COUNT); break;
    case KEY_BTAB: u->focus = (enum panel)((u->focus + P_COUNT - 1) % P_COUNT); break;
    case 's':
        if (u->focus == P_JOBS)
            u->jkey = (enum top_job_key)((u->jkey + 1) % TOP_JK_COUNT);
        else
            u->pkey = (enum top_proc_key)((u->pkey + 1) % TOP_PK_COUNT);
        snprintf(u->msg, sizeof u->msg, "sort by %s (S reverses)",
                 u->focus == P_JOBS ? top_job_key_name(u->jkey) : top_proc_key_name(u->pkey));
        break;
    case 'S':
        if (u->focus == P_JOBS)
            u->jdesc = !u->jdesc;
        else
            u->pdesc = !u->pdesc;
        break;
    case '/': start_prompt(u, PR_FILTER, u->filter); break;
    case 'g': start_prompt(u, PR_GPUS, ""); break;
    case 'd': start_prompt(u, PR_DELAY, ""); break;
    case 'm':
        if (u->focus != P_JOBS || !sel_job(u))
            snprintf(u->msg, sizeof u->msg, "select a job first (Tab to the job panel)");
        else
            start_prompt(u, PR_MEM, "");
        break;
    case 'k': case 'x': case KEY_F(9): open_kill(u); break;
    case '+': case '=': change_core(u, 5); break;
    case '-': case '_': change_core(u, -5); break;
    case ' ': u->paused = !u->paused; break;
    case '\n': case '\r': case KEY_ENTER:
        if (u->focus == P_JOBS && sel_job(u)) {
            const struct top_job *j = sel_job(u);
            if (strcmp(u->only_job, j->id) == 0)
                u->only_job[0] = 0;
            else
                snprintf(u->only_job, sizeof u->only_job, "%s", j->id);
            u->focus = P_PROCS;
            u->sel[P_PROCS] = 0;
        } else if (u->only_job[0]) {
            u->only_job[0] = 0;
        }
        break;
    case 27: u->only_job[0] = 0; u->filter[0] = 0; break;
    case KEY_MOUSE: {
        MEVENT ev;
        if (getmouse(&ev) == OK) {
            if (ev.bstate & BUTTON4_PRESSED)
                move_sel(u, -3);
#ifdef BUTTON5_PRESSED
            else if (ev.bstate & BUTTON5_PRESSED)
                move_sel(u, 3);
#endif
        }
        break;
    }
    default: break;
    }
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
    draw(u);   /* at once, before the first sample */
    long refreshes = 0;
    timeout(50);
    while (!u->quit && !got_quit) {
        struct top_model *nm = top_sampler_take(s);
        bool dirty = false;
        if (nm) {
            if (u->paused && u->m) {
                top_model_free(nm);
            } else {
                top_model_free(u->m);
                u->m = nm;
                refresh_rows(u);
                dirty = true;
                if (o->count && ++refreshes >= o->count) {
                    draw(u);
                    break;
                }
            }
        }
        int ch = getch();
        if (ch != ERR) {
            key(u, ch);
            refresh_rows(u);
            dirty = true;
        }
        if (dirty)
            draw(u);
    }
    top_sampler_stop(s);
    endwin();
    top_model_free(u->m);
    free(u->porder);
    free(u);
    return rc;
}
