/* nvidia-smi compute-policy and nvidia-cuda-mps-control replies: the texts the real tools print
 * (driver 580.159.04, captured on an H100), and running a tool with input, environment,
 * timeout and a missing program. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vgpu/exitcode.h"
#include "vgpu/mps.h"
#include "vgpu/smi.h"

static const char real_list[] =
    "+-------------------------------------+\n"
    "| GPU compute policies:               |\n"
    "| GPU     Name           Value        |\n"
    "|=====================================|\n"
    "|   0   Timeslice       Default       |\n"
    "+-------------------------------------+\n";

static void test_policy_list(void **state)
{
    (void)state;
    struct vgpu_policy_row rows[8];
    assert_int_equal(vgpu_smi_parse_policy_list(real_list, rows, 8), 1);
    assert_int_equal(rows[0].gpu, 0);
    assert_int_equal(rows[0].timeslice, VGPU_TIMESLICE_DEFAULT);
    assert_string_equal(rows[0].value, "Default");

    const char two[] = "+---+\n| GPU compute policies:  |\n| GPU Name Value |\n|====|\n"
                       "|   0   Timeslice       Long          |\n"
                       "|   1   Timeslice       Short         |\n+---+\n";
    assert_int_equal(vgpu_smi_parse_policy_list(two, rows, 8), 2);
    assert_int_equal(rows[0].timeslice, VGPU_TIMESLICE_LONG);
    assert_int_equal(rows[1].gpu, 1);
    assert_int_equal(rows[1].timeslice, VGPU_TIMESLICE_SHORT);
    /* Only as many as there is room for. */
    assert_int_equal(vgpu_smi_parse_policy_list(two, rows, 1), 1);
    /* A value we do not know stays visible as text. */
    const char odd[] = "| GPU compute policies: |\n|   3   Timeslice       Turbo   |\n";
    assert_int_equal(vgpu_smi_parse_policy_list(odd, rows, 8), 1);
    assert_int_equal(rows[0].gpu, 3);
    assert_int_equal(rows[0].timeslice, -1);
    assert_string_equal(rows[0].value, "Turbo");
    /* Not a policy list at all. */
    assert_int_equal(vgpu_smi_parse_policy_list("No devices were found\n", rows, 8), -1);
    assert_int_equal(vgpu_smi_parse_policy_list("", rows, 8), -1);
}

static void test_timeslice_words(void **state)
{
    (void)state;
    assert_int_equal(vgpu_timeslice_parse("default"), 0);
    assert_int_equal(vgpu_timeslice_parse("SHORT"), 1);
    assert_int_equal(vgpu_timeslice_parse("Medium"), 2);
    assert_int_equal(vgpu_timeslice_parse("long"), 3);
    assert_int_equal(vgpu_timeslice_parse("3"), 3);
    assert_int_equal(vgpu_timeslice_parse("4"), -1);
    assert_int_equal(vgpu_timeslice_parse("03"), -1);
    assert_int_equal(vgpu_timeslice_parse(""), -1);
    assert_int_equal(vgpu_timeslice_parse("longer"), -1);
    assert_string_equal(vgpu_timeslice_name(2), "medium");
    assert_null(vgpu_timeslice_name(4));
    assert_null(vgpu_timeslice_name(-1));
}

static void test_classify(void **state)
{
    (void)state;
    char why[200];
    assert_int_equal(vgpu_smi_classify(0, real_list, "", why, sizeof why), VGPU_SMI_OK);
    assert_int_equal(vgpu_smi_classify(6, "No devices were found\n", "", why, sizeof why), VGPU_SMI_NOT_FOUND);
    assert_string_equal(why, "No devices were found");
    assert_int_equal(vgpu_smi_classify(2,
                                       "Failed to set timeslice policy with value Unknown for GPU 0 : Invalid Argument\n"
                                       "Failed to set timeslice for requested devices : Invalid Argument\n",
                                       "", why, sizeof why),
                     VGPU_SMI_INVALID);
    assert_string_equal(why, "Failed to set timeslice policy with value Unknown for GPU 0 : Invalid Argument");
    assert_int_equal(vgpu_smi_classify(4,
                                       "Failed to set timeslice policy with value 1 for GPU 0 : Insufficient "
                                       "Permissions\n",
                                       "", why, sizeof why),
                     VGPU_SMI_NO_PERMISSION);
    assert_int_equal(vgpu_smi_classify(3, "Failed to set timeslice policy with value 1 for GPU 0 : Not Supported\n",
                                       "", why, sizeof why),
                     VGPU_SMI_NOT_SUPPORTED);
    assert_int_equal(vgpu_smi_classify(9, "",
                                       "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                       "driver. Make sure that the latest NVIDIA driver is installed and running.\n",
                                       why, sizeof why),
                     VGPU_SMI_NO_DRIVER);
    assert_int_equal(vgpu_smi_classify(18, "Failed to initialize NVML: Driver/library version mismatch\n", "", why,
                                       sizeof why),
                     VGPU_SMI_VERSION);
    assert_int_equal(vgpu_smi_classify(4, "", "", why, sizeof why), VGPU_SMI_NO_PERMISSION);
    assert_int_equal(vgpu_smi_classify(77, "something odd\n", "", why, sizeof why), VGPU_SMI_OTHER);
    assert_string_equal(why, "something odd");

    assert_true(vgpu_smi_set_succeeded("Successfully set timeslice policy with value 1 for GPU 0\n", 0));
    assert_true(vgpu_smi_set_succeeded("Successfully set timeslice policy with value SHORT for GPU 2\n", (unsigned)-1));
    assert_false(vgpu_smi_set_succeeded("Successfully set timeslice policy with value 1 for GPU 0\n", 1));
    assert_false(vgpu_smi_set_succeeded("Failed to set timeslice policy with value 1 for GPU 0 : x\n", 0));
}

