/* vgpu mig export and apply: layout files. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common.h"
#include "mig/verbs.h"
#include "vgpu/exitcode.h"
#include "vgpu/json.h"

/* ---- export / apply ----------------------------------------------------------------------------- */

static struct json_object *instance_json(const struct vgpu_mig_gi *gi)
{
    bool default_ci = gi->nci == 1 && gi->ci[0].slices == gi->slices;
    if (default_ci) {
        char s[VGPU_MIG_NAME + 16];
        snprintf(s, sizeof s, "%s:%u", gi->profile, gi->place.start);
        return json_object_new_string(s);
    }
    struct json_object *o = json_object_new_object();
    vgpu_json_str(o, "profile", gi->profile);
    vgpu_json_u64(o, "placement", gi->place.start);
    vgpu_json_str(o, "ci", gi->nci ? gi->ci[0].profile : "none");
    return o;
}

int mig_export(struct ctx *c)
{
    struct json_object *doc = vgpu_json_doc(), *arr = json_object_new_array();
    int rc = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[k]], c->mg, &e) < 0) {
            rc = mig_report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        if (!g->supported)
            continue;
        struct json_object *o = json_object_new_object();
        char idx[16];
        snprintf(idx, sizeof idx, "%u", g->index);
        vgpu_json_str(o, "gpu", idx);
        vgpu_json_str(o, "uuid", g->uuid);
        vgpu_json_str(o, "name", g->name);
        json_object_object_add(o, "mig", json_object_new_boolean(g->current != 0));
        struct json_object *inst = json_object_new_array();
        for (unsigned i = 0; i < g->ngi; i++) {
            if (g->gi[i].nci > 1)
                vgpu_warn("GPU %u: GPU instance %u has %u compute instances; the layout keeps only the first (%s)",
                          g->index, g->gi[i].id, g->gi[i].nci, g->gi[i].ci[0].profile);
            json_object_array_add(inst, instance_json(&g->gi[i]));
        }
        json_object_object_add(o, "instances", inst);
        json_object_array_add(arr, o);
    }
    json_object_object_add(doc, "gpus", arr);
    return mig_finish(doc, rc);
}

