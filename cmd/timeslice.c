/* vgpu timeslice: the driver's time-slice policy, through nvidia-smi compute-policy (there is
 * no public NVML call for it, reference/nvml.md §15). */
static const char usage[] =
    "usage: vgpu timeslice get [--gpu SEL] [--json]\n"
    "       vgpu timeslice set VALUE [--gpu SEL] [--json]\n"
    "\n"
    "Show or set how long the driver lets one CUDA context run before it switches to another\n"
    "when several processes share a GPU: default, short, medium or long (or nvidia-smi's\n"
    "numbers 0..3). NVIDIA documents no durations. It is set through 'nvidia-smi\n"
    "compute-policy' (VGPU_NVIDIA_SMI overrides which nvidia-smi runs). Setting needs root;\n"
    "contexts created afterwards pick the change up (running ones keep theirs), and it does not\n"
    "survive a driver reload or reboot. It applies to whole GPUs only: GPUs in MIG mode and MIG\n"
    "devices are refused. It matters with the default compute mode ('vgpu mode').\n"
    "\n"
    "  --gpu SEL   these GPUs (index, UUID or its unique start, PCI bus id, comma list, or\n"
    "              'all': the default)\n"
    "  --json      one JSON document (see vgpu-timeslice(1))\n"
    "  --help      show this help\n"
    "\n"
    "Exit status: 0 done (or nothing to change); 1 failed (the message says why: MIG mode, not\n"
    "supported, ...); 2 bad usage or unknown GPU; 3 nvidia-smi or libnvidia-ml.so.1 not found;\n"
    "4 driver not loaded; 5 no GPU; 6 not root; 8 nvidia-smi does not know the GPU; 12 a GPU\n"
    "is lost.\n";

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/smi.h"

extern const struct vgpu_cmd vgpu_cmd_timeslice;

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "json", no_argument, NULL, 'j' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { NULL, 0, NULL },
};

#define TS_WORDS "default short medium long"

static const struct vgpu_verb verbs[] = {
    { "get", "show the time-slice policy of the GPUs", VGPU_ARG_NONE, NULL },
    { "set", "set the time-slice policy (root)", VGPU_ARG_WORD, TS_WORDS },
    { NULL, NULL, 0, NULL },
};

/* The current values, from one `nvidia-smi compute-policy -l`. */
struct policies {
    bool ok;                        /* the list could be read */
    int n;
    struct vgpu_policy_row rows[VGPU_SMI_MAX_ROWS];
};

static int policy_of(const struct policies *p, unsigned gpu)
{
    for (int i = 0; p->ok && i < p->n; i++)
        if (p->rows[i].gpu == gpu)
            return p->rows[i].timeslice;
    return -1;
}

static const char *name_or(int v, const char *dflt)
{
    const char *n = vgpu_timeslice_name(v);
    return n ? n : dflt;
}

