/* Lending across users, the daemon's side (cmd/daemon/lend.c, VGPU_ARB_LEND_SHARE), called
 * through arb_handle with no socket and no timing: each job is answered with what the other
 * users' jobs on its GPU add, a job's unmet request counts only within its connection's promise,
 * priority only as root's policy grants it, a user's own jobs are left out (it reads them itself),
 * a connection's figures end with it, and a user's entries are bounded with room kept for root.
 * Links cmd/daemon's objects (the Makefile's DAEMON_UNIT_BINS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/server.h"
#include "vgpu/lend.h"

#define UUID  "GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91"   /* GPU 0 of h100.json */
#define UUID2 "GPU-7d1e3b42-5a6f-4c80-9e21-3f4a5b6c7d82"
#define G (1ULL << 30)

static struct arbiter *A;
static char out[VGPU_ARB_MAX_PAYLOAD];

static struct arb_client client(uid_t uid)
{
    static uint64_t id;
    return (struct arb_client){ .fd = -1, .id = ++id, .pid = getpid(), .uid = uid, .login = uid };
}

static struct vgpu_arb_rep call(struct arb_client *c, struct vgpu_arb_req q, const void *in)
{
    struct vgpu_arb_rep r;
    int send_fd;
    assert_true(arb_handle(A, c, &q, in, -1, &r, out, &send_fd));
    return r;
}

static void promise(struct arb_client *c, const char *uuid, uint64_t bytes)
{
    struct vgpu_arb_gpu_bytes g;
    memset(&g, 0, sizeof g);
    snprintf(g.uuid, sizeof g.uuid, "%s", uuid);
    g.bytes = bytes;
    struct vgpu_arb_req q = { .op = VGPU_ARB_PL_PROMISE, .len = sizeof g, .a = { 0, 1 } };
    assert_int_equal(call(c, q, &g).rc, 0);
}

/* One GPU's report of job `job`; the answer for it into *back. */
static int64_t share(struct arb_client *c, uint64_t job, const char *uuid, uint64_t request, uint64_t held,
                     uint64_t borrowed, int prio, struct vgpu_lend_remote *back)
{
    struct vgpu_lend_report x;
    memset(&x, 0, sizeof x);
    snprintf(x.uuid, sizeof x.uuid, "%s", uuid);
    x.request = request;
    x.held = held;
    x.borrowed = borrowed;
    x.prio = prio;
    struct vgpu_arb_req q = { .op = VGPU_ARB_LEND_SHARE, .len = sizeof x, .a = { job } };
    struct vgpu_arb_rep r = call(c, q, &x);
    if (r.rc == 0) {
        assert_int_equal(r.len, sizeof *back);
        memcpy(back, out, sizeof *back);
    }
    return r.rc;
}

