/* spank_vgpu.so: a Slurm SPANK plugin that runs every task of a step as a vgpu job.
 *
 * srun, sbatch and salloc get --vgpu-mem=SIZE, --vgpu-core=PCT and --vgpu-policy=hard|soft;
 * plugstack.conf's arguments give the site's defaults and maxima (settings.h). In slurmstepd,
 * for each task before it becomes the job's user (slurm_spank_task_init_privileged, as root), the
 * plugin creates the task's job region with the limits on the GPUs Slurm gave the step, in the
 * split layout of `vgpu run --user` (vgpu/userjobs.h): limits the task's user can read but not
 * raise, usage the task accounts in. Where slurmstepd does not run as root, or the task runs as
 * root, it does the same just before the task execs (slurm_spank_task_init, as the job's user),
 * in the user's state directory (limits the user could change). Named slurm-JOB.STEP.TASK
 * (what vgpu ps, vgpu top and vgpu metrics show), and sets VGPU_REGION, LD_PRELOAD and
 * CUDA_VISIBLE_DEVICES in the task's environment, as `vgpu run` does for its command. The task's
 * own process is the region's creator: when it ends, the job is stale and the next vgpu ps
 * removes it. man/vgpu-slurm.7 has the whole setup.
 *
 * Built by `make slurm` against Debian's libslurm-dev (spank.h only; the spank_* and slurm_*
 * functions come from the Slurm program that loads the plugin), with libvgpucore.a linked in
 * and its symbols kept inside. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "settings.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/nvml.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"
#include "vgpu/userjobs.h"

#ifndef VGPU_SLURM_LIBRARY
#define VGPU_SLURM_LIBRARY "/usr/local/lib/vgpu/libvgpu.so"
#endif

/* Built with -fvisibility=hidden: only what Slurm looks up is exported. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(vgpu, 1);
int slurm_spank_init(spank_t sp, int ac, char **av);
int slurm_spank_task_init(spank_t sp, int ac, char **av);
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av);
#pragma GCC visibility pop

static struct vgslurm_site site;
static struct vgslurm_opts opts = { .policy = -1 };
static bool site_ok;
static bool task_done;      /* set up by the privileged hook already (same task process) */

enum { OPT_MEM = 1, OPT_CORE, OPT_POLICY };

static int opt_cb(int val, const char *optarg, int remote);

static struct spank_option options[] = {
    { "vgpu-mem", "SIZE", "vgpu: GPU memory limit of each task on each of its GPUs (4G, 512MiB, PCT% of the GPU, "
      "or REQUEST:LIMIT to borrow up to LIMIT past a promised REQUEST)",
      1, OPT_MEM, opt_cb },
    { "vgpu-core", "PCT", "vgpu: cap each task's share of GPU time at PCT percent (1-100)", 1, OPT_CORE, opt_cb },
    { "vgpu-policy", "hard|soft", "vgpu: hard (never more than --vgpu-core) or soft (also GPU time nobody wants)", 1,
      OPT_POLICY, opt_cb },
};

