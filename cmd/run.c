/* vgpu run: start a command as a job with GPU limits. */
static const char usage[] =
    "usage: vgpu run [--gpu SEL] [--mem SIZE|PCT%|IDX:SIZE,...] [--core PCT] [--core-policy hard|soft]\n"
    "                [--priority high|normal|low] [--name NAME] [--mps] [--] CMD [ARGS...]\n"
    "       vgpu run --mem SIZE [--place binpack|spread] [--wait] [--overcommit] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD as a new job: it sees only the selected GPUs (CUDA_VISIBLE_DEVICES is set to their\n"
    "UUIDs, and NVML is filtered to match), and libvgpu.so (preloaded) holds its GPU memory under\n"
    "the limit. Every process the command starts belongs to the job and shares its limit.\n"
    "\n"
    "  --gpu SEL      the job's GPUs: an index, a UUID or its unique start, a PCI bus id, a MIG\n"
    "                 UUID, a comma list of those, or 'all' (default: all)\n"
    "  --mem SIZE     memory limit on every GPU of the job: 4G, 512MiB, 1.5GiB ...\n"
    "  --mem PCT%     a share of each GPU's total memory (50%)\n"
    "  --mem IDX:SIZE,...  per job GPU (IDX counts the job's GPUs from 0, in --gpu order);\n"
    "                 GPUs not named have no limit\n"
    "  --core PCT     cap the job's share of GPU time on each of its GPUs at PCT percent\n"
    "  --core-policy hard|soft  hard (default): never more than PCT; soft: also use GPU time\n"
    "                 that no other vgpu job on the GPU wants\n"
    "  --priority high|normal|low  who goes first when capped jobs compete for a GPU\n"
    "                 (default normal; low is still served at least once a second)\n"
    "  --mps          run CMD as a client of the MPS daemon ('vgpu mps start'): --core becomes\n"
    "                 MPS's active thread percentage (a cap on the SMs its kernels use, not\n"
    "                 GPU time) and --mem also its pinned device memory limit\n"
    "  --name NAME    a name for vgpu ps/limit (letters, digits, '.', '_', '-'); must be unique\n"
    "  --place POLICY with --mem SIZE (not PCT% or IDX:SIZE) and no --gpu, vgpu chooses one GPU\n"
    "                 (or MIG instance) whose memory not yet promised to running jobs fits:\n"
    "                 binpack (default: the fullest that fits) or spread (the emptiest)\n"
    "  --wait         when none fits, wait in line (first come, first served) instead of failing\n"
    "  --overcommit   allow promises beyond a GPU's memory\n"
    "  --help         show this help\n"
    "\n"
    "A limit larger than the GPU is an error. Change a running job's limit with vgpu limit.\n"
    "Environment: VGPU_LIBRARY (the libvgpu.so to preload), VGPU_STATE_DIR, VGPU_LOG.\n"
    "\n"
    "Exit status (as env(1)): 125 vgpu run itself failed; 126 CMD found but cannot be run;\n"
    "127 CMD not found; otherwise CMD's status. When CMD dies by a signal, vgpu run dies by\n"
    "the same signal.\n";

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mps/mpsrec.h"
#include "cmd.h"
#include "run/library.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/placement.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_run;

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "mem", required_argument, NULL, 'm' },
    { "core", required_argument, NULL, 'c' },
    { "core-policy", required_argument, NULL, 'C' },
    { "priority", required_argument, NULL, 'p' },
    { "name", required_argument, NULL, 'n' },
    { "place", required_argument, NULL, 'P' },
    { "wait", no_argument, NULL, 'W' },
    { "overcommit", no_argument, NULL, 'O' },
    { "mps", no_argument, NULL, 'M' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "mem", VGPU_ARG_SIZE, NULL },
    { "core", VGPU_ARG_PERCENT, NULL },
    { "name", VGPU_ARG_OTHER, NULL },
    { "place", VGPU_ARG_WORD, "binpack spread" },
    { "core-policy", VGPU_ARG_WORD, "hard soft" },
    { "priority", VGPU_ARG_WORD, "high normal low" },
    { NULL, 0, NULL },
};

/* vgpu run's own failures all exit 125 (env(1)), whatever the underlying code. */
static int run_fail(const struct vgpu_err *e)
{
    vgpu_err_report(e);
    return VGPU_EXIT_RUN_FAILED;
}

