/* The HTTP side of 'vgpu metrics --listen': answers GET /metrics to many clients at once. */
#ifndef VGPU_CMD_METRICS_SERVE_H
#define VGPU_CMD_METRICS_SERVE_H

#include <stddef.h>
#include "vgpu/log.h"

/* The exposition text, freshly read (malloc'd), or NULL with e set. */
typedef char *(*vgpu_metrics_body_fn)(size_t *len, struct vgpu_err *e);

/* Serves on the listening socket lfd until an accept fails for good (then an exit code, the
 * message printed); addr is only for messages. */
int vgpu_metrics_serve(int lfd, const char *addr, vgpu_metrics_body_fn body);

#endif
