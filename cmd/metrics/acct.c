/* Per-user totals for 'vgpu metrics' (see metrics/acct.h). Read from the store at each scrape:
 * a sum over the records (vgpu acct --totals; 164 ms over 100 000 records, bench/RESULTS.md), so
 * a series only grows as jobs end, and drops only when records past the retention are pruned
 * (Prometheus takes that as a counter reset). */
#include "metrics/acct.h"

#include <stdlib.h>
#include <string.h>

#include "vgpu/log.h"

struct collect {
    struct vgpu_acct_total *t;
    size_t n, cap;
};

static int keep(const struct vgpu_acct_total *t, void *arg)
{
    struct collect *c = arg;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        struct vgpu_acct_total *p = realloc(c->t, cap * sizeof *p);
        if (!p)
            return 1;   /* out of memory: what was kept so far */
        c->t = p;
        c->cap = cap;
    }
    c->t[c->n++] = *t;
    return 0;
}

size_t vgpu_metrics_user_totals(struct vgpu_acct_total **out, struct vgpu_acct_origin *from)
{
    *out = NULL;
    struct vgpu_err e = { 0 };
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    struct collect c = { 0 };
    /* The arbiter's database when a daemon answers (root's scrape: every user's), else the own store. */
    if (vgpu_acct_read_totals(&f, keep, &c, &e) < 0)
        vgpu_debug("vgpu metrics: accounting totals: %s", e.msg);
    vgpu_acct_origin(from);
    *out = c.t;
    return c.n;
}
