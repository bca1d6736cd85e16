/* mig.c: NVML's MIG API over the shared MIG state machine (reference/nvml.md §8-§11).
 * Faithful points: profile indexes vs IDs, v2/v3 version words (wrong word: INVALID_ARGUMENT,
 * the v3 name bug), profile queries and placements working with MIG off, pending mode changes
 * while processes use the GPU, INSUFFICIENT_RESOURCES, IN_USE on destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

static struct fs_gpu *G(unsigned gpu) { return &fs_state()->gpu[gpu]; }

/* A parent handle (MIG device handles are refused by most management calls). */
#define ENTER_PARENT(dev, d)                                \
    FN_ENTER_DEV(dev, d);                                   \
    if ((d)->gi >= 0)                                       \
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);             \
    if (!G((d)->gpu)->s.mig_capable)                        \
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED)

static bool gpu_has_processes(unsigned gpu)
{
    fs_reap();
    for (unsigned i = 0; i < FS_MAX_PROCS; i++)
        if (G(gpu)->procs[i].used)
            return true;
    return false;
}

/* ---- mode ---- */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    ENTER_PARENT(device, d);
    if (!current || !pending)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *current = G(d->gpu)->mig_current;
    *pending = G(d->gpu)->mig_pending;
    FN_RETURN(NVML_SUCCESS);
}

