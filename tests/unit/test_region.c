/* The job region: reservation arithmetic, the limit under a 16-process race, reaping of a
 * SIGKILLed process, bounds checks, rejection of bad files, modes and the umask. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/lend.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"

static char statedir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(statedir, sizeof statedir, "/tmp/vgpu-test-region.XXXXXX");
    if (!mkdtemp(statedir))
        return -1;
    setenv("VGPU_STATE_DIR", statedir, 1);
    char buf[512];
    struct vgpu_err e;
    return vgpu_statedir(buf, sizeof buf, true, &e);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", statedir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A slot state written by hand below was claimed first in real life: the claim raised the
 * region's scan bound (slot_end) past it, so raise it the same way. */
static void covered(struct vgpu_region *r, int i)
{
    uint32_t w = atomic_load(&r->use->slot_end);
    if ((w & ~VGPU_SLOT_END_KEPT) < (uint32_t)i + 1)
        atomic_store(&r->use->slot_end, VGPU_SLOT_END_KEPT | ((uint32_t)i + 1));
}

static void make_job(struct vgpu_region *r, unsigned ndev, uint64_t limit)
{
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "test";
    spec.device_count = ndev;
    for (unsigned d = 0; d < ndev; d++) {
        spec.dev[d].uuid = "GPU-00000000-0000-0000-0000-000000000000";
        spec.dev[d].mem_total = 80ULL << 30;
        spec.dev[d].mem_limit = limit;
    }
    struct vgpu_err e = { 0 };
    int rc = vgpu_region_create(r, statedir, &spec, &e);
    if (rc != 0)
        fail_msg("create: %s", e.msg);
}

static void test_reserve_release(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 2, 1000);
    struct vgpu_err e;
    int s = vgpu_region_attach(&r, &e);
    assert_true(s >= 0);
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 600), 0);
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 400), 0);        /* exactly the limit */
    assert_int_equal(vgpu_region_mem_used(&r, 0), 1000);
    errno = 0;
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 1), -1);         /* one byte over */
    assert_int_equal(errno, ENOSPC);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 1000);            /* nothing changed */
    assert_int_equal(vgpu_region_mem_used(&r, 1), 0);               /* devices are apart */
    assert_int_equal(vgpu_region_release(&r, s, 0, 400), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 600);
    /* Releasing more than the slot holds never underflows. */
    assert_int_equal(vgpu_region_release(&r, s, 0, 5000), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);
    assert_int_equal(atomic_load(&r.use->slot[s].used[0]), 0);
    /* A live limit change applies at the next reservation. */
    assert_int_equal(vgpu_region_set_mem_limit(&r, 0, 100, &e), 0);
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 101), -1);
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 100), 0);
    assert_int_equal(vgpu_region_set_mem_limit(&r, 0, 0, &e), 0);   /* none */
    assert_int_equal(vgpu_region_reserve(&r, s, 0, UINT64_MAX - 100), 0);
    errno = 0;
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 1000), -1);      /* overflow, not wrap */
    assert_int_equal(errno, EOVERFLOW);
    /* Lowering below current use is allowed; new reservations then fail. */
    assert_int_equal(vgpu_region_set_mem_limit(&r, 0, 50, &e), 0);
    assert_int_equal(vgpu_region_reserve(&r, s, 0, 1), -1);
    vgpu_region_detach(&r, s);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);                /* detach returns everything */
    assert_int_equal(vgpu_region_remove(&r, &e), 0);
    vgpu_region_close(&r);
}

static void test_bounds(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 2, 1000);
    struct vgpu_err e;
    int s = vgpu_region_attach(&r, &e);
    errno = 0;
    assert_int_equal(vgpu_region_reserve(&r, s, 2, 1), -1);         /* device 2 of 2 */
    assert_int_equal(errno, EINVAL);
    assert_int_equal(vgpu_region_reserve(&r, s, VGPU_REGION_MAX_DEVICES, 1), -1);
    assert_int_equal(vgpu_region_reserve(&r, s, (unsigned)-1, 1), -1);
    assert_int_equal(vgpu_region_reserve(&r, -1, 0, 1), -1);
    assert_int_equal(vgpu_region_reserve(&r, VGPU_REGION_MAX_SLOTS, 0, 1), -1);
    assert_int_equal(vgpu_region_release(&r, s, 99, 1), -1);
    assert_int_equal(vgpu_region_release(&r, 1 << 20, 0, 1), -1);
    assert_int_equal(vgpu_region_mem_limit(&r, 5), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 5), 0);
    assert_int_equal(vgpu_region_set_mem_limit(&r, 2, 1, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    assert_int_equal(vgpu_region_set_core_limit(&r, 0, 101, VGPU_CORE_HARD, &e), -1);
    vgpu_region_detach(&r, s);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* 16 processes of one job race to reserve; every one of them checks, after every step, that
 * the job's total is within the limit, and the parent samples it all along. */
static void test_race(void **state)
{
    (void)state;
    enum { PROCS = 16, ROUNDS = 20000, LIMIT = 1000 };
    struct vgpu_region r;
    make_job(&r, 1, LIMIT);
    char path[4096];
    snprintf(path, sizeof path, "%s", r.path);
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            struct vgpu_region c;
            struct vgpu_err e;
            if (vgpu_region_open(&c, path, VGPU_REGION_JOB, &e) < 0)
                _exit(10);
            int s = vgpu_region_attach(&c, &e);
            if (s < 0)
                _exit(11);
            uint64_t mine = 0;
            unsigned seed = (unsigned)getpid();
            for (int k = 0; k < ROUNDS; k++) {
                uint64_t sz = 1 + (uint64_t)(rand_r(&seed) % 200);
                if (vgpu_region_reserve(&c, s, 0, sz) == 0)
                    mine += sz;
                if (vgpu_region_mem_used(&c, 0) > LIMIT)
                    _exit(12);
                if (mine && rand_r(&seed) % 2) {
                    uint64_t back = 1 + (uint64_t)rand_r(&seed) % mine;
                    vgpu_region_release(&c, s, 0, back);
                    mine -= back;
                }
                if (vgpu_region_mem_used(&c, 0) > LIMIT)
                    _exit(12);
                if (atomic_load(&c.use->slot[s].used[0]) != mine)
                    _exit(13);
            }
            vgpu_region_detach(&c, s);
            _exit(0);
        }
    }
    int running = PROCS, bad = 0;
    uint64_t worst = 0;
    while (running > 0) {
        uint64_t u = vgpu_region_mem_used(&r, 0);
        if (u > worst)
            worst = u;
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            running--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                bad++;
        }
    }
    assert_int_equal(bad, 0);
    assert_true(worst <= LIMIT);
    assert_true(atomic_load(&r.use->dev[0].peak) <= LIMIT);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);   /* everything came back */
    struct vgpu_err e;
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

