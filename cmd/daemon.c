/* vgpu daemon: the arbiter, the one writer of what other users' jobs act on (vgpu/arbiter.h,
 * vgpu-daemon(8)). */
static const char usage[] =
    "usage: vgpu daemon [--spin-us N] [--acct-db PATH]\n"
    "       vgpu daemon --check\n"
    "\n"
    "Run the arbiter in the foreground (systemd starts it as vgpu-daemon.service). It owns the\n"
    "GPU-time schedule of every GPU: jobs read the lease of their GPU from a mapping only the\n"
    "daemon can write, and ask the daemon for turns over a socket, so no user can starve,\n"
    "uncap or steer another user's jobs through it. Jobs that started before it, or that lose\n"
    "it (killed, restarted), keep their caps on their user's own schedule and join it within a\n"
    "second. It also keeps every user's placement promises (vgpu run --mem), --wait queue and\n"
    "job count (--max-jobs, root's max-jobs-per-gpu), each ending with the vgpu run that made\n"
    "it, and writes every user's accounting records (each user reads only their own). Without\n"
    "it, jobs of different users are not scheduled or placed together. It names the processes\n"
    "it serves in MACHINE_DIR/arbiter/holders; a daemon started after it holds other placements\n"
    "back until those still running have promised again (1 s at most), and a fresh one never\n"
    "waits.\n"
    "\n"
    "The socket is MACHINE_DIR/arbiter/sock (MACHINE_DIR: VGPU_MACHINE_DIR, else\n"
    "/run/vgpu-machine; an empty VGPU_MACHINE_DIR is refused). Run it as root; a daemon of\n"
    "another user is believed only by that user's own jobs. A machine directory other users\n"
    "cannot search (0700) is served with a warning: their jobs cannot reach the socket.\n"
    "Descriptors 0-2 left closed are opened on /dev/null. SIGTERM or SIGINT stops it.\n"
    "\n"
    "No user exhausts it: it schedules only the GPUs NVML lists, counts a login's subordinate\n"
    "uids (/etc/subuid) as that login for its quotas, keeps schedule entries and 64 connections\n"
    "for root, and raises its soft file limit to the hard one, serving as many connections as\n"
    "that leaves (at most 4096; it does not start below 384 descriptors, saying why).\n"
    "Nor gains by many jobs: an uncapped job's fair share is split among logins first, then\n"
    "among the login's jobs, and a login's new job starts with what its jobs that ended in the\n"
    "last 10 s still owe.\n"
    "\n"
    "  --spin-us N  after each request, look for the next one for N microseconds (0-100000,\n"
    "               default 3000) before sleeping: a request often follows at once (a release,\n"
    "               then the waiter's acquire), and waking a sleeping daemon cost an inference\n"
    "               client 0.5 ms at p99 on an H200 (vgpu-daemon(8)). Costs up to one CPU core\n"
    "               while jobs hand a GPU over; 0 sleeps at once\n"
    "  --acct-db PATH  the accounting database, every user's job records (vgpu-acct(1)):\n"
    "               root's file, 0600, in a directory of root's closed to others' writes\n"
    "               (made 0755 when missing); default /var/lib/vgpu/acct.db, or\n"
    "               MACHINE_DIR/acct.db when VGPU_MACHINE_DIR relocates the daemon. Opened\n"
    "               at start: a database that cannot be written (a directory, damaged, not\n"
    "               root's) stops the daemon there, saying why\n"
    "  --check      do not serve: exit 0 when an arbiter answers on this machine, 1 when\n"
    "               none does\n"
    "  --help       show this help\n"
    "\n"
    "Exit status: 0 stopped by a signal (or --check: one answers); 1 none answers (--check),\n"
    "or it could not serve (another daemon serves the same directory, a socket error, an\n"
    "accounting database it cannot write); 2 bad usage (an empty VGPU_MACHINE_DIR, an\n"
    "--acct-db that is a directory); 6 the arbiter's directory is root's and this is not root;\n"
    "11 the machine-wide directory is missing or damaged.\n";

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "daemon/server.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/machinedir.h"

extern const struct vgpu_cmd vgpu_cmd_daemon;

#define MAX_CLIENTS 4096
#define WATCH_LISTEN UINT32_MAX        /* the epoll watches' tags that are not a connection's index */
#define WATCH_SIGNAL (UINT32_MAX - 1)
#define EVENTS_AT_ONCE 64
/* Descriptors the daemon keeps for itself beyond its connections: a schedule per GPU (64), NVML's
 * device files, the accounting database and its journal, the socket, lock, signalfd and spare. */
