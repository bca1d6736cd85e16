/* vgpu mig status, profiles, list: the GPUs' MIG state. */
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

/* ---- status ------------------------------------------------------------------------------- */

static struct json_object *gi_json(const struct vgpu_mig_gi *gi)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_u64(o, "gpu_instance_id", gi->id);
    vgpu_json_str(o, "profile", gi->profile);
    vgpu_json_u64(o, "profile_id", gi->profile_id);
    vgpu_json_u64(o, "placement_start", gi->place.start);
    vgpu_json_u64(o, "placement_size", gi->place.size);
    vgpu_json_u64(o, "mem_total_bytes", gi->mem_mb * 1024 * 1024);
    struct json_object *cis = json_object_new_array();
    for (unsigned j = 0; j < gi->nci; j++) {
        const struct vgpu_mig_ci *ci = &gi->ci[j];
        struct json_object *c = json_object_new_object();
        vgpu_json_u64(c, "compute_instance_id", ci->id);
        vgpu_json_str(c, "profile", ci->profile);
        vgpu_json_u64(c, "profile_id", ci->profile_id);
        vgpu_json_u64(c, "placement_start", ci->place.start);
        vgpu_json_u64(c, "placement_size", ci->place.size);
        vgpu_json_str(c, "uuid", ci->uuid[0] ? ci->uuid : NULL);
        json_object_array_add(cis, c);
    }
    json_object_object_add(o, "compute_instances", cis);
    return o;
}

void mig_gpu_head_json(struct json_object *o, const struct vgpu_mig_gpu *g)
{
    vgpu_json_u64(o, "index", g->index);
    vgpu_json_str(o, "name", g->name);
    vgpu_json_str(o, "uuid", g->uuid);
    vgpu_json_bool(o, "mig_supported", g->supported);
}

/* The mode keys that status and list share. */
static void mode_json(struct json_object *o, const struct vgpu_mig_gpu *g)
{
    vgpu_json_str(o, "mig_mode_current", g->supported ? mig_onoff(g->current) : NULL);
    vgpu_json_str(o, "mig_mode_pending", g->supported ? mig_onoff(g->pending) : NULL);
    vgpu_json_bool(o, "reset_required", g->supported && g->current != g->pending);
}

int mig_status(struct ctx *c)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    if (!c->o->json)
        printf("%-4s %-26s %-9s %-9s %-6s %s\n", "GPU", "NAME", "MIG", "PENDING", "RESET", "INSTANCES");
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        const struct vgpu_gpu *gp = &c->list->gpu[c->pos[k]];
        char why[128];
        if (vgpu_gpu_trouble(gp, why, sizeof why)) {
            /* Its row says so, and so do stderr and the exit status (vgpu(1): 12). */
            if (c->o->json) {
                struct json_object *o = json_object_new_object();
                vgpu_json_u64(o, "index", gp->index);
                vgpu_json_str(o, "name", NULL);
                vgpu_json_bool(o, "lost", true);
                json_object_array_add(arr, o);
            } else {
                printf("%-4u GPU %s\n", gp->index, why);
            }
            rc = mig_gpu_lost(gp);
            continue;
        }
        if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0) {
            rc = mig_report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        bool reset = g->supported && g->current != g->pending;
        unsigned nci = 0;
        for (unsigned i = 0; i < g->ngi; i++)
            nci += g->gi[i].nci;
        if (c->o->json) {
            struct json_object *o = json_object_new_object();
            mig_gpu_head_json(o, g);
            vgpu_json_bool(o, "lost", false);
            mode_json(o, g);
            struct json_object *gis = json_object_new_array();
            for (unsigned i = 0; i < g->ngi; i++)
                json_object_array_add(gis, gi_json(&g->gi[i]));
            json_object_object_add(o, "gpu_instances", gis);
            json_object_array_add(arr, o);
            continue;
        }
        char inst[64];
        if (!g->supported)
            snprintf(inst, sizeof inst, "-");
        else
            snprintf(inst, sizeof inst, "%u GPU, %u compute", g->ngi, nci);
        printf("%-4u %-26.26s %-9s %-9s %-6s %s\n", g->index, g->name, g->supported ? mig_onoff(g->current) : "N/A",
               g->supported ? mig_onoff(g->pending) : "N/A", reset ? "yes" : "no", inst);
        for (unsigned i = 0; i < g->ngi; i++) {
            const struct vgpu_mig_gi *gi = &g->gi[i];
            printf("     GPU instance %u: %s at %u:%u, %u compute instance%s\n", gi->id, gi->profile,
                   gi->place.start, gi->place.size, gi->nci, gi->nci == 1 ? "" : "s");
        }
        if (reset)
            printf("     MIG mode change to %s is pending: stop the processes using GPU %u and reset it "
                   "(nvidia-smi -r -i %u), or reboot\n", mig_onoff(g->pending), g->index, g->index);
    }
    if (doc) {
        json_object_object_add(doc, "gpus", arr);
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    return fflush(stdout) == EOF ? mig_out_err() : rc;
}


