/* vgpu mode: the driver's compute mode, through NVML (reference/nvml.md §14). */
static const char usage[] =
    "usage: vgpu mode get [--gpu SEL] [--json]\n"
    "       vgpu mode set MODE [--gpu SEL] [--json]\n"
    "\n"
    "Show or set the compute mode, which decides who may create CUDA contexts on a GPU:\n"
    "  default             any number of processes (the driver time-slices them)\n"
    "  exclusive-process   one process at a time (an MPS server counts as one: the usual\n"
    "                      setting under 'vgpu mps start')\n"
    "  prohibited          no process at all\n"
    "MODE may also be given as nvidia-smi's numbers (0, 3, 2). Setting needs root, takes effect\n"
    "at once for new contexts, and is lost on reboot or driver reload. On a GPU in MIG mode the\n"
    "compute mode is set per MIG device (--gpu MIG-...), and exclusive-process is refused there\n"
    "by the driver. The time-slice policy ('vgpu timeslice') needs the default mode.\n"
    "\n"
    "  --gpu SEL   these GPUs or MIG devices (index, UUID or its unique start, PCI bus id,\n"
    "              MIG UUID, comma list, or 'all': the default)\n"
    "  --json      one JSON document (see vgpu-mode(1))\n"
    "  --help      show this help\n"
    "\n"
    "Exit status: 0 done (or nothing to change); 1 the driver refused (the message says why);\n"
    "2 bad usage or unknown GPU; 3 libnvidia-ml.so.1 not found; 4 driver not loaded; 5 no GPU;\n"
    "6 not root; 12 a GPU is lost (shown as lost, and named on stderr).\n";

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"

extern const struct vgpu_cmd vgpu_cmd_mode;

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

#define MODE_WORDS "default exclusive-process prohibited"

static const struct vgpu_verb verbs[] = {
    { "get", "show the compute mode of the GPUs", VGPU_ARG_NONE, NULL },
    { "set", "set the compute mode (root)", VGPU_ARG_WORD, MODE_WORDS },
    { NULL, NULL, 0, NULL },
};

/* nvmlComputeMode_t values (stable ABI, reference/nvml.md §14). */
enum { CM_DEFAULT = 0, CM_EXCLUSIVE_THREAD = 1, CM_PROHIBITED = 2, CM_EXCLUSIVE_PROCESS = 3 };

static const char *mode_name(int m)
{
    switch (m) {
    case CM_DEFAULT: return "default";
    case CM_EXCLUSIVE_THREAD: return "exclusive-thread";
    case CM_PROHIBITED: return "prohibited";
    case CM_EXCLUSIVE_PROCESS: return "exclusive-process";
    default: return NULL;
    }
}

/* "exclusive-process", "EXCLUSIVE_PROCESS", "exclusive_process", "3" ...; -1 unknown, -2 the
 * removed exclusive-thread. */
static int mode_parse(const char *s)
{
    char w[40];
    size_t i;
    for (i = 0; s[i] && i + 1 < sizeof w; i++)
        w[i] = s[i] == '_' ? '-' : s[i];
    w[i] = 0;
    if (!strcasecmp(w, "default") || !strcmp(w, "0"))
        return CM_DEFAULT;
    if (!strcasecmp(w, "exclusive-process") || !strcmp(w, "3"))
        return CM_EXCLUSIVE_PROCESS;
    if (!strcasecmp(w, "prohibited") || !strcmp(w, "2"))
        return CM_PROHIBITED;
    if (!strcasecmp(w, "exclusive-thread") || !strcmp(w, "1"))
        return -2;
    return -1;
}

static void label(const struct vgpu_gpu *g, char *buf, size_t len)
{
    if (g->is_mig)
        snprintf(buf, len, "MIG device %u/%u/%u (%s, %s)", g->index, g->mig_gi, g->mig_ci, g->name, g->uuid);
    else
        snprintf(buf, len, "GPU %u (%s)", g->index, g->name);
}

static struct json_object *gpu_json(const struct vgpu_gpu *g)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_u64(o, "index", g->index);
    vgpu_json_bool(o, "is_mig_device", g->is_mig);
    if (g->is_mig) {
        vgpu_json_u64(o, "gpu_instance_id", g->mig_gi);
        vgpu_json_u64(o, "compute_instance_id", g->mig_ci);
    }
    vgpu_json_str(o, "name", g->name[0] ? g->name : NULL);
    vgpu_json_str(o, "uuid", g->uuid[0] ? g->uuid : NULL);
    vgpu_json_bool(o, "lost", g->lost || g->unreachable[0]);
    return o;
}

