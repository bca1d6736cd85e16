/* Whether a job lives when its `vgpu run` is gone (issue 35 item 6: `kill -9` of vgpu run made the
 * next listing end a job whose command ran on, and that command then ran with no limits and no
 * record).
 *
 * Liveness is the job's processes, not vgpu run. Which processes are the job's:
 *  - the slots (every process that touched the GPU, with pid, namespace and start time);
 *  - the command itself, vgpu run's child: its pid and start time are in page 0 (cmd_pid), so a
 *    command that has not reached the GPU yet (loading a model, waiting for data) counts;
 *  - any other process whose environment names this job's region: a descendant the command left
 *    behind (a daemonised helper, `cmd &` then exit) that has not touched the GPU yet. It carries
 *    the library and the region, so it is one of the job's processes and will be limited by it.
 * A process group or session id was considered and not used: vgpu run keeps the command in the
 * caller's process group (so ^C reaches it), a pgid outlives neither its leader's exit nor a
 * setsid() in the job, and a reused number proves nothing. The environment is what the library
 * itself goes by.
 *
 * libc only (linked into libvgpu.so, which never calls these). */
#include "vgpu/region.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void vgpu_region_set_command(struct vgpu_region *r, pid_t pid)
{
    if (!r->hdr_rw || r->damaged || vgpu_region_check(r) != 0)
        return;
    /* The start time first: a reader that sees the pid sees the start time that goes with it. */
    atomic_store(&r->hdr_rw->cmd_start, vgpu_proc_start_time(pid));
    atomic_store(&r->hdr_rw->cmd_pid, (int32_t)pid);
}

/* The command's liveness: in the creator's namespace, as vgpu run forked it there. */
static enum vgpu_liveness command_liveness(const struct vgpu_region *r)
{
    pid_t pid = atomic_load(&r->hdr->cmd_pid);
    uint64_t start = atomic_load(&r->hdr->cmd_start);
    if (pid <= 0)
        return VGPU_PROC_DEAD;          /* not recorded (an older vgpu run, or never started) */
    struct vgpu_proc_id id = { .pid = pid, .pidns = r->hdr->creator_pidns, .start = start };
    return vgpu_proc_liveness(&id, NULL);
}

/* Whether /proc/PID/environ has VGPU_REGION=<anything>/<id>.region (the path is the one the
 * process's mount namespace sees, so only its last part is compared). An environment the caller
 * may not read (a non-dumpable process, pid 1 of a sandbox, EACCES even for root) is not counted:
 * otherwise one such process, the job's or not, would keep every job alive for ever. The job's own
 * processes are the caller's user's and dumpable unless they chose not to be. */
static bool environ_names(int proc, const char *pid, const char *tail)
{
    char path[32];
    snprintf(path, sizeof path, "%.20s/environ", pid);    /* a pid has at most 10 digits */
    int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    /* Environments are small; a huge one is cut at 256 KiB (VGPU_REGION is set by vgpu run,
     * before the command's own additions, so it sits near the start). */
    static const size_t cap = 256 * 1024;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return false;
    }
    size_t len = 0;
    ssize_t n;
    while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = 0;
    size_t tl = strlen(tail);
    bool found = false;
    for (size_t i = 0; !found && i < len;) {
        const char *v = buf + i;
        size_t vl = strnlen(v, len - i);
        found = vl > 12 + tl && strncmp(v, "VGPU_REGION=", 12) == 0 && strcmp(v + vl - tl, tail) == 0 &&
                v[vl - tl - 1] == '/';
        i += vl + 1;
    }
    free(buf);
    return found;
}

/* Whether a process other than the caller carries the job's region. Only processes of the job's
 * user can be the job's (a --user job's command runs as that user). A /proc that cannot be read
 * proves nothing: the job is then taken as alive. */
static bool carriers(const struct vgpu_region *r)
{
    char tail[VGPU_JOB_ID_LEN + 8];
    snprintf(tail, sizeof tail, "%.*s.region", VGPU_JOB_ID_LEN - 1, r->info->id);
    int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc < 0)
        return true;
    DIR *d = fdopendir(dup(proc));
    if (!d) {
        close(proc);
        return true;
    }
    uid_t job = vgpu_region_job_uid(r);
    pid_t self = getpid();
    bool found = false;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9' || strspn(de->d_name, "0123456789") != strlen(de->d_name))
            continue;
        if (atoi(de->d_name) == self)
            continue;               /* a listing started inside the job: it ends, it is not the job */
        struct stat st;
        if (fstatat(proc, de->d_name, &st, 0) < 0 || st.st_uid != job)
            continue;
        found = environ_names(proc, de->d_name, tail);
    }
    closedir(d);
    close(proc);
    return found;
}

bool vgpu_region_job_alive(const struct vgpu_region *r)
{
    if (vgpu_region_creator_alive(r) || vgpu_region_pids(r, NULL, NULL, 0) > 0)
        return true;
    /* Judged where the job began: a reader that cannot see the creator's namespace (in a
     * container of its own) already took the creator as alive above. */
    if (command_liveness(r) != VGPU_PROC_DEAD)
        return true;
    return carriers(r);
}

bool vgpu_region_adopted(const struct vgpu_region *r)
{
    uint64_t a = atomic_load(&r->hdr->adopter);
    if (!a)
        return false;
    pid_t pid = (pid_t)(a >> 32);
    uint64_t start = vgpu_proc_start_time(pid);
    return start && (uint32_t)start == (uint32_t)a;
}

bool vgpu_region_adopt_claim(struct vgpu_region *r)
{
    if (!r->hdr_rw || r->damaged || vgpu_region_check(r) != 0)
        return false;
    pid_t self = getpid();
    uint64_t mine = (uint64_t)(uint32_t)self << 32 | (uint32_t)vgpu_proc_start_time(self);
    uint64_t seen = atomic_load(&r->hdr_rw->adopter);
    for (;;) {
        if (seen == mine)
            return true;
        if (seen && vgpu_region_adopted(r))
            return false;           /* a live adopter: it records the job, not us */
        /* Nobody, or an adopter that died (killed in turn): take over from exactly that word. */
        if (atomic_compare_exchange_strong(&r->hdr_rw->adopter, &seen, mine))
            return true;
    }
}
