/* arbiter_client.c: one connection per process to `vgpu daemon` (vgpu/arbiter.h).
 *
 * The connection is shared by every thread and GPU of the process, under one mutex: a call sends
 * its request and waits for the answer with the mutex held, so answers never cross. A reply that
 * does not come within VGPU_ARB_REPLY_MS (a stopped or wedged daemon), or a socket that closes,
 * drops the connection: every schedule opened on it is lost from then on (vgpu_arb_gen moves on),
 * and the limiter falls back to its user's own schedule. Nothing here blocks longer than that.
 * libc only (linked into libvgpu.so); never prints. */
#include "vgpu/arbiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/machinedir.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int conn = -1;
static pid_t conn_pid;
static uint32_t conn_gen;       /* bumped at every connect; 0 = never connected */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
#define SPIN_NS 100000L   /* how long a caller looks for its answer before it sleeps */

/* A forked child shares its parent's socket: it must neither speak on it nor keep it open (the
 * daemon ends what the parent holds only when every copy of the socket is closed). */
static void before_fork(void) { pthread_mutex_lock(&mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&mu); }
static void after_fork_child(void)
{
    if (conn >= 0)
        close(conn);
    conn = -1;
    conn_gen++;
    pthread_mutex_unlock(&mu);
}
static void register_atfork(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

int vgpu_arb_sock_path(char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s/%s", vgpu_machinedir_path(), VGPU_ARB_DIR, VGPU_ARB_SOCK);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

void vgpu_arb_put_fd(struct msghdr *m, union vgpu_arb_cmsg *room, int fd)
{
    if (fd < 0)
        return;
    memset(room, 0, sizeof *room);
    m->msg_control = room->buf;
    m->msg_controllen = sizeof room->buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

/* Every descriptor of every SCM_RIGHTS message is looked at: the first is kept, the rest closed.
 * A peer may send several in one control message, or several control messages, and each one the
 * kernel installed here is ours to close (the daemon kept those of a 2-descriptor message open
 * for its life: 508 such HELLOs took 1023 of its 1024 descriptors). */
int vgpu_arb_take_fd(struct msghdr *m)
{
    int fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fd < 0)
                fd = got;
            else if (got >= 0)
                close(got);
        }
    }
    return fd;
}

static void drop_locked(void)
{
    if (conn >= 0)
        close(conn);
    conn = -1;
}

/* Sends one request (with `inlen` bytes of payload) and, when r, receives one reply (and a
 * descriptor, if one comes; its payload into out, at most outcap bytes, *outlen its length).
 * false when the connection failed (then it is dropped). Called with mu held. */
static bool exchange_data_locked(const struct vgpu_arb_req *q, const void *in, int send_fd, struct vgpu_arb_rep *r,
                                 int *recv_fd, void *out, size_t outcap, size_t *outlen)
{
    struct iovec iov[2] = { { (void *)q, sizeof *q }, { (void *)in, q->len } };
    union vgpu_arb_cmsg cm;
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = q->len ? 2 : 1 };
    vgpu_arb_put_fd(&m, &cm, send_fd);
    ssize_t n;
    do
        n = sendmsg(conn, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)(sizeof *q + q->len)) {
        drop_locked();
        return false;
    }
    if (!r)
        return true;
    struct iovec riov[2] = { { r, sizeof *r }, { out, outcap } };
    struct msghdr rm = { .msg_iov = riov, .msg_iovlen = out && outcap ? 2 : 1, .msg_control = cm.buf,
                         .msg_controllen = sizeof cm.buf };
    memset(&cm, 0, sizeof cm);
    /* The answer usually comes within tens of microseconds: look for it without sleeping for
     * SPIN_NS first, which saves our own wake-up (one of the two an answer costs), then sleep. */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        n = recvmsg(conn, &rm, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > SPIN_NS) {
            do
                n = recvmsg(conn, &rm, MSG_CMSG_CLOEXEC);
            while (n < 0 && errno == EINTR);
            break;
        }
    }
    int fd = n >= 0 ? vgpu_arb_take_fd(&rm) : -1;
    if (n < (ssize_t)sizeof *r || r->len > outcap || n != (ssize_t)(sizeof *r + r->len) ||
        (rm.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (fd >= 0)
            close(fd);
        drop_locked();
        return false;
    }
    r->msg[sizeof r->msg - 1] = 0;
    if (outlen)
        *outlen = r->len;
    if (recv_fd)
        *recv_fd = fd;
    else if (fd >= 0)
        close(fd);
    return true;
}

static bool exchange_locked(const struct vgpu_arb_req *q, int send_fd, struct vgpu_arb_rep *r, int *recv_fd)
{
    return exchange_data_locked(q, NULL, send_fd, r, recv_fd, NULL, 0, NULL);
}

/* Connects when not connected (or connected in a parent before fork). Called with mu held. */
static bool connected_locked(void)
{
    pthread_once(&atfork_once, register_atfork);
    if (conn >= 0 && conn_pid == getpid())
        return true;
    if (conn >= 0)
        close(conn);   /* a parent's, inherited without the atfork handler (vfork-like paths) */
    conn = -1;
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (vgpu_arb_sock_path(a.sun_path, sizeof a.sun_path) != 0)
        return false;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return false;
    struct timeval tv = { VGPU_ARB_REPLY_MS / 1000, (VGPU_ARB_REPLY_MS % 1000) * 1000 };
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return false;
    }
    /* Only root's daemon, or one of our own user (tests, a single-user machine), is believed:
     * whoever else listens there could hand us a schedule of its making. */
    struct ucred cr;
    socklen_t crl = sizeof cr;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 || (cr.uid != 0 && cr.uid != geteuid())) {
        close(s);
        return false;
    }
    conn = s;
    conn_pid = getpid();
    conn_gen++;
    if (conn_gen == 0)
        conn_gen = 1;
    struct vgpu_arb_req q = { .op = VGPU_ARB_HELLO, .a = { VGPU_ARB_PROTO } };
    struct vgpu_arb_rep r;
    if (!exchange_locked(&q, -1, &r, NULL) || r.rc != VGPU_ARB_PROTO) {
        drop_locked();
        return false;
    }
    return true;
}

