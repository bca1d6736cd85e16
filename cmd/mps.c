/* vgpu mps: start, stop, inspect and configure the MPS control daemon (reference/nvml.md §16). */
static const char usage[] =
    "usage: vgpu mps start [--gpu SEL] [--pipe-dir DIR] [--log-dir DIR] [--json]\n"
    "       vgpu mps stop [--pipe-dir DIR] [--timeout SEC] [--force] [--json]\n"
    "       vgpu mps status [--pipe-dir DIR] [--json]\n"
    "       vgpu mps set [--core PCT] [--mem SIZE] [--pipe-dir DIR] [--json]\n"
    "\n"
    "Drive NVIDIA's Multi-Process Service: one MPS server per user runs the kernels of all its\n"
    "client processes on the GPU at the same time, instead of time-slicing them. Clients are\n"
    "started with 'vgpu run --mps', which turns --core into MPS's active thread percentage (a\n"
    "cap on the SMs the job's kernels use) and --mem into its pinned device memory limit.\n"
    "\n"
    "  start    start nvidia-cuda-mps-control -d for the selected GPUs (CUDA_VISIBLE_DEVICES\n"
    "           by UUID) and wait until it answers; if it does not, what was started is\n"
    "           stopped again. Non-root users get a log directory in vgpu's state directory.\n"
    "  stop     ask the daemon to quit (it stops its servers); --force kills it after\n"
    "           --timeout seconds (whole, 0 to 3600; default 10) when clients keep it from\n"
    "           quitting\n"
    "  status   the daemon, its defaults, its servers and their clients, with each client's\n"
    "           own limits (from its environment) and vgpu job\n"
    "  set      defaults for MPS servers started afterwards: --core PCT (active thread\n"
    "           percentage, 1..100) and --mem SIZE (pinned device memory per GPU)\n"
    "\n"
    "  --gpu SEL       GPUs or one MIG device the daemon serves (default: all it can see)\n"
    "  --pipe-dir DIR  the daemon's pipe directory (default: $CUDA_MPS_PIPE_DIRECTORY, the\n"
    "                  one 'vgpu mps start' recorded, or /tmp/nvidia-mps); not empty\n"
    "  --log-dir DIR   its log directory (default: $CUDA_MPS_LOG_DIRECTORY, or\n"
    "                  /var/log/nvidia-mps for root)\n"
    "  --json          one JSON document (see vgpu-mps(1))\n"
    "  --help          show this help\n"
    "VGPU_MPS_CONTROL names the nvidia-cuda-mps-control to run (default: the one on PATH).\n"
    "\n"
    "Exit status: 0 done; 1 failed (the message says why); 2 bad usage or unknown GPU;\n"
    "3 nvidia-cuda-mps-control not found; 7 a daemon is already running, or clients keep it\n"
    "from stopping; 8 no daemon is running (status and stop say so and exit 0).\n";

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "mps/mpsrec.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/mps.h"
#include "vgpu/nvml.h"
#include "vgpu/smi.h"
#include "vgpu/trust.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_mps;

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "pipe-dir", required_argument, NULL, 'p' },
    { "log-dir", required_argument, NULL, 'l' },
    { "timeout", required_argument, NULL, 't' },
    { "force", no_argument, NULL, 'f' },
    { "core", required_argument, NULL, 'c' },
    { "mem", required_argument, NULL, 'm' },
    { "json", no_argument, NULL, 'j' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "pipe-dir", VGPU_ARG_DIR, NULL },
    { "log-dir", VGPU_ARG_DIR, NULL },
    { "timeout", VGPU_ARG_OTHER, NULL },
    { "core", VGPU_ARG_PERCENT, NULL },
    { "mem", VGPU_ARG_SIZE, NULL },
    { NULL, 0, NULL },
};