static void test_reap_killed(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 1, 0);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct vgpu_err e;
        int s = vgpu_region_attach(&r, &e);
        if (s < 0 || vgpu_region_reserve(&r, s, 0, 12345) < 0)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 12345);
    assert_int_equal(vgpu_region_pids(&r, NULL, NULL, 0), 1);
    assert_int_equal(vgpu_region_reap(&r), 0);          /* alive: nothing to reap */
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    assert_int_equal(vgpu_region_reap(&r), 1);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);
    assert_int_equal(vgpu_region_pids(&r, NULL, NULL, 0), 0);
    assert_int_equal(vgpu_region_reap(&r), 0);          /* reclaimed exactly once */
    /* A reaper that died mid-reap (slot left REAPING by a dead pid) is taken over. */
    struct vgpu_region_slot *s = &r.use->slot[7];
    covered(&r, 7);
    atomic_store(&s->used[0], 99);
    atomic_store(&r.use->dev[0].used, 99);
    atomic_store(&s->owner, ((uint64_t)kid << 8) | VGPU_SLOT_REAPING);
    assert_int_equal(vgpu_region_reap(&r), 1);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);
    assert_int_equal(atomic_load(&s->owner), VGPU_SLOT_FREE);
    /* reap_maybe walks at most once a second. */
    atomic_store(&r.use->last_reap_ns, 0);
    assert_int_equal(vgpu_region_reap_maybe(&r), 0);
    atomic_store(&s->owner, ((uint64_t)kid << 8) | VGPU_SLOT_LIVE);
    assert_int_equal(vgpu_region_reap_maybe(&r), 0);    /* too soon */
    atomic_store(&r.use->last_reap_ns, 0);
    assert_int_equal(vgpu_region_reap_maybe(&r), 1);
    close(ready[0]);
    close(ready[1]);
    struct vgpu_err e;
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* --oversubscribe (issue 15): the cap and the device share, spilling, and the reap of a killed
 * process's spilled bytes. */
