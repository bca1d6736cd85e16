/* The accounting side of 'vgpu metrics': cumulative per-user totals from the job records
 * (vgpu/acct.h), which survive the jobs' ends (issue 28 item 4). */
#ifndef VGPU_CMD_METRICS_ACCT_H
#define VGPU_CMD_METRICS_ACCT_H

#include <stddef.h>
#include "vgpu/acct.h"

/* The totals per user and GPU of every record in this user's store (root's: every job root
 * recorded, its --user jobs included), malloc'd in *out; 0 when there is no store yet or it
 * cannot be read now (said at debug level: a scrape never fails for it); *from: where they came
 * from (vgpu_acct_records_source). */
size_t vgpu_metrics_user_totals(struct vgpu_acct_total **out, struct vgpu_acct_origin *from);

#endif
