/* vgpu top's pure parts: layout over a sweep of terminal sizes, formatting (N/A kept apart
 * from 0), the comparators (total orders, consistent: antisymmetric and transitive), filters,
 * rows, and the JSON form key by key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <json-c/json.h>

#include "vgpu/top.h"

/* A model with 2 GPUs (one in MIG mode with 2 MIG devices), 3 jobs, 6 processes. */
static struct top_model *sample_model(void)
{
    struct top_model *m = top_model_new();
    assert_non_null(m);
    m->nvml = TOP_NVML_OK;
    snprintf(m->driver_version, sizeof m->driver_version, "580.159.04");
    m->ngpu = 4;
    for (unsigned i = 0; i < 4; i++) {
        struct top_gpu *g = &m->gpus[i];
        g->index = i == 0 ? 0 : 1;
        g->is_mig = i >= 2;
        g->gi = i == 2 ? 1 : 2;
        snprintf(g->name, sizeof g->name, "NVIDIA H100 80GB HBM3%s", g->is_mig ? " MIG 1g.10gb" : "");
        snprintf(g->uuid, sizeof g->uuid, "%s-%u", g->is_mig ? "MIG" : "GPU", i);
        if (g->is_mig)
            snprintf(g->profile, sizeof g->profile, "1g.10gb");
        g->valid = TOP_GV_UTIL | TOP_GV_MEM | (g->is_mig ? 0 : TOP_GV_TEMP | TOP_GV_POWER | TOP_GV_PLIMIT | TOP_GV_MIG);
        g->util_pct = 10 * i;
        g->mem_used = (uint64_t)i << 30;
        g->mem_total = 80ULL << 30;
        g->temp_c = 40;
        g->power_mw = 250400;
        g->power_limit_mw = 700000;
        g->mig_current = g->mig_pending = i == 1;
    }
    const char *names[3] = { "train", "infer", "eval" };
    for (unsigned j = 0; j < 3; j++) {
        struct top_job *jb = &m->jobs[j];
        snprintf(jb->id, sizeof jb->id, "00000000000%u", j);
        snprintf(jb->name, sizeof jb->name, "%s", names[j]);
        snprintf(jb->owner, sizeof jb->owner, "%s", j == 1 ? "bob" : "alice");
        jb->mem_used = (uint64_t)(j + 1) << 30;
        jb->mem_limit = j == 2 ? 0 : 4ULL << 30;
        jb->core_limit_pct = j == 0 ? 30 : 0;
        jb->share_valid = j != 1;
        jb->share_pct = 25.0 * j;
        jb->nproc = 2;
    }
    m->njob = 3;
    for (unsigned i = 0; i < 6; i++) {
        struct top_proc *p = top_model_add_proc(m);
        assert_non_null(p);
        p->pid = (pid_t)(100 + (i * 37) % 11);
        p->job = i < 5 ? (int)(i % 3) : -1;
        p->gpu = (int)(i % 4);
        p->valid = TOP_PV_MEM | TOP_PV_CPU | (i % 2 ? TOP_PV_SM : 0);
        p->gpu_mem = (uint64_t)(i % 3) << 28;
        p->sm_pct = i * 7;
        p->cpu_pct = (double)(i % 2);
        snprintf(p->user, sizeof p->user, "%s", i % 2 ? "bob" : "alice");
        snprintf(p->cmd, sizeof p->cmd, "python train_%u.py", i);
    }
    return m;
}

/* ---- formatting ---- */

static void test_format(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(top_fmt_pct(b, sizeof b, true, 0), "0%");
    assert_string_equal(top_fmt_pct(b, sizeof b, false, 0), "N/A");
    assert_string_equal(top_fmt_mib(b, sizeof b, true, 1536ULL << 20), "1536MiB");
    assert_string_equal(top_fmt_mib(b, sizeof b, false, 5), "N/A");
    assert_string_equal(top_fmt_size(b, sizeof b, true, 4ULL << 30), "4G");
    assert_string_equal(top_fmt_size(b, sizeof b, true, 3ULL << 29), "1.5G");
    assert_string_equal(top_fmt_size(b, sizeof b, true, 512ULL << 20), "512M");
    assert_string_equal(top_fmt_size(b, sizeof b, true, 100), "100B");
    assert_string_equal(top_fmt_size(b, sizeof b, true, 0), "0B");
    assert_string_equal(top_fmt_watts(b, sizeof b, true, 250400), "250W");
    assert_string_equal(top_fmt_watts(b, sizeof b, false, 0), "N/A");
    assert_string_equal(top_fmt_mem_limit(b, sizeof b, 3ULL << 29, 4ULL << 30), "1.5G/4G");
    assert_string_equal(top_fmt_mem_limit(b, sizeof b, 0, 0), "0B/-");
    assert_string_equal(top_fmt_bar(b, sizeof b, 10, 0.5), "|||||     ");
    assert_string_equal(top_fmt_bar(b, sizeof b, 4, 7.0), "||||");    /* clamped */
    assert_string_equal(top_fmt_bar(b, sizeof b, 4, -1.0), "    ");
    assert_string_equal(top_fmt_bar(b, 3, 10, 1.0), "||");            /* never past the buffer */
    uint8_t h[3] = { 0, 100, 255 };
    assert_string_equal(top_fmt_spark(b, sizeof b, h, 3, 5), "   @?");
    char s[] = "a\tb\x1b[31mc";
    top_sanitize(s);
    assert_string_equal(s, "a?b?[31mc");
}

