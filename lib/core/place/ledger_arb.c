/* The placement ledger kept by the arbiter (ledger.h; the daemon's side is cmd/daemon/place.c):
 * what this process holds there belongs to its connection, and ends with it. */
#include "ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/arbiter.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/placement.h"

#define MAX_GPUS (VGPU_ARB_MAX_PAYLOAD / sizeof(struct vgpu_arb_gpu_bytes))

static void gone(struct vgpu_err *e)
{
    vgpu_err_set(e, VGPU_EXIT_STATE, "placement: the arbiter (vgpu daemon) went away; try again");
}

static unsigned pack(struct vgpu_arb_gpu_bytes *g, const char *const *uuids, const uint64_t *bytes, unsigned n)
{
    n = n < MAX_GPUS ? n : (unsigned)MAX_GPUS;
    for (unsigned i = 0; i < n; i++) {
        memset(g[i].uuid, 0, sizeof g[i].uuid);
        snprintf(g[i].uuid, sizeof g[i].uuid, "%s", uuids[i]);
        g[i].bytes = bytes ? bytes[i] : 0;
    }
    return n;
}

int ledger_arb_look(struct ledger *l, const char *const *uuids, const uint64_t *totals, unsigned n,
                    unsigned long long ticket, uint64_t *out, unsigned *ahead, struct vgpu_err *e)
{
    static struct vgpu_arb_gpu_bytes g[MAX_GPUS], back[MAX_GPUS];
    n = pack(g, uuids, totals, n);
    uint64_t a[4] = { ticket };
    size_t got = 0;
    struct vgpu_arb_rep r;
    /* A daemon that has just started answers "try again" until the running jobs it served before
     * have promised again (cmd/daemon/place.c): what it would show until then is too little. */
    int64_t rc = vgpu_arb_call_patient(VGPU_ARB_PL_LOOK, a, g, n * sizeof *g, back, sizeof back, &got, &r);
    if (rc == -EPIPE) {
        gone(e);
        return -1;
    }
    if (rc < 0 || got != n * sizeof *back) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "placement: the arbiter refused to show what is promised: %s",
                     r.msg[0] ? r.msg : strerror((int)-rc));
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        out[i] = back[i].bytes;
    l->version = r.v[0];
    *ahead = (unsigned)r.v[1];
    return 0;
}

/* What this process promised through the daemon, to promise again to a restarted one. */
static struct vgpu_arb_gpu_bytes held[VGPU_ARB_MAX_GPUS];
static unsigned nheld;
static uint32_t held_gen;   /* the connection that holds it */

int ledger_arb_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n,
                       struct vgpu_err *e)
{
    static struct vgpu_arb_gpu_bytes g[MAX_GPUS];
    n = pack(g, uuids, bytes, n);
    uint64_t a[4] = { l->version };
    struct vgpu_arb_rep r;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_PL_PROMISE, a, g, n * sizeof *g, NULL, 0, NULL, &r);
    if (rc == -EAGAIN)
        return 1;
    if (rc == -EPIPE) {
        gone(e);
        return -1;
    }
    if (rc < 0) {
        vgpu_err_set(e, rc == -EDQUOT ? VGPU_EXIT_NO_CAPACITY : VGPU_EXIT_STATE, "placement: the arbiter refused the "
                     "promise: %s", r.msg[0] ? r.msg : strerror((int)-rc));
        return -1;
    }
    for (unsigned i = 0; i < n && nheld < VGPU_ARB_MAX_GPUS; i++)
        held[nheld++] = g[i];
    held_gen = vgpu_arb_gen();
    return 0;
}

void ledger_arb_keep(void)
{
    if (!nheld)
        return;
    uint32_t g = vgpu_arb_probe();
    if (!g || g == held_gen)
        return;
    uint64_t a[4] = { 0, 1 };
    if (vgpu_arb_call_data(VGPU_ARB_PL_PROMISE, a, held, nheld * sizeof *held, NULL, 0, NULL, NULL) == 0)
        held_gen = g;
}

