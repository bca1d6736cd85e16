/* The declarative MIG layout of `vgpu mig apply` and `vgpu mig export` (see vgpu/mig.h). */
#include <ctype.h>
#include <limits.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "vgpu/exitcode.h"
#include "vgpu/json.h"
#include "vgpu/mig.h"

static int bad(struct vgpu_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct vgpu_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    e->code = VGPU_EXIT_USAGE;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int parse_instance(struct json_object *v, struct vgpu_mig_layout_gpu *g, const char *where, struct vgpu_err *e)
{
    if (json_object_is_type(v, json_type_string)) {
        /* Parsed whole, then counted against what is left: parsed into what was left, the 33rd
         * instance was said to be "more than 0 instances". */
        struct vgpu_mig_item items[VGPU_MIG_MAX_ITEMS];
        unsigned n = 0;
        if (vgpu_mig_parse_spec(json_object_get_string(v), items, VGPU_MIG_MAX_ITEMS, &n, e) < 0)
            return -1;
        if (g->n + n > VGPU_MIG_MAX_ITEMS)
            return bad(e, "%s: more than %d instances on one GPU", where,
                       VGPU_MIG_MAX_ITEMS);
        memcpy(g->items + g->n, items, n * sizeof *items);
        g->n += n;
        return 0;
    }
    if (!json_object_is_type(v, json_type_object))
        return bad(e, "%s: an instance is a string such as \"3g.40gb:4\" or an object", where);
    if (g->n >= VGPU_MIG_MAX_ITEMS)
        return bad(e, "%s: more than %d instances on one GPU", where,
                   VGPU_MIG_MAX_ITEMS);
    struct vgpu_mig_item *it = &g->items[g->n];
    memset(it, 0, sizeof *it);
    it->start = -1;
    bool has_profile = false;
    json_object_object_foreach(v, key, val) {
        if (!strcmp(key, "profile") && json_object_is_type(val, json_type_string) &&
            strlen(json_object_get_string(val)) < sizeof it->profile) {
            snprintf(it->profile, sizeof it->profile, "%s", json_object_get_string(val));
            has_profile = true;
        } else if (!strcmp(key, "placement") && json_object_is_type(val, json_type_int) &&
                   json_object_get_int(val) >= 0 && json_object_get_int(val) < 32) {
            it->start = json_object_get_int(val);
        } else if (!strcmp(key, "placement") && json_object_is_type(val, json_type_null)) {
            it->start = -1;
        } else if (!strcmp(key, "ci") && json_object_is_type(val, json_type_string) &&
                   strlen(json_object_get_string(val)) < sizeof it->ci) {
            snprintf(it->ci, sizeof it->ci, "%s", json_object_get_string(val));
        } else if (!strcmp(key, "profile") || !strcmp(key, "placement") || !strcmp(key, "ci")) {
            return bad(e, "%s: bad value for \"%s\"", where, key);
        } else {
            return bad(e, "%s: unknown key \"%s\" (known: profile, placement, ci)", where, key);
        }
    }
    if (!has_profile)
        return bad(e, "%s: an instance object needs \"profile\"", where);
    g->n++;
    return 0;
}

int vgpu_mig_layout_parse(const char *text, struct vgpu_mig_layout *out, struct vgpu_err *e)
{
    memset(out, 0, sizeof *out);
    /* One JSON document and nothing after it but white space: json_tokener_parse stops at the
     * end of the first value, so a valid layout followed by garbage, or by a second document,
     * would be applied as if the rest were not there. */
    struct json_tokener *tok = json_tokener_new();
    if (!tok) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory");
        return -1;
    }
    size_t tlen = strlen(text);
    struct json_object *doc = json_tokener_parse_ex(tok, text, -1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!doc || jerr != json_tokener_success) {
        if (doc)
            json_object_put(doc);
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the layout is not valid JSON: %s",
                     json_tokener_error_desc(jerr == json_tokener_success ? json_tokener_error_parse_eof : jerr));
        return -1;
    }
    for (size_t i = end; i < tlen; i++)
        if (!strchr(" \t\r\n", text[i])) {
            size_t line = 1;
            for (size_t k = 0; k < i; k++)
                line += text[k] == '\n';
            int shown = (int)strcspn(text + i, "\r\n");
            vgpu_err_set(e, VGPU_EXIT_USAGE, "the layout has more after its JSON document (line %zu: '%.*s'); a "
                         "layout file is one document", line, shown < 30 ? shown : 30, text + i);
            json_object_put(doc);
            return -1;
        }
    char dup[256];
    unsigned dup_line;
    if (vgpu_json_duplicate_key(text, dup, sizeof dup, &dup_line)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "the layout has the key \"%s\" twice in one object (line %u); JSON keeps "
                     "only the last, so say it once", dup, dup_line);
        json_object_put(doc);
        return -1;
    }
    int rc = -1;
    struct json_object *gpus = NULL, *ok = NULL, *error = NULL;
    if (!json_object_is_type(doc, json_type_object)) {
        bad(e, "the layout must be a JSON object with \"gpus\"");
        goto out;
    }
    json_object_object_foreach(doc, key, val) {
        if (!strcmp(key, "schema")) {
            if (!json_object_is_type(val, json_type_int) || json_object_get_int(val) != 1) {
                bad(e, "unsupported layout schema (this vgpu reads schema 1)");
                goto out;
            }
        } else if (!strcmp(key, "gpus")) {
            gpus = val;
        } else if (!strcmp(key, "ok") && json_object_is_type(val, json_type_boolean)) {
            ok = val;     /* written by export, as every vgpu mig document has it */
        } else if (!strcmp(key, "error") && (!val || json_object_is_type(val, json_type_string))) {
            error = val;
        } else if (!strcmp(key, "ok") || !strcmp(key, "error")) {
            bad(e, "bad value for \"%s\" in the layout", key);
            goto out;
        } else {
            bad(e, "unknown key \"%s\" in the layout (known: schema, gpus)", key);
            goto out;
        }
    }
    if (ok && !json_object_get_boolean(ok)) {
        /* A failed export may list only some GPUs: never apply it. */
        bad(e, "this is the output of a failed 'vgpu mig export' (\"ok\": false): %.300s",
            error ? json_object_get_string(error) : "no error given");
        goto out;
    }
    if (!gpus || !json_object_is_type(gpus, json_type_array)) {
        bad(e, "the layout needs \"gpus\": a list of {\"gpu\", \"mig\", \"instances\"}");
        goto out;
    }
    size_t ng = json_object_array_length(gpus);
    if (ng == 0) {
        bad(e, "the layout's \"gpus\" is empty: there is nothing to apply (vgpu mig export writes a layout)");
        goto out;
    }
    if (ng > VGPU_MIG_LAYOUT_MAX) {
        bad(e, "the layout has too many entries");
        goto out;
    }
    for (size_t i = 0; i < ng; i++) {
        struct json_object *o = json_object_array_get_idx(gpus, i);
        struct vgpu_mig_layout_gpu *g = &out->gpu[out->n];
        char where[64];
        snprintf(where, sizeof where, "gpus[%zu]", i);
        if (!json_object_is_type(o, json_type_object)) {
            bad(e, "%s: must be an object", where);
            goto out;
        }
        bool has_gpu = false, has_mig = false;
        struct json_object *inst = NULL;
        json_object_object_foreach(o, k, v) {
            if (!strcmp(k, "gpu")) {
                if (json_object_is_type(v, json_type_int))
                    snprintf(g->sel, sizeof g->sel, "%d", json_object_get_int(v));
                else if (json_object_is_type(v, json_type_string) && strlen(json_object_get_string(v)) < sizeof g->sel)
                    snprintf(g->sel, sizeof g->sel, "%s", json_object_get_string(v));
                else {
                    bad(e, "%s: \"gpu\" is a selector: an index, a UUID or \"all\"", where);
                    goto out;
                }
                has_gpu = true;
            } else if (!strcmp(k, "mig")) {
                if (!json_object_is_type(v, json_type_boolean)) {
                    bad(e, "%s: \"mig\" is true or false", where);
                    goto out;
                }
                g->mig = json_object_get_boolean(v);
                has_mig = true;
            } else if (!strcmp(k, "instances")) {
                inst = v;
            } else if (!strcmp(k, "uuid") || !strcmp(k, "name")) {
                /* informative, written by export */
            } else {
                bad(e, "%s: unknown key \"%s\" (known: gpu, mig, instances)", where, k);
                goto out;
            }
        }
        if (!has_gpu || !has_mig) {
            bad(e, "%s: needs \"gpu\" and \"mig\"", where);
            goto out;
        }
        if (inst && !json_object_is_type(inst, json_type_array)) {
            bad(e, "%s: \"instances\" is a list", where);
            goto out;
        }
        size_t ni = inst ? json_object_array_length(inst) : 0;
        if (ni && !g->mig) {
            bad(e, "%s: instances are given but \"mig\" is false", where);
            goto out;
        }
        for (size_t j = 0; j < ni; j++) {
            char w2[96];
            snprintf(w2, sizeof w2, "%s.instances[%zu]", where, j);
            if (parse_instance(json_object_array_get_idx(inst, j), g, w2, e) < 0)
                goto out;
        }
        out->n++;
    }
    rc = 0;
