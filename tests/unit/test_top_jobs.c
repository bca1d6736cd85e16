/* vgpu top's job reader (cmd/top/jobs.c, included here): jobs from real job regions in a
 * temporary state directory, the job's processes joined with NVML's list, live core and memory
 * limit changes, and the pids a whole-job signal would reach. No NVML needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../cmd/top/jobs.c"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/vgpu-test-top-jobs.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    setenv("VGPU_STATE_DIR", dir, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_jobs(void **state)
{
    (void)state;
    struct vgpu_err e;
    char sd[4096];
    assert_int_equal(vgpu_statedir(sd, sizeof sd, true, &e), 0);
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.name = "train";
    spec.cmdline = "python train.py";
    spec.device_count = 1;
    spec.dev[0].uuid = "GPU-0";
    spec.dev[0].mem_total = 80ULL << 30;
    spec.dev[0].mem_limit = 4ULL << 30;
    spec.dev[0].core_limit = 30;
    struct vgpu_region r;
    if (vgpu_region_create(&r, sd, &spec, &e) < 0)
        fail_msg("create: %s", e.msg);
    int slot = vgpu_region_attach(&r, &e);
    assert_true(slot >= 0);
    assert_int_equal(vgpu_region_reserve(&r, slot, 0, 1ULL << 30), 0);

    struct top_model *m = top_model_new();
    m->ngpu = 1;
    snprintf(m->gpus[0].uuid, sizeof m->gpus[0].uuid, "GPU-0");
    /* NVML lists this process (as the fake would) and an unrelated one */
    struct top_proc *p = top_model_add_proc(m);
    p->pid = getpid();
    p->gpu = 0;
    p = top_model_add_proc(m);
    p->pid = 1;
    p->gpu = 0;
    top_jobs_read(m);
    assert_string_equal(m->jobs_msg, "");
    assert_int_equal(m->njob, 1);
    struct top_job *j = &m->jobs[0];
    assert_string_equal(j->name, "train");
    assert_int_equal(j->mem_limit, 4ULL << 30);
    assert_int_equal(j->mem_used, 1ULL << 30);
    assert_int_equal(j->core_limit_pct, 30);
    assert_int_equal(j->nproc, 1);
    assert_int_equal(j->uid, getuid());
    assert_string_equal(j->gpus, "0");
    assert_int_equal(m->procs[0].job, 0);    /* joined by host pid */
    assert_int_equal(m->procs[1].job, -1);   /* not in a job */
    assert_int_equal(m->nproc, 2);           /* nothing added: NVML listed it */

    /* live limit changes, as the + - m keys do */
    assert_int_equal(top_job_set_core(j, 25, &e), 0);
    assert_int_equal(top_job_set_mem(j, "8G", &e), 0);
    assert_int_equal(atomic_load(&r.hdr->dev[0].core_limit), 25);
    assert_int_equal(atomic_load(&r.hdr->dev[0].mem_limit), 8ULL << 30);
    /* + and - start from the region's limit at the key press, not from the snapshot j
     * (issue 18): another change behind top's back (50), then + twice before any new sample */
    assert_int_equal(j->core_limit_pct, 30);
    struct vgpu_region adm;
    assert_int_equal(vgpu_jobs_find(sd, "train", VGPU_REGION_ADMIN, &adm, &e), 0);
    assert_int_equal(vgpu_region_set_core_limit(&adm, 0, 50, VGPU_CORE_HARD, &e), 0);
    vgpu_region_close(&adm);
    unsigned pct = 0;
    assert_int_equal(top_job_change_core(j, 5, &pct, &e), 1);
    assert_int_equal(pct, 55);
    assert_int_equal(top_job_change_core(j, 5, &pct, &e), 1);
    assert_int_equal(pct, 60);
    assert_int_equal(atomic_load(&r.hdr->dev[0].core_limit), 60);
    assert_int_equal(top_job_change_core(j, -5, &pct, &e), 1);
    assert_int_equal(atomic_load(&r.hdr->dev[0].core_limit), 55);
    assert_int_equal(top_job_set_core(j, 25, &e), 0);
    /* the m key's check is vgpu limit's: more than the GPU has is refused, nothing changes */
    assert_int_equal(top_job_set_mem(j, "200G", &e), -1);
    assert_non_null(strstr(e.msg, "is larger than"));
    assert_int_equal(atomic_load(&r.hdr->dev[0].mem_limit), 8ULL << 30);
    /* another owner's job is refused before anything is opened; as root (the suite's usual
     * case) that is checked in a child that has become an unprivileged user, and root itself
     * may change any owner's job */
    struct top_job other = *j;
    other.uid = getuid() + 1;
    if (geteuid() != 0) {
        assert_int_equal(top_job_set_core(&other, 50, &e), -1);
        assert_int_equal(e.code, VGPU_EXIT_PERMISSION);
        assert_non_null(strstr(e.msg, "only its owner or root"));
    } else {
        assert_int_equal(top_job_set_core(&other, 25, &e), 0);
        other.uid = 1;   /* not the child's uid below */
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
                _exit(10);
            struct vgpu_err ce;
            if (top_job_set_core(&other, 50, &ce) != -1)
                _exit(11);
            /* the owner check itself, not a state directory the child cannot open */
            _exit(ce.code == VGPU_EXIT_PERMISSION && strstr(ce.msg, "only its owner or root") ? 0 : 12);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);   /* 10: could not drop root, 11/12: not refused */
    }
    /* the pids a whole-job signal reaches, with their start times */
    pid_t pids[4];
    unsigned long long starts[4];
    assert_int_equal(top_job_pids(j, pids, starts, 4), 1);
    assert_int_equal(pids[0], getpid());
    assert_int_equal(starts[0], vgpu_proc_start_time(getpid()));
    top_model_free(m);

    /* without NVML: the job's process is added with the limiter's accounting */
    m = top_model_new();
    top_jobs_read(m);
    assert_int_equal(m->njob, 1);
    assert_int_equal(m->nproc, 1);
    assert_int_equal(m->procs[0].job, 0);
    assert_int_equal(m->procs[0].gpu_mem, 1ULL << 30);
    assert_int_equal(m->procs[0].gpu, -1);
    top_model_free(m);
    vgpu_region_detach(&r, slot);
    vgpu_region_close(&r);
}

