/* vgpu mig: MIG mode, profiles and instances, like `nvidia-smi mig` plus a declarative layout
 * (apply/export) in the spirit of mig-parted. The NVML work is in lib/core/mig.c. */
static const char usage[] =
    "usage: vgpu mig status   [--gpu SEL] [--json]\n"
    "       vgpu mig profiles [--gpu SEL] [--placements] [--gi ID] [--json]\n"
    "       vgpu mig list     [--gpu SEL] [--json]\n"
    "       vgpu mig enable   [--gpu SEL] [--json]\n"
    "       vgpu mig disable  [--gpu SEL] [--json]\n"
    "       vgpu mig create SPEC [--gpu SEL] [--ci PROFILE | --no-ci] [--json]\n"
    "       vgpu mig destroy ID...|all [--gpu SEL] [--json]\n"
    "       vgpu mig apply FILE [--dry-run] [--json]\n"
    "       vgpu mig export   [--gpu SEL] [--json]\n"
    "\n"
    "Partition GPUs into MIG instances (A100, A30, H100, H200 and newer).\n"
    "\n"
    "  status     MIG mode, current and pending, whether a GPU reset is needed, the instances\n"
    "  profiles   GPU-instance profiles: free/total instances, memory, SMs, copy engines,\n"
    "             decoders, encoders, JPEG, OFA (--placements: the possible placements);\n"
    "             with --gi ID the compute-instance profiles of that GPU instance\n"
    "  list       GPU and compute instances with their MIG UUIDs (usable as 'vgpu run --gpu')\n"
    "  enable, disable\n"
    "             set MIG mode (root); when the change is pending, says what must happen\n"
    "  create     SPEC is a comma list of profile names or IDs, with counts and optional\n"
    "             placements: '3g.40gb,2x1g.10gb', '1g.10gb:4'. Each GPU instance gets a compute\n"
    "             instance covering it, unless --no-ci; --ci PROFILE picks another one.\n"
    "             All or nothing: when one cannot be created, the ones this call created are\n"
    "             destroyed again and the reason is shown.\n"
    "  destroy    GPU instances by ID (their compute instances first), or all; refused while\n"
    "             processes use them (they are named)\n"
    "  apply      make the GPUs match a layout file (JSON, see vgpu-mig(1)); nothing is touched\n"
    "             when they already do, otherwise the plan is printed and carried out\n"
    "  export     the current layout in the format apply reads, always JSON (--json is accepted\n"
    "             and changes nothing); export | apply is a no-op\n"
    "\n"
    "  --gpu SEL       these GPUs: index, UUID or its start, PCI bus id, a MIG UUID (its GPU),\n"
    "                  comma list, or 'all' (default: all; create and destroy need one GPU)\n"
    "  --placements    profiles: show the possible placements ({start,...}:size)\n"
    "  --gi ID         profiles: compute-instance profiles of GPU instance ID\n"
    "  --ci PROFILE    create: compute-instance profile (1c.3g.40gb, 1c, or its ID)\n"
    "  --no-ci         create: GPU instances only\n"
    "  --dry-run       apply: print the plan, change nothing\n"
    "  --json          one JSON document, also on failure: then \"ok\": false and \"error\"\n"
    "  --help          show this help\n"
    "\n"
    "Exit status: 0 done or nothing to do; 1 failed; 2 bad usage, unknown GPU or profile;\n"
    "3 libnvidia-ml.so.1 not found; 4 driver not loaded; 5 no GPU; 6 permission denied (root\n"
    "needed); 7 in use; 8 no such instance; 9 no free placement; 10 mode change pending.\n";

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cmd.h"
#include "common.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/mig.h"
#include "vgpu/nvml.h"

extern const struct vgpu_cmd vgpu_cmd_mig;

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "json", no_argument, NULL, 'j' },
    { "placements", no_argument, NULL, 'p' },
    { "gi", required_argument, NULL, 'i' },
    { "ci", required_argument, NULL, 'c' },
    { "no-ci", no_argument, NULL, 'n' },
    { "dry-run", no_argument, NULL, 'd' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "gi", VGPU_ARG_OTHER, NULL },
    { "ci", VGPU_ARG_PROFILE, NULL },
    { NULL, 0, NULL },
};

