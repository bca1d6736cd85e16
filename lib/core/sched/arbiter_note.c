/* Saying once that no arbiter runs (vgpu/arbiter.h): without `vgpu daemon`, each user's jobs are
 * scheduled on that user's own schedule, and jobs of different users ignore each other. vgpu run,
 * vgpu list and vgpu top say so the first time a user runs one of them with no daemon answering
 * (a marker in the user's state directory, which lives until reboot under /run), not at every
 * command: it is a fact about the machine, not about one job. vgpu only. */
#include "vgpu/arbiter.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "vgpu/statedir.h"

#define SAID_MARKER ".said-no-arbiter"

void vgpu_arb_note_alone(const char *cmd)
{
    if (vgpu_arb_available())
        return;
    struct vgpu_statedir sd;
    struct vgpu_err e = { 0 };
    if (vgpu_statedir_open(&sd, true, &e) != 0)
        return;
    int fd = vgpu_dir_create(sd.fd, SAID_MARKER, O_WRONLY, 0600);
    vgpu_statedir_close(&sd);
    if (fd < 0)
        return;   /* said before (or the directory is read-only: then stay quiet rather than repeat) */
    close(fd);
    fprintf(stderr, "vgpu %s: note: no arbiter (vgpu daemon) runs on this machine, so GPU time and GPU memory "
                    "are shared out among your own jobs only: jobs of other users are not scheduled together with "
                    "yours, and placement, --wait and --max-jobs count your jobs alone (root starts it: systemctl "
                    "start vgpu-daemon, or vgpu daemon). Said once.\n", cmd);
}