static const struct vgpu_verb verbs[] = {
    { "start", "start the MPS control daemon", VGPU_ARG_NONE, NULL },
    { "stop", "stop the MPS control daemon and its servers", VGPU_ARG_NONE, NULL },
    { "status", "show the daemon, its servers, clients and limits", VGPU_ARG_NONE, NULL },
    { "set", "set the defaults for new MPS servers (--core, --mem)", VGPU_ARG_NONE, NULL },
    { NULL, NULL, 0, NULL },
};

struct opts {
    const char *gpu, *pipe_dir, *log_dir;
    unsigned timeout_s;
    bool force, json;
    bool has_core, has_mem;
    unsigned core;
    uint64_t mem;
};

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static bool pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Last non-empty line of a file (the daemon's control.log), for error messages. */
static void last_line(const char *path, long from, char *out, size_t len)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, from, SEEK_SET) != 0)
        rewind(f);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0])
            snprintf(out, len, "%s", line);
    }
    fclose(f);
}

/* Stops a daemon we started: quit, then signals. Never touches a daemon we did not start. */
static void undo_start(const char *pipe_dir, pid_t pid)
{
    struct vgpu_err e;
    if (pid_alive(pid))
        vgpu_mps_cmd(pipe_dir, "quit", NULL, 0, &e);
    for (int i = 0; i < 40 && pid_alive(pid); i++)
        sleep_ms(50);
    if (pid_alive(pid)) {
        kill(pid, SIGTERM);
        for (int i = 0; i < 40 && pid_alive(pid); i++)
            sleep_ms(50);
    }
    if (pid_alive(pid))
        kill(pid, SIGKILL);
}

