/* MIG through NVML, changing: create instances all-or-nothing, destroy them unless in use
 * (see vgpu/mig.h, reference/nvml.md §9-§11). */
#include "vgpu/mig.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mig_internal.h"
#include "vgpu/closest.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/nvml.h"

static unsigned add_pids(struct vgpu_nvml *nv, nvmlDevice_t h, bool filter, unsigned gi_id, pid_t *pids,
                         unsigned n, unsigned max)
{
    if (!nv->nvmlDeviceGetComputeRunningProcesses_v3)
        return n;
    nvmlProcessInfo_v2_t buf[64];
    unsigned cnt = 64;
    if (nv->nvmlDeviceGetComputeRunningProcesses_v3(h, &cnt, buf) != NVML_SUCCESS)
        return n;
    for (unsigned i = 0; i < cnt && i < 64; i++) {
        if (filter && buf[i].gpuInstanceId != gi_id)
            continue;
        bool dup = false;
        for (unsigned j = 0; j < n; j++)
            dup |= pids[j] == (pid_t)buf[i].pid;
        if (!dup && n < max)
            pids[n++] = (pid_t)buf[i].pid;
    }
    return n;
}

unsigned vgpu_mig_gi_pids(struct vgpu_nvml *nv, const struct vgpu_mig_gpu *g, unsigned gi_id, pid_t *pids,
                          unsigned max)
{
    unsigned n = 0, mx = 0;
    if (nv->nvmlDeviceGetMaxMigDeviceCount && nv->nvmlDeviceGetMigDeviceHandleByIndex &&
        nv->nvmlDeviceGetGpuInstanceId && nv->nvmlDeviceGetMaxMigDeviceCount(g->dev, &mx) == NVML_SUCCESS) {
        for (unsigned m = 0; m < mx; m++) {
            nvmlDevice_t h;
            unsigned gid;
            if (nv->nvmlDeviceGetMigDeviceHandleByIndex(g->dev, m, &h) != NVML_SUCCESS ||
                nv->nvmlDeviceGetGpuInstanceId(h, &gid) != NVML_SUCCESS || gid != gi_id)
                continue;
            n = add_pids(nv, h, false, 0, pids, n, max);
        }
    }
    return add_pids(nv, g->dev, true, gi_id, pids, n, max);
}

unsigned vgpu_mig_gpu_pids(struct vgpu_nvml *nv, const struct vgpu_mig_gpu *g, pid_t *pids, unsigned max)
{
    unsigned n = add_pids(nv, g->dev, false, 0, pids, 0, max);
    for (unsigned i = 0; i < g->ngi; i++)
        n = add_pids(nv, g->dev, true, g->gi[i].id, pids, n, max);
    return n;
}

