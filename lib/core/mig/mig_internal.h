/* What the MIG files of lib/core/mig share (vgpu/mig.h): mig_read.c reads a GPU's profiles and
 * instances, mig_plan.c parses and places a layout and matches it against what exists,
 * mig_change.c creates and destroys instances. */
#ifndef VGPU_MIG_INTERNAL_H
#define VGPU_MIG_INTERNAL_H

#include <string.h>

/* Copies with truncation (names are short; this keeps -Wformat-truncation quiet). */
static inline void cpy(char *dst, size_t len, const char *src)
{
    size_t l = strnlen(src, len - 1);
    memcpy(dst, src, l);
    dst[l] = 0;
}

#endif
