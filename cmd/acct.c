/* vgpu acct: the accounting records of ended jobs (DESIGN.md decision 12), as sacct shows Slurm's. */
static const char usage[] =
    "usage: vgpu acct [--since WHEN] [--until WHEN] [--user USER] [--gpu GPU] [--name NAME] [-j ID]\n"
    "                 [--totals] [--json | --csv]\n"
    "       vgpu acct --retention DAYS\n"
    "\n"
    "Show the record of every job that ended: who ran it, when, on which GPUs, with which limits,\n"
    "how it ended, and per GPU its GPU time (as the schedule measured it for jobs with --core,\n"
    "else from NVML's per-process samples: the record says which), time throttled, peak memory,\n"
    "memory over time (GiB-hours), energy (NVML's energy counter, shared out by GPU time) and\n"
    "bytes migrated (--oversubscribe).\n"
    "vgpu run writes the record\n"
    "when the command ends; when vgpu run died or could not write it, this command (or the next\n"
    "that lists jobs) writes it from the job's region, marked recovered. Records are kept in\n"
    "STATEDIR/acct.db, yours alone (SQLite), for 400 days unless root's policy or --retention\n"
    "says otherwise. With the arbiter (vgpu daemon), vgpu run sends the record to it instead,\n"
    "which keeps every user's in one root database (/var/lib/vgpu/acct.db) and shows each user\n"
    "their own (root: all); records of your own store are handed to it when it answers again.\n"
    "It also checks a capped job's GPU time against what its schedule charged the job, and\n"
    "stores the charge instead of a lower figure (gpu_time_source \"arbiter\").\n"
    "\n"
    "  --since WHEN   jobs that ended at or after WHEN: 2026-11-01, 2026-11-01T14:30 (local\n"
    "                 time), -7d, -2h, -30m, -90s (before now), now, or @SECONDS\n"
    "  --until WHEN   jobs that ended before WHEN (the same forms)\n"
    "  --user USER    jobs of USER (a name or uid): only root may name another user\n"
    "  --gpu GPU      jobs that used this GPU: its UUID, the start of it, or its NVML index\n"
    "  --name NAME    jobs with this name (vgpu run --name)\n"
    "  -j, --job ID   the job with this id, or whose id starts with ID\n"
    "  --totals       per user and GPU: jobs, GPU-hours, GiB-hours and energy, over the\n"
    "                 records that match\n"
    "  --json         one JSON document (see vgpu-json(7))\n"
    "  --csv          comma-separated values with a header line, one line per job and GPU\n"
    "  --retention DAYS  keep records DAYS days (1-36500) from now on, and remove older ones now;\n"
    "                 never more than root's acct-retention-days policy (its default)\n"
    "  --help         show this help\n"
    "\n"
    "Exit status: 0 shown (also when no record matches); 2 bad option; 5 the database is\n"
    "locked by another program for longer than 5 s; 6 permission denied; 11 root's policy\n"
    "file is broken; 1 the database cannot be read (said why).\n";

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acct/output.h"
#include "acct/when.h"
#include "cmd.h"
#include "vgpu/acct.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"

extern const struct vgpu_cmd vgpu_cmd_acct;

enum { OPT_SINCE = 0x100, OPT_UNTIL, OPT_USER, OPT_GPU, OPT_NAME, OPT_TOTALS, OPT_JSON, OPT_CSV, OPT_RETENTION };

static const struct option options[] = {
    { "since", required_argument, NULL, OPT_SINCE },
    { "until", required_argument, NULL, OPT_UNTIL },
    { "user", required_argument, NULL, OPT_USER },
    { "gpu", required_argument, NULL, OPT_GPU },
    { "name", required_argument, NULL, OPT_NAME },
    { "job", required_argument, NULL, 'j' },
    { "totals", no_argument, NULL, OPT_TOTALS },
    { "json", no_argument, NULL, OPT_JSON },
    { "csv", no_argument, NULL, OPT_CSV },
    { "retention", required_argument, NULL, OPT_RETENTION },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "since", VGPU_ARG_OTHER, NULL },
    { "until", VGPU_ARG_OTHER, NULL },
    { "user", VGPU_ARG_OTHER, NULL },
    { "gpu", VGPU_ARG_GPU, NULL },
    { "name", VGPU_ARG_OTHER, NULL },
    { "job", VGPU_ARG_OTHER, NULL },
    { "retention", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int parse_user(const char *text, uint32_t *uid)
{
    struct passwd *pw = getpwnam(text);
    char *end;
    errno = 0;
    unsigned long n = strtoul(text, &end, 10);
    if (pw)
        *uid = (uint32_t)pw->pw_uid;
    else if (*text && !*end && !errno && n <= 0xfffffffeUL)
        *uid = (uint32_t)n;
    else
        return vgpu_usage_error(&vgpu_cmd_acct, "--user '%s': no such user (give a user name or a uid)", text);
    if (geteuid() != 0 && *uid != geteuid())
        return vgpu_fail(VGPU_EXIT_PERMISSION, "--user %s: your accounting database holds your own jobs only; root's "
                         "holds the jobs root ran (vgpu run --user)", text);
    return 0;
}

/* Ended jobs that vgpu run could not record are recorded when a listing removes them
 * (vgpu_jobs_on_ended, set by vgpu's main): list ours once first. */
static void recover_ended_jobs(void)
{
    char dir[4096];
    struct vgpu_err e;
    struct vgpu_job_ref *refs = NULL;
    size_t n = 0;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0 || vgpu_jobs_list_all(dir, &refs, &n, NULL, &e) < 0)
        vgpu_debug("looking for ended jobs to record: %s", e.msg);
    free(refs);
}

