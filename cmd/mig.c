/* vgpu mig: MIG mode, profiles and instances, like `nvidia-smi mig` plus a declarative layout
 * (apply/export) in the spirit of mig-parted. The NVML work is in lib/core/mig/mig.c. */
static const char usage[] =
    "usage: vgpu mig status   [--gpu SEL] [--json]\n"
    "       vgpu mig profiles [--gpu SEL] [--placements] [--gi ID] [--json]\n"
    "       vgpu mig list     [--gpu SEL] [--json]\n"
    "       vgpu mig enable   [--gpu SEL] [--json]\n"
    "       vgpu mig disable  [--gpu SEL] [--json]\n"
    "       vgpu mig create SPEC [--gpu SEL] [--ci PROFILE | --no-ci] [--json]\n"
    "       vgpu mig destroy ID...|all [--gpu SEL] [--json]\n"
    "       vgpu mig apply FILE [--dry-run] [--json]\n"
    "       vgpu mig export   [--gpu SEL] [--json]\n"
    "\n"
    "Partition GPUs into MIG instances (A100, A30, H100, H200 and newer).\n"
    "\n"
    "  status     MIG mode, current and pending, whether a GPU reset is needed, the instances\n"
    "  profiles   GPU-instance profiles: free/total instances, memory, SMs, copy engines,\n"
    "             decoders, encoders, JPEG, OFA (--placements: the possible placements);\n"
    "             with --gi ID the compute-instance profiles of that GPU instance\n"
    "  list       GPU and compute instances with their MIG UUIDs (usable as 'vgpu run --gpu')\n"
    "  enable, disable\n"
    "             set MIG mode (root); when the change is pending, says what must happen\n"
    "  create     SPEC is a comma list of profile names or IDs, with counts and optional\n"
    "             placements: '3g.40gb,2x1g.10gb', '1g.10gb:4'. Each GPU instance gets a\n"
    "             compute instance covering it, unless --no-ci; --ci PROFILE picks another one.\n"
    "             All or nothing: when one cannot be created, the ones this call created are\n"
    "             destroyed again and the reason is shown.\n"
    "  destroy    GPU instances by ID (their compute instances first), or all; refused while\n"
    "             processes use them (they are named)\n"
    "  apply      make the GPUs match a layout file (JSON, see vgpu-mig(1)); nothing is touched\n"
    "             when they already do, otherwise the plan is printed and carried out\n"
    "  export     the current layout in the format apply reads, always JSON (--json is accepted\n"
    "             and changes nothing); export | apply is a no-op\n"
    "\n"
    "  --gpu SEL       these GPUs: index, UUID or its start, PCI bus id, a MIG UUID (its GPU),\n"
    "                  comma list, or 'all' (default: all; create and destroy need one GPU)\n"
    "  --placements    profiles: show the possible placements ({start,...}:size)\n"
    "  --gi ID         profiles: compute-instance profiles of GPU instance ID\n"
    "  --ci PROFILE    create: compute-instance profile (1c.3g.40gb, 1c, or its ID)\n"
    "  --no-ci         create: GPU instances only\n"
    "  --dry-run       apply: print the plan, change nothing\n"
    "  --json          one JSON document, also on failure: then \"ok\": false and \"error\"\n"
    "  --help          show this help\n"
    "\n"
    "Exit status: 0 done or nothing to do; 1 failed; 2 bad usage, unknown GPU or profile;\n"
    "3 libnvidia-ml.so.1 not found; 4 driver not loaded; 5 no GPU; 6 permission denied (root\n"
    "needed); 7 in use; 8 no such instance; 9 no free placement; 10 mode change pending; 12 a\n"
    "GPU is lost.\n";

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd.h"
#include "common.h"
#include "mig/verbs.h"
#include "vgpu/gpu_cache.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/mig.h"
#include "vgpu/nvml.h"