static const struct vgpu_verb verbs[] = {
    { "status", "MIG mode (current, pending) and instances", VGPU_ARG_NONE, NULL },
    { "profiles", "GPU- and compute-instance profiles with free counts", VGPU_ARG_NONE, NULL },
    { "list", "GPU and compute instances with their MIG UUIDs", VGPU_ARG_NONE, NULL },
    { "enable", "enable MIG mode (root)", VGPU_ARG_NONE, NULL },
    { "disable", "disable MIG mode (root)", VGPU_ARG_NONE, NULL },
    { "create", "create GPU instances from a SPEC (3g.40gb,2x1g.10gb)", VGPU_ARG_PROFILE, NULL },
    { "destroy", "destroy GPU instances by ID, or all", VGPU_ARG_WORD, "all" },
    { "apply", "make the GPUs match a layout file", VGPU_ARG_FILE, NULL },
    { "export", "write the current layout (for apply)", VGPU_ARG_NONE, NULL },
    { NULL, NULL, 0, NULL },
};

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
 * message of the failure that decides the exit status (the first one; a pending mode change
 * gives way to a real failure, as in the exit status), which also went to stderr. Every
 * failure in this file goes through fail(), report(), usage_err() or note_pending(), which
 * remember it here. */
static struct {
    int code;
    char error[1024];
    bool emitted;                 /* a document is out */
} failure;

static void remember(int code, const char *msg)
{
    if (failure.error[0] && !(failure.code == VGPU_EXIT_PENDING && code != VGPU_EXIT_PENDING))
        return;
    failure.code = code;
    snprintf(failure.error, sizeof failure.error, "%s", msg);
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    remember(code, msg);
    return vgpu_fail(code, "%s", msg);
}

static int report(const struct vgpu_err *e)
{
    remember(e->code, e->msg);
    return vgpu_err_report(e);
}

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(VGPU_EXIT_USAGE, "%s (see 'vgpu %s --help')", msg, vgpu_cmd_mig.name);
}

/* A mode change left pending: a warning, and exit status 10. */
static void note_pending(const char *msg)
{
    remember(VGPU_EXIT_PENDING, msg);
    vgpu_warn("%s", msg);
}

static int out_err(void)
{
    return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
}

/* Emits doc with "ok" and "error" (null on success) after "schema", as every vgpu mig
 * document has them. Returns rc, or the output error when rc is 0. */
static int finish(struct json_object *doc, int rc)
{
    struct json_object *out = vgpu_json_doc();
    char fallback[64];
    snprintf(fallback, sizeof fallback, "failed (exit status %d)", rc);
    vgpu_json_bool(out, "ok", rc == 0);
    vgpu_json_str(out, "error", rc ? (failure.error[0] ? failure.error : fallback) : NULL);
    json_object_object_foreach(doc, key, val) {
        if (strcmp(key, "schema"))
            json_object_object_add(out, key, json_object_get(val));
    }
    json_object_put(doc);
    failure.emitted = true;
    int r = vgpu_json_emit(out, true) < 0 ? out_err() : 0;
    return rc ? rc : r;
}

/* The physical GPU position of list entry pos (a MIG device maps to its parent). */
static int parent_pos(const struct vgpu_gpu_list *list, unsigned pos)
{
    if (!list->gpu[pos].is_mig)
        return (int)pos;
    for (unsigned i = 0; i < list->count; i++)
        if (!list->gpu[i].is_mig && list->gpu[i].index == list->gpu[pos].index)
            return (int)i;
    return -1;
}

static int select_physical(struct ctx *c, const char *sel, struct vgpu_err *e)
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
        int p = parent_pos(c->list, s.pos[k]);
        bool dup = p < 0;
        for (unsigned j = 0; !dup && j < c->n; j++)
            dup = c->pos[j] == (unsigned)p;
        if (!dup)
            c->pos[c->n++] = (unsigned)p;
    }
    return 0;
}

