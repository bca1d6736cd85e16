/* tests/cli/glibc.sh: a program linked like vgpu (glibc_compat.h force-included, lib/compat/start.c
 * as its entry glue) must behave like any program: its constructors run before main with argc and
 * argv, main's status is the exit status, atexit handlers and destructors run at exit, and the
 * old-version bindings of pthread_* and dl* work. Prints one line per step. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int ctor_argc = -1;

__attribute__((constructor)) static void ctor(int argc, char **argv, char **envp)
{
    (void)argv;
    (void)envp;
    ctor_argc = argc;
}

__attribute__((destructor)) static void dtor(void)
{
    printf("destructor\n");
    fflush(stdout);
}

static void at_exit(void)
{
    printf("atexit\n");
}

static void *thread_main(void *arg)
{
    return (char *)arg + 1;
}

int main(int argc, char **argv)
{
    atexit(at_exit);
    printf("constructor argc=%d main argc=%d arg=%s\n", ctor_argc, argc, argc > 1 ? argv[1] : "");
    pthread_t t;
    void *res = NULL;
    static char buf[2];
    int rc = pthread_create(&t, NULL, thread_main, buf);
    if (rc == 0)
        rc = pthread_join(t, &res);
    printf("thread rc=%d ok=%d\n", rc, res == buf + 1);
    void *h = dlopen("libc.so.6", RTLD_NOW);
    printf("dlsym getpid=%s\n", h && dlsym(h, "getpid") ? "found" : dlerror());
    struct stat st;
    printf("stat=%d fstat=%d\n", stat("/", &st) == 0 && S_ISDIR(st.st_mode),
           fstat(1, &st) == 0);
    return 7;
}
