/* vgpu run: start a command as a job with GPU limits. */
static const char usage[] =
    "usage: vgpu run [--gpu SEL] [--mem SIZE|PCT%|REQUEST:LIMIT|IDX:SIZE,...] [--core PCT]\n"
    "                [--core-policy hard|soft]\n"
    "                [--priority high|normal|low] [--name NAME] [--mps] [--fail-closed] [-d]\n"
    "                [--user USER [--over-limit kill|stop|warn]] [--] CMD [ARGS...]\n"
    "       vgpu run --mem SIZE [--place binpack|spread] [--wait] [--overcommit] [-d]\n"
    "                [--] CMD [ARGS...]\n"
    "       vgpu run --gpus N [--mem SIZE] [--place binpack|spread] [--wait] ...\n"
    "                [--] CMD [ARGS...]\n"
    "       vgpu run --mem SIZE --oversubscribe[=DEVICE_SIZE] [--max-jobs N] ...\n"
    "                [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD as a new job: it sees only the selected GPUs (CUDA_VISIBLE_DEVICES is set to their\n"
    "UUIDs, and NVML is filtered to match), and libvgpu.so (preloaded) holds its GPU memory\n"
    "under the limit. Every process the command starts belongs to the job and shares its limit;\n"
    "while it waits, vgpu run reclaims the memory of the job's processes that die (every\n"
    "250 ms).\n"
    "\n"
    "  --gpu SEL      the job's GPUs: an index, a UUID or its unique start, a PCI bus id, a MIG\n"
    "                 UUID, a comma list of those (each GPU once), or 'all' (default: all)\n"
    "  --gpus N       vgpu chooses N GPUs (or MIG instances) together, all or nothing, each\n"
    "                 with room for --mem SIZE: GPUs of one model first, then the nearest\n"
    "                 (NVLink, then one PCIe switch, then one CPU), then by --place; says\n"
    "                 which on stderr (and when the models are mixed). Not with --gpu\n"
    "  --mem SIZE     memory limit on every GPU of the job: 4G, 4Gi, 512MiB, 1.5GiB (a number\n"
    "                 without a unit is bytes, at least 1048576)\n"
    "  --mem PCT%     a share of each GPU's total memory, 1% to 100% (50%)\n"
    "  --mem REQUEST:LIMIT  lent memory (20G:100G): REQUEST is promised on the GPU (placement\n"
    "                 and --wait count it alone), LIMIT is the cap; past REQUEST, cudaMalloc\n"
    "                 borrows what the GPU has free (managed memory kept on the GPU); VMM,\n"
    "                 pools, IPC, arrays and graph memory fail at REQUEST (vgpu-run(1),\n"
    "                 BORROWED MEMORY). SIZE alone is SIZE:SIZE. Not with --oversubscribe\n"
    "  --mem IDX:SIZE,...  per job GPU (IDX counts the job's GPUs from 0, in --gpu order;\n"
    "                 IDX:REQUEST:LIMIT too); GPUs not named have no limit\n"
    "  --core PCT     cap the job's share of GPU time on each of its GPUs at PCT\n"
    "                 percent (1-100)\n"
    "  --core-policy hard|soft  hard (default): never more than PCT; soft: also use GPU time\n"
    "                 that no other vgpu job on the GPU wants\n"
    "  --priority high|normal|low  how soon the job gets the GPU: high preempts other\n"
    "                 jobs' turns, and jobs it would preempt keep clear of its expected next\n"
    "                 request (default normal; low is still served at least once a second).\n"
    "                 Without\n"
    "                 --core: high is an uncapped service that preempts whenever it has work,\n"
    "                 low uncapped background that only takes what others leave. The recipe\n"
    "                 for inference beside training: --priority high -- serve, beside\n"
    "                 --priority low -- train\n"
    "  --mps          run CMD as a client of the MPS daemon ('vgpu mps start'): --core becomes\n"
    "                 MPS's active thread percentage (a cap on the SMs its kernels use, not\n"
    "                 GPU time) and --mem also its pinned device memory limit; MPS serves one\n"
    "                 user at a time (another user's clients make the job wait: said)\n"
    "  --name NAME    a name for vgpu ps/limit/wait (letters, digits, '.', '_', '-'); no other\n"
    "                 job that has not ended may have it, and it may not be a job's id\n"
    "  --place POLICY with --mem SIZE (not PCT% or IDX:SIZE) and no --gpu, vgpu chooses one GPU\n"
    "                 (or MIG instance) whose memory not yet promised to running jobs fits:\n"
    "                 binpack (default: the fullest that fits) or spread (the emptiest)\n"
    "  --wait         when none fits, wait in line (first come, first served among your jobs;\n"
    "                 another user's waiting job never holds back one that fits) instead of\n"
    "                 failing\n"
    "  --overcommit   allow promises beyond a GPU's memory (needs --mem)\n"
    "  --oversubscribe[=DEVICE_SIZE]  virtual device memory: the job may allocate up to --mem\n"
    "                 (a hard cap, which may exceed the GPU), of which at most DEVICE_SIZE\n"
    "                 (not more than --mem) stays on the GPU (default: what is free there when\n"
    "                 the job starts); cudaMalloc past that is served from managed memory the\n"
    "                 driver pages to the host. Arrays, VMM, pools, graph memory fail at\n"
    "                 DEVICE_SIZE (vgpu-run(1)). While it spills beside busy processes and has\n"
    "                 no --core, it is held to its fair share of GPU time: 100 / (1 + those\n"
    "                 processes) (--core 100: not held)\n"
    "  --max-jobs N   refuse to start when N jobs already run on the job's GPU (all users',\n"
    "                 through vgpu daemon; root's max-jobs-per-gpu policy applies too, see\n"
    "                 vgpu-run(1))\n"
    "  --fail-closed  a process of the job that cannot reach the job's limits (VGPU_REGION\n"
    "                 unset or unusable, no free process slot) gets CUDA_ERROR_NOT_PERMITTED\n"
    "                 from context creation and CUDA_ERROR_OUT_OF_MEMORY from allocations\n"
    "                 instead of running unlimited (sets VGPU_FAIL_CLOSED=1 for the command)\n"
    "  --user USER    (root only) run CMD as USER (a name or uid: its groups, and HOME, USER,\n"
    "                 LOGNAME): its limits are root's, which USER's processes can read but not\n"
    "                 change, in the machine-wide directory; vgpu ps/top/limit/wait of root and\n"
    "                 of USER find the job, and only root can change its limits; with --mps,\n"
    "                 USER must reach the MPS daemon's pipe directory\n"
    "  --over-limit kill|stop|warn  (with --user) vgpu run checks the job's memory as the\n"
    "                 driver reports it for its processes (NVML), which the job cannot forge,\n"
    "                 against its limit every 500 ms; over it (by more than 64 MiB or 5%)\n"
    "                 for 2 s: kill (default) SIGKILLs every process of the job, stop\n"
    "                 SIGSTOPs them, warn only says so; said on stderr, shown by vgpu ps\n"
    "  -d, --detach   start the job in the background: print its id (one line) and exit 0 once\n"
    "                 it exists. CMD's stdin is /dev/null; its output (and vgpu run's own\n"
    "                 messages from then on) goes to STATEDIR/jobs/ID.log (0600), removed with\n"
    "                 the job's record. Wait for it and get its status with vgpu wait ID\n"
    "  --help         show this help\n"
    "\n"
    "A limit larger than the GPU is an error, and so is an option given twice \n"
    "(--mem 1G --mem 2G). Change a running job's limit with vgpu limit.\n"
    "When CMD ends, vgpu ps shows the job as ended, and vgpu wait gets its status, for 60 s;\n"
    "its accounting record (GPU time, memory, status) is kept in STATEDIR/acct.db (vgpu acct).\n"
    "Without a daemon, the GPU list NVML gave a job is kept in STATEDIR/gpus.cache while the\n"
    "driver shows the same GPUs (at most VGPU_GPU_CACHE_S s, default 60; 0: never), and checked\n"
    "against NVML while the next job runs.\n"
    "Environment: VGPU_LIBRARY (the libvgpu.so to preload), VGPU_STATE_DIR, VGPU_LOG;\n"
    "VGPU_FAIL_CLOSED=1 in vgpu run's environment works as --fail-closed.\n"
    "\n"
    "Exit status (as env(1)): 125 vgpu run itself failed; 126 CMD found but cannot be run;\n"
    "127 CMD not found; otherwise CMD's status. When CMD dies by a signal, vgpu run dies by\n"
    "the same signal. With --detach: 0 once the job exists, 125 when it could not be made\n"
    "(126/127 and CMD's status are then the job's, for vgpu wait).\n";

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mps/mpsrec.h"
#include "cmd.h"
#include "common.h"
#include "run/libcheck.h"
#include "run/asuser.h"
#include "run/child.h"
#include "run/detach.h"
#include "run/finisher.h"
#include "run/gpus.h"
#include "run/kept_list.h"
#include "run/library.h"
#include "vgpu/acct.h"
#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/jobcount.h"
#include "vgpu/lend.h"
#include "vgpu/log.h"
#include "vgpu/machinedir.h"
#include "vgpu/nvml.h"
#include "vgpu/gpu_cache.h"
#include "vgpu/overlimit.h"
#include "vgpu/placement.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/sched.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_run;

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "gpus", required_argument, NULL, 'N' },
    { "mem", required_argument, NULL, 'm' },
    { "core", required_argument, NULL, 'c' },
    { "core-policy", required_argument, NULL, 'C' },
    { "priority", required_argument, NULL, 'p' },
    { "name", required_argument, NULL, 'n' },
    { "place", required_argument, NULL, 'P' },
    { "wait", no_argument, NULL, 'W' },
    { "overcommit", no_argument, NULL, 'O' },
    { "mps", no_argument, NULL, 'M' },
    { "detach", no_argument, NULL, 'd' },
    { "oversubscribe", optional_argument, NULL, 'S' },
    { "max-jobs", required_argument, NULL, 'J' },
    { "fail-closed", no_argument, NULL, 'F' },
    { "user", required_argument, NULL, 'u' },
    { "over-limit", required_argument, NULL, 'L' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "gpus", VGPU_ARG_OTHER, NULL },
    { "mem", VGPU_ARG_SIZE, NULL },
    { "core", VGPU_ARG_PERCENT, NULL },
    { "name", VGPU_ARG_OTHER, NULL },
    { "place", VGPU_ARG_WORD, "binpack spread" },
    { "core-policy", VGPU_ARG_WORD, "hard soft" },
    { "priority", VGPU_ARG_WORD, "high normal low" },
    { "oversubscribe", VGPU_ARG_SIZE, NULL },
    { "max-jobs", VGPU_ARG_OTHER, NULL },
    { "user", VGPU_ARG_OTHER, NULL },
    { "over-limit", VGPU_ARG_WORD, "kill stop warn" },
    { NULL, 0, NULL },
};