out:
    json_object_put(doc);
    return rc;
}

/* "Nc" or "Nc.REST": N (0 when ci is not of that form) and REST ("" without it). */
static unsigned ci_slices(const char *ci, const char **rest)
{
    size_t d = strspn(ci, "0123456789");
    *rest = "";
    if (!d || d > 2 || (ci[d] != 'c' && ci[d] != 'C') || (ci[d + 1] && ci[d + 1] != '.'))
        return 0;
    if (ci[d + 1] == '.')
        *rest = ci + d + 2;
    unsigned n = 0;
    for (size_t i = 0; i < d; i++)
        n = n * 10 + (unsigned)(ci[i] - '0');
    return n ? n : ~0u;  /* "0c" fits nothing */
}

static void starts_text(const struct vgpu_mig_profile *p, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (unsigned q = 0; q < p->nplace && used + 1 < len; q++) {
        int k = snprintf(buf + used, len - used, "%s%u", q ? "," : "", p->place[q].start);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

int vgpu_mig_layout_check(const struct vgpu_mig_gpu *g, const struct vgpu_mig_layout_gpu *want, struct vgpu_err *e)
{
    if (!want->mig || !want->n)
        return 0;
    const struct vgpu_mig_profile *prof[VGPU_MIG_MAX_ITEMS];
    unsigned asked[VGPU_MIG_MAX_PROFILES] = { 0 };
    bool placements_known = true;
    for (unsigned j = 0; j < want->n && j < VGPU_MIG_MAX_ITEMS; j++) {
        const struct vgpu_mig_item *it = &want->items[j];
        const struct vgpu_mig_profile *p = prof[j] = vgpu_mig_find_profile(g, it->profile);
        if (!p) {
            char msg[900];
            vgpu_mig_unknown_profile(g, it->profile, false, msg, sizeof msg);
            return bad(e, "%s", msg);
        }
        asked[p - g->prof]++;
        placements_known &= p->nplace > 0;
        if (it->start >= 0 && p->nplace) {
            bool valid = false;
            for (unsigned q = 0; q < p->nplace; q++)
                valid |= (int)p->place[q].start == it->start;
            if (!valid) {
                char starts[128];
                starts_text(p, starts, sizeof starts);
                return bad(e, "%s cannot start at slice %d; possible starts: %s", p->name, it->start, starts);
            }
        }
        const char *rest;
        unsigned cs = ci_slices(it->ci, &rest);
        if (cs && (cs > p->slices || (*rest && strcasecmp(rest, p->name))))
            return bad(e, "compute-instance profile '%.60s' does not fit a %s GPU instance (%u compute slice%s)",
                       it->ci, p->name, p->slices, p->slices == 1 ? "" : "s");
    }
    for (unsigned i = 0; i < g->nprof; i++)
        if (g->prof[i].instances && asked[i] > g->prof[i].instances)
            return bad(e, "%u instances of %s asked; the GPU holds at most %u", asked[i], g->prof[i].name,
                       g->prof[i].instances);
    if (!placements_known)
        return 0;  /* an old driver without placements: the driver will place them */
    struct vgpu_mig_item copy[VGPU_MIG_MAX_ITEMS];
    memcpy(copy, want->items, want->n * sizeof *copy);
    if (vgpu_mig_plan(0, copy, prof, want->n) == 0)
        return 0;
    unsigned need = 0, total = 0;
    for (unsigned j = 0; j < want->n; j++)
        need += prof[j]->place[0].size;
    for (unsigned i = 0; i < g->nprof; i++)
        for (unsigned q = 0; q < g->prof[i].nplace; q++)
            if (g->prof[i].place[q].start + g->prof[i].place[q].size > total)
                total = g->prof[i].place[q].start + g->prof[i].place[q].size;
    if (need > total)
        return bad(e, "the instances do not fit on the GPU together: they need %u memory slices, it has %u", need,
                   total);
    return bad(e, "the instances do not fit on the GPU together: no arrangement of their placements exists "
               "(check the fixed placements)");
}