static const char *onoff(unsigned m)
{
    return m ? "enabled" : "disabled";
}

static double gib(uint64_t mb)
{
    return (double)mb / 1024.0;
}

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

static void gpu_head_json(struct json_object *o, const struct vgpu_mig_gpu *g)
{
    vgpu_json_u64(o, "index", g->index);
    vgpu_json_str(o, "name", g->name);
    vgpu_json_str(o, "uuid", g->uuid);
    vgpu_json_bool(o, "mig_supported", g->supported);
}

/* The mode keys that status and list share. */
static void mode_json(struct json_object *o, const struct vgpu_mig_gpu *g)
{
    vgpu_json_str(o, "mig_mode_current", g->supported ? onoff(g->current) : NULL);
    vgpu_json_str(o, "mig_mode_pending", g->supported ? onoff(g->pending) : NULL);
    vgpu_json_bool(o, "reset_required", g->supported && g->current != g->pending);
}

static int do_status(struct ctx *c)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    if (!c->o->json)
        printf("%-4s %-26s %-9s %-9s %-6s %s\n", "GPU", "NAME", "MIG", "PENDING", "RESET", "INSTANCES");
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        const struct vgpu_gpu *gp = &c->list->gpu[c->pos[k]];
        if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0) {
            rc = report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        bool reset = g->supported && g->current != g->pending;
        unsigned nci = 0;
        for (unsigned i = 0; i < g->ngi; i++)
            nci += g->gi[i].nci;
        if (c->o->json) {
            struct json_object *o = json_object_new_object();
            gpu_head_json(o, g);
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
        printf("%-4u %-26.26s %-9s %-9s %-6s %s\n", g->index, g->name, g->supported ? onoff(g->current) : "N/A",
               g->supported ? onoff(g->pending) : "N/A", reset ? "yes" : "no", inst);
        for (unsigned i = 0; i < g->ngi; i++) {
            const struct vgpu_mig_gi *gi = &g->gi[i];
            printf("     GPU instance %u: %s at %u:%u, %u compute instance%s\n", gi->id, gi->profile,
                   gi->place.start, gi->place.size, gi->nci, gi->nci == 1 ? "" : "s");
        }
        if (reset)
            printf("     MIG mode change to %s is pending: stop the processes using GPU %u and reset it "
                   "(nvidia-smi -r -i %u), or reboot\n", onoff(g->pending), g->index, g->index);
    }
    if (doc) {
        json_object_object_add(doc, "gpus", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    return fflush(stdout) == EOF ? out_err() : rc;
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
    const struct vgpu_mig_gi *gi = NULL;
    for (unsigned i = 0; *c->o->gi && !*end && i < g->ngi; i++)
        if (g->gi[i].id == id)
            gi = &g->gi[i];
    if (!gi)
        return fail(VGPU_EXIT_NOT_FOUND, "no GPU instance %s on GPU %u (see 'vgpu mig list --gpu %u')", c->o->gi,
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

static int do_profiles(struct ctx *c)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    unsigned shown = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[k]], c->mg, &e) < 0) {
            rc = report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        if (!g->supported) {
            if (c->o->gpu && strcmp(c->o->gpu, "all"))
                rc = fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", g->index, g->name);
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
            gpu_head_json(o, g);
            vgpu_json_str(o, "mig_mode_current", onoff(g->current));
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
        printf("GPU %u: %s (MIG %s)\n", g->index, g->name, onoff(g->current));
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
            printf("  %-3u %-14s %-11s %9.2f %-4s %4u %4u %4u %4u %4u %4u%s%s\n", p->id, p->name, ft, gib(p->mem_mb),
                   p->p2p ? "Yes" : "No", p->sm, p->ce, p->dec, p->enc, p->jpeg, p->ofa, pl[0] ? "  " : "", pl);
        }
    }
    if (!shown && !rc && !doc)
        printf("No MIG-capable GPU found.\n");
    if (doc) {
        json_object_object_add(doc, c->o->gi ? "gpu_instances" : "gpus", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return out_err();
    return rc;
}

/* ---- list ------------------------------------------------------------------------------------ */

static int do_list(struct ctx *c)
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
            rc = report(&e);
            continue;
        }
        const struct vgpu_mig_gpu *g = c->mg;
        if (!g->supported)
            continue;
        if (doc) {
            struct json_object *o = json_object_new_object();
            gpu_head_json(o, g);
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
        return finish(doc, rc);
    }
    json_object_put(arr);
    if (!rows)
        printf("No MIG instances.\n");
    if (fflush(stdout) == EOF)
        return out_err();
    return rc;
}