static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "json", no_argument, NULL, 'j' },
    { "placements", no_argument, NULL, 'p' },
    { "gi", required_argument, NULL, 'i' },
    { "ci", required_argument, NULL, 'c' },
    { "no-ci", no_argument, NULL, 'n' },
    { "dry-run", no_argument, NULL, 'd' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "gi", VGPU_ARG_OTHER, NULL },
    { "ci", VGPU_ARG_PROFILE, NULL },
    { NULL, 0, NULL },
};

static const struct vgpu_verb verbs[] = {
    { "status", "MIG mode (current, pending) and instances", VGPU_ARG_NONE, NULL },
    { "profiles", "GPU- and compute-instance profiles with free counts", VGPU_ARG_NONE, NULL },
    { "list", "GPU and compute instances with their MIG UUIDs", VGPU_ARG_NONE, NULL },
    { "enable", "enable MIG mode (root)", VGPU_ARG_NONE, NULL },
    { "disable", "disable MIG mode (root)", VGPU_ARG_NONE, NULL },
    { "create", "create GPU instances from a SPEC (3g.40gb,2x1g.10gb)", VGPU_ARG_PROFILE, NULL },
    { "destroy", "destroy GPU instances by ID, or all", VGPU_ARG_WORD, "all" },
    { "apply", "make the GPUs match a layout file", VGPU_ARG_FILE, NULL },
    { "export", "write the current layout (for apply)", VGPU_ARG_NONE, NULL },
    { NULL, NULL, 0, NULL },
};

/* ---- dispatch ------------------------------------------------------------------------------------ */

/* The document of a verb that failed before it could print its own: its keys, empty. */
static struct json_object *failed_doc(const char *verb, const struct opts *o)
{
    struct json_object *doc = vgpu_json_doc();
    if (!verb)
        return doc;
    if (!strcmp(verb, "create"))
        json_object_object_add(doc, "created", json_object_new_array());
    else if (!strcmp(verb, "destroy"))
        json_object_object_add(doc, "destroyed", json_object_new_array());
    else if (!strcmp(verb, "profiles") && o->gi)
        json_object_object_add(doc, "gpu_instances", json_object_new_array());
    else {
        if (!strcmp(verb, "apply"))
            vgpu_json_bool(doc, "changed", false);
        json_object_object_add(doc, "gpus", json_object_new_array());
    }
    return doc;
}

/* The first lost or unreachable GPU the verb would work on: said, and its status (12). */
static int first_lost(const struct ctx *c)
{
    char why[128];
    for (unsigned k = 0; k < c->n; k++)
        if (vgpu_gpu_trouble(&c->list->gpu[c->pos[k]], why, sizeof why))
            return mig_gpu_lost(&c->list->gpu[c->pos[k]]);
    return 0;
}

static const char *const verb_names[] = { "status", "profiles", "list", "enable", "disable", "create",
                                          "destroy", "apply", "export", NULL };

