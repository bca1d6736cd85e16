/* vgpu acct: the accounting records of ended jobs (DESIGN.md decision 12), as sacct shows Slurm's. */
static const char usage[] =
    "usage: vgpu acct [--since WHEN] [--until WHEN] [--user USER] [--gpu GPU] [--name NAME]\n"
    "                 [-j ID] [--totals] [--json | --csv]\n"
    "       vgpu acct --retention DAYS\n"
    "\n"
    "Show the record of every job that ended: who ran it, when, on which GPUs, with which\n"
    "limits, how it ended, and per GPU its GPU time (as the schedule measured it for jobs with\n"
    "--core, else from NVML's per-process samples: the record says which), time throttled, peak\n"
    "memory, memory over time (GiB-hours), energy (NVML's energy counter, shared out by GPU\n"
    "time) and bytes migrated (--oversubscribe).\n"
    "vgpu run writes the record\n"
    "when the command ends; when vgpu run died or could not write it, this command (or the next\n"
    "that lists jobs) writes it from the job's region, marked recovered. Records are kept in\n"
    "your own store, ~/.local/state/vgpu/acct.db ($XDG_STATE_HOME/vgpu; root's in\n"
    "/var/lib/vgpu/own), yours alone (SQLite), for 400 days unless root's policy or\n"
    "--retention says otherwise. With the arbiter (vgpu daemon), vgpu run sends the record\n"
    "to it instead, which keeps every user's in one root database (/var/lib/vgpu/acct.db)\n"
    "and shows each user their own (root: all); your own store then only buffers records it\n"
    "could not take, handed over at your next vgpu run or vgpu acct. While an arbiter that ran\n"
    "here is down, what is shown is your own store's only, said and marked partial.\n"
    "It also checks a capped job's GPU time against what its schedule charged the job, and\n"
    "stores the charge instead of a lower figure (gpu_time_source \"arbiter\").\n"
    "A figure past what the job's GPUs allow (a damaged job region: a limit past the GPU's\n"
    "memory, a core limit past 100 %, more GPU time or GiB-hours than the duration allows, an\n"
    "end before the start) is cut to that bound before it is stored, and the record says so\n"
    "(NOTE \"bounded: ...\", \"bounded\" in --json and --csv; vgpu-acct(1), Bounds).\n"
    "\n"
    "  --since WHEN   jobs that ended at or after WHEN: 2026-11-01, 2026-11-01T14:30 (local\n"
    "                 time), -7d, -2h, -30m, -90s (before now), now, or @SECONDS\n"
    "  --until WHEN   jobs that ended before WHEN (the same forms); a date that does not exist\n"
    "                 (2026-02-30) is refused\n"
    "  --user USER    jobs of USER (a name or uid): only root may name another user\n"
    "  --gpu GPU      jobs that used this GPU: its UUID, the start of it, or its NVML index\n"
    "                 (all: every GPU)\n"
    "  --name NAME    jobs with this name (vgpu run --name)\n"
    "  -j, --job ID   the job with this id, or whose id starts with ID (either case)\n"
    "  --totals       per user and GPU: jobs, GPU-hours, GiB-hours (held, requested, and\n"
    "                 borrowed past --mem REQUEST) and energy, over the records that match;\n"
    "                 a line \"all\" adds up a user's GPUs, each job once\n"
    "  --json         one JSON document (see vgpu-json(7))\n"
    "  --csv          comma-separated values with a header line, one line per job and GPU\n"
    "                 (control bytes escaped; a cell starting = + - @ quoted as text)\n"
    "  --retention DAYS  keep records DAYS days (1-36500) from now on, and remove older ones\n"
    "                 now; never more than root's acct-retention-days policy (its default).\n"
    "                 Your own store's: refused while the arbiter answers (root's policy there)\n"
    "  --help         show this help\n"
    "A filter is given once and never empty. Energy is in kJ in tables, joules in JSON and CSV.\n"
    "\n"
    "Exit status: 0 shown (also when no record matches); 2 bad option; 5 the database is\n"
    "locked by another program for longer than 5 s; 6 permission denied; 11 root's policy\n"
    "file is broken; 1 the database cannot be read (said why).\n";

#include <ctype.h>
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
#include "vgpu/machinedir.h"
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

/* "--since" for OPT_SINCE: the long name, for messages. */
static const char *current_option_name(int c)
{
    static char buf[40];
    for (const struct option *o = options; o->name; o++)
        if (o->val == c) {
            snprintf(buf, sizeof buf, "--%s", o->name);
            return buf;
        }
    return "an option";
}

static const char *what_to_give(int c)
{
    switch (c) {
    case OPT_SINCE:
    case OPT_UNTIL: return "a date, a time or -7d";
    case OPT_USER: return "a user name or a uid";
    case OPT_GPU: return "a UUID, the start of one, an NVML index, or all";
    case OPT_NAME: return "a job name";
    case OPT_RETENTION: return "a number of days";
    default: return "a job id or the start of one";
    }
}

