/* The GPUs of this machine as vgpu sees them (through NVML), and `--gpu` selection.
 *
 * Enumeration lists every physical GPU by NVML index, followed (when MIG is on) by its MIG
 * devices. Selection accepts: an index ("0"), a UUID ("GPU-8f..."), a unique UUID prefix
 * ("GPU-8f" or "8f3a"), a PCI bus id ("00000000:18:00.0" or "18:00.0"), a MIG UUID, comma lists
 * of those, and "all". An unknown or ambiguous selector is an error that lists the GPUs.
 * This is vgpu-side code (not used by libvgpu.so). */
#ifndef VGPU_GPU_H
#define VGPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "vgpu/log.h"

#define VGPU_MAX_GPUS 64          /* physical GPUs + MIG devices in one listing */
#define VGPU_UUID_LEN 96

struct vgpu_nvml;                 /* lib/include/vgpu/nvml.h */

struct vgpu_gpu {
    unsigned index;               /* NVML index of the physical GPU (parent for MIG devices) */
    bool is_mig;                  /* a MIG device (GPU instance + compute instance) */
    unsigned mig_gi, mig_ci;      /* GPU / compute instance ids, for MIG devices */
    char uuid[VGPU_UUID_LEN];     /* GPU-... or MIG-... */
    char name[VGPU_UUID_LEN];
    char pci_bus_id[32];          /* empty for MIG devices */
    uint64_t mem_total;           /* bytes (NVML v2: total) */
    uint64_t mem_used;            /* bytes (NVML v2: used, excludes reserved) */
    uint64_t mem_reserved;        /* bytes reserved by the driver (0 when unknown) */
    bool has_mig_mode;            /* false: MIG not supported on this GPU */
    unsigned mig_current, mig_pending;
    int compute_mode;             /* nvmlComputeMode_t, -1 when unknown */
    unsigned sm_count;            /* 0 when unknown */
    bool lost;                    /* NVML_ERROR_GPU_IS_LOST: it stopped answering the driver */
    char unreachable[64];         /* another reason NVML gave no handle (""): name etc. unknown */
    void *handle;                 /* nvmlDevice_t */
};

struct vgpu_gpu_list {
    unsigned count;
    struct vgpu_gpu gpu[VGPU_MAX_GPUS];
};

/* Fills the list from NVML (physical GPUs and their MIG devices). 0, or -1 with e set. */
int vgpu_gpus_enumerate(struct vgpu_nvml *nv, struct vgpu_gpu_list *out, struct vgpu_err *e);

/* Selection result: a bitmask over list->gpu[] positions (not NVML indexes). */
struct vgpu_gpu_sel {
    unsigned count;
    unsigned pos[VGPU_MAX_GPUS];  /* positions into the list, in the order given, no duplicates */
};

/* Parses SEL against the list. "all" selects every physical GPU (and no MIG devices, unless
 * the GPU is in MIG mode, in which case its MIG devices are selected instead). 0, or -1 with e
 * set (code VGPU_EXIT_USAGE) naming the bad selector and listing the GPUs. */
int vgpu_gpus_select(const struct vgpu_gpu_list *list, const char *sel, struct vgpu_gpu_sel *out,
                     struct vgpu_err *e);

/* The same, but returns all (as above) when sel is NULL. */
int vgpu_gpus_select_default(const struct vgpu_gpu_list *list, const char *sel,
                             struct vgpu_gpu_sel *out, struct vgpu_err *e);

/* Why a GPU cannot be used ("is lost (it stopped answering the driver)", "cannot be reached
 * (NVML: ...)"), or NULL when it answers. */
const char *vgpu_gpu_trouble(const struct vgpu_gpu *g, char *buf, size_t len);

/* Says on stderr, for every selected GPU that is lost or unreachable, "GPU N is lost ...; what
 * to do" (sel NULL: every GPU of the list). Returns VGPU_EXIT_GPU_LOST when it said anything,
 * else 0: listing commands print their rows, then exit with it (vgpu(1) EXIT STATUS). */
int vgpu_gpus_report_lost(const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel);

/* Appends "  0  GPU-...  NVIDIA H100 ...\n" lines for every GPU to buf (for error messages). */
void vgpu_gpus_describe(const struct vgpu_gpu_list *list, char *buf, size_t len);

#endif