static void test_oversub_split(void **state)
{
    (void)state;
    struct vgpu_region r;
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "test";
    spec.device_count = 2;
    for (unsigned d = 0; d < 2; d++) {
        spec.dev[d].uuid = "GPU-00000000-0000-0000-0000-000000000000";
        spec.dev[d].mem_total = 1000;
        spec.dev[d].mem_limit = 3000;       /* larger than the device: the cap */
        spec.dev[d].oversub = true;
        spec.dev[d].mem_device = 1000;
    }
    struct vgpu_err e = { 0 };
    if (vgpu_region_create(&r, statedir, &spec, &e) != 0)
        fail_msg("create: %s", e.msg);
    uint64_t share = 0;
    assert_true(vgpu_region_oversub(&r, 0, &share));
    assert_int_equal(share, 1000);
    int s = vgpu_region_attach(&r, &e);
    assert_true(s >= 0);
    bool sp = true;
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 600, true, &sp), 0);
    assert_false(sp);                                            /* within the share: on the device */
    errno = 0;
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 500, false, &sp), -1);
    assert_int_equal(errno, ENOSPC);                             /* cannot spill: fails at the share */
    assert_int_equal(vgpu_region_mem_used(&r, 0), 600);          /* and changed nothing */
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 500, true, &sp), 0);
    assert_true(sp);                                             /* spillable: spilled */
    assert_int_equal(vgpu_region_mem_spilled(&r, 0), 500);
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 400, false, &sp), 0);
    assert_false(sp);                                            /* 600 + 400 on the device: fits */
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 1500, true, &sp), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 3000);
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 1, true, &sp), -1);   /* the cap is hard */
    /* One process spills on one device only. */
    assert_int_equal(vgpu_region_reserve_split(&r, s, 1, 1000, true, &sp), 0);
    assert_false(sp);
    assert_int_equal(vgpu_region_reserve_split(&r, s, 1, 10, true, &sp), -1);
    vgpu_region_unspill(&r, s, 0, 1500);
    assert_int_equal(vgpu_region_release(&r, s, 0, 1500), 0);
    assert_int_equal(vgpu_region_mem_spilled(&r, 0), 500);
    vgpu_region_detach(&r, s);
    assert_int_equal(vgpu_region_mem_spilled(&r, 0), 0);         /* detach returns the spill too */
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);
    /* A process killed holding spilled memory: the reap gives it back. */
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t kid = fork();
    if (kid == 0) {
        struct vgpu_err ke;
        bool ksp;
        int ks = vgpu_region_attach(&r, &ke);
        if (ks < 0 || vgpu_region_reserve_split(&r, ks, 0, 1200, true, &ksp) < 0 || !ksp)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(vgpu_region_mem_spilled(&r, 0), 1200);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    assert_int_equal(vgpu_region_reap(&r), 1);
    assert_int_equal(vgpu_region_mem_spilled(&r, 0), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 0);
    close(ready[0]);
    close(ready[1]);
    /* A job without the option: reserve_split is reserve, nothing spills. */
    struct vgpu_region plain;
    make_job(&plain, 1, 1000);
    int ps = vgpu_region_attach(&plain, &e);
    assert_false(vgpu_region_oversub(&plain, 0, NULL));
    assert_int_equal(vgpu_region_reserve_split(&plain, ps, 0, 1000, true, &sp), 0);
    assert_false(sp);
    assert_int_equal(vgpu_region_reserve_split(&plain, ps, 0, 1, true, &sp), -1);
    vgpu_region_remove(&plain, &e);
    vgpu_region_close(&plain);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* Writes a copy of a valid region with `patch` applied, and returns the open error. */
/* Slots that cannot be judged keep their usage: a live process whose start time could not be
 * read, a process of a PID namespace this reader cannot see. Proven deaths are reaped: a pid
 * gone from our own namespace, or a namespace we saw once (host_ns is ours) that is empty now. */
static void put_slot(struct vgpu_region *r, int i, pid_t pid, uint64_t start, uint32_t pidns, pid_t host,
                     uint32_t host_ns, uint64_t bytes)
{
    struct vgpu_region_slot *s = &r->use->slot[i];
    covered(r, i);
    atomic_store(&s->start_time, start);
    atomic_store(&s->pidns, pidns);
    atomic_store(&s->host_pid, host);
    atomic_store(&s->host_ns, host_ns);
    atomic_store(&s->used[0], bytes);
    atomic_fetch_add(&r->use->dev[0].used, bytes);
    atomic_store(&s->owner, ((uint64_t)(uint32_t)pid << 8) | VGPU_SLOT_LIVE);
}

/* Scans stop at the slot bound (issue 14, item 4): a new region keeps it at 0, each claim
 * raises it past its slot, and nothing past it is read; a region without the bound (an older
 * vgpu's, slot_end 0) is scanned whole. */
static void test_slot_end(void **state)
{
    (void)state;
    struct vgpu_region r;
    struct vgpu_err e;
    make_job(&r, 1, 0);
    assert_int_equal(atomic_load(&r.use->slot_end), VGPU_SLOT_END_KEPT);
    assert_int_equal(vgpu_region_slot_end(&r), 0);
    int a = vgpu_region_attach(&r, &e), b = vgpu_region_attach(&r, &e);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(vgpu_region_slot_end(&r), 2);
    vgpu_region_detach(&r, a);
    assert_int_equal(vgpu_region_attach(&r, &e), 0);   /* the lowest free slot again */
    assert_int_equal(vgpu_region_slot_end(&r), 2);      /* a bound, never lowered */
    /* A LIVE word past the bound is never looked at (no claim put it there). */
    put_slot(&r, 900, getpid(), vgpu_proc_start_time(getpid()), 0, 0, 0, 0);
    atomic_store(&r.use->slot_end, VGPU_SLOT_END_KEPT | 2);
    assert_int_equal(vgpu_region_pids(&r, NULL, NULL, 0), 2);
    pid_t roots[8];
    assert_int_equal(vgpu_region_roots(&r, roots, 8), 3);   /* the creator and two slots */
    /* An older vgpu's region: no bound, every slot is scanned. */
    atomic_store(&r.use->slot_end, 0);
    assert_int_equal(vgpu_region_slot_end(&r), VGPU_REGION_MAX_SLOTS);
    assert_int_equal(vgpu_region_pids(&r, NULL, NULL, 0), 3);
    /* A claim there leaves the word alone (it stays "no bound"). */
    vgpu_region_detach(&r, b);
    assert_int_equal(vgpu_region_attach(&r, &e), 1);
    assert_int_equal(atomic_load(&r.use->slot_end), 0);
    /* A bound past the end (a damaged word) is clamped. */
    atomic_store(&r.use->slot_end, VGPU_SLOT_END_KEPT | 5000);
    assert_int_equal(vgpu_region_slot_end(&r), VGPU_REGION_MAX_SLOTS);
    atomic_store(&r.use->slot[900].owner, VGPU_SLOT_FREE);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

static void test_reap_only_proven(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 1, 0);
    uint32_t myns = vgpu_proc_view_ns();
    assert_true(myns != 0);
    assert_int_equal(r.hdr->creator_pidns, vgpu_proc_pidns(0));
    /* A live process (our parent) whose start time could not be read when it attached. */
    put_slot(&r, 1, getppid(), 0, myns, getppid(), myns, 1000);
    /* A process of another PID namespace that no process here belongs to: cannot be seen. */
    put_slot(&r, 2, 1, 4242, 0x7ffffff0u, 0, 0, 20000);
    assert_int_equal(vgpu_region_reap(&r), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 21000);
    assert_int_equal(vgpu_region_pids(&r, NULL, NULL, 0), 2);
    assert_true(vgpu_region_creator_alive(&r));
    /* A pid that is gone from our own namespace: dead, whatever the start time. */
    put_slot(&r, 3, 4194303, 0, myns, 0, 0, 300000);
    /* The same foreign namespace, but resolved in our view before (host_ns is ours, as the
     * creator's): a namespace an ancestor saw once and that has no process left is gone. */
    put_slot(&r, 4, 1, 4242, 0x7ffffff1u, 4194302, myns, 4000000);
    assert_int_equal(vgpu_region_reap(&r), 2);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 21000);
    /* CLAIMING and REAPING words of another namespace (its tag) are not judged by their pid. */
    struct vgpu_region_slot *s = &r.use->slot[5];
    covered(&r, 6);
    atomic_store(&s->owner, (uint64_t)0x123456 << 40 | ((uint64_t)4194301 << 8) | VGPU_SLOT_CLAIMING);
    atomic_store(&r.use->slot[6].owner, (uint64_t)0x123456 << 40 | ((uint64_t)4194301 << 8) | VGPU_SLOT_REAPING);
    assert_int_equal(vgpu_region_reap(&r), 0);
    /* Without a tag (an older vgpu) or with ours: the pid decides. */
    atomic_store(&s->owner, ((uint64_t)4194301 << 8) | VGPU_SLOT_CLAIMING);
    assert_int_equal(vgpu_region_reap(&r), 1);
    struct vgpu_err e;
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* Memory of the job outside the limiter counts against the limit. */
static void test_outside(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 1, 1000);
    struct vgpu_err e;
    int slot = vgpu_region_attach(&r, &e);
    assert_true(slot >= 0);
    assert_int_equal(vgpu_region_reserve(&r, slot, 0, 300), 0);
    vgpu_region_set_outside(&r, 0, 600, 1234, 1);
    assert_int_equal(vgpu_region_outside(&r, 0), 600);
    assert_int_equal(vgpu_region_reserve(&r, slot, 0, 200), -1);
    assert_int_equal(errno, ENOSPC);
    assert_int_equal(vgpu_region_reserve(&r, slot, 0, 100), 0);   /* 300 + 100 + 600 = 1000 fits */
    vgpu_region_set_outside(&r, 0, 0, 0, 0);
    assert_int_equal(vgpu_region_reserve(&r, slot, 0, 600), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 1000);
    vgpu_region_detach(&r, slot);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

static int open_patched(const char *src, void (*patch)(int fd), struct vgpu_err *e)
{
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/jobs/bad.region", statedir);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    if (system(cmd) != 0)
        return -99;
    int fd = open(dst, O_RDWR);
    patch(fd);
    close(fd);
    struct vgpu_region r;
    int rc = vgpu_region_open(&r, dst, VGPU_REGION_JOB, e);
    if (rc == 0)
        vgpu_region_close(&r);
    unlink(dst);
    return rc;
}

static void patch_truncate(int fd) { assert_int_equal(ftruncate(fd, 8192), 0); }
static void patch_tiny(int fd) { assert_int_equal(ftruncate(fd, 10), 0); }
static void patch_magic(int fd) { assert_int_equal(pwrite(fd, "NOTVGPU!", 8, 0), 8); }
static void patch_version(int fd)
{
    uint32_t v = 99;
    assert_int_equal(pwrite(fd, &v, 4, offsetof(struct vgpu_region_header, version)), 4);
}
static void patch_devcount(int fd)
{
    uint32_t v = 1000;
    assert_int_equal(pwrite(fd, &v, 4, offsetof(struct vgpu_region_header, device_count)), 4);
}
static void patch_mode(int fd) { assert_int_equal(fchmod(fd, 0622), 0); }

static void test_bad_files(void **state)
{
    (void)state;
    struct vgpu_region r;
    make_job(&r, 1, 0);
    struct vgpu_err e;
    assert_int_equal(open_patched(r.path, patch_truncate, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_STATE);
    assert_non_null(strstr(e.msg, "truncated"));
    assert_int_equal(open_patched(r.path, patch_tiny, &e), -1);
    assert_non_null(strstr(e.msg, "truncated"));
    assert_int_equal(open_patched(r.path, patch_magic, &e), -1);
    assert_non_null(strstr(e.msg, "not a vgpu job region"));
    assert_int_equal(open_patched(r.path, patch_version, &e), -1);
    assert_non_null(strstr(e.msg, "version 99"));
    assert_int_equal(open_patched(r.path, patch_devcount, &e), -1);
    assert_non_null(strstr(e.msg, "corrupt"));
    assert_int_equal(open_patched(r.path, patch_mode, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_PERMISSION);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/jobs/none.region", statedir);
    struct vgpu_region none;
    assert_int_equal(vgpu_region_open(&none, missing, VGPU_REGION_JOB, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_NOT_FOUND);
    /* The listing skips (and counts) corrupt files instead of failing. */
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/jobs/0badbadbad00.region", statedir);
    int fd = open(dst, O_CREAT | O_WRONLY, 0600);
    assert_int_equal(write(fd, "garbage", 7), 7);
    close(fd);
    struct vgpu_job_ref *refs;
    size_t n;
    unsigned corrupt;
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, &corrupt, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(corrupt, 1);
    free(refs);
    unlink(dst);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

static void test_modes_and_umask(void **state)
{
    (void)state;
    mode_t old = umask(0);          /* the most permissive umask: modes must still be ours */
    struct vgpu_region r;
    make_job(&r, 1, 0);
    mode_t after = umask(old);
    assert_int_equal(after, 0);     /* create left the umask alone */
    struct stat st;
    assert_int_equal(stat(r.path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char jobs[4200];
    snprintf(jobs, sizeof jobs, "%s/jobs", statedir);
    assert_int_equal(stat(jobs, &st), 0);
    assert_int_equal(st.st_mode & 0077, 0);
    /* A job process maps the limits read-only: ADMIN-only setters refuse. */
    struct vgpu_region j;
    struct vgpu_err e;
    assert_int_equal(vgpu_region_open(&j, r.path, VGPU_REGION_JOB, &e), 0);
    assert_null(j.hdr_rw);
    assert_int_equal(vgpu_region_set_mem_limit(&j, 0, 1, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_PERMISSION);
    vgpu_region_close(&j);
    /* A world-writable state directory is refused. */
    char unsafe[4200];
    snprintf(unsafe, sizeof unsafe, "%s/unsafe", statedir);
    assert_int_equal(mkdir(unsafe, 0700), 0);
    assert_int_equal(chmod(unsafe, 0777), 0);
    assert_int_equal(vgpu_statedir_check(unsafe, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_PERMISSION);
    assert_non_null(strstr(e.msg, "writable by group or others"));
    rmdir(unsafe);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* A region truncated under its readers (issue 12 item 3): vgpu_region_check fences the
 * mappings off (no SIGBUS after), keeps the limits last seen, including a change by `vgpu limit`
 * after open, and the usage part stays writable (private from then on). */
static void test_truncated_fenced(void **state)
{
    (void)state;
    struct vgpu_region r, j;
    struct vgpu_err e;
    make_job(&r, 2, 1ULL << 30);
    assert_int_equal(vgpu_region_open(&j, r.path, VGPU_REGION_JOB, &e), 0);
    assert_int_equal(vgpu_region_check(&j), 0);
    assert_int_equal(vgpu_region_set_mem_limit(&r, 1, 2ULL << 30, &e), 0);
    int slot = vgpu_region_attach(&j, &e);
    assert_true(slot >= 0);
    assert_int_equal(vgpu_region_check(&j), 0);                          /* sees the new limit */
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 1ULL << 20), 0);
    assert_int_equal(truncate(r.path, 0), 0);
    assert_int_equal(vgpu_region_check(&j), 1);
    assert_true(j.damaged);
    assert_non_null(strstr(j.damaged_why, "truncated to 0 bytes"));
    assert_int_equal(vgpu_region_check(&j), 2);
    assert_int_equal(vgpu_region_mem_limit(&j, 0), 1ULL << 30);
    assert_int_equal(vgpu_region_mem_limit(&j, 1), 2ULL << 30);
    assert_string_equal(j.info->cmdline, "test");
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 512ULL << 20), 0);
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 1ULL << 30), -1);  /* the limit holds */
    assert_int_equal(vgpu_region_mem_used(&j, 0), 512ULL << 20);
    (void)vgpu_region_reap(&j);
    /* The admin side: changes are refused with the reason, nothing faults. */
    assert_int_equal(vgpu_region_set_mem_limit(&r, 0, 1, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_STATE);
    assert_int_equal(vgpu_region_set_state(&r, VGPU_JOB_EXITED, 0, 0, &e), -1);
    assert_non_null(strstr(e.msg, "truncated"));
    vgpu_region_close(&j);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* The same damage met first by a load that faults (the launch path reads the mapping without
 * looking first): a SIGBUS handler calling vgpu_region_fence_fault, as libvgpu.so's does
 * (lib/hook/guard.c), fences the region, and the retried load reads the last limits seen. */
static struct vgpu_region *fault_region;
static volatile int faults_fenced;

static void on_test_bus(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (!vgpu_region_fence_fault(fault_region, si->si_addr))
        _exit(99);                       /* not fenced: the retried load would fault forever */
    faults_fenced++;
}

struct fence_wait {
    struct vgpu_region *r;
    int rc;
    bool done;
};

static void *wait_fence(void *arg)
{
    struct fence_wait *w = arg;
    w->rc = vgpu_region_fence_fault(w->r, &w->r->hdr->limits_seq);
    __atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static void test_truncated_fault(void **state)
{
    (void)state;
    struct vgpu_region r, j;
    struct vgpu_err e;
    make_job(&r, 2, 1ULL << 30);
    assert_int_equal(vgpu_region_open(&j, r.path, VGPU_REGION_JOB, &e), 0);
    int slot = vgpu_region_attach(&j, &e);
    assert_true(slot >= 0);
    assert_int_equal(vgpu_region_fence_fault(&j, &e), 0);              /* not one of its mappings */
    assert_false(vgpu_region_maps(&j, &e));
    assert_true(vgpu_region_maps(&j, &j.hdr->limits_seq) && vgpu_region_maps(&j, &j.use->dev[1].used));
    fault_region = &j;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_test_bus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGBUS, &sa, &old), 0);
    assert_int_equal(truncate(r.path, 0), 0);
    /* Nothing looked (no vgpu_region_check): these loads and stores fault, once. */
    assert_int_equal(atomic_load(&j.hdr->dev[0].mem_limit), 1ULL << 30);
    assert_int_equal(faults_fenced, 1);
    atomic_fetch_add(&j.use->dev[0].used, 5);
    assert_int_equal(atomic_load(&j.use->dev[0].used), 5);
    assert_int_equal(faults_fenced, 1);
    assert_int_equal(sigaction(SIGBUS, &old, NULL), 0);
    assert_true(j.damaged);
    assert_int_equal(j.fence, VGPU_FENCE_FENCED);
    assert_non_null(strstr(j.damaged_why, "was truncated under this process (a load of its limits faulted)"));
    assert_non_null(strstr(j.damaged_why, r.path));
    assert_int_equal(vgpu_region_check(&j), 2);
    assert_int_equal(vgpu_region_fence_fault(&j, &j.hdr->limits_seq), 1); /* fenced: retry */
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 1ULL << 30), -1);  /* the limit holds */
    /* Another thread still replacing the mappings: the fault waits until it is done; a
     * replacement that failed is never retried (0: the caller dies as it would have). */
    __atomic_store_n(&j.fence, VGPU_FENCE_FENCING, __ATOMIC_RELEASE);
    struct fence_wait w = { .r = &j };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_fence, &w), 0);
    struct timespec pause_ts = { 0, 100 * 1000 * 1000 };
    nanosleep(&pause_ts, NULL);
    assert_false(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));          /* still waiting */
    __atomic_store_n(&j.fence, VGPU_FENCE_FENCED, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, 1);
    j.fence = VGPU_FENCE_FAILED;
    assert_int_equal(vgpu_region_fence_fault(&j, &j.hdr->limits_seq), 0);
    j.fence = VGPU_FENCE_FENCED;
    vgpu_region_close(&j);
    vgpu_region_remove(&r, &e);
    vgpu_region_close(&r);
}

