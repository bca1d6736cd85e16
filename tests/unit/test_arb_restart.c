/* A restarted arbiter and the promises of the running jobs (cmd/daemon/place.c, holders.c), through
 * its request handler alone: the daemon names whom it serves in its holders file; one that starts
 * and finds a holder alive there answers every other client's look, promise and count "try again"
 * (-EAGAIN) until that holder has made its promise and count again, while the holder itself, and
 * its promises made again, pass. A holder that ended, or whose pid is another process's now, is not
 * waited for, and a file that is not the daemon's own (another user's, open to others, a symbolic
 * link, one that does not parse, another boot's) is not believed. The 1 s bound is the one rule
 * with time in it (the last test). Links cmd/daemon's objects (the Makefile's DAEMON_UNIT_BINS). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/server.h"
#include "vgpu/proc.h"

#define UUID "GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91"

struct world {
    struct arbiter a;
    char dir[64];
    int dfd;
    struct arb_client holder;   /* this process: the job's vgpu run of the daemon before */
    struct arb_client other;    /* our parent: a newcomer's vgpu run */
};

static char boot[64];

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    snprintf(w->dir, sizeof w->dir, "/tmp/vgpu-test-restart.XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    w->dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(w->dfd >= 0);
    w->holder = (struct arb_client){ .fd = -1, .id = 1, .pid = getpid(), .uid = 1000, .login = 1000 };
    w->other = (struct arb_client){ .fd = -1, .id = 2, .pid = getppid(), .uid = 1001, .login = 1001 };
    if (!boot[0]) {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
        assert_non_null(f);
        assert_non_null(fgets(boot, sizeof boot, f));
        fclose(f);
        boot[strcspn(boot, "\n")] = 0;
    }
    if (!getenv("VGPU_MACHINE_DIR"))
        setenv("VGPU_MACHINE_DIR", w->dir, 1);   /* root's policy (none) for the job count */
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    arb_place_free(&w->a);
    unlinkat(w->dfd, ARB_HOLDERS_FILE, 0);
    close(w->dfd);
    rmdir(w->dir);
    free(w);
    return 0;
}

/* One request of placement or the job count: its reply's rc (msg into why, when given). */
static int ask(struct world *w, struct arb_client *c, uint32_t op, uint64_t a0, uint64_t a1, char *why)
{
    struct vgpu_arb_gpu_bytes g = { .bytes = 1ULL << 30 };
    snprintf(g.uuid, sizeof g.uuid, UUID);
    struct vgpu_arb_req q = { .op = op, .len = sizeof g, .a = { a0, a1 } };
    struct vgpu_arb_rep r = { 0 };
    static char out[VGPU_ARB_MAX_PAYLOAD];
    arb_place_handle(&w->a, c, &q, &g, &r, out);
    if (why)
        snprintf(why, 160, "%s", r.msg);
    return r.rc;
}

static int look(struct world *w, struct arb_client *c) { return ask(w, c, VGPU_ARB_PL_LOOK, 0, 0, NULL); }
static int enter(struct world *w, struct arb_client *c) { return ask(w, c, VGPU_ARB_JC_ENTER, 0, 0, NULL); }

