/* vgpu wait: wait for jobs to end and return the exit status, like the shell's wait. */
static const char usage[] =
    "usage: vgpu wait [--timeout SECONDS] JOB...\n"
    "\n"
    "Wait until every JOB (an id, a unique start of one, or a name) has ended, and exit with\n"
    "the status of the last one given: the command's exit status, or 128+N when it was killed\n"
    "by signal N, as a shell's wait does. Works for jobs started by 'vgpu run', in the\n"
    "foreground elsewhere or with --detach.\n"
    "\n"
    "  --timeout SECONDS  give up after this long (exit 124, like timeout(1)): above 0, at most\n"
    "                 10000000, fractions allowed (0.5)\n"
    "  --help             show this help\n"
    "\n"
    "Exit status: the job's status; 8 when a job does not exist (any more: a job's status is\n"
    "kept for 60 seconds after it ends); 124 on timeout; 1 when a job ended without a status\n"
    "(its 'vgpu run' was killed); 2 bad usage, an empty or ambiguous JOB; 11 a job's region\n"
    "file is damaged. JOB is looked up as an exact id, then a name, then a unique id start.\n"
    "Every JOB is looked up before any is waited for: one that is not found or ambiguous ends\n"
    "the wait at once. A job that fails later (1, 11) makes that the status, whatever the last\n"
    "one gave.\n";

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"

extern const struct vgpu_cmd vgpu_cmd_wait;

static const struct option options[] = {
    { "timeout", required_argument, NULL, 't' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "timeout", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Opens the job named by key, or says why not and returns its exit code. */
static int find_job(const char *dir, const char *key, struct vgpu_region *r)
{
    struct vgpu_err e;
    /* A mistake on the command line (an unset variable), not a job that has gone. */
    if (!*key)
        return vgpu_usage_error(&vgpu_cmd_wait, "JOB is empty: give a job id, a unique start of one, or a name");
    if (vgpu_jobs_find_all(dir, key, VGPU_REGION_VIEW, r, &e) == 0)
        return 0;
    if (e.code == VGPU_EXIT_NOT_FOUND)
        return vgpu_fail(e.code, "%s; a job's status is kept for %d seconds after it ends", e.msg,
                         VGPU_EXITED_KEEP_DEFAULT_S);
    return vgpu_err_report(&e);
}

/* Waits for one job; returns its shell-style status, or a negative value: -124 timeout. When
 * the job cannot be waited for, *failed is set and the value is the error's exit code. */
static int wait_one(const char *dir, const char *key, double deadline, bool *failed)
{
    struct vgpu_region r;
    int rc = find_job(dir, key, &r);
    *failed = rc != 0;
    if (rc)
        return rc;
    for (;;) {
        /* Truncated while we wait: its page would kill us (SIGBUS); the status is lost. */
        if (vgpu_region_check(&r) != 0) {
            *failed = true;
            rc = vgpu_fail(VGPU_EXIT_STATE, "job %s: %s; its exit status is lost (its command may still run: see "
                           "vgpu ps)", r.info->id, r.damaged_why);
            break;
        }
        unsigned st = atomic_load(&r.hdr->state);
        if (st == VGPU_JOB_EXITED) {
            int sig = atomic_load(&r.hdr->exit_signal);
            rc = sig ? 128 + sig : atomic_load(&r.hdr->exit_code) & 0xff;
            break;
        }
        /* A job outlives a killed vgpu run (vgpu_region_job_alive): waited for until its last
         * process ends, whose status nobody can know. */
        if (!vgpu_region_creator_alive(&r) && !vgpu_region_job_alive(&r)) {
            *failed = true;
            rc = vgpu_fail(VGPU_EXIT_FAIL, "job %s ended without an exit status: its 'vgpu run' (pid %d) was gone, "
                           "and its last process has ended", r.info->id, r.hdr->creator_pid);
            break;
        }
        if (deadline > 0 && now_s() >= deadline) {
            rc = -124;
            break;
        }
        usleep(50 * 1000);
    }
    vgpu_region_close(&r);
    return rc;
}

static int cmd_wait(int argc, char **argv)
{
    double timeout = 0;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_wait, argc, argv, "")) != -1) {
        switch (c) {
        case 't': {
            char *end;
            errno = 0;
            timeout = strtod(optarg, &end);
            /* Plain decimals only (strtod also takes "nan", "inf", hex and exponents), and the
             * message names the range that is really accepted. */
            if (errno || end == optarg || *end || strspn(optarg, "0123456789.") != strlen(optarg) ||
                !(timeout > 0 && timeout <= 1e7))
                return vgpu_usage_error(&vgpu_cmd_wait, "--timeout: '%s' is not a number of seconds above 0 and at most "
                                        "10000000, e.g. 30 or 0.5", optarg);
            break;
        }
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return vgpu_usage_error(&vgpu_cmd_wait, "name the jobs to wait for");
    char dir[4096];
    struct vgpu_err e;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0)
        return vgpu_err_report(&e);
    /* Every JOB first: a mistyped one is said at once, before waiting hours for the others. */
    for (int i = optind; i < argc; i++) {
        struct vgpu_region r;
        int rc = find_job(dir, argv[i], &r);
        if (rc)
            return rc;
        vgpu_region_close(&r);
    }
    double deadline = timeout > 0 ? now_s() + timeout : 0;
    int rc = 0, first_err = 0;
    for (int i = optind; i < argc; i++) {
        bool failed;
        rc = wait_one(dir, argv[i], deadline, &failed);
        if (rc == -124)
            return vgpu_fail(VGPU_EXIT_TIMEOUT, "timed out after %g s waiting for job %s", timeout, argv[i]);
        /* Said, and the others still waited for; the error, not a later job's status, is the
         * exit status, so that a script sees that something went wrong. */
        if (failed && !first_err)
            first_err = rc;
    }
    return first_err ? first_err : rc;
}

const struct vgpu_cmd vgpu_cmd_wait = {
    .name = "wait",
    .fn = cmd_wait,
    .summary = "wait for jobs to end and return their exit status",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .operand = VGPU_ARG_JOB,
};