/* The pid index the sampler joins with (issue 14, item 5): every process of the range, sorted
 * by pid, a pid listed on two GPUs found with both its entries, absent pids not found. */
static void test_pid_index(void **state)
{
    (void)state;
    struct top_model *m = top_model_new();
    const pid_t pids[] = { 500, 7, 300, 7, 12, 900 };
    for (size_t i = 0; i < sizeof pids / sizeof pids[0]; i++)
        top_model_add_proc(m)->pid = pids[i];
    struct top_pid_ix *ix;
    size_t n = top_pid_index(m, 1, 5, &ix);   /* 7, 300, 7, 12 */
    assert_int_equal(n, 4);
    for (size_t i = 1; i < n; i++)
        assert_true(ix[i - 1].pid <= ix[i].pid);
    const struct top_pid_ix *x = top_pid_find(ix, n, 7);
    assert_non_null(x);
    assert_int_equal(x[0].at, 1);
    assert_int_equal(x[1].pid, 7);
    assert_int_equal(x[1].at, 3);
    assert_int_equal(top_pid_find(ix, n, 300)->at, 2);
    assert_null(top_pid_find(ix, n, 500));       /* outside the range */
    assert_null(top_pid_find(ix, n, 8));
    assert_null(top_pid_find(ix, n, 1000));
    free(ix);
    assert_int_equal(top_pid_index(m, 4, 4, &ix), 0);
    assert_null(ix);
    top_model_free(m);
}

static void test_history(void **state)
{
    (void)state;
    struct top_gpu g;
    memset(&g, 0, sizeof g);
    for (unsigned i = 0; i < TOP_HIST + 10; i++)
        top_gpu_hist_push(&g, i % 101, 500);
    assert_int_equal(g.hist_len, TOP_HIST);
    assert_int_equal(g.hist_util[TOP_HIST - 1], (TOP_HIST + 9) % 101);
    assert_int_equal(g.hist_mem[0], 255);   /* out of range = no sample */
}

/* ---- comparators: consistent total orders ---- */

static void test_proc_cmp_consistent(void **state)
{
    (void)state;
    struct top_model *m = sample_model();
    for (int k = 0; k < TOP_PK_COUNT; k++) {
        for (int d = 0; d < 2; d++) {
            for (size_t a = 0; a < m->nproc; a++) {
                const struct top_proc *pa = &m->procs[a];
                assert_int_equal(top_proc_cmp(m, pa, pa, (enum top_proc_key)k, d), 0);
                for (size_t b = 0; b < m->nproc; b++) {
                    const struct top_proc *pb = &m->procs[b];
                    int ab = top_proc_cmp(m, pa, pb, (enum top_proc_key)k, d);
                    int ba = top_proc_cmp(m, pb, pa, (enum top_proc_key)k, d);
                    assert_true(ab >= -1 && ab <= 1);
                    assert_int_equal(ab, -ba);                        /* antisymmetric */
                    if (a != b && pa->pid != pb->pid)
                        assert_int_not_equal(ab, 0);                  /* total: ties broken by pid */
                    for (size_t c = 0; c < m->nproc; c++) {           /* transitive */
                        int bc = top_proc_cmp(m, pb, &m->procs[c], (enum top_proc_key)k, d);
                        int ac = top_proc_cmp(m, pa, &m->procs[c], (enum top_proc_key)k, d);
                        if (ab <= 0 && bc <= 0)
                            assert_true(ac <= 0);
                    }
                }
            }
        }
    }
    top_model_free(m);
}