static char *read_file(const char *path, struct vgpu_err *e)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    /* The same status for every FILE that is not a layout one can read: 2 (a bad argument) when
     * it is missing or not a file, 6 when permission is denied, 1 only for an I/O error. */
    if (!f) {
        int err = errno;
        vgpu_err_set(e, err == EACCES || err == EPERM ? VGPU_EXIT_PERMISSION : err == ENOENT || err == ENOTDIR ||
                     err == EISDIR ? VGPU_EXIT_USAGE : VGPU_EXIT_FAIL, "cannot read the layout %s: %s%s", path,
                     strerror(err), err == ENOENT ? " (vgpu mig export writes one)" : "");
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (f != stdin)
            fclose(f);
        vgpu_err_set(e, VGPU_EXIT_USAGE, "cannot read the layout %s: it is a directory; give a layout file (vgpu mig "
                     "export writes one)", path);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
        if (len + 1 >= cap) {
            if (cap > (1u << 20)) {
                free(buf);
                buf = NULL;
                vgpu_err_set(e, VGPU_EXIT_USAGE, "%s is too large for a layout", path);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    bool err = ferror(f);
    if (f != stdin)
        fclose(f);
    if (buf && err) {
        free(buf);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot read %s", path);
        return NULL;
    }
    if (!buf) {
        if (!e->msg[0])
            vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory reading %s", path);
        return NULL;
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        free(buf);
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s is not a layout: it has a NUL byte (a binary file?)", path);
        return NULL;
    }
    return buf;
}

static void step(struct json_object *steps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void step(struct json_object *steps, const char *fmt, ...)
{
    char s[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    json_object_array_add(steps, json_object_new_string(s));
}

static void item_text(const struct vgpu_mig_item *it, char *buf, size_t len)
{
    char st[16] = "";
    if (it->start >= 0)
        snprintf(st, sizeof st, ":%d", it->start);
    snprintf(buf, len, "%.63s%s%s%.63s", it->profile, st, it->ci[0] ? " with compute instance " : "", it->ci);
}

/* The profiles of items, for vgpu_mig_plan: false when one is unknown or the driver gave no
 * placements for it (then the driver places them). */
static bool plannable(const struct vgpu_mig_gpu *g, const struct vgpu_mig_item *items, unsigned n,
                      const struct vgpu_mig_profile **prof)
{
    for (unsigned j = 0; j < n; j++) {
        prof[j] = vgpu_mig_find_profile(g, items[j].profile);
        if (!prof[j] || !prof[j]->nplace)
            return false;
    }
    return true;
}

/* VGPU_EXIT_BUSY when one of the GPU instances to destroy (all, or those not in keep) is in
 * use: checked before the first change, so that a busy instance stops apply with nothing done. */
static int check_idle(struct ctx *c, const bool *keep, char *msg, size_t len)
{
    const struct vgpu_mig_gpu *g = c->mg;
    for (unsigned i = 0; i < g->ngi; i++) {
        pid_t pids[32];
        if (keep && keep[i])
            continue;
        unsigned np = vgpu_mig_gi_pids(c->nv, g, g->gi[i].id, pids, 32);
        if (np) {
            char pl[256];
            mig_pids_text(pids, np, pl, sizeof pl);
            snprintf(msg, len, "GPU instance %u (%s) on GPU %u is in use by PID%s %s; stop %s first; nothing was "
                     "changed", g->gi[i].id, g->gi[i].profile, g->index, np > 1 ? "s" : "", pl,
                     np > 1 ? "them" : "it");
            return VGPU_EXIT_BUSY;
        }
    }
    return 0;
}

static void step_destroy(struct json_object *steps, const struct vgpu_mig_gi *gi)
{
    step(steps, "destroy GPU instance %u (%s at %u)", gi->id, gi->profile, gi->place.start);
}

static void step_create(struct json_object *steps, const struct vgpu_mig_item *it)
{
    char t[256];
    item_text(it, t, sizeof t);
    step(steps, "create %s", t);
}

/* Brings GPU c->mg to layout entry want (which do_apply checked against the GPU's profiles).
 * Each step goes into `steps` once, in the order it is carried out (with --dry-run: would be).
 * Returns an exit code; fills *changed and msg. */
static int apply_gpu(struct ctx *c, const struct vgpu_mig_layout_gpu *want, struct json_object *steps, bool *changed,
                     char *msg, size_t len)
{
    struct vgpu_mig_gpu *g = c->mg;
    bool dry = c->o->dry_run;
    *changed = false;
    msg[0] = 0;
    if (!g->supported) {
        snprintf(msg, len, "GPU %u (%s): MIG not supported", g->index, g->name);
        return VGPU_EXIT_FAIL;
    }
    unsigned mode = want->mig ? 1 : 0;
    bool enabled_now = false;
    if (g->current != mode || g->pending != mode) {
        if (g->current != mode && g->pending == mode) {
            snprintf(msg, len, "MIG mode change to %s is already pending on GPU %u: reset the GPU "
                     "(nvidia-smi -r -i %u) or reboot, then apply again", mig_onoff(mode), g->index, g->index);
            step(steps, "wait for the pending MIG mode (%s) to take effect", mig_onoff(mode));
            return VGPU_EXIT_PENDING;
        }
        *changed = true;
        bool pend;
        if (!mode) {
            /* Disabling: every GPU instance goes first. */
            for (unsigned i = 0; i < g->ngi; i++)
                step_destroy(steps, &g->gi[i]);
            step(steps, "disable MIG mode");
            if (dry)
                return 0;
            int r = check_idle(c, NULL, msg, len);
            if (r)
                return r;
            for (unsigned i = 0; i < g->ngi; i++) {
                struct vgpu_err e;
                if (vgpu_mig_destroy_gi(c->nv, g, &g->gi[i], &e) < 0) {
                    snprintf(msg, len, "%s", e.msg);
                    return e.code;
                }
            }
            g->ngi = 0;
            return mig_set_mode(c, 0, msg, len, &pend);
        }
        step(steps, "enable MIG mode");
        if (dry) {
            /* Plan against the GPU as it will be: MIG on, and no instances when it was off. */
            if (!g->current)
                g->ngi = 0;
            g->current = g->pending = 1;
        } else {
            int r = mig_set_mode(c, 1, msg, len, &pend);
            if (r)
                return r;
            enabled_now = true;
            struct vgpu_err e;
            struct vgpu_gpu copy = c->list->gpu[c->pos[0]];
            for (unsigned k = 0; k < c->list->count; k++)
                if (c->list->gpu[k].handle == g->dev)
                    copy = c->list->gpu[k];
            if (vgpu_mig_read(c->nv, &copy, g, &e) < 0) {
                snprintf(msg, len, "%s", e.msg);
                return e.code;
            }
        }
    }
    if (!mode)
        return 0;
    /* do_apply checked this already, except on a driver that lists the profiles only once MIG
     * is enabled (a dry run cannot know them then). */
    struct vgpu_err e;
    if ((g->nprof || !dry) && vgpu_mig_layout_check(g, want, &e) < 0) {
        snprintf(msg, len, "%.500s%s", e.msg, enabled_now ? "; MIG mode was enabled, nothing else was changed" : "");
        return e.code;
    }
    bool keep[VGPU_MIG_MAX_GI], have[VGPU_MIG_MAX_ITEMS];
    if (vgpu_mig_match(g, want->items, want->n, keep, have))
        return 0;
    *changed = true;
    struct vgpu_mig_item todo[VGPU_MIG_MAX_ITEMS];
    unsigned ntodo = 0;
    for (unsigned j = 0; j < want->n; j++)
        if (!have[j])
            todo[ntodo++] = want->items[j];
    /* The new instances must fit beside the kept ones; when the kept ones are in their way,
     * start from an empty GPU instead (the layout fits there: do_apply checked), rather than
     * destroy some and then fail to create. */
    const struct vgpu_mig_profile *prof[VGPU_MIG_MAX_ITEMS];
    if (ntodo && plannable(g, todo, ntodo, prof)) {
        uint32_t kept_slices = 0;
        for (unsigned i = 0; i < g->ngi; i++)
            if (keep[i] && g->gi[i].place.size < 32)
                kept_slices |= ((1u << g->gi[i].place.size) - 1u) << g->gi[i].place.start;
        struct vgpu_mig_item trial[VGPU_MIG_MAX_ITEMS];
        memcpy(trial, todo, ntodo * sizeof *todo);
        if (vgpu_mig_plan(kept_slices, trial, prof, ntodo) < 0) {
            for (unsigned i = 0; i < g->ngi; i++)
                keep[i] = false;
            ntodo = want->n;
            memcpy(todo, want->items, ntodo * sizeof *todo);
        }
    }
    for (unsigned i = 0; i < g->ngi; i++)
        if (!keep[i])
            step_destroy(steps, &g->gi[i]);
    for (unsigned j = 0; j < ntodo; j++)
        step_create(steps, &todo[j]);
    if (dry)
        return 0;
    int r = check_idle(c, keep, msg, len);
    if (r)
        return r;
    unsigned kept = 0;
    for (unsigned i = 0; i < g->ngi; i++) {
        if (keep[i]) {
            g->gi[kept++] = g->gi[i];
            continue;
        }
        if (vgpu_mig_destroy_gi(c->nv, g, &g->gi[i], &e) < 0) {
            snprintf(msg, len, "%s", e.msg);
            return e.code;
        }
    }
    g->ngi = kept;
    if (ntodo) {
        struct vgpu_mig_created made[VGPU_MIG_MAX_ITEMS];
        struct vgpu_mig_ci_req req = { false, NULL };
        if (vgpu_mig_create(c->nv, g, todo, ntodo, &req, made, &e) < 0) {
            snprintf(msg, len, "%s", e.msg);
            return e.code;
        }
    }
    return 0;
}

/* A layout error found before anything was changed: where, what, and exit status e->code. */
static int layout_error(const char *path, unsigned entry, const struct vgpu_mig_gpu *g, const struct vgpu_err *e)
{
    char gpu[160] = "";
    if (g)
        snprintf(gpu, sizeof gpu, ", GPU %u (%.100s)", g->index, g->name);
    return mig_fail(e->code, "%s: gpus[%u]%s: %.500s; nothing was changed", path, entry, gpu, e->msg);
}

/* Checks the whole layout before apply changes anything: every selector names GPUs, no GPU is
 * named by two entries, a GPU named explicitly supports MIG, and every entry fits the profile
 * table of each of its GPUs. Fills which/nwhich with the GPUs of each entry. Returns an exit code. */
static int check_layout(struct ctx *c, const char *path, const struct vgpu_mig_layout *lay,
                        unsigned which[][VGPU_MAX_GPUS], unsigned *nwhich)
{
    int owner[VGPU_MAX_GPUS];
    for (unsigned p = 0; p < VGPU_MAX_GPUS; p++)
        owner[p] = -1;
    struct vgpu_err e;
    for (unsigned l = 0; l < lay->n; l++) {
        if (mig_select_physical(c, lay->gpu[l].sel, &e) < 0)
            return layout_error(path, l, NULL, &e);
        nwhich[l] = c->n;
        memcpy(which[l], c->pos, sizeof c->pos);
        bool all_sel = !strcmp(lay->gpu[l].sel, "all");
        for (unsigned k = 0; k < nwhich[l]; k++) {
            unsigned p = which[l][k];
            if (vgpu_mig_read(c->nv, &c->list->gpu[p], c->mg, &e) < 0)
                return layout_error(path, l, NULL, &e);
            const struct vgpu_mig_gpu *g = c->mg;
            if (!g->supported) {
                if (all_sel)
                    continue;  /* "all" skips GPUs without MIG */
                vgpu_err_set(&e, VGPU_EXIT_USAGE, "MIG is not supported on this GPU");
                return layout_error(path, l, g, &e);
            }
            if (owner[p] >= 0) {
                vgpu_err_set(&e, VGPU_EXIT_USAGE, "already named by gpus[%d]; name each GPU once", owner[p]);
                return layout_error(path, l, g, &e);
            }
            owner[p] = (int)l;
            /* A driver that lists MIG profiles only once MIG is enabled gives none now; apply
             * checks such a GPU after enabling MIG. */
            if (!g->nprof && !g->current)
                continue;
            if (vgpu_mig_layout_check(g, &lay->gpu[l], &e) < 0)
                return layout_error(path, l, g, &e);
        }
    }
    return 0;
}

int mig_apply(struct ctx *c, const char *path)
{
    struct vgpu_err e;
    memset(&e, 0, sizeof e);
    char *text = read_file(path, &e);
    if (!text)
        return mig_report(&e);
    struct vgpu_mig_layout *lay = calloc(1, sizeof *lay);
    if (!lay) {
        free(text);
        return mig_fail(VGPU_EXIT_FAIL, "out of memory");
    }
    if (vgpu_mig_layout_parse(text, lay, &e) < 0) {
        free(text);
        free(lay);
        return mig_fail(e.code, "%s: %.400s", path, e.msg);
    }
    free(text);
    unsigned which[VGPU_MIG_LAYOUT_MAX][VGPU_MAX_GPUS];
    unsigned nwhich[VGPU_MIG_LAYOUT_MAX];
    int rc = check_layout(c, path, lay, which, nwhich);
    if (rc) {
        free(lay);
        return rc;
    }
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    bool any_change = false;
    for (unsigned l = 0; l < lay->n; l++) {
        for (unsigned k = 0; k < nwhich[l]; k++) {
            c->n = 1;
            c->pos[0] = which[l][k];
            if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[0]], c->mg, &e) < 0) {
                int r = mig_report(&e);
                if (!rc || rc == VGPU_EXIT_PENDING)
                    rc = r;
                continue;
            }
            if (!c->mg->supported)
                continue;  /* "all" (check_layout refused others) */
            struct json_object *steps = json_object_new_array();
            bool changed;
            char msg[700];
            int r = apply_gpu(c, &lay->gpu[l], steps, &changed, msg, sizeof msg);
            any_change |= changed;
            if (doc) {
                struct json_object *o = json_object_new_object();
                vgpu_json_u64(o, "index", c->mg->index);
                vgpu_json_str(o, "uuid", c->mg->uuid);
                vgpu_json_bool(o, "changed", changed);
                vgpu_json_bool(o, "dry_run", c->o->dry_run);
                json_object_object_add(o, "plan", steps);
                vgpu_json_bool(o, "ok", r == 0);
                vgpu_json_str(o, "message", msg[0] ? msg : NULL);
                json_object_array_add(arr, o);
            } else {
                size_t ns = json_object_array_length(steps);
                if (!changed && !r)
                    printf("GPU %u already matches the layout; nothing to do\n", c->mg->index);
                else if (ns)
                    printf("GPU %u: %s\n", c->mg->index, c->o->dry_run ? "plan (dry run, nothing changed):" : "plan:");
                for (size_t s = 0; s < ns; s++)
                    printf("  %s\n", json_object_get_string(json_object_array_get_idx(steps, s)));
                json_object_put(steps);
            }
            if (r) {
                if (r == VGPU_EXIT_PENDING)
                    mig_note_pending(msg);
                else
                    mig_fail(r, "%s", msg);
                if (!rc || rc == VGPU_EXIT_PENDING)
                    rc = r;
            }
        }
    }
    free(lay);
    if (doc) {
        vgpu_json_bool(doc, "changed", any_change);
        json_object_object_add(doc, "gpus", arr);
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    if (!rc && any_change && !c->o->dry_run)
        printf("MIG layout applied.\n");
    if (fflush(stdout) == EOF)
        return mig_out_err();
    return rc;
}