/* One memory value ("4G" or "50%") for a GPU of `total` bytes. */
static int parse_mem_value(const char *text, uint64_t total, const char *gpu_desc, uint64_t *out, struct vgpu_err *e)
{
    size_t len = strlen(text);
    if (len > 0 && text[len - 1] == '%') {
        unsigned pct;
        if (vgpu_parse_percent(text, &pct, "--mem", e) < 0)
            return -1;
        if (pct == 0) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: '%s' leaves no memory at all; give 1%% to 100%%", text);
            return -1;
        }
        *out = total / 100 * pct + total % 100 * pct / 100;
        return 0;
    }
    if (vgpu_parse_size(text, out, "--mem", e) < 0)
        return -1;
    if (*out == 0) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: '%s' leaves no memory at all; give a size such as 4G", text);
        return -1;
    }
    if (total && *out > total) {
        char a[32], b[32];
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s (%s) is larger than %s (%s total)", text,
                     vgpu_format_size(*out, a, sizeof a), gpu_desc, vgpu_format_size(total, b, sizeof b));
        return -1;
    }
    return 0;
}

/* Fills spec->dev[].mem_limit from --mem: SIZE / PCT% for all, or IDX:VALUE,... per job GPU. */
static int apply_mem(struct vgpu_job_spec *spec, const struct vgpu_gpu *const *gpus, const char *mem, struct vgpu_err *e)
{
    char desc[160];
    if (!strchr(mem, ':')) {
        for (unsigned d = 0; d < spec->device_count; d++) {
            snprintf(desc, sizeof desc, "GPU %u (%s)", gpus[d]->index, gpus[d]->uuid);
            if (parse_mem_value(mem, gpus[d]->mem_total, desc, &spec->dev[d].mem_limit, e) < 0)
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
                         "--mem: '%s' names job GPU %lu, but the job has %u GPU%s (0..%u, in --gpu order)", item, idx,
                         spec->device_count, spec->device_count == 1 ? "" : "s", spec->device_count - 1);
            rc = -1;
        } else if (seen[idx]) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem: job GPU %lu is given twice in '%s'", idx, mem);
            rc = -1;
        } else {
            seen[idx] = true;
            snprintf(desc, sizeof desc, "GPU %u (%s)", gpus[idx]->index, gpus[idx]->uuid);
            rc = parse_mem_value(colon + 1, gpus[idx]->mem_total, desc, &spec->dev[idx].mem_limit, e);
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

/* ---- the child and its signals ---------------------------------------------------------------- */

static volatile sig_atomic_t child_pid;

/* Signals sent to vgpu run with kill(2) go on to the command. Signals from the terminal
 * (si_code SI_KERNEL) already reached the whole foreground process group, the command
 * included: forwarding those would deliver them twice. */
static void forward(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && si && si->si_code <= 0)
        kill((pid_t)child_pid, sig);
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void install_forwarding(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
}

static void restore_signals(void)
{
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        signal(forwarded[i], SIG_DFL);
}

/* Dies by `sig` as the command did, without a second core dump. */
static void die_by_signal(int sig)
{
    struct rlimit nocore = { 0, 0 };
    setrlimit(RLIMIT_CORE, &nocore);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    /* A signal whose default is to continue or be ignored (SIGCHLD, SIGCONT...): 128+N. */
    exit(128 + sig);
}

static int set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) < 0)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "cannot set %s: %s", name, strerror(errno));
    return 0;
}

static int prepare_environment(const char *region_path, const char *library, const struct vgpu_job_spec *spec)
{
    char visible[VGPU_REGION_MAX_DEVICES * (VGPU_UUID_LEN + 1)] = "";
    size_t used = 0;
    for (unsigned d = 0; d < spec->device_count; d++)
        used += (size_t)snprintf(visible + used, sizeof visible - used, "%s%s", d ? "," : "", spec->dev[d].uuid);
    const char *old = getenv("LD_PRELOAD");
    size_t plen = strlen(library) + (old ? strlen(old) + 1 : 0) + 1;
    char *preload = malloc(plen);
    if (!preload)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "out of memory");
    /* Prepended: our hooks must see the driver calls before any other preloaded library. */
    snprintf(preload, plen, "%s%s%s", library, old && *old ? " " : "", old && *old ? old : "");
    int rc = set_env("CUDA_VISIBLE_DEVICES", visible) || set_env("VGPU_REGION", region_path) ||
             set_env("LD_PRELOAD", preload);
    free(preload);
    return rc ? VGPU_EXIT_RUN_FAILED : 0;
}

