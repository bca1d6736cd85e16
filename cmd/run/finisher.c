/* The finisher: vgpu run's last look at a job, taken off its caller's path (issue 34 item 1).
 *
 * A job's record needs NVML's sampling window the job ended in, which completes up to one
 * period (at most 1 s) after the command's end (lib/core/acct/nvml_sample.c). vgpu run used to
 * wait for it before it returned: on an H200 a job that made a context and ran kernels returned
 * 170 ms after its command, and `vgpu run` measured +25 % over the bare command at job start
 * (tests/gpu/regress.sh). Scripts, CI steps and short jobs pay that on every job.
 *
 * So vgpu run, once the command ended and the job is EXITED, forks a finisher that waits for that
 * window and writes the record, and itself returns the command's status at once. The finisher
 * is the job's adopter (vgpu_region_adopt_claim, the word a killed vgpu run's adopter takes), so
 * no listing recovers the job meanwhile, and one that finds it dead (killed in turn) recovers it
 * as it would have for vgpu run. The claim is made before vgpu run returns: a reader run right
 * after sees a live adopter. `vgpu acct` waits (bounded) for records that an adopter is about to
 * write (vgpu_jobs_await_records), so a script's `vgpu run ...; vgpu acct` sees its job.
 * The finisher keeps vgpu run's connection to the arbiter (the one that announced the job's start,
 * from which the daemon takes its record) and its NVML handle and samples, both inherited. It
 * has no terminal: its stdio is /dev/null, or a caller reading vgpu run's output through a pipe
 * would wait for it; a record it cannot write stays in the region for the next listing, as
 * vgpu run's own would. ps shows it as "vgpu-finisher", for at most a second after the job. */
#include "run/finisher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vgpu/acct.h"
#include "vgpu/log.h"

/* Below this, a wait costs less than the fork and the claim: vgpu run records at once, unless the
 * last look reads NVML. */
#define FINISH_LATER_US 2000ULL

static void quiet_stdio(void)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return;
    for (int fd = 0; fd <= 2; fd++)
        if (fd != null)
            (void)dup2(null, fd);
    if (null > 2)
        close(null);
}

bool vgpu_run_finish_later(struct vgpu_region *r)
{
    if (getenv("VGPU_RUN_FINISH_NOW"))      /* the old order, for measuring the difference */
        return false;
    /* NVML's last reads are the finisher's too, not only the wait: on an H200 they held vgpu run
     * 8-15 ms after a 0.3 s job's command (one took 13 ms while the driver tore the context
     * down), for a job that ran no kernel and so waits for no window. A job whose last look
     * needs no NVML (one that never used a GPU) records here, where a failure is said. */
    if (!vgpu_acct_nvml_last_look_costs(r) && vgpu_acct_nvml_end(r) < FINISH_LATER_US)
        return false;
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(ready[0]);
        close(ready[1]);
        return false;
    }
    if (pid == 0) {
        close(ready[0]);
        setsid();                           /* not the caller's job control: ^C after return */
        prctl(PR_SET_NAME, "vgpu-finisher");   /* what ps shows for it (and tests wait on) */
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        char claimed = vgpu_region_adopt_claim(r) ? 1 : 0;
        quiet_stdio();
        (void)!write(ready[1], &claimed, 1);
        close(ready[1]);
        if (claimed) {
            struct vgpu_err e;
            if (vgpu_acct_record_job(r, &e) < 0)
                vgpu_debug("job %s: the finisher could not write its record: %s", r->info->id, e.msg);
            atomic_store(&r->hdr_rw->adopter, 0);   /* done: a later reader finds it recorded */
        }
        _exit(0);
    }
    close(ready[1]);
    char claimed = 0;
    ssize_t n;
    do
        n = read(ready[0], &claimed, 1);
    while (n < 0 && errno == EINTR);
    close(ready[0]);
    /* No claim (another adopter lives, or the finisher died first): record here, as before. */
    return n == 1 && claimed;
}