static void test_job_cmp_consistent(void **state)
{
    (void)state;
    struct top_model *m = sample_model();
    for (int k = 0; k < TOP_JK_COUNT; k++)
        for (int d = 0; d < 2; d++)
            for (unsigned a = 0; a < m->njob; a++)
                for (unsigned b = 0; b < m->njob; b++) {
                    int ab = top_job_cmp(&m->jobs[a], &m->jobs[b], (enum top_job_key)k, d);
                    int ba = top_job_cmp(&m->jobs[b], &m->jobs[a], (enum top_job_key)k, d);
                    assert_int_equal(ab, -ba);
                    assert_int_equal(ab == 0, a == b);
                    for (unsigned c = 0; c < m->njob; c++)
                        if (ab <= 0 && top_job_cmp(&m->jobs[b], &m->jobs[c], (enum top_job_key)k, d) <= 0)
                            assert_true(top_job_cmp(&m->jobs[a], &m->jobs[c], (enum top_job_key)k, d) <= 0);
                }
    top_model_free(m);
}

static void test_sort_and_filter(void **state)
{
    (void)state;
    struct top_model *m = sample_model();
    size_t order[16];
    /* SM% descending: N/A (even processes) last, whatever the direction */
    size_t n = top_sort_procs(m, order, TOP_PK_SM, true, NULL, ~0ULL, -1);
    assert_int_equal(n, 6);
    assert_true(m->procs[order[0]].valid & TOP_PV_SM);
    assert_int_equal(m->procs[order[0]].sm_pct, 35);
    assert_false(m->procs[order[5]].valid & TOP_PV_SM);
    n = top_sort_procs(m, order, TOP_PK_SM, false, NULL, ~0ULL, -1);
    assert_false(m->procs[order[0]].valid & TOP_PV_SM);
    /* the same answer whatever the input order */
    size_t o1[16], o2[16];
    n = top_sort_procs(m, o1, TOP_PK_USER, false, NULL, ~0ULL, -1);
    struct top_proc tmp = m->procs[0];
    m->procs[0] = m->procs[5];
    m->procs[5] = tmp;
    top_sort_procs(m, o2, TOP_PK_USER, false, NULL, ~0ULL, -1);
    for (size_t i = 0; i < n; i++)   /* same (user, pid, gpu) sequence after the swap */
        assert_int_equal(top_proc_cmp(m, &m->procs[o2[i]], &m->procs[o1[i] == 0 ? 5 : o1[i] == 5 ? 0 : o1[i]],
                                      TOP_PK_USER, false), 0);
    /* filters: user, job name, command, pid; GPUs; one job */
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, "BOB", ~0ULL, -1), 3);
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, "infer", ~0ULL, -1), 2);
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, "train_3", ~0ULL, -1), 1);
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, "nothing", ~0ULL, -1), 0);
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, NULL, 1ULL << 0, -1), 2);
    assert_int_equal(top_sort_procs(m, order, TOP_PK_PID, false, "", ~0ULL, 0), 2);
    /* jobs: memory limit ascending puts "no limit" last */
    n = top_sort_jobs(m, order, TOP_JK_MEMLIM, false, NULL);
    assert_int_equal(n, 3);
    assert_string_equal(m->jobs[order[2]].name, "eval");
    n = top_sort_jobs(m, order, TOP_JK_NAME, false, "ALICE");
    assert_int_equal(n, 2);
    assert_string_equal(m->jobs[order[0]].name, "eval");
    top_model_free(m);
}

/* ---- layout ---- */

static void check_rect_inside(const struct top_rect *r, int rows, int cols)
{
    if (!r->h)
        return;
    assert_true(r->y >= 0 && r->x >= 0 && r->h > 0);
    assert_true(r->y + r->h <= rows);
    assert_true(r->x + r->w <= cols);
}