static int run_child(struct vgpu_region *r, char **argv)
{
    struct vgpu_err e;
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&block, forwarded[i]);
    /* Block until child_pid is known, so a signal in between is forwarded, not lost. */
    sigprocmask(SIG_BLOCK, &block, &old);
    install_forwarding();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "cannot start %s: fork: %s", argv[0], strerror(errno));
    }
    if (pid == 0) {
        restore_signals();
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(argv[0], argv);
        int err = errno;
        bool missing = err == ENOENT || err == ENOTDIR;
        vgpu_fail(0, "cannot run '%s': %s%s", argv[0], strerror(err),
                  missing ? " (not found in PATH)" : err == EACCES ? " (not executable?)" : "");
        _exit(missing ? VGPU_EXIT_RUN_NOTFOUND : VGPU_EXIT_RUN_NOEXEC);
    }
    child_pid = pid;
    vgpu_region_set_state(r, VGPU_JOB_RUNNING, 0, 0, &e);
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            vgpu_error("lost the command (pid %d): waitpid: %s", (int)pid, strerror(errno));
            return VGPU_EXIT_RUN_FAILED;
        }
    child_pid = 0;
    restore_signals();
    if (WIFSIGNALED(status)) {
        vgpu_region_set_state(r, VGPU_JOB_EXITED, -1, WTERMSIG(status), &e);
        return -WTERMSIG(status);
    }
    vgpu_region_set_state(r, VGPU_JOB_EXITED, WEXITSTATUS(status), 0, &e);
    return WEXITSTATUS(status);
}

/* ---- the command -------------------------------------------------------------------------------- */

