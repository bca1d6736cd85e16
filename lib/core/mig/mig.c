/* MIG through NVML: read a GPU's mode, profiles and instances; create instances all-or-nothing;
 * destroy them unless in use (see vgpu/mig.h, reference/nvml.md §9-§11). */
#include "vgpu/mig.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vgpu/closest.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/nvml.h"

/* Copies with truncation (names are short; this keeps -Wformat-truncation quiet). */
static void cpy(char *dst, size_t len, const char *src)
{
    size_t l = strnlen(src, len - 1);
    memcpy(dst, src, l);
    dst[l] = 0;
}

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

int vgpu_mig_parse_spec(const char *spec, struct vgpu_mig_item *out, unsigned max, unsigned *n, struct vgpu_err *e)
{
    *n = 0;
    char buf[1024];
    if (!spec || !*spec) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "empty SPEC: give profiles such as 3g.40gb,2x1g.10gb");
        return -1;
    }
    if (strlen(spec) >= sizeof buf) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "SPEC is too long");
        return -1;
    }
    cpy(buf, sizeof buf, spec);
    char *rest = buf, *tok;
    while ((tok = strsep(&rest, ","))) {
        while (isspace((unsigned char)*tok))
            tok++;
        size_t tl = strlen(tok);
        while (tl && isspace((unsigned char)tok[tl - 1]))
            tok[--tl] = 0;
        if (!*tok) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "SPEC '%s' has an empty item", spec);
            return -1;
        }
        unsigned count = 1;
        char *p = tok;
        size_t digits = strspn(p, "0123456789");
        if (digits && (p[digits] == 'x' || p[digits] == 'X' || p[digits] == '*') && p[digits + 1]) {
            char *end;
            unsigned long c = strtoul(p, &end, 10);
            if (c == 0 || c > VGPU_MIG_MAX_ITEMS) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "bad count in '%s': 1 to %d", tok, VGPU_MIG_MAX_ITEMS);
                return -1;
            }
            count = (unsigned)c;
            p += digits + 1;
        }
        int start = -1;
        char *colon = strrchr(p, ':');
        if (colon) {
            const char *s = colon + 1;
            /* Checked before the ':' is cut off, so the message quotes the whole bad item. */
            if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 2) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "bad placement '%s' in '%s': a start slice is a number such as "
                             "1g.10gb:4", s, tok);
                return -1;
            }
            *colon = 0;
            start = atoi(s);
            /* "1g.10gb:1:2" was taken for the profile "1g.10gb:1", said to be unknown. */
            if (strchr(p, ':')) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "'%s' has more than one ':': an instance has one start slice, "
                             "as in 1g.10gb:4", tok);
                return -1;
            }
            if (count > 1) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "'%s': a placement names one instance; drop the count", tok);
                return -1;
            }
        }
        if (!*p || strlen(p) >= VGPU_MIG_NAME) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "bad profile in '%s'", tok);
            return -1;
        }
        for (unsigned i = 0; i < count; i++) {
            if (*n >= max) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "SPEC '%s' asks for more than %u instances", spec, max);
                return -1;
            }
            cpy(out[*n].profile, sizeof out[*n].profile, p);
            out[*n].start = start;
            out[*n].ci[0] = 0;
            (*n)++;
        }
    }
    if (!*n) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "empty SPEC: give profiles such as 3g.40gb,2x1g.10gb");
        return -1;
    }
    return 0;
}

static uint32_t mask_of(unsigned start, unsigned size)
{
    if (size >= 32)
        return 0xFFFFFFFFu;
    return ((1u << size) - 1u) << start;
}

uint32_t vgpu_mig_used_slices(const struct vgpu_mig_gpu *g)
{
    uint32_t m = 0;
    for (unsigned i = 0; i < g->ngi; i++)
        m |= mask_of(g->gi[i].place.start, g->gi[i].place.size);
    return m;
}

