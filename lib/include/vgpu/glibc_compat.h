/* Old-glibc binding for everything that goes into libvgpu.so and vgpu (issue 19).
 *
 * The Makefile force-includes this header (-include) into every object of lib/core, lib/hook,
 * lib/compat and cmd/. Nothing includes it by hand.
 *
 * Why: libvgpu.so is preloaded into the user's processes, which often run in a container whose
 * glibc is older than the build host's. A reference to a symbol binds to its newest ("default")
 * version at link time, e.g. dlopen@GLIBC_2.34 on Debian 12, and the loader then refuses the
 * library on any glibc older than that. glibc keeps every old version of a symbol exported for
 * old binaries, so naming the old version here gives a library that loads on old and new glibc
 * alike. The floor is GLIBC_2.17 for libvgpu.so and GLIBC_2.28 for vgpu; tests/cli/glibc.sh
 * reads the built files and fails on anything newer.
 *
 * The rule for each symbol: bind to the NEWEST version that is not newer than 2.17, never simply
 * the oldest (pthread_cond_wait@GLIBC_2.2.5, for example, is a different, older ABI than @2.3.2;
 * it is not in this list because its current version is old enough already). The list holds the
 * symbols whose current version on glibc 2.36 is newer than 2.17 and whose old version has the
 * same ABI: the dl* and pthread_* functions that moved from libdl/libpthread into libc in 2.34,
 * and the sem_*, shm_* and timer_* that moved there from librt. They are aliases of the same code
 * in libc.so.6 today. On glibc < 2.34 they live in libdl.so.2, libpthread.so.0 and librt.so.1,
 * so libvgpu.so and vgpu also name libdl.so.2 and libpthread.so.0 as DT_NEEDED (the Makefile's
 * GLIBC_COMPAT_LIBS); the version names match there, which is all the loader compares.
 *
 * Left out on purpose, because the old version behaves differently: fmemopen (2.22), glob and
 * glob64 (2.27), quick_exit (2.24). __libc_start_main (2.34) is the start files' business, see
 * lib/compat/start.c.
 *
 * Functions old glibc does not have at all are replaced below by what they do (stat, fstat, lstat
 * and fstatat became real symbols only in 2.33; getrandom arrived in 2.25, and a few newer
 * system-call wrappers are the system call itself).
 *
 * On aarch64 every symbol's oldest version is GLIBC_2.17, the port's first release. */
#ifndef VGPU_GLIBC_COMPAT_H
#define VGPU_GLIBC_COMPAT_H

#include <features.h>
#if defined(__GLIBC__)