static int cmd_run(int argc, char **argv)
{
    const char *gpu = NULL, *mem = NULL, *core = NULL, *name = NULL, *place = NULL;
    const char *core_policy = NULL, *priority = NULL;
    bool wait_place = false, overcommit = false, mps = false;
    int c;
    /* '+': options end at the command, so `vgpu run ls -l` passes -l to ls. */
    while ((c = vgpu_getopt(&vgpu_cmd_run, argc, argv, "+")) != -1) {
        switch (c) {
        case 'g': gpu = optarg; break;
        case 'm': mem = optarg; break;
        case 'c': core = optarg; break;
        case 'C': core_policy = optarg; break;
        case 'p': priority = optarg; break;
        case 'n': name = optarg; break;
        case 'P': place = optarg; break;
        case 'W': wait_place = true; break;
        case 'O': overcommit = true; break;
        case 'M': mps = true; break;
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
    unsigned core_pct = 0;
    if (core && vgpu_parse_percent(core, &core_pct, "--core", &e) < 0)
        return run_fail(&e);
    if (core && core_pct == 0)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--core: '%s' would stop the job; give 1 to 100", core);
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
    if ((core_policy || priority) && !core)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--core-policy and --priority apply to the GPU-time limit: give --core PCT too");
    /* Placement (vgpu-run(1)): --mem SIZE without --gpu lets vgpu choose the GPU. */
    struct vgpu_place_req preq = { .policy = VGPU_PLACE_BINPACK, .overcommit = overcommit, .wait = wait_place };
    /* Only an absolute size places: a percentage or IDX:SIZE list describes the job's GPUs, which
     * without --gpu are all of them (vgpu-run(1)). */
    bool placing = mem && !gpu && !strpbrk(mem, "%:");
    if (place) {
        int pol = vgpu_place_policy_parse(place);
        if (pol < 0) {
            static const char *const policies[] = { "binpack", "spread", NULL };
            vgpu_unknown_word(&vgpu_cmd_run, "--place policy", place, policies);
            return VGPU_EXIT_RUN_FAILED;
        }
        preq.policy = (enum vgpu_place_policy)pol;
    }
    if ((place || wait_place) && !placing)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "--place and --wait choose a GPU: give --mem SIZE and no --gpu");
    if (placing && vgpu_parse_size(mem, &preq.want, "--mem", &e) < 0) {
        vgpu_err_set(&e, VGPU_EXIT_USAGE, "--mem '%.100s': to choose a GPU, vgpu needs a size such as 4G (or give "
                     "--gpu)", mem);
        return run_fail(&e);
    }
    char place_dir[4096] = "";

    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv) {
        vgpu_error("%s", e.msg);
        return vgpu_fail(VGPU_EXIT_RUN_FAILED,
                         "vgpu run needs NVML to find the GPUs%s; without a working driver there is nothing to share",
                         mem ? " and their total memory (to check --mem)" : "");
    }
    int rc = VGPU_EXIT_RUN_FAILED;
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    struct vgpu_job_spec *spec = calloc(1, sizeof *spec);
    struct vgpu_gpu_sel sel;
    char *cmdline = join_args(cmdv);
    struct vgpu_region r = { .fd = -1 };
    bool created = false;
    const struct vgpu_gpu *gpus[VGPU_REGION_MAX_DEVICES];
    if (!list || !spec || !cmdline) {
        vgpu_fail(rc, "out of memory");
        goto out;
    }
    if (vgpu_gpus_enumerate(nv, list, &e) < 0 || vgpu_gpus_select_default(list, gpu, &sel, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    if (sel.count == 0) {
        vgpu_fail(rc, "no GPU selected%s", gpu ? "" : ": the driver lists none");
        goto out;
    }
    if (placing) {
        unsigned chosen;
        if (vgpu_statedir(place_dir, sizeof place_dir, true, &e) < 0 ||
            vgpu_place(place_dir, list, &preq, &chosen, &e) < 0) {
            place_dir[0] = 0;
            rc = run_fail(&e);
            goto out;
        }
        sel.count = 1;
        sel.pos[0] = chosen;
        vgpu_info("placed on GPU %u (%s)", list->gpu[chosen].index, list->gpu[chosen].uuid);
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
    if (mps) {
        const char *uuids[VGPU_REGION_MAX_DEVICES];
        uint64_t pinned[VGPU_REGION_MAX_DEVICES];
        for (unsigned d = 0; d < sel.count; d++) {
            uuids[d] = spec->dev[d].uuid;
            pinned[d] = spec->dev[d].mem_limit;
        }
        if (vgpu_mps_client_setup(uuids, pinned, sel.count, core_pct, &e) < 0) {
            rc = run_fail(&e);
            goto out;
        }
    }
    if (mem && !placing) {
        /* GPUs chosen by hand are promised too, so placement counts them. */
        uint64_t bytes[VGPU_REGION_MAX_DEVICES];
        for (unsigned d = 0; d < sel.count; d++)
            bytes[d] = spec->dev[d].mem_limit;
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
    if (name && *name) {
        struct vgpu_region other;
        if (vgpu_jobs_find(statedir, name, VGPU_REGION_JOB, &other, &e) == 0) {
            bool same = strcmp(other.hdr->name, name) == 0;
            char id[VGPU_JOB_ID_LEN];
            snprintf(id, sizeof id, "%s", other.hdr->id);
            vgpu_region_close(&other);
            if (same) {
                vgpu_fail(rc, "--name: a job named '%s' is running (id %s); choose another name", name, id);
                goto out;
            }
        }
    }
    if (vgpu_run_find_library(statedir, library, sizeof library, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    if (vgpu_region_create(&r, statedir, spec, &e) < 0) {
        rc = run_fail(&e);
        goto out;
    }
    created = true;
    char region_path[PATH_MAX];
    if (!realpath(r.path, region_path))
        snprintf(region_path, sizeof region_path, "%s", r.path);
    vgpu_nvml_close(nv);
    nv = NULL;
    if (prepare_environment(region_path, library, spec) != 0)
        goto out;
    vgpu_debug("job %s: %s, LD_PRELOAD=%s", r.hdr->id, region_path, getenv("LD_PRELOAD"));
    rc = run_child(&r, cmdv);
out:
    if (place_dir[0])
        vgpu_place_release(place_dir);
    if (created) {
        /* Nothing reads an exited job yet (vgpu wait will): remove it now. */
        vgpu_region_remove(&r, &e);
        vgpu_region_close(&r);
    }
    free(cmdline);
    free(spec);
    free(list);
    if (nv)
        vgpu_nvml_close(nv);
    if (rc < 0)
        die_by_signal(-rc);
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