/* The split layout (vgpu run --user): the .region is root's 0640 with the job user's group and
 * holds page 0 only, the .usage is the job user's 0600; a JOB reader maps both, accounts in the
 * usage file, and a truncated usage file is fenced off like a truncated region. Root only. */
static void test_split_layout(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "split";
    spec.device_count = 1;
    spec.dev[0].uuid = "GPU-00000000-0000-0000-0000-000000000000";
    spec.dev[0].mem_total = 80ULL << 30;
    spec.dev[0].mem_limit = 1ULL << 30;
    spec.split = true;
    spec.job_uid = 65534;
    spec.job_gid = 65534;
    struct vgpu_region r, j;
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_region_create(&r, statedir, &spec, &e), 0);
    assert_true(vgpu_region_split(&r));
    assert_int_equal(vgpu_region_job_uid(&r), 65534);
    char upath[4200];
    snprintf(upath, sizeof upath, "%.*s.usage", (int)(strlen(r.path) - 7), r.path);
    struct stat st;
    assert_int_equal(stat(r.path, &st), 0);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(st.st_gid, 65534);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(st.st_size, VGPU_REGION_LIMITS_SIZE);
    assert_int_equal(stat(upath, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal((size_t)st.st_size, sizeof(struct vgpu_region_usage));
    assert_int_equal(vgpu_region_open(&j, r.path, VGPU_REGION_JOB, &e), 0);
    assert_null(j.hdr_rw);
    int slot = vgpu_region_attach(&j, &e);
    assert_true(slot >= 0);
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 512ULL << 20), 0);
    assert_int_equal(vgpu_region_mem_used(&r, 0), 512ULL << 20);     /* one usage file for both */
    assert_int_equal(vgpu_region_reserve(&j, slot, 0, 1ULL << 30), -1);
    /* The limits page cannot be made writable through the reader's mapping. */
    assert_int_equal(mprotect(j.map_limits, VGPU_REGION_LIMITS_SIZE, PROT_READ | PROT_WRITE), -1);
    assert_int_equal(errno, EACCES);
    /* A usage file of the wrong owner is refused. */
    assert_int_equal(chown(upath, 1, 1), 0);
    struct vgpu_region k;
    assert_int_equal(vgpu_region_open(&k, r.path, VGPU_REGION_JOB, &e), -1);
    assert_non_null(strstr(e.msg, "not owned by the job's user"));
    assert_int_equal(chown(upath, 65534, 65534), 0);
    /* A truncated usage file: fenced, the limit kept. */
    assert_int_equal(truncate(upath, 0), 0);
    assert_int_equal(vgpu_region_check(&j), 1);
    assert_non_null(strstr(j.damaged_why, "usage file"));
    assert_int_equal(vgpu_region_mem_limit(&j, 0), 1ULL << 30);
    vgpu_region_close(&j);
    assert_int_equal(vgpu_region_remove(&r, &e), 0);
    assert_int_equal(stat(upath, &st), -1);                        /* removed with the region */
    vgpu_region_close(&r);
}