/* vgpu run's own failures all exit 125 (env(1)), whatever the underlying code. */
static int run_fail(const struct vgpu_err *e)
{
    vgpu_err_report(e);
    return VGPU_EXIT_RUN_FAILED;
}

/* One memory value ("4G" or "50%") for a GPU of `total` bytes: the check vgpu limit and
 * vgpu top share (cmd/common.c). */
static bool oversubscribing;   /* --oversubscribe: an absolute --mem may exceed the GPU */

static int parse_mem_value(const char *text, uint64_t total, const char *gpu_desc, uint64_t *request, uint64_t *out,
                           struct vgpu_err *e)
{
    bool pct = *text && text[strlen(text) - 1] == '%';
    if (oversubscribing && strchr(text, ':')) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--oversubscribe cannot be used with --mem REQUEST:LIMIT ('%s'): both let the "
                     "job allocate past what it keeps on the GPU, but REQUEST:LIMIT borrows only what the GPU has free "
                     "and keeps it on the GPU; give --mem REQUEST:LIMIT alone, or --mem SIZE --oversubscribe", text);
        return -1;
    }
    uint64_t req;
    if (vgpu_mem_request_limit(text, oversubscribing && !pct ? 0 : total, gpu_desc, false, &req, out, e) < 0)
        return -1;
    *request = req < *out ? req : 0;   /* 0: all of the limit is promised (nothing is lent) */
    return 0;
}