#define FD_RESERVE      256
#define ROOT_CONNS      64        /* connections only root's clients take: root always gets in */
#define MIN_USER_CONNS  64        /* below this many for other users, the daemon does not serve */
#define ACCEPT_PAUSE_NS 100000000ULL   /* the listen socket rests this long when accept cannot get a descriptor */

/* How many connections the daemon serves: as many as its file limit leaves (raised to the hard
 * limit first), at most MAX_CLIENTS, ROOT_CONNS of them root's alone. */
struct conn_limits {
    unsigned total;           /* connections at most */
    unsigned others;          /* of those, for users other than root together */
    unsigned per_login;       /* of those, for one login (with its subordinate uids: daemon/logins.c) */
};
#define SPIN_US_DEFAULT 3000U     /* tests/gpu/latency.sh, H200, through the daemon: client p99 0.83-0.94 ms
                                   * at 3 ms of spin, 1.35-1.41 ms at 50 us (own schedules: 0.79-0.81) */
#define SPIN_US_MAX     100000U

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const struct option options[] = {
    { "check", no_argument, NULL, 'c' },
    { "spin-us", required_argument, NULL, 's' },
    { "acct-db", required_argument, NULL, 'a' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

/* The arbiter's own directory in the machine-wide one, root's and closed to others. An older vgpu
 * made the machine directory sticky and world-writable (for a placement ledger every user wrote),
 * so a user may have made something under that name first, to squat the socket: it is moved aside
 * (root may rename anything in a sticky directory) and said. */
static int arbiter_dir(int mfd, const char *mpath)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        int d = openat(mfd, VGPU_ARB_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (d >= 0 && fstat(d, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022))
            return d;
        if (d >= 0)
            close(d);
        struct stat lst;
        if (fstatat(mfd, VGPU_ARB_DIR, &lst, AT_SYMLINK_NOFOLLOW) == 0 && geteuid() != 0 && lst.st_uid == 0) {
            vgpu_error("%s/%s is root's: only root's daemon serves this directory", mpath, VGPU_ARB_DIR);
            return -1;
        }
        if (fstatat(mfd, VGPU_ARB_DIR, &lst, AT_SYMLINK_NOFOLLOW) == 0) {
            char aside[160];
            snprintf(aside, sizeof aside, "%s.squatted.%ld.%d", VGPU_ARB_DIR, (long)time(NULL), attempt);
            if (renameat(mfd, VGPU_ARB_DIR, mfd, aside) != 0) {
                vgpu_error("cannot move aside %s/%s (uid %u, mode %04o), which is not the daemon's: %s; remove it",
                           mpath, VGPU_ARB_DIR, (unsigned)lst.st_uid, (unsigned)(lst.st_mode & 07777),
                           strerror(errno));
                return -1;
            }
            vgpu_warn("moved aside %s/%s (uid %u, mode %04o), which was not the daemon's, to %s/%s", mpath,
                      VGPU_ARB_DIR, (unsigned)lst.st_uid, (unsigned)(lst.st_mode & 07777), mpath, aside);
        }
        if (mkdirat(mfd, VGPU_ARB_DIR, 0755) != 0 && errno != EEXIST) {
            vgpu_error("cannot create %s/%s: %s", mpath, VGPU_ARB_DIR, strerror(errno));
            return -1;
        }
        d = openat(mfd, VGPU_ARB_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The umask may have narrowed it; clients only need to reach the socket. */
        if (d >= 0 && fstat(d, &st) == 0 && st.st_uid == geteuid() && fchmod(d, 0755) == 0)
            return d;
        if (d >= 0)
            close(d);
    }
    vgpu_error("%s/%s kept being replaced by another user's; remove it and start again", mpath, VGPU_ARB_DIR);
    return -1;
}

static int listen_socket(int adir, const char *sock_path)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(sock_path) >= sizeof a.sun_path) {
        vgpu_error("the socket path %s is longer than a Unix socket allows (%zu bytes); use a shorter "
                   "VGPU_MACHINE_DIR", sock_path, sizeof a.sun_path - 1);
        if (s >= 0)
            close(s);
        return -1;
    }
    memcpy(a.sun_path, sock_path, strlen(sock_path) + 1);   /* fits: checked above */
    unlinkat(adir, VGPU_ARB_SOCK, 0);   /* a dead daemon's; ours alone (we hold the lock) */
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0) {
        vgpu_error("cannot listen on %s: %s", sock_path, strerror(errno));
        if (s >= 0)
            close(s);
        return -1;
    }
    /* Every user's jobs connect; SO_PEERCRED says who. */
    if (fchmodat(adir, VGPU_ARB_SOCK, 0666, 0) != 0) {
        vgpu_error("cannot open %s to every user's jobs (chmod): %s", sock_path, strerror(errno));
        close(s);
        return -1;
    }
    return s;
}