/* jobs.c's state from an earlier test (another state directory): forgotten. */
static void forget_jobs(void)
{
    for (unsigned i = 0; i < TOP_MAX_JOBS; i++)
        if (open_jobs[i].open) {
            vgpu_region_close(&open_jobs[i].r);
            open_jobs[i].open = false;
        }
    free(list_refs);
    list_refs = NULL;
    list_n = 0;
    top_watch_fini(&jobs_watch);
    relist_at_ns = 0;
}

static size_t jobs_now(void)
{
    struct top_model *m = top_model_new();
    top_jobs_read(m);
    size_t n = m->njob;
    top_model_free(m);
    return n;
}

/* The jobs folder is listed again only when something changed (issue 14, item 4): not while
 * nothing does, at once when a job is created, and when a job's `vgpu run` dies with no live
 * process, which no folder event tells. It was listed every 10 s, and on every sample within a
 * second of the folder's last change. */
static void test_relist_on_change(void **state)
{
    (void)state;
    forget_jobs();
    struct vgpu_err e;
    char sd[4096];
    assert_int_equal(vgpu_statedir(sd, sizeof sd, true, &e), 0);
    struct vgpu_job_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.name = "first";
    spec.cmdline = "sleep";
    spec.device_count = 1;
    spec.dev[0].uuid = "GPU-0";
    struct vgpu_region a;
    if (vgpu_region_create(&a, sd, &spec, &e) < 0)
        fail_msg("create: %s", e.msg);
    assert_int_equal(jobs_now(), 1);
    assert_int_equal(jobs_now(), 1);             /* the watch starts at the second look */
    unsigned long base = relists;
    for (int i = 0; i < 5; i++)
        assert_int_equal(jobs_now(), 1);
    assert_int_equal(relists, base);             /* nothing changed: no listing */

    /* A job created by a child, which then dies: listed at once, removed at the next sample. */
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        close(go[1]);                           /* EOF on go[0] when the parent closes its end */
        struct vgpu_region b;
        struct vgpu_err ce;
        spec.name = "second";
        char c = vgpu_region_create(&b, sd, &spec, &ce) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);                               /* dies without marking the job ended */
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    assert_int_equal(jobs_now(), 2);
    assert_int_equal(relists, base + 1);
    assert_int_equal(jobs_now(), 2);
    close(go[1]);
    assert_int_equal(waitpid(kid, NULL, 0), kid);
    assert_int_equal(jobs_now(), 1);              /* stale: listed again, and removed */
    assert_true(relists >= base + 2);
    vgpu_region_remove(&a, &e);
    vgpu_region_close(&a);
    assert_int_equal(jobs_now(), 0);
    forget_jobs();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relist_on_change, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