/* Turns a failed nvidia-smi run into a message and an exit code. */
static int smi_failure(const struct vgpu_proc *p, const char *doing, const struct vgpu_gpu *g, char *msg,
                       size_t len)
{
    char reason[300], who[200];
    enum vgpu_smi_fault f = vgpu_smi_classify(p->status, p->out, p->err, reason, sizeof reason);
    if (g)
        snprintf(who, sizeof who, "GPU %u (%s)", g->index, g->name);
    else
        snprintf(who, sizeof who, "the GPUs");
    if (p->timed_out) {
        snprintf(msg, len, "%s: nvidia-smi did not finish within 30 s while %s", who, doing);
        return VGPU_EXIT_FAIL;
    }
    switch (f) {
    case VGPU_SMI_NO_PERMISSION:
        snprintf(msg, len, "%s: %s requires root (nvidia-smi: %s); run it as root or with sudo", who, doing,
                 reason);
        return VGPU_EXIT_PERMISSION;
    case VGPU_SMI_NOT_FOUND:
        snprintf(msg, len, "%s: nvidia-smi does not find it (%s); is VGPU_NVIDIA_SMI the nvidia-smi of this "
                 "driver?", who, reason);
        return g ? VGPU_EXIT_NOT_FOUND : VGPU_EXIT_NO_GPU;
    case VGPU_SMI_NOT_SUPPORTED:
        snprintf(msg, len, "%s does not support the time-slice policy (nvidia-smi: %s); it needs a GPU and "
                 "driver with compute-policy support, and a GPU not in MIG mode", who, reason);
        return VGPU_EXIT_FAIL;
    case VGPU_SMI_NO_DRIVER:
        snprintf(msg, len, "nvidia-smi cannot talk to the NVIDIA driver (%s); load it with 'modprobe nvidia'",
                 reason);
        return VGPU_EXIT_NO_DRIVER;
    case VGPU_SMI_VERSION:
        snprintf(msg, len, "nvidia-smi and the NVIDIA driver have different versions (%s); reload the nvidia "
                 "modules or reboot after a driver update", reason);
        return VGPU_EXIT_NO_DRIVER;
    case VGPU_SMI_IN_USE:
        snprintf(msg, len, "%s is in use by another client (nvidia-smi: %s)", who, reason);
        return VGPU_EXIT_BUSY;
    case VGPU_SMI_INVALID:
        snprintf(msg, len, "%s: nvidia-smi rejected %s (%s)", who, doing, reason);
        return VGPU_EXIT_FAIL;
    default:
        /* Exit status 0 with an answer that is not the one expected: "failed (exit status 0)"
         * read as a contradiction; say what was missing instead. */
        if (p->status == 0)
            snprintf(msg, len, "%s: nvidia-smi exited 0 while %s but did not say it succeeded (%s%s); is "
                     "VGPU_NVIDIA_SMI the nvidia-smi of this driver?", who, doing,
                     reason[0] ? "it said: " : "it printed nothing", reason);
        else
            snprintf(msg, len, "%s: nvidia-smi failed while %s (exit status %d%s%s)", who, doing, p->status,
                     reason[0] ? ": " : "", reason);
        return VGPU_EXIT_FAIL;
    }
}

static int run_smi(const char *const argv[], struct vgpu_proc *p, struct vgpu_err *e)
{
    if (vgpu_proc_run(argv, NULL, NULL, 30000, p, e) == 0)
        return 0;
    if (e->code == VGPU_EXIT_NO_LIBRARY)
        vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY, "cannot run %s: not found; install the NVIDIA driver's utilities "
                     "or set VGPU_NVIDIA_SMI to nvidia-smi's path", argv[0]);
    return -1;
}

/* Reads every GPU's policy. 0, or an exit code with the error in msg (not printed: for set,
 * the list is only the report's "before", and one failing nvidia-smi is one error, not two). */
static int read_policies(struct policies *pol, char *msg, size_t len)
{
    memset(pol, 0, sizeof *pol);
    msg[0] = 0;
    const char *argv[] = { vgpu_smi_path(), "compute-policy", "-l", NULL };
    struct vgpu_proc p;
    struct vgpu_err e;
    if (run_smi(argv, &p, &e) < 0) {
        snprintf(msg, len, "%s", e.msg);
        return e.code;
    }
    int rc = 0;
    pol->n = vgpu_smi_parse_policy_list(p.out, pol->rows, VGPU_SMI_MAX_ROWS);
    if (p.status != 0 || p.timed_out) {
        rc = smi_failure(&p, "listing the compute policies", NULL, msg, len);
    } else if (pol->n < 0) {
        char first[200];
        snprintf(first, sizeof first, "%s", p.out);
        first[strcspn(first, "\n")] = 0;
        snprintf(msg, len, "cannot read the output of '%s compute-policy -l' (it begins '%s'); this nvidia-smi "
                 "may be too old to have compute-policy", argv[0], first);
        rc = VGPU_EXIT_FAIL;
    } else {
        pol->ok = true;
    }
    vgpu_proc_free(&p);
    return rc;
}

static struct json_object *gpu_json(const struct vgpu_gpu *g)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_u64(o, "index", g->index);
    vgpu_json_bool(o, "is_mig_device", g->is_mig);
    vgpu_json_str(o, "name", g->name[0] ? g->name : NULL);
    vgpu_json_str(o, "uuid", g->uuid[0] ? g->uuid : NULL);
    vgpu_json_bool(o, "mig_enabled", g->is_mig || (g->has_mig_mode && g->mig_current));
    return o;
}

static void add_ts(struct json_object *o, const char *key, int v)
{
    char k[64];
    vgpu_json_str(o, key, vgpu_timeslice_name(v));
    snprintf(k, sizeof k, "%s_value", key);
    if (v >= 0)
        vgpu_json_i64(o, k, v);
    else
        vgpu_json_null(o, k);
}

