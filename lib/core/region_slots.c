/* The job region's per-process slots: claiming and giving back, lock-free reservation against
 * the limit, and reaping the slots of dead processes (see vgpu/region.h for the protocol).
 * libc only: linked into libvgpu.so. Never prints, never exits. */
#include "vgpu/region.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu/exitcode.h"

bool region_process_alive(pid_t pid, uint64_t start)
{
    uint64_t now = vgpu_proc_start_time(pid);
    return now != 0 && now == start;
}

static bool pid_exists(pid_t pid)
{
    return pid > 0 && vgpu_proc_start_time(pid) != 0;
}

/* ---- slots -------------------------------------------------------------------------------- */

static uint64_t owner_word(pid_t pid, unsigned state)
{
    return ((uint64_t)(uint32_t)pid << 8) | state;
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
}

static void slot_free(struct vgpu_region *r, struct vgpu_region_slot *s, uint64_t expected)
{
    slot_drain(r, s);
    atomic_store(&s->start_time, 0);
    atomic_store(&s->host_pid, 0);
    /* Only the holder of `expected` frees it; a later takeover changed the word. */
    atomic_compare_exchange_strong(&s->owner, &expected, VGPU_SLOT_FREE);
}

static int try_claim(struct vgpu_region *r, pid_t pid, uint64_t start, pid_t host)
{
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (o != VGPU_SLOT_FREE)
            continue;
        if (!atomic_compare_exchange_strong(&s->owner, &o, owner_word(pid, VGPU_SLOT_CLAIMING)))
            continue;
        for (unsigned d = 0; d < VGPU_REGION_MAX_DEVICES; d++)
            atomic_store(&s->used[d], 0);
        atomic_store(&s->start_time, start);
        atomic_store(&s->host_pid, host);
        atomic_store(&s->owner, owner_word(pid, VGPU_SLOT_LIVE));
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
    pid_t pid = getpid();
    uint64_t start = vgpu_proc_start_time(pid);
    pid_t host = vgpu_proc_host_pid();
    int slot = try_claim(r, pid, start, host);
    if (slot < 0 && vgpu_region_reap(r) > 0)
        slot = try_claim(r, pid, start, host);
    if (slot < 0)
        vgpu_err_set(e, VGPU_EXIT_NO_CAPACITY, "the job region %s has no free process slot (%d live processes)",
                     r->path, VGPU_REGION_MAX_SLOTS);
    return slot;
}

void vgpu_region_detach(struct vgpu_region *r, int slot)
{
    if (!slot_ok(r, slot))
        return;
    struct vgpu_region_slot *s = &r->use->slot[slot];
    uint64_t o = atomic_load(&s->owner);
    if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE || vgpu_slot_pid_of(o) != getpid())
        return;
    uint64_t reaping = owner_word(getpid(), VGPU_SLOT_REAPING);
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
        if (limit && next > limit) {
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

int vgpu_region_reap(struct vgpu_region *r)
{
    if (!r || !r->use)
        return 0;
    pid_t me = getpid();
    int reaped = 0;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        unsigned st = vgpu_slot_state_of(o);
        pid_t pid = vgpu_slot_pid_of(o);
        bool dead;
        switch (st) {
        case VGPU_SLOT_FREE:
            continue;
        case VGPU_SLOT_LIVE:
            dead = !region_process_alive(pid, atomic_load(&s->start_time));
            break;
        case VGPU_SLOT_CLAIMING:     /* the claimer died between its CAS and going live */
            dead = !pid_exists(pid);
            break;
        case VGPU_SLOT_REAPING:      /* a reaper died mid-reap: take over */
            dead = pid != me && !pid_exists(pid);
            break;
        default:                     /* garbage: reclaim it */
            dead = true;
            break;
        }
        if (!dead)
            continue;
        uint64_t mine = owner_word(me, VGPU_SLOT_REAPING);
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
    if (now - last < 1000000000ULL && last <= now)
        return 0;
    /* One process per second does the walk; the others go on. */
    if (!atomic_compare_exchange_strong(&r->use->last_reap_ns, &last, now))
        return 0;
    return vgpu_region_reap(r);
}

unsigned vgpu_region_pids(const struct vgpu_region *r, pid_t *pids, int32_t *host_pids, unsigned max)
{
    unsigned n = 0;
    if (!r || !r->use)
        return 0;
    for (int i = 0; i < VGPU_REGION_MAX_SLOTS; i++) {
        const struct vgpu_region_slot *s = &r->use->slot[i];
        uint64_t o = atomic_load(&s->owner);
        if (vgpu_slot_state_of(o) != VGPU_SLOT_LIVE)
            continue;
        if (n < max) {
            if (pids)
                pids[n] = vgpu_slot_pid_of(o);
            if (host_pids)
                host_pids[n] = atomic_load(&s->host_pid);
        }
        n++;
    }
    return n;
}

bool vgpu_region_creator_alive(const struct vgpu_region *r)
{
    return r && r->hdr && r->hdr->creator_pid > 0 && region_process_alive(r->hdr->creator_pid, r->hdr->creator_start);
}
