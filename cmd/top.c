/* vgpu top: the live monitor of GPUs, MIG devices and vgpu jobs against their limits. */
static const char usage[] =
    "usage: vgpu top [-d SECONDS] [-n COUNT] [--gpu SEL] [--once] [--json]\n"
    "\n"
    "Show the GPUs (utilisation, memory, temperature, power, clocks, fan, PCIe, encoder and\n"
    "decoder, MIG mode, history), their MIG devices, the vgpu jobs with their memory and\n"
    "GPU-time limits, and every GPU process (also those outside any job), refreshed live.\n"
    "A GPU process that descends from a job but runs without the limiter (a child that unset\n"
    "LD_PRELOAD) is the job's: its memory counts in the job's figures, the job's row ends with\n"
    "'! 3.50 GiB outside the limiter (pid N)', and its JOB column reads '!NAME'.\n"
    "An oversubscribed job's row ends with '~ 3 GiB off the device', and ', migrating 6.2 GB/s'\n"
    "while that memory moves at 100 MB/s or more over the interval (its share of the GPU's PCIe\n"
    "traffic, which also counts host<->device copies; see vgpu-top(1)).\n"
    "\n"
    "  -d, --delay SECONDS  refresh interval (0.1 to 3600, a plain decimal; default 1)\n"
    "  -n, --iterations N   exit after N refreshes (default: until q, or forever with --json;\n"
    "                       1, also with --json, when stdin or stdout is not a terminal)\n"
    "      --gpu SEL        only these GPUs: an index, a UUID or its unique start, a PCI bus\n"
    "                       id, a MIG UUID, a comma list of those, or 'all'\n"
    "      --once           print one text snapshot and exit (as top -b -n1); the default\n"
    "                       when stdin or stdout is not a terminal\n"
    "      --json           one JSON object per refresh, one a line (JSON Lines, \"schema\": 1,\n"
    "                       sizes in bytes, null for N/A); with --once one document; into a\n"
    "                       pipe, give -n N to get N refreshes\n"
    "      --help           show this help\n"
    "\n"
    "Keys: q quit, h or ? help, arrows or j/K move, Tab next panel, s sort column, S reverse,\n"
    "/ filter, g pick GPUs, Enter a job's processes, k signal a process or a job, + and -\n"
    "change the job's core limit, m set its memory limit, space pause, d refresh interval,\n"
    "u today's usage per user (jobs, GPU-hours, GiB-hours, energy of jobs that ended today,\n"
    "from vgpu acct's records: through the arbiter when one answers, else your own; read\n"
    "again at each refresh while a job of yours that just ended is having its record written).\n"
    "\n"
    "Without NVML (no library, driver not loaded, no GPU) the jobs from vgpu's own state are\n"
    "still shown, under a banner that says why GPU data is missing. NO_COLOR turns colours off.\n"
    "\n"
    "Exit status: 0 done; 2 bad option or unknown GPU; with --once or --json, after printing:\n"
    "3 libnvidia-ml.so.1 not found, 4 driver not loaded, 5 no GPU, 1 other NVML failure; as\n"
    "vgpu ps when the jobs cannot be read (1, 6); 12 a GPU is lost. --once fits COLUMNS (any\n"
    "number; below 40 the lines are cut), else the terminal's width, else 120.\n";

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "top/top.h"
#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/json.h"
#include "vgpu/log.h"

extern const struct vgpu_cmd vgpu_cmd_top;

