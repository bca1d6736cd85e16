/* The adopter of a job whose `vgpu run` died (issue 35 item 6, issue 36 N7).
 *
 * vgpu run, while it waits for the command, reaps the job's dead processes, integrates its memory
 * for the record and notes the time it last saw the job (acct_seen_ns); when the command ends it
 * writes the record. Killed with SIGKILL, it does none of that, while the job's processes run on
 * with the library and the region (their limits hold: nothing of that needs vgpu run). So the
 * first reader that owns the job and finds it so (vgpu ps, top, metrics, acct: vgpu_jobs_list)
 * starts an adopter: a process of its own, detached from the reader (a one-shot `vgpu ps` must
 * not wait for the job), that does vgpu run's watch until the job's last process ends, then writes
 * the record, which therefore ends when the job did (within a walk, 250 ms), not when vgpu run
 * died. One adopter per job: a compare-and-swap of the region's adopter word; an adopter killed in
 * turn is replaced by the next reader. The command's exit status is lost with vgpu run (the
 * record says so: exit -1, end approximate, recovered). */
#include "run/adopt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/acct.h"
#include "vgpu/log.h"
#include "vgpu/region.h"

static bool still_mine(const struct vgpu_region *r, uint64_t mine)
{
    return atomic_load(&r->hdr->adopter) == mine;
}

/* "<dir>/<id>.log" beside "<dir>/<id>.region" (vgpu run --detach's output), as listings remove it. */
static void remove_log(const char *region_path)
{
    char log[4200];
    size_t n = strlen(region_path);
    if (n < 7 || n - 7 + sizeof ".log" > sizeof log)
        return;
    memcpy(log, region_path, n - 7);
    memcpy(log + n - 7, ".log", sizeof ".log");
    unlink(log);
}

static _Noreturn void watch(const char *path)
{
    struct vgpu_region r;
    struct vgpu_err e;
    if (vgpu_region_open(&r, path, VGPU_REGION_ADMIN, &e) < 0)
        _exit(0);               /* removed meanwhile, or damaged: nothing to adopt */
    if (!vgpu_region_adopt_claim(&r)) {
        vgpu_region_close(&r);
        _exit(0);               /* another reader's adopter has it */
    }
    uint64_t mine = atomic_load(&r.hdr->adopter);
    vgpu_debug("job %s: its vgpu run is gone and its processes live; adopted by pid %d", r.info->id, (int)getpid());
    const struct timespec period = { 0, (long)VGPU_REGION_REAP_NS };
    for (;;) {
        /* A damaged region is fenced off by the check (the job's processes keep their limits):
         * its figures can no longer be trusted for a record, so the watch ends there. */
        if (vgpu_region_check(&r) != 0 || !still_mine(&r, mine) ||
            atomic_load(&r.hdr->state) == VGPU_JOB_EXITED) {
            vgpu_region_close(&r);
            _exit(0);
        }
        (void)vgpu_region_reap(&r);
        if (!vgpu_region_job_alive(&r))
            break;
        vgpu_acct_sample(&r);   /* memory-time, and acct_seen_ns: the job was alive now */
        nanosleep(&period, NULL);
    }
    /* The last process ended since the last sample: the record ends there. */
    if (still_mine(&r, mine) && !(atomic_load(&r.hdr->acct_flags) & VGPU_ACCT_RECORDED) &&
        vgpu_acct_recover(&r) == 0) {
        atomic_fetch_or(&r.hdr_rw->acct_flags, VGPU_ACCT_RECORDED);
        if (vgpu_region_remove(&r, &e) == 0)
            remove_log(path);
    }
    /* Else the record could not be written: the region stays, and the next listing, finding
     * the job ended, tries again (vgpu_acct_recover from vgpu_jobs_list). */
    vgpu_region_close(&r);
    _exit(0);
}

void vgpu_run_adopt(const char *region_path)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", region_path);
    fflush(NULL);
    pid_t mid = fork();
    if (mid < 0) {
        vgpu_debug("cannot adopt the job of %s: fork: %s", path, strerror(errno));
        return;
    }
    if (mid > 0) {
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
            ;
        return;
    }
    /* The middle process: a session of its own, then the adopter as its child, so the adopter
     * belongs to no reader (init or a subreaper waits for it) and no terminal's ^C reaches it. */
    setsid();
    pid_t pid = fork();
    if (pid != 0)
        _exit(0);
    /* Nothing of the reader's: its descriptors (a listening socket of metrics, top's terminal),
     * its signal handlers and mask. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        /* stderr stays with VGPU_LOG=debug (tests and diagnosis), else /dev/null. */
        if (vgpu_log_level() < VGPU_LOG_DEBUG)
            dup2(null, 2);
    }
    syscall(SYS_close_range, 3U, ~0U, 0U);
    if (chdir("/") < 0) {
        /* harmless: the adopter opens its files by absolute path */
    }
    watch(path);
}
