/* Helpers shared by the commands (cmd/common.c). */
#ifndef VGPU_CMD_COMMON_H
#define VGPU_CMD_COMMON_H

#include <stddef.h>

size_t vgpu_edit_distance(const char *a, const char *b);
/* The candidate closest to `bad`, or NULL when none is close enough to suggest. */
const char *vgpu_closest(const char *bad, const char *const *cands, size_t n);

/* "SIGTERM" for a signal number, or "SIG<n>" (in buf) for one without a name here. */
const char *vgpu_signal_name(int sig, char *buf, size_t len);

#endif