static int do_get(const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel, bool json)
{
    if (json) {
        struct json_object *doc = vgpu_json_doc();
        struct json_object *arr = json_object_new_array();
        for (unsigned s = 0; s < sel->count; s++) {
            const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
            struct json_object *o = gpu_json(g);
            vgpu_json_str(o, "compute_mode", mode_name(g->compute_mode));
            json_object_array_add(arr, o);
        }
        json_object_object_add(doc, "gpus", arr);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        return 0;
    }
    printf("%-9s %-26s %-41s %s\n", "GPU", "NAME", "UUID", "COMPUTE MODE");
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        char idx[32];
        if (g->is_mig)
            snprintf(idx, sizeof idx, "%u/%u/%u", g->index, g->mig_gi, g->mig_ci);
        else
            snprintf(idx, sizeof idx, "%u", g->index);
        const char *m = mode_name(g->compute_mode);
        char why[128];
        if (vgpu_gpu_trouble(g, why, sizeof why)) {
            printf("%-9s GPU %s\n", idx, why);
            continue;
        }
        printf("%-9s %-26.26s %-41s %s\n", idx, g->name, g->uuid[0] ? g->uuid : "N/A", m ? m : "N/A");
    }
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return 0;
}

/* Is the physical GPU behind list entry g in MIG mode (for a MIG device: always)? */
static bool in_mig_mode(const struct vgpu_gpu *g)
{
    return g->is_mig || (g->has_mig_mode && g->mig_current);
}

/* Sets one device; returns 0 or an exit code, with the message in msg. */
static int set_one(struct vgpu_nvml *nv, struct vgpu_gpu *g, int mode, bool *changed, char *msg, size_t len)
{
    char who[300];
    label(g, who, sizeof who);
    *changed = false;
    msg[0] = 0;
    char trouble[128];
    if (vgpu_gpu_trouble(g, trouble, sizeof trouble)) {
        snprintf(msg, len, "GPU %u %s: its compute mode cannot be set; see 'nvidia-smi -q -i %u'", g->index, trouble,
                 g->index);
        return VGPU_EXIT_GPU_LOST;
    }
    if (!g->handle) {
        snprintf(msg, len, "%s is not available", who);
        return VGPU_EXIT_FAIL;
    }
    /* Nothing to change is no error, also where a change would be refused: 'mode set default'
     * over every GPU failed on a MIG-enabled one already in the default mode. */
    if (g->compute_mode == mode)
        return 0;
    if (!g->is_mig && g->has_mig_mode && g->mig_current) {
        snprintf(msg, len, "%s is in MIG mode: its compute mode is set per MIG device; give a MIG device "
                 "with --gpu MIG-... ('vgpu list' shows them), or leave --gpu out to set them all", who);
        return VGPU_EXIT_FAIL;
    }
    if (in_mig_mode(g) && mode == CM_EXCLUSIVE_PROCESS) {
        snprintf(msg, len, "%s: setting the compute mode to exclusive-process is not supported on a "
                 "MIG-enabled device (the driver refuses it); under MIG, MPS runs one control daemon per "
                 "MIG device with the default compute mode", who);
        return VGPU_EXIT_FAIL;
    }
    if (!nv->nvmlDeviceSetComputeMode) {
        snprintf(msg, len, "%s: this NVML has no nvmlDeviceSetComputeMode", who);
        return VGPU_EXIT_FAIL;
    }
    nvmlReturn_t rc = nv->nvmlDeviceSetComputeMode(g->handle, (nvmlComputeMode_t)mode);
    const char *why = vgpu_nvml_strerror(nv, rc);
    switch ((int)rc) {
    case NVML_SUCCESS:
        *changed = true;
        break;
    case NVML_ERROR_NO_PERMISSION:
        snprintf(msg, len, "%s: setting the compute mode requires root (NVML: %s); run it as root or "
                 "with sudo", who, why);
        return VGPU_EXIT_PERMISSION;
    case NVML_ERROR_NOT_SUPPORTED:
        if (in_mig_mode(g))
            snprintf(msg, len, "%s: the driver does not support the %s compute mode on a MIG-enabled device "
                     "(NVML: %s)", who, mode_name(mode), why);
        else
            snprintf(msg, len, "%s does not support the %s compute mode (NVML: %s)", who, mode_name(mode), why);
        return VGPU_EXIT_FAIL;
    case NVML_ERROR_IN_USE:
        snprintf(msg, len, "%s: cannot change the compute mode while it is in use (NVML: %s); stop the "
                 "processes on it ('vgpu ps', 'nvidia-smi') and try again", who, why);
        return VGPU_EXIT_BUSY;
    case NVML_ERROR_GPU_IS_LOST:
        snprintf(msg, len, "%s has fallen off the bus (NVML: %s); a reset or reboot is needed", who, why);
        return VGPU_EXIT_FAIL;
    default:
        snprintf(msg, len, "%s: cannot set the compute mode to %s (NVML error %d: %s)", who, mode_name(mode),
                 (int)rc, why);
        return VGPU_EXIT_FAIL;
    }
    nvmlComputeMode_t now;
    if (nv->nvmlDeviceGetComputeMode && nv->nvmlDeviceGetComputeMode(g->handle, &now) == NVML_SUCCESS &&
        (int)now != mode) {
        snprintf(msg, len, "%s: the driver accepted the %s compute mode but still reports %s", who,
                 mode_name(mode), mode_name((int)now) ? mode_name((int)now) : "an unknown mode");
        return VGPU_EXIT_FAIL;
    }
    return 0;
}

