/* MIG: reading a GPU's MIG state (mode, profiles, instances) through NVML, creating and
 * destroying instances all-or-nothing, and the SPEC and layout languages of `vgpu mig`.
 * vgpu-side code (never linked into libvgpu.so). reference/nvml.md §9-§13. */
#ifndef VGPU_MIG_H
#define VGPU_MIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

struct vgpu_nvml;
struct vgpu_gpu;

#define VGPU_MIG_MAX_PROFILES 24
#define VGPU_MIG_MAX_PLACEMENTS 16
#define VGPU_MIG_MAX_GI 16
#define VGPU_MIG_MAX_CI 8
#define VGPU_MIG_MAX_ITEMS 32
#define VGPU_MIG_NAME 64

struct vgpu_mig_place {
    unsigned start, size;
};

/* A GPU-instance profile (a row of `nvidia-smi mig -lgip`). */
struct vgpu_mig_profile {
    unsigned index, id;
    char name[VGPU_MIG_NAME];     /* "1g.10gb", without the driver's "MIG " */
    unsigned slices, instances, sm, ce, dec, enc, jpeg, ofa;
    bool p2p;
    uint64_t mem_mb;
    int free;                     /* remaining capacity; -1 when the driver cannot tell */
    unsigned nplace;
    struct vgpu_mig_place place[VGPU_MIG_MAX_PLACEMENTS];
};

/* A compute-instance profile of one GPU instance. */
struct vgpu_mig_ci_profile {
    unsigned index, id;
    char name[VGPU_MIG_NAME];
    unsigned slices, instances, sm, ce, dec, enc, jpeg, ofa;
    int free;
    bool is_default;              /* the one covering the whole GPU instance */
};

struct vgpu_mig_ci {
    unsigned id, profile_id, slices;
    char profile[VGPU_MIG_NAME];
    struct vgpu_mig_place place;
    char uuid[96];                /* MIG-..., empty when unknown */
    void *handle;                 /* nvmlComputeInstance_t */
};

struct vgpu_mig_gi {
    unsigned id, profile_id;
    char profile[VGPU_MIG_NAME];
    struct vgpu_mig_place place;
    uint64_t mem_mb;
    unsigned slices;
    void *handle;                 /* nvmlGpuInstance_t */
    unsigned nci;
    struct vgpu_mig_ci ci[VGPU_MIG_MAX_CI];
};

/* One physical GPU. */
struct vgpu_mig_gpu {
    void *dev;                    /* nvmlDevice_t */
    unsigned index;
    char name[96], uuid[96], pci[32];
    bool supported;               /* GetMigMode works */
    unsigned current, pending;
    unsigned nprof;
    struct vgpu_mig_profile prof[VGPU_MIG_MAX_PROFILES];
    unsigned ngi;
    struct vgpu_mig_gi gi[VGPU_MIG_MAX_GI];
};

/* Reads mode, profiles (with remaining capacity and placements) and instances of the physical
 * GPU g. A GPU without MIG support gives supported=false and 0. -1 with e set on failure. */
int vgpu_mig_read(struct vgpu_nvml *nv, const struct vgpu_gpu *g, struct vgpu_mig_gpu *out, struct vgpu_err *e);

/* The compute-instance profiles of GPU instance gi (engine profile SHARED). Returns the count. */
unsigned vgpu_mig_ci_profiles(struct vgpu_nvml *nv, const struct vgpu_mig_gi *gi, struct vgpu_mig_ci_profile *out,
                              unsigned max);

/* Finds a GI profile by name ("1g.10gb", "MIG 1g.10gb", case-insensitive) or numeric ID. */
const struct vgpu_mig_profile *vgpu_mig_find_profile(const struct vgpu_mig_gpu *g, const char *name);
/* "1g.10gb, 1g.10gb+me, ..." for error messages. */
void vgpu_mig_profile_names(const struct vgpu_mig_gpu *g, char *buf, size_t len);
/* "unknown profile 'NAME'[ for GPU-NAME]; did you mean 'P'? valid: ..." (the suggestion only for
 * a near miss such as 1g.10gbb), for every message about a profile this GPU does not have. */
void vgpu_mig_unknown_profile(const struct vgpu_mig_gpu *g, const char *name, bool name_gpu, char *buf, size_t len);

/* One requested GPU instance: a profile and an optional start (-1: vgpu chooses). */
struct vgpu_mig_item {
    char profile[VGPU_MIG_NAME];
    int start;
    char ci[VGPU_MIG_NAME];       /* its compute instance: "" as the create call says, "none", or a CI profile */
};

/* Parses SPEC: a comma list of [Nx]PROFILE[:START], PROFILE a name or an ID. Expands counts.
 * 0, or -1 with e set (VGPU_EXIT_USAGE). Pure. */
int vgpu_mig_parse_spec(const char *spec, struct vgpu_mig_item *out, unsigned max, unsigned *n, struct vgpu_err *e);

