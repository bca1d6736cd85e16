/* Running nvidia-smi / nvidia-cuda-mps-control and parsing nvidia-smi's compute-policy
 * output (see vgpu/smi.h). Formats are those of driver 580.159.04 (reference/nvml.md §15). */
#include "vgpu/smi.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/trust.h"

/* ---- running a tool ------------------------------------------------------------------------- */

char *vgpu_tool_missing(const char *tool, const char *env_var, const char *install, char *buf, size_t len)
{
    const char *set = env_var ? getenv(env_var) : NULL;
    bool from_env = set && *set;
    if (strchr(tool, '/'))
        snprintf(buf, len, "cannot run %s: it does not exist or is not executable; %s%s%s", tool,
                 from_env ? "set " : "", from_env ? env_var : install, from_env ? " to its path, or unset it" : "");
    else
        snprintf(buf, len, "cannot run %s: not found on PATH (%s); %s%s%s", tool, getenv("PATH") ? getenv("PATH") : "",
                 from_env ? "set " : "", from_env ? env_var : install, from_env ? " to its path, or unset it" : "");
    return buf;
}

static char *slurp(FILE *f)
{
    if (fseek(f, 0, SEEK_END) != 0)
        return NULL;
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    if (n > 16 * 1024 * 1024)
        n = 16 * 1024 * 1024;
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        return NULL;
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    return buf;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int vgpu_proc_run(const char *const argv[], const char *const env[], const char *input, int timeout_ms,
                  struct vgpu_proc *p, struct vgpu_err *e)
{
    memset(p, 0, sizeof *p);
    /* As root, only a program nobody else can change (vgpu/trust.h); named by its variable when
     * it came from one. A bare name is looked up on PATH, as the default is. */
    static const char *const vars[] = { "VGPU_NVIDIA_SMI", "VGPU_MPS_CONTROL" };
    const char *source = NULL;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0] && !source; i++)
        if (getenv(vars[i]) && strcmp(getenv(vars[i]), argv[0]) == 0)
            source = vars[i];
    if (vgpu_trust_path(argv[0], source, VGPU_TRUST_SEARCHED, e) != 0) {
        if (e->code == VGPU_EXIT_NOT_FOUND)     /* as execvp would have said */
            vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY, "cannot run %s: not found", argv[0]);
        return -1;
    }
    FILE *in = tmpfile(), *out = tmpfile(), *err = tmpfile();
    int report[2] = { -1, -1 };
    pid_t pid = -1;
    int rc = -1;
    if (!in || !out || !err || pipe2(report, O_CLOEXEC) < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot run %s: %s", argv[0], strerror(errno));
        goto done;
    }
    if (input && *input) {
        fputs(input, in);
        fflush(in);
        rewind(in);
    }
    pid = fork();
    if (pid < 0) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot run %s: fork: %s", argv[0], strerror(errno));
        goto done;
    }
    if (pid == 0) {
        /* The child: only async-signal-safe work between fork and exec, except setenv, which is
         * fine here since vgpu is single-threaded when it runs tools. */
        close(report[0]);
        dup2(fileno(in), 0);
        dup2(fileno(out), 1);
        dup2(fileno(err), 2);
        for (size_t i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            if (eq) {
                char name[128];
                size_t n = (size_t)(eq - env[i]);
                if (n >= sizeof name)
                    continue;
                memcpy(name, env[i], n);
                name[n] = 0;
                setenv(name, eq + 1, 1);
            } else {
                unsetenv(env[i]);
            }
        }
        execvp(argv[0], (char *const *)argv);
        int x = errno;
        if (write(report[1], &x, sizeof x) < 0)
            _exit(127);
        _exit(127);
    }
    close(report[1]);
    report[1] = -1;
    int exec_errno = 0;
    ssize_t n;
    while ((n = read(report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    int status = 0;
    if (n == (ssize_t)sizeof exec_errno) {
        waitpid(pid, &status, 0);
        if (exec_errno == ENOENT)
            vgpu_err_set(e, VGPU_EXIT_NO_LIBRARY, "cannot run %s: not found", argv[0]);
        else
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot run %s: %s", argv[0], strerror(exec_errno));
        errno = exec_errno;
        goto done;
    }
    long waited = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot wait for %s: %s", argv[0], strerror(errno));
            goto done;
        }
        if (timeout_ms > 0 && waited >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            p->timed_out = true;
            break;
        }
        long step = waited < 50 ? 2 : 20;
        sleep_ms(step);
        waited += step;
    }
    p->status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    p->out = slurp(out);
    p->err = slurp(err);
    if (!p->out || !p->err) {
        vgpu_proc_free(p);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot read the output of %s", argv[0]);
        goto done;
    }
    rc = 0;
done:
    if (report[0] >= 0)
        close(report[0]);
    if (report[1] >= 0)
        close(report[1]);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    if (err)
        fclose(err);
    return rc;
}

