/* The job's GPU processes outside the limiter (see vgpu/outside.h).
 * libc only: linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/outside.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/proc.h"

#define MAX_ROOTS 256

/* Whether host pid `pid` is one of the job's processes under the limiter: a live slot whose
 * host pid it is, or (a process of another namespace not resolved yet) whose namespace and own
 * pid it has. */
static bool in_slots(const struct vgpu_region *r, pid_t pid)
{
    uint32_t cns = r->hdr->creator_pidns, pns = 0;
    bool have_ns = false;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        uint32_t hns = atomic_load_explicit(&s->host_ns, memory_order_acquire);
        if (hns == cns && atomic_load(&s->host_pid) == pid)
            return true;
        uint32_t sns = atomic_load(&s->pidns);
        if (!sns || sns == cns)
            continue;
        if (!have_ns) {
            pns = vgpu_proc_pidns(pid);
            have_ns = true;
        }
        if (pns && pns == sns) {
            /* Same namespace: the same process when its innermost pid is the slot's. */
            char path[64], buf[4096];
            snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
            FILE *f = fopen(path, "re");
            if (!f)
                continue;
            size_t len = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[len] = '\0';
            char *p = strstr(buf, "\nNSpid:");
            long last = 0;
            for (p = p ? p + 7 : NULL; p;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p)
                    break;
                last = v;
                p = end;
            }
            if (last == vgpu_slot_pid_of(o))
                return true;
        }
    }
    return false;
}

bool vgpu_outside_find(const struct vgpu_region *r, const unsigned *pids, const uint64_t *bytes, unsigned n,
                       struct vgpu_outside *out)
{
    memset(out, 0, sizeof *out);
    if (!r || !r->hdr || !r->use)
        return false;
    uint32_t cns = r->hdr->creator_pidns;
    if (cns && vgpu_proc_view_ns() != cns)
        return false;                   /* NVML's pids are not pids of our /proc */
    pid_t roots[MAX_ROOTS];
    unsigned nroots = n ? vgpu_region_roots(r, roots, MAX_ROOTS) : 0;
    if (nroots == 0)
        return true;
    for (unsigned i = 0; i < n; i++) {
        pid_t pid = (pid_t)pids[i];
        if (pid <= 1 || in_slots(r, pid) || !vgpu_proc_descends(pid, roots, nroots))
            continue;
        if (out->count < VGPU_OUTSIDE_MAX_PIDS) {
            out->pid[out->count] = pid;
            out->pid_bytes[out->count] = bytes[i];
        }
        out->count++;
        out->bytes += bytes[i];
    }
    return true;
}