/* A change takes effect at once on an idle GPU (Hopper needs no reset then). With processes on
 * the GPU it stays pending, activationStatus IN_USE, until fs_gpu_reset() (`fakegpu-ctl reset`).
 * VGPU_FAKE_MIG_RESET_REQUIRED=1 plays a pass-through VM: always pending with RESET_REQUIRED. */
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activation)
{
    ENTER_PARENT(device, d);
    if (!activation || mode > NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    struct fs_gpu *g = G(d->gpu);
    g->mig_pending = mode;
    *activation = NVML_SUCCESS;
    if (g->mig_current == mode)
        FN_RETURN(NVML_SUCCESS);
    const char *vm = getenv("VGPU_FAKE_MIG_RESET_REQUIRED");
    if (vm && strcmp(vm, "1") == 0)
        *activation = NVML_ERROR_RESET_REQUIRED;
    else if (gpu_has_processes(d->gpu))
        *activation = NVML_ERROR_IN_USE;
    else
        fs_gpu_reset(d->gpu);
    FN_RETURN(NVML_SUCCESS);
}

/* ---- MIG device handles ---- */
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    FN_ENTER_DEV(device, d);
    if (!count || d->gi >= 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = G(d->gpu)->s.mig_capable && G(d->gpu)->mig_current == NVML_DEVICE_MIG_ENABLE ? 7 : 0;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig)
{
    FN_ENTER_DEV(device, d);
    if (!mig || d->gi >= 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    int gis[FS_MAX_GI * FS_MAX_CI], cis[FS_MAX_GI * FS_MAX_CI];
    unsigned n = fs_mig_devices(d->gpu, gis, cis, FS_MAX_GI * FS_MAX_CI);
    if (index >= n)
        FN_RETURN(index >= 7 && n > 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_FOUND);
    *mig = fn_dev_handle(d->gpu, gis[index], cis[index]);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig)
{
    FN_ENTER_DEV(device, d);
    if (!is_mig)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *is_mig = d->gi >= 0;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    FN_ENTER_DEV(device, d);
    if (!id)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (d->gi < 0)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *id = G(d->gpu)->gi[d->gi].id;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    FN_ENTER_DEV(device, d);
    if (!id)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (d->gi < 0)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *id = G(d->gpu)->gi[d->gi].ci[d->ci].id;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device)
{
    FN_ENTER_DEV(mig, d);
    if (!device || d->gi < 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = fn_dev_handle(d->gpu, -1, -1);
    FN_RETURN(NVML_SUCCESS);
}

/* SMs, engines, slices and memory of a MIG device (its CI profile inside its GI), or of the
 * whole GPU (slice counts 0, as the attributes only mean something for MIG devices). */
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *a)
{
    FN_ENTER_DEV(device, d);
    if (!a)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct fs_gpu *g = G(d->gpu);
    if (d->gi < 0) {
        *a = (nvmlDeviceAttributes_t){.multiprocessorCount = g->s.sm_count,
                                      .memorySizeMB = g->s.mem_total >> 20};
        FN_RETURN(NVML_SUCCESS);
    }
    const struct fs_gi *gi = &g->gi[d->gi];
    const struct fs_profile *p = &g->s.profiles[gi->profile];
    unsigned sm = p->sm, cslices = p->slices;
    for (unsigned i = 0; i < p->nci; i++)
        if (p->ci[i].id == gi->ci[d->ci].profile_id) {
            sm = p->ci[i].sm;
            cslices = p->ci[i].slices;
        }
    *a = (nvmlDeviceAttributes_t){.multiprocessorCount = sm, .sharedCopyEngineCount = p->ce,
                                  .sharedDecoderCount = p->dec, .sharedEncoderCount = p->enc,
                                  .sharedJpegCount = p->jpg, .sharedOfaCount = p->ofa,
                                  .gpuInstanceSliceCount = p->slices, .computeInstanceSliceCount = cslices,
                                  .memorySizeMB = p->mem_mb};
    FN_RETURN(NVML_SUCCESS);
}

/* ---- GI profiles ---- */
static const struct fs_profile *profile_by_index(unsigned gpu, unsigned index, nvmlReturn_t *rc)
{
    if (index >= VGPU_NVML_GI_PROFILE_INDEX_END) {
        *rc = NVML_ERROR_INVALID_ARGUMENT;
        return NULL;
    }
    for (unsigned i = 0; i < G(gpu)->s.nprofiles; i++)
        if (G(gpu)->s.profiles[i].index == index)
            return &G(gpu)->s.profiles[i];
    *rc = NVML_ERROR_NOT_SUPPORTED;
    return NULL;
}

static int profile_slot_by_id(unsigned gpu, unsigned id)
{
    for (unsigned i = 0; i < G(gpu)->s.nprofiles; i++)
        if (G(gpu)->s.profiles[i].id == id)
            return (int)i;
    return -1;
}

static void fill_v1(const struct fs_profile *p, nvmlGpuInstanceProfileInfo_t *o)
{
    *o = (nvmlGpuInstanceProfileInfo_t){.id = p->id, .isP2pSupported = 0, .sliceCount = p->slices,
                                        .instanceCount = p->instances, .multiprocessorCount = p->sm,
                                        .copyEngineCount = p->ce, .decoderCount = p->dec, .encoderCount = p->enc,
                                        .jpegCount = p->jpg, .ofaCount = p->ofa, .memorySizeMB = p->mem_mb};
}

/* v2 or v3 by the version word; a wrong word is INVALID_ARGUMENT as observed (reference §2). */
static nvmlReturn_t fill_versioned(const struct fs_profile *p, nvmlGpuInstanceProfileInfo_v2_t *o)
{
    if (o->version == nvmlGpuInstanceProfileInfo_v2) {
        *o = (nvmlGpuInstanceProfileInfo_v2_t){.version = o->version, .id = p->id, .sliceCount = p->slices,
                                               .instanceCount = p->instances, .multiprocessorCount = p->sm,
                                               .copyEngineCount = p->ce, .decoderCount = p->dec,
                                               .encoderCount = p->enc, .jpegCount = p->jpg, .ofaCount = p->ofa,
                                               .memorySizeMB = p->mem_mb};
        snprintf(o->name, sizeof o->name, "MIG %s", p->name);
        return NVML_SUCCESS;
    }
    if (o->version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)(void *)o;
        /* The numbers are right; 580.159.04 leaves the name empty and zeroes the version word
         * (reference §8): callers must take names from v2. */
        *v3 = (nvmlGpuInstanceProfileInfo_v3_t){.version = 0, .id = p->id, .sliceCount = p->slices,
                                                .instanceCount = p->instances, .multiprocessorCount = p->sm,
                                                .copyEngineCount = p->ce, .decoderCount = p->dec,
                                                .encoderCount = p->enc, .jpegCount = p->jpg, .ofaCount = p->ofa,
                                                .memorySizeMB = p->mem_mb, .capabilities = 0};
        return NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int index,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    ENTER_PARENT(device, d);
    nvmlReturn_t rc = NVML_SUCCESS;
    const struct fs_profile *p = profile_by_index(d->gpu, index, &rc);
    if (!p)
        FN_RETURN(rc);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    fill_v1(p, info);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int index,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    ENTER_PARENT(device, d);
    nvmlReturn_t rc = NVML_SUCCESS;
    const struct fs_profile *p = profile_by_index(d->gpu, index, &rc);
    if (!p)
        FN_RETURN(rc);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    FN_RETURN(fill_versioned(p, info));
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int id,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info)
{
    ENTER_PARENT(device, d);
    int slot = profile_slot_by_id(d->gpu, id);
    if (slot < 0)
        FN_RETURN(id < 40 ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    FN_RETURN(fill_versioned(&G(d->gpu)->s.profiles[slot], info));
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int id,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
    ENTER_PARENT(device, d);
    int slot = profile_slot_by_id(d->gpu, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_profile *p = &G(d->gpu)->s.profiles[slot];
    if (!placements) {
        *count = p->nplacements;
        FN_RETURN(NVML_SUCCESS);
    }
    if (*count < p->nplacements) {
        *count = p->nplacements;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < p->nplacements; i++)
        placements[i] = (nvmlGpuInstancePlacement_t){p->placements[i], p->placement_size};
    *count = p->nplacements;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int id, unsigned int *count)
{
    ENTER_PARENT(device, d);
    int slot = profile_slot_by_id(d->gpu, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = fs_gi_remaining(d->gpu, (unsigned)slot);
    FN_RETURN(NVML_SUCCESS);
}

/* ---- GI lifecycle ---- */
static nvmlReturn_t create_gi(nvmlDevice_t device, const char *fn, unsigned id, int start, nvmlGpuInstance_t *out)
{
    struct nvmlDevice_st *d;
    nvmlReturn_t rc = fn_enter_dev(device, fn, &d);
    if (rc)
        return rc;
    if (d->gi >= 0 || !out)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct fs_gpu *g = G(d->gpu);
    if (!g->s.mig_capable || g->mig_current != NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    int slot = profile_slot_by_id(d->gpu, id);
    if (slot < 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    int gi = fs_gi_create(d->gpu, (unsigned)slot, start);
    if (gi < 0)
        FN_RETURN((nvmlReturn_t)-gi);
    *out = fn_gi_handle(d->gpu, gi);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi)
{
    return create_gi(device, __func__, id, -1, gi);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int id,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gi)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return create_gi(device, __func__, id, (int)placement->start, gi);
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gis,
                                       unsigned int *count)
{
    ENTER_PARENT(device, d);
    int slot = profile_slot_by_id(d->gpu, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    struct fs_gpu *g = G(d->gpu);
    unsigned n = 0;
    nvmlGpuInstance_t found[FS_MAX_GI];
    if (g->mig_current == NVML_DEVICE_MIG_ENABLE) /* MIG off: SUCCESS with none, as on R580 */
        for (unsigned gid = 0; gid < 16; gid++) {
            int s = fs_gi_by_id(d->gpu, gid);
            if (s >= 0 && g->gi[s].profile == (unsigned)slot)
                found[n++] = fn_gi_handle(d->gpu, s);
        }
    if (n > 0 && (!gis || *count < n)) {
        *count = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++)
        gis[i] = found[i];
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi)
{
    ENTER_PARENT(device, d);
    if (!gi)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (G(d->gpu)->mig_current != NVML_DEVICE_MIG_ENABLE)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    int s = fs_gi_by_id(d->gpu, id);
    if (s < 0)
        FN_RETURN(NVML_ERROR_NOT_FOUND);
    *gi = fn_gi_handle(d->gpu, s);
    FN_RETURN(NVML_SUCCESS);
}

#define ENTER_GI(h, gi)                                     \
    struct nvmlGpuInstance_st *gi;                          \
    do {                                                    \
        nvmlReturn_t rc_ = fn_enter_gi(h, __func__, &gi);   \
        if (rc_)                                            \
            return rc_;                                     \
    } while (0)

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t handle, nvmlGpuInstanceInfo_t *info)
{
    ENTER_GI(handle, h);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gi *gi = &G(h->gpu)->gi[h->gi];
    *info = (nvmlGpuInstanceInfo_t){.device = fn_dev_handle(h->gpu, -1, -1), .id = gi->id,
                                    .profileId = G(h->gpu)->s.profiles[gi->profile].id,
                                    .placement = {gi->start, gi->size}};
    FN_RETURN(NVML_SUCCESS);
}

static bool gi_has_processes(unsigned gpu, int gi)
{
    fs_reap();
    for (unsigned i = 0; i < FS_MAX_PROCS; i++)
        if (G(gpu)->procs[i].used && G(gpu)->procs[i].gi == gi)
            return true;
    return false;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t handle)
{
    ENTER_GI(handle, h);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    struct fs_gi *gi = &G(h->gpu)->gi[h->gi];
    for (int c = 0; c < FS_MAX_CI; c++)
        if (gi->ci[c].used)
            FN_RETURN(NVML_ERROR_IN_USE);
    if (gi_has_processes(h->gpu, h->gi))
        FN_RETURN(NVML_ERROR_IN_USE);
    memset(gi, 0, sizeof *gi);
    FN_RETURN(NVML_SUCCESS);
}

/* ---- compute instances ---- */
static const struct fs_ci_profile *ci_profile(const struct nvmlGpuInstance_st *h, unsigned index, unsigned *slot)
{
    const struct fs_profile *p = &G(h->gpu)->s.profiles[G(h->gpu)->gi[h->gi].profile];
    for (unsigned i = 0; i < p->nci; i++)
        if (p->ci[i].index == index) {
            if (slot)
                *slot = i;
            return &p->ci[i];
        }
    return NULL;
}

static void fill_ci_v1(const struct fs_ci_profile *c, const struct fs_profile *p, nvmlComputeInstanceProfileInfo_t *o)
{
    *o = (nvmlComputeInstanceProfileInfo_t){.id = c->id, .sliceCount = c->slices, .instanceCount = c->instances,
                                            .multiprocessorCount = c->sm, .sharedCopyEngineCount = p->ce,
                                            .sharedDecoderCount = p->dec, .sharedEncoderCount = p->enc,
                                            .sharedJpegCount = p->jpg, .sharedOfaCount = p->ofa};
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t handle, unsigned int index,
                                                          unsigned int eng, nvmlComputeInstanceProfileInfo_t *info)
{
    ENTER_GI(handle, h);
    if (!info || index >= VGPU_NVML_CI_PROFILE_INDEX_END || eng != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_ci_profile *c = ci_profile(h, index, NULL);
    if (!c)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    fill_ci_v1(c, &G(h->gpu)->s.profiles[G(h->gpu)->gi[h->gi].profile], info);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t handle, unsigned int index,
                                                           unsigned int eng, nvmlComputeInstanceProfileInfo_v2_t *info)
{
    ENTER_GI(handle, h);
    if (!info || index >= VGPU_NVML_CI_PROFILE_INDEX_END || eng != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    unsigned version = info->version;
    if (version != nvmlComputeInstanceProfileInfo_v2 && version != nvmlComputeInstanceProfileInfo_v3)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_ci_profile *c = ci_profile(h, index, NULL);
    if (!c)
        FN_RETURN(NVML_ERROR_NOT_SUPPORTED);
    const struct fs_profile *p = &G(h->gpu)->s.profiles[G(h->gpu)->gi[h->gi].profile];
    nvmlComputeInstanceProfileInfo_t v1;
    fill_ci_v1(c, p, &v1);
    /* v2 = version + the nine v1 fields + name; v3 adds capabilities (0: no graphics) */
    info->version = version;
    memcpy(&info->id, &v1, sizeof v1);
    snprintf(info->name, sizeof info->name, "MIG %s", c->name);
    if (version == nvmlComputeInstanceProfileInfo_v3)
        ((nvmlComputeInstanceProfileInfo_v3_t *)(void *)info)->capabilities = 0;
    FN_RETURN(NVML_SUCCESS);
}

static int ci_profile_slot_by_id(const struct nvmlGpuInstance_st *h, unsigned id)
{
    const struct fs_profile *p = &G(h->gpu)->s.profiles[G(h->gpu)->gi[h->gi].profile];
    for (unsigned i = 0; i < p->nci; i++)
        if (p->ci[i].id == id)
            return (int)i;
    return -1;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t handle, unsigned int id,
                                                                unsigned int *count)
{
    ENTER_GI(handle, h);
    int slot = ci_profile_slot_by_id(h, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gi *gi = &G(h->gpu)->gi[h->gi];
    const struct fs_profile *p = &G(h->gpu)->s.profiles[gi->profile];
    const struct fs_ci_profile *c = &p->ci[slot];
    unsigned taken = 0, live = 0, n = 0;
    for (int i = 0; i < FS_MAX_CI; i++)
        if (gi->ci[i].used) {
            taken |= ((1u << gi->ci[i].size) - 1) << gi->ci[i].start;
            live += gi->ci[i].profile_id == c->id;
        }
    for (unsigned s = 0; s + c->slices <= p->slices; s += c->slices) {
        unsigned m = ((1u << c->slices) - 1) << s;
        if (!(taken & m)) {
            taken |= m;
            n++;
        }
    }
    unsigned left = c->instances > live ? c->instances - live : 0;
    *count = n < left ? n : left;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t handle, unsigned int id,
                                                                 nvmlComputeInstancePlacement_t *placements,
                                                                 unsigned int *count)
{
    ENTER_GI(handle, h);
    int slot = ci_profile_slot_by_id(h, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_profile *p = &G(h->gpu)->s.profiles[G(h->gpu)->gi[h->gi].profile];
    const struct fs_ci_profile *c = &p->ci[slot];
    unsigned n = p->slices / c->slices;
    if (placements && *count < n) {
        *count = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; placements && i < n; i++)
        placements[i] = (nvmlComputeInstancePlacement_t){i * c->slices, c->slices};
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

static nvmlReturn_t create_ci(nvmlGpuInstance_t handle, const char *fn, unsigned id, int start,
                              nvmlComputeInstance_t *out)
{
    struct nvmlGpuInstance_st *h;
    nvmlReturn_t rc = fn_enter_gi(handle, fn, &h);
    if (rc)
        return rc;
    if (!out)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    int slot = ci_profile_slot_by_id(h, id);
    if (slot < 0)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    int ci = fs_ci_create(h->gpu, h->gi, (unsigned)slot, start);
    if (ci < 0)
        FN_RETURN((nvmlReturn_t)-ci);
    *out = fn_ci_handle(h->gpu, h->gi, ci);
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int id, nvmlComputeInstance_t *ci)
{
    return create_ci(gi, __func__, id, -1, ci);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gi, unsigned int id,
                                                               const nvmlComputeInstancePlacement_t *placement,
                                                               nvmlComputeInstance_t *ci)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return create_ci(gi, __func__, id, (int)placement->start, ci);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t handle, unsigned int id,
                                                nvmlComputeInstance_t *cis, unsigned int *count)
{
    ENTER_GI(handle, h);
    int slot = ci_profile_slot_by_id(h, id);
    if (slot < 0 || !count)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gi *gi = &G(h->gpu)->gi[h->gi];
    nvmlComputeInstance_t found[FS_MAX_CI];
    unsigned n = 0;
    for (unsigned cid = 0; cid < FS_MAX_CI; cid++)
        for (int c = 0; c < FS_MAX_CI; c++)
            if (gi->ci[c].used && gi->ci[c].id == cid && gi->ci[c].profile_id == id)
                found[n++] = fn_ci_handle(h->gpu, h->gi, c);
    if (n > 0 && (!cis || *count < n)) {
        *count = n;
        FN_RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++)
        cis[i] = found[i];
    *count = n;
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t handle, unsigned int id,
                                                   nvmlComputeInstance_t *ci)
{
    ENTER_GI(handle, h);
    if (!ci)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_gi *gi = &G(h->gpu)->gi[h->gi];
    for (int c = 0; c < FS_MAX_CI; c++)
        if (gi->ci[c].used && gi->ci[c].id == id) {
            *ci = fn_ci_handle(h->gpu, h->gi, c);
            FN_RETURN(NVML_SUCCESS);
        }
    FN_RETURN(NVML_ERROR_NOT_FOUND);
}

#define ENTER_CI(hdl, h)                                    \
    struct nvmlComputeInstance_st *h;                       \
    do {                                                    \
        nvmlReturn_t rc_ = fn_enter_ci(hdl, __func__, &h);  \
        if (rc_)                                            \
            return rc_;                                     \
    } while (0)

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t handle, nvmlComputeInstanceInfo_t *info)
{
    ENTER_CI(handle, h);
    if (!info)
        FN_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fs_ci *ci = &G(h->gpu)->gi[h->gi].ci[h->ci];
    *info = (nvmlComputeInstanceInfo_t){.device = fn_dev_handle(h->gpu, -1, -1),
                                        .gpuInstance = fn_gi_handle(h->gpu, h->gi), .id = ci->id,
                                        .profileId = ci->profile_id, .placement = {ci->start, ci->size}};
    FN_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t handle)
{
    ENTER_CI(handle, h);
    if (!fn_privileged())
        FN_RETURN(NVML_ERROR_NO_PERMISSION);
    fs_reap();
    for (unsigned i = 0; i < FS_MAX_PROCS; i++) {
        const struct fs_proc *p = &G(h->gpu)->procs[i];
        if (p->used && p->gi == h->gi && p->ci == h->ci)
            FN_RETURN(NVML_ERROR_IN_USE);
    }
    memset(&G(h->gpu)->gi[h->gi].ci[h->ci], 0, sizeof(struct fs_ci));
    FN_RETURN(NVML_SUCCESS);
}
