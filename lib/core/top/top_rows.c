/* vgpu top's table rows (see vgpu/top.h): the same text in the --once snapshot and on the
 * screen, so what the tests check in one is what users see in the other. Columns shrink with
 * the width; the variable ones (GPU name, bars, command) take what is left. */
#include "vgpu/top.h"

#include <stdio.h>
#include <string.h>

#include "vgpu/migration.h"
#include "vgpu/units.h"

/* Clips to width columns (all our text is ASCII: names and commands are sanitized). */
static char *clip(char *buf, size_t len, int width)
{
    if (width < 0)
        width = 0;
    if ((size_t)width < len && strlen(buf) > (size_t)width)
        buf[width] = 0;
    /* no trailing blanks */
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == ' ')
        buf[--n] = 0;
    return buf;
}

static int name_width(int width, int fixed, int min, int max)
{
    int w = width - fixed;
    if (w < min)
        w = min;
    if (w > max)
        w = max;
    return w;
}

static void gpu_label(const struct top_gpu *g, char *buf, size_t len)
{
    if (g->is_mig)
        snprintf(buf, len, "%u/%u/%u", g->index, g->gi, g->ci);
    else
        snprintf(buf, len, "%u", g->index);
}

static void mem_pair(char *buf, size_t len, bool valid, uint64_t used, uint64_t total)
{
    if (!valid)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%llu/%lluMiB", (unsigned long long)(used >> 20), (unsigned long long)(total >> 20));
}

#define GPU_FIXED (7 + 1 + 1 + 5 + 1 + 18 + 1 + 5 + 1 + 10)

char *top_row_gpu_title(char *buf, size_t len, int width)
{
    int nw = name_width(width, GPU_FIXED, 8, 40);
    snprintf(buf, len, "%-7s %-*s %5s %18s %5s %10s", "GPU", nw, "NAME", "UTIL", "MEM USED/TOTAL", "TEMP",
             "POWER");
    return clip(buf, len, width);
}

char *top_row_gpu(char *buf, size_t len, int width, const struct top_gpu *g)
{
    int nw = name_width(width, GPU_FIXED, 8, 40);
    char idx[24], util[8], mem[40], temp[12], pw[24], a[12], b[12];
    gpu_label(g, idx, sizeof idx);
    if (g->lost) {
        snprintf(buf, len, "%-7s %-*.*s GPU is lost (it stopped answering the driver)", idx, nw, nw, g->name);
        return clip(buf, len, width);
    }
    top_fmt_pct(util, sizeof util, g->valid & TOP_GV_UTIL, g->util_pct);
    mem_pair(mem, sizeof mem, g->valid & TOP_GV_MEM, g->mem_used, g->mem_total);
    if (g->valid & TOP_GV_TEMP)
        snprintf(temp, sizeof temp, "%uC", g->temp_c);
    else
        snprintf(temp, sizeof temp, "%s", g->is_mig ? "" : "N/A");
    if (g->is_mig)
        pw[0] = 0;
    else {
        top_fmt_watts(a, sizeof a, g->valid & TOP_GV_POWER, g->power_mw);
        if (g->valid & TOP_GV_PLIMIT)
            snprintf(b, sizeof b, "%u", (g->power_limit_mw + 500) / 1000);
        else
            snprintf(b, sizeof b, "N/A");
        snprintf(pw, sizeof pw, "%s/%s", a, b);
    }
    char name[112];
    if (g->is_mig)
        snprintf(name, sizeof name, " MIG %s", g->profile[0] ? g->profile : g->name);
    else
        snprintf(name, sizeof name, "%s", g->name);
    snprintf(buf, len, "%-7s %-*.*s %5s %18s %5s %10s", idx, nw, nw, name, util, mem, temp, pw);
    return clip(buf, len, width);
}

