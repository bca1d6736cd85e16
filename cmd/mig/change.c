/* vgpu mig enable, disable, create, destroy: changing MIG mode and instances. */
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

/* ---- enable / disable -------------------------------------------------------------------------- */

void mig_pids_text(const pid_t *pids, unsigned n, char *buf, size_t len)
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
int mig_set_mode(struct ctx *c, unsigned mode, char *msg, size_t len, bool *pending)
{
    struct vgpu_mig_gpu *g = c->mg;
    *pending = false;
    if (!g->supported) {
        snprintf(msg, len, "GPU %u (%s): MIG not supported", g->index, g->name);
        return VGPU_EXIT_FAIL;
    }
    if (g->current == mode && g->pending == mode) {
        snprintf(msg, len, "MIG mode is already %s on GPU %u", mig_onoff(mode), g->index);
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
                 "reboot the machine or VM", mig_onoff(mode), g->index, g->pci);
        return VGPU_EXIT_PENDING;
    }
    pid_t pids[32];
    unsigned np = vgpu_mig_gpu_pids(c->nv, g, pids, 32);
    if (np) {
        char pl[256];
        mig_pids_text(pids, np, pl, sizeof pl);
        snprintf(msg, len, "MIG mode change to %s is pending on GPU %u (%s): in use by PID%s %s. Stop %s (and GPU "
                 "services: persistenced clients, DCGM, device plugins), then reset the GPU (nvidia-smi -r -i %u) "
                 "or reboot", mig_onoff(mode), g->index, g->pci, np > 1 ? "s" : "", pl, np > 1 ? "them" : "it", g->index);
    } else {
        snprintf(msg, len, "MIG mode change to %s is pending on GPU %u (%s): reset the GPU (nvidia-smi -r -i %u) "
                 "or reboot to make it effective", mig_onoff(mode), g->index, g->pci, g->index);
    }
    return VGPU_EXIT_PENDING;
}

int mig_mode(struct ctx *c, unsigned mode)
{
    struct json_object *doc = c->o->json ? vgpu_json_doc() : NULL, *arr = json_object_new_array();
    int rc = 0;
    for (unsigned k = 0; k < c->n; k++) {
        struct vgpu_err e;
        const struct vgpu_gpu *gp = &c->list->gpu[c->pos[k]];
        if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0) {
            rc = mig_report(&e);
            continue;
        }
        if (!c->mg->supported && (!c->o->gpu || !strcmp(c->o->gpu, "all")) && c->n > 1)
            continue;  /* "all": skip GPUs without MIG, as mig-parted does */
        char msg[700];
        bool pending;
        int r = mig_set_mode(c, mode, msg, sizeof msg, &pending);
        if (doc) {
            struct json_object *o = json_object_new_object();
            mig_gpu_head_json(o, c->mg);
            unsigned cur = c->mg->current, pend = c->mg->pending;
            if (c->mg->supported && c->nv->nvmlDeviceGetMigMode)
                c->nv->nvmlDeviceGetMigMode(c->mg->dev, &cur, &pend);
            vgpu_json_str(o, "mig_mode_current", c->mg->supported ? mig_onoff(cur) : NULL);
            vgpu_json_str(o, "mig_mode_pending", c->mg->supported ? mig_onoff(pend) : NULL);
            vgpu_json_bool(o, "pending", pending);
            vgpu_json_bool(o, "ok", r == 0);
            vgpu_json_str(o, "message", msg);
            json_object_array_add(arr, o);
        }
        if (r == VGPU_EXIT_PENDING)
            mig_note_pending(msg);
        else if (r)
            mig_fail(r, "%s", msg);
        else if (!doc)
            printf("%s\n", msg);
        if (r && (!rc || rc == VGPU_EXIT_PENDING))
            rc = r;
    }
    if (doc) {
        json_object_object_add(doc, "gpus", arr);
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return mig_out_err();
    return rc;
}


/* ---- create / destroy ------------------------------------------------------------------------------ */

static int one_gpu(struct ctx *c, const char *verb)
{
    if (c->n == 1)
        return 0;
    return mig_usage_err("%s works on one GPU at a time: choose it with --gpu", verb);
}

static const char *uuid_of(const struct vgpu_mig_gpu *g, unsigned gi_id, unsigned ci_id)
{
    for (unsigned i = 0; i < g->ngi; i++)
        for (unsigned j = 0; g->gi[i].id == gi_id && j < g->gi[i].nci; j++)
            if (g->gi[i].ci[j].id == ci_id && g->gi[i].ci[j].uuid[0])
                return g->gi[i].ci[j].uuid;
    return NULL;
}

int mig_create(struct ctx *c, const char *spec)
{
    int rc = one_gpu(c, "create");
    if (rc)
        return rc;
    struct vgpu_mig_item items[VGPU_MIG_MAX_ITEMS];
    unsigned n;
    struct vgpu_err e;
    if (vgpu_mig_parse_spec(spec, items, VGPU_MIG_MAX_ITEMS, &n, &e) < 0)
        return mig_report(&e);
    for (unsigned i = 0; i < n; i++)
        items[i].ci[0] = 0;
    const struct vgpu_gpu *gp = &c->list->gpu[c->pos[0]];
    if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0)
        return mig_report(&e);
    if (!c->mg->supported)
        return mig_fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", c->mg->index, c->mg->name);
    struct vgpu_mig_ci_req req = { c->o->no_ci, c->o->ci };
    struct vgpu_mig_created made[VGPU_MIG_MAX_ITEMS];
    int got = vgpu_mig_create(c->nv, c->mg, items, n, &req, made, &e);
    if (got < 0)
        return mig_report(&e);
    /* Read again for the MIG UUIDs of the new compute instances (they were created even when
     * this fails: report them, without UUIDs). */
    if (vgpu_mig_read(c->nv, gp, c->mg, &e) < 0)
        rc = mig_report(&e);
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
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    return fflush(stdout) == EOF ? mig_out_err() : rc;
}

int mig_destroy(struct ctx *c, char **ids, int nids)
{
    int rc = one_gpu(c, "destroy");
    if (rc)
        return rc;
    if (nids == 0)
        return mig_usage_err("destroy needs GPU instance IDs or 'all'");
    struct vgpu_err e;
    if (vgpu_mig_read(c->nv, &c->list->gpu[c->pos[0]], c->mg, &e) < 0)
        return mig_report(&e);
    struct vgpu_mig_gpu *g = c->mg;
    if (!g->supported)
        return mig_fail(VGPU_EXIT_FAIL, "GPU %u (%s): MIG not supported", g->index, g->name);
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
            return mig_usage_err("'%s' is not a GPU instance ID (see 'vgpu mig list')", ids[a]);
        bool found = false;
        for (unsigned i = 0; i < g->ngi; i++)
            if (g->gi[i].id == id)
                pick[i] = found = true;
        if (!found)
            return mig_fail(VGPU_EXIT_NOT_FOUND, "no GPU instance %s on GPU %u (see 'vgpu mig list --gpu %u')",
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
            mig_pids_text(pids, np, pl, sizeof pl);
            return mig_fail(VGPU_EXIT_BUSY, "GPU instance %u (%s) on GPU %u is in use by PID%s %s; stop %s first; "
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
            rc = mig_report(&e);
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
        return mig_finish(doc, rc);
    }
    json_object_put(arr);
    if (fflush(stdout) == EOF)
        return mig_out_err();
    return rc;
}
