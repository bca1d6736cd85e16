/* The MPS record, 'vgpu mps status', and the client side of 'vgpu run --mps' (mpsrec.h). */
#include "mpsrec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "vgpu/exitcode.h"
#include "vgpu/json.h"
#include "vgpu/mps.h"
#include "vgpu/statedir.h"

const char *vgpu_mps_state_dir(void)
{
    static char dir[4096];
    struct vgpu_err e;
    if (!dir[0] && vgpu_statedir(dir, sizeof dir, true, &e) < 0)
        snprintf(dir, sizeof dir, ".");
    return dir;
}

/* The record lives in the state directory and is reached through its checked handle
 * (vgpu/statedir.h): never through a symlink, never by a predictable temporary name opened
 * without O_EXCL. */
#define REC_NAME "mps.json"

static int rec_dir(struct vgpu_statedir *sd, bool create, struct vgpu_err *e)
{
    return vgpu_statedir_open(sd, create, e);
}

int vgpu_mps_rec_load(struct vgpu_mps_rec *rec, struct vgpu_err *e)
{
    memset(rec, 0, sizeof *rec);
    struct vgpu_statedir sd;
    if (rec_dir(&sd, false, e) < 0) {
        if (e->code == VGPU_EXIT_NOT_FOUND)
            vgpu_err_set(e, VGPU_EXIT_NOT_FOUND, "no MPS record: no state directory yet");
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/" REC_NAME, sd.path);
    struct stat st;
    int fd = vgpu_dir_open(sd.fd, REC_NAME, O_RDONLY, &st);
    vgpu_statedir_close(&sd);
    if (fd < 0) {
        if (errno == ENOENT)
            vgpu_err_set(e, VGPU_EXIT_NOT_FOUND, "no MPS record in %s", path);
        else
            vgpu_err_set(e, VGPU_EXIT_STATE, "cannot read %s: %s (remove it)", path,
                         errno == EINVAL ? "not a regular file" : strerror(errno));
        return -1;
    }
    char text[16384];
    size_t n = 0;
    for (ssize_t got; n < sizeof text - 1 && (got = read(fd, text + n, sizeof text - 1 - n)) != 0;) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    text[n] = 0;
    struct json_object *doc = n < sizeof text - 1 ? json_tokener_parse(text) : NULL, *v;
    if (!doc || !json_object_is_type(doc, json_type_object)) {
        json_object_put(doc);
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot read %s: not a JSON object of at most 16 KiB (remove it)", path);
        return -1;
    }
    if (json_object_object_get_ex(doc, "pipe_dir", &v))
        snprintf(rec->pipe_dir, sizeof rec->pipe_dir, "%s", json_object_get_string(v));
    if (json_object_object_get_ex(doc, "log_dir", &v))
        snprintf(rec->log_dir, sizeof rec->log_dir, "%s", json_object_get_string(v));
    if (json_object_object_get_ex(doc, "daemon_pid", &v))
        rec->daemon_pid = (pid_t)json_object_get_int(v);
    if (json_object_object_get_ex(doc, "all_gpus", &v))
        rec->all_gpus = json_object_get_boolean(v);
    if (json_object_object_get_ex(doc, "gpus", &v) && json_object_is_type(v, json_type_array)) {
        size_t k = json_object_array_length(v);
        for (size_t i = 0; i < k && i < VGPU_MPS_REC_GPUS; i++)
            snprintf(rec->gpus[rec->ngpus++], sizeof rec->gpus[0], "%s",
                     json_object_get_string(json_object_array_get_idx(v, i)));
    }
    json_object_put(doc);
    if (!rec->pipe_dir[0]) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "%s has no pipe_dir", path);
        return -1;
    }
    return 0;
}

int vgpu_mps_rec_save(const struct vgpu_mps_rec *rec, struct vgpu_err *e)
{
    struct vgpu_statedir sd;
    if (rec_dir(&sd, true, e) < 0)
        return -1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, REC_NAME ".%d.tmp", (int)getpid());
    struct json_object *doc = vgpu_json_doc();
    vgpu_json_str(doc, "pipe_dir", rec->pipe_dir);
    vgpu_json_str(doc, "log_dir", rec->log_dir);
    vgpu_json_i64(doc, "daemon_pid", rec->daemon_pid);
    vgpu_json_bool(doc, "all_gpus", rec->all_gpus);
    struct json_object *arr = json_object_new_array();
    for (unsigned i = 0; i < rec->ngpus; i++)
        json_object_array_add(arr, json_object_new_string(rec->gpus[i]));
    json_object_object_add(doc, "gpus", arr);
    const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY);
    int fd = vgpu_dir_create(sd.fd, tmp, O_WRONLY, 0600);
    if (fd < 0 && errno == EEXIST) {
        unlinkat(sd.fd, tmp, 0);        /* left by a dead vgpu with our pid, in our own directory */
        fd = vgpu_dir_create(sd.fd, tmp, O_WRONLY, 0600);
    }
    int rc = -1, err = errno;
    if (fd >= 0) {
        size_t n = strlen(text);
        bool written = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
        err = errno;
        if (close(fd) == 0 && written && renameat(sd.fd, tmp, sd.fd, REC_NAME) == 0)
            rc = 0;
        else {
            if (written)
                err = errno;
            unlinkat(sd.fd, tmp, 0);
        }
    }
    if (rc < 0)
        vgpu_err_set(e, VGPU_EXIT_STATE, "cannot write %s/" REC_NAME ": %s", sd.path, strerror(err));
    vgpu_statedir_close(&sd);
    json_object_put(doc);
    return rc;
}