/* Everything after the options; *verbp: the verb once known. */
static int run_verb(const struct opts *op, int argc, char **argv, const char **verbp)
{
    struct opts o = *op;
    const char *const *names = verb_names;
    if (optind >= argc)
        return mig_usage_err("missing verb: status, profiles, list, enable, disable, create, destroy, apply or "
                         "export");
    const char *verb = argv[optind++];
    int nargs = argc - optind;
    char **args = argv + optind;
    bool known = false;
    for (int i = 0; names[i]; i++)
        known |= !strcmp(names[i], verb);
    if (!known) {
        const char *best = vgpu_closest(verb, names, sizeof verb_names / sizeof *verb_names - 1);
        if (best)
            return mig_usage_err("unknown verb '%s'; did you mean '%s'?", verb, best);
        return mig_usage_err("unknown verb '%s'", verb);
    }
    *verbp = verb;
    bool takes_one = !strcmp(verb, "create") || !strcmp(verb, "apply");
    if (!strcmp(verb, "destroy")) {
        if (!nargs)
            return mig_usage_err("destroy needs GPU instance IDs or 'all'");
    } else if (takes_one) {
        if (nargs < 1)
            return mig_usage_err("%s needs %s", verb, !strcmp(verb, "create") ? "a SPEC such as 3g.40gb,2x1g.10gb"
                             : "a layout FILE (see 'vgpu mig export')");
        if (nargs > 1)
            return mig_usage_err("unexpected argument '%s'", args[1]);
    } else if (nargs) {
        return mig_usage_err("unexpected argument '%s'", args[0]);
    }
    if ((o.ci || o.no_ci) && strcmp(verb, "create"))
        return mig_usage_err("--ci and --no-ci go with create");
    if (o.ci && o.no_ci)
        return mig_usage_err("--ci and --no-ci exclude each other");
    if ((o.placements || o.gi) && strcmp(verb, "profiles"))
        return mig_usage_err("--placements and --gi go with profiles");
    if (o.dry_run && strcmp(verb, "apply"))
        return mig_usage_err("--dry-run goes with apply");
    if (o.gpu && !strcmp(verb, "apply"))
        return mig_usage_err("apply takes the GPUs from the layout, not from --gpu");

    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return mig_report(&e);
    struct ctx cx = { .nv = nv, .o = &o };
    cx.list = calloc(1, sizeof *cx.list);
    cx.mg = calloc(1, sizeof *cx.mg);
    int rc;
    if (!cx.list || !cx.mg)
        rc = mig_fail(VGPU_EXIT_FAIL, "out of memory");
    else if (vgpu_gpus_enumerate(nv, cx.list, &e) < 0)
        rc = mig_report(&e);
    else if (mig_select_physical(&cx, o.gpu, &e) < 0)
        rc = mig_report(&e);
    else if (strcmp(verb, "status") && (rc = first_lost(&cx)) != 0)
        ;   /* status shows a lost GPU's row; every other verb stops before doing anything */
    else if (!strcmp(verb, "status"))
        rc = mig_status(&cx);
    else if (!strcmp(verb, "profiles"))
        rc = mig_profiles(&cx);
    else if (!strcmp(verb, "list"))
        rc = mig_list(&cx);
    else if (!strcmp(verb, "enable"))
        rc = mig_mode(&cx, 1);
    else if (!strcmp(verb, "disable"))
        rc = mig_mode(&cx, 0);
    else if (!strcmp(verb, "create"))
        rc = mig_create(&cx, args[0]);
    else if (!strcmp(verb, "destroy"))
        rc = mig_destroy(&cx, args, nargs);
    else if (!strcmp(verb, "apply"))
        rc = mig_apply(&cx, args[0]);
    else
        rc = mig_export(&cx);
    /* A change, made or half made, is one vgpu run's kept GPU list does not describe. */
    if (!strcmp(verb, "enable") || !strcmp(verb, "disable") || !strcmp(verb, "create") || !strcmp(verb, "destroy") ||
        !strcmp(verb, "apply"))
        vgpu_gpu_cache_forget();
    free(cx.list);
    free(cx.mg);
    vgpu_nvml_close(nv);
    return rc;
}

static int cmd_mig(int argc, char **argv)
{
    struct opts o = { 0 };
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_mig, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': o.gpu = optarg; break;
        case 'j': o.json = true; break;
        case 'p': o.placements = true; break;
        case 'i': o.gi = optarg; break;
        case 'c': o.ci = optarg; break;
        case 'n': o.no_ci = true; break;
        case 'd': o.dry_run = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;  /* the command line cannot be read: stderr only */
        }
    }
    const char *verb = NULL;
    int rc = run_verb(&o, argc, argv, &verb);
    if (o.json && rc && !mig_failure.emitted)
        rc = mig_finish(failed_doc(verb, &o), rc);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_mig = {
    .name = "mig",
    .fn = cmd_mig,
    .summary = "MIG: mode, profiles, instances (create, destroy), layouts (apply, export)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