static int do_start(const struct opts *o)
{
    struct vgpu_err e;
    const char *pipe_dir = o->pipe_dir ? o->pipe_dir : vgpu_mps_default_pipe_dir();
    char log_buf[4096];
    const char *log_dir = o->log_dir ? o->log_dir : getenv("CUDA_MPS_LOG_DIRECTORY");
    if (!log_dir || !*log_dir) {
        if (geteuid() == 0) {
            log_dir = VGPU_MPS_DEFAULT_LOG_DIR;
        } else {
            /* /var/log/nvidia-mps is root's; a user's daemon logs next to vgpu's state. */
            snprintf(log_buf, sizeof log_buf, "%.4000s/mps-log", vgpu_mps_state_dir());
            log_dir = log_buf;
        }
    }
    pid_t running = vgpu_mps_daemon_pid(pipe_dir);
    if (running)
        return vgpu_fail(VGPU_EXIT_BUSY, "an MPS control daemon (pid %d) is already running on pipe directory %s; "
                         "see 'vgpu mps status', or 'vgpu mps stop' it first", (int)running, pipe_dir);

    /* GPUs: by UUID, so the daemon serves exactly those whatever the indexes. */
    char visible[2048] = "";
    char notes[2048] = "";    /* printed once the daemon runs: a failed start has nothing to note */
    unsigned ngpus = 0;
    char uuids[VGPU_MAX_GPUS][VGPU_UUID_LEN];
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv && o->gpu)
        return vgpu_err_report(&e);
    struct vgpu_gpu_list *list = nv ? calloc(1, sizeof *list) : NULL;
    int rc = 0;
    if (nv) {
        struct vgpu_gpu_sel sel;
        if (!list) {
            rc = vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
        } else if (vgpu_gpus_enumerate(nv, list, &e) < 0) {
            rc = vgpu_err_report(&e);
        } else if (o->gpu && vgpu_gpus_select(list, o->gpu, &sel, &e) < 0) {
            rc = vgpu_err_report(&e);
        } else if (o->gpu) {
            unsigned nmig = 0;
            for (unsigned s = 0; s < sel.count; s++) {
                const struct vgpu_gpu *g = &list->gpu[sel.pos[s]];
                if (g->is_mig)
                    nmig++;
                else if (g->has_mig_mode && g->mig_current)
                    rc = vgpu_fail(VGPU_EXIT_USAGE, "GPU %u is in MIG mode: MPS runs on one MIG device per control "
                                   "daemon; give --gpu MIG-... (see 'vgpu list') and a --pipe-dir of its own",
                                   g->index);
                snprintf(uuids[ngpus++], VGPU_UUID_LEN, "%s", g->uuid);
            }
            if (!rc && nmig && sel.count > 1)
                rc = vgpu_fail(VGPU_EXIT_USAGE, "under MIG an MPS control daemon serves one MIG device: start one "
                               "daemon per MIG device, each with its own --pipe-dir");
            for (unsigned i = 0; i < ngpus && !rc; i++) {
                size_t used = strlen(visible);
                snprintf(visible + used, sizeof visible - used, "%s%s", i ? "," : "", uuids[i]);
            }
        } else {
            for (unsigned i = 0; i < list->count; i++)
                if (!list->gpu[i].is_mig)
                    snprintf(uuids[ngpus++], VGPU_UUID_LEN, "%s", list->gpu[i].uuid);
        }
        /* A note, not a rule: without exclusive-process, non-MPS processes can share the GPU too. */
        if (!rc && !o->json && list) {
            for (unsigned i = 0; i < list->count; i++) {
                const struct vgpu_gpu *g = &list->gpu[i];
                bool served = !o->gpu;
                for (unsigned k = 0; k < ngpus && !served; k++)
                    served = !strcmp(uuids[k], g->uuid);
                size_t used = strlen(notes);
                if (served && !g->is_mig && !(g->has_mig_mode && g->mig_current) && g->compute_mode == 0)
                    snprintf(notes + used, sizeof notes - used, "note: GPU %u is in the default compute mode, so "
                             "processes outside MPS can use it too ('vgpu mode set exclusive-process --gpu %u' as "
                             "root makes MPS the only way in)\n", g->index, g->index);
            }
        }
        free(list);
        vgpu_nvml_close(nv);
    }
    if (rc)
        return rc;
    const char *pipe_src = o->pipe_dir ? "--pipe-dir" : getenv("CUDA_MPS_PIPE_DIRECTORY") ? "CUDA_MPS_PIPE_DIRECTORY"
                                                                                          : NULL;
    const char *log_src = o->log_dir ? "--log-dir" : getenv("CUDA_MPS_LOG_DIRECTORY") ? "CUDA_MPS_LOG_DIRECTORY"
                                                                                       : NULL;
    /* As root the daemon works in both directories (its pipes, its logs), and the default pipe
     * directory is in /tmp, where anyone may make it first: checked before anything is created
     * on the way (a missing part is fine here), created by root, checked again whole (vgpu/trust.h). */
    if (vgpu_trust_applies()) {
        if ((vgpu_trust_path(pipe_dir, pipe_src, VGPU_TRUST_DIR | VGPU_TRUST_ANY_MODE, &e) != 0 && e.code != VGPU_EXIT_NOT_FOUND) ||
            (vgpu_trust_path(log_dir, log_src, VGPU_TRUST_DIR, &e) != 0 && e.code != VGPU_EXIT_NOT_FOUND))
            return vgpu_err_report(&e);
        if (mkdir_p(pipe_dir, 0755) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot create the MPS pipe directory %s: %s (give another with "
                             "--pipe-dir)", pipe_dir, strerror(errno));
    }
    if (mkdir_p(log_dir, 0755) < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot create the MPS log directory %s: %s (give another with --log-dir)",
                         log_dir, strerror(errno));
    if (vgpu_trust_path(pipe_dir, pipe_src, VGPU_TRUST_DIR | VGPU_TRUST_ANY_MODE, &e) != 0 ||
        vgpu_trust_path(log_dir, log_src, VGPU_TRUST_DIR, &e) != 0)
        return vgpu_err_report(&e);

    char env_pipe[4200], env_log[4200], env_vis[2100];
    snprintf(env_pipe, sizeof env_pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    snprintf(env_log, sizeof env_log, "CUDA_MPS_LOG_DIRECTORY=%s", log_dir);
    snprintf(env_vis, sizeof env_vis, "CUDA_VISIBLE_DEVICES=%s", visible);
    const char *env[] = { env_pipe, env_log, visible[0] ? env_vis : NULL, NULL };
    const char *argv[] = { vgpu_mps_control_path(), "-d", NULL };
    char ctl_log[4200], why[512];
    snprintf(ctl_log, sizeof ctl_log, "%s/control.log", log_dir);
    struct stat sb;
    long log_from = stat(ctl_log, &sb) == 0 ? (long)sb.st_size : 0; /* only what this start logs */
    struct vgpu_proc p;
    if (vgpu_proc_run(argv, env, NULL, 30000, &p, &e) < 0) {
        if (e.code == VGPU_EXIT_NO_LIBRARY) {
            char miss[600];
            return vgpu_fail(VGPU_EXIT_NO_LIBRARY, "%s", vgpu_tool_missing(argv[0], "VGPU_MPS_CONTROL", "install the "
                             "NVIDIA driver's MPS tools, or set VGPU_MPS_CONTROL to its path", miss, sizeof miss));
        }
        return vgpu_err_report(&e);
    }
    char said[512];
    snprintf(said, sizeof said, "%s%s", p.out, p.err);
    said[strcspn(said, "\n")] = 0;
    int st = p.status;
    bool timed_out = p.timed_out;
    vgpu_proc_free(&p);
    if (strstr(said, "already running"))
        return vgpu_fail(VGPU_EXIT_BUSY, "%s: %s (pipe directory %s)", argv[0], said, pipe_dir);

    /* Ready when the pid file names a live daemon that answers a query. */
    pid_t pid = 0;
    bool ready = false;
    const char *fail = NULL;
    for (int i = 0; i < 100 && !ready; i++) {
        pid = vgpu_mps_daemon_pid(pipe_dir);
        if (pid) {
            char reply[128];
            double pct;
            if (vgpu_mps_cmd(pipe_dir, "get_default_active_thread_percentage", reply, sizeof reply, &e) == 0 &&
                vgpu_mps_parse_percent(reply, &pct) == 0)
                ready = true;
            else if (e.code == VGPU_EXIT_NO_LIBRARY)
                break;
        } else if (st != 0 || timed_out) {
            break;
        }
        if (!ready)
            sleep_ms(100);
    }
    if (!ready) {
        if (timed_out)
            fail = "it did not return within 30 s";
        else if (st != 0)
            fail = "it exited with an error";
        else if (!pid)
            fail = "no daemon process appeared (no live pid in the pipe directory)";
        else
            fail = "the daemon does not answer";
        if (pid)
            undo_start(pipe_dir, pid);
        last_line(ctl_log, log_from, why, sizeof why);
        return vgpu_fail(VGPU_EXIT_FAIL, "the MPS control daemon did not start: %s%s%s%s%s%s; nothing was left "
                         "running (see %s)", fail, said[0] ? " (" : "", said, said[0] ? ")" : "",
                         why[0] ? "; control.log says: " : "", why, ctl_log);
    }

    struct vgpu_mps_rec rec = { 0 };
    snprintf(rec.pipe_dir, sizeof rec.pipe_dir, "%s", pipe_dir);
    snprintf(rec.log_dir, sizeof rec.log_dir, "%s", log_dir);
    rec.daemon_pid = pid;
    rec.ngpus = ngpus;
    for (unsigned i = 0; i < ngpus && i < VGPU_MPS_REC_GPUS; i++)
        snprintf(rec.gpus[i], sizeof rec.gpus[i], "%.95s", uuids[i]);
    rec.all_gpus = !o->gpu;
    if (vgpu_mps_rec_save(&rec, &e) < 0) {
        undo_start(pipe_dir, pid);
        return vgpu_fail(e.code, "%s; the MPS control daemon was stopped again", e.msg);
    }
    if (o->json) {
        struct json_object *doc = vgpu_json_doc();
        vgpu_json_bool(doc, "running", true);
        vgpu_json_i64(doc, "daemon_pid", pid);
        vgpu_json_str(doc, "pipe_dir", pipe_dir);
        vgpu_json_str(doc, "log_dir", log_dir);
        struct json_object *arr = json_object_new_array();
        for (unsigned i = 0; i < ngpus; i++)
            json_object_array_add(arr, json_object_new_string(uuids[i]));
        json_object_object_add(doc, "gpus", arr);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        return 0;
    }
    printf("MPS control daemon started (pid %d)\n  pipe directory  %s\n  log directory   %s\n  GPUs            %s\n",
           (int)pid, pipe_dir, log_dir, visible[0] ? visible : "all");
    printf("Run jobs on it with 'vgpu run --mps [--core PCT] [--mem SIZE] CMD'; other CUDA programs join it with "
           "CUDA_MPS_PIPE_DIRECTORY=%s.\n", pipe_dir);
    fputs(notes, stdout);
    return 0;
}

/* The pipe directory of the commands other than start. */
static const char *pipe_dir_of(const struct opts *o, struct vgpu_mps_rec *rec, bool *have_rec)
{
    struct vgpu_err e;
    *have_rec = vgpu_mps_rec_load(rec, &e) == 0;
    if (o->pipe_dir)
        return o->pipe_dir;
    const char *env = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (env && *env)
        return env;
    if (*have_rec && rec->pipe_dir[0])
        return rec->pipe_dir;
    return VGPU_MPS_DEFAULT_PIPE_DIR;
}

static int not_running(const struct opts *o, const char *pipe_dir, const char *what)
{
    if (o->json) {
        struct json_object *doc = vgpu_json_doc();
        vgpu_json_bool(doc, "running", false);
        vgpu_json_str(doc, "pipe_dir", pipe_dir);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    } else {
        printf("No MPS control daemon is running on pipe directory %s%s\n", pipe_dir, what);
    }
    return 0;
}

static int do_stop(const struct opts *o)
{
    struct vgpu_mps_rec rec;
    bool have_rec;
    const char *pipe_dir = pipe_dir_of(o, &rec, &have_rec);
    pid_t pid = vgpu_mps_daemon_pid(pipe_dir);
    bool ours = have_rec && !strcmp(rec.pipe_dir, pipe_dir);
    if (!pid) {
        if (ours)
            vgpu_mps_rec_remove();
        return not_running(o, pipe_dir, "; nothing to stop.");
    }
    struct vgpu_err e;
    if (vgpu_mps_cmd(pipe_dir, "quit", NULL, 0, &e) < 0 && e.code != VGPU_EXIT_NOT_FOUND)
        return vgpu_err_report(&e);
    unsigned waited = 0, limit = o->timeout_s * 1000;
    while (pid_alive(pid) && waited < limit) {
        sleep_ms(50);
        waited += 50;
    }
    bool forced = false;
    if (pid_alive(pid)) {
        if (!o->force)
            return vgpu_fail(VGPU_EXIT_BUSY, "the MPS control daemon (pid %d) has not quit after %u s: its servers "
                             "wait for their clients to exit ('vgpu mps status' lists them); stop them, or use "
                             "--force", (int)pid, o->timeout_s);
        if (kill(pid, SIGTERM) < 0 && errno == EPERM)
            return vgpu_fail(VGPU_EXIT_PERMISSION, "cannot stop the MPS control daemon (pid %d): it is another "
                             "user's; run as root", (int)pid);
        for (int i = 0; i < 40 && pid_alive(pid); i++)
            sleep_ms(50);
        if (pid_alive(pid))
            kill(pid, SIGKILL);
        forced = true;
    }
    if (ours)
        vgpu_mps_rec_remove();
    if (o->json) {
        struct json_object *doc = vgpu_json_doc();
        vgpu_json_bool(doc, "running", false);
        vgpu_json_bool(doc, "stopped", true);
        vgpu_json_bool(doc, "forced", forced);
        vgpu_json_i64(doc, "daemon_pid", pid);
        vgpu_json_str(doc, "pipe_dir", pipe_dir);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        return 0;
    }
    printf("MPS control daemon (pid %d) on %s stopped%s; per-server defaults set with 'vgpu mps set' are gone.\n",
           (int)pid, pipe_dir, forced ? " (killed)" : "");
    return 0;
}

/* How many device indexes the daemon's clients see. */
static unsigned device_count(const struct vgpu_mps_rec *rec, bool have_rec)
{
    if (have_rec && !rec->all_gpus && rec->ngpus)
        return rec->ngpus;
    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    unsigned n = have_rec && rec->ngpus ? rec->ngpus : 1;
    if (nv) {
        unsigned c = 0;
        if (nv->nvmlDeviceGetCount_v2(&c) == NVML_SUCCESS && c)
            n = c;
        vgpu_nvml_close(nv);
    }
    return n;
}

static int do_set(const struct opts *o)
{
    if (!o->has_core && !o->has_mem)
        return vgpu_usage_error(&vgpu_cmd_mps, "set needs --core PCT and/or --mem SIZE");
    struct vgpu_mps_rec rec;
    bool have_rec;
    const char *pipe_dir = pipe_dir_of(o, &rec, &have_rec);
    struct vgpu_err e;
    char cmd[256], reply[256];
    double got_pct = -1;
    if (o->has_core) {
        snprintf(cmd, sizeof cmd, "set_default_active_thread_percentage %u", o->core);
        if (vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) < 0)
            return vgpu_err_report(&e);
        if (vgpu_mps_parse_percent(reply, &got_pct) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "the MPS control daemon answered '%s' to '%s'", reply, cmd);
        if ((unsigned)(got_pct + 0.5) != o->core)
            vgpu_warn("the MPS control daemon set the default active thread percentage to %.1f, not %u", got_pct,
                      o->core);
    }
    unsigned ndev = o->has_mem ? device_count(&rec, have_rec) : 0;
    char size[32];
    vgpu_mps_format_size(o->mem, size, sizeof size);
    for (unsigned d = 0; d < ndev; d++) {
        snprintf(cmd, sizeof cmd, "set_default_device_pinned_mem_limit %u %s", d, size);
        if (vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) < 0)
            return vgpu_err_report(&e);
        if (reply[0])
            return vgpu_fail(VGPU_EXIT_FAIL, "the MPS control daemon answered '%s' to '%s'", reply, cmd);
    }
    /* Servers already running keep what they had. */
    pid_t servers[64];
    int nsrv = -1;
    if (vgpu_mps_cmd(pipe_dir, "get_server_list", reply, sizeof reply, &e) == 0)
        nsrv = vgpu_mps_parse_pids(reply, servers, 64);
    if (o->json) {
        struct json_object *doc = vgpu_json_doc();
        vgpu_json_str(doc, "pipe_dir", pipe_dir);
        if (o->has_core)
            vgpu_json_dbl(doc, "default_active_thread_percent", got_pct);
        if (o->has_mem) {
            vgpu_json_u64(doc, "default_pinned_mem_limit_bytes", o->mem);
            vgpu_json_u64(doc, "devices", ndev);
        }
        vgpu_json_i64(doc, "running_servers", nsrv < 0 ? 0 : nsrv);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        return 0;
    }
    if (o->has_core)
        printf("Default active thread percentage: %.1f\n", got_pct);
    if (o->has_mem)
        printf("Default pinned device memory limit: %s on each of %u device%s\n", size, ndev, ndev == 1 ? "" : "s");
    printf("These apply to MPS servers started from now on%s.\n",
           nsrv > 0 ? "; the running server keeps its limits until its clients have all exited" : "");
    return 0;
}