/* ---- enable / disable -------------------------------------------------------------------------- */

static void pids_text(const pid_t *pids, unsigned n, char *buf, size_t len)
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

/* Sets the mode of c->mg. Returns an exit code; *msg says what happened. */
static int set_mode(struct ctx *c, unsigned mode, char *msg, size_t len, bool *pending)
{
    struct vgpu_mig_gpu *g = c->mg;
    *pending = false;
    if (!g->supported) {
        snprintf(msg, len, "GPU %u (%s): MIG not supported", g->index, g->name);
        return VGPU_EXIT_FAIL;
    }
    if (g->current == mode && g->pending == mode) {
        snprintf(msg, len, "MIG mode is already %s on GPU %u", onoff(mode), g->index);
        return 0;
    }
    if (!mode && g->ngi) {
        snprintf(msg, len, "GPU %u has %u GPU instance%s; destroy them first ('vgpu mig destroy all --gpu %u')",
                 g->index, g->ngi, g->ngi > 1 ? "s" : "", g->index);
        return VGPU_EXIT_BUSY;
    }
    if (!c->nv->nvmlDeviceSetMigMode) {
        snprintf(msg, len, "this driver's NVML cannot set MIG mode");
        return VGPU_EXIT_FAIL;
    }
    nvmlReturn_t act = NVML_SUCCESS;
    nvmlReturn_t rc = c->nv->nvmlDeviceSetMigMode(g->dev, mode, &act);
    if (rc == NVML_ERROR_NO_PERMISSION) {
        snprintf(msg, len, "setting MIG mode on GPU %u requires root (try: sudo vgpu mig %s --gpu %u)", g->index,
                 mode ? "enable" : "disable", g->index);
        return VGPU_EXIT_PERMISSION;
    }
    if (rc != NVML_SUCCESS) {
        snprintf(msg, len, "cannot %s MIG mode on GPU %u: %s", mode ? "enable" : "disable", g->index,
                 vgpu_nvml_strerror(c->nv, rc));
        return vgpu_mig_errcode(rc);
    }
    unsigned cur = mode, pend = mode;
    if (c->nv->nvmlDeviceGetMigMode)
        c->nv->nvmlDeviceGetMigMode(g->dev, &cur, &pend);
    if (cur == mode && act == NVML_SUCCESS) {
        snprintf(msg, len, "%s MIG mode on GPU %u (%s)", mode ? "Enabled" : "Disabled", g->index, g->pci);
        return 0;
    }
    *pending = true;
    if (act == NVML_ERROR_RESET_REQUIRED) {
        snprintf(msg, len, "MIG mode change to %s is pending on GPU %u (%s): GPU reset is not available here; "
                 "reboot the machine or VM", onoff(mode), g->index, g->pci);
        return VGPU_EXIT_PENDING;
    }
    pid_t pids[32];
    unsigned np = vgpu_mig_gpu_pids(c->nv, g, pids, 32);
    if (np) {
        char pl[256];
        pids_text(pids, np, pl, sizeof pl);
        snprintf(msg, len, "MIG mode change to %s is pending on GPU %u (%s): in use by PID%s %s. Stop %s (and GPU "
                 "services: persistenced clients, DCGM, device plugins), then reset the GPU (nvidia-smi -r -i %u) "
                 "or reboot", onoff(mode), g->index, g->pci, np > 1 ? "s" : "", pl, np > 1 ? "them" : "it", g->index);
    } else {
        snprintf(msg, len, "MIG mode change to %s is pending on GPU %u (%s): reset the GPU (nvidia-smi -r -i %u) "
                 "or reboot to make it effective", onoff(mode), g->index, g->pci, g->index);
    }
    return VGPU_EXIT_PENDING;
}

