/* What the arbiter keeps to itself (cmd/daemon/arbiter.c), through its request handler alone:
 * the schedule's job keys are salted by a secret of the daemon's, so a reader of the read-only
 * schedule cannot invert one to a job id (issue 35: an unsalted key of root's job was inverted to
 * its id in 2.6 s, and a record sent first under that id); and an administrator's limits of a
 * `vgpu run --user` job, read from root's limits file when the job first joins, hold for the
 * job's life: a later request of its processes, without the file, cannot raise its cap (a process
 * of such a job once sent cap 100 for its own key and went from 22 % to 88 %). */
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
#include <unistd.h>
#include <cmocka.h>

#include "daemon/server.h"
#include "vgpu/region.h"
#include "vgpu/sched.h"

#define NOBODY 65534
#define UUID "GPU-00000000-0000-0000-0000-000000000001"

struct world {
    struct arbiter a;
    struct arb_gpu *g;
    struct arb_client nobody;
};

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->g = calloc(1, sizeof *w->g);
    assert_non_null(w->g);
    struct vgpu_err e = { 0 };
    assert_int_equal(vgpu_sched_create_memfd(&w->g->s, &w->g->ro_fd, &e), 0);
    snprintf(w->g->uuid, sizeof w->g->uuid, UUID);
    w->a.gpus[0] = w->g;
    w->a.ngpus = 1;
    w->nobody = (struct arb_client){ .fd = -1, .id = 2, .pid = getppid(), .uid = NOBODY };
    w->nobody.opened[0] = true;
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    vgpu_sched_close(&w->g->s);
    close(w->g->ro_fd);
    free(w->a.charged);
    free(w->g);
    free(w);
    return 0;
}

/* JOB for `key` asking `cap`, with `fd` passed along (-1: none): the entry, or < 0. */
static int job(struct world *w, uint64_t key, unsigned cap, int fd)
{
    struct vgpu_arb_req q = { .op = VGPU_ARB_JOB, .gpu = 0, .proc = -1, .a = { key, cap, 0, 0 } };
    struct vgpu_arb_rep r;
    static char out[VGPU_ARB_MAX_PAYLOAD];
    int send_fd;
    arb_handle(&w->a, &w->nobody, &q, NULL, fd, &r, out, &send_fd);
    return r.rc;
}

static void test_keys_are_salted(void **state)
{
    struct world *w = *state;
    uint64_t key = vgpu_sched_job_key("0123456789ab", 12);
    int j = job(w, key, 30, -1);
    assert_true(j >= 0);
    uint64_t seen = atomic_load(&w->g->s.f->jobs[j].key);
    /* Neither the job's own key nor the unsalted mix of it with the user, which anyone can
     * compute from a guessed id. */
    uint64_t unsalted = (key ^ ((uint64_t)NOBODY * 0x9e3779b97f4a7c15ULL)) * 1099511628211ULL;
    assert_true(seen != key);
    assert_true(seen != unsalted);
    /* Still one entry per job and user: the same request finds it again. */
    assert_int_equal(job(w, key, 30, -1), j);
}

/* A limits file as root's vgpu run --user writes it: one GPU, the administrator's cap. */
static int admin_file(unsigned cap)
{
    char path[] = "/tmp/test_arb_keys.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(fchmod(fd, 0644), 0);
    static struct vgpu_region_header h;
    memset(&h, 0, sizeof h);
    h.version = VGPU_REGION_VERSION;
    h.device_count = 1;
    snprintf(h.dev[0].uuid, sizeof h.dev[0].uuid, UUID);
    atomic_store(&h.dev[0].core_limit, cap);
    atomic_store(&h.magic, VGPU_REGION_MAGIC);
    assert_int_equal(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    /* Passed read-only, as vgpu run --user's job processes hold it. */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int ro = open(link, O_RDONLY | O_CLOEXEC);
    assert_true(ro >= 0);
    close(fd);
    return ro;
}

static void test_admin_cap_kept_for_the_job_life(void **state)
{
    struct world *w = *state;
    if (geteuid() != 0)
        skip();   /* the limits file must be root's */
    uint64_t key = vgpu_sched_job_key("a1b2c3d4e5f6", 12);
    int j = job(w, key, 100, admin_file(30));   /* the job's process sends the file: cap 30 */
    assert_true(j >= 0);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 30);
    /* A later request of the same job without the file, asking for 100: still 30. */
    assert_int_equal(job(w, key, 100, -1), j);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 30);
    /* Nor any later cap the job asks for. */
    assert_int_equal(job(w, key, 90, -1), j);
    assert_int_equal(atomic_load(&w->g->s.f->jobs[j].cap), 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keys_are_salted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_cap_kept_for_the_job_life, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