static int do_status(const struct opts *o)
{
    struct vgpu_mps_rec rec;
    bool have_rec;
    const char *pipe_dir = pipe_dir_of(o, &rec, &have_rec);
    if (!vgpu_mps_daemon_pid(pipe_dir))
        return not_running(o, pipe_dir, "; start one with 'vgpu mps start'.");
    bool ours = have_rec && !strcmp(rec.pipe_dir, pipe_dir);
    return vgpu_mps_show_status(pipe_dir, ours ? &rec : NULL, device_count(&rec, ours), o->json);
}

static int cmd_mps(int argc, char **argv)
{
    struct opts o = { .timeout_s = 10 };
    struct vgpu_err e;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_mps, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': o.gpu = optarg; break;
        case 'p':
        case 'l':
            /* An empty directory in CUDA_MPS_*_DIRECTORY means the daemon's default, the machine-wide
             * /tmp/nvidia-mps: 'start' would run a daemon there while saying it started none. */
            if (!*optarg)
                return vgpu_usage_error(&vgpu_cmd_mps, "%s needs a directory, not an empty string",
                                        c == 'p' ? "--pipe-dir" : "--log-dir");
            *(c == 'p' ? &o.pipe_dir : &o.log_dir) = optarg;
            break;
        case 'f': o.force = true; break;
        case 'j': o.json = true; break;
        case 't': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            /* Digits only: strtoul also takes " 5", "+5" and "-0". */
            if (!*optarg || *end || strspn(optarg, "0123456789") != strlen(optarg) || v > 3600)
                return vgpu_usage_error(&vgpu_cmd_mps, "--timeout takes whole seconds (0..3600), not '%s'", optarg);
            o.timeout_s = (unsigned)v;
            break;
        }
        case 'c':
            /* 1..100: an MPS client needs some SMs; the message states that range. */
            if (vgpu_parse_percent_range(optarg, 1, 100, &o.core, "--core", &e) < 0)
                return vgpu_err_report(&e);
            o.has_core = true;
            break;
        case 'm':
            if (vgpu_parse_mem_limit(optarg, &o.mem, "--mem", &e) < 0)
                return vgpu_err_report(&e);
            if (o.mem < VGPU_MIB)
                return vgpu_fail(VGPU_EXIT_USAGE, "--mem: '%s' is less than 1M, the least MPS's pinned memory limit "
                                 "can be; give a size such as 2G", optarg);
            o.has_mem = true;
            break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    static const char *const verb_names[] = { "start", "stop", "status", "set", NULL };
    if (optind >= argc)
        return vgpu_usage_error(&vgpu_cmd_mps, "missing verb: start, stop, status or set");
    const char *verb = argv[optind++];
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_mps, "unexpected argument '%s'", argv[optind]);
    bool is_start = !strcmp(verb, "start"), is_set = !strcmp(verb, "set");
    if (!is_start && !strcmp(verb, "stop") + !strcmp(verb, "status") + is_set == 0)
        return vgpu_unknown_word(&vgpu_cmd_mps, "verb", verb, verb_names);
    if (!is_start && (o.gpu || o.log_dir))
        return vgpu_usage_error(&vgpu_cmd_mps, "--gpu and --log-dir belong to 'vgpu mps start'");
    if (!is_set && (o.has_core || o.has_mem))
        return vgpu_usage_error(&vgpu_cmd_mps, "--core and --mem belong to 'vgpu mps set' (or 'vgpu run --mps')");
    if (strcmp(verb, "stop") && (o.force || o.timeout_s != 10))
        return vgpu_usage_error(&vgpu_cmd_mps, "--force and --timeout belong to 'vgpu mps stop'");
    if (is_start)
        return do_start(&o);
    if (is_set)
        return do_set(&o);
    if (!strcmp(verb, "stop"))
        return do_stop(&o);
    return do_status(&o);
}

const struct vgpu_cmd vgpu_cmd_mps = {
    .name = "mps",
    .fn = cmd_mps,
    .summary = "start, stop, inspect and configure the MPS control daemon",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