static int do_mode(struct ctx *c, unsigned mode)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        const struct vgpu_gpu *gp = &c->list->gpu[c->pos[k]];
        if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0) {
            rc = report(&e);
            continue;
        }
        if (!c->mg->supported && (!c->o->gpu || !strcmp(c->o->gpu, "all")) && c->n > 1)
            continue;  /* "all": skip GPUs without MIG, as mig-parted does */
        char msg[700];
        bool pending;
        int r = set_mode(c, mode, msg, sizeof msg, &pending);
        if (doc) {
            struct json_object *o = json_object_new_object();
            gpu_head_json(o, c->mg);
            unsigned cur = c->mg->current, pend = c->mg->pending;
            if (c->mg->supported && c->nv->nvmlDeviceGetMigMode)
                c->nv->nvmlDeviceGetMigMode(c->mg->dev, &cur, &pend);
            vgpu_json_str(o, "mig_mode_current", c->mg->supported ? onoff(cur) : NULL);
            vgpu_json_str(o, "mig_mode_pending", c->mg->supported ? onoff(pend) : NULL);
            vgpu_json_bool(o, "pending", pending);
            vgpu_json_bool(o, "ok", r == 0);
            vgpu_json_str(o, "message", msg);
            json_object_array_add(arr, o);
        }
        if (r == VGPU_EXIT_PENDING)
            note_pending(msg);
        else if (r)
            fail(r, "%s", msg);
        else if (!doc)
            printf("%s\n", msg);
        if (r && (!rc || rc == VGPU_EXIT_PENDING))
            rc = r;
    }
    if (doc) {
        json_object_object_add(doc, "gpus", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return out_err();
    return rc;
}

/* ---- create / destroy ------------------------------------------------------------------------------ */

static int one_gpu(struct ctx *c, const char *verb)
{
    if (c->n == 1)
        return 0;
    return usage_err("%s works on one GPU at a time: choose it with --gpu", verb);
}

static const char *uuid_of(const struct vgpu_mig_gpu *g, unsigned gi_id, unsigned ci_id)
{
    for (unsigned i = 0; i < g->ngi; i++)
        for (unsigned j = 0; g->gi[i].id == gi_id && j < g->gi[i].nci; j++)
            if (g->gi[i].ci[j].id == ci_id && g->gi[i].ci[j].uuid[0])
                return g->gi[i].ci[j].uuid;
    return NULL;
}

static int do_create(struct ctx *c, const char *spec)
{
    int rc = one_gpu(c, "create");
    if (rc)
        return rc;
    struct vgpu_mig_item items[VGPU_MIG_MAX_ITEMS];
    unsigned n;
    struct vgpu_err e;
    if (vgpu_mig_parse_spec(spec, items, VGPU_MIG_MAX_ITEMS, &n, &e) < 0)
        return report(&e);
    for (unsigned i = 0; i < n; i++)
        items[i].ci[0] = 0;
    const struct vgpu_gpu *gp = &c->list->gpu[c->pos[0]];
    if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0)
        return report(&e);
    if (!c->mg->supported)
        return fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", c->mg->index, c->mg->name);
    struct vgpu_mig_ci_req req = { c->o->no_ci, c->o->ci };
    struct vgpu_mig_created made[VGPU_MIG_MAX_ITEMS];
    int got = vgpu_mig_create(c->nv, c->mg, items, n, &req, made, &e);
    if (got < 0)
        return report(&e);
    /* Read again for the MIG UUIDs of the new compute instances (they were created even when
     * this fails: report them, without UUIDs). */
    if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0)
        rc = report(&e);
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    for (int i = 0; i < got; i++) {
        const struct vgpu_mig_created *m = &made[i];
        const char *u = m->has_ci ? uuid_of(c->mg, m->gi_id, m->ci_id) : NULL;
        if (doc) {
            struct json_object *o = json_object_new_object();
            vgpu_json_u64(o, "index", c->mg->index);
            vgpu_json_u64(o, "gpu_instance_id", m->gi_id);
            vgpu_json_str(o, "profile", m->profile);
            vgpu_json_u64(o, "profile_id", m->gi_profile_id);
            vgpu_json_u64(o, "placement_start", m->start);
            vgpu_json_u64(o, "placement_size", m->size);
            if (m->has_ci) {
                vgpu_json_u64(o, "compute_instance_id", m->ci_id);
                vgpu_json_str(o, "compute_instance_profile", m->ci_profile);
            } else {
                vgpu_json_null(o, "compute_instance_id");
                vgpu_json_null(o, "compute_instance_profile");
            }
            vgpu_json_str(o, "uuid", u);
            json_object_array_add(arr, o);
            continue;
        }
        printf("Created GPU instance %u (%s at %u:%u) on GPU %u", m->gi_id, m->profile, m->start, m->size,
               c->mg->index);
        if (m->has_ci)
            printf(", compute instance %u (%s): %s\n", m->ci_id, m->ci_profile, u ? u : "(no MIG UUID)");
        else
            printf(", no compute instance\n");
    }
    if (doc) {
        json_object_object_add(doc, "created", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    return fflush(stdout) == EOF ? out_err() : rc;
}

static int do_destroy(struct ctx *c, char **ids, int nids)
{
    int rc = one_gpu(c, "destroy");
    if (rc)
        return rc;
    if (nids == 0)
        return usage_err("destroy needs GPU instance IDs or 'all'");
    struct vgpu_err e;
    if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[0]], c->mg, &e) < 0)
        return report(&e);
    struct vgpu_mig_gpu *g = c->mg;
    if (!g->supported)
        return fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", g->index, g->name);
    bool pick[VGPU_MIG_MAX_GI] = { false };
    for (int a = 0; a < nids; a++) {
        if (!strcmp(ids[a], "all")) {
            for (unsigned i = 0; i < g->ngi; i++)
                pick[i] = true;
            continue;
        }
        char *end;
        errno = 0;
        unsigned long id = strtoul(ids[a], &end, 10);
        if (!*ids[a] || *end || errno)
            return usage_err("'%s' is not a GPU instance ID (see 'vgpu mig list')", ids[a]);
        bool found = false;
        for (unsigned i = 0; i < g->ngi; i++)
            if (g->gi[i].id == id)
                pick[i] = found = true;
        if (!found)
            return fail(VGPU_EXIT_NOT_FOUND, "no GPU instance %s on GPU %u (see 'vgpu mig list --gpu %u')",
                        ids[a], g->index, g->index);
    }
    /* Refuse before touching anything when one of them is in use. */
    for (unsigned i = 0; i < g->ngi; i++) {
        if (!pick[i])
            continue;
        pid_t pids[32];
        unsigned np = vgpu_mig_gi_pids(c->nv, g, g->gi[i].id, pids, 32);
        if (np) {
            char pl[256];
            pids_text(pids, np, pl, sizeof pl);
            return fail(VGPU_EXIT_BUSY, "GPU instance %u (%s) on GPU %u is in use by PID%s %s; stop %s first; "
                        "nothing was destroyed", g->gi[i].id, g->gi[i].profile, g->index, np > 1 ? "s" : "", pl,
                        np > 1 ? "them" : "it");
        }
    }
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    unsigned count = 0;
    for (unsigned i = 0; i < g->ngi; i++) {
        if (!pick[i])
            continue;
        if (vgpu_mig_destroy_gi(c->nv, g, &g->gi[i], &e) < 0) {
            rc = report(&e);
            break;
        }
        count++;
        if (doc) {
            struct json_object *o = json_object_new_object();
            vgpu_json_u64(o, "index", g->index);
            vgpu_json_u64(o, "gpu_instance_id", g->gi[i].id);
            vgpu_json_str(o, "profile", g->gi[i].profile);
            json_object_array_add(arr, o);
        } else {
            printf("Destroyed GPU instance %u (%s", g->gi[i].id, g->gi[i].profile);
            if (g->gi[i].nci)
                printf(" and %u compute instance%s", g->gi[i].nci, g->gi[i].nci > 1 ? "s" : "");
            printf(") on GPU %u\n", g->index);
        }
    }
    if (!count && !rc && !doc)
        printf("No GPU instances on GPU %u.\n", g->index);
    if (doc) {
        json_object_object_add(doc, "destroyed", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return out_err();
    return rc;
}

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

static int do_export(struct ctx *c)
{
    struct json_object *doc = vgpu_json_doc(), *arr = json_object_new_array();
    int rc = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[k]], c->mg, &e) < 0) {
            rc = report(&e);
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
    return finish(doc, rc);
}

