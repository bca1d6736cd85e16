/* vgpu top's keys and what they do: sorting, filters, prompts, the kill dialog and live limit
 * changes. A key changes the state (ui_state.h) and nothing is painted here: the loop (ui.c)
 * paints after each key. */
#include "ui_keys.h"
#include "ui_state.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/units.h"

/* ---- actions ---- */

static void open_kill(struct ui *u)
{
    u->kill.n = 0;
    u->kill.sig = SIGTERM;
    if (u->focus == P_JOBS) {
        const struct top_job *j = ui_sel_job(u);
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
        const struct top_proc *p = ui_sel_proc(u);
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
        snprintf(u->msg, sizeof u->msg, "SIG%s not sent to %s: %s", ui_sig_name(u->kill.sig), u->kill.what,
                 err == ESRCH ? "the process is gone (or its pid was reused)" : strerror(err));
    else
        snprintf(u->msg, sizeof u->msg, "sent SIG%s to %zu process%s%s", ui_sig_name(u->kill.sig), sent,
                 sent == 1 ? "" : "es", err ? " (some were gone)" : "");
    top_sampler_wake(u->s);
}

static void change_core(struct ui *u, int delta)
{
    const struct top_job *j = ui_sel_job(u);
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
        const struct top_job *j = ui_sel_job(u);
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
            u->kill.sig = ui_sig_choice(ch - '0');
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

void ui_key(struct ui *u, int ch)
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
    /* The users view: u (or Escape) closes it, q quits; the panels' keys wait until it closes. */
    if (u->show_users && ch != ERR && ch != KEY_RESIZE && ch != 'q' && ch != 'Q') {
        if (ch == 'u' || ch == 27)
            u->show_users = false;
        return;
    }
    switch (ch) {
    case 'q': case 'Q': u->quit = true; break;
    case 'h': case '?': u->help = true; break;
    case 'u':
        top_users_read(&u->users);   /* read as it opens: the records change only as jobs end */
        u->show_users = true;
        break;
    case KEY_UP: case 'K': ui_move_sel(u, -1); break;
    case KEY_DOWN: case 'j': ui_move_sel(u, 1); break;
    case KEY_PPAGE: ui_move_sel(u, -(LINES / 3)); break;
    case KEY_NPAGE: ui_move_sel(u, LINES / 3); break;
    case KEY_HOME: ui_move_sel(u, -100000); break;
    case KEY_END: ui_move_sel(u, 100000); break;
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
        if (u->focus != P_JOBS || !ui_sel_job(u))
            snprintf(u->msg, sizeof u->msg, "select a job first (Tab to the job panel)");
        else
            start_prompt(u, PR_MEM, "");
        break;
    case 'k': case 'x': case KEY_F(9): open_kill(u); break;
    case '+': case '=': change_core(u, 5); break;
    case '-': case '_': change_core(u, -5); break;
    case ' ': u->paused = !u->paused; break;
    case '\n': case '\r': case KEY_ENTER:
        if (u->focus == P_JOBS && ui_sel_job(u)) {
            const struct top_job *j = ui_sel_job(u);
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
                ui_move_sel(u, -3);
#ifdef BUTTON5_PRESSED
            else if (ev.bstate & BUTTON5_PRESSED)
                ui_move_sel(u, 3);
#endif
        }
        break;
    }
    default: break;
    }
}
