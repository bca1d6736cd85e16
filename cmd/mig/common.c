/* vgpu mig: failure reporting (and the --json document of a failure), GPU selection. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"
#include "mig/verbs.h"
#include "vgpu/exitcode.h"
#include "vgpu/json.h"

/* With --json, a failing verb still prints one document, with "ok": false and "error": the
 * message of the failure that decides the exit status (the first one; a pending mode change
 * gives way to a real failure, as in the exit status), which also went to stderr. Every
 * failure in this file goes through mig_fail(), mig_report(), mig_usage_err() or mig_note_pending(), which
 * remember it here. */
struct mig_failure mig_failure;

static void remember(int code, const char *msg)
{
    if (mig_failure.error[0] && !(mig_failure.code == VGPU_EXIT_PENDING && code != VGPU_EXIT_PENDING))
        return;
    mig_failure.code = code;
    snprintf(mig_failure.error, sizeof mig_failure.error, "%s", msg);
}

int mig_fail(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    remember(code, msg);
    return vgpu_fail(code, "%s", msg);
}

int mig_report(const struct vgpu_err *e)
{
    remember(e->code, e->msg);
    return vgpu_err_report(e);
}

int mig_usage_err(const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mig_fail(VGPU_EXIT_USAGE, "%s (see 'vgpu %s --help')", msg, vgpu_cmd_mig.name);
}

/* A mode change left pending: a warning, and exit status 10. */
void mig_note_pending(const char *msg)
{
    remember(VGPU_EXIT_PENDING, msg);
    vgpu_warn("%s", msg);
}

int mig_out_err(void)
{
    return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
}

/* Emits doc with "ok" and "error" (null on success) after "schema", as every vgpu mig
 * document has them. Returns rc, or the output error when rc is 0. */
int mig_finish(struct json_object *doc, int rc)
{
    struct json_object *out = vgpu_json_doc();
    char fallback[64];
    snprintf(fallback, sizeof fallback, "failed (exit status %d)", rc);
    vgpu_json_bool(out, "ok", rc == 0);
    vgpu_json_str(out, "error", rc ? (mig_failure.error[0] ? mig_failure.error : fallback) : NULL);
    json_object_object_foreach(doc, key, val) {
        if (strcmp(key, "schema"))
            json_object_object_add(out, key, json_object_get(val));
    }
    json_object_put(doc);
    mig_failure.emitted = true;
    int r = vgpu_json_emit(out, true) < 0 ? mig_out_err() : 0;
    return rc ? rc : r;
}

/* The physical GPU position of list entry pos (a MIG device maps to its parent). */
int mig_parent_pos(const struct vgpu_gpu_list *list, unsigned pos)
{
    if (!list->gpu[pos].is_mig)
        return (int)pos;
    for (unsigned i = 0; i < list->count; i++)
        if (!list->gpu[i].is_mig && list->gpu[i].index == list->gpu[pos].index)
            return (int)i;
    return -1;
}

int mig_select_physical(struct ctx *c, const char *sel, struct vgpu_err *e)
{
    c->n = 0;
    if (!sel || !strcmp(sel, "all")) {
        for (unsigned i = 0; i < c->list->count; i++)
            if (!c->list->gpu[i].is_mig)
                c->pos[c->n++] = i;
        return 0;
    }
    struct vgpu_gpu_sel s;
    if (vgpu_gpus_select(c->list, sel, &s, e) < 0)
        return -1;
    for (unsigned k = 0; k < s.count; k++) {
        int p = mig_parent_pos(c->list, s.pos[k]);
        bool dup = p < 0;
        for (unsigned j = 0; !dup && j < c->n; j++)
            dup = c->pos[j] == (unsigned)p;
        if (!dup)
            c->pos[c->n++] = (unsigned)p;
    }
    return 0;
}

int mig_gpu_lost(const struct vgpu_gpu *g)
{
    char why[128];
    vgpu_gpu_trouble(g, why, sizeof why);
    return mig_fail(VGPU_EXIT_GPU_LOST, "GPU %u %s; its MIG state cannot be read or changed: see 'nvidia-smi -q -i "
                    "%u' and the kernel log (Xid errors); a reset (nvidia-smi -r -i %u) or a reboot brings it back",
                    g->index, why, g->index, g->index);
}

const char *mig_onoff(unsigned m)
{
    return m ? "enabled" : "disabled";
}

double mig_gib(uint64_t mb)
{
    return (double)mb / 1024.0;
}