unsigned long long ledger_arb_take_ticket(uint64_t want, unsigned count)
{
    struct vgpu_arb_rep r;
    uint64_t a[4] = { want, count };
    return vgpu_arb_call_data(VGPU_ARB_PL_TICKET, a, NULL, 0, NULL, 0, NULL, &r) == 0 ? r.v[0] : 0;
}

void ledger_arb_leave_queue(void)
{
    vgpu_arb_call_data(VGPU_ARB_PL_UNQUEUE, NULL, NULL, 0, NULL, 0, NULL, NULL);
}

void ledger_arb_release(void)
{
    nheld = 0;
    vgpu_arb_call_data(VGPU_ARB_PL_RELEASE, NULL, NULL, 0, NULL, 0, NULL, NULL);
}

int ledger_arb_adopt(pid_t from, struct vgpu_err *e)
{
    uint64_t a[4] = { (uint64_t)from };
    struct vgpu_arb_rep r;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_PL_ADOPT, a, NULL, 0, NULL, 0, NULL, &r);
    held_gen = vgpu_arb_gen();   /* what the parent held (copied at fork) is this connection's now */
    if (rc < 0) {
        if (rc == -EPIPE)
            gone(e);
        else
            vgpu_err_set(e, VGPU_EXIT_STATE, "placement: the arbiter refused to hand over the job's promise: %s",
                         r.msg[0] ? r.msg : strerror((int)-rc));
        return -1;
    }
    return 0;
}

static void wire_str(char *dst, size_t room, const char *src, size_t srclen)
{
    size_t n = strnlen(src, srclen);
    n = n < room ? n : room - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

int vgpu_place_gpus_from_arbiter(struct vgpu_gpu_list *out)
{
    static struct vgpu_arb_gpu g[VGPU_ARB_MAX_PAYLOAD / sizeof(struct vgpu_arb_gpu)];
    if (!vgpu_arb_available())
        return 0;
    uint64_t a[4] = { 0 };
    size_t got = 0;
    struct vgpu_arb_rep r;
    int64_t rc = vgpu_arb_call_data(VGPU_ARB_PL_GPUS, a, NULL, 0, g, sizeof g, &got, &r);
    if (rc < 0 || got % sizeof *g || got / sizeof *g != r.v[0] || r.v[0] == 0 || r.v[0] > VGPU_MAX_GPUS) {
        if (rc < 0 && rc != -EPIPE && rc != -ENOSYS)
            vgpu_debug("the arbiter gave no GPU list (%s): asking NVML", r.msg[0] ? r.msg : strerror((int)-rc));
        return 0;
    }
    memset(out, 0, sizeof *out);
    for (unsigned i = 0; i < r.v[0]; i++) {
        struct vgpu_gpu *d = &out->gpu[i];
        /* Strings from the wire are bounded here, whatever the sender put in them. */
        wire_str(d->uuid, sizeof d->uuid, g[i].uuid, sizeof g[i].uuid);
        wire_str(d->name, sizeof d->name, g[i].name, sizeof g[i].name);
        wire_str(d->pci_bus_id, sizeof d->pci_bus_id, g[i].pci_bus_id, sizeof g[i].pci_bus_id);
        wire_str(d->unreachable, sizeof d->unreachable, g[i].unreachable, sizeof g[i].unreachable);
        d->mem_total = g[i].mem_total;
        d->mem_used = g[i].mem_used;
        d->mem_reserved = g[i].mem_reserved;
        d->index = g[i].index;
        d->is_mig = g[i].is_mig != 0;
        d->mig_gi = g[i].mig_gi;
        d->mig_ci = g[i].mig_ci;
        d->has_mig_mode = g[i].has_mig_mode != 0;
        d->mig_current = g[i].mig_current;
        d->mig_pending = g[i].mig_pending;
        d->lost = g[i].lost != 0;
        d->compute_mode = g[i].compute_mode;
        d->handle = NULL;   /* no NVML in this process: topology and --oversubscribe ask their own */
    }
    out->count = (unsigned)r.v[0];
    vgpu_debug("placing by the arbiter's list of %u GPUs (read %llu ms ago)", out->count, (unsigned long long)r.v[1]);
    return 1;
}