static bool mig_on(const struct vgpu_gpu *g)
{
    return g->is_mig || (g->has_mig_mode && g->mig_current);
}

static int mig_refusal(const struct vgpu_gpu *g, char *msg, size_t len)
{
    if (g->is_mig)
        snprintf(msg, len, "MIG device %u/%u/%u (%s): the time-slice policy applies to whole GPUs only, and "
                 "not to GPUs in MIG mode", g->index, g->mig_gi, g->mig_ci, g->uuid);
    else
        snprintf(msg, len, "GPU %u (%s) is in MIG mode: the time-slice policy can only be set on full GPUs; "
                 "disable MIG first ('vgpu mig disable')", g->index, g->name);
    return VGPU_EXIT_FAIL;
}

static int do_get(const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel, bool json)
{
    /* MIG devices named explicitly are refused before nvidia-smi runs. */
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        if (g->is_mig) {
            char msg[400];
            return vgpu_fail(mig_refusal(g, msg, sizeof msg), "%s", msg);
        }
    }
    struct policies pol;
    char msg[800];
    int rc = read_policies(&pol, msg, sizeof msg);
    if (rc)
        return vgpu_fail(rc, "%s", msg);
    struct json_object *doc = json ? vgpu_json_doc() : NULL, *arr = json ? json_object_new_array() : NULL;
    if (!json)
        printf("%-5s %-26s %-41s %-9s %s\n", "GPU", "NAME", "UUID", "MIG", "TIMESLICE");
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        int v = policy_of(&pol, g->index);
        if (json) {
            struct json_object *o = gpu_json(g);
            add_ts(o, "timeslice", v);
            json_object_array_add(arr, o);
        } else {
            printf("%-5u %-26.26s %-41s %-9s %s\n", g->index, g->name, g->uuid[0] ? g->uuid : "N/A",
                   !g->has_mig_mode ? "N/A" : g->mig_current ? "enabled" : "disabled",
                   v >= 0 ? vgpu_timeslice_name(v) : "N/A");
        }
    }
    if (json) {
        json_object_object_add(doc, "gpus", arr);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    }
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return 0;
}

static int set_one(const struct vgpu_gpu *g, int value, int before, bool *changed, char *msg, size_t len)
{
    *changed = false;
    msg[0] = 0;
    if (mig_on(g))
        return mig_refusal(g, msg, len);
    if (before == value)
        return 0;
    char num[16];
    snprintf(num, sizeof num, "%d", value);
    /* By UUID, as NVIDIA's DRA driver does: indexes can differ between tools, UUIDs cannot. */
    const char *argv[] = { vgpu_smi_path(), "compute-policy", "-i", g->uuid[0] ? g->uuid : "", "--set-timeslice",
                           num, NULL };
    char idx[16];
    if (!g->uuid[0]) {
        snprintf(idx, sizeof idx, "%u", g->index);
        argv[3] = idx;
    }
    struct vgpu_proc p;
    struct vgpu_err e;
    if (run_smi(argv, &p, &e) < 0) {
        snprintf(msg, len, "%s", e.msg);
        return e.code;
    }
    int rc = 0;
    if (p.status == 0 && !p.timed_out && vgpu_smi_set_succeeded(p.out, (unsigned)-1)) {
        *changed = true;
    } else {
        char doing[64];
        snprintf(doing, sizeof doing, "setting the time-slice policy to %s", vgpu_timeslice_name(value));
        rc = smi_failure(&p, doing, g, msg, len);
    }
    vgpu_proc_free(&p);
    return rc;
}