static const struct option options[] = {
    { "delay", required_argument, NULL, 'd' },
    { "iterations", required_argument, NULL, 'n' },
    { "gpu", required_argument, NULL, 'g' },
    { "once", no_argument, NULL, 'o' },
    { "json", no_argument, NULL, 'j' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "delay", VGPU_ARG_OTHER, NULL },
    { "iterations", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

static int nvml_exit(const struct top_model *m)
{
    switch (m->nvml) {
    case TOP_NVML_OK: return 0;
    case TOP_NVML_NO_LIBRARY: return VGPU_EXIT_NO_LIBRARY;
    case TOP_NVML_NO_DRIVER: return VGPU_EXIT_NO_DRIVER;
    case TOP_NVML_NO_GPU: return VGPU_EXIT_NO_GPU;
    case TOP_NVML_ERROR: break;
    }
    return VGPU_EXIT_FAIL;
}

/* The width to fit: COLUMNS when it is a number (any, as ps(1) takes it), else the
 * terminal's, else 120. Below 40 the layout is made for 40 and every line is cut to the width
 * (it was ignored, and 120 columns were printed). */
static int text_width(void)
{
    const char *c = getenv("COLUMNS");
    if (c && *c && strspn(c, "0123456789") == strlen(c) && strlen(c) < 6 && atoi(c) > 0)
        return atoi(c);
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 120;
}

/* Prints text cut to w columns a line (UTF-8: a column a code point, which is what the
 * table's characters are). */
static void print_fitted(FILE *to, const char *text, size_t len, int w)
{
    size_t i = 0;
    while (i < len) {
        int col = 0;
        size_t start = i, keep = i;
        while (i < len && text[i] != '\n') {
            if (((unsigned char)text[i] & 0xC0) != 0x80) {
                if (col == w)
                    break;
                col++;
            }
            i++;
            keep = i;
        }
        fwrite(text + start, 1, keep - start, to);
        while (i < len && text[i] != '\n')
            i++;
        if (i < len) {
            fputc('\n', to);
            i++;
        }
    }
}

static void print_text(FILE *to, const struct top_model *m, int w)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *ms = open_memstream(&buf, &len);
    if (!ms) {
        top_print_text(to, m, w < 40 ? 40 : w);
        return;
    }
    top_print_text(ms, m, w < 40 ? 40 : w);
    fclose(ms);
    print_fitted(to, buf, len, w);
    free(buf);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* --once, --json, and anything without a terminal: samples on this thread. */
static int batch(struct top_sampler *s, bool json, bool once, long count, unsigned delay_ms)
{
    if (once)
        count = 1;
    /* One snapshot: descriptors kept for the next sample would only cost their opening (and
     * the growth of the descriptor table: 1024 processes made --once 50 ms slower). */
    s->no_kept_fds = count == 1;
    int rc = 0;
    for (long i = 0; count == 0 || i < count; i++) {
        if (i > 0)
            sleep_ms(delay_ms);
        struct top_model *m = top_sampler_sample(s);
        if (!m)
            return vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
        if (i == 0 && m->nvml != TOP_NVML_OK)
            vgpu_error("no GPU data: %s", m->nvml_msg);
        rc = nvml_exit(m);
        /* Jobs that cannot be read and lost GPUs fail the command too, as in vgpu ps and
         * vgpu list (it exited 0 when the state directory could not be read). */
        if (m->jobs_msg[0]) {
            if (i == 0)
                vgpu_error("no job data: %s", m->jobs_msg);
            if (!rc)
                rc = m->jobs_code ? m->jobs_code : VGPU_EXIT_FAIL;
        }
        for (unsigned g = 0; g < m->ngpu; g++)
            if (m->gpus[g].lost) {
                if (i == 0)
                    vgpu_error("GPU %u is lost (it stopped answering the driver): see 'nvidia-smi -q -i %u' and the "
                               "kernel log (Xid errors); a reset (nvidia-smi -r -i %u) or a reboot brings it back",
                               m->gpus[g].index, m->gpus[g].index, m->gpus[g].index);
                if (!rc)
                    rc = VGPU_EXIT_GPU_LOST;
            }
        int w = 0;
        if (json) {
            w = vgpu_json_emit(top_model_json(m), once);
        } else {
            if (i > 0)
                putchar('\n');
            print_text(stdout, m, text_width());
            w = fflush(stdout) == EOF ? -1 : 0;
        }
        top_model_free(m);
        if (w < 0) {
            if (errno == EPIPE)
                return rc;
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        }
    }
    return rc;
}

static int cmd_top(int argc, char **argv)
{
    const char *gpu = NULL;
    bool json = false, once = false;
    long count = 0;
    double delay = 1.0;
    int c;
    char *end;
    while ((c = vgpu_getopt(&vgpu_cmd_top, argc, argv, "d:n:")) != -1) {
        switch (c) {
        case 'd':
            errno = 0;
            delay = strtod(optarg, &end);
            /* Plain decimals, as vgpu wait --timeout takes them: strtod also takes " 1", "1e0",
             * hex and "inf". */
            if (errno || end == optarg || *end || strspn(optarg, "0123456789.") != strlen(optarg) ||
                !isfinite(delay) || delay < 0.1 || delay > 3600)
                return vgpu_usage_error(&vgpu_cmd_top, "-d '%s': the refresh interval is in seconds, 0.1 to 3600",
                                        optarg);
            break;
        case 'n':
            errno = 0;
            count = strtol(optarg, &end, 10);
            /* Too many digits is its own mistake: "must be 1 or more" was said of 99999999999999999999. */
            if (errno == ERANGE && count == LONG_MAX)
                return vgpu_usage_error(&vgpu_cmd_top, "-n '%s': too many refreshes; at most %ld", optarg, LONG_MAX);
            if (errno || end == optarg || *end || count < 1)
                return vgpu_usage_error(&vgpu_cmd_top, "-n '%s': the number of refreshes must be a whole number, 1 "
                                        "or more", optarg);
            break;
        case 'g': gpu = optarg; break;
        case 'o': once = true; break;
        case 'j': json = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_top, "unexpected argument '%s'", argv[optind]);
    unsigned delay_ms = (unsigned)(delay * 1000 + 0.5);

    struct top_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
    struct vgpu_err e;
    int rc;
    bool terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (top_sampler_init(s, gpu, &e) < 0) {
        rc = vgpu_err_report(&e);
    } else {
        vgpu_arb_note_alone("top");
        if (json || once || !terminal) {
            /* Without a terminal nobody can press q: one refresh unless -n asks for more, for
             * --json as for text (--json into a pipe streamed forever). */
            rc = batch(s, json, once, count ? count : terminal ? 0 : 1, delay_ms);
        } else {
            const char *nc = getenv("NO_COLOR");
            struct top_ui_opts o = { .delay_ms = delay_ms, .count = count, .color = !(nc && *nc) };
            rc = top_ui_run(s, &o);
        }
    }
    top_sampler_fini(s);
    free(s);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_top = {
    .name = "top",
    .fn = cmd_top,
    .summary = "monitor GPUs, MIG devices and jobs against their limits, live",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
};