char *top_row_gpu_detail(char *buf, size_t len, int width, const struct top_gpu *g)
{
    char sm[16], mc[16], fan[8], pcie[16], enc[8], dec[8], mig[24];
    unsigned v = g->valid;
    if (v & TOP_GV_SMCLK) snprintf(sm, sizeof sm, "%uMHz", g->sm_clock_mhz); else snprintf(sm, sizeof sm, "N/A");
    if (v & TOP_GV_MEMCLK) snprintf(mc, sizeof mc, "%uMHz", g->mem_clock_mhz); else snprintf(mc, sizeof mc, "N/A");
    top_fmt_pct(fan, sizeof fan, v & TOP_GV_FAN, g->fan_pct);
    if (v & TOP_GV_PCIE) snprintf(pcie, sizeof pcie, "Gen%u x%u", g->pcie_gen, g->pcie_width);
    else snprintf(pcie, sizeof pcie, "N/A");
    top_fmt_pct(enc, sizeof enc, v & TOP_GV_ENC, g->enc_pct);
    top_fmt_pct(dec, sizeof dec, v & TOP_GV_DEC, g->dec_pct);
    if (!(v & TOP_GV_MIG))
        snprintf(mig, sizeof mig, "N/A");
    else if (g->mig_current != g->mig_pending)
        snprintf(mig, sizeof mig, "%s (pending %s)", g->mig_current ? "on" : "off", g->mig_pending ? "on" : "off");
    else
        snprintf(mig, sizeof mig, "%s", g->mig_current ? "on" : "off");
    snprintf(buf, len, "        SM %s  MEM %s  FAN %s  PCIe %s  ENC %s  DEC %s  MIG %s", sm, mc, fan, pcie, enc, dec,
             mig);
    return clip(buf, len, width);
}

char *top_row_mig(char *buf, size_t len, int width, const struct top_model *m, const struct top_gpu *g)
{
    char line[512];
    top_row_gpu(line, sizeof line, width, g);
    size_t n = strlen(line);
    /* jobs with a process in this instance */
    unsigned gi = (unsigned)(g - m->gpus);
    bool first = true;
    for (unsigned j = 0; j < m->njob && n < sizeof line - 80; j++) {
        for (size_t p = 0; p < m->nproc; p++) {
            if (m->procs[p].job == (int)j && m->procs[p].gpu == (int)gi) {
                n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", first ? "  jobs: " : ",", m->jobs[j].name);
                first = false;
                break;
            }
        }
    }
    snprintf(buf, len, "%s", line);
    return clip(buf, len, width);
}

/* name owner gpus mem [bar] share [bar] throttled prio procs */
#define JOB_FIXED (12 + 1 + 8 + 1 + 5 + 1 + 11 + 1 + 2 + 1 + 8 + 1 + 2 + 1 + 6 + 1 + 6 + 1 + 5)

static int job_bar_width(int width)
{
    int w = (width - JOB_FIXED) / 2;
    return w < 3 ? 3 : w > 20 ? 20 : w;
}

char *top_row_job_title(char *buf, size_t len, int width)
{
    int bw = job_bar_width(width);
    snprintf(buf, len, "%-12s %-8s %-5s %-*s %-*s %6s %-6s %5s", "JOB", "OWNER", "GPUS", 11 + 3 + bw, "MEM USED/LIMIT",
             8 + 3 + bw, "GPU-TIME/CORE", "THROTL", "PRIO", "PROCS");
    return clip(buf, len, width);
}

