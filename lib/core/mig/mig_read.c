/* MIG through NVML, reading: a GPU's mode, profiles and instances, and the names of its profiles
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

static void strip_mig(char *dst, size_t len, const char *src)
{
    if (strncmp(src, "MIG ", 4) == 0)
        src += 4;
    cpy(dst, len, src);
}

/* go-nvlib's rule when the driver gives no name: GB = round(ceil(8*mem/total)/8 * ceil(total GiB)). */
static void synth_name(char *dst, size_t len, unsigned slices, uint64_t mem_mb, uint64_t total_bytes)
{
    unsigned gb;
    if (total_bytes) {
        double eighths = ceil(8.0 * (double)mem_mb * 1048576.0 / (double)total_bytes);
        gb = (unsigned)llround(eighths / 8.0 * ceil((double)total_bytes / 1073741824.0));
    } else {
        gb = (unsigned)llround((double)mem_mb / 1024.0);
    }
    snprintf(dst, len, "%ug.%ugb", slices, gb);
}

int vgpu_mig_errcode(int rc)
{
    switch (rc) {
    case NVML_ERROR_NO_PERMISSION: return VGPU_EXIT_PERMISSION;
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return VGPU_EXIT_NO_CAPACITY;
    case NVML_ERROR_IN_USE: return VGPU_EXIT_BUSY;
    case NVML_ERROR_NOT_FOUND: return VGPU_EXIT_NOT_FOUND;
    default: return VGPU_EXIT_FAIL;
    }
}

static void read_profiles(struct vgpu_nvml *nv, nvmlDevice_t dev, uint64_t total, struct vgpu_mig_gpu *out)
{
    if (!nv->nvmlDeviceGetGpuInstanceProfileInfo)
        return;
    for (unsigned idx = 0; idx < VGPU_NVML_GI_PROFILE_INDEX_END && out->nprof < VGPU_MIG_MAX_PROFILES; idx++) {
        nvmlGpuInstanceProfileInfo_t in;
        memset(&in, 0, sizeof in);
        if (nv->nvmlDeviceGetGpuInstanceProfileInfo(dev, idx, &in) != NVML_SUCCESS)
            continue;  /* NOT_SUPPORTED on this part, or past the end */
        struct vgpu_mig_profile *p = &out->prof[out->nprof++];
        memset(p, 0, sizeof *p);
        p->index = idx;
        p->id = in.id;
        p->p2p = in.isP2pSupported != 0;
        p->slices = in.sliceCount;
        p->instances = in.instanceCount;
        p->sm = in.multiprocessorCount;
        p->ce = in.copyEngineCount;
        p->dec = in.decoderCount;
        p->enc = in.encoderCount;
        p->jpeg = in.jpegCount;
        p->ofa = in.ofaCount;
        p->mem_mb = in.memorySizeMB;
        p->free = -1;
        if (nv->nvmlDeviceGetGpuInstanceProfileInfoV) {
            nvmlGpuInstanceProfileInfo_v2_t v2;
            memset(&v2, 0, sizeof v2);
            v2.version = nvmlGpuInstanceProfileInfo_v2;
            if (nv->nvmlDeviceGetGpuInstanceProfileInfoV(dev, idx, &v2) == NVML_SUCCESS && v2.name[0])
                strip_mig(p->name, sizeof p->name, v2.name);
        }
        if (!p->name[0]) {
            synth_name(p->name, sizeof p->name, p->slices, p->mem_mb, total);
            if (idx == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 || idx == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1)
                strncat(p->name, "+me", sizeof p->name - strlen(p->name) - 1);
        }
        unsigned cap;
        if (nv->nvmlDeviceGetGpuInstanceRemainingCapacity &&
            nv->nvmlDeviceGetGpuInstanceRemainingCapacity(dev, p->id, &cap) == NVML_SUCCESS)
            p->free = (int)cap;
        if (nv->nvmlDeviceGetGpuInstancePossiblePlacements_v2) {
            nvmlGpuInstancePlacement_t pl[VGPU_MIG_MAX_PLACEMENTS];
            unsigned n = 0;
            if (nv->nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, p->id, NULL, &n) == NVML_SUCCESS) {
                if (n > VGPU_MIG_MAX_PLACEMENTS)
                    n = VGPU_MIG_MAX_PLACEMENTS;
                if (n && nv->nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev, p->id, pl, &n) == NVML_SUCCESS) {
                    for (unsigned i = 0; i < n && i < VGPU_MIG_MAX_PLACEMENTS; i++) {
                        p->place[i].start = pl[i].start;
                        p->place[i].size = pl[i].size;
                    }
                    p->nplace = n < VGPU_MIG_MAX_PLACEMENTS ? n : VGPU_MIG_MAX_PLACEMENTS;
                }
            }
        }
    }
}