void vgpu_mps_rec_remove(void)
{
    struct vgpu_statedir sd;
    struct vgpu_err e;
    if (rec_dir(&sd, false, &e) < 0)
        return;
    unlinkat(sd.fd, REC_NAME, 0);
    vgpu_statedir_close(&sd);
}

/* ---- status ------------------------------------------------------------------------------------- */

/* One value of a process's environment (readable for our own processes, or as root). */
static bool proc_env(pid_t pid, const char *name, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t ln = strlen(name);
    for (size_t i = 0; i < n;) {
        const char *s = buf + i;
        if (!strncmp(s, name, ln) && s[ln] == '=') {
            snprintf(out, len, "%s", s + ln + 1);
            return true;
        }
        i += strlen(s) + 1;
    }
    return false;
}

static void proc_comm(pid_t pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fgets(out, (int)len, f))
            out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
}

static long proc_uid(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long uid = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %ld", &uid) == 1)
            break;
    fclose(f);
    return uid;
}

/* The job a client belongs to: the region file's name without its directory and suffix. */
static bool client_job(pid_t pid, char *out, size_t len)
{
    char region[4096];
    if (!proc_env(pid, "VGPU_REGION", region, sizeof region))
        return false;
    const char *b = strrchr(region, '/');
    snprintf(out, len, "%.200s", b ? b + 1 : region);
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = 0;
    return true;
}

static struct json_object *limits_json(const char *pipe_dir, const char *prefix, pid_t server, unsigned ndev,
                                       char *text, size_t tlen)
{
    struct json_object *arr = json_object_new_array();
    struct vgpu_err e;
    text[0] = 0;
    for (unsigned d = 0; d < ndev; d++) {
        char cmd[128], reply[128];
        if (server)
            snprintf(cmd, sizeof cmd, "%s %d %u", prefix, (int)server, d);
        else
            snprintf(cmd, sizeof cmd, "%s %u", prefix, d);
        uint64_t bytes = 0;
        bool ok = vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) == 0 && vgpu_mps_parse_size(reply, &bytes) == 0;
        struct json_object *o = json_object_new_object();
        vgpu_json_u64(o, "device", d);
        vgpu_json_u64_or_null(o, "limit_bytes", ok && bytes, bytes);
        json_object_array_add(arr, o);
        size_t used = strlen(text);
        if (ok && bytes)
            snprintf(text + used, tlen - used, "%s%u=%s", used ? "," : "", d, reply);
    }
    if (!text[0])
        snprintf(text, tlen, "-");
    return arr;
}

