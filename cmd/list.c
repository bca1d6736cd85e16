/* vgpu list: the GPUs of this machine, like `nvidia-smi -L` with the facts vgpu users need. */
static const char usage[] =
    "usage: vgpu list [--gpu SEL] [--json]\n"
    "       vgpu ls ...\n"
    "\n"
    "List the NVIDIA GPUs (and the MIG devices of GPUs in MIG mode): index, name, UUID, memory\n"
    "used and total, MIG mode (current and pending), compute mode, and the driver and CUDA\n"
    "versions. Memory is shown as nvidia-smi shows it (used excludes the driver's reservation).\n"
    "\n"
    "  --gpu SEL   only these GPUs: an index, a UUID or its unique start, a PCI bus id,\n"
    "              a MIG UUID, a comma list of those, or 'all'\n"
    "  --json      one JSON document (see vgpu-json(7)); sizes in bytes\n"
    "  --help      show this help\n"
    "\n"
    "Exit status: 0 listed; 2 bad option or unknown GPU; 3 libnvidia-ml.so.1 not found;\n"
    "4 driver not loaded; 5 no GPU; 6 permission denied; 12 a GPU is lost (listed, and named\n"
    "on stderr).\n";

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_list;

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

static const char *compute_mode_name(int m)
{
    switch (m) {
    case 0: return "default";
    case 1: return "exclusive-thread";
    case 2: return "prohibited";
    case 3: return "exclusive-process";
    default: return NULL;
    }
}

static const char *mig_name(const struct vgpu_gpu *g, unsigned mode)
{
    if (!g->has_mig_mode)
        return NULL;
    return mode ? "enabled" : "disabled";
}

static void cuda_version_text(int v, char *buf, size_t len)
{
    if (v > 0)
        snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
    else
        snprintf(buf, len, "N/A");
}

static int print_json(struct vgpu_nvml *nv, const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel)
{
    struct json_object *doc = vgpu_json_doc();
    char cv[16];
    cuda_version_text(nv->cuda_version, cv, sizeof cv);
    vgpu_json_str(doc, "driver_version", nv->driver_version[0] ? nv->driver_version : NULL);
    vgpu_json_str(doc, "nvml_version", nv->nvml_version[0] ? nv->nvml_version : NULL);
    vgpu_json_str(doc, "cuda_version", nv->cuda_version ? cv : NULL);
    struct json_object *gpus = json_object_new_array();
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        struct json_object *o = json_object_new_object();
        vgpu_json_u64(o, "index", g->index);
        vgpu_json_bool(o, "is_mig_device", g->is_mig);
        if (g->is_mig) {
            vgpu_json_u64(o, "gpu_instance_id", g->mig_gi);
            vgpu_json_u64(o, "compute_instance_id", g->mig_ci);
        }
        vgpu_json_str(o, "name", g->name[0] ? g->name : NULL);
        /* Lost or unreachable: every other value is null (vgpu-json(7)). */
        vgpu_json_bool(o, "lost", g->lost || g->unreachable[0]);
        vgpu_json_str(o, "uuid", g->uuid[0] ? g->uuid : NULL);
        vgpu_json_str(o, "pci_bus_id", g->pci_bus_id[0] ? g->pci_bus_id : NULL);
        vgpu_json_u64_or_null(o, "mem_total_bytes", g->mem_total > 0, g->mem_total);
        vgpu_json_u64_or_null(o, "mem_used_bytes", g->mem_total > 0, g->mem_used);
        vgpu_json_u64_or_null(o, "mem_reserved_bytes", g->mem_total > 0, g->mem_reserved);
        vgpu_json_str(o, "mig_mode_current", g->is_mig ? NULL : mig_name(g, g->mig_current));
        vgpu_json_str(o, "mig_mode_pending", g->is_mig ? NULL : mig_name(g, g->mig_pending));
        vgpu_json_str(o, "compute_mode", compute_mode_name(g->compute_mode));
        json_object_array_add(gpus, o);
    }
    json_object_object_add(doc, "gpus", gpus);
    if (vgpu_json_emit(doc, true) < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return 0;
}

static void mib(uint64_t bytes, char *buf, size_t len)
{
    snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes / VGPU_MIB));
}

static int print_table(struct vgpu_nvml *nv, const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel)
{
    char cv[16];
    cuda_version_text(nv->cuda_version, cv, sizeof cv);
    printf("Driver %s  CUDA %s  NVML %s\n", nv->driver_version[0] ? nv->driver_version : "N/A", cv,
           nv->nvml_version[0] ? nv->nvml_version : "N/A");
    printf("%-7s %-26s %-41s %21s  %-17s %s\n", "GPU", "NAME", "UUID", "MEMORY USED / TOTAL", "MIG (PENDING)",
           "COMPUTE MODE");
    for (unsigned s = 0; s < sel->count; s++) {
        const struct vgpu_gpu *g = &list->gpu[sel->pos[s]];
        char idx[24], used[24], total[24], memtxt[64], mig[32];
        if (g->is_mig)
            snprintf(idx, sizeof idx, "%u/%u/%u", g->index, g->mig_gi, g->mig_ci);
        else
            snprintf(idx, sizeof idx, "%u", g->index);
        mib(g->mem_used, used, sizeof used);
        mib(g->mem_total, total, sizeof total);
        if (g->mem_total)
            snprintf(memtxt, sizeof memtxt, "%s / %s", used, total);
        else
            snprintf(memtxt, sizeof memtxt, "N/A");
        if (g->is_mig)
            snprintf(mig, sizeof mig, "-");
        else if (!g->has_mig_mode)
            snprintf(mig, sizeof mig, "N/A");
        else if (g->mig_current != g->mig_pending)
            snprintf(mig, sizeof mig, "%s (%s)", g->mig_current ? "on" : "off", g->mig_pending ? "on" : "off");
        else
            snprintf(mig, sizeof mig, "%s", g->mig_current ? "on" : "off");
        const char *cm = compute_mode_name(g->compute_mode);
        char why[128];
        if (vgpu_gpu_trouble(g, why, sizeof why)) {
            printf("%-7s GPU %s\n", idx, why);
            continue;
        }
        printf("%-7s %-26.26s %-41s %21s  %-17s %s\n", idx, g->name, g->uuid[0] ? g->uuid : "N/A", memtxt, mig,
               cm ? cm : "N/A");
    }
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return 0;
}

static int cmd_list(int argc, char **argv)
{
    const char *gpu = NULL;
    bool json = false;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_list, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': gpu = optarg; break;
        case 'j': json = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_list, "unexpected argument '%s'", argv[optind]);

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
        if (!gpu) {
            /* Everything: each GPU followed by its MIG devices. */
            sel.count = 0;
            for (unsigned i = 0; i < list->count; i++)
                sel.pos[sel.count++] = i;
        }
        rc = json ? print_json(nv, list, &sel) : print_table(nv, list, &sel);
        /* The rows are printed; then the lost GPUs are said on stderr, and the status says it. */
        int lost = vgpu_gpus_report_lost(list, &sel);
        if (rc == 0)
            rc = lost;
        if (rc == 0)
            vgpu_arb_note_alone("list");
    }
    free(list);
    vgpu_nvml_close(nv);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_list = {
    .name = "list",
    .alias = "ls",
    .fn = cmd_list,
    .summary = "list the GPUs, their memory, MIG and compute modes",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
};