/* DEVICE_SIZE is the part of the --mem cap that stays on the GPU: one larger than the cap
 * was cut to it without a word (issue 36 L11), and is most likely the two sizes swapped. */
static void oversub_over_cap(const char *dev_size, uint64_t share, uint64_t cap, const char *desc, struct vgpu_err *e)
{
    char a[32], b[32];
    vgpu_err_set(e, VGPU_EXIT_USAGE, "--oversubscribe=%s (%s) is more than the job's --mem (%s) on %s: DEVICE_SIZE "
                 "is the part of --mem that stays on the GPU, and --mem the whole cap; give a smaller DEVICE_SIZE "
                 "or a larger --mem", dev_size, vgpu_format_size(share, a, sizeof a), vgpu_format_size(cap, b, sizeof b),
                 desc);
}

/* --oversubscribe[=DEVICE_SIZE]: how much of each GPU's cap stays on the device (issue 15). */
static int apply_oversub(struct vgpu_job_spec *spec, const struct vgpu_gpu *const *gpus, const char *dev_size,
                         struct vgpu_err *e)
{
    for (unsigned d = 0; d < spec->device_count; d++) {
        const struct vgpu_gpu *g = gpus[d];
        uint64_t cap = spec->dev[d].mem_limit, share;
        char desc[160], a[32], b[32];
        snprintf(desc, sizeof desc, "GPU %u (%s)", g->index, g->uuid);
        if (!cap) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--oversubscribe: job GPU %u has no --mem limit; the limit is the job's "
                         "virtual memory, give one for every GPU", d);
            return -1;
        }
        if (dev_size) {
            if (vgpu_mem_value("--oversubscribe", dev_size, g->mem_total, desc, false, &share, e) < 0)
                return -1;
        } else {
            /* What the GPU has free now: the job spills rather than take memory others use. */
            share = g->mem_total > g->mem_used ? g->mem_total - g->mem_used : 0;
        }
        if (dev_size && share > cap) {
            oversub_over_cap(dev_size, share, cap, desc, e);
            return -1;
        }
        if (share > cap)
            share = cap;   /* the GPU's free memory is more than the cap: all of it stays there */
        if (dev_size && share == 0) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--oversubscribe=%s leaves nothing on %s", dev_size, desc);
            return -1;
        }
        vgpu_debug("oversubscribed: %s of %s on %s", vgpu_format_size(share, a, sizeof a),
                   vgpu_format_size(cap, b, sizeof b), desc);
        spec->dev[d].oversub = true;
        spec->dev[d].mem_device = share;
    }
    return 0;
}