int vgpu_mps_show_status(const char *pipe_dir, const struct vgpu_mps_rec *rec, unsigned ndev, bool json)
{
    struct vgpu_err e;
    char reply[4096];
    double dpct = -1;
    if (vgpu_mps_cmd(pipe_dir, "get_default_active_thread_percentage", reply, sizeof reply, &e) < 0)
        return vgpu_err_report(&e);
    if (vgpu_mps_parse_percent(reply, &dpct) < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "the MPS control daemon answered '%s' to get_default_active_thread_percentage",
                         reply);
    long prio = -1;
    if (vgpu_mps_cmd(pipe_dir, "get_default_client_priority", reply, sizeof reply, &e) == 0) {
        char *end;
        long v = strtol(reply, &end, 10);
        if (reply[0] && !*end)
            prio = v;
    }
    char dlim[256];
    struct json_object *dlim_json = limits_json(pipe_dir, "get_default_device_pinned_mem_limit", 0, ndev, dlim,
                                                sizeof dlim);
    pid_t servers[64];
    int nsrv = 0;
    if (vgpu_mps_cmd(pipe_dir, "get_server_list", reply, sizeof reply, &e) < 0) {
        json_object_put(dlim_json);
        return vgpu_err_report(&e);
    }
    nsrv = vgpu_mps_parse_pids(reply, servers, 64);
    if (nsrv < 0) {
        json_object_put(dlim_json);
        return vgpu_fail(VGPU_EXIT_FAIL, "the MPS control daemon answered '%s' to get_server_list", reply);
    }

    struct json_object *doc = vgpu_json_doc();
    vgpu_json_bool(doc, "running", true);
    vgpu_json_i64(doc, "daemon_pid", vgpu_mps_daemon_pid(pipe_dir));
    vgpu_json_str(doc, "pipe_dir", pipe_dir);
    vgpu_json_str(doc, "log_dir", rec ? rec->log_dir : NULL);
    if (rec && !rec->all_gpus) {
        struct json_object *g = json_object_new_array();
        for (unsigned i = 0; i < rec->ngpus; i++)
            json_object_array_add(g, json_object_new_string(rec->gpus[i]));
        json_object_object_add(doc, "gpus", g);
    } else {
        vgpu_json_null(doc, "gpus");
    }
    vgpu_json_dbl(doc, "default_active_thread_percent", dpct);
    json_object_object_add(doc, "default_pinned_mem_limits", dlim_json);
    if (prio >= 0)
        vgpu_json_i64(doc, "default_client_priority", prio);
    else
        vgpu_json_null(doc, "default_client_priority");
    struct json_object *srv_arr = json_object_new_array();
    json_object_object_add(doc, "servers", srv_arr);

    if (!json) {
        printf("MPS control daemon: pid %d, pipe directory %s", (int)vgpu_mps_daemon_pid(pipe_dir), pipe_dir);
        if (rec)
            printf(", log directory %s", rec->log_dir);
        printf("\nGPUs: ");
        if (rec && !rec->all_gpus)
            for (unsigned i = 0; i < rec->ngpus; i++)
                printf("%s%u=%s", i ? ", " : "", i, rec->gpus[i]);
        else
            printf("all");
        printf("\nDefaults for new servers: active threads %.1f%%, pinned memory %s", dpct,
               strcmp(dlim, "-") ? dlim : "unlimited");
        if (prio >= 0)
            printf(", client priority %ld", prio);
        printf("\n");
        if (nsrv == 0)
            printf("No MPS server is running (one starts when the first client connects).\n");
    }
    for (int s = 0; s < nsrv; s++) {
        pid_t sp = servers[s];
        char status[64] = "", cmd[128], lim[256];
        double spct = -1;
        snprintf(cmd, sizeof cmd, "get_server_status %d", (int)sp);
        if (vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) == 0)
            snprintf(status, sizeof status, "%.63s", reply);
        snprintf(cmd, sizeof cmd, "get_active_thread_percentage %d", (int)sp);
        if (vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) == 0)
            vgpu_mps_parse_percent(reply, &spct);
        struct json_object *so = json_object_new_object();
        vgpu_json_i64(so, "pid", sp);
        long uid = proc_uid(sp);
        if (uid >= 0)
            vgpu_json_i64(so, "uid", uid);
        else
            vgpu_json_null(so, "uid");
        vgpu_json_str(so, "status", status[0] ? status : NULL);
        if (spct >= 0)
            vgpu_json_dbl(so, "active_thread_percent", spct);
        else
            vgpu_json_null(so, "active_thread_percent");
        json_object_object_add(so, "pinned_mem_limits",
                               limits_json(pipe_dir, "get_device_pinned_mem_limit", sp, ndev, lim, sizeof lim));
        pid_t clients[256];
        int ncl = 0;
        snprintf(cmd, sizeof cmd, "get_client_list %d", (int)sp);
        if (vgpu_mps_cmd(pipe_dir, cmd, reply, sizeof reply, &e) == 0)
            ncl = vgpu_mps_parse_pids(reply, clients, 256);
        if (ncl < 0)
            ncl = 0;
        if (!json) {
            printf("\n%-8s %-6s %-8s %-15s %-22s %s\n", "SERVER", "UID", "STATUS", "ACTIVE THREADS", "PINNED MEMORY",
                   "CLIENTS");
            char pct[32], uidt[16];
            snprintf(pct, sizeof pct, spct >= 0 ? "%.1f%%" : "N/A", spct);
            snprintf(uidt, sizeof uidt, uid >= 0 ? "%ld" : "?", uid);
            printf("%-8d %-6s %-8s %-15s %-22s %d\n", (int)sp, uidt, status[0] ? status : "?", pct, lim, ncl);
            if (ncl)
                printf("  %-8s %-16s %-15s %-22s %s\n", "CLIENT", "COMMAND", "ACTIVE THREADS", "PINNED MEMORY", "JOB");
        }
        struct json_object *carr = json_object_new_array();
        for (int c = 0; c < ncl; c++) {
            pid_t cp = clients[c];
            char comm[64], atp[32] = "", pin[256] = "", job[256] = "";
            proc_comm(cp, comm, sizeof comm);
            bool has_atp = proc_env(cp, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", atp, sizeof atp);
            bool has_pin = proc_env(cp, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", pin, sizeof pin);
            bool has_job = client_job(cp, job, sizeof job);
            struct json_object *co = json_object_new_object();
            vgpu_json_i64(co, "pid", cp);
            vgpu_json_str(co, "command", comm[0] ? comm : NULL);
            double v;
            if (has_atp && vgpu_mps_parse_percent(atp, &v) == 0)
                vgpu_json_dbl(co, "active_thread_percent", v);
            else
                vgpu_json_null(co, "active_thread_percent");
            vgpu_json_str(co, "pinned_mem_limit", has_pin ? pin : NULL);
            vgpu_json_str(co, "job", has_job ? job : NULL);
            json_object_array_add(carr, co);
            if (!json)
                printf("  %-8d %-16s %-15s %-22s %s\n", (int)cp, comm[0] ? comm : "?", has_atp ? atp : "-",
                       has_pin ? pin : "-", has_job ? job : "-");
        }
        json_object_object_add(so, "clients", carr);
        json_object_array_add(srv_arr, so);
    }
    if (json) {
        if (vgpu_json_emit(doc, true) < 0)
            return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
        return 0;
    }
    json_object_put(doc);
    if (fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %m");
    return 0;
}

/* ---- vgpu run --mps ------------------------------------------------------------------------------ */

/* MPS runs one user's server at a time and queues the clients of any other user until its
 * clients end (reference/nvml.md §16): a job of another user would hang in its first CUDA call
 * with no word why. Said, not refused: the wait ends when those clients do. */
static void warn_other_user(const char *pipe_dir, uid_t job_uid)
{
    char reply[4096];
    struct vgpu_err e;
    pid_t servers[64];
    if (vgpu_mps_cmd(pipe_dir, "get_server_list", reply, sizeof reply, &e) != 0)
        return;
    int n = vgpu_mps_parse_pids(reply, servers, 64);
    for (int i = 0; i < n; i++) {
        long uid = proc_uid(servers[i]);
        if (uid < 0 || (uid_t)uid == job_uid)
            continue;
        vgpu_warn("--mps: the MPS control daemon on %.1000s serves uid %ld now (server %d); MPS serves one user at "
                  "a time, so this job (uid %u) waits in its first CUDA call until that user's clients end",
                  pipe_dir, uid, (int)servers[i], (unsigned)job_uid);
        return;
    }
}

int vgpu_mps_client_setup(const char *const *uuids, const uint64_t *mem, unsigned ndev, unsigned core_pct,
                          uid_t job_uid, struct vgpu_err *e)
{
    struct vgpu_mps_rec rec;
    struct vgpu_err ignored;
    bool have_rec = vgpu_mps_rec_load(&rec, &ignored) == 0;
    const char *env = getenv("CUDA_MPS_PIPE_DIRECTORY");
    const char *pipe_dir = env && *env ? env : have_rec ? rec.pipe_dir : VGPU_MPS_DEFAULT_PIPE_DIR;
    if (!vgpu_mps_daemon_pid(pipe_dir)) {
        vgpu_err_set(e, VGPU_EXIT_NOT_FOUND,
                     "--mps: no MPS control daemon is running on pipe directory %.1000s; start one with 'vgpu mps "
                     "start' (as the user or root that runs the jobs), or set CUDA_MPS_PIPE_DIRECTORY to the pipe "
                     "directory of a running one", pipe_dir);
        return -1;
    }
    /* A client can only use GPUs its daemon serves. */
    if (have_rec && !strcmp(rec.pipe_dir, pipe_dir) && !rec.all_gpus) {
        for (unsigned d = 0; d < ndev; d++) {
            bool served = false;
            for (unsigned k = 0; k < rec.ngpus && !served; k++)
                served = !strcmp(rec.gpus[k], uuids[d]);
            if (!served) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "--mps: the MPS control daemon on %.1000s does not serve %.100s "
                             "(it was started with --gpu for other GPUs); choose its GPUs with --gpu, or restart "
                             "it with 'vgpu mps stop' and 'vgpu mps start --gpu ...'", pipe_dir, uuids[d]);
                return -1;
            }
        }
    }
    warn_other_user(pipe_dir, job_uid);
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipe_dir, 1);
    if (core_pct) {
        char v[16];
        snprintf(v, sizeof v, "%u", core_pct);
        setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v, 1);
    }
    char val[1024] = "";
    for (unsigned d = 0; d < ndev; d++) {
        if (!mem[d])
            continue;
        char size[32];
        size_t used = strlen(val);
        vgpu_mps_format_size(mem[d], size, sizeof size);
        snprintf(val + used, sizeof val - used, "%s%u=%s", used ? "," : "", d, size);
    }
    if (val[0])
        setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", val, 1);
    return 0;
}
