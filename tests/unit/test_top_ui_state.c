/* vgpu top's screen state alone (cmd/top/ui_state.c, the bottom of the screen's layers, see
 * cmd/top/ui_state.h): the rows follow a new model and a new sort while the selection stays on
 * the same job and process, a job that ended leaves the "only this job" view, the selection is
 * clamped to the rows there are, and the kill dialog's keys 1-6 name their signals. No curses:
 * the keys and the painting are driven in tmux by tests/cli/top_screen.sh. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "top/ui_state.h"

/* One GPU, jobs "a".."e" (job i uses i+1 GiB), one process per job (pid 100+i, i*100 MiB). */
static struct top_model *model(unsigned njob)
{
    struct top_model *m = top_model_new();
    assert_non_null(m);
    m->ngpu = 1;
    for (unsigned j = 0; j < njob; j++) {
        struct top_job *jb = &m->jobs[j];
        snprintf(jb->id, sizeof jb->id, "job%u", j);
        snprintf(jb->name, sizeof jb->name, "%c", 'a' + j);
        snprintf(jb->owner, sizeof jb->owner, "alice");
        jb->mem_used = (uint64_t)(j + 1) << 30;
        jb->nproc = 1;
        struct top_proc *p = top_model_add_proc(m);
        assert_non_null(p);
        p->pid = (pid_t)(100 + j);
        p->job = (int)j;
        p->gpu = 0;
        p->valid = TOP_PV_MEM;
        p->gpu_mem = (uint64_t)j * 100 << 20;
        snprintf(p->user, sizeof p->user, "alice");
        snprintf(p->cmd, sizeof p->cmd, "prog%u", j);
    }
    m->njob = njob;
    return m;
}

static struct ui *new_ui(unsigned njob)
{
    struct ui *u = calloc(1, sizeof *u);
    assert_non_null(u);
    u->gpu_mask = ~0ULL;
    u->jkey = TOP_JK_NAME;
    u->pkey = TOP_PK_MEM;
    u->pdesc = true;
    u->focus = P_JOBS;
    u->m = model(njob);
    ui_refresh_rows(u);
    return u;
}

static void free_ui(struct ui *u)
{
    top_model_free(u->m);
    free(u->porder);
    free(u);
}

static void test_selection_follows_the_job_across_a_sort(void **state)
{
    (void)state;
    struct ui *u = new_ui(5);
    assert_int_equal(u->njorder, 5);
    assert_string_equal(ui_sel_job(u)->name, "a");
    ui_move_sel(u, 3);
    assert_string_equal(ui_sel_job(u)->name, "d");
    /* Sorted by memory, most first: "d" is third now, and still selected. */
    u->jkey = TOP_JK_MEM;
    u->jdesc = true;
    ui_refresh_rows(u);
    assert_string_equal(ui_sel_job(u)->name, "d");
    assert_int_equal(u->sel[P_JOBS], 1);
    /* A new model (the next sample) with the same jobs: the selection stays on "d". */
    top_model_free(u->m);
    u->m = model(5);
    ui_refresh_rows(u);
    assert_string_equal(ui_sel_job(u)->name, "d");
    free_ui(u);
}

static void test_selection_is_clamped(void **state)
{
    (void)state;
    struct ui *u = new_ui(3);
    ui_move_sel(u, 100000);
    assert_int_equal(u->sel[P_JOBS], 2);
    ui_move_sel(u, -100000);
    assert_int_equal(u->sel[P_JOBS], 0);
    u->focus = P_PROCS;
    ui_move_sel(u, 1);
    assert_int_equal(ui_sel_proc(u)->pid, 101);   /* by memory, most first: 102, 101, 100 */
    /* Fewer rows in the next sample: the selection is moved onto the last one there is. */
    ui_move_sel(u, 1);
    assert_int_equal(ui_sel_proc(u)->pid, 100);
    top_model_free(u->m);
    u->m = model(1);
    ui_refresh_rows(u);
    assert_int_equal(u->sel[P_PROCS], 0);
    assert_int_equal(u->sel[P_JOBS], 0);
    assert_int_equal(ui_sel_proc(u)->pid, 100);
    /* No rows at all: nothing is selected, and nothing is read past the rows. */
    top_model_free(u->m);
    u->m = model(0);
    ui_refresh_rows(u);
    assert_null(ui_sel_job(u));
    assert_null(ui_sel_proc(u));
    free_ui(u);
}

static void test_only_job_ends_with_the_job(void **state)
{
    (void)state;
    struct ui *u = new_ui(3);
    snprintf(u->only_job, sizeof u->only_job, "job2");
    ui_refresh_rows(u);
    assert_int_equal(u->nporder, 1);
    assert_int_equal(u->m->procs[u->porder[0]].pid, 102);
    assert_int_equal(ui_job_index(u->m, "job2"), 2);
    /* job2 ended: the next sample has 2 jobs, and every process is shown again. */
    top_model_free(u->m);
    u->m = model(2);
    ui_refresh_rows(u);
    assert_int_equal(ui_job_index(u->m, "job2"), -1);
    assert_string_equal(u->only_job, "");
    assert_int_equal(u->nporder, 2);
    free_ui(u);
}

static void test_kill_dialog_signals(void **state)
{
    (void)state;
    const int want[UI_NSIGS] = { SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGSTOP, SIGCONT };
    const char *names[UI_NSIGS] = { "TERM", "KILL", "INT", "HUP", "STOP", "CONT" };
    for (int n = 1; n <= UI_NSIGS; n++) {
        assert_int_equal(ui_sig_choice(n), want[n - 1]);
        assert_string_equal(ui_sig_name(ui_sig_choice(n)), names[n - 1]);
    }
    assert_int_equal(ui_sig_choice(0), 0);
    assert_int_equal(ui_sig_choice(UI_NSIGS + 1), 0);
    assert_string_equal(ui_sig_name(SIGUSR1), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selection_follows_the_job_across_a_sort),
        cmocka_unit_test(test_selection_is_clamped),
        cmocka_unit_test(test_only_job_ends_with_the_job),
        cmocka_unit_test(test_kill_dialog_signals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
