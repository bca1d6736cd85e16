/* vgpu mig, split by concern: shared by cmd/mig.c (usage, options, dispatch) and the verbs in
 * cmd/mig/: common.c (failure reporting, --json documents, GPU selection), show.c (status,
 * profiles, list), change.c (enable, disable, create, destroy), layout.c (export, apply). */
#ifndef VGPU_CMD_MIG_VERBS_H
#define VGPU_CMD_MIG_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "cmd.h"
#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/mig.h"
#include "vgpu/nvml.h"

extern const struct vgpu_cmd vgpu_cmd_mig;

struct opts {
    const char *gpu, *ci, *gi;
    bool json, placements, no_ci, dry_run;
};

/* The session: NVML, the GPU list, and the physical GPUs the verb works on. */
struct ctx {
    struct vgpu_nvml *nv;
    struct vgpu_gpu_list *list;
    unsigned n;
    unsigned pos[VGPU_MAX_GPUS];  /* positions of physical GPUs in list */
    struct vgpu_mig_gpu *mg;      /* scratch, one GPU at a time */
    const struct opts *o;
};

/* With --json, a failing verb still prints one document, with "ok": false and "error": the
 * message of the failure that decides the exit status (see mig/common.c). */
struct mig_failure {
    int code;
    char error[1024];
    bool emitted;                 /* a document is out */
};
extern struct mig_failure mig_failure;

int mig_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mig_report(const struct vgpu_err *e);
int mig_usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mig_note_pending(const char *msg);
int mig_out_err(void);
int mig_finish(struct json_object *doc, int rc);
int mig_parent_pos(const struct vgpu_gpu_list *list, unsigned pos);
int mig_select_physical(struct ctx *c, const char *sel, struct vgpu_err *e);
/* A lost or unreachable GPU: says so (stderr, and the --json error); returns 12. */
int mig_gpu_lost(const struct vgpu_gpu *g);
const char *mig_onoff(unsigned m);
double mig_gib(uint64_t mb);

int mig_status(struct ctx *c);
int mig_profiles(struct ctx *c);
int mig_list(struct ctx *c);
int mig_mode(struct ctx *c, unsigned mode);
int mig_create(struct ctx *c, const char *spec);
int mig_destroy(struct ctx *c, char **ids, int nids);
int mig_export(struct ctx *c);
int mig_apply(struct ctx *c, const char *path);

/* Shared between verbs: show.c, change.c. */
void mig_gpu_head_json(struct json_object *o, const struct vgpu_mig_gpu *g);
void mig_pids_text(const pid_t *pids, unsigned n, char *buf, size_t len);
int mig_set_mode(struct ctx *c, unsigned mode, char *msg, size_t len, bool *pending);

#endif
