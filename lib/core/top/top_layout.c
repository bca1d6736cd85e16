/* vgpu top's layout: where each panel goes, as a pure function of the terminal size and what
 * the model holds (see vgpu/top.h). Priorities when space is short, most important first:
 * header, footer, banner, GPUs (one line each), jobs (at least 3 rows), processes (at least 3
 * rows), then GPU detail lines, then history graphs; what is left is shared by jobs and
 * processes. */
#include "vgpu/top.h"

#include <string.h>

#define MIN_ROWS 10
#define MIN_COLS 40

static struct top_rect rect(int y, int x, int h, int w)
{
    struct top_rect r = { y, x, h > 0 ? h : 0, w };
    return r;
}

void top_layout_compute(const struct top_layout_in *in, struct top_layout *out)
{
    memset(out, 0, sizeof *out);
    int rows = in->rows, cols = in->cols;
    if (rows < MIN_ROWS || cols < MIN_COLS) {
        out->too_small = true;
        return;
    }
    out->header = rect(0, 0, 1, cols);
    out->footer = rect(rows - 1, 0, 1, cols);
    int y = 1;
    if (in->banner) {
        out->banner = rect(y, 0, 1, cols);
        y++;
    }
    int avail = rows - 1 - y;          /* lines between the header/banner and the footer */
    if (in->help) {
        out->help = rect(y, 0, avail, cols);
        return;
    }
    /* panel minimums: title + 3 rows each for jobs and processes */
    const int min_jobs = 4, min_procs = 4;
    int ngpu = (int)in->ngpu_shown;
    int gpu_title = ngpu > 0 ? 1 : 0;
    int gpu_lines = ngpu;              /* one line each at least */
    int room = avail - min_jobs - min_procs - gpu_title;
    if (gpu_lines > room)
        gpu_lines = room > 0 ? room : 0;   /* the GPU list scrolls when it does not fit */
    int each = 1;
    int nphys = ngpu - (int)in->nmig;
    /* detail line per physical GPU (clocks, power, PCIe) when wide and tall enough */
    if (cols >= 100 && gpu_lines == ngpu && ngpu + nphys <= room && nphys > 0)
        each = 2;
    int gpu_h = gpu_lines == ngpu ? ngpu + (each == 2 ? nphys : 0) : gpu_lines;
    out->gpu_lines_each = each;
    out->gpus = rect(y, 0, gpu_h ? gpu_h + gpu_title : 0, cols);
    y += out->gpus.h;
    int left = rows - 1 - y;           /* for graphs, jobs and processes */
    int graph_h = 0;
    if (in->graphs && nphys > 0 && cols >= 60) {
        int want = nphys + 1;          /* a title line, then one line per physical GPU */
        if (left - want >= min_jobs + min_procs + 4)
            graph_h = want;
    }
    out->graphs = rect(y, 0, graph_h, cols);
    y += graph_h;
    left = rows - 1 - y;
    /* jobs get a third of the rest (at least min_jobs), processes the others */
    int jobs_h = left / 3;
    if (jobs_h < min_jobs)
        jobs_h = min_jobs;
    if (jobs_h > left - min_procs)
        jobs_h = left - min_procs;
    if (jobs_h < 2)
        jobs_h = left >= 2 ? 2 : left;
    out->jobs = rect(y, 0, jobs_h, cols);
    y += out->jobs.h;
    out->procs = rect(y, 0, rows - 1 - y, cols);
}