static void test_layout_sweep(void **state)
{
    (void)state;
    for (int rows = 1; rows <= 120; rows += 1)
        for (int cols = 1; cols <= 300; cols += 7)
            for (unsigned ngpu = 0; ngpu <= 64; ngpu += (ngpu < 10 ? 1 : 9))
                for (int banner = 0; banner < 2; banner++) {
                    struct top_layout_in in = { rows, cols, ngpu, ngpu / 3, banner, true, false };
                    struct top_layout L;
                    top_layout_compute(&in, &L);
                    if (rows < 10 || cols < 40) {
                        assert_true(L.too_small);
                        continue;
                    }
                    assert_false(L.too_small);
                    const struct top_rect *all[] = { &L.header, &L.banner, &L.gpus, &L.graphs, &L.jobs, &L.procs, &L.footer };
                    int used = 0;
                    for (size_t i = 0; i < 7; i++) {
                        check_rect_inside(all[i], rows, cols);
                        used += all[i]->h;
                    }
                    assert_true(used <= rows);                       /* no overlap: panels are stacked */
                    for (size_t i = 0; i + 1 < 7; i++)
                        for (size_t j = i + 1; j < 7; j++)
                            if (all[i]->h && all[j]->h)
                                assert_true(all[i]->y + all[i]->h <= all[j]->y || all[j]->y + all[j]->h <= all[i]->y);
                    assert_true(L.jobs.h >= 2);                      /* jobs always visible */
                    assert_true(L.procs.h >= 2);
                    assert_int_equal(L.footer.y, rows - 1);
                    assert_int_equal(L.banner.h, banner ? 1 : 0);
                }
}

static void test_layout_80x24(void **state)
{
    (void)state;
    /* 1 GPU at 80x24: every GPU, 3+ job rows, 3+ process rows */
    struct top_layout_in in = { 24, 80, 1, 0, false, true, false };
    struct top_layout L;
    top_layout_compute(&in, &L);
    assert_false(L.too_small);
    assert_int_equal(L.gpus.h, 2);          /* title + one line (detail line needs 100 columns) */
    assert_int_equal(L.gpu_lines_each, 1);
    assert_true(L.jobs.h >= 4);
    assert_true(L.procs.h >= 4);
    /* 8 GPUs at 80x24: GPUs scroll, jobs and processes keep their minimum */
    in.ngpu_shown = 8;
    top_layout_compute(&in, &L);
    assert_true(L.jobs.h >= 4 && L.procs.h >= 4);
    assert_int_equal(L.graphs.h, 0);
    /* wide and tall: detail lines and graphs */
    struct top_layout_in big = { 60, 160, 2, 0, false, true, false };
    top_layout_compute(&big, &L);
    assert_int_equal(L.gpu_lines_each, 2);
    assert_int_equal(L.gpus.h, 1 + 4);
    assert_int_equal(L.graphs.h, 3);
    /* help replaces the panels */
    big.help = true;
    top_layout_compute(&big, &L);
    assert_true(L.help.h > 0);
    assert_int_equal(L.jobs.h, 0);
    /* the same input gives the same layout (pure) */
    struct top_layout L2;
    top_layout_compute(&big, &L2);
    assert_memory_equal(&L, &L2, sizeof L);
}

/* ---- rows ---- */

static void test_rows(void **state)
{
    (void)state;
    struct top_model *m = sample_model();
    char b[512];
    for (int w = 40; w <= 200; w++) {
        assert_true((int)strlen(top_row_gpu(b, sizeof b, w, &m->gpus[0])) <= w);
        assert_true((int)strlen(top_row_job(b, sizeof b, w, &m->jobs[0])) <= w);
        assert_true((int)strlen(top_row_proc(b, sizeof b, w, m, &m->procs[0])) <= w);
        assert_true((int)strlen(top_row_job_title(b, sizeof b, w)) <= w);
        assert_true((int)strlen(top_row_mig(b, sizeof b, w, m, &m->gpus[2])) <= w);
    }
    top_row_gpu(b, sizeof b, 120, &m->gpus[0]);
    assert_non_null(strstr(b, "0/80GiB") ? b : strstr(b, "0/81920MiB"));
    assert_non_null(strstr(b, "250W/700"));
    m->gpus[0].valid &= ~TOP_GV_TEMP;
    top_row_gpu(b, sizeof b, 120, &m->gpus[0]);
    assert_non_null(strstr(b, "N/A"));
    top_row_job(b, sizeof b, 120, &m->jobs[0]);
    assert_non_null(strstr(b, "1G/4G"));
    assert_non_null(strstr(b, "0/30%"));
    top_row_job(b, sizeof b, 120, &m->jobs[1]);
    assert_non_null(strstr(b, "N/A/-"));     /* share unknown, no core limit */
    /* An oversubscribed job says how much of its memory lives off the device (issue 15). */
    assert_null(strstr(top_row_job(b, sizeof b, 160, &m->jobs[0]), "off the device"));
    m->jobs[0].oversub = true;
    m->jobs[0].mem_off_device = 3ULL << 30;
    assert_non_null(strstr(top_row_job(b, sizeof b, 160, &m->jobs[0]), "~ 3 GiB off the device"));
    m->jobs[0].oversub = false;
    top_row_gpu_detail(b, sizeof b, 120, &m->gpus[1]);
    assert_non_null(strstr(b, "MIG on"));
    top_row_mig(b, sizeof b, 200, m, &m->gpus[2]);
    assert_non_null(strstr(b, "MIG 1g.10gb"));
    assert_non_null(strstr(b, "jobs: "));
    /* banners tell the three failures apart */
    m->nvml = TOP_NVML_NO_DRIVER;
    snprintf(m->nvml_msg, sizeof m->nvml_msg, "the NVIDIA kernel driver is not loaded");
    assert_non_null(strstr(top_row_banner(b, sizeof b, 200, m), "driver not loaded"));
    m->nvml = TOP_NVML_NO_LIBRARY;
    assert_non_null(strstr(top_row_banner(b, sizeof b, 200, m), "library not found"));
    m->nvml = TOP_NVML_NO_GPU;
    assert_non_null(strstr(top_row_banner(b, sizeof b, 200, m), "no GPU found"));
    m->nvml = TOP_NVML_OK;
    assert_string_equal(top_row_banner(b, sizeof b, 200, m), "");
    top_model_free(m);
}

