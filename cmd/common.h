/* Helpers shared by the commands (cmd/common.c). */
#ifndef VGPU_CMD_COMMON_H
#define VGPU_CMD_COMMON_H

#include "vgpu/closest.h"

/* "SIGTERM" for a signal number, or "SIG<n>" (in buf) for one without a name here. */
const char *vgpu_signal_name(int sig, char *buf, size_t len);

#endif