static const struct vgpu_mig_profile *profile_by_id(const struct vgpu_mig_gpu *g, unsigned id)
{
    for (unsigned i = 0; i < g->nprof; i++)
        if (g->prof[i].id == id)
            return &g->prof[i];
    return NULL;
}

unsigned vgpu_mig_ci_profiles(struct vgpu_nvml *nv, const struct vgpu_mig_gi *gi, struct vgpu_mig_ci_profile *out,
                              unsigned max)
{
    unsigned n = 0;
    if (!nv->nvmlGpuInstanceGetComputeInstanceProfileInfo)
        return 0;
    nvmlGpuInstance_t h = gi->handle;
    for (unsigned idx = 0; idx < VGPU_NVML_CI_PROFILE_INDEX_END && n < max; idx++) {
        nvmlComputeInstanceProfileInfo_t in;
        memset(&in, 0, sizeof in);
        if (nv->nvmlGpuInstanceGetComputeInstanceProfileInfo(h, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                              &in) != NVML_SUCCESS)
            continue;
        struct vgpu_mig_ci_profile *p = &out[n];
        memset(p, 0, sizeof *p);
        p->index = idx;
        p->id = in.id;
        p->slices = in.sliceCount;
        p->instances = in.instanceCount;
        p->sm = in.multiprocessorCount;
        p->ce = in.sharedCopyEngineCount;
        p->dec = in.sharedDecoderCount;
        p->enc = in.sharedEncoderCount;
        p->jpeg = in.sharedJpegCount;
        p->ofa = in.sharedOfaCount;
        p->free = -1;
        if (nv->nvmlGpuInstanceGetComputeInstanceProfileInfoV) {
            nvmlComputeInstanceProfileInfo_v2_t v2;
            memset(&v2, 0, sizeof v2);
            v2.version = nvmlComputeInstanceProfileInfo_v2;
            if (nv->nvmlGpuInstanceGetComputeInstanceProfileInfoV(h, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                                  &v2) == NVML_SUCCESS && v2.name[0])
                strip_mig(p->name, sizeof p->name, v2.name);
        }
        if (!p->name[0]) {
            /* "3g.20gb" for the whole GI, "1c.3g.20gb" for a part of it. */
            if (p->slices == gi->slices)
                cpy(p->name, sizeof p->name, gi->profile);
            else
            {
                char t[VGPU_MIG_NAME + 16];
                snprintf(t, sizeof t, "%uc.%s", p->slices, gi->profile);
                cpy(p->name, sizeof p->name, t);
            }
        }
        unsigned cap;
        if (nv->nvmlGpuInstanceGetComputeInstanceRemainingCapacity &&
            nv->nvmlGpuInstanceGetComputeInstanceRemainingCapacity(h, p->id, &cap) == NVML_SUCCESS)
            p->free = (int)cap;
        n++;
    }
    /* The default: the lowest index whose slices equal the GI's (not REV1/NVL variants). */
    for (unsigned i = 0; i < n; i++)
        if (out[i].slices == gi->slices) {
            out[i].is_default = true;
            break;
        }
    return n;
}