void vgpu_proc_free(struct vgpu_proc *p)
{
    free(p->out);
    free(p->err);
    p->out = p->err = NULL;
}

const char *vgpu_smi_path(void)
{
    const char *s = getenv("VGPU_NVIDIA_SMI");
    return s && *s ? s : "nvidia-smi";
}

/* ---- the time-slice policy -------------------------------------------------------------------- */

static const char *const ts_names[] = { "default", "short", "medium", "long" };

int vgpu_timeslice_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, ts_names[i]) == 0)
            return i;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == 0)
        return s[0] - '0';
    return -1;
}

const char *vgpu_timeslice_name(int v)
{
    return v >= 0 && v < 4 ? ts_names[v] : NULL;
}

int vgpu_smi_parse_policy_list(const char *text, struct vgpu_policy_row *rows, int max)
{
    if (!text || !strstr(text, "compute policies"))
        return -1;
    int n = 0;
    const char *line = text;
    while (*line && n < max) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        if (len >= sizeof buf)
            len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = 0;
        for (char *c = buf; *c; c++)
            if (*c == '|')
                *c = ' ';
        unsigned gpu;
        char name[32], value[32];
        if (sscanf(buf, " %u %31s %31s", &gpu, name, value) == 3 && strcasecmp(name, "Timeslice") == 0) {
            rows[n].gpu = gpu;
            rows[n].timeslice = vgpu_timeslice_parse(value);
            snprintf(rows[n].value, sizeof rows[n].value, "%s", value);
            n++;
        }
        line = end ? end + 1 : line + len;
    }
    return n;
}

static void first_line(const char *text, char *out, size_t len)
{
    while (*text == '\n' || *text == ' ')
        text++;
    size_t n = strcspn(text, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(out, text, n);
    out[n] = 0;
}

static bool has(const char *a, const char *b, const char *needle)
{
    return (a && strcasestr(a, needle)) || (b && strcasestr(b, needle));
}

enum vgpu_smi_fault vgpu_smi_classify(int status, const char *out, const char *err, char *reason, size_t len)
{
    /* The most telling line: a "Failed ..." line, else the first line of stderr, else stdout. */
    const char *src = NULL;
    const char *f = out ? strstr(out, "Failed") : NULL;
    if (!f && err)
        f = strstr(err, "Failed");
    if (f)
        src = f;
    else if (err && *err && strspn(err, " \n") < strlen(err))
        src = err;
    else
        src = out ? out : "";
    if (reason && len)
        first_line(src, reason, len);

    if (has(out, err, "Insufficient Permissions") || has(out, err, "permission"))
        return VGPU_SMI_NO_PERMISSION;
    if (has(out, err, "No devices were found") || has(out, err, "Not Found"))
        return VGPU_SMI_NOT_FOUND;
    if (has(out, err, "Not Supported"))
        return VGPU_SMI_NOT_SUPPORTED;
    if (has(out, err, "version mismatch"))
        return VGPU_SMI_VERSION;
    if (has(out, err, "couldn't communicate with the NVIDIA driver") || has(out, err, "Driver Not Loaded"))
        return VGPU_SMI_NO_DRIVER;
    if (has(out, err, "In use by another client"))
        return VGPU_SMI_IN_USE;
    if (has(out, err, "Invalid Argument") || has(out, err, "is invalid"))
        return VGPU_SMI_INVALID;
    switch (status) {
    case 0: return VGPU_SMI_OK;
    case 2: return VGPU_SMI_INVALID;
    case 3: return VGPU_SMI_NOT_SUPPORTED;
    case 4: return VGPU_SMI_NO_PERMISSION;
    case 6: return VGPU_SMI_NOT_FOUND;
    case 9: return VGPU_SMI_NO_DRIVER;
    case 18: return VGPU_SMI_VERSION;
    case 19: return VGPU_SMI_IN_USE;
    default: return VGPU_SMI_OTHER;
    }
}

bool vgpu_smi_set_succeeded(const char *out, unsigned gpu)
{
    const char *key = "Successfully set timeslice policy with value ";
    for (const char *s = out ? strstr(out, key) : NULL; s; s = strstr(s + 1, key)) {
        const char *g = strstr(s, " for GPU ");
        const char *eol = strchr(s, '\n');
        if (!g || (eol && g > eol))
            continue;
        unsigned v;
        if (gpu == (unsigned)-1 || (sscanf(g, " for GPU %u", &v) == 1 && v == gpu))
            return true;
    }
    return false;
}
