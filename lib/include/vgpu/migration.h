/* The rate at which a GPU moves memory over PCIe, as a measure of how fast an oversubscribed
 * job's spilled (managed) memory migrates (issue 15, item 4). vgpu-side code (uses NVML).
 *
 * Why this source: neither NVML nor the driver API has a per-process counter of UVM migration
 * (CUPTI's unified-memory counters need an instrumented process, and the UVM tools interface
 * is not public). What the driver does have, since 550, are the GPU's cumulative PCIe byte
 * counters, NVML_FI_DEV_PCIE_COUNT_TX_BYTES and _RX_BYTES (nvmlDeviceGetFieldValues, well under
 * a millisecond). Every migrated page crosses the link, so their sum over an interval bounds
 * the migration from above. They also count everything else on the link: host<->device copies
 * of every process on that GPU, kernels reading mapped host memory, peer traffic over PCIe.
 * nvmlDeviceGetPcieThroughput measures the same bytes but blocks 20 ms per direction and
 * shows only that 20 ms, so it is not used.
 *
 * Attribution (vgpu_migration_share): a GPU's rate goes to the jobs with memory off the device
 * on that GPU, in proportion to how much each has off it; jobs with nothing off get 0. Where
 * the driver has no counter the rate is unknown (null in JSON), never 0. Documented in
 * vgpu-json(7), vgpu-ps(1), vgpu-top(1) and libvgpu(7). */
#ifndef VGPU_MIGRATION_H
#define VGPU_MIGRATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu/nvml.h"

/* From this rate (both directions, bytes per second) vgpu ps and vgpu top say "migrating ..."
 * under an oversubscribed job. A job whose hot set fits its device share moves next to
 * nothing once warm; one that touches all its memory every step moves gigabytes per second
 * (tests/gpu/oversub.sh). 100 MB/s is under a percent of a PCIe 4 x16 link. */
#define VGPU_MIGRATION_HIGH_BPS 100e6
/* The short window vgpu ps (and vgpu top's first sample) measures over. */
#define VGPU_MIGRATION_WINDOW_MS 100u
/* The fastest one direction of any link NVML reports on (PCIe 6 x16, ~121 GB/s), rounded up:
 * a 32-bit counter can wrap unseen after 2^32 bytes, so its readings are compared only when
 * they are closer together than 2^32 / this (33 ms). */
#define VGPU_PCIE_MAX_BPS 128e9

struct vgpu_pcie_count {
    bool ok;                    /* the driver gave both counters */
    unsigned bits;              /* 32 or 64: where the counters wrap */
    uint64_t tx, rx;            /* bytes, as read (modulo 2^bits) */
    uint64_t at_ns;             /* CLOCK_MONOTONIC when read */
};

/* Reads the PCIe byte counters of a physical GPU in one NVML call. false (c->ok false) when the
 * driver has none: older than 550, a MIG device handle, a vGPU guest, or NVML without
 * nvmlDeviceGetFieldValues. */
bool vgpu_pcie_read(struct vgpu_nvml *nv, nvmlDevice_t h, struct vgpu_pcie_count *c);
/* Bytes per second, both directions together, between readings a and b (b later). false when
 * it cannot be known: a reading failed, no time passed, the counters went back (a reset), or
 * a 32-bit counter could have wrapped unseen between them. Pure. */
bool vgpu_pcie_rate(const struct vgpu_pcie_count *a, const struct vgpu_pcie_count *b, double *bps);
/* The window (ms) to measure over with this counter: want_ms, shortened for a 32-bit counter
 * to what cannot wrap unseen. Pure. */
unsigned vgpu_pcie_window_ms(unsigned bits, unsigned want_ms);
/* Reads, waits the window (vgpu_pcie_window_ms of want_ms), reads again. false when the GPU has
 * no counter. *last gets the second reading (for the next interval), when not NULL. */
bool vgpu_pcie_sample(struct vgpu_nvml *nv, nvmlDevice_t h, unsigned want_ms, double *bps,
                      struct vgpu_pcie_count *last);
/* The physical GPU whose link a device's traffic crosses: h itself, or a MIG device's parent
 * (the counters are the whole GPU's). NULL when it cannot be told. */
nvmlDevice_t vgpu_pcie_device(struct vgpu_nvml *nv, nvmlDevice_t h);

/* A job's share of its GPU's rate: in proportion to its bytes off the device there among all
 * jobs' (off_total); 0 for a job with nothing off it. Pure. */
double vgpu_migration_share(double gpu_bps, uint64_t off, uint64_t off_total);
/* "1.2 GB/s", "350 MB/s", "12 kB/s" (decimal units, as link speeds are given). Returns buf. */
char *vgpu_format_rate(double bps, char *buf, size_t len);

#endif
