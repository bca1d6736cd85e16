/* migration.c: the PCIe byte counters of a GPU and the rate of migration vgpu ps and vgpu top
 * attribute to oversubscribed jobs (see vgpu/migration.h for why this source, and its limits). */
#include "vgpu/migration.h"

#include <stdio.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One field's value as an unsigned count, and the width it wraps at; false when the field
 * failed or holds something that is not a count. */
static bool field_count(const nvmlFieldValue_t *f, uint64_t *v, unsigned *bits)
{
    if (f->nvmlReturn != NVML_SUCCESS)
        return false;
    switch (f->valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *v = f->value.uiVal;
        *bits = 32;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *v = f->value.ulVal;
        *bits = sizeof(unsigned long) * 8;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *v = f->value.ullVal;
        *bits = 64;
        return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        if (f->value.sllVal < 0)
            return false;
        *v = (uint64_t)f->value.sllVal;
        *bits = 64;
        return true;
    default:
        return false;
    }
}

bool vgpu_pcie_read(struct vgpu_nvml *nv, nvmlDevice_t h, struct vgpu_pcie_count *c)
{
    c->ok = false;
    if (!nv || !h || !nv->nvmlDeviceGetFieldValues)
        return false;
    nvmlFieldValue_t f[2] = { { .fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES },
                              { .fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES } };
    if (nv->nvmlDeviceGetFieldValues(h, 2, f) != NVML_SUCCESS)
        return false;
    c->at_ns = mono_ns();
    unsigned btx = 0, brx = 0;
    if (!field_count(&f[0], &c->tx, &btx) || !field_count(&f[1], &c->rx, &brx))
        return false;
    c->bits = btx < brx ? btx : brx;
    c->ok = true;
    return true;
}

static uint64_t wrap_delta(uint64_t a, uint64_t b, unsigned bits, bool *back)
{
    if (bits >= 64) {
        *back |= b < a;
        return b - a;
    }
    uint64_t mask = (1ULL << bits) - 1;
    return (b - a) & mask;
}

bool vgpu_pcie_rate(const struct vgpu_pcie_count *a, const struct vgpu_pcie_count *b, double *bps)
{
    if (!a->ok || !b->ok || a->bits != b->bits || b->at_ns <= a->at_ns)
        return false;
    double dt = (double)(b->at_ns - a->at_ns) / 1e9;
    /* A counter narrower than 64 bits passes 2^bits bytes unseen: compare only readings closer
     * together than the link can move that much in one direction. */
    if (a->bits < 64 && dt * VGPU_PCIE_MAX_BPS >= (double)(1ULL << a->bits))
        return false;
    bool back = false;
    uint64_t d = wrap_delta(a->tx, b->tx, a->bits, &back) + wrap_delta(a->rx, b->rx, a->bits, &back);
    if (back)
        return false;   /* a 64-bit counter went back: reset (driver reload), not traffic */
    *bps = (double)d / dt;
    return true;
}

unsigned vgpu_pcie_window_ms(unsigned bits, unsigned want_ms)
{
    if (bits >= 64)
        return want_ms;
    /* Four fifths of the time the counter takes to wrap at the fastest link: the sleep may
     * overrun a little, and an overrun past the wrap time would make the reading useless. */
    double wrap_ms = (double)(1ULL << bits) / VGPU_PCIE_MAX_BPS * 1000.0;
    unsigned safe = (unsigned)(wrap_ms * 0.8);
    if (safe < 1)
        safe = 1;
    return want_ms < safe ? want_ms : safe;
}

bool vgpu_pcie_sample(struct vgpu_nvml *nv, nvmlDevice_t h, unsigned want_ms, double *bps,
                      struct vgpu_pcie_count *last)
{
    struct vgpu_pcie_count a, b;
    if (!vgpu_pcie_read(nv, h, &a))
        return false;
    unsigned ms = vgpu_pcie_window_ms(a.bits, want_ms);
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    if (!vgpu_pcie_read(nv, h, &b))
        return false;
    if (last)
        *last = b;
    return vgpu_pcie_rate(&a, &b, bps);
}

nvmlDevice_t vgpu_pcie_device(struct vgpu_nvml *nv, nvmlDevice_t h)
{
    unsigned mig = 0;
    if (!nv || !h)
        return NULL;
    if (!nv->nvmlDeviceIsMigDeviceHandle || nv->nvmlDeviceIsMigDeviceHandle(h, &mig) != NVML_SUCCESS || !mig)
        return h;
    nvmlDevice_t parent = NULL;
    if (!nv->nvmlDeviceGetDeviceHandleFromMigDeviceHandle ||
        nv->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h, &parent) != NVML_SUCCESS)
        return NULL;
    return parent;
}

double vgpu_migration_share(double gpu_bps, uint64_t off, uint64_t off_total)
{
    if (!off || !off_total || gpu_bps <= 0)
        return 0;
    if (off >= off_total)
        return gpu_bps;
    return gpu_bps * ((double)off / (double)off_total);
}

char *vgpu_format_rate(double bps, char *buf, size_t len)
{
    if (bps >= 1e9)
        snprintf(buf, len, "%.1f GB/s", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(buf, len, "%.0f MB/s", bps / 1e6);
    else if (bps >= 1e3)
        snprintf(buf, len, "%.0f kB/s", bps / 1e3);
    else
        snprintf(buf, len, "%.0f B/s", bps < 0 ? 0 : bps);
    return buf;
}