/* A one-GPU job spec with a name, for the lookup tests. */
static struct vgpu_job_spec named_spec(const char *name)
{
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "x";
    spec.device_count = 1;
    spec.dev[0].uuid = "GPU-1";
    spec.name = name;
    return spec;
}

static void test_find_and_stale(void **state)
{
    (void)state;
    struct vgpu_job_spec spec = named_spec("train");
    struct vgpu_region a, f;
    struct vgpu_err e;
    assert_int_equal(vgpu_region_create(&a, statedir, &spec, &e), 0);
    assert_int_equal(vgpu_jobs_find(statedir, "train", VGPU_REGION_JOB, &f, &e), 0);
    assert_string_equal(f.hdr->id, a.hdr->id);
    vgpu_region_close(&f);
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%.5s", a.hdr->id);
    assert_int_equal(vgpu_jobs_find(statedir, prefix, VGPU_REGION_ADMIN, &f, &e), 0);
    vgpu_region_close(&f);
    assert_int_equal(vgpu_jobs_find(statedir, "nope", VGPU_REGION_JOB, &f, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_NOT_FOUND);
    assert_non_null(strstr(e.msg, "train"));
    spec.name = "bad name!";
    assert_int_equal(vgpu_region_create(&f, statedir, &spec, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    /* A job created by a process that died, with no live process, is removed by readers. */
    char path[4096];
    snprintf(path, sizeof path, "%s", a.path);
    struct vgpu_region_header *h = a.hdr_rw;
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    waitpid(kid, NULL, 0);
    h->creator_pid = kid;
    struct vgpu_job_ref *refs;
    size_t n;
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, NULL, &e), 0);
    assert_int_equal(n, 0);
    free(refs);
    assert_int_equal(access(path, F_OK), -1);
    vgpu_region_close(&a);
}

/* An ended job stays listed (for vgpu wait) until its keep time is up, even with its creator
 * gone; then the listing removes it and its log. A name of an ended job may be reused. */
static void test_exited_kept(void **state)
{
    (void)state;
    struct vgpu_job_spec spec = named_spec("again");
    struct vgpu_region a, b, f;
    struct vgpu_err e;
    assert_int_equal(vgpu_region_create(&a, statedir, &spec, &e), 0);
    assert_int_equal(vgpu_region_set_state(&a, VGPU_JOB_EXITED, 3, 0, &e), 0);
    assert_int_equal(atomic_load(&a.hdr->state), VGPU_JOB_EXITED);
    assert_true(atomic_load(&a.hdr->exited_realtime_ns) >= a.hdr->created_realtime_ns);
    pid_t kid = fork();
    if (kid == 0)
        _exit(0);
    waitpid(kid, NULL, 0);
    a.hdr_rw->creator_pid = kid;    /* its vgpu run has exited, as it does right after */
    char log[4200];
    snprintf(log, sizeof log, "%.*s.log", (int)(strlen(a.path) - 7), a.path);
    int fd = open(log, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    struct vgpu_job_ref *refs;
    size_t n;
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, NULL, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(refs[0].state, VGPU_JOB_EXITED);
    free(refs);
    /* The name now means the newer job while it has not ended, and the newest after. */
    assert_int_equal(vgpu_region_create(&b, statedir, &spec, &e), 0);
    assert_int_equal(vgpu_jobs_find(statedir, "again", VGPU_REGION_JOB, &f, &e), 0);
    assert_string_equal(f.hdr->id, b.hdr->id);
    vgpu_region_close(&f);
    /* Ended 61 s ago: gone, with its log. */
    atomic_store(&a.hdr_rw->exited_realtime_ns, atomic_load(&a.hdr->exited_realtime_ns) - 61000000000ULL);
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, NULL, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(refs[0].id, b.hdr->id);
    free(refs);
    assert_int_equal(access(a.path, F_OK), -1);
    assert_int_equal(access(log, F_OK), -1);
    /* VGPU_EXITED_KEEP_S shortens the keep time (0: at once). */
    assert_int_equal(vgpu_region_set_state(&b, VGPU_JOB_EXITED, 0, 15, &e), 0);
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, NULL, &e), 0);
    assert_int_equal(n, 1);
    free(refs);
    setenv("VGPU_EXITED_KEEP_S", "0", 1);
    assert_int_equal(vgpu_jobs_list(statedir, &refs, &n, NULL, &e), 0);
    unsetenv("VGPU_EXITED_KEEP_S");
    assert_int_equal(n, 0);
    free(refs);
    vgpu_region_close(&a);
    vgpu_region_close(&b);
}

