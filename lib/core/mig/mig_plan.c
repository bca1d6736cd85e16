/* MIG layouts: parsing "1g.10gb,2g.20gb:1", placing the instances on the GPU's slices, and
 * matching a layout against the instances that exist (see vgpu/mig.h). */
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

