/* vgpu run's last look at a job, off its caller's path (issue 34 item 1). See finisher.c. */
#ifndef VGPU_CMD_RUN_FINISHER_H
#define VGPU_CMD_RUN_FINISHER_H

#include <stdbool.h>
#include "vgpu/region.h"

/* At the job's end (r EXITED, opened ADMIN): when the record must wait for the job's last NVML
 * sampling window, or its last look reads NVML at all, hands that look and the record to a
 * detached finisher process, which becomes the job's adopter first, and returns true: the caller
 * then exits without writing the record. false: nothing to read or wait for, or the finisher
 * could not start; the caller records now. */
bool vgpu_run_finish_later(struct vgpu_region *r);

#endif