/* Lent memory (--mem REQUEST:LIMIT, issue 37): REQUEST is stored in page 0's tail, 0 meaning all
 * of the limit (so a region of an older vgpu, which has 0 there, lends nothing); reservations past
 * REQUEST are borrowed (spilled) when pageable and refused otherwise; vgpu limit's setters keep
 * REQUEST <= LIMIT at every moment. */
static void test_lent_memory(void **state)
{
    (void)state;
    struct vgpu_region r;
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.cmdline = "test";
    spec.device_count = 2;
    for (unsigned d = 0; d < 2; d++) {
        spec.dev[d].uuid = "GPU-00000000-0000-0000-0000-000000000000";
        spec.dev[d].mem_total = 10000;
        spec.dev[d].mem_limit = 4000;
    }
    spec.dev[0].mem_request = 1000;
    struct vgpu_err e = { 0 };
    if (vgpu_region_create(&r, statedir, &spec, &e) != 0)
        fail_msg("create: %s", e.msg);
    uint64_t req = 0;
    assert_true(vgpu_region_lending(&r, 0, &req));
    assert_int_equal(req, 1000);
    assert_int_equal(vgpu_region_mem_request(&r, 0), 1000);
    assert_false(vgpu_region_lending(&r, 1, NULL));              /* 0 in the tail: an older region's */
    assert_int_equal(vgpu_region_mem_request(&r, 1), 4000);      /* ... reads as SIZE:SIZE */
    int s = vgpu_region_attach(&r, &e);
    assert_true(s >= 0);
    bool sp = true;
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 800, true, &sp), 0);
    assert_false(sp);                                            /* within REQUEST: on the device */
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 500, false, &sp), -1);
    assert_int_equal(errno, ENOSPC);                             /* not pageable: stays within REQUEST */
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 2000, true, &sp), 0);
    assert_true(sp);                                             /* pageable: borrowed */
    assert_int_equal(vgpu_region_mem_borrowed(&r, 0), 1800);
    assert_int_equal(vgpu_region_reserve_split(&r, s, 0, 1300, true, &sp), -1);   /* LIMIT is hard */
    /* vgpu limit: REQUEST above LIMIT refused, nothing changed. */
    struct vgpu_region a;
    assert_int_equal(vgpu_jobs_find(statedir, r.info->id, VGPU_REGION_ADMIN, &a, &e), 0);
    assert_int_equal(vgpu_region_set_mem(&a, 0, 5000, 4000, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_USAGE);
    assert_int_equal(vgpu_region_mem_request(&r, 0), 1000);
    /* Shrinking REQUEST below use: allowed, the excess borrowed. */
    assert_int_equal(vgpu_region_set_mem(&a, 0, 500, 4000, &e), 0);
    assert_int_equal(vgpu_region_mem_borrowed(&r, 0), 2300);
    /* REQUEST == LIMIT stores 0: not lending. */
    assert_int_equal(vgpu_region_set_mem(&a, 0, 3000, 3000, &e), 0);
    assert_false(vgpu_region_lending(&r, 0, NULL));
    assert_int_equal(vgpu_region_mem_borrowed(&r, 0), 0);
    /* The LIMIT alone keeps a REQUEST below it and drops one at or above it. */
    assert_int_equal(vgpu_region_set_mem(&a, 0, 1000, 4000, &e), 0);
    assert_int_equal(vgpu_region_set_mem_limit(&a, 0, 3000, &e), 0);
    assert_int_equal(vgpu_region_mem_request(&r, 0), 1000);
    assert_int_equal(vgpu_region_set_mem_limit(&a, 0, 900, &e), 0);
    assert_false(vgpu_region_lending(&r, 0, NULL));
    assert_int_equal(vgpu_region_mem_request(&r, 0), 900);
    /* A request above the limit in the file is damage, refused at open. */
    atomic_store(&a.hdr_rw->mem_request[1], 9000);
    struct vgpu_region b;
    assert_int_equal(vgpu_region_open(&b, r.path, VGPU_REGION_JOB, &e), -1);
    assert_non_null(strstr(e.msg, "memory request"));
    vgpu_region_close(&a);
    vgpu_region_close(&r);
}

