/* vgpu run --user USER (root only): the command runs as USER under limits USER cannot raise
 * (the split region layout, vgpu/userjobs.h). */
#ifndef VGPU_CMD_RUN_ASUSER_H
#define VGPU_CMD_RUN_ASUSER_H

#include <stdbool.h>
#include <sys/types.h>

struct vgpu_as_user {
    bool on;
    uid_t uid;
    gid_t gid;
    char name[256], home[1024];
    const char *library;        /* the libvgpu.so the command preloads: USER must read it */
    bool mps;                   /* --mps: USER must reach CUDA_MPS_PIPE_DIRECTORY's control socket */
};
extern struct vgpu_as_user vgpu_as_user;

/* USER (a name, or a uid in the password database) into vgpu_as_user. Root only; says why
 * and returns 125 otherwise. */
int vgpu_run_resolve_user(const char *user);
/* In the forked child, before exec: USER's groups, gid and uid for good, and USER's HOME, USER,
 * LOGNAME. Exits 125 saying why when that fails, or USER cannot read the library or the region,
 * or (--mps) cannot reach the MPS daemon's control socket. */
void vgpu_run_become_user(void);

#endif