static void read_cis(struct vgpu_nvml *nv, struct vgpu_mig_gi *gi)
{
    struct vgpu_mig_ci_profile cps[VGPU_NVML_CI_PROFILE_INDEX_END];
    unsigned ncp = vgpu_mig_ci_profiles(nv, gi, cps, VGPU_NVML_CI_PROFILE_INDEX_END);
    if (!nv->nvmlGpuInstanceGetComputeInstances || !nv->nvmlComputeInstanceGetInfo_v2)
        return;
    for (unsigned p = 0; p < ncp; p++) {
        nvmlComputeInstance_t arr[VGPU_MIG_MAX_CI];
        unsigned cnt = cps[p].instances < VGPU_MIG_MAX_CI ? cps[p].instances : VGPU_MIG_MAX_CI;
        if (!cnt)
            cnt = VGPU_MIG_MAX_CI;
        if (nv->nvmlGpuInstanceGetComputeInstances(gi->handle, cps[p].id, arr, &cnt) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < cnt && gi->nci < VGPU_MIG_MAX_CI; i++) {
            nvmlComputeInstanceInfo_t info;
            memset(&info, 0, sizeof info);
            if (nv->nvmlComputeInstanceGetInfo_v2(arr[i], &info) != NVML_SUCCESS)
                continue;
            struct vgpu_mig_ci *c = &gi->ci[gi->nci++];
            memset(c, 0, sizeof *c);
            c->id = info.id;
            c->profile_id = info.profileId;
            c->slices = cps[p].slices;
            cpy(c->profile, sizeof c->profile, cps[p].name);
            c->place.start = info.placement.start;
            c->place.size = info.placement.size;
            c->handle = arr[i];
        }
    }
    /* By id, as nvidia-smi lists them. */
    for (unsigned i = 1; i < gi->nci; i++)
        for (unsigned j = i; j > 0 && gi->ci[j - 1].id > gi->ci[j].id; j--) {
            struct vgpu_mig_ci t = gi->ci[j];
            gi->ci[j] = gi->ci[j - 1];
            gi->ci[j - 1] = t;
        }
}

/* The MIG UUIDs of the compute instances, from the MIG device handles of the parent. */
static void read_uuids(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g)
{
    unsigned max = 0;
    if (!nv->nvmlDeviceGetMaxMigDeviceCount || !nv->nvmlDeviceGetMigDeviceHandleByIndex ||
        !nv->nvmlDeviceGetGpuInstanceId || !nv->nvmlDeviceGetComputeInstanceId ||
        nv->nvmlDeviceGetMaxMigDeviceCount(g->dev, &max) != NVML_SUCCESS)
        return;
    for (unsigned m = 0; m < max; m++) {
        nvmlDevice_t h;
        unsigned gid, cid;
        if (nv->nvmlDeviceGetMigDeviceHandleByIndex(g->dev, m, &h) != NVML_SUCCESS ||
            nv->nvmlDeviceGetGpuInstanceId(h, &gid) != NVML_SUCCESS ||
            nv->nvmlDeviceGetComputeInstanceId(h, &cid) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < g->ngi; i++)
            for (unsigned j = 0; g->gi[i].id == gid && j < g->gi[i].nci; j++)
                if (g->gi[i].ci[j].id == cid)
                    nv->nvmlDeviceGetUUID(h, g->gi[i].ci[j].uuid, sizeof g->gi[i].ci[j].uuid);
    }
}

