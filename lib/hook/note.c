/* An ELF note that says "this is libvgpu.so, version V", so that vgpu run can tell its own
 * library from any other file VGPU_LIBRARY points at, without loading it (cmd/run/libcheck.c).
 * An exported symbol would do too, but every name libvgpu.so exports is also exported by the
 * driver or libc (exports.map); a note adds no symbol and costs nothing at load time. */
#include <stdint.h>

#define VGPU_NOTE_TYPE 0x76677075u  /* "vgpu" */

struct vgpu_note {
    uint32_t namesz, descsz, type;
    char name[8];                   /* "vgpu\0", padded to 4 bytes */
    char desc[32];                  /* VGPU_VERSION, NUL-padded */
};

__attribute__((section(".note.vgpu"), aligned(4), used))
static const struct vgpu_note vgpu_library_note = {
    .namesz = 5,
    .descsz = 32,
    .type = VGPU_NOTE_TYPE,
    .name = "vgpu",
    .desc = VGPU_VERSION,
};