static int cmd_acct(int argc, char **argv)
{
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    bool totals = false;
    enum vgpu_acct_format fmt = VGPU_ACCT_TABLE;
    const char *since = NULL, *until = NULL, *user = NULL, *retention = NULL;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_acct, argc, argv, "j:")) != -1) {
        switch (c) {
        case OPT_SINCE: since = optarg; break;
        case OPT_UNTIL: until = optarg; break;
        case OPT_USER: user = optarg; break;
        case OPT_GPU: f.gpu = optarg; break;
        case OPT_NAME: f.name = optarg; break;
        case 'j': f.id = optarg; break;
        case OPT_TOTALS: totals = true; break;
        case OPT_JSON:
        case OPT_CSV:
            if (fmt != VGPU_ACCT_TABLE)
                return vgpu_usage_error(&vgpu_cmd_acct, "--json and --csv: choose one");
            fmt = c == OPT_JSON ? VGPU_ACCT_JSON : VGPU_ACCT_CSV;
            break;
        case OPT_RETENTION: retention = optarg; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_acct, "unexpected argument '%s'", argv[optind]);
    struct vgpu_err e;
    uint64_t now = realtime_ns();
    if ((since && vgpu_acct_parse_when(since, "--since", now, &f.since_ns, &e) < 0) ||
        (until && vgpu_acct_parse_when(until, "--until", now, &f.until_ns, &e) < 0))
        return vgpu_usage_error(&vgpu_cmd_acct, "%s", e.msg);
    if (since && until && f.until_ns <= f.since_ns)
        return vgpu_usage_error(&vgpu_cmd_acct, "--until %s is not after --since %s: nothing can match", until, since);
    if (user) {
        int rc = parse_user(user, &f.uid);
        if (rc)
            return rc;
        f.by_uid = true;
    }
    unsigned days = 0;
    if (retention) {
        char *end;
        errno = 0;
        unsigned long d = strtoul(retention, &end, 10);
        if (errno || !*retention || *end || d < 1 || d > 36500)
            return vgpu_usage_error(&vgpu_cmd_acct, "--retention '%s': give a number of days from 1 to 36500",
                                    retention);
        if (since || until || user || f.gpu || f.name || f.id || totals || fmt != VGPU_ACCT_TABLE)
            return vgpu_usage_error(&vgpu_cmd_acct, "--retention changes the database and shows nothing: give it "
                                    "alone");
        days = (unsigned)d;
    }
    recover_ended_jobs();
    if (days) {
        struct vgpu_acct_store *s = vgpu_acct_open_user(true, &e);
        if (!s)
            return vgpu_err_report(&e);
        unsigned removed = 0;
        int rc = vgpu_acct_set_retention(s, days, &e) < 0 || vgpu_acct_prune(s, now, &removed, &e) < 0
                     ? vgpu_err_report(&e) : 0;
        if (!rc)
            fprintf(stderr, "vgpu acct: records are kept %u days; %u older record%s removed\n", days, removed,
                    removed == 1 ? "" : "s");
        vgpu_acct_close(s);
        return rc;
    }
    struct vgpu_acct_out *o = vgpu_acct_out_begin(fmt, totals);
    if (!o)
        return vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
    /* The arbiter's database when a daemon answers, else the own store (vgpu/acct.h). */
    int rc = totals ? vgpu_acct_read_totals(&f, vgpu_acct_out_total, o, &e)
                    : vgpu_acct_read_query(&f, vgpu_acct_out_record, o, &e);
    rc = rc < 0 ? vgpu_err_report(&e) : 0;
    if (vgpu_acct_out_end(o) < 0 && !rc)
        rc = vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
    return rc;
}

const struct vgpu_cmd vgpu_cmd_acct = {
    .name = "acct",
    .fn = cmd_acct,
    .summary = "show the accounting records of ended jobs (GPU time, memory, exit)",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
};