/* ---- profiles ------------------------------------------------------------------------------ */

static void placements_text(const struct vgpu_mig_profile *p, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    used += (size_t)snprintf(buf, len, "{");
    for (unsigned q = 0; q < p->nplace && used + 1 < len; q++)
        used += (size_t)snprintf(buf + used, len - used, "%s%u", q ? "," : "", p->place[q].start);
    if (used + 1 < len)
        snprintf(buf + used, len - used, "}:%u", p->nplace ? p->place[0].size : 0);
}

static int do_ci_profiles(struct ctx *c, struct json_object *arr)
{
    const struct vgpu_mig_gpu *g = c->mg;
    char *end;
    unsigned long id = strtoul(c->o->gi, &end, 10);
    /* Not a number is a bad argument (2), as for destroy; a number that is no instance is 8. */
    if (!*c->o->gi || *end || c->o->gi[0] < '0' || c->o->gi[0] > '9')
        return mig_usage_err("--gi: '%s' is not a GPU instance ID (a number: see 'vgpu mig list')", c->o->gi);
    const struct vgpu_mig_gi *gi = NULL;
    for (unsigned i = 0; *c->o->gi && !*end && i < g->ngi; i++)
        if (g->gi[i].id == id)
            gi = &g->gi[i];
    if (!gi)
        return mig_fail(VGPU_EXIT_NOT_FOUND, "no GPU instance %s on GPU %u (see 'vgpu mig list --gpu %u')", c->o->gi,
                    g->index, g->index);
    struct vgpu_mig_ci_profile cps[16];
    unsigned n = vgpu_mig_ci_profiles(c->nv, gi, cps, 16);
    if (arr) {
        struct json_object *o = json_object_new_object();
        vgpu_json_u64(o, "index", g->index);
        vgpu_json_u64(o, "gpu_instance_id", gi->id);
        vgpu_json_str(o, "gpu_instance_profile", gi->profile);
        struct json_object *pa = json_object_new_array();
        for (unsigned i = 0; i < n; i++) {
            struct json_object *p = json_object_new_object();
            vgpu_json_u64(p, "id", cps[i].id);
            vgpu_json_str(p, "name", cps[i].name);
            vgpu_json_bool(p, "default", cps[i].is_default);
            vgpu_json_u64(p, "slices", cps[i].slices);
            vgpu_json_u64_or_null(p, "free", cps[i].free >= 0, (uint64_t)cps[i].free);
            vgpu_json_u64(p, "total", cps[i].instances);
            vgpu_json_u64(p, "sm_count", cps[i].sm);
            vgpu_json_u64(p, "copy_engines", cps[i].ce);
            vgpu_json_u64(p, "decoders", cps[i].dec);
            vgpu_json_u64(p, "encoders", cps[i].enc);
            vgpu_json_u64(p, "jpeg", cps[i].jpeg);
            vgpu_json_u64(p, "ofa", cps[i].ofa);
            json_object_array_add(pa, p);
        }
        json_object_object_add(o, "compute_instance_profiles", pa);
        json_object_array_add(arr, o);
        return 0;
    }
    printf("GPU %u, GPU instance %u (%s): compute-instance profiles (* default)\n", g->index, gi->id, gi->profile);
    printf("  %-3s %-16s %-11s %4s %4s %4s %4s %4s %4s\n", "ID", "NAME", "FREE/TOTAL", "SM", "CE", "DEC", "ENC", "JPG",
           "OFA");
    for (unsigned i = 0; i < n; i++) {
        char ft[24], nm[VGPU_MIG_NAME + 2];
        if (cps[i].free >= 0)
            snprintf(ft, sizeof ft, "%d/%u", cps[i].free, cps[i].instances);
        else
            snprintf(ft, sizeof ft, "-/%u", cps[i].instances);
        snprintf(nm, sizeof nm, "%s%s", cps[i].name, cps[i].is_default ? "*" : "");
        printf("  %-3u %-16s %-11s %4u %4u %4u %4u %4u %4u\n", cps[i].id, nm, ft, cps[i].sm, cps[i].ce, cps[i].dec,
               cps[i].enc, cps[i].jpeg, cps[i].ofa);
    }
    return 0;
}

