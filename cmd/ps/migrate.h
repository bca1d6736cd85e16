/* vgpu ps's rate of migration of spilled memory (issue 15, item 4; vgpu/migration.h for the
 * source and its limits). ps is one-shot, so it measures over a short window of its own: before
 * listing, it finds the GPUs where a job it can see has memory off the device, reads their PCIe
 * byte counters, waits VGPU_MIGRATION_WINDOW_MS (100 ms; less for a 32-bit counter) once for
 * all of them, and reads again. Without such a job it waits for nothing, and without an
 * oversubscribed job it does none of this (the measurement happens at the first question about
 * an oversubscribed job). */
#ifndef VGPU_PS_MIGRATE_H
#define VGPU_PS_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "vgpu/migration.h"
#include "vgpu/region.h"

struct ps_migration;

/* Prepares the measurement of the jobs refs[0..n) (kept, not copied: they must outlive it);
 * NULL when out of memory or without NVML (every rate is then unknown). */
struct ps_migration *ps_migration_new(struct vgpu_nvml *nv, const struct vgpu_job_ref *refs, size_t n);
/* A job's rate on its job GPU d: true with *bps, false when unknown (not oversubscribed there,
 * no counter on that GPU, the job has ended). The first call for an oversubscribed job
 * measures (see above). */
bool ps_migration_of(struct ps_migration *pm, const struct vgpu_region *r, unsigned d, double *bps);
void ps_migration_free(struct ps_migration *pm);

#endif