static const char *mode_note(int mode)
{
    switch (mode) {
    case CM_EXCLUSIVE_PROCESS:
        return "only one process at a time can now create a context there (an MPS server counts as one)";
    case CM_PROHIBITED:
        return "no process can now create a context there";
    default:
        return "any number of processes can create contexts there; the driver time-slices them";
    }
}

static int do_set(struct vgpu_nvml *nv, struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel, int mode,
                  bool json)
{
    int first_rc = 0;
    unsigned changed_n = 0;
    struct json_object *doc = json ? vgpu_json_doc() : NULL;
    struct json_object *arr = json ? json_object_new_array() : NULL;
    for (unsigned s = 0; s < sel->count; s++) {
        struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        int before = g->compute_mode;
        bool changed;
        char msg[700], who[300];
        int rc = set_one(nv, g, mode, &changed, msg, sizeof msg);
        label(g, who, sizeof who);
        if (rc) {
            vgpu_error("%s", msg);
            if (!first_rc)
                first_rc = rc;
        } else if (changed) {
            changed_n++;
            if (!json)
                printf("%s: compute mode %s -> %s\n", who, mode_name(before) ? mode_name(before) : "unknown",
                       mode_name(mode));
        } else if (!json) {
            printf("%s: compute mode is already %s\n", who, mode_name(mode));
        }
        if (json) {
            struct json_object *o = gpu_json(g);
            vgpu_json_str(o, "compute_mode", rc ? mode_name(before) : mode_name(mode));
            vgpu_json_str(o, "previous_compute_mode", mode_name(before));
            vgpu_json_bool(o, "changed", changed);
            vgpu_json_str(o, "error", rc ? msg : NULL);
            json_object_array_add(arr, o);
        }
    }
    if (json) {
        json_object_object_add(doc, "gpus", arr);
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    } else if (changed_n) {
        printf("The change applies to new contexts at once and is lost on reboot or driver reload; %s.\n",
               mode_note(mode));
    }
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return first_rc;
}

static int cmd_mode(int argc, char **argv)
{
    const char *gpu = NULL;
    bool json = false;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_mode, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': gpu = optarg; break;
        case 'j': json = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    static const char *const verb_names[] = { "get", "set", NULL };
    if (optind >= argc)
        return vgpu_usage_error(&vgpu_cmd_mode, "missing verb: get or set");
    const char *verb = argv[optind++];
    int mode = -1;
    if (!strcmp(verb, "get")) {
        if (optind < argc)
            return vgpu_usage_error(&vgpu_cmd_mode, "unexpected argument '%s'", argv[optind]);
    } else if (!strcmp(verb, "set")) {
        if (optind >= argc)
            return vgpu_usage_error(&vgpu_cmd_mode, "set needs a MODE: " MODE_WORDS);
        mode = mode_parse(argv[optind]);
        if (mode == -2)
            return vgpu_fail(VGPU_EXIT_USAGE, "the exclusive-thread compute mode was removed from the NVIDIA "
                             "driver; use exclusive-process");
        if (mode < 0) {
            static const char *const words[] = { "default", "exclusive-process", "prohibited", NULL };
            return vgpu_unknown_word(&vgpu_cmd_mode, "compute mode", argv[optind], words);
        }
        if (++optind < argc)
            return vgpu_usage_error(&vgpu_cmd_mode, "unexpected argument '%s'", argv[optind]);
    } else {
        return vgpu_unknown_word(&vgpu_cmd_mode, "verb", verb, verb_names);
    }

    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return vgpu_err_report(&e);
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    struct vgpu_gpu_sel sel;
    int rc;
    if (!list) {
        rc = vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
    } else if (vgpu_gpus_enumerate(nv, list, &e) < 0) {
        rc = vgpu_err_report(&e);
    } else if (mode < 0) {
        if (gpu && vgpu_gpus_select(list, gpu, &sel, &e) < 0) {
            rc = vgpu_err_report(&e);
        } else {
            if (!gpu) {
                /* Everything, as 'vgpu list' shows it: each GPU followed by its MIG devices. */
                sel.count = 0;
                for (unsigned i = 0; i < list->count; i++)
                    sel.pos[sel.count++] = i;
            }
            rc = do_get(list, &sel, json);
            int lost = vgpu_gpus_report_lost(list, &sel);
            if (rc == 0)
                rc = lost;
        }
    } else if (vgpu_gpus_select_default(list, gpu, &sel, &e) < 0) {
        rc = vgpu_err_report(&e);
    } else {
        rc = do_set(nv, list, &sel, mode, json);
    }
    free(list);
    vgpu_nvml_close(nv);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_mode = {
    .name = "mode",
    .fn = cmd_mode,
    .summary = "show or set the compute mode (default, exclusive-process, prohibited)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
