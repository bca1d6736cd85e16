/* Old-glibc support for the vgpu executable alone (issue 19; lib/include/vgpu/glibc_compat.h
 * does the same for our own code). Two things are outside our sources' reach:
 *
 * 1. The static libraries vgpu carries (json-c, readline, ncurses) were compiled against the
 *    build host's glibc and call stat, fstat, lstat and getrandom, which are symbols of glibc
 *    2.33 and 2.25. Their references are unversioned in the archives, so definitions of those
 *    names in the executable itself satisfy them first, and ours call what old glibc has.
 *
 * 2. The start file (Scrt1.o) of glibc >= 2.34 calls __libc_start_main@GLIBC_2.34. That version
 *    expects libc to find the program's constructors itself; the old one, @GLIBC_2.2.5, which
 *    libc still exports, runs the `init` function it is given instead (before 2.34 that was
 *    __libc_csu_init from libc_nonshared.a, which no longer exists). So the executable defines
 *    __libc_start_main: the start file's unversioned reference binds to it, and it calls the old
 *    version with an init function that does what __libc_csu_init did for a dynamically linked
 *    program: run _init and then .init_array. Current glibc, given an init function, takes that
 *    same path for old programs, so the behaviour is one on old and new glibc.
 *    (The dynamic loader runs .preinit_array and every shared object's constructors; the
 *    destructors are the loader's at exit, on old and new glibc alike.)
 *
 * Not built into libvgpu.so (a shared object has no start file and gets the header only). */
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#undef stat
#undef lstat
#undef fstat
#undef getrandom

#if defined(__x86_64__)
#define VGPU_STAT_VER 1
#define VGPU_LIBC_START_OLD "__libc_start_main@GLIBC_2.2.5"
#elif defined(__aarch64__)
#define VGPU_STAT_VER 0
#define VGPU_LIBC_START_OLD "__libc_start_main@GLIBC_2.17"
#else
#error "lib/compat/start.c knows the old glibc ABI of x86-64 and aarch64 only"
#endif

extern int __xstat(int ver, const char *path, struct stat *st);
extern int __lxstat(int ver, const char *path, struct stat *st);
extern int __fxstat(int ver, int fd, struct stat *st);

int stat(const char *restrict path, struct stat *restrict st)
{
    return __xstat(VGPU_STAT_VER, path, st);
}

int lstat(const char *restrict path, struct stat *restrict st)
{
    return __lxstat(VGPU_STAT_VER, path, st);
}

int fstat(int fd, struct stat *st)
{
    return __fxstat(VGPU_STAT_VER, fd, st);
}

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    return (ssize_t)syscall(SYS_getrandom, buf, len, flags);
}

typedef int (*vgpu_main_fn)(int, char **, char **);
typedef void (*vgpu_init_fn)(int, char **, char **);

/* The old libc entry point, under a name of our own bound to its old version. */
int vgpu_old_libc_start_main(vgpu_main_fn main_fn, int argc, char **argv, vgpu_init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
__asm__(".symver vgpu_old_libc_start_main," VGPU_LIBC_START_OLD);

/* Provided by the linker (the default linker script) and by crti.o. */
extern vgpu_init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern vgpu_init_fn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

static void vgpu_run_constructors(int argc, char **argv, char **envp)
{
    _init();
    size_t n = (size_t)(__init_array_end - __init_array_start);
    for (size_t i = 0; i < n; i++)
        __init_array_start[i](argc, argv, envp);
}

/* Hidden: the start file's reference binds to it inside the executable, and it stays out of the
 * dynamic symbol table, where it would also satisfy the versioned reference above and call
 * itself. */
__attribute__((visibility("hidden"))) int
__libc_start_main(vgpu_main_fn main_fn, int argc, char **argv, vgpu_init_fn init,
                  void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
int __libc_start_main(vgpu_main_fn main_fn, int argc, char **argv, vgpu_init_fn init,
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    /* Scrt1.o of glibc >= 2.34 passes no init and fini; ours replace them. */
    (void)init;
    (void)fini;
    return vgpu_old_libc_start_main(main_fn, argc, argv, vgpu_run_constructors, NULL, rtld_fini,
                                    stack_end);
}
