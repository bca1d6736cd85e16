/* vgpu acct: the times --since and --until take. */
#ifndef VGPU_CMD_ACCT_WHEN_H
#define VGPU_CMD_ACCT_WHEN_H

#include <stdint.h>
#include "vgpu/log.h"

#define VGPU_ACCT_WHEN_LAST ((uint64_t)INT64_MAX)

/* "2026-11-01" (local midnight), "2026-11-01T14:30" or "2026-11-01 14:30[:SS]" (local time),
 * "-7d", "-2h", "-30m", "-90s" (before now), "now", or "@SECONDS" since the epoch: CLOCK_REALTIME
 * ns into *ns (VGPU_ACCT_WHEN_LAST for a time after 2262, when 64-bit signed ns end). 0, or -1
 * with e set (VGPU_EXIT_USAGE) saying what is accepted; a date or time that does not exist
 * (2026-02-30, 18:34:61) is refused, never normalised into another. */
int vgpu_acct_parse_when(const char *text, const char *option, uint64_t now_ns, uint64_t *ns, struct vgpu_err *e);

#endif