/* ---- JSON ---- */

static void test_json(void **state)
{
    (void)state;
    struct top_model *m = sample_model();
    m->gpus[0].valid &= ~TOP_GV_TEMP;
    struct json_object *doc = top_model_json(m);
    const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
    assert_null(strchr(text, '\n'));   /* one line: JSON Lines */
    struct json_object *back = json_tokener_parse(text);
    assert_non_null(back);
    struct json_object *v, *g0, *gs, *js, *ps;
    assert_true(json_object_object_get_ex(back, "schema", &v));
    assert_int_equal(json_object_get_int(v), 1);
    assert_true(json_object_object_get_ex(back, "gpus", &gs));
    assert_int_equal(json_object_array_length(gs), 4);
    g0 = json_object_array_get_idx(gs, 0);
    assert_true(json_object_object_get_ex(g0, "temperature_celsius", &v));
    assert_null(v);                                     /* N/A is null, not 0 */
    assert_true(json_object_object_get_ex(g0, "util_gpu_percent", &v));
    assert_true(json_object_is_type(v, json_type_int)); /* numbers are numbers */
    assert_int_equal(json_object_get_int(v), 0);        /* and 0 stays 0 */
    assert_true(json_object_object_get_ex(g0, "mem_total_bytes", &v));
    assert_int_equal(json_object_get_int64(v), 80LL << 30);
    assert_true(json_object_object_get_ex(g0, "power_draw_milliwatts", &v));
    assert_int_equal(json_object_get_int(v), 250400);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(gs, 2), "mig_profile", &v));
    assert_string_equal(json_object_get_string(v), "1g.10gb");
    assert_true(json_object_object_get_ex(back, "jobs", &js));
    assert_int_equal(json_object_array_length(js), 3);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(js, 2), "mem_limit_bytes", &v));
    assert_null(v);                                     /* no limit */
    assert_true(json_object_object_get_ex(json_object_array_get_idx(js, 0), "core_limit_percent", &v));
    assert_int_equal(json_object_get_int(v), 30);
    assert_true(json_object_object_get_ex(back, "processes", &ps));
    assert_int_equal(json_object_array_length(ps), 6);
    assert_true(json_object_object_get_ex(json_object_array_get_idx(ps, 5), "job", &v));
    assert_null(v);                                     /* not in a vgpu job */
    assert_true(json_object_object_get_ex(json_object_array_get_idx(ps, 0), "sm_percent", &v));
    assert_null(v);
    assert_true(json_object_object_get_ex(back, "nvml", &v));
    struct json_object *st;
    assert_true(json_object_object_get_ex(v, "status", &st));
    assert_string_equal(json_object_get_string(st), "ok");
    json_object_put(back);
    json_object_put(doc);
    /* control characters and quotes in commands are escaped */
    snprintf(m->procs[0].cmd, sizeof m->procs[0].cmd, "a\"b\\c\x01");
    doc = top_model_json(m);
    back = json_tokener_parse(json_object_to_json_string(doc));
    assert_non_null(back);
    json_object_put(back);
    json_object_put(doc);
    top_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_pid_index),
        cmocka_unit_test(test_proc_cmp_consistent),
        cmocka_unit_test(test_job_cmp_consistent),
        cmocka_unit_test(test_sort_and_filter),
        cmocka_unit_test(test_layout_sweep),
        cmocka_unit_test(test_layout_80x24),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
