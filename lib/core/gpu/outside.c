/* The job's GPU processes outside the limiter (see vgpu/outside.h).
 * libc only: linked into libvgpu.so. Never prints, never exits.
 *
 * Cost: a job of P processes on a GPU that lists N processes. The job's live slots are indexed
 * once per call (sorted host pids), and so are its roots, so each listed pid costs a binary
 * search and its parent chain, O((N + P) log P) in all; it was O(N * P) (every listed pid
 * scanned every slot), which a job of 1024 processes made 10^6 slot reads per call, once a
 * second in every process of the job. Parent chains come from a memo when the caller keeps one
 * (vgpu top and ps look at many jobs in one pass: one /proc read per pid, not one per job). */
#include "vgpu/outside.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/proc.h"

#define MAX_ROOTS (VGPU_REGION_MAX_SLOTS + 1)   /* the creator and every slot */

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static bool has_pid(const pid_t *sorted, unsigned n, pid_t pid)
{
    return n && bsearch(&pid, sorted, n, sizeof *sorted, cmp_pid) != NULL;
}

/* The job's live slots, as they can be matched with NVML's (host) pids. */
struct slot_index {
    pid_t *host;                        /* host pids of slots that have one, sorted */
    unsigned nhost;
    struct { pid_t pid; uint32_t ns; } *other;   /* slots of another namespace, host pid unknown */
    unsigned nother;
};

static bool index_slots(const struct vgpu_region *r, struct slot_index *x)
{
    unsigned end = vgpu_region_slot_end(r);
    memset(x, 0, sizeof *x);
    x->host = malloc((end ? end : 1) * sizeof *x->host);
    x->other = malloc((end ? end : 1) * sizeof *x->other);
    if (!x->host || !x->other) {
        free(x->host);
        free(x->other);
        return false;
    }
    uint32_t cns = r->hdr->creator_pidns;
    for (unsigned i = 0; i < end; i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        uint32_t hns = atomic_load_explicit(&s->host_ns, memory_order_acquire);
        if (hns == cns)
            x->host[x->nhost++] = atomic_load(&s->host_pid);
        uint32_t sns = atomic_load(&s->pidns);
        if (sns && sns != cns) {
            x->other[x->nother].pid = vgpu_slot_pid_of(o);
            x->other[x->nother++].ns = sns;
        }
    }
    qsort(x->host, x->nhost, sizeof *x->host, cmp_pid);
    return true;
}

/* Whether host pid `pid` is one of the job's processes under the limiter: a live slot whose
 * host pid it is, or (a process of another namespace not resolved yet) whose namespace and own
 * pid it has. */
static bool in_slots(const struct slot_index *x, pid_t pid)
{
    if (has_pid(x->host, x->nhost, pid))
        return true;
    if (!x->nother)
        return false;
    uint32_t pns = vgpu_proc_pidns(pid);
    bool same_ns = false;
    for (unsigned i = 0; i < x->nother && !same_ns; i++)
        same_ns = pns && pns == x->other[i].ns;
    if (!same_ns)
        return false;
    /* Same namespace as such a slot: the same process when its innermost pid is the slot's. */
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
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
    for (unsigned i = 0; i < x->nother; i++)
        if (pns == x->other[i].ns && last == x->other[i].pid)
            return true;
    return false;
}

/* ---- the parent memo ---------------------------------------------------------------------- */

static size_t memo_pos(const struct vgpu_outside_memo *m, pid_t pid)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->e[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void vgpu_outside_memo_put(struct vgpu_outside_memo *m, pid_t pid, pid_t ppid)
{
    if (!m || pid <= 0)
        return;
    size_t at = memo_pos(m, pid);
    if (at < m->n && m->e[at].pid == pid) {
        m->e[at].ppid = ppid;
        return;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        void *ne = realloc(m->e, cap * sizeof *m->e);
        if (!ne)
            return;                     /* no room: not remembered */
        m->e = ne;
        m->cap = cap;
    }
    memmove(&m->e[at + 1], &m->e[at], (m->n - at) * sizeof *m->e);
    m->e[at].pid = pid;
    m->e[at].ppid = ppid;
    m->n++;
}

static pid_t parent_of(struct vgpu_outside_memo *m, pid_t pid)
{
    if (!m)
        return vgpu_proc_ppid(pid);
    size_t at = memo_pos(m, pid);
    if (at < m->n && m->e[at].pid == pid)
        return m->e[at].ppid;
    pid_t pp = vgpu_proc_ppid(pid);
    vgpu_outside_memo_put(m, pid, pp);
    return pp;
}

void vgpu_outside_memo_reset(struct vgpu_outside_memo *m)
{
    if (m)
        m->n = 0;
}

void vgpu_outside_memo_free(struct vgpu_outside_memo *m)
{
    if (!m)
        return;
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* vgpu_proc_descends over sorted roots, with the memo's parents. */
static bool descends(struct vgpu_outside_memo *m, pid_t pid, const pid_t *roots, unsigned nroots)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        if (has_pid(roots, nroots, pid))
            return true;
        pid = parent_of(m, pid);
    }
    return false;
}

bool vgpu_outside_find_memo(const struct vgpu_region *r, const unsigned *pids, const uint64_t *bytes, unsigned n,
                            struct vgpu_outside_memo *memo, struct vgpu_outside *out)
{
    memset(out, 0, sizeof *out);
    if (!r || !r->hdr || !r->use)
        return false;
    uint32_t cns = r->hdr->creator_pidns;
    if (cns && vgpu_proc_view_ns() != cns)
        return false;                   /* NVML's pids are not pids of our /proc */
    if (n == 0)
        return true;
    struct slot_index x;
    if (!index_slots(r, &x))
        return false;
    /* The roots only once a listed process is not one of the job's own (the usual case is a
     * list of the job's processes alone, which needs none). */
    pid_t *roots = NULL;
    unsigned nroots = 0;
    bool ok = true;
    for (unsigned i = 0; i < n; i++) {
        pid_t pid = (pid_t)pids[i];
        if (pid <= 1 || in_slots(&x, pid))
            continue;
        if (!roots) {
            if (!(roots = malloc(MAX_ROOTS * sizeof *roots))) {
                ok = false;
                break;
            }
            nroots = vgpu_region_roots(r, roots, MAX_ROOTS);
            qsort(roots, nroots, sizeof *roots, cmp_pid);
        }
        if (!descends(memo, pid, roots, nroots))
            continue;
        if (out->count < VGPU_OUTSIDE_MAX_PIDS) {
            out->pid[out->count] = pid;
            out->pid_bytes[out->count] = bytes[i];
        }
        out->count++;
        out->bytes += bytes[i];
    }
    free(x.host);
    free(x.other);
    free(roots);
    if (!ok)
        memset(out, 0, sizeof *out);
    return ok;
}

bool vgpu_outside_find(const struct vgpu_region *r, const unsigned *pids, const uint64_t *bytes, unsigned n,
                       struct vgpu_outside *out)
{
    return vgpu_outside_find_memo(r, pids, bytes, n, NULL, out);
}