static int setup(void **state)
{
    (void)state;
    char exe[4096], lib[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    snprintf(lib, sizeof lib, "%s/fakegpu/libnvidia-ml.so.1", dirname(dirname(dirname(exe))));
    setenv("VGPU_NVML_LIB", lib, 1);
    /* A machine directory of its own: no policy file there, so nobody is granted high. */
    char dir[] = "/tmp/vgpu-test-lend.XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    setenv("VGPU_MACHINE_DIR", dir, 1);
    A = calloc(1, sizeof *A);
    return A ? 0 : -1;
}

static int fresh(void **state)
{
    (void)state;
    arb_lend_free(A);
    arb_place_free(A);
    memset(A, 0, sizeof *A);
    return 0;
}

/* Root borrows, nobody's promise is not yet allocated: each is told of the other. */
static void test_two_users(void **state)
{
    (void)state;
    struct arb_client root = client(0), nob = client(65534);
    struct vgpu_lend_remote b;
    promise(&root, UUID, 2 * G);
    promise(&nob, UUID, 60 * G);
    assert_int_equal(share(&root, 0x111, UUID, 2 * G, 72 * G, 70 * G, 0, &b), 0);
    assert_int_equal(b.unmet, 0);                     /* nobody has not said anything yet */
    assert_int_equal(share(&nob, 0x222, UUID, 60 * G, 0, 0, 0, &b), 0);
    assert_int_equal(b.unmet, 0);                     /* root's request is all held */
    assert_int_equal(b.borrowed, 70 * G);             /* what the owner's free view adds */
    assert_int_equal(share(&root, 0x111, UUID, 2 * G, 72 * G, 70 * G, 0, &b), 0);
    assert_int_equal(b.unmet, 60 * G);                /* what root's borrower owes way to */
    assert_int_equal(b.borrowed, 0);
    assert_int_equal(b.ahead, 0);
    /* Said again, a job's figures replace its old ones: nobody now holds 40 of its 60. */
    assert_int_equal(share(&nob, 0x222, UUID, 60 * G, 40 * G, 0, 0, &b), 0);
    assert_int_equal(share(&root, 0x111, UUID, 2 * G, 72 * G, 70 * G, 0, &b), 0);
    assert_int_equal(b.unmet, 20 * G);
    /* Another GPU's figures are not this one's. */
    assert_int_equal(share(&root, 0x333, UUID2, 1 * G, 0, 0, 0, &b), 0);
    assert_int_equal(b.unmet, 0);
}

/* A job's unmet request counts only within the promise its connection holds there. */
static void test_unmet_within_promise(void **state)
{
    (void)state;
    struct arb_client root = client(0), liar = client(1000), half = client(2000);
    struct vgpu_lend_remote b;
    promise(&half, UUID, 10 * G);
    assert_int_equal(share(&liar, 0x444, UUID, 80 * G, 0, 0, 0, &b), 0);   /* no promise at all */
    assert_int_equal(share(&half, 0x555, UUID, 80 * G, 0, 0, 0, &b), 0);   /* says 80, promised 10 */
    assert_int_equal(share(&root, 0x666, UUID, 1 * G, 31 * G, 30 * G, 0, &b), 0);
    assert_int_equal(b.unmet, 10 * G);
}

/* The order across users: priority as granted (no policy: high is normal), then the larger
 * borrower, then the id; the user's own other jobs are not in the answer. */
static void test_order(void **state)
{
    (void)state;
    struct arb_client u1 = client(1000), u2 = client(2000), u2b = client(2000), root = client(0);
    struct vgpu_lend_remote b;
    assert_int_equal(share(&u1, 0x10, UUID, 1 * G, 11 * G, 10 * G, 1, &b), 0);   /* asks high */
    assert_int_equal(share(&u2b, 0x30, UUID, 1 * G, 41 * G, 40 * G, 0, &b), 0);
    assert_int_equal(share(&u2, 0x20, UUID, 1 * G, 6 * G, 5 * G, 0, &b), 0);
    assert_int_equal(b.ahead, 10 * G);     /* u1 is normal, borrows more: ahead; u2b is its own */
    assert_int_equal(b.borrowed, 10 * G);
    /* Root's high priority is granted: behind everyone, every other borrower is ahead of it. */
    assert_int_equal(share(&root, 0x40, UUID, 1 * G, 2 * G, 1 * G, 1, &b), 0);
    assert_int_equal(b.ahead, 55 * G);
    /* A low-priority borrower is ahead of every normal one, whatever it borrows. */
    assert_int_equal(share(&u1, 0x10, UUID, 1 * G, 2 * G, 1 * G, -1, &b), 0);
    assert_int_equal(b.ahead, 0);
    assert_int_equal(share(&u2, 0x20, UUID, 1 * G, 6 * G, 5 * G, 0, &b), 0);
    assert_int_equal(b.ahead, 1 * G);
}

/* A connection's figures end with it. */
static void test_client_gone(void **state)
{
    (void)state;
    struct arb_client u1 = client(1000), u2 = client(2000);
    struct vgpu_lend_remote b;
    assert_int_equal(share(&u1, 0x10, UUID, 1 * G, 31 * G, 30 * G, 0, &b), 0);
    assert_int_equal(share(&u2, 0x20, UUID, 1 * G, 1 * G, 0, 0, &b), 0);
    assert_int_equal(b.borrowed, 30 * G);
    arb_client_gone(A, &u1);
    assert_int_equal(share(&u2, 0x20, UUID, 1 * G, 1 * G, 0, 0, &b), 0);
    assert_int_equal(b.borrowed, 0);
}

static void test_bad_reports(void **state)
{
    (void)state;
    struct arb_client u = client(1000);
    struct vgpu_lend_remote b;
    assert_int_equal(share(&u, 0, UUID, 1, 0, 0, 0, &b), -EINVAL);                 /* no job id */
    assert_int_equal(share(&u, 1ULL << 48, UUID, 1, 0, 0, 0, &b), -EINVAL);        /* not 12 hex digits */
    assert_int_equal(share(&u, 0x10, "not-a-gpu", 1, 0, 0, 0, &b), -EINVAL);
    struct vgpu_lend_report x[2];
    memset(x, 0, sizeof x);
    struct vgpu_arb_req q = { .op = VGPU_ARB_LEND_SHARE, .len = sizeof x[0] + 1, .a = { 0x10 } };
    assert_int_equal(call(&u, q, x).rc, -EINVAL);                                   /* a torn report */
    struct vgpu_arb_req none = { .op = VGPU_ARB_LEND_SHARE, .len = 0, .a = { 0x10 } };
    assert_int_equal(call(&u, none, x).rc, -EINVAL);
}

/* A user's entries are bounded (distinct job ids, one GPU each); root keeps room beyond them. */
static void test_bounded(void **state)
{
    (void)state;
    struct arb_client u = client(1000), root = client(0);
    struct vgpu_lend_remote b;
    int64_t rc = 0;
    unsigned took = 0;
    for (unsigned i = 1; i <= 400 && rc == 0; i++)
        if ((rc = share(&u, i, UUID, 1, 0, 0, 0, &b)) == 0)
            took++;
    assert_int_equal(rc, -EDQUOT);
    assert_int_equal(took, 256);
    assert_int_equal(share(&root, 0x999, UUID, 1, 0, 0, 0, &b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_two_users, fresh),
        cmocka_unit_test_setup(test_unmet_within_promise, fresh),
        cmocka_unit_test_setup(test_order, fresh),
        cmocka_unit_test_setup(test_client_gone, fresh),
        cmocka_unit_test_setup(test_bad_reports, fresh),
        cmocka_unit_test_setup(test_bounded, fresh),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