/* Fills spec->dev[].mem_limit from --mem: SIZE / PCT% for all, or IDX:VALUE,... per job GPU. */
static int apply_mem(struct vgpu_job_spec *spec, const struct vgpu_gpu *const *gpus, const char *mem, struct vgpu_err *e)
{
    char desc[160];
    if (!vgpu_mem_per_gpu(mem)) {
        for (unsigned d = 0; d < spec->device_count; d++) {
            snprintf(desc, sizeof desc, "GPU %u (%s)", gpus[d]->index, gpus[d]->uuid);
            if (parse_mem_value(mem, gpus[d]->mem_total, desc, &spec->dev[d].mem_request, &spec->dev[d].mem_limit, e) < 0)
                return -1;
        }
        return 0;
    }
    char *copy = strdup(mem), *save = NULL;
    if (!copy) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    bool seen[VGPU_REGION_MAX_DEVICES] = { false };
    int rc = 0;
    /* strtok_r skips empty fields: a stray comma would pass unnoticed. */
    size_t mlen = strlen(mem);
    if (mem[0] == ',' || mem[mlen - 1] == ',' || strstr(mem, ",,")) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: '%s' has an empty entry (a stray comma); write IDX:SIZE,..., "
                     "e.g. 0:4G,1:8G", mem);
        free(copy);
        return -1;
    }
    for (char *item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        char *end;
        errno = 0;
        unsigned long idx = colon && colon != item ? strtoul(item, &end, 10) : ULONG_MAX;
        if (!colon || colon == item || end != colon || errno || item[0] < '0' || item[0] > '9') {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: bad entry '%s' in '%s': write IDX:SIZE, e.g. 0:4G,1:8G", item, mem);
            rc = -1;
        } else if (idx >= spec->device_count) {
            vgpu_err_set(e, VGPU_EXIT_USAGE,
                         "--mem: '%s' names job GPU %lu, but the job has %u GPU%s (0..%u, in --gpu order)%s", item, idx,
                         spec->device_count, spec->device_count == 1 ? "" : "s", spec->device_count - 1,
                         idx >= VGPU_REGION_MAX_DEVICES ? "; a REQUEST:LIMIT's REQUEST needs a unit (2G:8G)" : "");
            rc = -1;
        } else if (seen[idx]) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: job GPU %lu is given twice in '%s'", idx, mem);
            rc = -1;
        } else {
            seen[idx] = true;
            snprintf(desc, sizeof desc, "GPU %u (%s)", gpus[idx]->index, gpus[idx]->uuid);
            rc = parse_mem_value(colon + 1, gpus[idx]->mem_total, desc, &spec->dev[idx].mem_request,
                                 &spec->dev[idx].mem_limit, e);
        }
    }
    free(copy);
    return rc;
}

static char *join_args(char **argv)
{
    size_t len = 1;
    for (char **a = argv; *a; a++)
        len += strlen(*a) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (char **a = argv; *a; a++) {
        if (a != argv)
            strcat(s, " ");
        strcat(s, *a);
    }
    return s;
}

/* ---- the command -------------------------------------------------------------------------------- */

