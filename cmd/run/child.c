/* vgpu run: the command as vgpu run's child (see child.h). Moved out of cmd/run.c when it passed
 * 800 lines. */
#include "run/child.h"
#include "vgpu/userjobs.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run/asuser.h"
#include "run/kept_list.h"
#include "vgpu/acct.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/jobcount.h"
#include "vgpu/lend.h"
#include "vgpu/overlimit.h"
#include "vgpu/placement.h"
#include "vgpu/proc.h"

static volatile sig_atomic_t child_pid;

/* Signals sent to vgpu run with kill(2) go on to the command. Signals from the terminal
 * (si_code SI_KERNEL) already reached the whole foreground process group, the command
 * included: forwarding those would deliver them twice. */
static void forward(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && si && si->si_code <= 0)
        kill((pid_t)child_pid, sig);
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void install_forwarding(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
}

static void restore_signals(void)
{
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        signal(forwarded[i], SIG_DFL);
}

/* Dies by `sig` as the command did, without a second core dump. */
void vgpu_run_die_by_signal(int sig)
{
    struct rlimit nocore = { 0, 0 };
    setrlimit(RLIMIT_CORE, &nocore);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    /* A signal whose default is to continue or be ignored (SIGCHLD, SIGCONT...): 128+N. */
    exit(128 + sig);
}

int vgpu_run_set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) < 0)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "cannot set %s: %s", name, strerror(errno));
    return 0;
}

int vgpu_run_prepare_environment(const char *region_path, const char *library, const struct vgpu_job_spec *spec)
{
    char visible[VGPU_REGION_MAX_DEVICES * (VGPU_UUID_LEN + 1)] = "";
    size_t used = 0;
    for (unsigned d = 0; d < spec->device_count; d++)
        used += (size_t)snprintf(visible + used, sizeof visible - used, "%s%s", d ? "," : "", spec->dev[d].uuid);
    const char *old = getenv("LD_PRELOAD");
    size_t plen = strlen(library) + (old ? strlen(old) + 1 : 0) + 1;
    char *preload = malloc(plen);
    if (!preload)
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "out of memory");
    /* Prepended: our hooks must see the driver calls before any other preloaded library. */
    snprintf(preload, plen, "%s%s%s", library, old && *old ? " " : "", old && *old ? old : "");
    int rc = vgpu_run_set_env("CUDA_VISIBLE_DEVICES", visible) || vgpu_run_set_env("VGPU_REGION", region_path) ||
             vgpu_run_set_env("LD_PRELOAD", preload);
    free(preload);
    return rc ? VGPU_EXIT_RUN_FAILED : 0;
}

/* Waits for the command, and meanwhile walks the job's slots once per reap period, reaping dead
 * processes. The job's processes also reap, at their allocation calls, at most once a period
 * between them all; but a job whose processes are busy elsewhere or starved of CPU, or whose walker
 * that period sat in a container that cannot see the dead process, kept a dead process's memory
 * counted (a soak on a loaded machine: over a second). This process sleeps between walks, so the
 * scheduler wakes it promptly, and it lives in the namespace the job was created in: it sees every
 * process of the job, records the host pid of container processes while they live, and so proves
 * such a process dead once it ends (vgpu/proc.h). Its own walk, not the shared period's: a
 * walk is a few microseconds per live process (a container process not yet found costs one walk
 * of /proc, until it is). Each walk also samples the job's memory for its accounting record
 * (vgpu_acct_sample). Without pidfds (Linux before 5.3, some seccomp
 * filters) it just waits. */
static int wait_reaping(struct vgpu_region *r, pid_t pid, int *status)
{
    int fd = vgpu_proc_pidfd(pid);
    /* A --user job's memory, as NVML sees it, against root's limit (vgpu/overlimit.h); NULL
     * for other jobs. Sampled from this walk, at most every VGPU_OVERLIMIT_PERIOD_NS. */
    struct vgpu_overlimit *watch = fd >= 0 ? vgpu_overlimit_start(r, NULL) : NULL;
    const int walk_ms = (int)(VGPU_REGION_REAP_NS / 1000000ULL);
    int to_walk = walk_ms;
    for (;;) {
        if (fd >= 0) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            /* NVML keeps only each process's newest utilisation window: an uncapped GPU's samples
             * are read every half window, between walks (lib/core/acct/nvml_sample.c). */
            int nv = vgpu_acct_nvml_every_ms(), wait = nv > 0 && nv < to_walk ? nv : to_walk;
            int n = poll(&p, 1, wait);
            if (n == 0)
                vgpu_run_kept_list_check(r);   /* once, before the accounting's first NVML look */
            if (n == 0 && wait < to_walk) {
                to_walk -= wait;
                vgpu_acct_sample_nvml(r);
                continue;
            }
            if (n == 0) {
                to_walk = walk_ms;
                (void)vgpu_region_reap(r);
                vgpu_acct_sample(r);    /* the memory-time integral (vgpu/acct.h) */
                vgpu_place_keep();      /* a restarted arbiter learns the job's promise and count */
                vgpu_lend_share(r);     /* what other users' jobs add to giving way (vgpu/lend.h) */
                vgpu_jobcount_keep();
                (void)vgpu_overlimit_tick(watch, r);
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;               /* a forwarded signal */
            if (n < 0) {                /* poll itself failed: wait the plain way */
                close(fd);
                fd = -1;
            }
        }
        if (waitpid(pid, status, 0) == pid)
            break;
        if (errno != EINTR) {
            int err = errno;
            vgpu_overlimit_stop(watch);
            if (fd >= 0)
                close(fd);
            errno = err;
            return -1;
        }
    }
    if (fd >= 0)
        close(fd);
    vgpu_overlimit_stop(watch);
    return 0;
}

