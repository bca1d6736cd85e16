/* Starting the soak's processes: jobs (`vgpu run` with an anchor command), workers with a job's
 * environment (optionally in a new PID namespace), and the tools the chaos loop runs
 * (`vgpu limit`, `vgpu ps`), as either user. Test code, not product. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"

/* envp = base with the NAME=VALUE entries of extra replacing or adding to it. */
static char **merge_env(char **base, char **extra)
{
    size_t nb = 0, ne = 0;
    while (base && base[nb])
        nb++;
    while (extra && extra[ne])
        ne++;
    char **env = calloc(nb + ne + 1, sizeof *env);
    if (!env)
        return base;
    size_t n = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t klen = strcspn(base[i], "=");
        bool replaced = false;
        for (size_t k = 0; k < ne && !replaced; k++)
            replaced = !strncmp(extra[k], base[i], klen) && extra[k][klen] == '=';
        if (!replaced)
            env[n++] = base[i];
    }
    for (size_t k = 0; k < ne; k++)
        env[n++] = extra[k];
    env[n] = NULL;
    return env;
}

pid_t soak_spawn(struct soak *s, const struct user *u, char **argv, char **extra_env, bool pidns, bool quiet)
{
    char **env = merge_env(u->env, extra_env);
    /* A PID namespace is made by root (as a container runtime does), then the other user's
     * credentials are taken inside it by setpriv. */
    char uid[32], gid[32];
    snprintf(uid, sizeof uid, "--reuid=%u", (unsigned)u->uid);
    snprintf(gid, sizeof gid, "--regid=%u", (unsigned)u->gid);
    char *full[64];
    size_t n = 0;
    if (pidns) {
        full[n++] = "/usr/bin/unshare";
        full[n++] = "--pid";
        full[n++] = "--fork";
        full[n++] = "--mount-proc";
        full[n++] = "--kill-child";
        full[n++] = "--";
        if (u->other) {
            full[n++] = "setpriv";
            full[n++] = uid;
            full[n++] = gid;
            full[n++] = "--clear-groups";
            full[n++] = "--";
        }
    }
    for (size_t i = 0; argv[i] && n < 63; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        if (env != u->env)
            free(env);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        int out = quiet ? open("/dev/null", O_WRONLY) : -1;
        dup2(out >= 0 ? out : s->logfd, 1);
        dup2(s->logfd, 2);
        if (u->other && !pidns) {
            if (setgroups(0, NULL) || setresgid(u->gid, u->gid, u->gid) || setresuid(u->uid, u->uid, u->uid)) {
                fprintf(stderr, "soak: cannot become uid %u: %s\n", (unsigned)u->uid, strerror(errno));
                _exit(126);
            }
        }
        /* Nothing outlives the driver: a job's `vgpu run` passes SIGTERM on to its command. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execvpe(full[0], full, env);
        fprintf(stderr, "soak: cannot run %s: %s\n", full[0], strerror(errno));
        _exit(127);
    }
    if (env != u->env)
        free(env);
    return pid;
}

/* The pid of the worker that `unshare --fork` started (its only child), 0 while there is none. */
pid_t soak_ns_child(pid_t parent)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int child = 0;
    if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%d", &child) != 1)
        child = 0;
    fclose(f);
    return child;
}

int soak_start_job(struct soak *s, struct job *j)
{
    const struct user *u = &s->users[j->user];
    char mem[32], core[32], bidx[16];
    snprintf(mem, sizeof mem, "%lluM", (unsigned long long)(j->mem / SOAK_MIB));
    snprintf(core, sizeof core, "%u", j->core);
    snprintf(bidx, sizeof bidx, "%d", j->board_index);
    char *argv[20];
    size_t n = 0;
    argv[n++] = (char *)u->vgpu;
    argv[n++] = "run";
    argv[n++] = "--name";
    argv[n++] = j->name;
    if (j->mem) {
        argv[n++] = "--mem";
        argv[n++] = mem;
    }
    if (j->core) {
        argv[n++] = "--core";
        argv[n++] = core;
    }
    argv[n++] = "--";
    argv[n++] = (char *)u->worker;
    argv[n++] = (char *)s->board_path;
    argv[n++] = "anchor";
    argv[n++] = bidx;
    argv[n] = NULL;
    j->run_pid = soak_spawn(s, u, argv, NULL, false, false);
    if (j->run_pid < 0)
        return -1;
    struct soak_job_env *e = &s->board->job[j->board_index];
    uint64_t deadline = soak_now() + 20 * SOAK_SEC;
    while (!atomic_load_explicit(&e->ready, memory_order_acquire)) {
        int st;
        if (waitpid(j->run_pid, &st, WNOHANG) == j->run_pid) {
            fprintf(stderr, "soak: job %s ended before its command started (status 0x%x); see %s/soak.log\n",
                    j->name, st, s->logdir);
            j->run_done = true;
            return -1;
        }
        if (soak_now() > deadline) {
            fprintf(stderr, "soak: job %s did not start within 20 s; see %s/soak.log\n", j->name, s->logdir);
            return -1;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    int fd = open(e->region, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "soak: cannot open job %s's region %s: %s\n", j->name, e->region, strerror(errno));
        return -1;
    }
    void *m = mmap(NULL, VGPU_REGION_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "soak: cannot map %s: %s\n", e->region, strerror(errno));
        return -1;
    }
    j->hdr = m;
    j->use = (const void *)((const char *)m + VGPU_REGION_LIMITS_SIZE);
    snprintf(j->uuid, sizeof j->uuid, "%s", j->hdr->dev[0].uuid);
    j->last_limit = atomic_load(&j->hdr->dev[0].mem_limit);
    return 0;
}

/* A free process record: a new one, or (long soaks) one whose process is gone and settled. */
static int new_record(struct soak *s)
{
    if (s->nprocs < SOAK_MAX_PROCS)
        return (int)s->nprocs++;
    for (unsigned i = 0; i < s->nprocs; i++) {
        struct wproc *w = &s->procs[i];
        if (w->used && !w->alive && w->reclaimed) {
            memset(w, 0, sizeof *w);
            memset(&s->board->proc[i], 0, sizeof s->board->proc[i]);
            return (int)i;
        }
    }
    return -1;
}

int soak_start_worker(struct soak *s, struct job *j, int slot, bool pidns)
{
    int idx = new_record(s);
    if (idx < 0)
        return -1;
    const struct user *u = &s->users[j->user];
    const struct soak_job_env *e = &s->board->job[j->board_index];
    struct wproc *w = &s->procs[idx];
    memset(w, 0, sizeof *w);
    w->job = (int)(j - s->jobs);
    w->slot = slot;
    w->role = j->roles[slot];
    w->pidns = pidns;
    char sidx[16], seed[32], arg[32];
    snprintf(sidx, sizeof sidx, "%d", idx);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(s->seed * 1000003ULL + (uint64_t)idx));
    snprintf(arg, sizeof arg, "%u", w->role == ROLE_LAUNCH ? 2000 : 96);
    char *argv[] = { (char *)u->worker, (char *)s->board_path, w->role == ROLE_LAUNCH ? "launch" : "alloc",
                     sidx, seed, arg, NULL };
    char region[1100], visible[300], preload[2100];
    snprintf(region, sizeof region, "VGPU_REGION=%s", e->region);
    snprintf(visible, sizeof visible, "CUDA_VISIBLE_DEVICES=%s", e->visible);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", e->preload);
    char *extra[] = { region, visible, preload, "VGPU_LOG=error", NULL };
    w->spawned_ns = soak_now();
    w->pid = soak_spawn(s, u, argv, extra, pidns, false);
    if (w->pid < 0)
        return -1;
    w->target = pidns ? 0 : w->pid;
    w->used = w->alive = true;
    j->slot_proc[slot] = idx;
    s->st.starts++;
    if (pidns)
        s->st.starts_pidns++;
    return idx;
}