static int cmd_run(int argc, char **argv)
{
    const char *gpu = NULL, *mem = NULL, *core = NULL, *name = NULL, *place = NULL;
    const char *core_policy = NULL, *priority = NULL;
    bool wait_place = false, overcommit = false, mps = false, detach = false, oversub = false;
    const char *oversub_size = NULL, *max_jobs = NULL, *gpus_arg = NULL;
    bool fail_closed = false;
    const char *user = NULL, *over_limit = NULL;
    int c;
    /* '+': options end at the command, so `vgpu run ls -l` passes -l to ls. */
    while ((c = vgpu_getopt(&vgpu_cmd_run, argc, argv, "+d")) != -1) {
        switch (c) {
        case 'g': if (!vgpu_opt_once(&gpu, "--gpu")) return VGPU_EXIT_RUN_FAILED; break;
        case 'N': if (!vgpu_opt_once(&gpus_arg, "--gpus")) return VGPU_EXIT_RUN_FAILED; break;
        case 'm': if (!vgpu_opt_once(&mem, "--mem")) return VGPU_EXIT_RUN_FAILED; break;
        case 'c': if (!vgpu_opt_once(&core, "--core")) return VGPU_EXIT_RUN_FAILED; break;
        case 'C': if (!vgpu_opt_once(&core_policy, "--core-policy")) return VGPU_EXIT_RUN_FAILED; break;
        case 'p': if (!vgpu_opt_once(&priority, "--priority")) return VGPU_EXIT_RUN_FAILED; break;
        case 'n': if (!vgpu_opt_once(&name, "--name")) return VGPU_EXIT_RUN_FAILED; break;
        case 'P': if (!vgpu_opt_once(&place, "--place")) return VGPU_EXIT_RUN_FAILED; break;
        case 'W': wait_place = true; break;
        case 'O': overcommit = true; break;
        case 'M': mps = true; break;
        case 'd': detach = true; break;
        case 'S':
            if (oversub) {
                vgpu_fail(VGPU_EXIT_USAGE, "--oversubscribe is given twice: give it once");
                return VGPU_EXIT_RUN_FAILED;
            }
            oversub = true;
            oversub_size = optarg;
            break;
        case 'J': if (!vgpu_opt_once(&max_jobs, "--max-jobs")) return VGPU_EXIT_RUN_FAILED; break;
        case 'F': fail_closed = true; break;
        case 'u': if (!vgpu_opt_once(&user, "--user")) return VGPU_EXIT_RUN_FAILED; break;
        case 'L': if (!vgpu_opt_once(&over_limit, "--over-limit")) return VGPU_EXIT_RUN_FAILED; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_RUN_FAILED;
        }
    }
    if (optind >= argc) {
        vgpu_usage_error(&vgpu_cmd_run, "no command to run (usage: vgpu run [OPTIONS] [--] CMD [ARGS...])");
        return VGPU_EXIT_RUN_FAILED;
    }
    char **cmdv = argv + optind;
    struct vgpu_err e;
    /* The library reads it (lib/hook/config.c); set before anything else, it reaches the command. */
    if (fail_closed && vgpu_run_set_env("VGPU_FAIL_CLOSED", "1") != 0)
        return VGPU_EXIT_RUN_FAILED;
    if (user && vgpu_run_resolve_user(user) != 0)
        return VGPU_EXIT_RUN_FAILED;
    /* The memory watch of a --user job (vgpu/overlimit.h): kill unless said otherwise. */
    int over_policy = over_limit ? vgpu_overlimit_policy_parse(over_limit) : VGPU_OVERLIMIT_KILL;
    if (over_policy < 0) {
        static const char *const over_words[] = { "kill", "stop", "warn", NULL };
        vgpu_unknown_word(&vgpu_cmd_run, "--over-limit", over_limit, over_words);
        return VGPU_EXIT_RUN_FAILED;
    }
    if (over_limit && !user)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--over-limit applies to jobs started with --user, whose limits are "
                         "root's; a job of your own user is held by libvgpu.so alone (vgpu-security(7))");
    if (name && !vgpu_job_name_valid(name))
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "bad job name '%s': use 1 to %d letters, digits, '.', '_' or '-', not "
                         "starting with '.' or '-'", name, VGPU_JOB_NAME_LEN - 1);
    unsigned core_pct = 0;
    /* 0 would stop the job: the range is 1..100. */
    if (core && vgpu_parse_percent_range(core, 1, 100, &core_pct, "--core", &e) < 0)
        return run_fail(&e);
    /* The compute limiter's policy and priority (libvgpu.so's limiter.c, vgpu-run(1)). */
    static const char *const policies_core[] = { "hard", "soft", NULL };
    static const char *const priorities[] = { "low", "normal", "high", NULL };
    enum vgpu_core_policy core_pol = VGPU_CORE_HARD;
    int prio = 0;
    if (core_policy) {
        if (strcmp(core_policy, "hard") && strcmp(core_policy, "soft")) {
            vgpu_unknown_word(&vgpu_cmd_run, "--core-policy", core_policy, policies_core);
            return VGPU_EXIT_RUN_FAILED;
        }
        core_pol = strcmp(core_policy, "soft") ? VGPU_CORE_HARD : VGPU_CORE_SOFT;
    }
    if (priority) {
        if (!strcmp(priority, "low")) prio = -1;
        else if (!strcmp(priority, "high")) prio = 1;
        else if (strcmp(priority, "normal")) {
            vgpu_unknown_word(&vgpu_cmd_run, "--priority", priority, priorities);
            return VGPU_EXIT_RUN_FAILED;
        }
    }
    if (mps && (core_policy || priority))
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--core-policy and --priority belong to vgpu's GPU-time limit; with "
                         "--mps, --core is MPS's active thread percentage");
    /* --priority alone is a class of its own (high: a service that preempts at once; low:
     * background that takes what others leave; vgpu-run(1)); a policy needs a cap to apply to. */
    if (core_policy && !core)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--core-policy applies to the GPU-time limit: give --core PCT too (--priority "
                         "high or low alone needs no --core)");
    if (oversub && !mem)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--oversubscribe needs --mem SIZE: the job's memory cap (it may be "
                         "larger than the GPU)");
    if (oversub && mps)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--oversubscribe cannot be used with --mps: MPS holds the client's "
                         "device memory at its pinned limit");
    /* --overcommit lets the memory a job promises (its --mem) exceed what a GPU has left;
     * without --mem a job promises nothing, and the option would be silently moot. */
    if (overcommit && !mem)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--overcommit lets the job's --mem promise exceed what a GPU has not "
                         "promised yet; without --mem the job promises no memory: give --mem SIZE, or drop "
                         "--overcommit");
    if (oversub_size && !*oversub_size)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--oversubscribe=: give a size (--oversubscribe=20G), or no '='");
    oversubscribing = oversub;
    unsigned max_jobs_n = 0;
    if (max_jobs && vgpu_jobcount_parse(max_jobs, "--max-jobs", &max_jobs_n, &e) < 0)
        return run_fail(&e);
    /* --gpus N: N GPUs chosen together (run/gpus.c), with or without --mem SIZE. */
    unsigned gpus_n = 0;
    if (gpus_arg && vgpu_run_gpus_parse(gpus_arg, gpu, mem, &gpus_n, &e) < 0)
        return run_fail(&e);
    /* Placement (vgpu-run(1)): --mem SIZE without --gpu lets vgpu choose the GPU. */
    struct vgpu_place_req preq = { .policy = VGPU_PLACE_BINPACK, .overcommit = overcommit, .wait = wait_place,
                                   .count = gpus_n };
    /* Only an absolute size places: a percentage or IDX:SIZE list describes the job's GPUs, which
     * without --gpu are all of them (vgpu-run(1)). */
    bool placing = (mem && !gpu && !strchr(mem, '%') && !vgpu_mem_per_gpu(mem)) || gpus_n;
    if (place) {
        int pol = vgpu_place_policy_parse(place);
        if (pol < 0) {
            static const char *const policies[] = { "binpack", "spread", NULL };
            vgpu_unknown_word(&vgpu_cmd_run, "--place policy", place, policies);
            return VGPU_EXIT_RUN_FAILED;
        }
        preq.policy = (enum vgpu_place_policy)pol;
    }
    if ((place || (wait_place && !max_jobs)) && !placing)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--place and --wait choose a GPU: give --mem SIZE and no --gpu "
                         "(or --wait with --max-jobs, to wait for the job count)");
    /* The same check as with --gpu, before any GPU is looked at: the real reason, not "vgpu
     * needs a size" (the total is not known yet; placement compares it with each GPU). */
    /* A borrower (--mem REQUEST:LIMIT) is promised its REQUEST only: that is what placement counts. */
    uint64_t mem_cap;
    if (placing && mem && vgpu_mem_request_limit(mem, 0, "the GPU", false, &preq.want, &mem_cap, &e) < 0)
        return run_fail(&e);
    if (placing && oversub_size) {
        /* Oversubscribed, the job promises only what stays on the device. */
        uint64_t share;
        if (vgpu_mem_value("--oversubscribe", oversub_size, 0, "the GPU", false, &share, &e) < 0)
            return run_fail(&e);
        /* One larger than --mem is refused once the GPU is known (apply_oversub), after the
         * check against the GPU's own size, the first thing to fix. */
        if (share < preq.want)
            preq.want = share;
    }
    char place_dir[4096] = "";
    /* A VGPU_MACHINE_DIR that is not there is a typo, or a test's directory gone: the job would
     * run without the arbiter that lives there, and say nothing of it. */
    if (vgpu_machinedir_named_missing(&e))
        return run_fail(&e);

    int rc = VGPU_EXIT_RUN_FAILED;
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    /* With an arbiter, the GPUs are the ones it lists now (vgpu/arbiter.h): this process then
     * loads no NVML before the command starts, which cost ~20 ms of each job's start on an H200
     * (issue 34); the accounting loads it at its first look, 200 ms into the job. A job of several
     * GPUs (their topology), an oversubscribed one (each GPU's memory in use now) and an MPS client
     * ask NVML themselves. */
    bool one_gpu = list && gpus_n <= 1 && !oversub && !mps;
    bool listed = one_gpu && vgpu_place_gpus_from_arbiter(list) == 1;
    /* Without one, the list NVML gave an earlier job, while the driver shows the same GPUs
     * (vgpu/gpu_cache.h): checked against NVML while the command runs (run/kept_list.h). */
    bool kept = one_gpu && !listed && vgpu_run_kept_list(list);
    listed |= kept;
    struct vgpu_nvml *nv = listed ? NULL : vgpu_nvml_open(&e);
    if (!nv && !listed) {
        free(list);
        vgpu_error("%s", e.msg);
        return vgpu_fail(VGPU_EXIT_RUN_FAILED,
                         "vgpu run needs NVML to find the GPUs%s; without a working driver there is nothing to share",
                         mem ? " and their total memory (to check --mem)" : "");
    }
    struct vgpu_job_spec *spec = calloc(1, sizeof *spec);
    struct vgpu_gpu_sel sel;
    char *cmdline = join_args(cmdv);
    struct vgpu_region r = { .fd = -1, .use_fd = -1 };
    bool created = false;
    int sock = -1;                      /* --detach: the supervisor's end, to send the job id */
    const struct vgpu_gpu *gpus[VGPU_REGION_MAX_DEVICES];
    if (!list || !spec || !cmdline) {
        vgpu_fail(rc, "out of memory");
        goto out;
    }
    if ((!listed && vgpu_gpus_enumerate(nv, list, &e) < 0) || vgpu_gpus_select_default(list, gpu, &sel, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    if (!listed)
        vgpu_gpu_cache_store(list);     /* for the next job's start (only a list that may be kept) */
    if (sel.count == 0) {
        vgpu_fail(rc, "no GPU selected%s", gpu ? "" : ": the driver lists none");
        goto out;
    }
    {
        /* A lost GPU is said by name: a GPU chosen by hand cannot take the job, and placement
         * chooses among the others (it fails saying so when none is left). */
        unsigned usable = 0;
        const struct vgpu_gpu *lost = NULL;
        char why[128];
        for (unsigned d = 0; d < sel.count; d++) {
            const struct vgpu_gpu *g = &list->gpu[sel.pos[d]];
            if (!vgpu_gpu_trouble(g, why, sizeof why))
                usable++;
            else if (!lost)
                lost = g;
        }
        if (lost && (!placing || usable == 0)) {
            vgpu_gpu_trouble(lost, why, sizeof why);
            vgpu_fail(rc, "GPU %u %s, so the job cannot run there; %s (vgpu list shows the GPUs)", lost->index, why,
                      placing ? "no other GPU is usable" : "choose another GPU with --gpu");
            goto out;
        }
    }
    if (placing && oversub && !oversub_size) {
        /* The cap may exceed every GPU: place by what can stay on one at most. */
        uint64_t biggest = 0;
        for (unsigned i = 0; i < list->count; i++)
            if (list->gpu[i].mem_total > biggest)
                biggest = list->gpu[i].mem_total;
        if (biggest && preq.want > biggest)
            preq.want = biggest;
    }
    if (placing) {
        unsigned chosen[VGPU_MAX_GPUS];
        struct vgpu_topology *topo = gpus_n > 1 ? malloc(sizeof *topo) : NULL;
        if (topo)
            vgpu_gpus_topology(nv, list, topo);
        preq.topo = topo;
        if (vgpu_statedir(place_dir, sizeof place_dir, true, &e) < 0 ||
            vgpu_place(place_dir, list, &preq, chosen, &e) < 0) {
            place_dir[0] = 0;
            free(topo);
            rc = run_fail(&e);
            goto out;
        }
        sel.count = gpus_n ? gpus_n : 1;
        memcpy(sel.pos, chosen, sel.count * sizeof *chosen);
        if (gpus_n)
            vgpu_run_gpus_say(list, chosen, sel.count, topo);
        else
            vgpu_info("placed on GPU %u (%s)", list->gpu[chosen[0]].index, list->gpu[chosen[0]].uuid);
        free(topo);
    }
    if (sel.count > VGPU_REGION_MAX_DEVICES) {
        vgpu_fail(rc, "a job can have at most %d GPUs, %u are selected; choose with --gpu", VGPU_REGION_MAX_DEVICES,
                  sel.count);
        goto out;
    }
    spec->device_count = sel.count;
    spec->name = name;
    spec->cmdline = cmdline;
    for (unsigned d = 0; d < sel.count; d++) {
        const struct vgpu_gpu *g = &list->gpu[sel.pos[d]];
        gpus[d] = g;
        spec->dev[d].uuid = g->uuid;
        spec->dev[d].nvml_index = g->index;
        spec->dev[d].is_mig = g->is_mig;
        spec->dev[d].mem_total = g->mem_total;
        /* Under MPS kernels of clients run side by side: the SM cap replaces the time limiter. */
        spec->dev[d].core_limit = mps ? 0 : core_pct;
        spec->dev[d].core_policy = core_pol;
        spec->dev[d].priority = prio;
        if (!g->uuid[0]) {
            vgpu_fail(rc, "GPU %u has no UUID in NVML, so the job cannot be restricted to it", g->index);
            goto out;
        }
        if (mem && !g->mem_total) {
            vgpu_fail(rc, "--mem: NVML does not report the total memory of GPU %u (%s), so the limit cannot be checked",
                      g->index, g->uuid);
            goto out;
        }
    }
    if (mem && apply_mem(spec, gpus, mem, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    if (oversub && apply_oversub(spec, gpus, oversub_size, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    for (unsigned d = 0; mps && d < sel.count; d++)
        if (spec->dev[d].mem_request) {
            vgpu_fail(rc, "--mem REQUEST:LIMIT cannot be used with --mps: MPS pins the client's device memory at one "
                      "limit, so nothing can be lent; give --mem SIZE");
            goto out;
        }
    if (mps) {
        const char *uuids[VGPU_REGION_MAX_DEVICES];
        uint64_t pinned[VGPU_REGION_MAX_DEVICES];
        for (unsigned d = 0; d < sel.count; d++) {
            uuids[d] = spec->dev[d].uuid;
            pinned[d] = spec->dev[d].mem_limit;
        }
        if (vgpu_mps_client_setup(uuids, pinned, sel.count, core_pct,
                                  vgpu_as_user.on ? vgpu_as_user.uid : getuid(), &e) < 0) {
            rc = run_fail(&e);
            goto out;
        }
    }
    if (core_pct && !mps)
        vgpu_arb_note_alone("run");   /* the job will be scheduled: say once with whom */
    if (mem && !placing) {
        /* GPUs chosen by hand are promised too, so placement counts them. */
        uint64_t bytes[VGPU_REGION_MAX_DEVICES];
        for (unsigned d = 0; d < sel.count; d++)
            bytes[d] = spec->dev[d].oversub       ? spec->dev[d].mem_device
                       : spec->dev[d].mem_request ? spec->dev[d].mem_request   /* a borrower's promise */
                                                  : spec->dev[d].mem_limit;
        if (vgpu_statedir(place_dir, sizeof place_dir, true, &e) < 0 ||
            vgpu_place_reserve(place_dir, list, sel.pos, bytes, sel.count, overcommit, &e) < 0) {
            place_dir[0] = 0;
            rc = run_fail(&e);
            goto out;
        }
    }

    char statedir[4096], library[4096];
    if (vgpu_statedir(statedir, sizeof statedir, true, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    /* Listing the jobs also removes those that ended long enough ago (vgpu_jobs_list), so
     * ended jobs do not pile up where nothing else lists them. It reads every kept job's region
     * (on an H200 machine with 30 kept jobs, 136 opens before the command could start), so it is
     * done here only for a --name, which must be checked before; else once the command runs. */
    struct vgpu_job_ref *refs = NULL;
    size_t njobs = 0;
    if (name && *name && vgpu_jobs_list_all(statedir, &refs, &njobs, NULL, &e) < 0) {
        if (name && *name) {
            rc = run_fail(&e);
            goto out;
        }
        vgpu_debug("%s", e.msg);
        refs = NULL;
        njobs = 0;
    }
    /* The name of a job that has ended (and is kept a while for vgpu wait) may be reused. */
    const struct vgpu_job_ref *same = NULL;
    for (size_t i = 0; name && *name && i < njobs && !same; i++)
        if (refs[i].readable && refs[i].state != VGPU_JOB_EXITED && strcmp(refs[i].name, name) == 0)
            same = &refs[i];
    /* An exact id wins over a name in every lookup (vgpu_jobs_find): a job named after another
     * job's id could never be reached by its name, and vgpu limit NAME would change the other. */
    const struct vgpu_job_ref *id_clash = NULL;
    for (size_t i = 0; name && *name && i < njobs && !same && !id_clash; i++)
        if (strcmp(refs[i].id, name) == 0)
            id_clash = &refs[i];
    if (same)
        vgpu_fail(rc, "--name: a job named '%s' is running (id %s); choose another name", same->name, same->id);
    else if (id_clash)
        vgpu_fail(rc, "--name: '%s' is the id of %s job; vgpu limit/wait would reach that job, not this one: "
                  "choose another name", id_clash->id, id_clash->state == VGPU_JOB_EXITED ? "an ended" : "a running");
    if (id_clash)
        same = id_clash;
    free(refs);
    if (same)
        goto out;
    if (vgpu_run_find_library(statedir, library, sizeof library, &e) < 0 ||
        vgpu_run_check_library(library, getenv("VGPU_LIBRARY") && *getenv("VGPU_LIBRARY") ? "VGPU_LIBRARY" : NULL,
                               &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    {
        /* The split count: jobs per GPU (vgpu/jobcount.h), after placement chose, and after the
         * library is there (a full state directory is said by what fills it first). */
        const char *uuids[VGPU_REGION_MAX_DEVICES];
        for (unsigned d = 0; d < sel.count; d++)
            uuids[d] = spec->dev[d].uuid;
        if (vgpu_jobcount_enter(uuids, sel.count, max_jobs_n, wait_place, &e) < 0) {
            rc = run_fail(&e);
            goto out;
        }
    }
    /* The job's accounting reads NVML from its first look on: it keeps this handle rather than
     * initialise NVML again (not across --detach's fork, which does not exec). */
    if (nv && detach)
        vgpu_nvml_close(nv);
    else if (nv)
        vgpu_acct_nvml_adopt(nv);
    nv = NULL;
    if (detach) {
        /* Everything is checked: from here the supervisor (the child, which waits for the
         * command) makes the job, and tells the caller its id or fails saying why. */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
            vgpu_fail(rc, "--detach: socketpair: %s", strerror(errno));
            goto out;
        }
        pid_t caller = getpid();
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            vgpu_fail(rc, "--detach: fork: %s", strerror(errno));
            close(sv[0]);
            close(sv[1]);
            goto out;
        }
        if (pid > 0) {
            close(sv[1]);
            /* Our promise, if the supervisor did not take it over, is released at out. */
            rc = vgpu_run_detach_wait(pid, sv[0]);
            goto out;
        }
        close(sv[0]);
        sock = sv[1];
        setsid();   /* no terminal, not in the caller's process group: its ^C is not ours */
        /* A promise lasts as long as the process that holds it (placement.h): the caller is
         * about to exit, so the supervisor takes it over, under the placement lock. */
        if (place_dir[0] && vgpu_place_adopt(place_dir, caller, &e) < 0) {
            place_dir[0] = 0;
            rc = run_fail(&e);
            goto out;
        }
        if (vgpu_jobcount_adopt(caller, &e) < 0) {
            rc = run_fail(&e);
            goto out;
        }
    }
    char jobdir[4096];
    snprintf(jobdir, sizeof jobdir, "%s", statedir);
    if (vgpu_as_user.on) {
        /* Limits the user cannot raise: root's files in root's directory (vgpu/userjobs.h). */
        spec->split = true;
        spec->job_uid = vgpu_as_user.uid;
        spec->job_gid = vgpu_as_user.gid;
        spec->over_limit = (unsigned)over_policy;
        if (vgpu_userjobs_prepare(vgpu_as_user.uid, vgpu_as_user.gid, jobdir, sizeof jobdir, &e) < 0) {
            rc = run_fail(&e);
            goto out;
        }
        vgpu_as_user.library = library;
        vgpu_as_user.mps = mps;
    }
    if (vgpu_region_create(&r, jobdir, spec, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    created = true;
    char region_path[PATH_MAX];
    if (!realpath(r.path, region_path))
        snprintf(region_path, sizeof region_path, "%s", r.path);
    if (vgpu_run_prepare_environment(region_path, library, spec) != 0)
        goto out;
    if (detach) {
        int d = vgpu_run_detach_io(&r, sock, &e);
        close(sock);
        sock = -1;
        if (d < 0) {
            rc = run_fail(&e);
            goto out;
        }
    }
    vgpu_acct_arb_start(r.info->id);   /* the daemon then takes this job's record from this process only */
    vgpu_debug("job %s: %s, LD_PRELOAD=%s", r.info->id, region_path, getenv("LD_PRELOAD"));
    rc = vgpu_run_child(&r, cmdv, place_dir[0] ? place_dir : NULL, name && *name ? NULL : statedir);
out:
    if (sock >= 0)
        close(sock);
    if (place_dir[0])
        vgpu_place_release(place_dir);
    vgpu_jobcount_leave();
    if (created)
        vgpu_sched_sweep();   /* schedules whose last user could not remove them (vgpu/sched.h) */
    if (created) {
        vgpu_lend_share_end(&r);   /* its lending answer (vgpu/lend.h) ends with the job */
        /* An ended job stays, EXITED with its status, for vgpu ps and vgpu wait; the next
         * listing after VGPU_EXITED_KEEP_DEFAULT_S removes it (lib/core/region/jobs.c). A job whose
         * command never started is removed now. */
        if (atomic_load(&r.hdr->state) != VGPU_JOB_EXITED)
            vgpu_region_remove(&r, &e);
        else if (vgpu_run_finish_later(&r))
            ;   /* the finisher waits for the job's last sampling window and records it */
        else if (vgpu_acct_record_job(&r, &e) < 0)
            /* The command's status stays ours; the region keeps the record (vgpu/acct.h). */
            vgpu_warn("job %s: its accounting record could not be written: %s; it stays in the job's region, and "
                      "the next vgpu acct or vgpu ps writes it", r.info->id, e.msg);
        vgpu_region_close(&r);
    }
    free(cmdline);
    free(spec);
    free(list);
    if (nv)
        vgpu_nvml_close(nv);
    if (rc < 0)
        vgpu_run_die_by_signal(-rc);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_run = {
    .name = "run",
    .fn = cmd_run,
    .summary = "run a command as a job with GPU memory (and time) limits",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .operand = VGPU_ARG_COMMAND,
};
