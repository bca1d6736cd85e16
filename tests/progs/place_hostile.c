/* place_hostile: a user who does not play fair with placement through the arbiter
 * (tests/cli/arbiter.sh; the daemon's side is cmd/daemon/place.c).
 *
 *   place_hostile UUID VICTIM_PID SECONDS
 *
 * Over its own raw connections to the daemon (not the library's one), it:
 *   - takes a place in the --wait queue on each of 32 connections and never looks again (the
 *     empty queue file named for pid 1 of the shared directory, made of connections);
 *   - asks to take over what VICTIM_PID (root's `vgpu run`) holds, and pid 1's;
 *   - counts itself on GPU UUID in the job count as often as it is let (a connection each);
 *   - sends garbage: payloads of the wrong size, a UUID that fills its field, unknown requests;
 *   - promises with a stale version;
 * and holds every connection open for SECONDS. Prints one line:
 *   tickets=N adopted=N counted=N garbage_accepted=N stale_accepted=N
 * adopted counts entries it got from others (0 when the daemon holds), garbage_accepted and
 * stale_accepted requests the daemon took (0). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vgpu/arbiter.h"

#define CONNS 32

static int conn(void)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (vgpu_arb_sock_path(a.sun_path, sizeof a.sun_path) != 0)
        return -1;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        if (s >= 0)
            close(s);
        return -1;
    }
    return s;
}

/* One request with `len` bytes of payload (which may lie about its size: `claim`); the reply's rc,
 * or -EPIPE when the daemon closed the connection. */
static int call(int s, uint32_t op, const uint64_t a[4], const void *in, size_t len, uint32_t claim,
                struct vgpu_arb_rep *r)
{
    static char buf[sizeof(struct vgpu_arb_req) + VGPU_ARB_MAX_PAYLOAD + 64];
    struct vgpu_arb_req q = { .op = op, .len = claim };
    if (a)
        memcpy(q.a, a, sizeof q.a);
    memcpy(buf, &q, sizeof q);
    if (len)
        memcpy(buf + sizeof q, in, len);
    if (send(s, buf, sizeof q + len, MSG_NOSIGNAL) < 0)
        return -EPIPE;
    static char back[sizeof(struct vgpu_arb_rep) + VGPU_ARB_MAX_PAYLOAD];
    ssize_t n = recv(s, back, sizeof back, 0);
    if (n < (ssize_t)sizeof *r)
        return -EPIPE;
    memcpy(r, back, sizeof *r);
    return r->rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: place_hostile UUID VICTIM_PID SECONDS\n");
        return 2;
    }
    struct vgpu_arb_gpu_bytes g = { .bytes = 1 };
    snprintf(g.uuid, sizeof g.uuid, "%s", argv[1]);
    uint64_t victim = strtoull(argv[2], NULL, 10);
    int fds[CONNS];
    unsigned tickets = 0, adopted = 0, counted = 0, garbage = 0, stale = 0;
    struct vgpu_arb_rep r;
    for (int i = 0; i < CONNS; i++) {
        fds[i] = conn();
        if (fds[i] < 0)
            continue;
        uint64_t hello[4] = { VGPU_ARB_PROTO };
        call(fds[i], VGPU_ARB_HELLO, hello, NULL, 0, 0, &r);
        uint64_t want[4] = { 1, 1 };
        tickets += call(fds[i], VGPU_ARB_PL_TICKET, want, NULL, 0, 0, &r) == 0 && r.v[0] > 0;
        counted += call(fds[i], VGPU_ARB_JC_ENTER, NULL, &g, sizeof g, sizeof g, &r) == 0;
    }
    int s = fds[0];
    for (int k = 0; k < 2 && s >= 0; k++) {
        uint64_t who[4] = { k ? 1 : victim };
        int rc = call(s, VGPU_ARB_PL_ADOPT, who, NULL, 0, 0, &r);
        adopted += rc > 0 ? (unsigned)rc : 0;
    }
    /* Garbage, each on a fresh connection (the daemon may end one that breaks the protocol). */
    struct vgpu_arb_gpu_bytes full;
    memset(&full, 'A', sizeof full);
    for (int k = 0; k < 5; k++) {
        int c = conn();
        if (c < 0)
            continue;
        int rc;
        switch (k) {
        case 0: rc = call(c, VGPU_ARB_PL_LOOK, NULL, &g, sizeof g - 1, sizeof g - 1, &r); break;  /* short */
        case 1: rc = call(c, VGPU_ARB_PL_LOOK, NULL, &g, sizeof g, sizeof g + 8, &r); break;     /* lies about len */
        case 2: rc = call(c, VGPU_ARB_JC_ENTER, NULL, &full, sizeof full, sizeof full, &r); break; /* no NUL */
        case 3: rc = call(c, 90, NULL, NULL, 0, 0, &r); break;                                     /* unknown */
        default: rc = call(c, VGPU_ARB_PL_PROMISE, NULL, &g, sizeof g, VGPU_ARB_MAX_PAYLOAD + 1, &r); break;
        }
        garbage += rc >= 0;
        close(c);
    }
    if (s >= 0) {
        uint64_t old[4] = { 0 };   /* a version no ledger has */
        stale += call(s, VGPU_ARB_PL_PROMISE, old, &g, sizeof g, sizeof g, &r) == 0;
    }
    printf("tickets=%u adopted=%u counted=%u garbage_accepted=%u stale_accepted=%u\n", tickets, adopted, counted,
           garbage, stale);
    fflush(stdout);
    sleep((unsigned)atoi(argv[3]));
    for (int i = 0; i < CONNS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return 0;
}
