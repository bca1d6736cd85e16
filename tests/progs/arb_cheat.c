/* arb_cheat: a --core 30 job that does not play fair with the arbiter's lease (tests/cli/arbiter_lease.sh).
 *
 *   arb_cheat UUID SECONDS MODE
 *
 * Speaks the arbiter's protocol through the core library alone (no libvgpu, no GPU work: holding
 * the lease is what keeps other jobs off the GPU). Each turn it takes the lease and holds it to
 * its deadline, then, by MODE:
 *   honest     gives it back, reporting the time it held (the control: a saturating --core 30 job)
 *   keep       never gives it back; asks again once it is revoked
 *   drain      never gives it back, saying DRAINING every 100 ms
 *   detach     DETACHes and ATTACHes again instead of giving it back
 *   reconnect  closes its connection and opens a new one instead of giving it back
 * Prints: mode=MODE leases=N held_ms=M (the time it held leases, as it saw them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/arbiter.h"
#include "vgpu/proc.h"
#include "vgpu/sched.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void nap(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
    nanosleep(&ts, NULL);
}

struct cheat {
    struct vgpu_sched s;
    const char *uuid;
    uint64_t key;
    int job, proc;
};

static int join(struct cheat *c)
{
    struct vgpu_err e = { 0 };
    if (vgpu_sched_open(&c->s, c->uuid, &e) != 0 || !c->s.remote) {
        fprintf(stderr, "arb_cheat: no arbiter's schedule for %s: %s\n", c->uuid, e.msg[0] ? e.msg : "not remote");
        return -1;
    }
    c->job = vgpu_sched_job(&c->s, c->key, 30, false, VGPU_PRIO_NORMAL, now_ns());
    c->proc = c->job < 0 ? -1 : vgpu_sched_attach(&c->s, (unsigned)c->job, getpid(), vgpu_proc_start_time(getpid()));
    if (c->proc < 0) {
        fprintf(stderr, "arb_cheat: the daemon gave no job or process entry\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: arb_cheat UUID SECONDS honest|keep|drain|detach|reconnect\n");
        return 2;
    }
    const char *mode = argv[3];
    if (strcmp(mode, "honest") && strcmp(mode, "keep") && strcmp(mode, "drain") && strcmp(mode, "detach") &&
        strcmp(mode, "reconnect")) {
        fprintf(stderr, "arb_cheat: unknown mode '%s'\n", mode);
        return 2;
    }
    struct cheat c = { .uuid = argv[1], .key = vgpu_sched_job_key("arb_cheat", 9) };
    if (join(&c) != 0)
        return 1;
    uint64_t stop = now_ns() + (uint64_t)(atof(argv[2]) * 1e9), held = 0;
    unsigned leases = 0;
    while (now_ns() < stop) {
        uint64_t lease, end, t = now_ns();
        if (!vgpu_sched_try_acquire(&c.s, c.proc, t, &lease, &end)) {
            vgpu_sched_wait(&c.s, vgpu_sched_retry_in(&c.s, c.proc, t));
            continue;
        }
        leases++;
        if (end > t)
            nap(end - t);   /* the whole lease: it "uses" all of it */
        if (!strcmp(mode, "honest")) {
            uint64_t r = now_ns();
            vgpu_sched_release(&c.s, lease, r - t, r);
        } else if (!strcmp(mode, "keep") || !strcmp(mode, "drain")) {
            /* Held until it is taken away (revoked, or preempted). */
            while (atomic_load(&c.s.f->lease) == lease && now_ns() < stop) {
                if (!strcmp(mode, "drain"))
                    vgpu_sched_draining(&c.s, lease, now_ns());
                nap(mode[0] == 'd' ? 100000000ULL : 1000000ULL);
            }
        } else if (!strcmp(mode, "detach")) {
            vgpu_sched_detach(&c.s, c.proc);
            c.proc = vgpu_sched_attach(&c.s, (unsigned)c.job, getpid(), vgpu_proc_start_time(getpid()));
            if (c.proc < 0)
                return 1;
        } else {
            vgpu_sched_close(&c.s);
            vgpu_arb_forget();
            if (join(&c) != 0)
                return 1;
        }
        held += now_ns() - t;
    }
    printf("mode=%s leases=%u held_ms=%llu\n", mode, leases, (unsigned long long)(held / 1000000));
    return 0;
}