static char *read_file(const char *path, struct vgpu_err *e)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        vgpu_err_set(e, errno == ENOENT ? VGPU_EXIT_USAGE : VGPU_EXIT_FAIL, "cannot read %s: %s", path,
                     strerror(errno));
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
            pids_text(pids, np, pl, sizeof pl);
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
                     "(nvidia-smi -r -i %u) or reboot, then apply again", onoff(mode), g->index, g->index);
            step(steps, "wait for the pending MIG mode (%s) to take effect", onoff(mode));
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
            return set_mode(c, 0, msg, len, &pend);
        }
        step(steps, "enable MIG mode");
        if (dry) {
            /* Plan against the GPU as it will be: MIG on, and no instances when it was off. */
            if (!g->current)
                g->ngi = 0;
            g->current = g->pending = 1;
        } else {
            int r = set_mode(c, 1, msg, len, &pend);
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
    return fail(e->code, "%s: gpus[%u]%s: %.500s; nothing was changed", path, entry, gpu, e->msg);
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
        if (select_physical(c, lay->gpu[l].sel, &e) < 0)
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

static int do_apply(struct ctx *c, const char *path)
{
    struct vgpu_err e;
    memset(&e, 0, sizeof e);
    char *text = read_file(path, &e);
    if (!text)
        return report(&e);
    struct vgpu_mig_layout *lay = calloc(1, sizeof *lay);
    if (!lay) {
        free(text);
        return fail(VGPU_EXIT_FAIL, "out of memory");
    }
    if (vgpu_mig_layout_parse(text, lay, &e) < 0) {
        free(text);
        free(lay);
        return fail(e.code, "%s: %.400s", path, e.msg);
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
                int r = report(&e);
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
                    note_pending(msg);
                else
                    fail(r, "%s", msg);
                if (!rc || rc == VGPU_EXIT_PENDING)
                    rc = r;
            }
        }
    }
    free(lay);
    if (doc) {
        vgpu_json_bool(doc, "changed", any_change);
        json_object_object_add(doc, "gpus", arr);
        return finish(doc, rc);
    }
    json_object_put(arr);
    if (!rc && any_change && !c->o->dry_run)
        printf("MIG layout applied.\n");
    if (fflush(stdout) == EOF)
        return out_err();
    return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

