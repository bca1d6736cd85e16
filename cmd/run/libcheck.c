/* Tells libvgpu.so from any other file by its ELF note (see libcheck.h and lib/hook/note.c).
 * The file is read, not loaded: dlopen would run its constructors inside vgpu. */
#include "run/libcheck.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/exitcode.h"

#define VGPU_NOTE_TYPE 0x76677075u  /* lib/hook/note.c */

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#endif

static bool read_at(int fd, void *buf, size_t len, off_t off)
{
    return pread(fd, buf, len, off) == (ssize_t)len;
}

/* Walks one SHT_NOTE section; copies the vgpu note's version into ver. */
static bool find_note(const unsigned char *p, size_t n, char *ver, size_t vlen)
{
    size_t off = 0;
    while (off + 12 <= n) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, p + off, 4);
        memcpy(&descsz, p + off + 4, 4);
        memcpy(&type, p + off + 8, 4);
        size_t name_at = off + 12, name_len = ((size_t)namesz + 3) & ~(size_t)3;
        size_t desc_at = name_at + name_len, desc_len = ((size_t)descsz + 3) & ~(size_t)3;
        if (namesz > n || descsz > n || desc_at + desc_len > n)
            return false;
        if (type == VGPU_NOTE_TYPE && namesz == 5 && memcmp(p + name_at, "vgpu", 5) == 0) {
            size_t k = descsz < vlen - 1 ? descsz : vlen - 1;
            memcpy(ver, p + desc_at, k);
            ver[k] = 0;
            return true;
        }
        off = desc_at + desc_len;
    }
    return false;
}

int vgpu_run_check_library(const char *path, const char *source, struct vgpu_err *e)
{
    const char *src = source ? source : "the preload library";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "%s %s: cannot read it: %s", src, path, strerror(errno));
        return -1;
    }
    const char *why = NULL;
    char ver[64] = "";
    bool found = false;
    struct stat st;
    Elf64_Ehdr eh;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        why = "it is not a regular file";
    else if (!read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        why = "it is not an ELF shared library";
    else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN
#ifdef HOST_MACHINE
             || eh.e_machine != HOST_MACHINE
#endif
    )
        why = "it is not a shared library for this machine";
    else if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
             eh.e_shoff > (uint64_t)st.st_size)
        why = "its section table cannot be read";
    for (unsigned i = 0; !why && !found && i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        if (!read_at(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + (uint64_t)i * sizeof sh))) {
            why = "its section table cannot be read";
            break;
        }
        if (sh.sh_type != SHT_NOTE || sh.sh_size == 0 || sh.sh_size > 65536 ||
            sh.sh_offset + sh.sh_size > (uint64_t)st.st_size)
            continue;
        unsigned char *buf = malloc(sh.sh_size);
        if (buf && read_at(fd, buf, sh.sh_size, (off_t)sh.sh_offset))
            found = find_note(buf, sh.sh_size, ver, sizeof ver);
        free(buf);
    }
    close(fd);
    if (!why && !found)
        why = "it has no vgpu version note, so it is another library (preloading it would run the job with no "
              "limits)";
    if (why) {
        /* An environment variable is pointed elsewhere or unset; an option or a file is given anew. */
        bool var = !source || strcmp(source, "VGPU_LIBRARY") == 0;
        vgpu_err_set(e, VGPU_EXIT_FAIL, "%s %s is not libvgpu.so: %s; %s the libvgpu.so that comes with vgpu %s%s",
                     src, path, why, var ? "point VGPU_LIBRARY at" : "give", VGPU_VERSION, var ? ", or unset it" : "");
        return -1;
    }
    if (strcmp(ver, VGPU_VERSION) != 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "%s %s is libvgpu.so %s, but this vgpu is %s: the job region would be "
                     "misread; use the libvgpu.so of vgpu %s", src, path, ver, VGPU_VERSION, VGPU_VERSION);
        return -1;
    }
    return 0;
}