static int do_set(const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel, int value, bool json)
{
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        if (g->is_mig) {
            char msg[400];
            return vgpu_fail(mig_refusal(g, msg, sizeof msg), "%s", msg);
        }
    }
    struct policies pol;
    /* The current values are for the report; a failing list is not fatal for the set. Said
     * only when every set succeeded: a set that fails says what is wrong with nvidia-smi. */
    char list_msg[800];
    if (read_policies(&pol, list_msg, sizeof list_msg) != 0)
        pol.ok = false;
    int first_rc = 0;
    unsigned changed_n = 0;
    struct json_object *doc = json ? vgpu_json_doc() : NULL, *arr = json ? json_object_new_array() : NULL;
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        int before = policy_of(&pol, g->index);
        bool changed;
        char msg[800];
        int rc = set_one(g, value, before, &changed, msg, sizeof msg);
        if (rc) {
            vgpu_error("%s", msg);
            if (!first_rc)
                first_rc = rc;
        } else if (!json) {
            if (changed)
                printf("GPU %u (%s): time-slice policy %s -> %s\n", g->index, g->name, name_or(before, "unknown"),
                       vgpu_timeslice_name(value));
            else
                printf("GPU %u (%s): time-slice policy is already %s\n", g->index, g->name,
                       vgpu_timeslice_name(value));
        }
        if (!rc && changed) {
            changed_n++;
            if (g->compute_mode > 0)
                vgpu_warn("GPU %u is not in the default compute mode: the time slice matters only when several "
                          "processes share it ('vgpu mode set default')", g->index);
        }
        if (json) {
            struct json_object *o = gpu_json(g);
            add_ts(o, "timeslice", rc ? before : value);
            add_ts(o, "previous_timeslice", before);
            vgpu_json_bool(o, "changed", changed);
            vgpu_json_str(o, "error", rc ? msg : NULL);
            json_object_array_add(arr, o);
        }
    }
    if (!pol.ok && !first_rc)
        vgpu_warn("the previous policies are unknown: %s", list_msg);
    if (json) {
        json_object_object_add(doc, "gpus", arr);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    } else if (changed_n) {
        printf("Contexts created from now on use it (running ones keep theirs); it is lost on driver reload "
               "or reboot.\n");
    }
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return first_rc;
}

/* Without --gpu: every physical GPU (MIG devices are not time-sliced separately). */
static void all_gpus(const struct vgpu_gpu_list *list, struct vgpu_gpu_sel *sel)
{
    sel->count = 0;
    for (unsigned i = 0; i < list->count; i++)
        if (!list->gpu[i].is_mig)
            sel->pos[sel->count++] = i;
}

static int cmd_timeslice(int argc, char **argv)
{
    const char *gpu = NULL;
    bool json = false;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_timeslice, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': gpu = optarg; break;
        case 'j': json = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    static const char *const verb_names[] = { "get", "set", NULL };
    if (optind >= argc)
        return vgpu_usage_error(&vgpu_cmd_timeslice, "missing verb: get or set");
    const char *verb = argv[optind++];
    int value = -1;
    if (!strcmp(verb, "get")) {
        if (optind < argc)
            return vgpu_usage_error(&vgpu_cmd_timeslice, "unexpected argument '%s'", argv[optind]);
    } else if (!strcmp(verb, "set")) {
        if (optind >= argc)
            return vgpu_usage_error(&vgpu_cmd_timeslice, "set needs a VALUE: " TS_WORDS " (or 0..3)");
        value = vgpu_timeslice_parse(argv[optind]);
        if (value < 0) {
            static const char *const words[] = { "default", "short", "medium", "long", NULL };
            return vgpu_unknown_word(&vgpu_cmd_timeslice, "time-slice value", argv[optind], words);
        }
        if (++optind < argc)
            return vgpu_usage_error(&vgpu_cmd_timeslice, "unexpected argument '%s'", argv[optind]);
    } else {
        return vgpu_unknown_word(&vgpu_cmd_timeslice, "verb", verb, verb_names);
    }

    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return vgpu_err_report(&e);
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    struct vgpu_gpu_sel sel;
    int rc;
    if (!list)
        rc = vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
    else if (vgpu_gpus_enumerate(nv, list, &e) < 0)
        rc = vgpu_err_report(&e);
    else if (gpu && vgpu_gpus_select(list, gpu, &sel, &e) < 0)
        rc = vgpu_err_report(&e);
    else {
        if (!gpu || !strcmp(gpu, "all"))
            all_gpus(list, &sel);
        /* A lost GPU (vgpu(1), 12): get shows its row and names it; set changes nothing. */
        int lost = value < 0 ? 0 : vgpu_gpus_report_lost(list, &sel);
        rc = lost ? lost : value < 0 ? do_get(list, &sel, json) : do_set(list, &sel, value, json);
        if (!rc && value < 0)
            rc = vgpu_gpus_report_lost(list, &sel);
    }
    free(list);
    vgpu_nvml_close(nv);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_timeslice = {
    .name = "timeslice",
    .fn = cmd_timeslice,
    .summary = "show or set the driver's time-slice policy (default, short, medium, long)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
