/* Which ledger a placement uses (ledger.h): the arbiter's when one answers, else the caller's own.
 * Chosen at each look, so a `vgpu run --wait` that outlives a daemon (or sees one start) goes on
 * with whichever is there; what this process recorded is released where it was recorded. */
#include "ledger.h"

#include "vgpu/arbiter.h"
#include "vgpu/placement.h"

static bool recorded_arb, recorded_dir;   /* where this process holds promises */

int ledger_open(const char *statedir, struct ledger *l, struct vgpu_err *e)
{
    l->dir = l->promises = l->queue = l->lock = -1;
    l->version = 0;
    if (vgpu_arb_available()) {
        l->arb = true;
        return 0;
    }
    return ledger_dir_open(statedir, l, e);
}

void ledger_close(struct ledger *l)
{
    if (!l->arb)
        ledger_dir_close(l);
}

int ledger_look(struct ledger *l, const char *const *uuids, const uint64_t *totals, unsigned n,
                unsigned long long ticket, uint64_t *out, unsigned *ahead, struct vgpu_err *e)
{
    return l->arb ? ledger_arb_look(l, uuids, totals, n, ticket, out, ahead, e)
                  : ledger_dir_look(l, uuids, n, ticket, out, ahead);
}

int ledger_promise(struct ledger *l, const char *const *uuids, const uint64_t *bytes, unsigned n, struct vgpu_err *e)
{
    int rc = l->arb ? ledger_arb_promise(l, uuids, bytes, n, e) : ledger_dir_promise(l, uuids, bytes, n, e);
    if (rc == 0) {
        recorded_arb |= l->arb;
        recorded_dir |= !l->arb;
    }
    return rc;
}

unsigned long long ledger_take_ticket(struct ledger *l, uint64_t want, unsigned count)
{
    return l->arb ? ledger_arb_take_ticket(want, count) : ledger_dir_take_ticket(l);
}

void ledger_leave_queue(const char *statedir, struct ledger *l, unsigned long long ticket)
{
    if (!ticket)
        return;
    if (l) {
        if (l->arb)
            ledger_arb_leave_queue();
        else
            ledger_dir_leave_queue(l, ticket);
        return;
    }
    /* Both: the ticket may have been taken from either (the daemon came or went meanwhile). */
    ledger_arb_leave_queue();
    struct vgpu_err e;
    struct ledger own;
    if (ledger_dir_open(statedir, &own, &e) == 0) {
        ledger_dir_leave_queue(&own, ticket);
        ledger_dir_close(&own);
    }
}

void ledger_release(const char *statedir)
{
    if (recorded_arb)
        ledger_arb_release();
    if (recorded_dir)
        ledger_dir_release(statedir);
}

void vgpu_place_keep(void)
{
    if (recorded_arb)
        ledger_arb_keep();
}

int vgpu_place_hold(const char *statedir, pid_t command)
{
    /* The arbiter's ledger drops a promise with its vgpu run's connection: it is not held by the
     * command (vgpu-security(7), "A killed vgpu run"). */
    return recorded_dir ? ledger_dir_hold(statedir, command) : 0;
}

int ledger_adopt(const char *statedir, pid_t from, struct vgpu_err *e)
{
    if (recorded_arb && ledger_arb_adopt(from, e) < 0)
        return -1;
    if (recorded_dir && ledger_dir_adopt(statedir, from, e) < 0)
        return -1;
    return 0;
}
