/* Accounting through the arbiter (DESIGN.md decision 12): not served yet; every request of the
 * range is refused, so a client falls back to its user's own store. */
#include "daemon/arbiter.h"

#include <errno.h>

void arb_acct_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                     struct vgpu_arb_rep *r, void *out)
{
    (void)c, (void)q, (void)in, (void)out;
    arb_refuse(a, r, ENOSYS, "this arbiter keeps no accounting records");
}

void arb_acct_client_gone(struct arbiter *a, struct arb_client *c)
{
    (void)a, (void)c;
}