char *top_row_job(char *buf, size_t len, int width, const struct top_job *j)
{
    int bw = job_bar_width(width);
    char mem[40], membar[32], share[40], sharebar[32], thr[16], flag[96] = "";
    /* Memory outside the limiter is the job's too: in its figure, and flagged after the row. */
    uint64_t used = j->mem_used + j->mem_outside;
    top_fmt_mem_limit(mem, sizeof mem, used, j->mem_limit);
    top_fmt_bar(membar, sizeof membar, (unsigned)bw, j->mem_limit ? (double)used / (double)j->mem_limit : 0);
    if (j->outside_count) {
        char sz[32];
        snprintf(flag, sizeof flag, "  ! %s outside the limiter (pid %d%s)", vgpu_format_size(j->mem_outside, sz, sizeof sz),
                 (int)j->outside_pid, j->outside_count > 1 ? ", ..." : "");
    } else if (j->lending) {
        /* Lent memory: what is promised, how much of the figure is borrowed past it, and how much
         * of that was demoted to host memory for another job's request (squeezed). */
        char rq[32], bo[32], dm[48] = "";
        if (j->mem_demoted) {
            char sz[32];
            snprintf(dm, sizeof dm, ", %s demoted", vgpu_format_size(j->mem_demoted, sz, sizeof sz));
        }
        snprintf(flag, sizeof flag, "  + %s borrowed past its request of %s%s",
                 vgpu_format_size(j->mem_borrowed, bo, sizeof bo), vgpu_format_size(j->mem_request, rq, sizeof rq), dm);
    } else if (j->oversub) {
        /* Virtual device memory: how much of the figure lives off the GPU, and how fast it
         * migrates while that is high (vgpu/migration.h). */
        char sz[32], rate[48] = "", rt[24];
        if (j->migration_valid && j->migration_bps >= VGPU_MIGRATION_HIGH_BPS)
            snprintf(rate, sizeof rate, ", migrating %s", vgpu_format_rate(j->migration_bps, rt, sizeof rt));
        snprintf(flag, sizeof flag, "  ~ %s off the device%s", vgpu_format_size(j->mem_off_device, sz, sizeof sz), rate);
    }
    char sv[16], cv[16];
    if (j->share_valid)
        snprintf(sv, sizeof sv, "%.0f", j->share_pct);
    else
        snprintf(sv, sizeof sv, "N/A");
    if (j->core_limit_pct)
        snprintf(cv, sizeof cv, "%u%%%s", j->core_limit_pct, j->soft ? "s" : "");
    else
        snprintf(cv, sizeof cv, "-");
    snprintf(share, sizeof share, "%s/%s", sv, cv);
    double lim = j->core_limit_pct ? j->core_limit_pct : 100;
    top_fmt_bar(sharebar, sizeof sharebar, (unsigned)bw, j->share_valid ? j->share_pct / lim : 0);
    vgpu_format_duration(j->throttled_ns / 1000000000, thr, sizeof thr);
    /* A cut name or owner ends in '+', so it never passes for a whole one. */
    char nm[16], ow[16], gp[16];
    snprintf(buf, len, "%-12s %-8s %-5s %-11s [%s] %-8s [%s] %6s %-6s %5u%s", vgpu_fit_text(j->name, 12, nm, sizeof nm),
             vgpu_fit_text(j->owner, 8, ow, sizeof ow), vgpu_fit_text(j->gpus, 5, gp, sizeof gp), mem, membar, share,
             sharebar, thr, vgpu_priority_name(j->priority), j->nproc, flag);
    return clip(buf, len, width);
}

char *top_row_proc_title(char *buf, size_t len, int width)
{
    snprintf(buf, len, "%7s %-8s %-12s %-7s %8s %4s %5s  %s", "PID", "USER", "JOB", "GPU", "GPU-MEM", "SM%", "CPU%",
             "COMMAND");
    return clip(buf, len, width);
}

char *top_row_proc(char *buf, size_t len, int width, const struct top_model *m, const struct top_proc *p)
{
    char gpu[24], mem[16], sm[8], cpu[12], jobbuf[16];
    const char *job = p->job >= 0 && (unsigned)p->job < m->njob ? m->jobs[p->job].name : "-";
    if (p->outside && *job != '-') {
        snprintf(jobbuf, sizeof jobbuf, "!%.11s", job);   /* outside the limiter */
        job = jobbuf;
    }
    if (p->gpu >= 0 && (unsigned)p->gpu < m->ngpu)
        gpu_label(&m->gpus[p->gpu], gpu, sizeof gpu);
    else
        snprintf(gpu, sizeof gpu, "-");
    top_fmt_mib(mem, sizeof mem, p->valid & TOP_PV_MEM, p->gpu_mem);
    if (p->valid & TOP_PV_SM)
        snprintf(sm, sizeof sm, "%u", p->sm_pct);
    else
        snprintf(sm, sizeof sm, "N/A");
    if (p->valid & TOP_PV_CPU)
        snprintf(cpu, sizeof cpu, "%.1f", p->cpu_pct);
    else
        snprintf(cpu, sizeof cpu, "N/A");
    char us[16], jb[16];
    snprintf(buf, len, "%7d %-8s %-12s %-7s %8s %4s %5s  %s", (int)p->pid, vgpu_fit_text(p->user, 8, us, sizeof us),
             vgpu_fit_text(job, 12, jb, sizeof jb), gpu, mem, sm, cpu, p->cmd);
    return clip(buf, len, width);
}

char *top_row_banner(char *buf, size_t len, int width, const struct top_model *m)
{
    buf[0] = 0;
    if (m->nvml != TOP_NVML_OK) {
        const char *what = m->nvml == TOP_NVML_NO_LIBRARY ? "NVML library not found"
                         : m->nvml == TOP_NVML_NO_DRIVER  ? "NVIDIA driver not loaded"
                         : m->nvml == TOP_NVML_NO_GPU     ? "no GPU found"
                                                          : "NVML failed";
        snprintf(buf, len, "No GPU data (%s): %s; showing jobs from vgpu's state", what, m->nvml_msg);
    } else if (m->jobs_msg[0]) {
        snprintf(buf, len, "No job data: %s", m->jobs_msg);
    }
    return clip(buf, len, width);
}