/* Job ids are hex digits, written in lower case: -j 1C3B finds job 1c3b... */
static const char *job_id_lower(const char *text, char *buf, size_t len)
{
    size_t i = 0;
    for (; text[i] && i + 1 < len; i++)
        buf[i] = (char)tolower((unsigned char)text[i]);
    buf[i] = 0;
    return text[i] ? text : buf;   /* longer than any id: matches nothing either way */
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
 * (vgpu_jobs_on_ended, set by vgpu's main): list ours once first. A job that just ended may
 * still have its record on the way (vgpu run's finisher waits up to 1 s for the job's last NVML
 * sampling window): waited for, up to 2 s, so `vgpu run ...; vgpu acct` shows it. */
static void recover_ended_jobs(void)
{
    char dir[4096];
    struct vgpu_err e;
    int late;
    if (vgpu_statedir_or_none(dir, sizeof dir, &e) < 0 || (late = vgpu_jobs_await_records(dir, 2000, &e)) < 0)
        vgpu_debug("looking for ended jobs to record: %s", e.msg);
    else if (late)
        vgpu_warn("%d job%s that just ended %s still writing %s record: it is not shown yet", late,
                  late == 1 ? "" : "s", late == 1 ? "is" : "are", late == 1 ? "its" : "their");
}

static int cmd_acct(int argc, char **argv)
{
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    bool totals = false;
    enum vgpu_acct_format fmt = VGPU_ACCT_TABLE;
    const char *since = NULL, *until = NULL, *user = NULL, *retention = NULL;
    char id[VGPU_JOB_ID_LEN];
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_acct, argc, argv, "j:")) != -1) {
        const char **slot = c == OPT_SINCE ? &since : c == OPT_UNTIL ? &until : c == OPT_USER ? &user
                            : c == OPT_GPU ? &f.gpu : c == OPT_NAME ? &f.name : c == 'j' ? &f.id
                            : c == OPT_RETENTION ? &retention : NULL;
        if (slot) {
            /* A filter given twice would keep only the last (or need an OR nobody asked for), and
             * an empty one would match every job: both refused, as vgpu run refuses them. */
            const char *opt = c == 'j' ? "-j/--job" : current_option_name(c);
            if (*slot)
                return vgpu_usage_error(&vgpu_cmd_acct, "%s is given twice ('%s' and '%s'): give it once", opt, *slot,
                                        optarg);
            if (!*optarg)
                return vgpu_usage_error(&vgpu_cmd_acct, "%s '': give a value (%s)", opt, what_to_give(c));
            *slot = optarg;
            continue;
        }
        switch (c) {
        case OPT_TOTALS: totals = true; break;
        case OPT_JSON:
        case OPT_CSV:
            if (fmt != VGPU_ACCT_TABLE)
                return vgpu_usage_error(&vgpu_cmd_acct, "--json and --csv: choose one");
            fmt = c == OPT_JSON ? VGPU_ACCT_JSON : VGPU_ACCT_CSV;
            break;
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
    if (f.id)
        f.id = job_id_lower(f.id, id, sizeof id);
    if (f.gpu && !strcmp(f.gpu, "all"))
        f.gpu = NULL;   /* as vgpu run --gpu all: every GPU, so no filter */
    unsigned days = 0;
    if (retention) {
        char *end;
        errno = 0;
        unsigned long d = strtoul(retention, &end, 10);
        if (errno || !isdigit((unsigned char)*retention) || *end || d < 1 || d > 36500)
            return vgpu_usage_error(&vgpu_cmd_acct, "--retention '%s': give a number of days from 1 to 36500",
                                    retention);
        if (since || until || user || f.gpu || f.name || f.id || totals || fmt != VGPU_ACCT_TABLE)
            return vgpu_usage_error(&vgpu_cmd_acct, "--retention changes the database and shows nothing: give it "
                                    "alone");
        days = (unsigned)d;
    }
    recover_ended_jobs();
    if (days) {
        /* With the arbiter, the records are in its database, kept as root's policy says: the own
         * store only buffers what it could not take, so its retention would change nothing shown
         * (issue 36 N10). */
        struct vgpu_acct_origin from;
        vgpu_acct_origin(&from);
        if (from.source == VGPU_ACCT_FROM_ARBITER)
            return vgpu_usage_error(&vgpu_cmd_acct, "--retention: the records are in the arbiter's database (vgpu "
                                    "daemon), whose retention is root's policy alone (acct-retention-days in %s/"
                                    "policy); your own store only buffers records until the arbiter takes them",
                                    vgpu_machinedir_path());
        struct vgpu_acct_store *s = vgpu_acct_open_user(true, &e);
        if (!s)
            return vgpu_err_report(&e);
        unsigned removed = 0;
        int rc = vgpu_acct_set_retention(s, days, &e) < 0 || vgpu_acct_prune(s, now, &removed, &e) < 0
                     ? vgpu_err_report(&e) : 0;
        if (!rc)
            fprintf(stderr, "vgpu acct: your own store %s (no arbiter answers): records are kept %u days; %u "
                    "older record%s removed\n", from.own_path[0] ? from.own_path : "", days, removed,
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
    if (!rc) {
        struct vgpu_acct_origin from;
        vgpu_acct_origin(&from);
        vgpu_acct_out_origin(o, &from);
        /* Said, so that nobody looks for the fault in the file's owner or mode (issue 36 N11). */
        if (from.source == VGPU_ACCT_FROM_OWN && from.own_read_only)
            vgpu_warn("your own store %s is on a read-only file system: its records are shown, but none can be "
                      "written there until it is writable again (a job's record waits in its region meanwhile)",
                      from.own_path);
        if (from.source != VGPU_ACCT_FROM_ARBITER && from.partial)
            vgpu_warn("the arbiter (vgpu daemon) does not answer: shown are only the records of your own store "
                      "(%s: jobs that ended while no arbiter took them); the others are in the arbiter's database "
                      "(partial: start vgpu daemon to see them all)", from.own_path[0] ? from.own_path : "none yet");
    }
    if (vgpu_acct_out_end(o, rc != 0) < 0 && !rc)
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