static int check_only(void)
{
    char path[108];
    vgpu_arb_sock_path(path, sizeof path);
    if (vgpu_arb_available()) {
        printf("an arbiter answers on %s\n", path);
        return 0;
    }
    fprintf(stderr, "vgpu daemon: no arbiter answers on %s (start one: vgpu daemon, as root, or systemctl start "
                    "vgpu-daemon)\n", path);
    return 1;
}

/* Raises the soft file limit to the hard one, and fits the connection limits into it. false (and
 * said) when the hard limit leaves other users fewer than MIN_USER_CONNS connections: a daemon that
 * serves anyway would hit EMFILE with its clients' connections, and root's jobs could not get in. */
static bool fit_fd_limit(struct conn_limits *cl)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        vgpu_error("cannot read the daemon's file limit (getrlimit): %s", strerror(errno));
        return false;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t room = rl.rlim_cur > FD_RESERVE ? rl.rlim_cur - FD_RESERVE : 0;
    cl->total = room < MAX_CLIENTS ? (unsigned)room : MAX_CLIENTS;
    cl->others = cl->total > ROOT_CONNS ? cl->total - ROOT_CONNS : 0;
    if (cl->others < MIN_USER_CONNS) {
        vgpu_error("the daemon's file limit (%llu descriptors) leaves other users %u connections, fewer than the %u "
                   "it needs (it keeps %u descriptors for itself and %u connections for root): raise its hard "
                   "limit (LimitNOFILE= in vgpu-daemon.service, or ulimit -Hn) to %u or more",
                   (unsigned long long)rl.rlim_cur, cl->others, MIN_USER_CONNS, FD_RESERVE, ROOT_CONNS,
                   FD_RESERVE + ROOT_CONNS + MIN_USER_CONNS);
        return false;
    }
    cl->per_login = cl->others < VGPU_ARB_USER_CONNS ? cl->others : VGPU_ARB_USER_CONNS;
    return true;
}

/* A descriptor kept free, so that a connection accept() cannot take for want of descriptors
 * (EMFILE) is still taken off the queue and closed: left there, epoll says the listen socket is
 * readable for ever and the daemon spins. */
static int spare_fd = -1;

static void open_spare(void)
{
    if (spare_fd < 0)
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Takes the connections waiting. Returns false when accept cannot go on for want of descriptors or
 * memory: then the caller stops watching the listen socket for ACCEPT_PAUSE_NS. */
static bool accept_clients(int ls, int ep, struct arb_client *cl, unsigned *n, struct arbiter *a,
                           const struct conn_limits *lim)
{
    for (;;) {
        int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
            close(spare_fd);   /* room for one: take the connection off the queue, and end it */
            spare_fd = -1;
            fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                close(fd);
            open_spare();
            if (fd >= 0)
                continue;
        }
        if (fd < 0)
            return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED || errno == EPROTO;
        struct ucred cr;
        socklen_t crl = sizeof cr;
        bool ok = *n < lim->total && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0;
        uid_t login = ok ? arb_login_of(a, cr.uid) : 0;
        unsigned same = 0, others = 0;
        for (unsigned i = 0; ok && cr.uid != 0 && i < *n; i++) {
            others += cl[i].uid != 0;
            same += cl[i].login == login && cl[i].uid != 0;
        }
        /* One login cannot take every connection, nor all users together root's: root's jobs, and
         * other users', still get in. */
        if (!ok || (cr.uid != 0 && (same >= lim->per_login || others >= lim->others))) {
            close(fd);   /* the client then paces itself on its user's own schedule */
            continue;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = *n };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            return false;   /* no memory for the watch: rest, as for want of descriptors */
        }
        cl[*n] = (struct arb_client){ .fd = fd, .id = ++a->next_client_id, .pid = cr.pid, .uid = cr.uid,
                                      .login = login };
        (*n)++;
    }
}

