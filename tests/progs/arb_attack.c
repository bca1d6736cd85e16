/* arb_attack: a client of the arbiter that does not play fair (tests/cli/arbiter_abuse.sh, issue
 * 35). It speaks the raw protocol of vgpu/arbiter.h on the socket of the machine-wide directory in
 * force (VGPU_MACHINE_DIR), one mode per attack:
 *
 *   arb_attack fds N          N HELLOs on one connection, each carrying 2 descriptors (of
 *                             /dev/null): prints "answered=K"
 *   arb_attack conns N        opens N connections, each asks HELLO (1 s for its answer): prints
 *                             "open=N answered=K", then holds them all until stdin ends
 *   arb_attack uuids N        OPENs N made-up GPU UUIDs on one connection: prints "opened=K"
 *   arb_attack jobs UUID N    OPENs UUID, asks for N job entries (keys of its own) and attaches
 *                             to each: prints "jobs=K attached=K2 last=why", then holds them until
 *                             stdin ends
 * Exit status 0 unless the daemon could not be reached at all (1), 2 for bad usage. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vgpu/arbiter.h"

static int dial(void)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (vgpu_arb_sock_path(a.sun_path, sizeof a.sun_path) != 0)
        return -1;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Sends q with `nfds` descriptors of /dev/null (in one control message); 0 or -1. */
static int send_req(int s, const struct vgpu_arb_req *q, int nfds)
{
    int fds[2] = { -1, -1 };
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = { (void *)q, sizeof *q };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (nfds > 0) {
        memset(ctl, 0, sizeof ctl);
        for (int i = 0; i < nfds; i++)
            fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    ssize_t n = sendmsg(s, &m, MSG_NOSIGNAL);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return n == (ssize_t)sizeof *q ? 0 : -1;
}

/* Waits up to ms for one reply; true with *r filled. A descriptor that comes with it is closed. */
static bool get_rep(int s, struct vgpu_arb_rep *r, int ms)
{
    struct pollfd p = { .fd = s, .events = POLLIN };
    if (poll(&p, 1, ms) != 1)
        return false;
    static char buf[sizeof *r + VGPU_ARB_MAX_PAYLOAD];
    union vgpu_arb_cmsg cm;
    struct iovec iov = { buf, sizeof buf };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf };
    ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    int fd = n > 0 ? vgpu_arb_take_fd(&m) : -1;
    if (fd >= 0)
        close(fd);
    if (n < (ssize_t)sizeof *r)
        return false;
    memcpy(r, buf, sizeof *r);
    r->msg[sizeof r->msg - 1] = 0;
    return true;
}

static bool call(int s, const struct vgpu_arb_req *q, int nfds, struct vgpu_arb_rep *r)
{
    return send_req(s, q, nfds) == 0 && get_rep(s, r, 2000);
}

static void hold(void)
{
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    bool jobs = !strcmp(mode, "jobs");
    if (argc != 3 + jobs) {
        fprintf(stderr, "usage: arb_attack fds|conns|uuids N, or arb_attack jobs UUID N\n");
        return 2;
    }
    long n = strtol(argv[argc - 1], NULL, 10);
    struct vgpu_arb_req q = { .op = VGPU_ARB_HELLO, .a = { VGPU_ARB_PROTO } };
    struct vgpu_arb_rep r;
    if (!strcmp(mode, "conns")) {
        long answered = 0, open_n = 0;
        for (long i = 0; i < n; i++) {
            int s = dial();
            if (s < 0)
                continue;
            open_n++;
            answered += call(s, &q, 0, &r) && r.rc == VGPU_ARB_PROTO;
        }
        printf("open=%ld answered=%ld\n", open_n, answered);
        hold();
        return 0;
    }
    int s = dial();
    if (s < 0) {
        fprintf(stderr, "arb_attack: no arbiter answers: %s\n", strerror(errno));
        return 1;
    }
    if (!strcmp(mode, "fds")) {
        long answered = 0;
        for (long i = 0; i < n; i++)
            answered += call(s, &q, 2, &r) && r.rc == VGPU_ARB_PROTO;
        printf("answered=%ld\n", answered);
    } else if (!strcmp(mode, "uuids")) {
        long opened = 0;
        q.op = VGPU_ARB_OPEN;
        for (long i = 0; i < n; i++) {
            snprintf(q.uuid, sizeof q.uuid, "GPU-00000000-0000-0000-0000-%012ld", i);
            opened += call(s, &q, 0, &r) && r.rc >= 0;
        }
        printf("opened=%ld\n", opened);
    } else if (jobs) {
        q.op = VGPU_ARB_OPEN;
        snprintf(q.uuid, sizeof q.uuid, "%s", argv[2]);
        if (!call(s, &q, 0, &r) || r.rc < 0) {
            fprintf(stderr, "arb_attack: OPEN %s: %s\n", argv[2], r.msg);
            return 1;
        }
        uint32_t gpu = (uint32_t)r.rc;
        long got = 0, attached = 0;
        char last[sizeof r.msg] = "";
        for (long i = 0; i < n; i++) {
            q = (struct vgpu_arb_req){ .op = VGPU_ARB_JOB, .gpu = gpu, .a = { 0x5eed0000ULL + (uint64_t)i, 30 } };
            if (!call(s, &q, 0, &r) || r.rc < 0) {
                snprintf(last, sizeof last, "%s", r.msg);
                continue;
            }
            got++;
            q = (struct vgpu_arb_req){ .op = VGPU_ARB_ATTACH, .gpu = gpu, .a = { (uint64_t)r.rc } };
            if (call(s, &q, 0, &r) && r.rc >= 0)
                attached++;
            else
                snprintf(last, sizeof last, "%s", r.msg);
        }
        for (char *p = last; *p; p++)
            if (*p == ' ')
                *p = '_';
        printf("jobs=%ld attached=%ld last=%s\n", got, attached, last[0] ? last : "none");
        hold();
    } else {
        fprintf(stderr, "arb_attack: unknown mode '%s'\n", mode);
        return 2;
    }
    return 0;
}
