/* vgpu top's screen state: what the screen shows and where the user is (struct ui), with the
 * rows and the selection over the newest model. The bottom of the screen's files, which are
 * layered so that each calls only down:
 *   ui.c        the loop: samples in, keys in (ui_keys), paint (ui_draw); curses set up and down
 *   ui_keys.c   a key changes the state (and acts: signals, limits); knows nothing of painting
 *   ui_draw.c   paints the state; knows nothing of keys
 *   ui_state.c  this: the state, rows and selection, the kill dialog's signals; no curses
 *   users.c     the users view (read by ui_keys, painted by ui_draw), a leaf that knows none
 * The state knows no curses, so rows and selection are unit-tested (tests/unit/test_top_ui_state.c). */
#ifndef VGPU_CMD_TOP_UI_STATE_H
#define VGPU_CMD_TOP_UI_STATE_H

#include "top.h"
#include "users.h"

enum panel { P_GPUS, P_JOBS, P_PROCS, P_COUNT };
enum prompt { PR_NONE, PR_FILTER, PR_GPUS, PR_MEM, PR_DELAY, PR_KILL };

struct ui {
    struct top_sampler *s;
    struct top_model *m;
    bool paused, help, color, quit;
    bool show_users;             /* the u key: today's totals per user in place of the panels */
    struct top_users users;
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

/* rows and selection */
int ui_job_index(const struct top_model *m, const char *id);
void ui_refresh_rows(struct ui *u);     /* re-sorts; keeps the selection on the same job / process */
void ui_remember_sel(struct ui *u);
void ui_move_sel(struct ui *u, int delta);   /* in the focused panel, clamped to its rows */
const struct top_job *ui_sel_job(struct ui *u);
const struct top_proc *ui_sel_proc(struct ui *u);

/* the kill dialog's signals: their names, and the n-th (1..UI_NSIGS, as its keys 1-6 pick) */
#define UI_NSIGS 6
const char *ui_sig_name(int sig);
int ui_sig_choice(int n);

#endif
