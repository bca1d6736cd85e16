/* The job region's per-process slots: claiming and giving back, lock-free reservation against
 * the limit, and reaping the slots of dead processes (see vgpu/region.h for the protocol).
 * libc only: linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/region.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu/exitcode.h"

#include <signal.h>

/* The low 24 bits of a PID namespace inode, as kept in owner words (never 0 for a known one). */
static uint64_t nstag(uint32_t ns)
{
    uint32_t t = ns & 0xffffff;
    return ns && !t ? 1 : t;
}

/* For CLAIMING and REAPING words: whether the process that wrote the word is gone. Only a
 * reader of the same namespace (or of a word without a tag) can tell from the pid (kill(2)
 * takes pids of the caller's own namespace, whatever /proc shows). */
static bool word_writer_gone(uint64_t owner)
{
    uint32_t tag = vgpu_slot_nstag_of(owner);
    pid_t pid = vgpu_slot_pid_of(owner);
    if (tag && tag != nstag(vgpu_proc_pidns(0)))
        return false;
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

/* ---- slots -------------------------------------------------------------------------------- */

/* This process's owner word in `state`. */
static uint64_t own_word(unsigned state)
{
    return nstag(vgpu_proc_pidns(0)) << 40 | ((uint64_t)(uint32_t)getpid() << 8) | state;
}

static bool slot_ok(const struct vgpu_region *r, int slot)
{
    return r && r->use && slot >= 0 && slot < VGPU_REGION_MAX_SLOTS;
}

/* Subtracts v from a counter without ever going below zero. */
static void sub_saturating(_Atomic uint64_t *c, uint64_t v)
{
    uint64_t cur = atomic_load(c);
    while (!atomic_compare_exchange_weak(c, &cur, cur > v ? cur - v : 0))
        ;
}

/* Returns everything a slot holds to the device counters. The exchange makes each byte
 * returned exactly once even when two reapers meet on one slot. */
static void slot_drain(struct vgpu_region *r, struct vgpu_region_slot *s)
{
    for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++) {
        uint64_t v = atomic_exchange(&s->used[d], 0);
        if (v)
            sub_saturating(&r->use->dev[d].used, v);
    }
    uint32_t sd = atomic_exchange(&s->spill_dev, 0) & VGPU_SLOT_SPILL_DEV_MASK;   /* its demoted figure goes too */
    uint64_t sp = atomic_exchange(&s->spilled, 0);
    if (sd >= 1 && sd <= VGPU_REGION_MAX_DEVICES && sp)
        sub_saturating(&r->use->dev[sd - 1].spilled, sp);
}

static void slot_free(struct vgpu_region *r, struct vgpu_region_slot *s, uint64_t expected)
{
    slot_drain(r, s);
    atomic_store(&s->start_time, 0);
    atomic_store(&s->host_ns, 0);
    atomic_store(&s->host_pid, 0);
    atomic_store(&s->pidns, 0);
    /* Only the holder of `expected` frees it; a later takeover changed the word. */
    atomic_compare_exchange_strong(&s->owner, &expected, VGPU_SLOT_FREE);
}

unsigned vgpu_region_slot_end(const struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    uint32_t w = atomic_load(&r->use->slot_end);
    if (!(w & VGPU_SLOT_END_KEPT))
        return VGPU_REGION_MAX_SLOTS;
    w &= ~VGPU_SLOT_END_KEPT;
    return w < VGPU_REGION_MAX_SLOTS ? w : VGPU_REGION_MAX_SLOTS;
}

/* Raises the scan bound to cover slot i, before the slot can be claimed: a reader that sees the
 * slot taken has then also seen a bound past it (a claimer that dies right after this leaves a
 * bound one too high, which costs a reader one free slot's look). */
static void raise_slot_end(struct vgpu_region *r, int i)
{
    uint32_t w = atomic_load(&r->use->slot_end);
    while ((w & VGPU_SLOT_END_KEPT) && (w & ~VGPU_SLOT_END_KEPT) < (uint32_t)i + 1 &&
           !atomic_compare_exchange_weak(&r->use->slot_end, &w, VGPU_SLOT_END_KEPT | ((uint32_t)i + 1)))
        ;
}