/* A borrower's free view (decision 13): min(LIMIT - used, max(REQUEST - used, 0) + what the device
 * has beyond every unmet request), the job's own unmet request counted once. */
static void test_lend_free(void **state)
{
    (void)state;
    const uint64_t G = 1ULL << 30;
    /* Alone on a roomy GPU: all of LIMIT - used. */
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 1 * G, 70 * G, 0), 7 * G);
    /* The GPU full (others borrow it all): still the unmet request, which is promised. */
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 1 * G, 0, 0), 1 * G);
    /* Others' unmet requests are not lent: 70 free, 68 of it owed to others -> 2 (> our 1 owed). */
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 1 * G, 70 * G, 68 * G), 2 * G);
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 1 * G, 70 * G, 60 * G), 7 * G);
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 1 * G, 70 * G, 90 * G), 1 * G);   /* saturates */
    /* Borrowing already (used past REQUEST): only what nobody's request needs. */
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 5 * G, 1 * G, 0), 1 * G);
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 5 * G, 10 * G, 0), 3 * G);
    /* At or over the LIMIT (vgpu limit lowered it): nothing, never negative. */
    assert_int_equal(vgpu_lend_free(8 * G, 2 * G, 8 * G, 70 * G, 0), 0);
    assert_int_equal(vgpu_lend_free(4 * G, 2 * G, 6 * G, 70 * G, 0), 0);
    /* REQUEST == LIMIT is the ordinary view's arithmetic bounded by the promise. */
    assert_int_equal(vgpu_lend_free(4 * G, 4 * G, 1 * G, 0, 0), 3 * G);
    /* A job that borrows nothing beside borrowers: their borrowed pages give way to it. */
    assert_int_equal(vgpu_lend_owner_free(60 * G, 1 * G, 7 * G, 70 * G), 59 * G);
    assert_int_equal(vgpu_lend_owner_free(60 * G, 1 * G, 7 * G, 10 * G), 17 * G);
    assert_int_equal(vgpu_lend_owner_free(60 * G, 1 * G, 7 * G, 0), 7 * G);
    assert_int_equal(vgpu_lend_owner_free(60 * G, 61 * G, 7 * G, 0), 0);
    assert_int_equal(vgpu_lend_owner_free(60 * G, 0, UINT64_MAX, 1), 60 * G);   /* saturates */
}

