/* Is a file really libvgpu.so, of this vgpu's version? (lib/hook/note.c writes the note.) */
#ifndef VGPU_CMD_RUN_LIBCHECK_H
#define VGPU_CMD_RUN_LIBCHECK_H

#include "vgpu/log.h"

/* Reads the ELF file at path (never loads it) and looks for libvgpu.so's version note.
 * 0 when it is there with VGPU_VERSION; -1 with e set (VGPU_EXIT_FAIL) when the file is not an
 * ELF library of this machine, has no note (another library: preloading it would run the job
 * with no limits), or is another version. `source` says where the path came from
 * ("VGPU_LIBRARY", "--library", "the spec's mount"), for the message; NULL or VGPU_LIBRARY
 * advise pointing the variable elsewhere, anything else advise giving the right file. */
int vgpu_run_check_library(const char *path, const char *source, struct vgpu_err *e);

#endif
