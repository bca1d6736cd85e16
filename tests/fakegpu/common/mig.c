/* mig.c: the MIG state machine of a simulated GPU: GPU instances on memory slices, compute
 * instances on the GI's compute slices, remaining capacity, MIG device order, and the reset
 * that makes a pending MIG mode current (reference/nvml.md §9-§11). Callers hold fs_lock(). */
#include <stdio.h>
#include <string.h>

#include "fs_internal.h"

int fs_gi_by_id(unsigned gpu, unsigned id)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    for (int i = 0; i < FS_MAX_GI; i++)
        if (g->gi[i].used && g->gi[i].id == id)
            return i;
    return -1;
}

static unsigned used_slices(const struct fs_gpu *g)
{
    unsigned mask = 0;
    for (int i = 0; i < FS_MAX_GI; i++)
        if (g->gi[i].used)
            mask |= ((1u << g->gi[i].size) - 1) << g->gi[i].start;
    return mask;
}

static unsigned live_of_profile(const struct fs_gpu *g, unsigned profile)
{
    unsigned n = 0;
    for (int i = 0; i < FS_MAX_GI; i++)
        n += g->gi[i].used && g->gi[i].profile == profile;
    return n;
}

static unsigned span(unsigned start, unsigned size) { return ((1u << size) - 1) << start; }

unsigned fs_gi_remaining(unsigned gpu, unsigned profile)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    const struct fs_profile *p = &g->s.profiles[profile];
    unsigned taken = used_slices(g), n = 0;
    /* How many more fit side by side in the free slices, placed from the lowest start up. */
    for (unsigned i = 0; i < p->nplacements; i++) {
        unsigned m = span(p->placements[i], p->placement_size);
        if (!(taken & m)) {
            taken |= m;
            n++;
        }
    }
    unsigned live = live_of_profile(g, profile);
    unsigned left = p->instances > live ? p->instances - live : 0;
    return n < left ? n : left;
}

static void mig_uuid(const struct fs_gpu *g, unsigned gi_id, unsigned ci_id, char *out, size_t len)
{
    const unsigned char *b = g->s.uuid_bytes;
    /* Deterministic per (GPU, GI, CI), like the driver's (which are stable while the instance lives). */
    snprintf(out, len, "MIG-%02x%02x%02x%02x-%02x%02x-5%03x-a%03x-%02x%02x%02x%02x%02x%02x", b[0] ^ 0x4d, b[1],
             b[2], b[3], b[4], b[5], gi_id & 0xfff, ci_id & 0xfff, b[10], b[11], b[12], b[13], b[14], b[15]);
}

int fs_gi_create(unsigned gpu, unsigned profile, int start)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    const struct fs_profile *p = &g->s.profiles[profile];
    /* Counted per process: a test's `vgpu mig` run starts from zero whatever ran before. */
    static int created_here;
    const struct fs_failures *f = fs_failures();
    if (f->mig_create_fail_after >= 0 && created_here >= f->mig_create_fail_after)
        return -23;
    if (live_of_profile(g, profile) >= p->instances)
        return -23;
    unsigned taken = used_slices(g);
    int chosen = -1;
    if (start >= 0) {
        bool known = false;
        for (unsigned i = 0; i < p->nplacements; i++)
            known |= p->placements[i] == (unsigned)start;
        if (!known)
            return -2;
        if (!(taken & span((unsigned)start, p->placement_size)))
            chosen = start;
    } else {
        /* Without a placement the driver takes the highest free start first (reference §9). */
        for (int i = (int)p->nplacements - 1; i >= 0 && chosen < 0; i--)
            if (!(taken & span(p->placements[i], p->placement_size)))
                chosen = (int)p->placements[i];
    }
    if (chosen < 0)
        return -23;
    int slot = -1;
    for (int i = 0; i < FS_MAX_GI && slot < 0; i++)
        if (!g->gi[i].used)
            slot = i;
    if (slot < 0)
        return -23;
    struct fs_gi *gi = &g->gi[slot];
    memset(gi, 0, sizeof *gi);
    gi->used = true;
    gi->profile = profile;
    gi->start = (unsigned)chosen;
    gi->size = p->placement_size;
    gi->id = fs_gi_swizzle_id(gi->start, gi->size);
    g->mig_creates++;
    created_here++;
    return slot;
}

int fs_ci_create(unsigned gpu, int gi_slot, unsigned ci_profile, int start)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    struct fs_gi *gi = &g->gi[gi_slot];
    const struct fs_profile *p = &g->s.profiles[gi->profile];
    if (ci_profile >= p->nci)
        return -2;
    const struct fs_ci_profile *cp = &p->ci[ci_profile];
    unsigned taken = 0, live = 0;
    for (int i = 0; i < FS_MAX_CI; i++)
        if (gi->ci[i].used) {
            taken |= span(gi->ci[i].start, gi->ci[i].size);
            live += gi->ci[i].profile_id == cp->id;
        }
    if (live >= cp->instances)
        return -23;
    int chosen = -1;
    for (unsigned s = 0; s + cp->slices <= p->slices; s += cp->slices) {
        if (start >= 0 && s != (unsigned)start)
            continue;
        if (!(taken & span(s, cp->slices))) {
            chosen = (int)s;
            break;
        }
    }
    if (chosen < 0)
        return start >= 0 && ((unsigned)start % cp->slices || (unsigned)start + cp->slices > p->slices) ? -2 : -23;
    int slot = -1;
    for (int i = 0; i < FS_MAX_CI && slot < 0; i++)
        if (!gi->ci[i].used)
            slot = i;
    if (slot < 0)
        return -23;
    /* CI IDs: the lowest unused in this GI. */
    unsigned id = 0;
    for (bool clash = true; clash; ) {
        clash = false;
        for (int i = 0; i < FS_MAX_CI; i++)
            if (gi->ci[i].used && gi->ci[i].id == id) {
                clash = true;
                id++;
            }
    }
    struct fs_ci *ci = &gi->ci[slot];
    memset(ci, 0, sizeof *ci);
    ci->used = true;
    ci->id = id;
    ci->profile_id = cp->id;
    ci->start = (unsigned)chosen;
    ci->size = cp->slices;
    mig_uuid(g, gi->id, id, ci->uuid, sizeof ci->uuid);
    return slot;
}

unsigned fs_mig_devices(unsigned gpu, int *gis, int *cis, unsigned max)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    unsigned n = 0;
    if (g->mig_current != 1)
        return 0;
    /* Ordered by GI ID, then CI ID: stable whatever order they were created in. */
    for (unsigned gid = 0; gid < 16; gid++) {
        int gs = fs_gi_by_id(gpu, gid);
        if (gs < 0)
            continue;
        for (unsigned cid = 0; cid < FS_MAX_CI; cid++)
            for (int cs = 0; cs < FS_MAX_CI; cs++)
                if (g->gi[gs].ci[cs].used && g->gi[gs].ci[cs].id == cid && n < max) {
                    gis[n] = gs;
                    cis[n] = cs;
                    n++;
                }
    }
    return n;
}

bool fs_gpu_reset(unsigned gpu)
{
    struct fs_gpu *g = &fs_state()->gpu[gpu];
    fs_reap();
    for (unsigned i = 0; i < FS_MAX_PROCS; i++)
        if (g->procs[i].used)
            return false;
    if (g->mig_pending != g->mig_current) {
        g->mig_current = g->mig_pending;
        memset(g->gi, 0, sizeof g->gi);
    }

    return true;
}