/* Decision 13's order of giving way (issue 37 item 4): each borrower's part of what the
 * borrowers owe the unmet requests, so that the parts add up to the need and no two borrowers
 * give for the same bytes. */
static void test_lend_target(void **state)
{
    (void)state;
    const uint64_t G = 1ULL << 30;
    /* Alone: what is missing (30 unmet, 17 free) and no more than it borrows. */
    assert_int_equal(vgpu_lend_target(30 * G, 17 * G, 0, 0, 30 * G), 13 * G);
    assert_int_equal(vgpu_lend_target(30 * G, 17 * G, 0, 0, 5 * G), 5 * G);
    /* Enough free: nothing. */
    assert_int_equal(vgpu_lend_target(10 * G, 17 * G, 0, 0, 30 * G), 0);
    /* What it demoted already counts as owed still (it is off the GPU: free includes it). */
    assert_int_equal(vgpu_lend_target(30 * G, 30 * G, 13 * G, 0, 30 * G), 13 * G);
    /* Behind a borrower that can cover it: nothing; behind one that covers a part: the rest. */
    assert_int_equal(vgpu_lend_target(30 * G, 17 * G, 0, 30 * G, 30 * G), 0);
    assert_int_equal(vgpu_lend_target(50 * G, 8 * G, 0, 35 * G, 35 * G), 7 * G);
    /* The two parts of one need add up to it exactly. */
    uint64_t first = vgpu_lend_target(50 * G, 8 * G, 0, 0, 35 * G), second = vgpu_lend_target(50 * G, 8 * G, 0, 35 * G, 35 * G);
    assert_int_equal(first + second, 42 * G);
    /* Saturating, never negative, never wrapping. */
    assert_int_equal(vgpu_lend_target(UINT64_MAX, 0, UINT64_MAX, 0, 3 * G), 3 * G);
    assert_int_equal(vgpu_lend_target(0, UINT64_MAX, 0, 0, 3 * G), 0);

    /* The order: the lower priority first; at one priority the larger borrower; then the id. */
    struct vgpu_lend_key low = { -1, 10 * G, "b" }, norm = { 0, 30 * G, "a" }, high = { 1, 50 * G, "c" };
    assert_true(vgpu_lend_gives_first(&low, &norm));
    assert_false(vgpu_lend_gives_first(&norm, &low));
    assert_true(vgpu_lend_gives_first(&norm, &high));
    struct vgpu_lend_key big = { 0, 40 * G, "z" }, small = { 0, 20 * G, "a" };
    assert_true(vgpu_lend_gives_first(&big, &small));
    assert_false(vgpu_lend_gives_first(&small, &big));
    struct vgpu_lend_key x = { 0, 20 * G, "a1" }, y = { 0, 20 * G, "b1" };
    assert_true(vgpu_lend_gives_first(&x, &y));
    assert_false(vgpu_lend_gives_first(&y, &x));
    assert_false(vgpu_lend_gives_first(&x, &x));   /* never ahead of itself */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_release),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_race),
        cmocka_unit_test(test_reap_killed),
        cmocka_unit_test(test_slot_end),
        cmocka_unit_test(test_reap_only_proven),
        cmocka_unit_test(test_outside),
        cmocka_unit_test(test_oversub_split),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_modes_and_umask),
        cmocka_unit_test(test_find_and_stale),
        cmocka_unit_test(test_exited_kept),
        cmocka_unit_test(test_truncated_fenced),
        cmocka_unit_test(test_truncated_fault),
        cmocka_unit_test(test_split_layout),
        cmocka_unit_test(test_lent_memory),
        cmocka_unit_test(test_lend_free),
        cmocka_unit_test(test_lend_target),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