int mig_profiles(struct ctx *c)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    unsigned shown = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[k]], c->mg, &e) < 0) {
            rc = mig_report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        if (!g->supported) {
            if (c->o->gpu && strcmp(c->o->gpu, "all"))
                rc = mig_fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", g->index, g->name);
            continue;
        }
        shown++;
        if (c->o->gi) {
            int r = do_ci_profiles(c, doc ? arr : NULL);
            if (r)
                rc = r;
            continue;
        }
        if (doc) {
            struct json_object *o = json_object_new_object();
            mig_gpu_head_json(o, g);
            vgpu_json_str(o, "mig_mode_current", mig_onoff(g->current));
            struct json_object *pa = json_object_new_array();
            for (unsigned i = 0; i < g->nprof; i++) {
                const struct vgpu_mig_profile *p = &g->prof[i];
                struct json_object *po = json_object_new_object();
                vgpu_json_u64(po, "id", p->id);
                vgpu_json_str(po, "name", p->name);
                vgpu_json_u64(po, "slices", p->slices);
                vgpu_json_u64_or_null(po, "free", p->free >= 0, (uint64_t)p->free);
                vgpu_json_u64(po, "total", p->instances);
                vgpu_json_u64(po, "mem_total_bytes", p->mem_mb * 1024 * 1024);
                vgpu_json_bool(po, "p2p", p->p2p);
                vgpu_json_u64(po, "sm_count", p->sm);
                vgpu_json_u64(po, "copy_engines", p->ce);
                vgpu_json_u64(po, "decoders", p->dec);
                vgpu_json_u64(po, "encoders", p->enc);
                vgpu_json_u64(po, "jpeg", p->jpeg);
                vgpu_json_u64(po, "ofa", p->ofa);
                struct json_object *pl = json_object_new_array();
                for (unsigned q = 0; q < p->nplace; q++) {
                    struct json_object *x = json_object_new_object();
                    vgpu_json_u64(x, "start", p->place[q].start);
                    vgpu_json_u64(x, "size", p->place[q].size);
                    json_object_array_add(pl, x);
                }
                json_object_object_add(po, "placements", pl);
                json_object_array_add(pa, po);
            }
            json_object_object_add(o, "profiles", pa);
            json_object_array_add(arr, o);
            continue;
        }
        printf("GPU %u: %s (MIG %s)\n", g->index, g->name, mig_onoff(g->current));
        printf("  %-3s %-14s %-11s %9s %-4s %4s %4s %4s %4s %4s %4s%s\n", "ID", "NAME", "FREE/TOTAL", "MEM(GiB)", "P2P",
               "SM", "CE", "DEC", "ENC", "JPG", "OFA", c->o->placements ? "  PLACEMENTS" : "");
        for (unsigned i = 0; i < g->nprof; i++) {
            const struct vgpu_mig_profile *p = &g->prof[i];
            char ft[24], pl[96] = "";
            if (p->free >= 0)
                snprintf(ft, sizeof ft, "%d/%u", p->free, p->instances);
            else
                snprintf(ft, sizeof ft, "-/%u", p->instances);
            if (c->o->placements)
                placements_text(p, pl, sizeof pl);
            printf("  %-3u %-14s %-11s %9.2f %-4s %4u %4u %4u %4u %4u %4u%s%s\n", p->id, p->name, ft, mig_gib(p->mem_mb),
                   p->p2p ? "Yes" : "No", p->sm, p->ce, p->dec, p->enc, p->jpeg, p->ofa, pl[0] ? "  " : "", pl);
        }
    }
    if (!shown && !rc && !doc)
        printf("No MIG-capable GPU found.\n");
    if (doc) {
        json_object_object_add(doc, c->o->gi ? "gpu_instances" : "gpus", arr);
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return mig_out_err();
    return rc;
}


/* ---- list ------------------------------------------------------------------------------------ */

int mig_list(struct ctx *c)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    unsigned rows = 0;
    if (!doc)
        printf("%-4s %-3s %-14s %-9s %-3s %-14s %s\n", "GPU", "GI", "PROFILE", "PLACEMENT", "CI", "CI PROFILE",
               "MIG UUID");
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[k]], c->mg, &e) < 0) {
            rc = mig_report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        if (!g->supported)
            continue;
        if (doc) {
            struct json_object *o = json_object_new_object();
            mig_gpu_head_json(o, g);
            mode_json(o, g);
            struct json_object *gis = json_object_new_array();
            for (unsigned i = 0; i < g->ngi; i++)
                json_object_array_add(gis, gi_json(&g->gi[i]));
            json_object_object_add(o, "gpu_instances", gis);
            json_object_array_add(arr, o);
            continue;
        }
        for (unsigned i = 0; i < g->ngi; i++) {
            const struct vgpu_mig_gi *gi = &g->gi[i];
            char pl[16];
            snprintf(pl, sizeof pl, "%u:%u", gi->place.start, gi->place.size);
            rows++;
            if (!gi->nci)
                printf("%-4u %-3u %-14s %-9s %-3s %-14s %s\n", g->index, gi->id, gi->profile, pl, "-", "-",
                       "(no compute instance)");
            for (unsigned j = 0; j < gi->nci; j++)
                printf("%-4u %-3u %-14s %-9s %-3u %-14s %s\n", g->index, gi->id, gi->profile, pl, gi->ci[j].id,
                       gi->ci[j].profile, gi->ci[j].uuid[0] ? gi->ci[j].uuid : "N/A");
        }
    }
    if (doc) {
        json_object_object_add(doc, "gpus", arr);
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    if (!rows)
        printf("No MIG instances.\n");
    if (fflush(stdout) == EOF)
        return mig_out_err();
    return rc;
}