/* Serves one client's pending requests; false when it is gone. */
static bool serve_client(struct arbiter *a, struct arb_client *c)
{
    static struct {
        struct vgpu_arb_req q;
        char in[VGPU_ARB_MAX_PAYLOAD];
    } msg;
    static struct {
        struct vgpu_arb_rep r;
        char out[VGPU_ARB_MAX_PAYLOAD];
    } rep;
    for (int burst = 0; burst < 64; burst++) {
        union vgpu_arb_cmsg cm;
        struct iovec iov = { &msg, sizeof msg };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf };
        ssize_t got = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        int passed = got > 0 ? vgpu_arb_take_fd(&m) : -1;
        if (got < (ssize_t)sizeof msg.q || msg.q.len > VGPU_ARB_MAX_PAYLOAD ||
            got != (ssize_t)(sizeof msg.q + msg.q.len) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            if (passed >= 0)
                close(passed);
            return false;   /* closed, or not our protocol: the connection ends */
        }
        int send_fd;
        if (!arb_handle(a, c, &msg.q, msg.in, passed, &rep.r, rep.out, &send_fd))
            continue;
        if (rep.r.len > VGPU_ARB_MAX_PAYLOAD)
            rep.r.len = 0;
        union vgpu_arb_cmsg sm;
        struct iovec riov = { &rep, sizeof rep.r + rep.r.len };
        struct msghdr rm = { .msg_iov = &riov, .msg_iovlen = 1 };
        vgpu_arb_put_fd(&rm, &sm, send_fd);
        /* A client that does not read its answers fills its own socket buffer: it is dropped,
         * never waited for. */
        if (sendmsg(c->fd, &rm, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof rep.r + rep.r.len))
            return false;
    }
    return true;
}

static int serve(uint64_t spin_ns, const char *acct_db)
{
    struct vgpu_err e = { 0 };
    const char *mpath = vgpu_machinedir_path();
    int mfd = vgpu_machinedir_open(true, &e);
    if (mfd < 0)
        return vgpu_err_report(&e);
    int adir = arbiter_dir(mfd, mpath);
    close(mfd);
    if (adir < 0)
        return VGPU_EXIT_PERMISSION;
    int lock = openat(adir, VGPU_ARB_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) {
        vgpu_error("another vgpu daemon already serves %s (its lock %s/%s/%s is held)", mpath, mpath, VGPU_ARB_DIR,
                   VGPU_ARB_LOCK);
        close(adir);
        return VGPU_EXIT_FAIL;
    }
    struct conn_limits lim;
    if (!fit_fd_limit(&lim)) {
        close(adir);
        return VGPU_EXIT_FAIL;
    }
    open_spare();
    char sock_path[4200];
    snprintf(sock_path, sizeof sock_path, "%s/%s/%s", mpath, VGPU_ARB_DIR, VGPU_ARB_SOCK);
    int ls = listen_socket(adir, sock_path);
    if (ls < 0)
        return VGPU_EXIT_FAIL;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    struct arbiter *a = calloc(1, sizeof *a);
    struct arb_client *cl = calloc(MAX_CLIENTS, sizeof *cl);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!a || !cl || sfd < 0 || ep < 0) {
        vgpu_error("cannot start: %s", strerror(errno));
        return VGPU_EXIT_FAIL;
    }
    /* epoll, not poll: the spin below looks again and again, and poll's cost grows with every
     * connection open (one user's 704 idle connections took the daemon from 39 % to 50 % of a
     * CPU serving one --core 30 job); epoll's grows with the connections that have something.
     * A connection's watch carries its index in cl[], kept when the last one moves into a gap. */
    struct epoll_event lev = { .events = EPOLLIN, .data.u32 = WATCH_LISTEN };
    struct epoll_event sev = { .events = EPOLLIN, .data.u32 = WATCH_SIGNAL };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sev) != 0) {
        vgpu_error("cannot start: watching the socket: %s", strerror(errno));
        return VGPU_EXIT_FAIL;
    }
    arb_acct_configure(a, acct_db);   /* checked by cmd_daemon; starts the accounting thread */
    arb_gpus_start(a);
    fprintf(stderr, "vgpu daemon: the arbiter of %s listens on %s (%u connections at most, %u of one login's, %u "
                    "kept for root)\n", mpath, sock_path, lim.total, lim.per_login, lim.total - lim.others);
    /* Before the first request: the holders file of the daemon before this one (a restart), whose
     * running jobs make their promises again before anyone else's placement is admitted. */
    char adir_path[4200];
    snprintf(adir_path, sizeof adir_path, "%s/%s", mpath, VGPU_ARB_DIR);
    arb_place_start(a, adir, adir_path);
    unsigned n = 0;
    a->clients = cl;
    a->nclients = &n;
    uint64_t busy_at = 0, accept_rest_until = 0;
    struct epoll_event evs[EVENTS_AT_ONCE];
    bool stop = false;
    while (!stop) {
        /* For spin_ns after a request, look again without sleeping: a request is often followed
         * at once by the next (a release, then the waiter's acquire), and a sleeping daemon takes
         * a wake-up of tens of microseconds on an idle core to answer it. */
        uint64_t t = now_ns();
        int timeout = t - busy_at < spin_ns ? 0 : -1;
        if (accept_rest_until) {
            if (t >= accept_rest_until) {
                accept_rest_until = 0;
                open_spare();
                if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0)
                    accept_rest_until = t + ACCEPT_PAUSE_NS;   /* no memory yet: rest again */
            } else {
                int ms = (int)((accept_rest_until - t) / 1000000ULL) + 1;
                timeout = timeout == 0 ? 0 : ms;
            }
        }
        int got = epoll_wait(ep, evs, EVENTS_AT_ONCE, timeout);
        if (got < 0 && errno != EINTR)
            break;
        if (got > 0)
            busy_at = now_ns();
        bool accept_now = false;
        for (int k = 0; k < got; k++) {
            uint32_t i = evs[k].data.u32;
            if (i == WATCH_SIGNAL) {
                stop = true;
                break;
            }
            if (i == WATCH_LISTEN) {
                accept_now = true;   /* after the clients: their requests first, as before */
                continue;
            }
            if (i >= n)
                continue;   /* cannot happen: every gap is filled at once, below */
            if (serve_client(a, &cl[i]) && !(evs[k].events & (EPOLLHUP | EPOLLERR)))
                continue;
            arb_client_gone(a, &cl[i]);
            epoll_ctl(ep, EPOLL_CTL_DEL, cl[i].fd, NULL);
            close(cl[i].fd);
            n--;
            if (i == n)
                continue;
            /* The last connection fills the gap: its watch, and its event still to come in this
             * batch if it has one, now name slot i. */
            cl[i] = cl[n];
            struct epoll_event mv = { .events = EPOLLIN, .data.u32 = i };
            epoll_ctl(ep, EPOLL_CTL_MOD, cl[i].fd, &mv);
            for (int j = k + 1; j < got; j++)
                if (evs[j].data.u32 == n)
                    evs[j].data.u32 = i;
        }
        if (accept_now && !stop && !accept_clients(ls, ep, cl, &n, a, &lim)) {
            epoll_ctl(ep, EPOLL_CTL_DEL, ls, NULL);   /* no spinning on a queue we cannot take from */
            accept_rest_until = now_ns() + ACCEPT_PAUSE_NS;
        }
    }
    unlinkat(adir, VGPU_ARB_SOCK, 0);
    arb_gpus_free(a);
    arb_logins_free(a);
    fprintf(stderr, "vgpu daemon: stopped (%llu requests, %llu refused)\n", (unsigned long long)a->requests,
            (unsigned long long)a->refused);
    return 0;
}

