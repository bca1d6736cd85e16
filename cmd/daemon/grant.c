/* What priority a user's job is granted (root's policy file, vgpu/policy.h): one rule for the
 * schedules (arbiter.c, a job's JOB) and for lending's order of giving way (lend.c). */
#include "daemon/server.h"

#include "vgpu/policy.h"

/* High only for root and the users and groups the policy names, and a normal request the
 * policy's default. A policy that cannot be read grants nothing above normal. */
int arb_granted_prio(uid_t uid, int asked)
{
    if (uid == 0 || asked == VGPU_PRIO_LOW)
        return asked;
    struct vgpu_policy pol;
    struct vgpu_err e = { 0 };
    if (vgpu_policy_read(&pol, &e) < 0)
        return VGPU_PRIO_NORMAL;
    if (asked == VGPU_PRIO_HIGH && vgpu_policy_may_high(&pol, uid))
        return VGPU_PRIO_HIGH;
    return pol.default_prio < 0 ? VGPU_PRIO_LOW : VGPU_PRIO_NORMAL;
}
