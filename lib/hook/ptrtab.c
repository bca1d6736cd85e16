/* ptrtab.c: what each allocation charged, so that its free releases exactly that.
 *
 * Allocations come from many threads, so the table is split into 64 shards by a hash of the
 * key, each an open-addressing table under its own mutex (held for a few probes, never across
 * a driver call). Keys are device pointers, VMM handles, array and module handles, told apart
 * by their kind. A key that is not here was not charged by us (IPC, pools, another library's
 * allocation): its free passes straight through.
 *
 * Each entry also remembers the context current at the allocation: when that context goes
 * (cuCtxDestroy, cuDevicePrimaryCtxReset, the last primary release), the driver frees what was
 * allocated in it, freed or not, so its entries go too (vgpu_ptr_drop_ctx). That is the only way
 * out after a sticky error (CUDA_ERROR_ILLEGAL_ADDRESS), when every cuMemFree fails. */
#include <pthread.h>
#include <stdlib.h>

#include "hook.h"

enum { SHARDS = 64, EMPTY = 0, USED = 1, GONE = 2 };

struct entry {
    uint64_t key;
    uint64_t bytes;
    uint64_t ctx;                 /* the context current at the allocation (0: unknown) */
    int32_t dev;
    uint8_t kind, state;
};

struct shard {
    pthread_mutex_t lock;
    struct entry *tab;
    size_t cap, used, live;       /* used counts tombstones too */
};

static struct shard shards[SHARDS] = {
#define S4 { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 }
#define S16 S4, S4, S4, S4
    S16, S16, S16, S16
};

static uint64_t mix(uint64_t k, unsigned kind)
{
    k ^= (uint64_t)kind * 0x9e3779b97f4a7c15ull;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static bool grow(struct shard *s)
{
    size_t cap = s->cap ? s->cap * 2 : 64;
    if (s->live * 4 < s->cap)
        cap = s->cap;                 /* mostly tombstones: rehash in place size */
    struct entry *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < s->cap; i++) {
        struct entry *e = &s->tab[i];
        if (e->state != USED)
            continue;
        size_t j = mix(e->key, e->kind) / SHARDS & (cap - 1);
        while (t[j].state == USED)
            j = (j + 1) & (cap - 1);
        t[j] = *e;
    }
    free(s->tab);
    s->tab = t;
    s->cap = cap;
    s->used = s->live;
    return true;
}

static uint64_t current_ctx(void)
{
    static vgpu_cuCtxGetCurrent_fn get;
    if (!get)
        get = (vgpu_cuCtxGetCurrent_fn)vgpu_real_cuda_sym("cuCtxGetCurrent");
    CUcontext c = NULL;
    return get && get(&c) == CUDA_SUCCESS ? (uint64_t)(uintptr_t)c : 0;
}

bool vgpu_ptr_put(enum vgpu_alloc_kind kind, uint64_t key, int dev, uint64_t bytes)
{
    uint64_t ctx = kind == VGPU_AK_VMM ? 0 : current_ctx();   /* VMM handles outlive contexts */
    uint64_t h = mix(key, kind);
    struct shard *s = &shards[h % SHARDS];
    bool ok = true;
    pthread_mutex_lock(&s->lock);
    if ((s->used + 1) * 2 > s->cap && !grow(s)) {
        ok = false;
    } else {
        size_t j = h / SHARDS & (s->cap - 1), slot = SIZE_MAX;
        for (;; j = (j + 1) & (s->cap - 1)) {
            struct entry *e = &s->tab[j];
            if (e->state == GONE && slot == SIZE_MAX)
                slot = j;
            if (e->state == EMPTY) {
                if (slot == SIZE_MAX) {
                    slot = j;
                    s->used++;
                }
                break;
            }
            if (e->state == USED && e->key == key && e->kind == kind) {
                slot = j;             /* the driver reused an address we missed the free of */
                s->live--;
                break;
            }
        }
        s->tab[slot] = (struct entry){ key, bytes, ctx, dev, (uint8_t)kind, USED };
        s->live++;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

bool vgpu_ptr_take(enum vgpu_alloc_kind kind, uint64_t key, int *dev, uint64_t *bytes)
{
    uint64_t h = mix(key, kind);
    struct shard *s = &shards[h % SHARDS];
    bool found = false;
    pthread_mutex_lock(&s->lock);
    if (s->cap) {
        for (size_t j = h / SHARDS & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
            struct entry *e = &s->tab[j];
            if (e->state == EMPTY)
                break;
            if (e->state == USED && e->key == key && e->kind == kind) {
                *dev = e->dev;
                *bytes = e->bytes;
                e->state = GONE;
                s->live--;
                found = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void vgpu_ptr_drop_ctx(uint64_t ctx, void (*release)(enum vgpu_alloc_kind kind, int dev, uint64_t bytes))
{
    if (!ctx)
        return;
    for (unsigned i = 0; i < SHARDS; i++) {
        struct shard *s = &shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t j = 0; j < s->cap; j++) {
            struct entry *e = &s->tab[j];
            if (e->state != USED || e->ctx != ctx)
                continue;
            e->state = GONE;
            s->live--;
            release((enum vgpu_alloc_kind)e->kind, e->dev, e->bytes);   /* touches the region only */
        }
        pthread_mutex_unlock(&s->lock);
    }
}