#if defined(__x86_64__)
#define VGPU_GLIBC_OLD(sym, x86_64_version) \
    __asm__(".symver " #sym "," #sym "@GLIBC_" #x86_64_version);
#elif defined(__aarch64__)
#define VGPU_GLIBC_OLD(sym, x86_64_version) __asm__(".symver " #sym "," #sym "@GLIBC_2.17");
#else
#define VGPU_GLIBC_OLD(sym, x86_64_version)
#endif

/* dl*: libdl.so.2 before 2.34. route.c defines dlsym itself (our override), so it must not get
 * a versioned alias of its own definition: the Makefile sets VGPU_GLIBC_OWN_DLSYM there. */
VGPU_GLIBC_OLD(dladdr, 2.2.5)
VGPU_GLIBC_OLD(dladdr1, 2.3.3)
VGPU_GLIBC_OLD(dlclose, 2.2.5)
VGPU_GLIBC_OLD(dlerror, 2.2.5)
VGPU_GLIBC_OLD(dlinfo, 2.3.3)
VGPU_GLIBC_OLD(dlmopen, 2.3.4)
VGPU_GLIBC_OLD(dlopen, 2.2.5)
#ifndef VGPU_GLIBC_OWN_DLSYM
VGPU_GLIBC_OLD(dlsym, 2.2.5)
#endif
VGPU_GLIBC_OLD(dlvsym, 2.2.5)

/* pthread_*: libpthread.so.0 before 2.34 (pthread_sigmask was in libc as well). */
VGPU_GLIBC_OLD(pthread_attr_getaffinity_np, 2.3.4)
VGPU_GLIBC_OLD(pthread_attr_getguardsize, 2.2.5)
VGPU_GLIBC_OLD(pthread_attr_getstack, 2.2.5)
VGPU_GLIBC_OLD(pthread_attr_getstacksize, 2.2.5)
VGPU_GLIBC_OLD(pthread_attr_setaffinity_np, 2.3.4)
VGPU_GLIBC_OLD(pthread_attr_setguardsize, 2.2.5)
VGPU_GLIBC_OLD(pthread_attr_setstack, 2.2.5)
VGPU_GLIBC_OLD(pthread_attr_setstacksize, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrier_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrier_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrier_wait, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrierattr_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrierattr_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_barrierattr_setpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_cancel, 2.2.5)
VGPU_GLIBC_OLD(pthread_condattr_getclock, 2.3.3)
VGPU_GLIBC_OLD(pthread_condattr_getpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_condattr_setclock, 2.3.3)
VGPU_GLIBC_OLD(pthread_condattr_setpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_create, 2.2.5)
VGPU_GLIBC_OLD(pthread_detach, 2.2.5)
VGPU_GLIBC_OLD(pthread_getaffinity_np, 2.3.4)
VGPU_GLIBC_OLD(pthread_getattr_np, 2.2.5)
VGPU_GLIBC_OLD(pthread_getcpuclockid, 2.2.5)
VGPU_GLIBC_OLD(pthread_getname_np, 2.12)
VGPU_GLIBC_OLD(pthread_getspecific, 2.2.5)
VGPU_GLIBC_OLD(pthread_join, 2.2.5)
VGPU_GLIBC_OLD(pthread_key_create, 2.2.5)
VGPU_GLIBC_OLD(pthread_key_delete, 2.2.5)
VGPU_GLIBC_OLD(pthread_kill, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutex_consistent, 2.12)
VGPU_GLIBC_OLD(pthread_mutex_timedlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutex_trylock, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_getpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_getrobust, 2.12)
VGPU_GLIBC_OLD(pthread_mutexattr_gettype, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_setpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_mutexattr_setrobust, 2.12)
VGPU_GLIBC_OLD(pthread_mutexattr_settype, 2.2.5)
VGPU_GLIBC_OLD(pthread_once, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_rdlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_timedrdlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_timedwrlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_tryrdlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_trywrlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_unlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlock_wrlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlockattr_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlockattr_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_rwlockattr_setpshared, 2.2.5)
VGPU_GLIBC_OLD(pthread_setaffinity_np, 2.3.4)
VGPU_GLIBC_OLD(pthread_setname_np, 2.12)
VGPU_GLIBC_OLD(pthread_setschedprio, 2.3.4)
VGPU_GLIBC_OLD(pthread_setspecific, 2.2.5)
VGPU_GLIBC_OLD(pthread_sigmask, 2.2.5)
VGPU_GLIBC_OLD(pthread_spin_destroy, 2.2.5)
VGPU_GLIBC_OLD(pthread_spin_init, 2.2.5)
VGPU_GLIBC_OLD(pthread_spin_lock, 2.2.5)
VGPU_GLIBC_OLD(pthread_spin_trylock, 2.2.5)
VGPU_GLIBC_OLD(pthread_spin_unlock, 2.2.5)
VGPU_GLIBC_OLD(pthread_testcancel, 2.2.5)
VGPU_GLIBC_OLD(pthread_timedjoin_np, 2.3.3)
VGPU_GLIBC_OLD(pthread_tryjoin_np, 2.3.3)

/* librt.so.1 before 2.34. Using them needs librt.so.1 in GLIBC_COMPAT_LIBS too. */
VGPU_GLIBC_OLD(sem_close, 2.2.5)
VGPU_GLIBC_OLD(sem_destroy, 2.2.5)
VGPU_GLIBC_OLD(sem_getvalue, 2.2.5)
VGPU_GLIBC_OLD(sem_init, 2.2.5)
VGPU_GLIBC_OLD(sem_open, 2.2.5)
VGPU_GLIBC_OLD(sem_post, 2.2.5)
VGPU_GLIBC_OLD(sem_timedwait, 2.2.5)
VGPU_GLIBC_OLD(sem_trywait, 2.2.5)
VGPU_GLIBC_OLD(sem_unlink, 2.2.5)
VGPU_GLIBC_OLD(sem_wait, 2.2.5)
VGPU_GLIBC_OLD(shm_open, 2.2.5)
VGPU_GLIBC_OLD(shm_unlink, 2.2.5)
VGPU_GLIBC_OLD(timer_create, 2.3.3)
VGPU_GLIBC_OLD(timer_delete, 2.3.3)
VGPU_GLIBC_OLD(timer_getoverrun, 2.3.3)
VGPU_GLIBC_OLD(timer_gettime, 2.3.3)
VGPU_GLIBC_OLD(timer_settime, 2.3.3)

#undef VGPU_GLIBC_OLD

/* stat, fstat, lstat: before 2.33 the headers turned them into calls of __xstat, __fxstat and
 * __lxstat (with the struct-layout version as first argument), which libc still exports for old
 * binaries. The kernel's and glibc's struct stat agree on x86-64 (layout version 1) and on
 * aarch64 (version 0). Other architectures keep today's functions. */
#include <sys/stat.h>
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define VGPU_STAT_VER 1
#else
#define VGPU_STAT_VER 0
#endif
extern int __xstat(int ver, const char *path, struct stat *st);
extern int __lxstat(int ver, const char *path, struct stat *st);
extern int __fxstat(int ver, int fd, struct stat *st);
extern int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
#define stat(path, st) __xstat(VGPU_STAT_VER, (path), (st))
#define lstat(path, st) __lxstat(VGPU_STAT_VER, (path), (st))
#define fstat(fd, st) __fxstat(VGPU_STAT_VER, (fd), (st))
#define fstatat(dirfd, path, st, flags) __fxstatat(VGPU_STAT_VER, (dirfd), (path), (st), (flags))
#endif

/* getrandom (2.25): the system call itself, which every kernel since 3.17 has; a caller that
 * gets ENOSYS from an older kernel handles it as it handles any other failure. */
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#define getrandom(buf, len, flags) ((ssize_t)syscall(SYS_getrandom, (buf), (len), (flags)))

/* Newer system-call wrappers, the same way (each header is included first, so that its own
 * declaration is not rewritten by the macro): gettid (2.30), renameat2 (2.28), memfd_create
 * (2.27), close_range (2.34). */
#include <stdio.h>
#include <sys/mman.h>
#define gettid() ((pid_t)syscall(SYS_gettid))
#define renameat2(olddirfd, oldpath, newdirfd, newpath, flags) \
    ((int)syscall(SYS_renameat2, (olddirfd), (oldpath), (newdirfd), (newpath), (flags)))
#define memfd_create(name, flags) ((int)syscall(SYS_memfd_create, (name), (flags)))
#define close_range(first, last, flags) ((int)syscall(SYS_close_range, (first), (last), (flags)))

#endif /* __GLIBC__ */
#endif /* VGPU_GLIBC_COMPAT_H */