static bool place_rec(uint32_t used, struct vgpu_mig_item *items, const struct vgpu_mig_profile *const *prof,
                      const unsigned *order, unsigned k, unsigned n)
{
    if (k == n)
        return true;
    unsigned i = order[k];
    const struct vgpu_mig_profile *p = prof[i];
    for (unsigned q = p->nplace; q-- > 0;) {
        uint32_t m = mask_of(p->place[q].start, p->place[q].size);
        if (used & m)
            continue;
        items[i].start = (int)p->place[q].start;
        if (place_rec(used | m, items, prof, order, k + 1, n))
            return true;
    }
    items[i].start = -1;
    return false;
}

int vgpu_mig_plan(uint32_t used, struct vgpu_mig_item *items, const struct vgpu_mig_profile *const *prof, unsigned n)
{
    unsigned order[VGPU_MIG_MAX_ITEMS], m = 0;
    if (n > VGPU_MIG_MAX_ITEMS)
        return -1;
    /* Fixed starts first: they must be valid and must not overlap. */
    for (unsigned i = 0; i < n; i++) {
        if (items[i].start < 0)
            continue;
        const struct vgpu_mig_profile *p = prof[i];
        bool valid = false;
        for (unsigned q = 0; q < p->nplace; q++)
            if ((int)p->place[q].start == items[i].start) {
                uint32_t mk = mask_of(p->place[q].start, p->place[q].size);
                if (used & mk)
                    return -1;
                used |= mk;
                valid = true;
                break;
            }
        if (!valid)
            return -1;
    }
    for (unsigned i = 0; i < n; i++)
        if (items[i].start < 0)
            order[m++] = i;
    /* Larger first (stable), so that small ones do not fragment the GPU. */
    for (unsigned a = 1; a < m; a++)
        for (unsigned b = a; b > 0; b--) {
            const struct vgpu_mig_profile *x = prof[order[b - 1]], *y = prof[order[b]];
            unsigned sx = x->nplace ? x->place[0].size : x->slices, sy = y->nplace ? y->place[0].size : y->slices;
            if (sx >= sy)
                break;
            unsigned t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    return place_rec(used, items, prof, order, 0, m) ? 0 : -1;
}

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

static bool ci_name_matches(const struct vgpu_mig_ci *c, const char *want)
{
    if (strncasecmp(want, "MIG ", 4) == 0)
        want += 4;
    char short_name[16];
    snprintf(short_name, sizeof short_name, "%uc", c->slices);
    return strcasecmp(c->profile, want) == 0 || strcasecmp(short_name, want) == 0 ||
           (*want && strspn(want, "0123456789") == strlen(want) && (unsigned)atoi(want) == c->profile_id);
}

bool vgpu_mig_item_matches(const struct vgpu_mig_gpu *g, const struct vgpu_mig_gi *gi, const struct vgpu_mig_item *item)
{
    const struct vgpu_mig_profile *p = vgpu_mig_find_profile(g, item->profile);
    if (!p || p->id != gi->profile_id)
        return false;
    if (item->start >= 0 && (unsigned)item->start != gi->place.start)
        return false;
    if (strcasecmp(item->ci, "none") == 0)
        return gi->nci == 0;
    if (gi->nci != 1)
        return false;
    if (!item->ci[0])
        return gi->ci[0].slices == gi->slices;
    return ci_name_matches(&gi->ci[0], item->ci);
}

bool vgpu_mig_match(const struct vgpu_mig_gpu *g, const struct vgpu_mig_item *items, unsigned n, bool *keep,
                    bool *have)
{
    for (unsigned i = 0; i < g->ngi; i++)
        keep[i] = false;
    for (unsigned j = 0; j < n; j++)
        have[j] = false;
    /* Items with a placement first: they can match one instance only. */
    for (int pass = 0; pass < 2; pass++)
        for (unsigned j = 0; j < n; j++) {
            if (have[j] || (pass == 0) != (items[j].start >= 0))
                continue;
            for (unsigned i = 0; i < g->ngi; i++)
                if (!keep[i] && vgpu_mig_item_matches(g, &g->gi[i], &items[j])) {
                    keep[i] = have[j] = true;
                    break;
                }
        }
    bool same = true;
    for (unsigned i = 0; i < g->ngi; i++)
        same &= keep[i];
    for (unsigned j = 0; j < n; j++)
        same &= have[j];
    return same;
}
