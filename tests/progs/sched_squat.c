/* sched_squat: another user takes the schedule keys of a user first (tests/cli/arbiter.sh).
 *
 *   sched_squat UUID UID N       make segments (mode 0666, schedule-sized) under the first N keys
 *                                that user UID's own schedule of GPU UUID would use; prints
 *                                "squatted=K" (how many it made)
 *   sched_squat -r UUID UID N    remove them again (their maker or root); prints "removed=K"
 * The keys are those of the machine-wide directory in force (VGPU_MACHINE_DIR). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "vgpu/machinedir.h"
#include "vgpu/sched.h"

int main(int argc, char **argv)
{
    bool rm = argc == 5 && !strcmp(argv[1], "-r");
    if (argc != 4 + rm) {
        fprintf(stderr, "usage: sched_squat [-r] UUID UID N\n");
        return 2;
    }
    const char *uuid = argv[1 + rm];
    unsigned uid = (unsigned)strtoul(argv[2 + rm], NULL, 10), n = (unsigned)strtoul(argv[3 + rm], NULL, 10), done = 0;
    for (unsigned i = 0; i < n; i++) {
        int key = vgpu_sched_key(vgpu_machinedir_path(), uuid, uid, i);
        if (rm) {
            int id = shmget(key, 0, 0);
            struct shmid_ds ds;
            /* only a squatter's: never the user's own schedule */
            if (id >= 0 && shmctl(id, IPC_STAT, &ds) == 0 && ds.shm_perm.cuid != uid && shmctl(id, IPC_RMID, NULL) == 0)
                done++;
        } else {
            done += shmget(key, sizeof(struct vgpu_sched_file), IPC_CREAT | IPC_EXCL | 0666) >= 0;
        }
    }
    printf("%s=%u\n", rm ? "removed" : "squatted", done);
    return 0;
}