static int opt_cb(int val, const char *optarg, int remote)
{
    static const char *const names[] = { [OPT_MEM] = "vgpu-mem", [OPT_CORE] = "vgpu-core", [OPT_POLICY] = "vgpu-policy" };
    if (val < OPT_MEM || val > OPT_POLICY)
        return -1;
    struct vgpu_err e = { 0 };
    if (vgslurm_opt_parse(&opts, &site, names[val], optarg, &e) < 0) {
        slurm_error("vgpu: %s", e.msg);
        return -1;
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    struct vgpu_err e = { 0 };
    if (vgslurm_site_parse(&site, ac, av, VGPU_SLURM_LIBRARY, &e) < 0) {
        slurm_error("vgpu: %s", e.msg);
        return -1;
    }
    site_ok = true;
    /* Registered here, in every context: the only way sbatch and salloc get the options. */
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        spank_err_t rc = spank_option_register(sp, &options[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("vgpu: cannot register --%s: %s", options[i].name, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}

/* A comma list of NVML indexes: the step's GPUs as Slurm names them. SLURM_STEP_GPUS and
 * SLURM_JOB_GPUS are global indexes; CUDA_VISIBLE_DEVICES is the fallback (it is renumbered from 0
 * when cgroup's ConstrainDevices hides the other GPUs, vgpu-slurm(7)). */
static bool step_gpus(spank_t sp, char *buf, int len)
{
    static const char *const vars[] = { "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (spank_getenv(sp, vars[i], buf, len) == ESPANK_SUCCESS && buf[0] && strcmp(buf, "NoDevFiles") != 0)
            return true;
    return false;
}

static unsigned step_shards(spank_t sp)
{
    char buf[32];
    if (spank_getenv(sp, "SLURM_SHARDS_ON_NODE", buf, sizeof buf) != ESPANK_SUCCESS)
        return 0;
    char *end;
    unsigned long n = strtoul(buf, &end, 10);
    return end != buf && !*end && n < 1000000 ? (unsigned)n : 0;
}

/* The task's command line, for vgpu ps. */
static void task_cmdline(spank_t sp, char *buf, size_t len)
{
    int argc = 0;
    char **argv = NULL;
    size_t used = 0;
    buf[0] = '\0';
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS)
        return;
    for (int i = 0; i < argc && used + 1 < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? " " : "", argv[i]);
}

/* Everything of one task, then the environment. -1 fails the task: a limit that cannot be set up
 * must not become a task without limits. as_root: the split layout, owned by root, for the
 * task's uid/gid. */
static int start_task(spank_t sp, bool as_root, uid_t uid, gid_t gid)
{
    unsigned shards = step_shards(sp);
    if (!vgslurm_wants_limits(&site, &opts, shards))
        return 0;
    char gpus[1024];
    if (!step_gpus(sp, gpus, sizeof gpus)) {
        if (opts.mem[0] || opts.core) {
            slurm_error("vgpu: --vgpu-mem/--vgpu-core need GPUs: ask for them with --gres=gpu:N or --gres=shard:N");
            return -1;
        }
        return 0;                       /* a step without GPUs under site defaults: nothing to limit */
    }
    uint32_t job = 0, step = 0, task = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    spank_get_item(sp, S_TASK_GLOBAL_ID, &task);

    /* The user's state directory, as their vgpu ps finds it: VGPU_STATE_DIR from the job's
     * environment when they set one, else the default for the uid we now run as. */
    char statedir_env[4096];
    if (spank_getenv(sp, "VGPU_STATE_DIR", statedir_env, sizeof statedir_env) == ESPANK_SUCCESS &&
        statedir_env[0])
        setenv("VGPU_STATE_DIR", statedir_env, 1);
    char xdg[4096];
    if (spank_getenv(sp, "XDG_RUNTIME_DIR", xdg, sizeof xdg) == ESPANK_SUCCESS && xdg[0])
        setenv("XDG_RUNTIME_DIR", xdg, 1);

    struct vgpu_err e = { 0 };
    int rc = -1;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    struct vgpu_job_spec *spec = calloc(1, sizeof *spec);
    char *cmdline = malloc(VGPU_JOB_CMDLINE_LEN);
    struct vgpu_gpu_sel sel;
    struct vgpu_region r = { .fd = -1, .use_fd = -1 };
    char name[VGPU_JOB_NAME_LEN], statedir[4096];
    if (!nv) {
        slurm_error("vgpu: NVML is needed to set the GPU limits of job %u: %s", job, e.msg);
        goto out;
    }
    if (!list || !spec || !cmdline) {
        slurm_error("vgpu: out of memory");
        goto out;
    }
    if (vgpu_gpus_enumerate(nv, list, &e) < 0 || vgpu_gpus_select(list, gpus, &sel, &e) < 0) {
        slurm_error("vgpu: the step's GPUs (%s) cannot be used: %s", gpus, e.msg);
        goto out;
    }
    if (sel.count == 0 || sel.count > VGPU_REGION_MAX_DEVICES) {
        slurm_error("vgpu: the step has %u GPUs (%s); a vgpu job has 1 to %d", sel.count, gpus,
                    VGPU_REGION_MAX_DEVICES);
        goto out;
    }
    vgslurm_job_name(name, sizeof name, job, step, task);
    task_cmdline(sp, cmdline, VGPU_JOB_CMDLINE_LEN);
    spec->name = name;
    spec->cmdline = cmdline;
    spec->device_count = sel.count;
    for (unsigned d = 0; d < sel.count; d++) {
        const struct vgpu_gpu *g = &list->gpu[sel.pos[d]];
        char desc[160];
        snprintf(desc, sizeof desc, "GPU %u (%s)", g->index, g->uuid);
        enum vgpu_core_policy pol;
        if (vgslurm_task_limits(&site, &opts, shards, g->mem_total, desc, &spec->dev[d].mem_limit,
                              &spec->dev[d].core_limit, &pol, &e) < 0 ||
            vgslurm_task_request(&opts, g->mem_total, desc, spec->dev[d].mem_limit, &spec->dev[d].mem_request,
                                 &e) < 0) {
            slurm_error("vgpu: %s", e.msg);
            goto out;
        }
        spec->dev[d].uuid = g->uuid;
        spec->dev[d].nvml_index = g->index;
        spec->dev[d].is_mig = g->is_mig;
        spec->dev[d].mem_total = g->mem_total;
        spec->dev[d].core_policy = pol;
    }
    if (as_root) {
        spec->split = true;
        spec->job_uid = uid;
        spec->job_gid = gid;
    }
    if ((as_root ? vgpu_userjobs_prepare(uid, gid, statedir, sizeof statedir, &e)
                 : vgpu_statedir(statedir, sizeof statedir, true, &e)) < 0 ||
        vgpu_region_create(&r, statedir, spec, &e) < 0) {
        slurm_error("vgpu: cannot create the vgpu job of task %s: %s", name, e.msg);
        goto out;
    }
    char visible[VGPU_REGION_MAX_DEVICES * (VGPU_UUID_LEN + 1)] = "";
    size_t used = 0;
    for (unsigned d = 0; d < sel.count; d++)
        used += (size_t)snprintf(visible + used, sizeof visible - used, "%s%s", d ? "," : "", spec->dev[d].uuid);
    char old[4096] = "", preload[8192];
    spank_getenv(sp, "LD_PRELOAD", old, sizeof old);
    /* Prepended: our hooks must see the driver calls before any other preloaded library. */
    snprintf(preload, sizeof preload, "%s%s%s", site.library, old[0] ? " " : "", old);
    if (spank_setenv(sp, "VGPU_REGION", r.path, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "LD_PRELOAD", preload, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "CUDA_VISIBLE_DEVICES", visible, 1) != ESPANK_SUCCESS) {
        slurm_error("vgpu: cannot set the environment of task %s", name);
        vgpu_region_remove(&r, &e);
        goto out;
    }
    rc = 0;
out:
    if (r.fd >= 0)
        vgpu_region_close(&r);
    if (nv)
        vgpu_nvml_close(nv);
    free(list);
    free(spec);
    free(cmdline);
    return rc;
}

/* Options given to sbatch/salloc reach the steps of the allocation through the job's
 * environment: read them again (spank_option_getopt), in case no callback ran. */
static int read_options(spank_t sp)
{
    static const char *const names[] = { "vgpu-mem", "vgpu-core", "vgpu-policy" };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        char *val = NULL;
        if (spank_option_getopt(sp, &options[i], &val) == ESPANK_SUCCESS && val) {
            struct vgpu_err e = { 0 };
            if (vgslurm_opt_parse(&opts, &site, names[i], val, &e) < 0) {
                slurm_error("vgpu: %s", e.msg);
                return -1;
            }
        }
    }
    return 0;
}

/* As root, before the task becomes its user: limits the task cannot raise (issue 16). */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp) || !site_ok || geteuid() != 0)
        return 0;
    uid_t uid = 0;
    gid_t gid = 0;
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return 0;                       /* slurm_spank_task_init does it as the user */
    if (uid == 0)
        return 0;                       /* root's task: root's state directory, as before */
    if (read_options(sp) < 0)
        return -1;
    task_done = true;
    return start_task(sp, true, uid, gid);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    if (!spank_remote(sp) || !site_ok || task_done)
        return 0;
    if (read_options(sp) < 0)
        return -1;
    return start_task(sp, false, 0, 0);
}
