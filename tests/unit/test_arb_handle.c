/* The daemon's request handler (cmd/daemon/arbiter.c, arb_handle) called directly: no socket, no
 * timing. The rules of issue 35's "no resource one user can exhaust" part: only NVML's GPUs are
 * opened, quotas count a login's subordinate uids, root keeps entries of its own, a descriptor
 * passed along is closed, and every descriptor of a message is taken or closed
 * (vgpu_arb_take_fd). Links cmd/daemon's objects (the Makefile's DAEMON_UNIT_BINS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/server.h"

#define UUID "GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91"   /* GPU 0 of h100.json */

static struct arbiter *A;
static char out[VGPU_ARB_MAX_PAYLOAD];

static struct arb_client client(uid_t uid)
{
    static uint64_t id;
    return (struct arb_client){ .fd = -1, .id = ++id, .pid = getpid(), .uid = uid, .login = uid };
}

static struct vgpu_arb_rep ask(struct arb_client *c, struct vgpu_arb_req q, int passed)
{
    struct vgpu_arb_rep r;
    int send_fd;
    assert_true(arb_handle(A, c, &q, "", passed, &r, out, &send_fd));
    return r;
}

static int open_gpu(struct arb_client *c, const char *uuid)
{
    struct vgpu_arb_req q = { .op = VGPU_ARB_OPEN };
    snprintf(q.uuid, sizeof q.uuid, "%s", uuid);
    struct vgpu_arb_rep r = ask(c, q, -1);
    return r.rc;
}

static struct vgpu_arb_rep job(struct arb_client *c, int gpu, uint64_t key)
{
    return ask(c, (struct vgpu_arb_req){ .op = VGPU_ARB_JOB, .gpu = (uint32_t)gpu, .a = { key, 30 } }, -1);
}