static int cmd_daemon(int argc, char **argv)
{
    if (arb_start_stdio() < 0) {
        perror("vgpu daemon: opening /dev/null for the closed descriptors 0-2");
        return VGPU_EXIT_FAIL;
    }
    bool check = false;
    unsigned spin_us = SPIN_US_DEFAULT;
    bool spin_given = false;
    const char *acct_db = NULL;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_daemon, argc, argv, "")) != -1) {
        switch (c) {
        case 'c': check = true; break;
        case 's': {
            if (spin_given)
                return vgpu_usage_error(&vgpu_cmd_daemon, "--spin-us is given twice: give it once");
            spin_given = true;
            char *end;
            errno = 0;
            unsigned long v = optarg[0] >= '0' && optarg[0] <= '9' ? strtoul(optarg, &end, 10) : ULONG_MAX;
            if (v == ULONG_MAX || *end || errno || v > SPIN_US_MAX)
                return vgpu_usage_error(&vgpu_cmd_daemon, "--spin-us '%s': give whole microseconds from 0 to %u",
                                        optarg, SPIN_US_MAX);
            spin_us = (unsigned)v;
            break;
        }
        case 'a':
            if (acct_db)
                return vgpu_usage_error(&vgpu_cmd_daemon, "--acct-db is given twice: give it once");
            if (optarg[0] != '/' || strlen(optarg) >= PATH_MAX || optarg[strlen(optarg) - 1] == '/')
                return vgpu_usage_error(&vgpu_cmd_daemon, "--acct-db '%s': give the database file's absolute path",
                                        optarg);
            acct_db = optarg;
            break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_daemon, "unexpected argument '%s'", argv[optind]);
    int rc = arb_start_env();
    if (!rc && !check)
        rc = arb_start_checks(acct_db);
    if (rc)
        return rc;
    return check ? check_only() : serve((uint64_t)spin_us * 1000ULL, acct_db);
}

const struct vgpu_cmd vgpu_cmd_daemon = {
    .name = "daemon",
    .fn = cmd_daemon,
    .summary = "the arbiter: the one writer of every user's GPU-time schedules",
    .usage = usage,
    .options = options,
};