int vgpu_mig_read(struct vgpu_nvml *nv, const struct vgpu_gpu *gpu, struct vgpu_mig_gpu *out, struct vgpu_err *e)
{
    memset(out, 0, sizeof *out);
    out->dev = gpu->handle;
    out->index = gpu->index;
    cpy(out->name, sizeof out->name, gpu->name);
    cpy(out->uuid, sizeof out->uuid, gpu->uuid);
    cpy(out->pci, sizeof out->pci, gpu->pci_bus_id);
    if (!gpu->handle) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "GPU %u is unavailable: %s", gpu->index, gpu->name);
        return -1;
    }
    if (!nv->nvmlDeviceGetMigMode)
        return 0;
    if (nv->nvmlDeviceGetMigMode(out->dev, &out->current, &out->pending) != NVML_SUCCESS)
        return 0;  /* NOT_SUPPORTED: not MIG-capable */
    out->supported = true;
    read_profiles(nv, out->dev, gpu->mem_total, out);
    if (!out->current || !nv->nvmlDeviceGetGpuInstances || !nv->nvmlGpuInstanceGetInfo)
        return 0;
    for (unsigned p = 0; p < out->nprof; p++) {
        nvmlGpuInstance_t arr[VGPU_MIG_MAX_GI];
        unsigned cnt = out->prof[p].instances < VGPU_MIG_MAX_GI ? out->prof[p].instances : VGPU_MIG_MAX_GI;
        if (!cnt)
            continue;
        if (nv->nvmlDeviceGetGpuInstances(out->dev, out->prof[p].id, arr, &cnt) != NVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < cnt && out->ngi < VGPU_MIG_MAX_GI; i++) {
            nvmlGpuInstanceInfo_t info;
            memset(&info, 0, sizeof info);
            if (nv->nvmlGpuInstanceGetInfo(arr[i], &info) != NVML_SUCCESS)
                continue;
            struct vgpu_mig_gi *gi = &out->gi[out->ngi++];
            memset(gi, 0, sizeof *gi);
            gi->id = info.id;
            gi->profile_id = info.profileId;
            const struct vgpu_mig_profile *pr = profile_by_id(out, info.profileId);
            if (!pr)
                pr = &out->prof[p];
            cpy(gi->profile, sizeof gi->profile, pr->name);
            gi->mem_mb = pr->mem_mb;
            gi->slices = pr->slices;
            gi->place.start = info.placement.start;
            gi->place.size = info.placement.size;
            gi->handle = arr[i];
            read_cis(nv, gi);
        }
    }
    for (unsigned i = 1; i < out->ngi; i++)
        for (unsigned j = i; j > 0 && out->gi[j - 1].id > out->gi[j].id; j--) {
            struct vgpu_mig_gi t = out->gi[j];
            out->gi[j] = out->gi[j - 1];
            out->gi[j - 1] = t;
        }
    read_uuids(nv, out);
    return 0;
}

const struct vgpu_mig_profile *vgpu_mig_find_profile(const struct vgpu_mig_gpu *g, const char *name)
{
    if (strncasecmp(name, "MIG ", 4) == 0)
        name += 4;
    for (unsigned i = 0; i < g->nprof; i++)
        if (strcasecmp(g->prof[i].name, name) == 0)
            return &g->prof[i];
    if (*name && strspn(name, "0123456789") == strlen(name) && strlen(name) < 6)
        return profile_by_id(g, (unsigned)atoi(name));
    return NULL;
}

void vgpu_mig_profile_names(const struct vgpu_mig_gpu *g, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < g->nprof && used + 1 < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s (ID %u)", i ? ", " : "", g->prof[i].name, g->prof[i].id);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void vgpu_mig_unknown_profile(const struct vgpu_mig_gpu *g, const char *name, bool name_gpu, char *buf, size_t len)
{
    const char *cands[VGPU_MIG_MAX_PROFILES];
    size_t n = 0;
    for (unsigned i = 0; i < g->nprof && n < VGPU_MIG_MAX_PROFILES; i++)
        cands[n++] = g->prof[i].name;
    const char *bare = strncasecmp(name, "MIG ", 4) == 0 ? name + 4 : name;
    /* One slip only: profile names differ from each other by two characters (9g.90gb is as near
     * to 1g.10gb as to 7g.80gb), so a looser bound suggests one at random. */
    const char *best = vgpu_closest(bare, cands, n);
    if (best && vgpu_edit_distance(bare, best) > 1)
        best = NULL;
    char names[600];
    vgpu_mig_profile_names(g, names, sizeof names);
    snprintf(buf, len, "unknown profile '%.60s'%s%s; %s%s%svalid: %s", name, name_gpu ? " for " : "",
             name_gpu ? g->name : "", best ? "did you mean '" : "", best ? best : "", best ? "'? " : "",
             names[0] ? names : "none (the driver lists no MIG profiles)");
}