static void test_mps_replies(void **state)
{
    (void)state;
    pid_t p[4];
    assert_int_equal(vgpu_mps_parse_pids("", p, 4), 0);
    assert_int_equal(vgpu_mps_parse_pids("489\n", p, 4), 1);
    assert_int_equal(p[0], 489);
    assert_int_equal(vgpu_mps_parse_pids("489\n1200\n", p, 4), 2);
    assert_int_equal(p[1], 1200);
    assert_int_equal(vgpu_mps_parse_pids("Server 1 not found", p, 4), -1);
    assert_int_equal(vgpu_mps_parse_pids("Unknown command \"x\"", p, 4), -1);
    assert_int_equal(vgpu_mps_parse_pids("12 13\n", p, 4), -1);

    double pct = -1;
    assert_int_equal(vgpu_mps_parse_percent("100.0", &pct), 0);
    assert_true(pct == 100.0);
    assert_int_equal(vgpu_mps_parse_percent("30.0\n", &pct), 0);
    assert_true(pct == 30.0);
    assert_int_equal(vgpu_mps_parse_percent("", &pct), -1);
    assert_int_equal(vgpu_mps_parse_percent("Unknown command \"get_x\"", &pct), -1);
    assert_int_equal(vgpu_mps_parse_percent("130.0", &pct), -1);

    uint64_t b = 7;
    assert_int_equal(vgpu_mps_parse_size("", &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(vgpu_mps_parse_size("1G", &b), 0);
    assert_int_equal(b, 1ULL << 30);
    assert_int_equal(vgpu_mps_parse_size("512M\n", &b), 0);
    assert_int_equal(b, 512ULL << 20);
    assert_int_equal(vgpu_mps_parse_size("Server 3 not found", &b), -1);
    assert_int_equal(vgpu_mps_parse_size("99999999999999999999G", &b), -1);

    char buf[32];
    vgpu_mps_format_size(2ULL << 30, buf, sizeof buf);
    assert_string_equal(buf, "2G");
    vgpu_mps_format_size(1536ULL << 20, buf, sizeof buf);
    assert_string_equal(buf, "1536M");
    vgpu_mps_format_size(100, buf, sizeof buf);
    assert_string_equal(buf, "1M");

    assert_true(vgpu_mps_reply_is_error("Unknown command \"bogus\""));
    assert_true(vgpu_mps_reply_is_error("Server 1 not found"));
    assert_true(vgpu_mps_reply_is_error("Cannot find MPS control daemon process"));
    assert_false(vgpu_mps_reply_is_error("30.0"));
    assert_false(vgpu_mps_reply_is_error(""));
}

static void test_proc_run(void **state)
{
    (void)state;
    struct vgpu_proc p;
    struct vgpu_err e = { 0 };
    const char *cat[] = { "sh", "-c", "cat; echo \"[$VGPU_T_A][${VGPU_T_B-unset}]\"; echo oops >&2; exit 3", NULL };
    setenv("VGPU_T_B", "x", 1);
    const char *env[] = { "VGPU_T_A=hello", "VGPU_T_B", NULL };
    assert_int_equal(vgpu_proc_run(cat, env, "line\n", 5000, &p, &e), 0);
    assert_int_equal(p.status, 3);
    assert_false(p.timed_out);
    assert_string_equal(p.out, "line\n[hello][unset]\n");
    assert_string_equal(p.err, "oops\n");
    vgpu_proc_free(&p);
    unsetenv("VGPU_T_B");

    const char *slow[] = { "sleep", "5", NULL };
    assert_int_equal(vgpu_proc_run(slow, NULL, NULL, 100, &p, &e), 0);
    assert_true(p.timed_out);
    vgpu_proc_free(&p);

    /* A daemon that keeps stdout open does not make us wait for it. */
    const char *daemonish[] = { "sh", "-c", "(sleep 3 &) ; echo started", NULL };
    assert_int_equal(vgpu_proc_run(daemonish, NULL, NULL, 2000, &p, &e), 0);
    assert_false(p.timed_out);
    assert_string_equal(p.out, "started\n");
    vgpu_proc_free(&p);

    const char *missing[] = { "/nonexistent/vgpu-no-such-tool", NULL };
    assert_int_equal(vgpu_proc_run(missing, NULL, NULL, 1000, &p, &e), -1);
    assert_int_equal(e.code, VGPU_EXIT_NO_LIBRARY);
    assert_non_null(strstr(e.msg, "not found"));
}

static void test_mps_daemon_pid(void **state)
{
    (void)state;
    char dir[] = "/tmp/vgpu-test-mps.XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(vgpu_mps_daemon_pid(dir), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, VGPU_MPS_PID_FILE);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%d", (int)getpid()); /* no newline, like the real daemon */
    fclose(f);
    assert_int_equal(vgpu_mps_daemon_pid(dir), getpid());
    f = fopen(path, "w");
    fprintf(f, "2147483000");
    fclose(f);
    assert_int_equal(vgpu_mps_daemon_pid(dir), 0);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_list),
        cmocka_unit_test(test_timeslice_words),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_mps_replies),
        cmocka_unit_test(test_proc_run),
        cmocka_unit_test(test_mps_daemon_pid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