static int try_claim(struct vgpu_region *r, const struct vgpu_proc_id *me, pid_t host, uint32_t host_ns)
{
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (o != VGPU_SLOT_FREE)
            continue;
        raise_slot_end(r, i);
        if (!atomic_compare_exchange_strong(&s->owner, &o, own_word(VGPU_SLOT_CLAIMING)))
            continue;
        for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++)
            atomic_store(&s->used[d], 0);
        atomic_store(&s->start_time, me->start);
        atomic_store(&s->pidns, me->pidns);
        atomic_store(&s->host_pid, host);
        atomic_store(&s->host_ns, host_ns);
        atomic_store(&s->owner, own_word(VGPU_SLOT_LIVE));
        return i;
    }
    return -1;
}

int vgpu_region_attach(struct vgpu_region *r, struct vgpu_err *e)
{
    if (!r || !r->use) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "no job region is open");
        return -1;
    }
    (void)vgpu_region_check(r);   /* a truncated file is fenced off before we touch it */
    struct vgpu_proc_id me;
    vgpu_proc_self(&me);
    /* host_pid is our pid in the creator's namespace: known when we live in it, or when our
     * /proc is its (NSpid's first entry); otherwise a reader there fills it in. A region of an
     * older vgpu (no creator_pidns): NSpid's first entry, as it always was. */
    uint32_t cns = r->hdr->creator_pidns;
    pid_t host = 0;
    uint32_t host_ns = 0;
    if (!cns) {
        host = vgpu_proc_host_pid();
    } else if (me.host_ns == cns) {
        host = me.host_pid;
        host_ns = cns;
    } else if (me.pidns == cns) {
        host = me.pid;
        host_ns = cns;
    }
    int slot = try_claim(r, &me, host, host_ns);
    if (slot < 0 && vgpu_region_reap(r) > 0)
        slot = try_claim(r, &me, host, host_ns);
    if (slot < 0)
        vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "the job region %s has no free process slot (%d live processes)",
                     r->path, VGPU_REGION_MAX_SLOTS);
    return slot;
}

void vgpu_region_detach(struct vgpu_region *r, int slot)
{
    if (!slot_ok(r, slot))
        return;
    (void)vgpu_region_check(r);   /* a truncated file is fenced off before we touch it */
    struct vgpu_region_slot *s = &r->use->slot[slot];
    uint64_t o = atomic_load(&s->owner);
    if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE || vgpu_slot_pid_of(o) != getpid())
        return;
    uint64_t reaping = own_word(VGPU_SLOT_REAPING);
    if (atomic_compare_exchange_strong(&s->owner, &o, reaping))
        slot_free(r, s, reaping);
}

/* ---- reservation ---------------------------------------------------------------------------- */

int vgpu_region_reserve(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !region_dev_ok(r, dev)) {
        errno = EINVAL;
        return -1;
    }
    struct vgpu_region_dev_usage *u = &r->use->dev[dev];
    uint64_t cur = atomic_load(&u->used), next;
    for (;;) {
        /* Re-read the limit every round: `vgpu limit` may change it meanwhile. */
        uint64_t limit = atomic_load(&r->hdr->dev[dev].mem_limit);
        if (__builtin_add_overflow(cur, bytes, &next)) {
            errno = EOVERFLOW;
            return -1;
        }
        /* The job's memory outside the limiter counts against the limit too. */
        uint64_t outside = atomic_load_explicit(&u->outside_bytes, memory_order_relaxed);
        if (limit && (next > limit || outside > limit - next)) {
            errno = ENOSPC;
            return -1;
        }
        if (atomic_compare_exchange_weak(&u->used, &cur, next))
            break;
    }
    /* Counted in the device total first: a death right here over-counts (safe), never under-counts. */
    atomic_fetch_add(&r->use->slot[slot].used[dev], bytes);
    uint64_t peak = atomic_load(&u->peak);
    while (next > peak && !atomic_compare_exchange_weak(&u->peak, &peak, next))
        ;
    return 0;
}

