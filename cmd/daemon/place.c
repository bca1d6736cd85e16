/* Placement through the arbiter: not served yet. */
#include "daemon/arbiter.h"

#include <errno.h>

void arb_place_handle(struct arbiter *a, struct arb_client *c, const struct vgpu_arb_req *q, const void *in,
                      struct vgpu_arb_rep *r, void *out)
{
    (void)c, (void)q, (void)in, (void)out;
    arb_refuse(a, r, ENOSYS, "this arbiter does not place jobs");
}

void arb_place_client_gone(struct arbiter *a, struct arb_client *c)
{
    (void)a, (void)c;
}