static void pid_list(const pid_t *pids, unsigned n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < n && used + 1 < len; i++) {
        int k = snprintf(buf + used, len - used, "%s%d", i ? ", " : "", (int)pids[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

static const char *perm_hint(int rc)
{
    return rc == NVML_ERROR_NO_PERMISSION
               ? " (needs root, or read access to /proc/driver/nvidia/capabilities/mig/config)"
               : "";
}

int vgpu_mig_destroy_gi(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g, const struct vgpu_mig_gi *gi,
                        struct vgpu_err *e)
{
    pid_t pids[32];
    unsigned np = vgpu_mig_gi_pids(nv, g, gi->id, pids, 32);
    if (np) {
        char list[256];
        pid_list(pids, np, list, sizeof list);
        vgpu_err_set(e, VGPU_EXIT_BUSY,
                     "GPU instance %u (%s) on GPU %u is in use by PID%s %s; stop %s first", gi->id, gi->profile,
                     g->index, np > 1 ? "s" : "", list, np > 1 ? "them" : "it");
        return -1;
    }
    if (!nv->nvmlComputeInstanceDestroy || !nv->nvmlGpuInstanceDestroy) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "this driver's NVML cannot destroy MIG instances");
        return -1;
    }
    for (unsigned j = 0; j < gi->nci; j++) {
        nvmlReturn_t rc = nv->nvmlComputeInstanceDestroy(gi->ci[j].handle);
        if (rc != NVML_SUCCESS) {
            vgpu_err_set(e, vgpu_mig_errcode(rc), "cannot destroy compute instance %u of GPU instance %u on GPU %u: %s%s",
                         gi->ci[j].id, gi->id, g->index, vgpu_nvml_strerror(nv, rc), perm_hint(rc));
            return -1;
        }
    }
    nvmlReturn_t rc = nv->nvmlGpuInstanceDestroy(gi->handle);
    if (rc != NVML_SUCCESS) {
        vgpu_err_set(e, vgpu_mig_errcode(rc), "cannot destroy GPU instance %u on GPU %u: %s%s%s", gi->id, g->index,
                     vgpu_nvml_strerror(nv, rc), perm_hint(rc),
                     rc == NVML_ERROR_IN_USE ? "; a process or a service (DCGM, a device plugin) holds it" : "");
        return -1;
    }
    return 0;
}

/* Resolves the CI profile for a new GI: --ci PROFILE (name, "Nc.NAME", or ID), or the default. */
static int pick_ci(struct vgpu_nvml *nv, const struct vgpu_mig_gi *gi, const char *want, struct vgpu_mig_ci_profile *out,
                   struct vgpu_err *e)
{
    struct vgpu_mig_ci_profile cps[VGPU_NVML_CI_PROFILE_INDEX_END];
    unsigned n = vgpu_mig_ci_profiles(nv, gi, cps, VGPU_NVML_CI_PROFILE_INDEX_END);
    for (unsigned i = 0; i < n; i++) {
        bool hit;
        if (!want)
            hit = cps[i].is_default;
        else {
            const char *w = strncasecmp(want, "MIG ", 4) == 0 ? want + 4 : want;
            char short_name[VGPU_MIG_NAME + 8];
            snprintf(short_name, sizeof short_name, "%uc", cps[i].slices);
            hit = strcasecmp(cps[i].name, w) == 0 || strcasecmp(short_name, w) == 0 ||
                  (strspn(w, "0123456789") == strlen(w) && *w && (unsigned)atoi(w) == cps[i].id);
        }
        if (hit) {
            *out = cps[i];
            return 0;
        }
    }
    char names[400] = "";
    size_t used = 0;
    for (unsigned i = 0; i < n && used + 1 < sizeof names; i++) {
        int k = snprintf(names + used, sizeof names - used, "%s%s (ID %u)", i ? ", " : "", cps[i].name, cps[i].id);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    if (used >= sizeof names)
        used = sizeof names - 1;
    vgpu_err_set(e, VGPU_EXIT_USAGE, "unknown compute-instance profile '%s' for GPU instance %s; valid: %s",
                 want ? want : "(default)", gi->profile, names[0] ? names : "none");
    return -1;
}

/* Could want name a compute-instance profile of a GPU instance of profile p? The exact list needs
 * the GPU instance (pick_ci asks it); this is what can be told before anything is created, so
 * that '--ci bogus' or '--ci 5c' on a 1g instance creates nothing and rolls nothing back. Names
 * are an ID, "Nc" or "Nc.PROFILE" with N up to the instance's slices, or "Ng...." (the whole
 * instance, with the driver's variants such as +me, which are left to pick_ci). */
static bool ci_name_plausible(const char *want, const struct vgpu_mig_profile *p)
{
    const char *w = strncasecmp(want, "MIG ", 4) == 0 ? want + 4 : want;
    size_t d = strspn(w, "0123456789");
    if (!d || d > 3)
        return false;
    if (!w[d])
        return true;
    if (w[d] == 'g' || w[d] == 'G')
        return w[d + 1] == '.';
    if (w[d] != 'c' && w[d] != 'C')
        return false;
    unsigned n = (unsigned)atoi(w);
    return n >= 1 && n <= p->slices && (!w[d + 1] || w[d + 1] == '.');
}

static void rollback(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g, nvmlGpuInstance_t *gis, nvmlComputeInstance_t *cis,
                     unsigned done, char *note, size_t len)
{
    unsigned undone = 0, failed = 0;
    for (unsigned i = done; i-- > 0;) {
        bool ok = true;
        if (cis[i] && nv->nvmlComputeInstanceDestroy && nv->nvmlComputeInstanceDestroy(cis[i]) != NVML_SUCCESS)
            ok = false;
        if (ok && nv->nvmlGpuInstanceDestroy && nv->nvmlGpuInstanceDestroy(gis[i]) != NVML_SUCCESS)
            ok = false;
        if (ok)
            undone++;
        else
            failed++;
    }
    if (!done)
        snprintf(note, len, "nothing was changed");
    else if (!failed)
        snprintf(note, len, "the %u instance%s this call had created %s destroyed again; nothing was changed", undone,
                 undone > 1 ? "s" : "", undone > 1 ? "were" : "was");
    else
        snprintf(note, len, "%u of the %u instances this call created could not be destroyed again; see "
                 "'vgpu mig list --gpu %u'", failed, done, g->index);
}

int vgpu_mig_create(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g, struct vgpu_mig_item *items, unsigned n,
                    const struct vgpu_mig_ci_req *ci, struct vgpu_mig_created *out, struct vgpu_err *e)
{
    const struct vgpu_mig_profile *prof[VGPU_MIG_MAX_ITEMS];
    if (n > VGPU_MIG_MAX_ITEMS) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "too many instances");
        return -1;
    }
    if (!g->supported) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "GPU %u (%s) does not support MIG", g->index, g->name);
        return -1;
    }
    if (!g->current) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "MIG mode is %s on GPU %u; enable it first ('vgpu mig enable --gpu %u')%s",
                     g->pending ? "pending (not yet active)" : "disabled", g->index, g->index,
                     g->pending ? " and reset the GPU" : "");
        return -1;
    }
    if (!nv->nvmlDeviceCreateGpuInstance || !nv->nvmlGpuInstanceGetInfo) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "this driver's NVML cannot create MIG instances");
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        prof[i] = vgpu_mig_find_profile(g, items[i].profile);
        if (!prof[i]) {
            char msg[900];
            vgpu_mig_unknown_profile(g, items[i].profile, true, msg, sizeof msg);
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s", msg);
            return -1;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        const char *want = items[i].ci[0] ? items[i].ci : ci && !ci->none ? ci->profile : NULL;
        if (want && strcasecmp(want, "none") && !ci_name_plausible(want, prof[i])) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "unknown compute-instance profile '%.60s' for GPU instance %s: give Nc "
                         "(N from 1 to %u), Nc.%s, %s itself or a profile ID ('vgpu mig profiles --gi ID' lists "
                         "them for an instance); nothing was changed", want, prof[i]->name, prof[i]->slices,
                         prof[i]->name, prof[i]->name);
            return -1;
        }
    }
    struct vgpu_mig_item plan[VGPU_MIG_MAX_ITEMS];
    memcpy(plan, items, n * sizeof *items);
    bool planned = nv->nvmlDeviceCreateGpuInstanceWithPlacement &&
                   vgpu_mig_plan(vgpu_mig_used_slices(g), plan, prof, n) == 0;
    if (!planned) {
        /* Tell why before touching anything, when it is about placements. */
        for (unsigned i = 0; i < n; i++) {
            if (items[i].start < 0)
                continue;
            bool valid = false;
            for (unsigned q = 0; q < prof[i]->nplace; q++)
                valid |= (int)prof[i]->place[q].start == items[i].start;
            if (!valid) {
                char starts[128] = "";
                for (unsigned q = 0; q < prof[i]->nplace; q++)
                    snprintf(starts + strlen(starts), sizeof starts - strlen(starts), "%s%u", q ? "," : "",
                             prof[i]->place[q].start);
                vgpu_err_set(e, VGPU_EXIT_USAGE, "%s cannot start at slice %d; possible starts: %s", prof[i]->name,
                             items[i].start, starts);
                return -1;
            }
        }
        if (nv->nvmlDeviceCreateGpuInstanceWithPlacement) {
            uint32_t used = vgpu_mig_used_slices(g);
            char freeb[64] = "";
            for (unsigned s = 0; s < 8; s++)
                if (!(used & (1u << s)))
                    snprintf(freeb + strlen(freeb), sizeof freeb - strlen(freeb), "%s%u", freeb[0] ? "," : "", s);
            vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY,
                         "cannot place %s on GPU %u: no arrangement fits (free memory slices: %s); destroy "
                         "instances, or ask for fewer or smaller ones; nothing was changed",
                         n == 1 ? prof[0]->name : "these instances", g->index, freeb[0] ? freeb : "none");
            return -1;
        }
        /* Old driver without placements: the driver chooses; larger first avoids most order problems. */
        memcpy(plan, items, n * sizeof *items);
    }
    /* Create in plan order (as given); placements are fixed already. */
    nvmlGpuInstance_t gis[VGPU_MIG_MAX_ITEMS];
    nvmlComputeInstance_t cis[VGPU_MIG_MAX_ITEMS];
    unsigned done = 0;
    for (unsigned i = 0; i < n; i++) {
        nvmlReturn_t rc;
        nvmlGpuInstance_t gih = NULL;
        if (planned) {
            nvmlGpuInstancePlacement_t pl = { (unsigned)plan[i].start, 0 };
            for (unsigned q = 0; q < prof[i]->nplace; q++)
                if ((int)prof[i]->place[q].start == plan[i].start)
                    pl.size = prof[i]->place[q].size;
            rc = nv->nvmlDeviceCreateGpuInstanceWithPlacement(g->dev, prof[i]->id, &pl, &gih);
        } else {
            rc = nv->nvmlDeviceCreateGpuInstance(g->dev, prof[i]->id, &gih);
        }
        char note[256];
        if (rc != NVML_SUCCESS) {
            rollback(nv, g, gis, cis, done, note, sizeof note);
            char where[32] = "";
            if (planned)
                snprintf(where, sizeof where, " at slice %d", plan[i].start);
            vgpu_err_set(e, vgpu_mig_errcode(rc), "cannot create GPU instance %s%s (%u of %u) on GPU %u: %s%s; %s",
                         prof[i]->name, where, i + 1, n, g->index, vgpu_nvml_strerror(nv, rc), perm_hint(rc), note);
            return -1;
        }
        gis[done] = gih;
        cis[done] = NULL;
        done++;
        nvmlGpuInstanceInfo_t info;
        memset(&info, 0, sizeof info);
        nv->nvmlGpuInstanceGetInfo(gih, &info);
        struct vgpu_mig_created *c = &out[i];
        memset(c, 0, sizeof *c);
        c->gi_id = info.id;
        c->gi_profile_id = prof[i]->id;
        c->start = info.placement.start;
        c->size = info.placement.size;
        cpy(c->profile, sizeof c->profile, prof[i]->name);
        const char *want = ci ? ci->profile : NULL;
        bool none = ci && ci->none;
        if (items[i].ci[0]) {
            none = strcasecmp(items[i].ci, "none") == 0;
            want = none ? NULL : items[i].ci;
        }
        if (none)
            continue;
        struct vgpu_mig_gi tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.handle = gih;
        tmp.id = info.id;
        tmp.slices = prof[i]->slices;
        cpy(tmp.profile, sizeof tmp.profile, prof[i]->name);
        struct vgpu_mig_ci_profile cp;
        struct vgpu_err ce;
        if (pick_ci(nv, &tmp, want, &cp, &ce) < 0) {
            rollback(nv, g, gis, cis, done, note, sizeof note);
            vgpu_err_set(e, ce.code, "%s; %s", ce.msg, note);
            return -1;
        }
        nvmlComputeInstance_t cih = NULL;
        rc = nv->nvmlGpuInstanceCreateComputeInstance ? nv->nvmlGpuInstanceCreateComputeInstance(gih, cp.id, &cih)
                                                       : NVML_ERROR_FUNCTION_NOT_FOUND;
        if (rc != NVML_SUCCESS) {
            rollback(nv, g, gis, cis, done, note, sizeof note);
            vgpu_err_set(e, vgpu_mig_errcode(rc),
                         "cannot create compute instance %s in GPU instance %u (%s) on GPU %u: %s%s; %s", cp.name,
                         info.id, prof[i]->name, g->index, vgpu_nvml_strerror(nv, rc), perm_hint(rc), note);
            return -1;
        }
        cis[done - 1] = cih;
        nvmlComputeInstanceInfo_t cinfo;
        memset(&cinfo, 0, sizeof cinfo);
        if (nv->nvmlComputeInstanceGetInfo_v2)
            nv->nvmlComputeInstanceGetInfo_v2(cih, &cinfo);
        c->has_ci = true;
        c->ci_id = cinfo.id;
        cpy(c->ci_profile, sizeof c->ci_profile, cp.name);
    }
    return (int)n;
}