bool vgpu_region_mark_spilled(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !region_dev_ok(r, dev))
        return false;
    struct vgpu_region_slot *s = &r->use->slot[slot];
    uint32_t want = dev + 1, cur = atomic_load(&s->spill_dev);
    /* The device bits only: the bits above them are the demoted figure (vgpu_region_set_demoted). */
    while ((cur & VGPU_SLOT_SPILL_DEV_MASK) != want) {
        if (cur & VGPU_SLOT_SPILL_DEV_MASK)
            return false;
        if (atomic_compare_exchange_weak(&s->spill_dev, &cur, (cur & ~VGPU_SLOT_SPILL_DEV_MASK) | want))
            break;
    }
    /* The slot first: a death between the two leaves the device under-counted as spilled, which
     * only makes the device part look larger (refusing sooner), never the other way. */
    atomic_fetch_add(&s->spilled, bytes);
    atomic_fetch_add(&r->use->dev[dev].spilled, bytes);
    return true;
}

void vgpu_region_unspill(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !region_dev_ok(r, dev) ||
        (atomic_load(&r->use->slot[slot].spill_dev) & VGPU_SLOT_SPILL_DEV_MASK) != dev + 1)
        return;
    _Atomic uint64_t *mine = &r->use->slot[slot].spilled;
    uint64_t have = atomic_load(mine), take;
    do {
        take = have < bytes ? have : bytes;
    } while (!atomic_compare_exchange_weak(mine, &have, have - take));
    if (take)
        sub_saturating(&r->use->dev[dev].spilled, take);
}

void vgpu_region_set_demoted(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes, bool moving)
{
    if (!slot_ok(r, slot) || !region_dev_ok(r, dev))
        return;
    uint64_t mib = (bytes + VGPU_SLOT_DEMOTED_UNIT - 1) / VGPU_SLOT_DEMOTED_UNIT,
             most = (uint64_t)(~VGPU_SLOT_MOVING) >> VGPU_SLOT_SPILL_DEV_BITS;
    uint32_t want = (uint32_t)(mib < most ? mib : most) << VGPU_SLOT_SPILL_DEV_BITS | (moving ? VGPU_SLOT_MOVING : 0);
    _Atomic uint32_t *w = &r->use->slot[slot].spill_dev;
    uint32_t cur = atomic_load(w);
    while ((cur & VGPU_SLOT_SPILL_DEV_MASK) == dev + 1 &&
           !atomic_compare_exchange_weak(w, &cur, (cur & VGPU_SLOT_SPILL_DEV_MASK) | want))
        ;
}

uint64_t vgpu_region_mem_demoted(const struct vgpu_region *r, unsigned dev)
{
    if (!r || !r->use || !region_dev_ok(r, dev) || !vgpu_region_lending(r, dev, NULL))
        return 0;
    uint64_t sum = 0;
    for (unsigned i = 0; i < vgpu_region_slot_end(r); i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint32_t sd = atomic_load(&s->spill_dev);
        if (vgpu_slot_state_of(atomic_load(&s->owner)) == VGPU_SLOT_FREE || (sd & VGPU_SLOT_SPILL_DEV_MASK) != dev + 1)
            continue;
        sum += vgpu_slot_demoted_of(sd);
    }
    return sum;
}

bool vgpu_region_mem_moving(const struct vgpu_region *r, unsigned dev)
{
    if (!r || !r->use || !region_dev_ok(r, dev) || !vgpu_region_lending(r, dev, NULL))
        return false;
    for (unsigned i = 0; i < vgpu_region_slot_end(r); i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint32_t sd = atomic_load(&s->spill_dev);
        if (vgpu_slot_state_of(atomic_load(&s->owner)) != VGPU_SLOT_FREE &&
            (sd & VGPU_SLOT_SPILL_DEV_MASK) == dev + 1 && (sd & VGPU_SLOT_MOVING))
            return true;
    }
    return false;
}

int vgpu_region_reserve_split(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes, bool spillable,
                              bool *spilled)
{
    *spilled = false;
    if (vgpu_region_reserve(r, slot, dev, bytes) < 0)
        return -1;
    /* The device part: --oversubscribe's device share, or a borrower's REQUEST (past it, what can
     * be paged is borrowed: managed memory, lib/hook/spill.c; what cannot fails at REQUEST). */
    uint64_t share;
    if (!vgpu_region_oversub(r, dev, &share) && !vgpu_region_lending(r, dev, &share))
        return 0;
    /* The device part after this reservation: concurrent reservations are all in `used` already,
     * so two processes can only both decide to spill, never both pass the share. */
    const struct vgpu_region_dev_usage *u = &r->use->dev[dev];
    uint64_t used = atomic_load(&u->used), out = atomic_load(&u->outside_bytes), sp = atomic_load(&u->spilled);
    uint64_t ondev = used + out < used ? UINT64_MAX : used + out;
    ondev = ondev > sp ? ondev - sp : 0;
    if (ondev <= share)
        return 0;
    if (spillable && vgpu_region_mark_spilled(r, slot, dev, bytes)) {
        *spilled = true;
        return 0;
    }
    (void)vgpu_region_release(r, slot, dev, bytes);
    errno = ENOSPC;
    return -1;
}