/* The document of a verb that failed before it could print its own: its keys, empty. */
static struct json_object *failed_doc(const char *verb, const struct opts *o)
{
    struct json_object *doc = vgpu_json_doc();
    if (!verb)
        return doc;
    if (!strcmp(verb, "create"))
        json_object_object_add(doc, "created", json_object_new_array());
    else if (!strcmp(verb, "destroy"))
        json_object_object_add(doc, "destroyed", json_object_new_array());
    else if (!strcmp(verb, "profiles") && o->gi)
        json_object_object_add(doc, "gpu_instances", json_object_new_array());
    else {
        if (!strcmp(verb, "apply"))
            vgpu_json_bool(doc, "changed", false);
        json_object_object_add(doc, "gpus", json_object_new_array());
    }
    return doc;
}

static const char *const verb_names[] = { "status", "profiles", "list", "enable", "disable", "create",
                                          "destroy", "apply", "export", NULL };

/* Everything after the options; *verbp: the verb once known. */
static int run_verb(const struct opts *op, int argc, char **argv, const char **verbp)
{
    struct opts o = *op;
    const char *const *names = verb_names;
    if (optind >= argc)
        return usage_err("missing verb: status, profiles, list, enable, disable, create, destroy, apply or "
                         "export");
    const char *verb = argv[optind++];
    int nargs = argc - optind;
    char **args = argv + optind;
    bool known = false;
    for (int i = 0; names[i]; i++)
        known |= !strcmp(names[i], verb);
    if (!known) {
        const char *best = vgpu_closest(verb, names, sizeof verb_names / sizeof *verb_names - 1);
        if (best)
            return usage_err("unknown verb '%s'; did you mean '%s'?", verb, best);
        return usage_err("unknown verb '%s'", verb);
    }
    *verbp = verb;
    bool takes_one = !strcmp(verb, "create") || !strcmp(verb, "apply");
    if (!strcmp(verb, "destroy")) {
        if (!nargs)
            return usage_err("destroy needs GPU instance IDs or 'all'");
    } else if (takes_one) {
        if (nargs < 1)
            return usage_err("%s needs %s", verb, !strcmp(verb, "create") ? "a SPEC such as 3g.40gb,2x1g.10gb"
                             : "a layout FILE (see 'vgpu mig export')");
        if (nargs > 1)
            return usage_err("unexpected argument '%s'", args[1]);
    } else if (nargs) {
        return usage_err("unexpected argument '%s'", args[0]);
    }
    if ((o.ci || o.no_ci) && strcmp(verb, "create"))
        return usage_err("--ci and --no-ci go with create");
    if (o.ci && o.no_ci)
        return usage_err("--ci and --no-ci exclude each other");
    if ((o.placements || o.gi) && strcmp(verb, "profiles"))
        return usage_err("--placements and --gi go with profiles");
    if (o.dry_run && strcmp(verb, "apply"))
        return usage_err("--dry-run goes with apply");
    if (o.gpu && !strcmp(verb, "apply"))
        return usage_err("apply takes the GPUs from the layout, not from --gpu");

    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return report(&e);
    struct ctx cx = { .nv = nv, .o = &o };
    cx.list = calloc(1, sizeof *cx.list);
    cx.mg = calloc(1, sizeof *cx.mg);
    int rc;
    if (!cx.list || !cx.mg)
        rc = fail(VGPU_EXIT_FAIL, "out of memory");
    else if (vgpu_gpus_enumerate(nv, cx.list, &e) < 0)
        rc = report(&e);
    else if (select_physical(&cx, o.gpu, &e) < 0)
        rc = report(&e);
    else if (!strcmp(verb, "status"))
        rc = do_status(&cx);
    else if (!strcmp(verb, "profiles"))
        rc = do_profiles(&cx);
    else if (!strcmp(verb, "list"))
        rc = do_list(&cx);
    else if (!strcmp(verb, "enable"))
        rc = do_mode(&cx, 1);
    else if (!strcmp(verb, "disable"))
        rc = do_mode(&cx, 0);
    else if (!strcmp(verb, "create"))
        rc = do_create(&cx, args[0]);
    else if (!strcmp(verb, "destroy"))
        rc = do_destroy(&cx, args, nargs);
    else if (!strcmp(verb, "apply"))
        rc = do_apply(&cx, args[0]);
    else
        rc = do_export(&cx);
    free(cx.list);
    free(cx.mg);
    vgpu_nvml_close(nv);
    return rc;
}

static int cmd_mig(int argc, char **argv)
{
    struct opts o = { 0 };
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_mig, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': o.gpu = optarg; break;
        case 'j': o.json = true; break;
        case 'p': o.placements = true; break;
        case 'i': o.gi = optarg; break;
        case 'c': o.ci = optarg; break;
        case 'n': o.no_ci = true; break;
        case 'd': o.dry_run = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;  /* the command line cannot be read: stderr only */
        }
    }
    const char *verb = NULL;
    int rc = run_verb(&o, argc, argv, &verb);
    if (o.json && rc && !failure.emitted)
        rc = finish(failed_doc(verb, &o), rc);
    return rc;
}

const struct vgpu_cmd vgpu_cmd_mig = {
    .name = "mig",
    .fn = cmd_mig,
    .summary = "MIG: mode, profiles, instances (create, destroy, list), layouts (apply, export)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
