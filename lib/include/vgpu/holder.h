/* A second holder of an entry in the state directory (promises/, jobcount/): the job's command.
 * An entry there lives as long as the `vgpu run` named by its file name (PID.START). When that
 * vgpu run is killed (kill -9) its command runs on, limited (tests/cli/run_killed.sh), and must
 * keep the memory promised to it and its place in the job count: else the next placement puts
 * another job over it. So, once the command is started, vgpu run appends a line
 *     +holder PID START
 * naming it, and a reader prunes the entry only when both are gone. The line is no UUID, so
 * older readers ignore it. */
#ifndef VGPU_HOLDER_H
#define VGPU_HOLDER_H

#include <stdbool.h>
#include <sys/types.h>

/* Appends the holder line for process pid to entry `name` of directory dfd. 0, or -1 (errno). */
int vgpu_holder_add(int dfd, const char *name, pid_t pid);
/* Is the holder an entry names (at most 8 KiB of it read, as untrusted text) still running? */
bool vgpu_holder_alive(int dfd, const char *name);

#endif