/* Chooses a start for every item without one so that no two instances share a memory slice
 * and each start is one of its profile's placements; `used` is a bitmask of the memory slices
 * already taken. prof[i] is item i's profile. Larger profiles are placed first, higher starts
 * first (as the driver does). 0 with items[].start filled, -1 when no arrangement exists. Pure. */
int vgpu_mig_plan(uint32_t used, struct vgpu_mig_item *items, const struct vgpu_mig_profile *const *prof, unsigned n);

/* Bitmask of the memory slices the GPU instances of g occupy. */
uint32_t vgpu_mig_used_slices(const struct vgpu_mig_gpu *g);

/* How a created GPU instance gets compute instances. */
struct vgpu_mig_ci_req {
    bool none;                    /* --no-ci */
    const char *profile;          /* --ci PROFILE; NULL: the default (whole GI) */
};

/* What one create call did, for the report. */
struct vgpu_mig_created {
    unsigned gi_id, gi_profile_id, start, size;
    char profile[VGPU_MIG_NAME];
    bool has_ci;
    unsigned ci_id;
    char ci_profile[VGPU_MIG_NAME];
};

/* Creates the items (starts chosen by vgpu_mig_plan when not given) and their compute
 * instances; all-or-nothing: on any failure the instances this call created are destroyed
 * again and e says which one failed and why. Returns the number created, or -1. */
int vgpu_mig_create(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g, struct vgpu_mig_item *items, unsigned n,
                    const struct vgpu_mig_ci_req *ci, struct vgpu_mig_created *out, struct vgpu_err *e);

/* The PIDs running in GPU instance gi_id of g (through its MIG devices and the parent's list).
 * Returns how many (up to max). */
unsigned vgpu_mig_gi_pids(struct vgpu_nvml *nv, const struct vgpu_mig_gpu *g, unsigned gi_id, pid_t *pids,
                          unsigned max);
/* The PIDs using the physical GPU at all. */
unsigned vgpu_mig_gpu_pids(struct vgpu_nvml *nv, const struct vgpu_mig_gpu *g, pid_t *pids, unsigned max);

/* Destroys GPU instance gi (its compute instances first). Refuses with VGPU_EXIT_BUSY naming
 * the PIDs when processes use it. 0 or -1 with e set. */
int vgpu_mig_destroy_gi(struct vgpu_nvml *nv, struct vgpu_mig_gpu *g, const struct vgpu_mig_gi *gi,
                        struct vgpu_err *e);

/* Whether GPU instance gi is what item asks for (profile, start when given, compute instance). */
bool vgpu_mig_item_matches(const struct vgpu_mig_gpu *g, const struct vgpu_mig_gi *gi, const struct vgpu_mig_item *item);

/* Matches the wanted items against g's GPU instances: keep[i] for instances that stay,
 * have[j] for items already there. True when they are exactly the same set. */
bool vgpu_mig_match(const struct vgpu_mig_gpu *g, const struct vgpu_mig_item *items, unsigned n, bool *keep,
                    bool *have);

/* A declarative layout (vgpu mig apply/export), JSON:
 *   { "schema": 1, "gpus": [ { "gpu": "0", "mig": true,
 *       "instances": [ "3g.40gb:4", "2x1g.10gb", { "profile": "4g.40gb", "placement": 0, "ci": "none" } ] } ] }
 * "gpu" is a selector as --gpu takes (index, UUID, "all"); instances are SPEC items or objects. */
#define VGPU_MIG_LAYOUT_MAX 16
struct vgpu_mig_layout_gpu {
    char sel[128];
    bool mig;
    unsigned n;
    struct vgpu_mig_item items[VGPU_MIG_MAX_ITEMS];
};
struct vgpu_mig_layout {
    unsigned n;
    struct vgpu_mig_layout_gpu gpu[VGPU_MIG_LAYOUT_MAX];
};
/* Parses a layout; unknown keys are errors. 0, or -1 with e set (VGPU_EXIT_USAGE). Pure. */
int vgpu_mig_layout_parse(const char *text, struct vgpu_mig_layout *out, struct vgpu_err *e);
/* Checks layout entry want against the profile table of GPU g, so that apply can refuse a bad
 * layout before it changes anything: every profile is one of g's, every placement one of its
 * profile's, no profile is asked for more often than the GPU holds, the instances fit on the GPU
 * together, and a compute-instance profile written "Nc" or "Nc.PROFILE" fits its GPU instance.
 * The profile table is the one `vgpu mig profiles` shows, which NVML gives with MIG off too
 * (reference/nvml.md §8). 0, or -1 with e set (VGPU_EXIT_USAGE). Pure. */
int vgpu_mig_layout_check(const struct vgpu_mig_gpu *g, const struct vgpu_mig_layout_gpu *want, struct vgpu_err *e);

/* Maps an NVML MIG error to an exit code and a message tail with what to do. */
int vgpu_mig_errcode(int nvml_rc);

#endif