/* ---- tools: vgpu limit, vgpu ps (asynchronous; their status is checked when they end) ---------- */

#define MAX_TOOLS 64
static struct {
    pid_t pid;
    char what[160];
} tools[MAX_TOOLS];

void soak_run_tool(struct soak *s, const struct user *u, char **argv)
{
    int k = 0;
    while (k < MAX_TOOLS && tools[k].pid)
        k++;
    if (k == MAX_TOOLS)
        return;                         /* too many still running: skip this one */
    pid_t pid = soak_spawn(s, u, argv, NULL, false, true);
    if (pid < 0)
        return;
    tools[k].pid = pid;
    size_t used = 0;
    for (size_t i = 1; argv[i] && used < sizeof tools[k].what - 1; i++)
        used += (size_t)snprintf(tools[k].what + used, sizeof tools[k].what - used, "%s%s", i > 1 ? " " : "",
                                 argv[i]);
}

bool soak_tool_pid(pid_t pid)
{
    for (int k = 0; k < MAX_TOOLS; k++)
        if (tools[k].pid == pid)
            return true;
    return false;
}

void soak_tool_exited(struct soak *s, pid_t pid, int status)
{
    for (int k = 0; k < MAX_TOOLS; k++) {
        if (tools[k].pid != pid)
            continue;
        tools[k].pid = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            soak_violation(s, V_TOOL_FAILED, "`vgpu %s` ended with status 0x%x (see soak.log)", tools[k].what,
                           status);
        return;
    }
}
