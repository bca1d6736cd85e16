/* vgpu top --once: one text snapshot, like `top -b -n1`, from the same rows as the screen. */
#include "top.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void top_print_text(FILE *f, const struct top_model *m, int width)
{
    char line[1024];
    if (width < 40)
        width = 40;
    if (width > (int)sizeof line - 1)
        width = (int)sizeof line - 1;
    char ts[32] = "";
    time_t t = (time_t)(m->time_ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    unsigned nphys = 0;
    for (unsigned i = 0; i < m->ngpu; i++)
        nphys += !m->gpus[i].is_mig;
    fprintf(f, "vgpu top - %s  driver %s  CUDA %s  %u GPU%s, %u job%s, %zu process%s\n", ts,
            m->driver_version[0] ? m->driver_version : "N/A", m->cuda_version[0] ? m->cuda_version : "N/A", nphys,
            nphys == 1 ? "" : "s", m->njob, m->njob == 1 ? "" : "s", m->nproc, m->nproc == 1 ? "" : "es");
    top_row_banner(line, sizeof line, width, m);
    if (line[0])
        fprintf(f, "%s\n", line);
    if (m->ngpu) {
        fprintf(f, "\n%s\n", top_row_gpu_title(line, sizeof line, width));
        for (unsigned i = 0; i < m->ngpu; i++) {
            const struct top_gpu *g = &m->gpus[i];
            if (g->is_mig) {
                fprintf(f, "%s\n", top_row_mig(line, sizeof line, width, m, g));
            } else {
                fprintf(f, "%s\n", top_row_gpu(line, sizeof line, width, g));
                if (!g->lost)
                    fprintf(f, "%s\n", top_row_gpu_detail(line, sizeof line, width, g));
            }
        }
    }
    fprintf(f, "\n%s\n", top_row_job_title(line, sizeof line, width));
    size_t order[TOP_MAX_JOBS];
    size_t n = top_sort_jobs(m, order, TOP_JK_NAME, false, NULL);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", top_row_job(line, sizeof line, width, &m->jobs[order[i]]));
    if (n == 0)
        fprintf(f, "(no vgpu jobs)\n");
    fprintf(f, "\n%s\n", top_row_proc_title(line, sizeof line, width));
    size_t *po = malloc((m->nproc ? m->nproc : 1) * sizeof *po);
    if (!po)
        return;
    n = top_sort_procs(m, po, TOP_PK_MEM, true, NULL, ~0ULL, -1);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", top_row_proc(line, sizeof line, width, m, &m->procs[po[i]]));
    if (n == 0)
        fprintf(f, "(no GPU processes)\n");
    free(po);
}