static int setup(void **state)
{
    (void)state;
    /* The simulated NVML, next to this binary's build directory; subordinate uids of our own
     * (read because VGPU_MACHINE_DIR relocates the daemon, as tests/run.sh does). */
    char exe[4096], lib[4200], sub[64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    snprintf(lib, sizeof lib, "%s/fakegpu/libnvidia-ml.so.1", dirname(dirname(dirname(exe))));
    setenv("VGPU_NVML_LIB", lib, 1);
    if (!getenv("VGPU_MACHINE_DIR"))
        setenv("VGPU_MACHINE_DIR", "/tmp", 1);
    snprintf(sub, sizeof sub, "/tmp/vgpu-test-subuid.XXXXXX");
    int fd = mkstemp(sub);
    if (fd < 0 || dprintf(fd, "# a comment\n1000:300000:100\nno-such-login-here:400000:10\nroot:500000:10\n") < 0)
        return -1;
    close(fd);
    setenv("VGPU_SUBUID_FILE", sub, 1);
    A = calloc(1, sizeof *A);
    return A ? 0 : -1;
}

/* A fresh daemon state for each test: its GPUs, logins and schedules. */
static int fresh(void **state)
{
    (void)state;
    for (unsigned i = 0; i < A->ngpus; i++)
        A->gpus[i] = NULL;   /* the schedules' memory is the test process's for its life */
    arb_gpus_free(A);
    arb_logins_free(A);
    memset(A, 0, sizeof *A);
    return 0;
}

static void test_only_nvml_gpus(void **state)
{
    (void)state;
    struct arb_client c = client(65534);
    assert_int_equal(open_gpu(&c, UUID), 0);
    struct vgpu_arb_req q = { .op = VGPU_ARB_OPEN };
    snprintf(q.uuid, sizeof q.uuid, "GPU-00000000-0000-0000-0000-000000000001");
    struct vgpu_arb_rep r = ask(&c, q, -1);
    assert_int_equal(r.rc, -EINVAL);
    assert_non_null(strstr(r.msg, "is not a GPU or MIG device of this machine"));
    for (int i = 0; i < 100; i++) {
        snprintf(q.uuid, sizeof q.uuid, "GPU-00000000-0000-0000-0000-%012d", i);
        assert_true(ask(&c, q, -1).rc < 0);
    }
    assert_int_equal(A->ngpus, 1);
    /* root gets no more than NVML lists either */
    struct arb_client root = client(0);
    assert_true(ask(&root, q, -1).rc < 0);
}

static void test_login_job_quota(void **state)
{
    (void)state;
    struct arb_client u = client(1000);
    int g = open_gpu(&u, UUID);
    assert_int_equal(g, 0);
    for (int i = 0; i < 5; i++)
        assert_true(job(&u, g, 100 + (uint64_t)i).rc >= 0);
    /* uids 300000.. are 1000's containers': they share its 8 */
    struct arb_client s1 = client(300007), s2 = client(300099);
    assert_int_equal(open_gpu(&s1, UUID), 0);
    assert_int_equal(open_gpu(&s2, UUID), 0);
    assert_true(job(&s1, g, 1).rc >= 0);
    assert_true(job(&s1, g, 2).rc >= 0);
    assert_true(job(&s2, g, 3).rc >= 0);
    struct vgpu_arb_rep r = job(&s2, g, 4);
    assert_int_equal(r.rc, -EDQUOT);
    assert_non_null(strstr(r.msg, "uid 1000, with its subordinate uids"));
    assert_int_equal(job(&u, g, 200).rc, -EDQUOT);
    /* a job it already has is no new entry */
    assert_true(job(&u, g, 100).rc >= 0);
    /* just past the range, and a login unknown here, or root's range: each uid is its own */
    struct arb_client o = client(300100), x = client(400001), rr = client(500001);
    assert_int_equal(open_gpu(&o, UUID), 0);
    assert_int_equal(open_gpu(&x, UUID), 0);
    assert_int_equal(open_gpu(&rr, UUID), 0);
    assert_true(job(&o, g, 1).rc >= 0);
    assert_true(job(&x, g, 1).rc >= 0);
    assert_true(job(&rr, g, 1).rc >= 0);
    /* permissions stay per uid: a subordinate uid cannot attach to its login's entry */
    int mine = job(&u, g, 100).rc;
    r = ask(&s1, (struct vgpu_arb_req){ .op = VGPU_ARB_ATTACH, .gpu = (uint32_t)g, .a = { (uint64_t)mine } }, -1);
    assert_int_equal(r.rc, -EPERM);
}

static void test_root_reserve(void **state)
{
    (void)state;
    struct arb_client users[4];
    int g = -1, granted = 0;
    for (int u = 0; u < 4; u++) {
        users[u] = client(310000 + (uid_t)u);
        g = open_gpu(&users[u], UUID);
        assert_int_equal(g, 0);
        for (int i = 0; i < VGPU_ARB_USER_JOBS; i++)
            granted += job(&users[u], g, (uint64_t)i + 1).rc >= 0;
    }
    assert_int_equal(granted, VGPU_SCHED_MAX_JOBS - ARB_ROOT_JOBS);
    struct arb_client five = client(320000);
    assert_int_equal(open_gpu(&five, UUID), 0);
    struct vgpu_arb_rep r = job(&five, g, 1);
    assert_int_equal(r.rc, -EDQUOT);
    assert_non_null(strstr(r.msg, "kept for root"));
    struct arb_client root = client(0);
    assert_int_equal(open_gpu(&root, UUID), 0);
    for (int i = 0; i < ARB_ROOT_JOBS; i++)
        assert_true(job(&root, g, (uint64_t)i + 1).rc >= 0);
}

static void test_proc_quota(void **state)
{
    (void)state;
    struct arb_client u = client(1000), s = client(300001);
    int g = open_gpu(&u, UUID);
    assert_int_equal(open_gpu(&s, UUID), 0);
    int j = job(&u, g, 7).rc, js = job(&s, g, 7).rc;
    assert_true(j >= 0 && js >= 0);
    struct vgpu_arb_req q = { .op = VGPU_ARB_ATTACH, .gpu = (uint32_t)g, .a = { (uint64_t)j } };
    /* each ATTACH as another process (a pid of its own: one process is attached once per job) */
    for (int i = 0; i < VGPU_ARB_USER_PROCS - 1; i++) {
        u.pid = 3000000 + i;
        assert_true(ask(&u, q, -1).rc >= 0);
    }
    q.a[0] = (uint64_t)js;
    s.pid = 3100000;
    assert_true(ask(&s, q, -1).rc >= 0);   /* the 64th of the login */
    s.pid = 3100001;
    struct vgpu_arb_rep r = ask(&s, q, -1);
    assert_int_equal(r.rc, -EDQUOT);
    assert_non_null(strstr(r.msg, "most processes"));
}

static void test_passed_fd_closed(void **state)
{
    (void)state;
    struct arb_client u = client(1000);
    int g = open_gpu(&u, UUID);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct vgpu_arb_rep r =
        ask(&u, (struct vgpu_arb_req){ .op = VGPU_ARB_JOB, .gpu = (uint32_t)g, .a = { 1, 30 } }, fd);
    assert_true(r.rc >= 0);
    assert_int_equal(fcntl(fd, F_GETFD), -1);   /* closed by the handler */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ask(&u, (struct vgpu_arb_req){ .op = VGPU_ARB_HELLO }, fd);
    assert_int_equal(fcntl(fd, F_GETFD), -1);
}

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

/* Sends `per` descriptors in each of `msgs` control messages of one message; receives it as the
 * daemon does (room for one); returns how many descriptors stay open after vgpu_arb_take_fd and
 * closing what it returned. */
static int left_after(int per, int msgs)
{
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    int base = open_fds();
    char ctl[4 * CMSG_SPACE(4 * sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    char byte = 1;
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = 0 };
    m.msg_controllen = (size_t)msgs * CMSG_SPACE((size_t)per * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    for (int k = 0; k < msgs; k++, c = CMSG_NXTHDR(&m, c)) {
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)per * sizeof(int));
        for (int i = 0; i < per; i++) {
            int fd = 0;   /* stdin, sent per times: each arrives as a descriptor of its own */
            memcpy(CMSG_DATA(c) + (size_t)i * sizeof(int), &fd, sizeof fd);
        }
    }
    assert_int_equal(sendmsg(sp[0], &m, 0), 1);
    union vgpu_arb_cmsg cm;
    struct msghdr rm = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf };
    assert_int_equal(recvmsg(sp[1], &rm, MSG_CMSG_CLOEXEC), 1);
    int fd = vgpu_arb_take_fd(&rm);
    assert_true(fd >= 0);
    close(fd);
    int left = open_fds() - base;
    close(sp[0]);
    close(sp[1]);
    return left;
}

static void test_take_every_fd(void **state)
{
    (void)state;
    assert_int_equal(left_after(1, 1), 0);
    assert_int_equal(left_after(2, 1), 0);   /* what the daemon kept for its life before */
    assert_int_equal(left_after(2, 2), 0);
    assert_int_equal(left_after(4, 1), 0);   /* more than fit: the kernel truncates, none are kept */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_only_nvml_gpus, fresh),
        cmocka_unit_test_setup(test_login_job_quota, fresh),
        cmocka_unit_test_setup(test_root_reserve, fresh),
        cmocka_unit_test_setup(test_proc_quota, fresh),
        cmocka_unit_test_setup(test_passed_fd_closed, fresh),
        cmocka_unit_test(test_take_every_fd),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