int vgpu_run_child(struct vgpu_region *r, char **argv, const char *place_dir, const char *prune_dir)
{
    struct vgpu_err e;
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&block, forwarded[i]);
    /* Block until child_pid is known, so a signal in between is forwarded, not lost. */
    sigprocmask(SIG_BLOCK, &block, &old);
    install_forwarding();
    /* The job's first look, before its command starts: a process of the job in a container
     * waits for this walk to find its host pid only while it sees the walk running (libvgpu.so,
     * vgpu_nvml_await_self), so it must not start before the walk is seen. */
    vgpu_acct_sample(r);
    /* And the arbiter's first answer for lending across users, so that an allocation the command
     * makes at once already sees other users' borrowers to wait for (one round trip, with a
     * daemon and a memory limit only). */
    vgpu_lend_share(r);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return vgpu_fail(VGPU_EXIT_RUN_FAILED, "cannot start %s: fork: %s", argv[0], strerror(errno));
    }
    if (pid == 0) {
        restore_signals();
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (vgpu_as_user.on)
            vgpu_run_become_user();
        execvp(argv[0], argv);
        int err = errno;
        bool missing = err == ENOENT || err == ENOTDIR;
        /* A name with a '/' is a path: PATH was not searched, so do not say it was. */
        bool path = strchr(argv[0], '/') != NULL;
        vgpu_fail(0, "cannot run '%s': %s%s", argv[0], strerror(err),
                  missing ? (path ? " (check the path)" : " (not found in PATH)")
                          : err == EACCES ? " (not executable?)" : "");
        _exit(missing ? VGPU_EXIT_RUN_NOTFOUND : VGPU_EXIT_RUN_NOEXEC);
    }
    child_pid = pid;
    /* The job's promise and its place in the job count are held by the command too, so a kill -9
     * of this process does not free them while the command runs on (vgpu/holder.h). */
    if (place_dir && vgpu_place_hold(place_dir, pid) < 0)
        vgpu_warn("the memory promised to job %s lasts only as long as this vgpu run: %s", r->info->id,
                  strerror(errno));
    if (vgpu_jobcount_hold(pid) < 0)
        vgpu_warn("job %s's place in the job count lasts only as long as this vgpu run: %s", r->info->id,
                  strerror(errno));
    /* Before RUNNING: the job lives as long as its command does, even if we are killed
     * (vgpu_region_job_alive), and a reader that sees RUNNING sees the command. */
    vgpu_region_set_command(r, pid);
    vgpu_region_set_state(r, VGPU_JOB_RUNNING, 0, 0, &e);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (prune_dir) {
        struct vgpu_job_ref *refs = NULL;
        size_t n = 0;
        if (vgpu_jobs_list_all(prune_dir, &refs, &n, NULL, &e) < 0)
            vgpu_debug("%s", e.msg);
        free(refs);
    }
    int status;
    if (wait_reaping(r, pid, &status) < 0) {
        vgpu_error("lost the command (pid %d): waitpid: %s", (int)pid, strerror(errno));
        return VGPU_EXIT_RUN_FAILED;
    }
    child_pid = 0;
    vgpu_acct_sample_end(r);
    restore_signals();
    /* A region damaged meanwhile (truncated) is fenced off by set_state: the command's status
     * still becomes ours, and the lost record is said. */
    int st = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
    if (vgpu_region_set_state(r, VGPU_JOB_EXITED, st < 0 ? -1 : st, st < 0 ? -st : 0, &e) < 0)
        vgpu_warn("job %s: %s; vgpu wait cannot get the command's status (vgpu run exits with it)", r->info->id,
                  e.msg);
    return st;
}

