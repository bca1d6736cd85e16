/* Where a reader's records came from (vgpu/acct.h, issue 36 N3): the arbiter's database, which
 * holds every job, or the caller's own store alone. The own store alone is the whole history
 * on a machine that never ran the arbiter, and a part of it on one whose arbiter is down: its
 * directory (<machine dir>/arbiter, kept when the daemon stops) says one ran here. */
#include "vgpu/acct.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "vgpu/arbiter.h"

static bool arbiter_ran_here(void)
{
    char sock[4200];
    if (vgpu_arb_sock_path(sock, sizeof sock) < 0)
        return false;
    char *slash = strrchr(sock, '/');
    if (slash)
        *slash = 0;
    struct stat st;
    return stat(sock, &st) == 0 && S_ISDIR(st.st_mode);
}

void vgpu_acct_origin(struct vgpu_acct_origin *o)
{
    memset(o, 0, sizeof *o);
    if (vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) >= 0) {
        o->source = VGPU_ACCT_FROM_ARBITER;
        return;
    }
    struct statvfs fs;
    if (vgpu_acct_own_store_path(o->own_path, sizeof o->own_path) == 0 && access(o->own_path, F_OK) == 0) {
        o->source = VGPU_ACCT_FROM_OWN;
        o->own_read_only = statvfs(o->own_path, &fs) == 0 && (fs.f_flag & ST_RDONLY);
    }
    o->partial = arbiter_ran_here();
}

const char *vgpu_acct_source_name(enum vgpu_acct_source s)
{
    return s == VGPU_ACCT_FROM_ARBITER ? "arbiter" : s == VGPU_ACCT_FROM_OWN ? "own" : "none";
}