int vgpu_region_release(struct vgpu_region *r, int slot, unsigned dev, uint64_t bytes)
{
    if (!slot_ok(r, slot) || !region_dev_ok(r, dev)) {
        errno = EINVAL;
        return -1;
    }
    _Atomic uint64_t *mine = &r->use->slot[slot].used[dev];
    uint64_t have = atomic_load(mine), take;
    do {
        take = have < bytes ? have : bytes;
    } while (!atomic_compare_exchange_weak(mine, &have, have - take));
    if (take)
        sub_saturating(&r->use->dev[dev].used, take);
    return 0;
}

/* ---- reaping --------------------------------------------------------------------------------- */

/* The slot's process as recorded, with its host pid when it is valid. */
static void slot_id(const struct vgpu_region *r, const struct vgpu_region_slot *s, pid_t pid,
                    struct vgpu_proc_id *id)
{
    id->pid = pid;
    id->pidns = atomic_load(&s->pidns);
    id->start = atomic_load(&s->start_time);
    uint32_t hns = atomic_load_explicit(&s->host_ns, memory_order_acquire);
    id->host_ns = hns;
    id->host_pid = hns == r->hdr->creator_pidns ? atomic_load(&s->host_pid) : 0;
    if (!hns)
        id->host_ns = 0;
}

/* Judges a LIVE slot; a reader in the creator's namespace that found the process records its
 * host pid there (first writer wins; every such reader finds the same pid). */
static enum vgpu_liveness slot_liveness(struct vgpu_region *r, struct vgpu_region_slot *s, uint64_t o)
{
    struct vgpu_proc_id id;
    slot_id(r, s, vgpu_slot_pid_of(o), &id);
    pid_t seen = 0;
    enum vgpu_liveness l = vgpu_proc_liveness(&id, &seen);
    uint32_t cns = r->hdr->creator_pidns;
    if (l == VGPU_PROC_ALIVE && seen > 0 && cns && atomic_load(&s->host_ns) != cns &&
        vgpu_proc_view_ns() == cns && atomic_load(&s->owner) == o) {
        atomic_store(&s->host_pid, seen);
        atomic_store_explicit(&s->host_ns, cns, memory_order_release);
    }
    return l;
}

int vgpu_region_reap(struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    (void)vgpu_region_check(r);   /* a truncated file is fenced off before we touch it */
    int reaped = 0;
    for (int i = 0; i < (int)vgpu_region_slot_end(r); i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        unsigned st = vgpu_slot_state_of(o);
        bool dead;
        switch (st) {
        case VGPU_SLOT_FREE:
            continue;
        case VGPU_SLOT_LIVE:         /* only a proven death: a live process's usage is never dropped */
            dead = slot_liveness(r, s, o) == VGPU_PROC_DEAD;
            break;
        case VGPU_SLOT_CLAIMING:     /* the claimer died between its CAS and going live */
            dead = word_writer_gone(o);
            break;
        case VGPU_SLOT_REAPING:      /* a reaper died mid-reap: take over */
            dead = o != own_word(VGPU_SLOT_REAPING) && word_writer_gone(o);
            break;
        default:                     /* garbage: reclaim it */
            dead = true;
            break;
        }
        if (!dead)
            continue;
        uint64_t mine = own_word(VGPU_SLOT_REAPING);
        if (!atomic_compare_exchange_strong(&s->owner, &o, mine))
            continue;                /* someone else changed it first */
        slot_free(r, s, mine);
        atomic_fetch_add(&r->use->reaped_total, 1);
        reaped++;
    }
    atomic_store(&r->use->last_reap_ns, region_monotonic_ns());
    return reaped;
}

