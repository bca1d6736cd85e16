/* vgpu top's screen state: rows and selection over the newest model, and the kill dialog's
 * signals (see ui_state.h for the layers). No curses here. */
#include "ui_state.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void ui_move_sel(struct ui *u, int delta)
{
    int counts[P_COUNT] = { u->m ? (int)u->m->ngpu : 0, (int)u->njorder, (int)u->nporder };
    int p = u->focus;
    u->sel[p] += delta;
    if (u->sel[p] >= counts[p])
        u->sel[p] = counts[p] - 1;
    if (u->sel[p] < 0)
        u->sel[p] = 0;
    ui_remember_sel(u);
}

static const struct { int sig; const char *name; } sigs[] = {
    { SIGTERM, "TERM" }, { SIGKILL, "KILL" }, { SIGINT, "INT" }, { SIGHUP, "HUP" }, { SIGSTOP, "STOP" }, { SIGCONT, "CONT" },
};

const char *ui_sig_name(int sig)
{
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigs[i].sig == sig)
            return sigs[i].name;
    return "?";
}

_Static_assert(sizeof sigs / sizeof sigs[0] == UI_NSIGS, "the kill dialog offers keys 1-6");

int ui_sig_choice(int n)
{
    return n >= 1 && n <= UI_NSIGS ? sigs[n - 1].sig : 0;
}
