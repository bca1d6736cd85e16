/* soak: many jobs of two users on one simulated GPU, with chaos, checked every 10 ms.
 * Test code, not product (DESIGN.md; issue 11 "Proof"). Run by `make soak` and, short, by
 * tests/cli/soak.sh, which prepare the environment (the simulated GPU, state directories,
 * the other user's copies of the programs).
 *
 *   soak --dir DIR --vgpu PATH --worker PATH [--seconds N] [--seed N] [--no-pidns]
 *        [--user NAME --user-bin DIR --user-dir DIR]
 * --no-pidns: no process in a new PID namespace (to tell their failures from others').
 *
 * Jobs: per user, 4 jobs of 4 processes (tests/soak/worker.c), started as `vgpu run` jobs
 * whose command is an anchor; the workers get the job's environment, as processes the command
 * started would, and start at random within the first 1.5 s:
 *   steady  --core 20 (25 for the second user): 2 launchers, 2 allocators; its cap never
 *           changes and the chaos keeps one launcher alive, so its share is checked
 *   mem     --mem 768M: 4 allocators; limit changed live; some processes in a PID namespace
 *   both    --core 10 --mem 1G: 2 launchers, 2 allocators; both limits changed live
 *   ns      --mem 1G: 3 allocators, 1 launcher (uncapped); some processes in a PID namespace
 * PID namespaces are used in the --mem jobs only: a capped process killed in another PID
 * namespace keeps its schedule entry for 60 s (sched.c), past the end of a short soak.
 *
 * Chaos (chaos.c): a SIGKILL every 150 ms on average at a random point (allocators spend much
 * of their time inside allocation calls: bursts of back-to-back 1 MiB allocations), now and
 * then a SIGTERM instead; a replacement 50-300 ms later; `vgpu limit` every 0.7 s;
 * `vgpu ps --json` every 2 s.
 *
 * Checks (check.c), every 10 ms:
 *   over_limit      no job's accounted usage passes its limit. Allowed: after `vgpu limit`
 *                   lowers a limit, nothing already granted is taken away, and a reservation
 *                   that read the old limit just before the change may still complete (one per
 *                   process, within 200 ms): the usage may be above the new limit by what it
 *                   was then plus 4 x 96 MiB for 200 ms, and after that it may only fall,
 *                   until it is under the limit
 *   reclaim_late    a dead process's slot is freed (its usage returned) within 1 s of its death
 *                   (`vgpu run` walks its job's slots every 250 ms, and so does an allocation
 *                   call after a period without a walk). For a process that was alone in its
 *                   own PID namespace, only when it lived 1 s past its context creation: one that
 *                   ended before `vgpu run`
 *                   saw it alive cannot be proven dead, and its usage stays counted (an
 *                   over-count; libvgpu(7))
 *   stall           every live worker beats its heartbeat at least once a second
 *   live_dropped    a live worker's usage is never dropped (the worker checks its own slot)
 *   share           a saturating capped job's GPU time (gpu_time_ns) over every 10 s window
 *                   with a constant cap is within 5 points of the cap
 *   leftover        after the last job ends (and one `vgpu ps` per user, which removes ended
 *                   jobs, VGPU_EXITED_KEEP_S=0): no job files, no placement promises, no
 *                   GPU-time schedule segment
 *   worker_failed / tool_failed   a worker, job, `vgpu limit` or `vgpu ps` failed
 * Prints a table, and exits 0 with no violation, 1 with any, 2 when the soak could not start. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"

extern char **environ;

const char *const soak_vkind_name[V_NKINDS] = {
    [V_OVER_LIMIT] = "over_limit",     [V_RECLAIM_LATE] = "reclaim_late", [V_STALL] = "stall",
    [V_SHARE] = "share",               [V_LIVE_DROPPED] = "live_dropped", [V_LEFTOVER] = "leftover",
    [V_WORKER_FAILED] = "worker_failed", [V_TOOL_FAILED] = "tool_failed",
};

static struct soak S;

uint64_t soak_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SOAK_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t soak_rnd(struct soak *s, uint64_t n)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return n ? s->rng % n : 0;
}

void soak_violation(struct soak *s, enum vkind k, const char *fmt, ...)
{
    s->st.v[k]++;
    if (s->st.v_printed[k]++ >= 5)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("  %7.2f s  violation %s: %s\n", s->t0 ? (double)(soak_now() - s->t0) / 1e9 : 0.0, soak_vkind_name[k],
           msg);
    fflush(stdout);
}

static void usage_exit(void)
{
    fprintf(stderr, "usage: soak --dir DIR --vgpu PATH --worker PATH [--seconds N] [--seed N] [--no-pidns]\n"
                    "            [--user NAME --user-bin DIR --user-dir DIR]\n");
    exit(2);
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...)
{
    char *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&p, fmt, ap) < 0)
        p = NULL;
    va_end(ap);
    if (!p) {
        fprintf(stderr, "soak: out of memory\n");
        exit(2);
    }
    return p;
}

/* The caller's environment, with VGPU_EXITED_KEEP_S=0 (ended jobs are removed by the next
 * listing, so that the end of the soak can check that nothing is left). */