/* The holders file, as a daemon before this one would have left it (mode, content). */
static void leave(struct world *w, mode_t mode, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void leave(struct world *w, mode_t mode, const char *fmt, ...)
{
    int fd = openat(w->dfd, ARB_HOLDERS_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    va_list ap;
    va_start(ap, fmt);
    assert_true(vdprintf(fd, fmt, ap) > 0);
    va_end(ap);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

/* A holders file naming this process (kinds: what it held; start: its start time, or another). */
static void leave_us(struct world *w, unsigned kinds, uint64_t start)
{
    leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 %u 0123456789ab\n", boot, (int)getpid(),
          (unsigned long long)start, kinds);
}

static char *read_holders(struct world *w)
{
    static char buf[4096];
    int fd = openat(w->dfd, ARB_HOLDERS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = 0;
    return buf;
}

static void test_fresh_daemon_never_waits_and_names_its_holders(void **state)
{
    struct world *w = *state;
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(look(w, &w->other), 0);
    char want[160];
    snprintf(want, sizeof want, "vgpu-holders 1 %s\n", boot);
    assert_string_equal(read_holders(w), want);
    /* a promise and a place in the count: one holder, both kinds; its job named later */
    assert_int_equal(ask(w, &w->holder, VGPU_ARB_PL_PROMISE, 0, 1, NULL), 0);
    assert_int_equal(enter(w, &w->holder), 0);
    arb_place_job_named(&w->a, &w->holder, "0123456789ab");
    snprintf(want, sizeof want, "vgpu-holders 1 %s\n%d %llu 1000 3 0123456789ab\n", boot, (int)getpid(),
             (unsigned long long)vgpu_proc_start_time(getpid()));
    assert_string_equal(read_holders(w), want);
    /* its connection gone, it holds nothing: it leaves the file at the next request 100 ms after the
     * last write (a holder that holds less costs no write at once) */
    arb_place_client_gone(&w->a, &w->holder);
    assert_string_equal(read_holders(w), want);
    nanosleep(&(struct timespec){ 0, 110 * 1000 * 1000 }, NULL);
    assert_int_equal(look(w, &w->other), 0);
    snprintf(want, sizeof want, "vgpu-holders 1 %s\n", boot);
    assert_string_equal(read_holders(w), want);
}

/* A holder that leaves the count and enters it again, over and over, costs no write. */
static void test_leave_and_enter_again_writes_nothing(void **state)
{
    struct world *w = *state;
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(enter(w, &w->holder), 0);
    struct stat before, after;
    assert_int_equal(fstatat(w->dfd, ARB_HOLDERS_FILE, &before, 0), 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(ask(w, &w->holder, VGPU_ARB_JC_LEAVE, 0, 0, NULL), 0);
        assert_int_equal(enter(w, &w->holder), 0);
    }
    assert_int_equal(fstatat(w->dfd, ARB_HOLDERS_FILE, &after, 0), 0);
    assert_int_equal(before.st_ino, after.st_ino);   /* written by a rename: a new inode each time */
}

static void test_others_wait_until_the_holder_is_back(void **state)
{
    struct world *w = *state;
    leave_us(w, ARB_HELD_PROMISE | ARB_HELD_COUNT, vgpu_proc_start_time(getpid()));
    arb_place_start(&w->a, w->dfd, w->dir);
    char why[160];
    assert_int_equal(ask(w, &w->other, VGPU_ARB_PL_LOOK, 0, 0, why), -EAGAIN);
    assert_non_null(strstr(why, "try again"));
    assert_int_equal(enter(w, &w->other), -EAGAIN);
    /* a promise with a version guessed, without a look, waits too */
    assert_int_equal(ask(w, &w->other, VGPU_ARB_PL_PROMISE, 1, 0, NULL), -EAGAIN);
    /* the holder itself is not held back, and its promise made again passes */
    assert_int_equal(look(w, &w->holder), 0);
    assert_int_equal(ask(w, &w->holder, VGPU_ARB_PL_PROMISE, 0, 1, NULL), 0);
    /* its promise is back: a look passes; its place in the count is not yet */
    assert_int_equal(look(w, &w->other), 0);
    assert_int_equal(enter(w, &w->other), -EAGAIN);
    assert_int_equal(ask(w, &w->holder, VGPU_ARB_JC_ENTER, 0, 1, NULL), 0);
    assert_int_equal(enter(w, &w->other), 0);
    /* the file names it as before, job and all (the other is a holder now too) */
    char want[200];
    snprintf(want, sizeof want, "%d %llu 1000 3 0123456789ab\n", (int)getpid(),
             (unsigned long long)vgpu_proc_start_time(getpid()));
    assert_non_null(strstr(read_holders(w), want));
}

/* The file a daemon left while this one waits names the holders still awaited: a daemon that
 * follows at once waits for them too. */
static void test_a_second_restart_still_waits(void **state)
{
    struct world *w = *state;
    leave_us(w, ARB_HELD_COUNT, vgpu_proc_start_time(getpid()));
    arb_place_start(&w->a, w->dfd, w->dir);   /* writes its own list at once, the holder in it */
    arb_place_free(&w->a);
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(enter(w, &w->other), -EAGAIN);
    /* what waits is what the holder held: a look does not wait for a job count */
    assert_int_equal(look(w, &w->other), 0);
}

static void test_ended_or_reused_holders_are_not_waited_for(void **state)
{
    struct world *w = *state;
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    assert_true(kid > 0);
    uint64_t kid_start = vgpu_proc_start_time(kid);
    waitpid(kid, NULL, 0);
    leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 3 -\n", boot, (int)kid,
          (unsigned long long)(kid_start ? kid_start : 1));
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(look(w, &w->other), 0);
    assert_int_equal(enter(w, &w->other), 0);
    arb_place_free(&w->a);
    /* our pid with another start time: an earlier process of that pid */
    leave_us(w, 3, vgpu_proc_start_time(getpid()) + 1);
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(look(w, &w->other), 0);
}

/* A file the daemon would not have written: not believed, and replaced by its own at once, which
 * does not name this process (a holder it believed and still awaits would be named there). */
static void untrusted(struct world *w)
{
    arb_place_start(&w->a, w->dfd, w->dir);
    char mine[32];
    snprintf(mine, sizeof mine, "\n%d ", (int)getpid());
    assert_null(strstr(read_holders(w), mine));
    assert_int_equal(look(w, &w->other), 0);
    assert_int_equal(enter(w, &w->other), 0);
    assert_non_null(strstr(read_holders(w), "vgpu-holders 1 "));
    arb_place_free(&w->a);
}

static void test_a_file_not_the_daemons_is_not_believed(void **state)
{
    struct world *w = *state;
    uint64_t me = vgpu_proc_start_time(getpid());
    int pid = (int)getpid();
    unsigned long long st = (unsigned long long)me;
    for (int i = 0; i < 8; i++) {
        switch (i) {
        case 0: leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 3 -", boot, pid, st); break;   /* cut short */
        case 1: leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 4 -\n", boot, pid, st); break; /* no such kind */
        case 2: leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 3 job/slash\n", boot, pid, st); break;
        case 3: leave(w, 0600, "vgpu-holders 1 %s\n%d  %llu 1000 3 -\n", boot, pid, st); break;
        case 4: leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 99999999999 3 -\n", boot, pid, st); break;
        case 5: leave(w, 0600, "vgpu-holders 1 %s\n-%d %llu 1000 3 -\n", boot, pid, st); break;
        case 6: leave(w, 0600, "vgpu-holders 2 %s\n%d %llu 1000 3 -\n", boot, pid, st); break;  /* another format */
        default: leave(w, 0600, "vgpu-holders 1 %s\n%d %llu 1000 3 -\n%d x\n", boot, pid, st, pid); break;
        }
        untrusted(w);
    }
    /* another boot's: its pids and start times may repeat */
    leave(w, 0600, "vgpu-holders 1 00000000-0000-0000-0000-000000000000\n%d %llu 1000 3 -\n", (int)getpid(),
          (unsigned long long)me);
    untrusted(w);
    /* open to others */
    leave_us(w, 3, me);
    assert_int_equal(fchmodat(w->dfd, ARB_HOLDERS_FILE, 0640, 0), 0);
    untrusted(w);
    /* two links */
    leave_us(w, 3, me);
    assert_int_equal(linkat(w->dfd, ARB_HOLDERS_FILE, w->dfd, "second", 0), 0);
    untrusted(w);
    unlinkat(w->dfd, "second", 0);
    /* a symbolic link to a valid one */
    leave_us(w, 3, me);
    assert_int_equal(renameat(w->dfd, ARB_HOLDERS_FILE, w->dfd, "valid"), 0);
    assert_int_equal(symlinkat("valid", w->dfd, ARB_HOLDERS_FILE), 0);
    untrusted(w);
    unlinkat(w->dfd, "valid", 0);
    /* another user's (root can make one) */
    if (geteuid() == 0) {
        leave_us(w, 3, me);
        assert_int_equal(fchownat(w->dfd, ARB_HOLDERS_FILE, 65534, 65534, 0), 0);
        untrusted(w);
    }
    /* and the same file, the daemon's own, is believed */
    leave_us(w, 3, me);
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(look(w, &w->other), -EAGAIN);
}

static void test_the_wait_ends_after_1_s(void **state)
{
    struct world *w = *state;
    leave_us(w, 3, vgpu_proc_start_time(getpid()));
    arb_place_start(&w->a, w->dfd, w->dir);
    assert_int_equal(look(w, &w->other), -EAGAIN);
    nanosleep(&(struct timespec){ VGPU_ARB_RESTART_MS / 1000, (VGPU_ARB_RESTART_MS % 1000) * 1000000L + 20000000L },
              NULL);
    assert_int_equal(look(w, &w->other), 0);
    assert_int_equal(enter(w, &w->other), 0);
    /* and the holder that never came back is no longer named */
    char mine[64];
    snprintf(mine, sizeof mine, "\n%d ", (int)getpid());
    assert_null(strstr(read_holders(w), mine));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_daemon_never_waits_and_names_its_holders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leave_and_enter_again_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_others_wait_until_the_holder_is_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_second_restart_still_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ended_or_reused_holders_are_not_waited_for, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_file_not_the_daemons_is_not_believed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_wait_ends_after_1_s, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
