/* vgpu run --gpus N (see gpus.h). */
#include "run/gpus.h"
#include "vgpu/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/exitcode.h"
#include "vgpu/region.h"

int vgpu_run_gpus_parse(const char *arg, const char *gpu, const char *mem, unsigned *count, struct vgpu_err *e)
{
    char *end;
    unsigned long n = strtoul(arg, &end, 10);
    if (arg[0] < '0' || arg[0] > '9' || *end || n < 1 || n > VGPU_REGION_MAX_DEVICES) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--gpus '%s': give how many GPUs the job needs, 1 to %d", arg,
                     VGPU_REGION_MAX_DEVICES);
        return -1;
    }
    if (gpu) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--gpus and --gpu both choose the job's GPUs: give --gpus N to let vgpu "
                     "choose N of them, or --gpu LIST to name them");
        return -1;
    }
    /* Placement compares one size with each candidate's memory: a percentage or a per-GPU list
     * describes GPUs not chosen yet (REQUEST:LIMIT places by its REQUEST). */
    if (mem && (strchr(mem, '%') || vgpu_mem_per_gpu(mem))) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--gpus needs --mem SIZE or REQUEST:LIMIT (the memory on each of its GPUs, "
                     "e.g. 20G or 20G:40G), not '%s'", mem);
        return -1;
    }
    *count = (unsigned)n;
    return 0;
}

void vgpu_run_gpus_say(const struct vgpu_gpu_list *list, const unsigned *pos, unsigned n,
                       const struct vgpu_topology *topo)
{
    if (vgpu_log_level() < VGPU_LOG_WARN)
        return;
    char idx[512] = "", uuids[2048] = "";
    size_t a = 0, b = 0;
    int far = 0;
    for (unsigned k = 0; k < n; k++) {
        const struct vgpu_gpu *g = &list->gpu[pos[k]];
        char one[48];
        if (g->is_mig)
            snprintf(one, sizeof one, "%u/gi%u/ci%u", g->index, g->mig_gi, g->mig_ci);
        else
            snprintf(one, sizeof one, "%u", g->index);
        int k1 = snprintf(idx + a, sizeof idx - a, "%s%s", k ? ", " : "", one);
        int k2 = snprintf(uuids + b, sizeof uuids - b, "%s%s", k ? ", " : "", g->uuid);
        if (k1 > 0 && (size_t)k1 < sizeof idx - a)
            a += (size_t)k1;
        if (k2 > 0 && (size_t)k2 < sizeof uuids - b)
            b += (size_t)k2;
        for (unsigned j = 0; j < k && topo; j++)
            if (topo->near[pos[j]][pos[k]] > far)
                far = topo->near[pos[j]][pos[k]];
    }
    /* Placement prefers GPUs of one model; when only a mixed group fits, say so, with the
     * models: each step of the job waits for its slowest GPU. */
    char models[512] = "";
    size_t m = 0;
    unsigned distinct = 0;
    for (unsigned k = 0; k < n; k++) {
        const char *name = list->gpu[pos[k]].name;
        bool seen = false;
        for (unsigned j = 0; j < k && !seen; j++)
            seen = !strcmp(list->gpu[pos[j]].name, name);
        if (seen)
            continue;
        int w = snprintf(models + m, sizeof models - m, "%s%s", distinct++ ? ", " : "", name);
        if (w > 0 && (size_t)w < sizeof models - m)
            m += (size_t)w;
    }
    bool mixed = distinct > 1;
    if (n == 1)
        fprintf(stderr, "vgpu run: placed on GPU %s (%s)\n", idx, uuids);
    else
        fprintf(stderr, "vgpu run: placed on GPUs %s (%s): %s%s%s%s\n", idx, uuids,
                topo ? vgpu_near_name((enum vgpu_near)far) : "topology not known",
                mixed ? "; mixed models (" : "", mixed ? models : "",
                mixed ? "): no GPUs of one model had room, and each step waits for the slowest" : "");
}