static char **caller_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VGPU_EXITED_KEEP_S=", 19))
            env[k++] = environ[i];
    env[k++] = "VGPU_EXITED_KEEP_S=0";
    env[k] = NULL;
    return env;
}

/* The other user's environment: its own state directory and simulated-GPU state (the fake GPU
 * has no shared two-user mode: each user's processes see their own copy of the GPU's memory),
 * the same machine-wide directory, and the sanitizer settings of the caller. */
static char **other_env(const char *bin, const char *dir)
{
    static const char *const pass[] = { "VGPU_MACHINE_DIR=", "LD_PRELOAD=", "ASAN_OPTIONS=", "UBSAN_OPTIONS=",
                                        "TSAN_OPTIONS=", "LC_ALL=", "NO_COLOR=" };
    char **env = calloc(32, sizeof *env);
    size_t k = 0;
    env[k++] = dupf("PATH=%s:/usr/bin:/bin", bin);
    env[k++] = dupf("LD_LIBRARY_PATH=%s", bin);
    env[k++] = dupf("VGPU_STATE_DIR=%s/state", dir);
    env[k++] = dupf("VGPU_FAKE_STATE=%s/fake.state", dir);
    env[k++] = dupf("VGPU_FAKE_SCENARIO=%s/scenario.json", bin);
    env[k++] = "XDG_RUNTIME_DIR=";
    env[k++] = "HOME=/";
    env[k++] = "VGPU_EXITED_KEEP_S=0";
    for (size_t i = 0; environ[i]; i++)
        for (size_t p = 0; p < sizeof pass / sizeof pass[0]; p++)
            if (!strncmp(environ[i], pass[p], strlen(pass[p])) && k < 31)
                env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static void plan_jobs(struct soak *s)
{
    for (unsigned u = 0; u < s->nusers; u++) {
        for (unsigned k = 0; k < SOAK_JOBS_PER; k++) {
            struct job *j = &s->jobs[s->njobs];
            memset(j, 0, sizeof *j);
            j->user = (int)u;
            j->index = (int)k;
            j->board_index = (int)s->njobs;
            static const char *const kind[] = { "steady", "mem", "both", "ns" };
            snprintf(j->name, sizeof j->name, "soak-u%u-%s", u, kind[k]);
            static const enum role roles[4][SOAK_SLOTS] = {
                { ROLE_LAUNCH, ROLE_LAUNCH, ROLE_ALLOC, ROLE_ALLOC },
                { ROLE_ALLOC, ROLE_ALLOC, ROLE_ALLOC, ROLE_ALLOC },
                { ROLE_LAUNCH, ROLE_ALLOC, ROLE_ALLOC, ROLE_LAUNCH },
                { ROLE_ALLOC, ROLE_LAUNCH, ROLE_ALLOC, ROLE_ALLOC },
            };
            memcpy(j->roles, roles[k], sizeof j->roles);
            switch (k) {
            case 0: j->core = u ? 25 : 20; j->share_checked = true; break;
            case 1: j->mem = 768 * SOAK_MIB; j->change_mem = true; j->pidns = true; break;
            case 2: j->core = 10; j->mem = 1024 * SOAK_MIB; j->change_mem = j->change_core = true; break;
            default: j->mem = 1024 * SOAK_MIB; j->pidns = true; break;
            }
            for (int sl = 0; sl < SOAK_SLOTS; sl++)
                j->slot_proc[sl] = -1;
            s->njobs++;
        }
    }
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = { (time_t)(t / SOAK_SEC), (long)(t % SOAK_SEC) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static unsigned live_workers(const struct soak *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < s->nprocs; i++)
        n += s->procs[i].used && s->procs[i].alive;
    return n;
}

/* Checks only (no chaos) until cond() holds or `max` passed; true when it held. */
static bool settle(struct soak *s, bool (*cond)(const struct soak *), uint64_t max)
{
    uint64_t deadline = soak_now() + max, t = soak_now();
    while (!cond(s)) {
        if (soak_now() > deadline)
            return false;
        t += SOAK_TICK_NS;
        sleep_until(t);
        soak_check_tick(s, soak_now());
    }
    return true;
}

static bool no_workers(const struct soak *s) { return live_workers(s) == 0; }

static bool no_jobs(const struct soak *s)
{
    for (unsigned k = 0; k < s->njobs; k++)
        if (!s->jobs[k].run_done)
            return false;
    return true;
}

/* No worker that the chaos killed is still waiting to be reaped (a zombie looks alive to
 * anyone who checks its pid and start time). */
static bool killed_reaped(const struct soak *s)
{
    for (unsigned i = 0; i < s->nprocs; i++)
        if (s->procs[i].used && s->procs[i].alive && (s->procs[i].killed || s->procs[i].termed))
            return false;
    return true;
}

/* /proc/PID/FILE on one line: its lines whose name (before ':') is in `keys` (NULL: all). */
static void proc_line(pid_t pid, const char *file, const char *const *keys, char *out, size_t len)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    snprintf(out, len, "?");
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t at = 0;
    while (fgets(buf, sizeof buf, f) && at < len) {
        buf[strcspn(buf, "\n")] = 0;
        bool keep = !keys;
        for (unsigned k = 0; keys && keys[k] && !keep; k++)
            keep = !strncmp(buf, keys[k], strlen(keys[k])) && buf[strlen(keys[k])] == ':';
        if (keep)
            at += (size_t)snprintf(out + at, len - at, "%s%s", at ? " " : "", buf);
    }
    fclose(f);
}

/* A worker that did not end after SIGTERM: where it is, for the log (a rare stall under ASan). */
static void report_stuck(struct soak *s, unsigned i)
{
    const struct wproc *w = &s->procs[i];
    const struct soak_proc *b = &s->board->proc[i];
    pid_t t = w->target ? w->target : w->pid;
    char wchan[64], sys[160], st[400];
    proc_line(t, "wchan", NULL, wchan, sizeof wchan);
    proc_line(t, "syscall", NULL, sys, sizeof sys);
    static const char *const keys[] = { "State", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt", NULL };
    proc_line(t, "status", keys, st, sizeof st);
    uint64_t hb = atomic_load(&b->hb_ns), now = soak_now();
    dprintf(s->logfd, "soak: stuck worker %u (job %s, %s%s): pid %d, target %d, phase %u, in_alloc %u, last beat %s%.1f s ago; "
                "wchan %s; syscall %s; %s\n",
             i, s->jobs[w->job].name, w->role == ROLE_ALLOC ? "alloc" : "launch", w->pidns ? ", PID namespace" : "",
             (int)w->pid, (int)w->target, atomic_load(&b->phase), atomic_load(&b->in_alloc), hb ? "" : "(none) ",
             hb ? (double)(now - hb) / 1e9 : 0.0, wchan, sys, st);
}

static void end_everything(struct soak *s)
{
    settle(s, killed_reaped, 2 * SOAK_SEC);
    s->end_ns = soak_now();
    /* Sent again every 100 ms to a worker that had not started when it was last sent (no
     * heartbeat, read before the kill: it installs its handler before its first beat): one that
     * is pid 1 of its own PID namespace ignores a SIGTERM that comes before its handler (the
     * kernel drops the signals a namespace's init does not handle), and so does the worker
     * `unshare` has not started yet. It used to be sent again only while the worker still had
     * no heartbeat, so one that started within those 100 ms never got a SIGTERM it could see:
     * it beat on in nanosleep for 10 s with SIGTERM caught and nothing pending, and was killed
     * (once under ASan, once beside a CPU hog). */
    bool ended = false;
    bool again[SOAK_MAX_PROCS] = { false };
    for (int round = 0; round < 100 && !ended; round++) {
        for (unsigned i = 0; i < s->nprocs && i < SOAK_MAX_PROCS; i++) {
            struct wproc *w = &s->procs[i];
            if (!w->used || !w->alive || (round > 0 && !again[i]))
                continue;
            again[i] = atomic_load(&s->board->proc[i].hb_ns) == 0;
            if (!w->target)
                w->target = soak_ns_child(w->pid);
            again[i] |= !w->target;         /* unshare has not made it yet: it got this one */
            kill(w->target ? w->target : w->pid, SIGTERM);
        }
        ended = settle(s, no_workers, SOAK_SEC / 10);
    }
    if (!ended) {
        soak_violation(s, V_STALL, "%u workers did not end within 10 s of SIGTERM", live_workers(s));
        for (unsigned i = 0; i < s->nprocs; i++)
            if (s->procs[i].used && s->procs[i].alive)
                report_stuck(s, i);
        for (unsigned i = 0; i < s->nprocs; i++)
            if (s->procs[i].used && s->procs[i].alive)
                kill(s->procs[i].pid, SIGKILL);
        settle(s, no_workers, 5 * SOAK_SEC);
    }
    for (unsigned k = 0; k < s->njobs; k++)
        if (!s->jobs[k].run_done && s->jobs[k].run_pid > 0)
            kill(s->jobs[k].run_pid, SIGTERM);
    if (!settle(s, no_jobs, 10 * SOAK_SEC))
        soak_violation(s, V_WORKER_FAILED, "some jobs' `vgpu run` did not end within 10 s of SIGTERM");
    /* One listing per user removes the ended jobs (VGPU_EXITED_KEEP_S=0). A job that ran kernels
     * is kept while vgpu run's finisher writes its record (cmd/run/finisher.c), up to a second
     * after vgpu run returned: `vgpu acct` first, which waits for those records, then `vgpu ps`. */
    for (unsigned u = 0; u < s->nusers; u++) {
        static const char *const tools[] = { "acct", "ps" };
        for (unsigned t = 0; t < 2; t++) {
            char *argv[] = { (char *)s->users[u].vgpu, (char *)tools[t], NULL };
            pid_t pid = soak_spawn(s, &s->users[u], argv, NULL, false, true);
            int st = 0;
            if (pid > 0 && waitpid(pid, &st, 0) == pid && (!WIFEXITED(st) || WEXITSTATUS(st)))
                soak_violation(s, V_TOOL_FAILED, "the final `vgpu %s` of user %s ended with status 0x%x", tools[t],
                               s->users[u].name, st);
        }
    }
    soak_final_checks(s);
}

static void print_table(struct soak *s, double secs, uint64_t late_max)
{
    uint64_t ops = 0, allocs = 0, frees = 0, launches = 0, refused = 0, selfchecks = 0;
    for (unsigned i = 0; i < s->nprocs; i++) {
        const struct soak_proc *b = &s->board->proc[i];
        ops += atomic_load(&b->ops);
        allocs += atomic_load(&b->allocs);
        frees += atomic_load(&b->frees);
        launches += atomic_load(&b->launches);
        refused += atomic_load(&b->refused);
        selfchecks += atomic_load(&b->selfchecks);
    }
    const struct stats *t = &s->st;
    uint64_t total = 0;
    for (int k = 0; k < V_NKINDS; k++)
        total += t->v[k];
    printf("\nsoak: %.1f s, %u users x %u jobs x %u processes on the simulated GPU, seed %llu\n", secs, s->nusers,
           SOAK_JOBS_PER, SOAK_SLOTS, (unsigned long long)s->seed);
    printf("  %-16s %10llu  (allocations %llu, frees %llu, launches %llu; %llu refused with OUT_OF_MEMORY)\n",
           "operations", (unsigned long long)ops, (unsigned long long)allocs, (unsigned long long)frees,
           (unsigned long long)launches, (unsigned long long)refused);
    printf("  %-16s %10llu  (SIGKILL; %llu inside an allocation call, %llu in a PID namespace)\n", "kills",
           (unsigned long long)t->kills, (unsigned long long)t->kills_in_alloc, (unsigned long long)t->kills_pidns);
    printf("  %-16s %10llu  (SIGTERM)\n", "graceful ends", (unsigned long long)t->terms);
    printf("  %-16s %10llu  (%llu in a new PID namespace)\n", "starts", (unsigned long long)t->starts,
           (unsigned long long)t->starts_pidns);
    printf("  %-16s %10llu  (--mem %llu, --core %llu)\n", "limit changes", (unsigned long long)t->limit_changes,
           (unsigned long long)t->mem_changes, (unsigned long long)t->core_changes);
    printf("  %-16s %10llu  (vgpu ps --json)\n", "listings", (unsigned long long)t->ps_runs);
    printf("  %-16s %10llu  (%llu rounds of 10 ms, latest %.1f ms late; %llu self-checks by the workers)\n",
           "checks", (unsigned long long)t->checks, (unsigned long long)t->check_rounds, (double)late_max / 1e6,
           (unsigned long long)selfchecks);
    printf("  %-16s %10llu  (dead processes' slots freed: mean %.0f ms, max %.0f ms after death)\n", "reclaims",
           (unsigned long long)t->reclaims, t->reclaims ? (double)t->reclaim_sum_ns / (double)t->reclaims / 1e6 : 0.0,
           (double)t->reclaim_max_ns / 1e6);
    printf("  %-16s %10.0f  ms (the longest time a live worker went without a heartbeat)\n", "heartbeat gap",
           (double)t->hb_gap_max_ns / 1e6);
    printf("  %-16s %10llu  (allowed: the limit lowered below the usage; largest %.0f MiB over)\n", "overruns",
           (unsigned long long)t->overrun_episodes, (double)t->overrun_max / (double)SOAK_MIB);
    for (unsigned k = 0; k < s->njobs; k++) {
        const struct job *j = &s->jobs[k];
        if (!j->core)
            continue;
        if (j->windows && j->cap_min == j->cap_max)
            printf("  share %-18s %u windows of 10 s: %.1f..%.1f%% at cap %u%%, at most %.1f points off\n", j->name,
                   j->windows, j->share_min, j->share_max, j->cap_min, j->off_max);
        else if (j->windows)
            printf("  share %-18s %u windows of 10 s at caps %u..%u%% (changed live): at most %.1f points off\n",
                   j->name, j->windows, j->cap_min, j->cap_max, j->off_max);
        else
            printf("  share %-18s no 10 s window with a constant cap and a working launcher\n", j->name);
    }
    printf("violations:\n");
    for (int k = 0; k < V_NKINDS; k++)
        printf("  violation %-14s %llu\n", soak_vkind_name[k], (unsigned long long)t->v[k]);
    printf("total violations %llu\n", (unsigned long long)total);
}

int main(int argc, char **argv)
{
    struct soak *s = &S;
    const char *dir = NULL, *vgpu = NULL, *worker = NULL, *oname = NULL, *obin = NULL, *odir = NULL;
    s->seconds = 60;
    s->seed = (uint64_t)time(NULL);
    static const struct option opts[] = {
        { "dir", required_argument, NULL, 'd' },      { "vgpu", required_argument, NULL, 'v' },
        { "worker", required_argument, NULL, 'w' },   { "seconds", required_argument, NULL, 's' },
        { "seed", required_argument, NULL, 'S' },     { "user", required_argument, NULL, 'u' },
        { "user-bin", required_argument, NULL, 'b' }, { "user-dir", required_argument, NULL, 'D' },
        { "no-pidns", no_argument, NULL, 'N' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'v': vgpu = optarg; break;
        case 'w': worker = optarg; break;
        case 's': s->seconds = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'S': s->seed = strtoull(optarg, NULL, 10); break;
        case 'u': oname = optarg; break;
        case 'b': obin = optarg; break;
        case 'D': odir = optarg; break;
        case 'N': s->no_pidns = true; break;
        default: usage_exit();
        }
    }
    if (!dir || !vgpu || !worker || !s->seconds || (oname && (!obin || !odir)) || optind != argc)
        usage_exit();
    s->rng = s->seed * 2654435761ULL + 1;
    s->logdir = dir;
    char *logpath = dupf("%s/soak.log", dir);
    s->logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    char *bp = dupf("%s/board", dir);
    s->board_path = bp;
    int bfd = open(bp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (s->logfd < 0 || bfd < 0 || fchmod(bfd, 0666) || ftruncate(bfd, sizeof *s->board)) {
        fprintf(stderr, "soak: cannot create %s and %s: %s\n", logpath, bp, strerror(errno));
        return 2;
    }
    s->board = mmap(NULL, sizeof *s->board, PROT_READ | PROT_WRITE, MAP_SHARED, bfd, 0);
    close(bfd);
    if (s->board == MAP_FAILED) {
        fprintf(stderr, "soak: cannot map %s: %s\n", bp, strerror(errno));
        return 2;
    }
    s->board->magic = SOAK_MAGIC;
    signal(SIGPIPE, SIG_IGN);

    struct user *u0 = &s->users[s->nusers++];
    u0->name = "caller";
    u0->vgpu = vgpu;
    u0->worker = worker;
    u0->env = caller_env();
    u0->uid = getuid();
    u0->gid = getgid();
    const char *sd = getenv("VGPU_STATE_DIR");
    snprintf(u0->statedir, sizeof u0->statedir, "%s", sd ? sd : "");
    if (!sd) {
        fprintf(stderr, "soak: set VGPU_STATE_DIR (the soak checks that nothing is left in it)\n");
        return 2;
    }
    if (oname) {
        struct passwd *pw = getpwnam(oname);
        if (!pw || geteuid() != 0) {
            fprintf(stderr, "soak: --user %s needs root and an existing user\n", oname);
            return 2;
        }
        struct user *u1 = &s->users[s->nusers++];
        u1->name = oname;
        u1->other = true;
        u1->uid = pw->pw_uid;
        u1->gid = pw->pw_gid;
        u1->vgpu = dupf("%s/vgpu", obin);
        u1->worker = dupf("%s/soak_worker", obin);
        u1->env = other_env(obin, odir);
        snprintf(u1->statedir, sizeof u1->statedir, "%s/state", odir);
    }
    plan_jobs(s);
    for (unsigned k = 0; k < s->njobs; k++)
        if (soak_start_job(s, &s->jobs[k]) < 0) {
            s->end_ns = soak_now();
            for (unsigned i = 0; i < k; i++)
                if (s->jobs[i].run_pid > 0)
                    kill(s->jobs[i].run_pid, SIGTERM);
            return 2;
        }
    s->t0 = soak_now();
    s->end_ns = s->t0 + (uint64_t)s->seconds * SOAK_SEC;
    /* Every process starts at a random moment of the first 1.5 s. */
    for (unsigned k = 0; k < s->njobs; k++)
        for (int sl = 0; sl < SOAK_SLOTS; sl++)
            s->jobs[k].slot_restart_at[sl] = s->t0 + soak_rnd(s, 1500) * 1000000ULL;
    printf("soak: %u jobs started; %u s of chaos, seed %llu (log: %s)\n", s->njobs, s->seconds,
           (unsigned long long)s->seed, logpath);
    fflush(stdout);

    uint64_t t = s->t0, next_sample = s->t0 + SOAK_SEC, late_max = 0;
    while (t < s->end_ns) {
        t += SOAK_TICK_NS;
        sleep_until(t);
        uint64_t now = soak_now();
        if (now - t > late_max)
            late_max = now - t;
        soak_check_tick(s, now);
        soak_chaos_tick(s, now);
        if (now >= next_sample) {
            soak_share_sample(s, now);
            next_sample += SOAK_SEC;
        }
    }
    double secs = (double)(soak_now() - s->t0) / 1e9;
    end_everything(s);
    print_table(s, secs, late_max);
    for (int k = 0; k < V_NKINDS; k++)
        if (s->st.v[k])
            return 1;
    return 0;
}
