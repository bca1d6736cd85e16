/* The Slurm plugin's rules (lib/slurm/settings.c): plugstack.conf arguments, the users' options,
 * maxima, and a step's share of its GPU's shards. The file is included whole: the plugin itself
 * needs libslurm-dev, its rules do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../lib/slurm/settings.c"

#define GIB (1024ull * 1024 * 1024)

static int site_of(struct vgslurm_site *s, const char *args, struct vgpu_err *e)
{
    char buf[512], *av[16];
    int ac = 0;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok(buf, " "); t && ac < 16; t = strtok(NULL, " "))
        av[ac++] = t;
    return vgslurm_site_parse(s, ac, av, "/lib/libvgpu.so", e);
}

static void site_arguments(void **state)
{
    struct vgslurm_site s;
    struct vgpu_err e = { 0 };
    assert_int_equal(site_of(&s, "shards_per_gpu=4 max_mem=60G max_core=90 policy=soft library=/x/libvgpu.so", &e), 0);
    assert_int_equal(s.shards_per_gpu, 4);
    assert_string_equal(s.max_mem, "60G");
    assert_int_equal(s.max_core, 90);
    assert_int_equal(s.policy, VGPU_CORE_SOFT);
    assert_string_equal(s.library, "/x/libvgpu.so");
    assert_int_equal(site_of(&s, "", &e), 0);
    assert_string_equal(s.library, "/lib/libvgpu.so");
    static const char *const bad[] = { "mem", "colour=red", "mem=4X", "core=0", "core=101", "max_core=50 core=60",
                                       "policy=fast", "shards_per_gpu=0", "shards_per_gpu=-1", "library=rel/x.so" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&e, 0, sizeof e);
        if (site_of(&s, bad[i], &e) == 0)
            fail_msg("plugstack argument '%s' accepted", bad[i]);
        assert_int_equal(e.code, VGPU_EXIT_USAGE);
    }
}

static void options_and_maxima(void **state)
{
    struct vgslurm_site s;
    struct vgslurm_opts o = { .policy = -1 };
    struct vgpu_err e = { 0 };
    assert_int_equal(site_of(&s, "max_mem=60G max_core=90", &e), 0);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "4G", &e), 0);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-core", "30", &e), 0);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-policy", "soft", &e), 0);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "70G", &e), -1);
    assert_non_null(strstr(e.msg, "above this site's maximum, 60G"));
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-core", "95", &e), -1);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-policy", "fast", &e), -1);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "0", &e), -1);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "", &e), -1);

    uint64_t mem;
    unsigned core;
    enum vgpu_core_policy pol;
    assert_int_equal(vgslurm_task_limits(&s, &o, 0, 80 * GIB, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(mem, 4 * GIB);
    assert_int_equal(core, 30);
    assert_int_equal(pol, VGPU_CORE_SOFT);
    /* Asking for nothing under maxima: the maxima are the limits. */
    struct vgslurm_opts none = { .policy = -1 };
    assert_true(vgslurm_wants_limits(&s, &none, 0));
    assert_int_equal(vgslurm_task_limits(&s, &none, 0, 80 * GIB, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(mem, 60 * GIB);
    assert_int_equal(core, 90);
    assert_int_equal(pol, VGPU_CORE_HARD);
    /* A share that is over the maximum only on a small GPU is caught on the node. */
    struct vgslurm_site pct;
    assert_int_equal(site_of(&pct, "max_mem=50%", &e), 0);
    struct vgslurm_opts big = { .policy = -1 };
    assert_int_equal(vgslurm_opt_parse(&big, &pct, "vgpu-mem", "30G", &e), 0);
    assert_int_equal(vgslurm_task_limits(&pct, &big, 0, 40 * GIB, "GPU 0", &mem, &core, &pol, &e), -1);
    assert_non_null(strstr(e.msg, "above this site's maximum"));
}

static void shards(void **state)
{
    struct vgslurm_site s;
    struct vgslurm_opts o = { .policy = -1 };
    struct vgpu_err e = { 0 };
    uint64_t mem;
    unsigned core;
    enum vgpu_core_policy pol;
    assert_int_equal(site_of(&s, "shards_per_gpu=3", &e), 0);
    assert_false(vgslurm_wants_limits(&s, &o, 0));
    assert_true(vgslurm_wants_limits(&s, &o, 1));
    uint64_t total = 85520809984ull;
    assert_int_equal(vgslurm_task_limits(&s, &o, 1, total, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(mem % (1024 * 1024), 0);            /* whole MiB */
    assert_true(mem <= total / 3 && mem > total / 3 - 1024 * 1024);
    assert_int_equal(core, 33);
    assert_true(3 * mem <= total);                       /* 3 shares of 3 always fit */
    assert_int_equal(vgslurm_task_limits(&s, &o, 3, total, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(core, 0);                           /* the whole GPU: no time cap */
    assert_int_equal(vgslurm_task_limits(&s, &o, 4, total, "GPU 0", &mem, &core, &pol, &e), -1);
    assert_non_null(strstr(e.msg, "shards_per_gpu=3"));
    /* An option wins over the share. */
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "1G", &e), 0);
    assert_int_equal(vgslurm_task_limits(&s, &o, 1, total, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(mem, GIB);
    assert_int_equal(core, 33);
}

static void names(void **state)
{
    char b[VGPU_JOB_NAME_LEN];
    vgslurm_job_name(b, sizeof b, 1234, 0, 7);
    assert_string_equal(b, "slurm-1234.0.7");
    vgslurm_job_name(b, sizeof b, 9, 0xfffffffbu, 0);
    assert_string_equal(b, "slurm-9.batch.0");
    vgslurm_job_name(b, sizeof b, 4294967295u, 0xfffffffau, 4294967295u);
    assert_true(vgpu_job_name_valid(b));                 /* the longest still a valid job name */
}

/* --vgpu-mem=REQUEST:LIMIT (issue 37): the site maximum caps the LIMIT, the REQUEST is the task's
 * promise; REQUEST above LIMIT is refused before the job is queued. */
static void request_limit(void **state)
{
    struct vgslurm_site s;
    struct vgslurm_opts o = { .policy = -1 };
    struct vgpu_err e = { 0 };
    uint64_t mem, req;
    unsigned core;
    enum vgpu_core_policy pol;
    assert_int_equal(site_of(&s, "max_mem=60G", &e), 0);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "8G:2G", &e), -1);
    assert_non_null(strstr(e.msg, "REQUEST is more than LIMIT"));
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "2G:70G", &e), -1);
    assert_non_null(strstr(e.msg, "above this site's maximum, 60G"));
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "2G:", &e), -1);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "2G:8G", &e), 0);
    assert_int_equal(vgslurm_task_limits(&s, &o, 0, 80 * GIB, "GPU 0", &mem, &core, &pol, &e), 0);
    assert_int_equal(mem, 8 * GIB);
    assert_int_equal(vgslurm_task_request(&o, 80 * GIB, "GPU 0", mem, &req, &e), 0);
    assert_int_equal(req, 2 * GIB);
    assert_int_equal(vgslurm_opt_parse(&o, &s, "vgpu-mem", "4G", &e), 0);
    assert_int_equal(vgslurm_task_request(&o, 80 * GIB, "GPU 0", 4 * GIB, &req, &e), 0);
    assert_int_equal(req, 0);                            /* one size: nothing lent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(site_arguments),
        cmocka_unit_test(options_and_maxima),
        cmocka_unit_test(shards),
        cmocka_unit_test(names),
        cmocka_unit_test(request_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