bool vgpu_arb_available(void)
{
    pthread_mutex_lock(&mu);
    bool ok = connected_locked();
    pthread_mutex_unlock(&mu);
    return ok;
}

uint32_t vgpu_arb_gen(void)
{
    pthread_mutex_lock(&mu);
    uint32_t g = conn >= 0 && conn_pid == getpid() ? conn_gen : 0;
    pthread_mutex_unlock(&mu);
    return g;
}

void vgpu_arb_forget(void)
{
    pthread_mutex_lock(&mu);
    drop_locked();
    conn_gen++;
    pthread_mutex_unlock(&mu);
}

int vgpu_arb_open(const char *uuid, uint32_t *handle, int *fd, uint32_t *gen, struct vgpu_err *e)
{
    pthread_mutex_lock(&mu);
    if (!connected_locked()) {
        pthread_mutex_unlock(&mu);
        vgpu_err_set(e, VGPU_EXIT_STATE, "no arbiter (vgpu daemon) answers on this machine");
        return -1;
    }
    struct vgpu_arb_req q = { .op = VGPU_ARB_OPEN };
    snprintf(q.uuid, sizeof q.uuid, "%s", uuid);
    struct vgpu_arb_rep r;
    int got = -1;
    bool ok = exchange_locked(&q, -1, &r, &got);
    uint32_t g = conn_gen;
    pthread_mutex_unlock(&mu);
    if (!ok) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "the arbiter (vgpu daemon) went away while the schedule of %s was opened",
                     uuid);
        return -1;
    }
    if (r.rc < 0 || got < 0) {
        if (got >= 0)
            close(got);
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "the arbiter refused the schedule of %s: %s", uuid,
                     r.msg[0] ? r.msg : strerror((int)-r.rc));
        return -1;
    }
    *handle = (uint32_t)r.rc;
    *fd = got;
    *gen = g;
    return 0;
}

int64_t vgpu_arb_call(uint32_t gen, enum vgpu_arb_op op, uint32_t gpu, int proc, const uint64_t a[4], int limits_fd,
                      uint64_t v[2])
{
    pthread_mutex_lock(&mu);
    if (conn < 0 || conn_pid != getpid() || gen != conn_gen) {
        pthread_mutex_unlock(&mu);
        return -EPIPE;
    }
    struct vgpu_arb_req q = { .op = (uint32_t)op, .gpu = gpu, .proc = proc };
    if (a)
        memcpy(q.a, a, sizeof q.a);
    struct vgpu_arb_rep r;
    bool ok = exchange_locked(&q, limits_fd, &r, NULL);
    pthread_mutex_unlock(&mu);
    if (!ok)
        return -EPIPE;
    if (v) {
        v[0] = r.v[0];
        v[1] = r.v[1];
    }
    return r.rc;
}

int64_t vgpu_arb_call_data(enum vgpu_arb_op op, const uint64_t a[4], const void *in, size_t inlen, void *out,
                           size_t outcap, size_t *outlen, struct vgpu_arb_rep *r)
{
    struct vgpu_arb_rep mine;
    if (!r)
        r = &mine;
    memset(r, 0, sizeof *r);
    if (outlen)
        *outlen = 0;
    if (inlen > VGPU_ARB_MAX_PAYLOAD)
        return -EMSGSIZE;
    pthread_mutex_lock(&mu);
    struct vgpu_arb_req q = { .op = (uint32_t)op, .len = (uint32_t)inlen };
    if (a)
        memcpy(q.a, a, sizeof q.a);
    bool ok = connected_locked() && exchange_data_locked(&q, in, -1, r, NULL, out, outcap, outlen);
    pthread_mutex_unlock(&mu);
    return ok ? r->rc : -EPIPE;
}

int64_t vgpu_arb_call_patient(enum vgpu_arb_op op, const uint64_t a[4], const void *in, size_t inlen, void *out,
                              size_t outcap, size_t *outlen, struct vgpu_arb_rep *r)
{
    struct vgpu_arb_rep mine;
    if (!r)
        r = &mine;
    int64_t rc = 0;
    for (int tries = 0; tries <= 3 * VGPU_ARB_RESTART_MS / 10; tries++) {
        rc = vgpu_arb_call_data(op, a, in, inlen, out, outcap, outlen, r);
        if (rc != -EAGAIN)
            break;
        nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
    }
    return rc;
}

void vgpu_arb_send(uint32_t gen, enum vgpu_arb_op op, uint32_t gpu, int proc, uint64_t a0, uint64_t a1, uint64_t a2)
{
    pthread_mutex_lock(&mu);
    if (conn >= 0 && conn_pid == getpid() && gen == conn_gen) {
        struct vgpu_arb_req q = { .op = (uint32_t)op, .gpu = gpu, .proc = proc, .a = { a0, a1, a2, 0 } };
        exchange_locked(&q, -1, NULL, NULL);
    }
    pthread_mutex_unlock(&mu);
}

uint32_t vgpu_arb_probe(void)
{
    /* A HELLO finds a daemon that went away (the call fails and drops the connection); the
     * second connects to whichever daemon answers now. */
    if (vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) < 0)
        vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL);
    return vgpu_arb_gen();
}
