/* The GPUs the daemon schedules: those NVML lists on this machine (physical GPUs and their MIG
 * devices), never a UUID a request makes up (issue 35: 64 made-up UUIDs filled the table, and
 * every later job ran "NOT limited"). MIG devices come and go, so a UUID the list does not have
 * makes the daemon read it again, at most once a second: a flood of unknown UUIDs costs one
 * enumeration a second, and a new MIG device is servable a second after it appears at worst. */
#include "daemon/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/gpu.h"
#include "vgpu/nvml.h"

#define GPUS_LOOK_NS 1000000000ULL

struct arb_gpus {
    struct vgpu_nvml *nv;
    struct vgpu_gpu_list list;
    uint64_t read_at;        /* when the list was last read (0: never) */
    char why[160];           /* why it could not be read, the last time ("" when it was) */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static bool listed(const struct arb_gpus *m, const char *uuid)
{
    for (unsigned i = 0; i < m->list.count; i++)
        if (!strcmp(m->list.gpu[i].uuid, uuid))
            return true;
    return false;
}

static void read_list(struct arb_gpus *m)
{
    struct vgpu_err e = { 0 };
    m->read_at = mono_ns();
    if (!m->nv && !(m->nv = vgpu_nvml_open(&e))) {
        snprintf(m->why, sizeof m->why, "the daemon cannot read this machine's GPUs: %.110s", e.msg);
        m->list.count = 0;
        return;
    }
    if (vgpu_gpus_enumerate(m->nv, &m->list, &e) != 0) {
        snprintf(m->why, sizeof m->why, "the daemon cannot list this machine's GPUs: %.110s", e.msg);
        m->list.count = 0;
        return;
    }
    m->why[0] = 0;
}

bool arb_gpus_known(struct arbiter *a, const char *uuid, struct vgpu_err *e)
{
    if (!a->machine_gpus && !(a->machine_gpus = calloc(1, sizeof *a->machine_gpus))) {
        vgpu_err_set(e, 1, "out of memory");
        return false;
    }
    struct arb_gpus *m = a->machine_gpus;
    if (listed(m, uuid))
        return true;
    if (!m->read_at || mono_ns() - m->read_at >= GPUS_LOOK_NS) {
        read_list(m);
        if (listed(m, uuid))
            return true;
    }
    if (m->why[0])
        vgpu_err_set(e, 1, "%s", m->why);
    else
        vgpu_err_set(e, 1, "%.96s is not a GPU or MIG device of this machine (NVML lists %u)", uuid, m->list.count);
    return false;
}

uint64_t arb_gpus_mem_total(struct arbiter *a, const char *uuid)
{
    struct vgpu_err e = { 0 };
    if (!arb_gpus_known(a, uuid, &e))
        return 0;
    for (unsigned i = 0; i < a->machine_gpus->list.count; i++)
        if (!strcmp(a->machine_gpus->list.gpu[i].uuid, uuid))
            return a->machine_gpus->list.gpu[i].mem_total;
    return 0;
}

/* VGPU_ARB_PL_GPUS: the list, read again unless it was read in the last VGPU_ARB_GPUS_FRESH_MS
 * (20 ms). On the scheduling thread, as the reads for unknown UUIDs are: with the GPUs attached
 * since the daemon's start, a listing is a few NVML queries a GPU (no initialisation, no attach),
 * and the bound is also the rate limit, so a flood of requests costs at most 50 listings a second.
 * A job started right after a GPU was lost or a MIG device made sees the change. */
void arb_gpus_answer(struct arbiter *a, struct vgpu_arb_rep *r, void *out)
{
    struct vgpu_err e = { 0 };
    if (!arb_gpus_known(a, "", &e) && !a->machine_gpus) {
        arb_refuse(a, r, ENOMEM, "the arbiter is out of memory");
        return;
    }
    struct arb_gpus *m = a->machine_gpus;
    if (mono_ns() - m->read_at >= VGPU_ARB_GPUS_FRESH_MS * 1000000ULL)
        read_list(m);
    if (m->why[0] || m->list.count == 0) {
        arb_refuse(a, r, EIO, m->why[0] ? m->why : "the daemon's NVML lists no GPU");
        return;
    }
    struct vgpu_arb_gpu *o = out;
    unsigned n = m->list.count;
    if (n * sizeof *o > VGPU_ARB_MAX_PAYLOAD)
        n = VGPU_ARB_MAX_PAYLOAD / sizeof *o;
    for (unsigned i = 0; i < n; i++) {
        const struct vgpu_gpu *g = &m->list.gpu[i];
        memset(&o[i], 0, sizeof o[i]);
        snprintf(o[i].uuid, sizeof o[i].uuid, "%s", g->uuid);
        snprintf(o[i].name, sizeof o[i].name, "%s", g->name);
        snprintf(o[i].pci_bus_id, sizeof o[i].pci_bus_id, "%s", g->pci_bus_id);
        snprintf(o[i].unreachable, sizeof o[i].unreachable, "%s", g->unreachable);
        o[i].mem_total = g->mem_total;
        o[i].mem_used = g->mem_used;
        o[i].mem_reserved = g->mem_reserved;
        o[i].index = g->index;
        o[i].is_mig = g->is_mig;
        o[i].mig_gi = g->mig_gi;
        o[i].mig_ci = g->mig_ci;
        o[i].has_mig_mode = g->has_mig_mode;
        o[i].mig_current = g->mig_current;
        o[i].mig_pending = g->mig_pending;
        o[i].lost = g->lost;
        o[i].compute_mode = g->compute_mode;
    }
    r->len = (uint32_t)(n * sizeof *o);
    r->v[0] = n;
    r->v[1] = (mono_ns() - m->read_at) / 1000000ULL;
    r->rc = 0;
}

void arb_gpus_start(struct arbiter *a)
{
    struct vgpu_err e = { 0 };
    arb_gpus_known(a, "", &e);   /* reads the list now, not on the first job's time */
    if (a->machine_gpus && a->machine_gpus->why[0])
        fprintf(stderr, "vgpu daemon: %s; it tries again when a job asks for a GPU\n", a->machine_gpus->why);
}

void arb_gpus_free(struct arbiter *a)
{
    if (a->machine_gpus && a->machine_gpus->nv)
        vgpu_nvml_close(a->machine_gpus->nv);
    free(a->machine_gpus);
    a->machine_gpus = NULL;
}
