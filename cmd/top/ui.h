/* vgpu top's screen, shared between its files: the state of the screen (struct ui), rows and
 * selection (ui.c), painting (ui_draw.c), and keys and actions (ui_keys.c). */
#ifndef VGPU_CMD_TOP_UI_H
#define VGPU_CMD_TOP_UI_H

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

/* colour pairs */
enum { C_TITLE = 1, C_OK, C_WARN, C_BAD, C_BANNER, C_DIM };

/* rows and selection (ui.c) */
int ui_job_index(const struct top_model *m, const char *id);
void ui_refresh_rows(struct ui *u);     /* re-sorts; keeps the selection on the same job / process */
void ui_remember_sel(struct ui *u);
const struct top_job *ui_sel_job(struct ui *u);
const struct top_proc *ui_sel_proc(struct ui *u);

/* painting (ui_draw.c) */
void ui_draw(struct ui *u);

/* keys and actions (ui_keys.c) */
void ui_key(struct ui *u, int ch);
const char *ui_sig_name(int sig);

#endif