int vgpu_region_reap_maybe(struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    uint64_t now = region_monotonic_ns();
    uint64_t last = atomic_load_explicit(&r->use->last_reap_ns, memory_order_relaxed);
    if (now - last < VGPU_REGION_REAP_NS && last <= now)
        return 0;
    /* One process per period does the walk; the others go on. */
    if (!atomic_compare_exchange_strong(&r->use->last_reap_ns, &last, now))
        return 0;
    return vgpu_region_reap(r);
}

unsigned vgpu_region_pids(const struct vgpu_region *r, pid_t *pids, int32_t *host_pids, unsigned max)
{
    unsigned n = 0;
    if (!r || !r->use)
        return 0;
    for (int i = 0; i < (int)vgpu_region_slot_end(r); i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        if (n < max) {
            if (pids)
                pids[n] = vgpu_slot_pid_of(o);
            if (host_pids) {
                uint32_t hns = atomic_load_explicit(&s->host_ns, memory_order_acquire);
                host_pids[n] = hns == r->hdr->creator_pidns ? atomic_load(&s->host_pid) : 0;
            }
        }
        n++;
    }
    return n;
}

bool vgpu_region_creator_alive(const struct vgpu_region *r)
{
    if (!r || !r->hdr || r->hdr->creator_pid <= 0)
        return false;
    struct vgpu_proc_id id = { .pid = r->hdr->creator_pid, .pidns = r->hdr->creator_pidns,
                               .start = r->hdr->creator_start };
    return vgpu_proc_liveness(&id, NULL) != VGPU_PROC_DEAD;
}

/* vgpu_region_slot_view_pid with the caller's view (vgpu_proc_view_ns) already known: it costs
 * a getpid(2), which vgpu_region_roots paid once per slot (1024 system calls per call). */
static pid_t slot_view_pid(const struct vgpu_region *r, int slot, uint32_t view)
{
    const struct vgpu_region_slot *s = &r->use->slot[slot];
    uint64_t o = atomic_load(&s->owner);
    uint32_t cns = r->hdr->creator_pidns;
    uint32_t pns = atomic_load(&s->pidns), hns = atomic_load_explicit(&s->host_ns, memory_order_acquire);
    pid_t host = atomic_load(&s->host_pid);
    if (!pns || pns == view)
        return vgpu_slot_pid_of(o);
    if (host > 0 && hns == cns && (!cns || cns == view))
        return host;                    /* (a region of an older vgpu: NSpid's first entry) */
    return 0;
}

pid_t vgpu_region_slot_view_pid(const struct vgpu_region *r, int slot)
{
    if (!r || !r->use || slot < 0 || slot >= VGPU_REGION_MAX_SLOTS)
        return 0;
    return slot_view_pid(r, slot, vgpu_proc_view_ns());
}

unsigned vgpu_region_roots(const struct vgpu_region *r, pid_t *roots, unsigned max)
{
    unsigned n = 0;
    if (!r || !r->hdr || !r->use || max == 0)
        return 0;
    uint32_t view = vgpu_proc_view_ns(), cns = r->hdr->creator_pidns;
    if (r->hdr->creator_pid > 0 && (!cns || cns == view))
        roots[n++] = r->hdr->creator_pid;
    for (int i = 0; i < (int)vgpu_region_slot_end(r) && n < max; i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        pid_t p = slot_view_pid(r, i, view);
        if (p > 0)
            roots[n++] = p;
    }
    return n;
}

void vgpu_region_set_outside(struct vgpu_region *r, unsigned dev, uint64_t bytes, pid_t one_pid, unsigned count)
{
    if (!r || !r->use || !region_dev_ok(r, dev))
        return;
    (void)vgpu_region_check(r);   /* a truncated file is fenced off before we touch it */
    struct vgpu_region_dev_usage *u = &r->use->dev[dev];
    atomic_store(&u->outside_pid, one_pid);
    atomic_store(&u->outside_count, count);
    atomic_store(&u->outside_bytes, bytes);
    atomic_store(&u->outside_at_ns, region_monotonic_ns());
}

uint64_t vgpu_region_outside(const struct vgpu_region *r, unsigned dev)
{
    return r && r->use && region_dev_ok(r, dev) ? atomic_load(&r->use->dev[dev].outside_bytes) : 0;
}
