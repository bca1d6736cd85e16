/* Old-glibc support for the SQLite vgpu carries (issue 28; see start.c for json-c's): Debian's
 * libsqlite3.a was compiled against the build host's glibc and calls fcntl64, stat64, fstat64,
 * lstat64 (glibc 2.28/2.33), exp, log, pow (new versions in 2.29), and dl* and some pthread_*
 * (moved into libc in 2.34). The Makefile copies the archive with those references renamed to
 * vgpu_compat_NAME (objcopy --redefine-sym; SQLITE_COMPAT_SYMS), and they land here, where this
 * file's own calls bind to what old glibc has (glibc_compat.h, force-included, and the .symver
 * lines below for libm). Definitions of the plain names instead would clash with the .symver
 * bindings that glibc_compat.h gives those names in every object of ours.
 * LP64 only (x86-64, aarch64): there struct stat64 is struct stat and off64_t is off_t. */
#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/stat.h>

#if defined(__x86_64__)
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver exp,exp@GLIBC_2.17");
__asm__(".symver log,log@GLIBC_2.17");
__asm__(".symver pow,pow@GLIBC_2.17");
#endif

/* Declared here: nothing else calls them by these names but the renamed archive. */
int vgpu_compat_fcntl64(int fd, int cmd, ...);
int vgpu_compat_stat64(const char *path, struct stat *st);
int vgpu_compat_fstat64(int fd, struct stat *st);
int vgpu_compat_lstat64(const char *path, struct stat *st);
double vgpu_compat_exp(double x);
double vgpu_compat_log(double x);
double vgpu_compat_pow(double x, double y);
void *vgpu_compat_dlopen(const char *file, int mode);
char *vgpu_compat_dlerror(void);
void *vgpu_compat_dlsym(void *handle, const char *name);
int vgpu_compat_dlclose(void *handle);
int vgpu_compat_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
int vgpu_compat_pthread_join(pthread_t t, void **ret);
int vgpu_compat_pthread_mutexattr_init(pthread_mutexattr_t *a);
int vgpu_compat_pthread_mutexattr_settype(pthread_mutexattr_t *a, int type);
int vgpu_compat_pthread_mutexattr_destroy(pthread_mutexattr_t *a);
int vgpu_compat_pthread_mutex_trylock(pthread_mutex_t *m);

/* SQLite passes an int or a pointer (struct flock *): both fit a pointer-sized argument. */
int vgpu_compat_fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}

int vgpu_compat_stat64(const char *path, struct stat *st) { return stat(path, st); }
int vgpu_compat_fstat64(int fd, struct stat *st) { return fstat(fd, st); }
int vgpu_compat_lstat64(const char *path, struct stat *st) { return lstat(path, st); }
double vgpu_compat_exp(double x) { return exp(x); }
double vgpu_compat_log(double x) { return log(x); }
double vgpu_compat_pow(double x, double y) { return pow(x, y); }
void *vgpu_compat_dlopen(const char *file, int mode) { return dlopen(file, mode); }
char *vgpu_compat_dlerror(void) { return dlerror(); }
void *vgpu_compat_dlsym(void *handle, const char *name) { return dlsym(handle, name); }
int vgpu_compat_dlclose(void *handle) { return dlclose(handle); }
int vgpu_compat_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    return pthread_create(t, a, fn, arg);
}
int vgpu_compat_pthread_join(pthread_t t, void **ret) { return pthread_join(t, ret); }
int vgpu_compat_pthread_mutexattr_init(pthread_mutexattr_t *a) { return pthread_mutexattr_init(a); }
int vgpu_compat_pthread_mutexattr_settype(pthread_mutexattr_t *a, int type) { return pthread_mutexattr_settype(a, type); }
int vgpu_compat_pthread_mutexattr_destroy(pthread_mutexattr_t *a) { return pthread_mutexattr_destroy(a); }
int vgpu_compat_pthread_mutex_trylock(pthread_mutex_t *m) { return pthread_mutex_trylock(m); }
