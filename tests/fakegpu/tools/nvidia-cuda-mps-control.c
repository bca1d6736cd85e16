/* Fake nvidia-cuda-mps-control (test double), faithful to the 580.159.04 control daemon as
 * observed (reference/nvml.md §16):
 *   -d            start the daemon in the background: "An instance of this daemon is already
 *                 running" (exit 1) when the pipe directory's pid file names a live daemon;
 *                 otherwise returns 0 once the daemon is up
 *   -f            the same in the foreground
 *   (no option)   client: each stdin line is one command sent to the daemon over the pipe
 *                 directory's `control` socket; its reply is printed; exit 0 even for unknown
 *                 commands; "Cannot find MPS control daemon process" and exit 1 with no daemon
 * Pipe directory: $CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps (control, control_privileged,
 * control_lock, log fifo, nvidia-cuda-mps-control.pid without newline; pid file and fifo go on
 * quit). Log directory: $CUDA_MPS_LOG_DIRECTORY or /var/log/nvidia-mps (control.log, server.log).
 *
 * Servers: one per user, started when a client appears (or by start_server). A client is a
 * process of the machine with CUDA_MPS_PIPE_DIRECTORY equal to this daemon's pipe directory in
 * its environment and libcuda.so.1 mapped (the daemon scans /proc every 100 ms). A server is a
 * child process named nvidia-cuda-mps-server, as the user it serves when the daemon is root's (as
 * the real one; several users' servers run at once here, where the real daemon queues the
 * clients of a second user until the first one's end); it takes the daemon's defaults when it starts and
 * keeps them. The daemon mirrors its state into the simulated GPU's state file (fs_gpu.mps of
 * each GPU it serves: CUDA_VISIBLE_DEVICES by index or UUID, else all), so the other fakes can
 * see it. VGPU_FAKE_MPS_FAULT (read by -d): "exit" (fails to start: message, exit 1), "die"
 * (returns 0 but the daemon dies at once), "deaf" (runs, but answers nothing). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/fakestate.h"

#define MAX_DEV 16
#define MAX_SERVERS 4
#define MAX_CLIENTS 64

static char pipe_dir[2048], log_dir[2048];
static FILE *ctl_log;

struct server {
    pid_t pid;
    unsigned uid;
    double pct;
    unsigned long long pinned[MAX_DEV];
    unsigned nclients;
    pid_t clients[MAX_CLIENTS];
};

static struct {
    double pct;                           /* default active thread percentage */
    unsigned long long pinned[MAX_DEV];   /* default pinned limits; 0 = unset */
    int priority;
    unsigned ndev;
    int gpu_of_dev[MAX_DEV];              /* simulated GPU of each device index */
    struct server srv[MAX_SERVERS];
    bool deaf;
    volatile sig_atomic_t quit;
} D = { .pct = 100.0 };

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    if (!ctl_log)
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(ctl_log, "[%s.%03ld Control %5d] ", ts, (long)(tv.tv_usec / 1000), (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(ctl_log, fmt, ap);
    va_end(ap);
    fputc('\n', ctl_log);
    fflush(ctl_log);
}

static void path_in(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%.2000s/%s", dir, name);
}

static pid_t running_daemon(void)
{
    char p[2100];
    path_in(p, sizeof p, pipe_dir, "nvidia-cuda-mps-control.pid");
    FILE *f = fopen(p, "r");
    long pid = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    if (pid > 1 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
        return (pid_t)pid;
    return 0;
}

/* ---- client ---------------------------------------------------------------------------------------- */

static int connect_control(void)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char p[2100];
    path_in(p, sizeof p, pipe_dir, "control");
    if (strlen(p) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, p);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int client(void)
{
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0])
            continue;
        int fd = connect_control();
        if (fd < 0) {
            printf("Cannot find MPS control daemon process\n");
            return 1;
        }
        size_t n = strlen(line);
        line[n] = '\n';
        if (write(fd, line, n + 1) < 0) {
            close(fd);
            printf("Cannot find MPS control daemon process\n");
            return 1;
        }
        shutdown(fd, SHUT_WR);
        char buf[4096];
        ssize_t got;
        while ((got = read(fd, buf, sizeof buf)) > 0)
            fwrite(buf, 1, (size_t)got, stdout);
        close(fd);
    }
    return 0;
}

/* ---- daemon state ---------------------------------------------------------------------------------- */

static void devices_from_env(struct fs_state *st)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    D.ndev = 0;
    if (!vis) {
        for (unsigned i = 0; i < st->ngpus && D.ndev < MAX_DEV; i++)
            D.gpu_of_dev[D.ndev++] = (int)i;
        return;
    }
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", vis);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && D.ndev < MAX_DEV; t = strtok_r(NULL, ",", &save)) {
        int g = -1;
        char *end;
        long v = strtol(t, &end, 10);
        if (*t && !*end && v >= 0 && (unsigned long)v < st->ngpus)
            g = (int)v;
        for (unsigned i = 0; i < st->ngpus && g < 0; i++) {
            if (!strncasecmp(st->gpu[i].s.uuid, t, strlen(t)))
                g = (int)i;
            /* A MIG device: its parent GPU holds the MPS state. */
            for (unsigned gi = 0; gi < FS_MAX_GI && g < 0; gi++)
                for (unsigned ci = 0; ci < FS_MAX_CI && g < 0; ci++)
                    if (st->gpu[i].gi[gi].used && st->gpu[i].gi[gi].ci[ci].used &&
                        !strcasecmp(st->gpu[i].gi[gi].ci[ci].uuid, t))
                        g = (int)i;
        }
        if (g < 0)
            break; /* CUDA stops at the first invalid entry */
        D.gpu_of_dev[D.ndev++] = g;
    }
}

static void mirror(bool alive)
{
    struct fs_state *st = fs_state();
    if (!st)
        return;
    fs_lock();
    for (unsigned d = 0; d < D.ndev; d++) {
        struct fs_mps *m = &st->gpu[D.gpu_of_dev[d]].mps;
        if (!alive) {
            memset(m, 0, sizeof *m);
            continue;
        }
        m->control_pid = getpid();
        m->active_thread_pct = (unsigned)(D.pct + 0.5);
        m->pinned_limit = D.pinned[d];
        m->server_pid = 0;
        m->server_thread_pct = 0;
        m->nclients = 0;
        for (int s = 0; s < MAX_SERVERS; s++)
            if (D.srv[s].pid) {
                m->server_pid = D.srv[s].pid;
                m->server_thread_pct = (unsigned)(D.srv[s].pct + 0.5);
                m->nclients = D.srv[s].nclients;
                break;
            }
    }
    fs_unlock();
}

static struct server *server_by_pid(pid_t pid)
{
    for (int s = 0; s < MAX_SERVERS; s++)
        if (D.srv[s].pid && D.srv[s].pid == pid)
            return &D.srv[s];
    return NULL;
}

static struct server *start_server(unsigned uid)
{
    for (int s = 0; s < MAX_SERVERS; s++)
        if (D.srv[s].pid && D.srv[s].uid == uid)
            return &D.srv[s];
    for (int s = 0; s < MAX_SERVERS; s++) {
        struct server *sv = &D.srv[s];
        if (sv->pid)
            continue;
        pid_t pid = fork();
        if (pid < 0)
            return NULL;
        if (pid == 0) {
            /* Not the daemon's sockets or a client's connection: those would never see EOF. */
            for (int fd = 3; fd < 1024; fd++)
                close(fd);
            prctl(PR_SET_NAME, "nvidia-cuda-mps-server");
            /* As the real one: a root daemon's server runs as the user it serves (vgpu mps
             * status shows its uid). The death signal after, since a uid change clears it. */
            if (getuid() == 0 && uid != 0) {
                struct passwd *pw = getpwuid((uid_t)uid);
                if (setgroups(0, NULL) != 0 || setgid(pw ? pw->pw_gid : (gid_t)uid) != 0 || setuid((uid_t)uid) != 0)
                    _exit(1);
            }
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            signal(SIGTERM, SIG_DFL);
            for (;;)
                pause();
        }
        memset(sv, 0, sizeof *sv);
        sv->pid = pid;
        sv->uid = uid;
        sv->pct = D.pct;
        memcpy(sv->pinned, D.pinned, sizeof sv->pinned);
        logf_("Starting new server %d for user %u", (int)pid, uid);
        return sv;
    }
    return NULL;
}

static void stop_server(struct server *sv)
{
    kill(sv->pid, SIGTERM);
    waitpid(sv->pid, NULL, 0);
    logf_("Server %d exited with status 0", (int)sv->pid);
    memset(sv, 0, sizeof *sv);
}

static bool env_has(const char *buf, size_t n, const char *name, const char *value)
{
    size_t ln = strlen(name);
    for (size_t i = 0; i < n;) {
        const char *s = buf + i;
        if (!strncmp(s, name, ln) && s[ln] == '=')
            return !strcmp(s + ln + 1, value);
        i += strlen(s) + 1;
    }
    return false;
}

static bool maps_libcuda(pid_t pid)
{
    char p[64], line[512];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(p, "r");
    bool found = false;
    if (!f)
        return false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "libcuda.so.1") != NULL;
    fclose(f);
    return found;
}

/* Finds the clients on the machine and gives each user's clients their server. */
static void scan_clients(void)
{
    for (int s = 0; s < MAX_SERVERS; s++)
        D.srv[s].nclients = 0;
    FILE *ls = popen("ls /proc", "r");
    if (!ls)
        return;
    char name[64];
    while (fgets(name, sizeof name, ls)) {
        char *end;
        long pid = strtol(name, &end, 10);
        if (end == name || (*end && *end != '\n') || pid == getpid())
            continue;
        bool is_server = false;
        for (int s = 0; s < MAX_SERVERS; s++)
            is_server |= D.srv[s].pid == pid;
        if (is_server)
            continue;
        char p[64];
        snprintf(p, sizeof p, "/proc/%ld/environ", pid);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        static char env[65536];
        size_t n = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[n] = 0;
        if (!env_has(env, n, "CUDA_MPS_PIPE_DIRECTORY", pipe_dir) || !maps_libcuda((pid_t)pid))
            continue;
        struct stat sb;
        snprintf(p, sizeof p, "/proc/%ld", pid);
        if (stat(p, &sb) < 0)
            continue;
        struct server *sv = start_server((unsigned)sb.st_uid);
        if (sv && sv->nclients < MAX_CLIENTS)
            sv->clients[sv->nclients++] = (pid_t)pid;
    }
    pclose(ls);
}

/* ---- commands ---------------------------------------------------------------------------------------- */

static bool parse_size(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
        return false;
    unsigned long long mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'T': mul = 1ULL << 40; end++; break;
    case 'G': mul = 1ULL << 30; end++; break;
    case 'M': mul = 1ULL << 20; end++; break;
    case 'K': mul = 1ULL << 10; end++; break;
    default: break;
    }
    if (*end)
        return false;
    *out = v * mul;
    return true;
}

/* The daemon prints limits in whole G when at least 1G (observed: 1536M reads back as 1G). */
static void print_size(FILE *out, unsigned long long b)
{
    if (!b)
        return;
    if (b >= 1ULL << 30)
        fprintf(out, "%lluG\n", b >> 30);
    else if (b >= 1ULL << 20)
        fprintf(out, "%lluM\n", b >> 20);
    else
        fprintf(out, "%lluK\n", b >> 10);
}

static double clamp_pct(const char *s, bool *ok)
{
    char *end;
    double v = strtod(s, &end);
    *ok = end != s && !*end;
    if (v > 100)
        v = 100;
    if (v < 0)
        v = 0;
    return v;
}

static void handle(const char *line, FILE *out)
{
    char w[6][128] = { { 0 } };
    int n = sscanf(line, "%127s %127s %127s %127s %127s %127s", w[0], w[1], w[2], w[3], w[4], w[5]);
    logf_("Cmd:%s", line);
    if (n <= 0)
        return;
    const char *c = w[0];
    pid_t arg = (pid_t)atoi(w[1]);
    struct server *sv = n >= 2 ? server_by_pid(arg) : NULL;
    bool ok = true;
    if (!strcmp(c, "get_server_list")) {
        for (int s = 0; s < MAX_SERVERS; s++)
            if (D.srv[s].pid)
                fprintf(out, "%d\n", (int)D.srv[s].pid);
    } else if (!strcmp(c, "get_server_status") && n >= 2) {
        if (sv)
            fprintf(out, "ACTIVE\n");
        else
            fprintf(out, "Server %s not found\n", w[1]);
    } else if (!strcmp(c, "start_server") && n >= 3 && !strcmp(w[1], "-uid")) {
        start_server((unsigned)atoi(w[2]));
    } else if (!strcmp(c, "shutdown_server") && n >= 2) {
        if (sv)
            stop_server(sv);
        else
            fprintf(out, "Server %s not found\n", w[1]);
    } else if (!strcmp(c, "get_client_list") && n >= 2) {
        if (!sv)
            fprintf(out, "Server %s not found\n", w[1]);
        else
            for (unsigned i = 0; i < sv->nclients; i++)
                fprintf(out, "%d\n", (int)sv->clients[i]);
    } else if (!strcmp(c, "get_device_client_list") || !strcmp(c, "ps")) {
        /* Observed empty on 580.159.04 in every case we tried. */
    } else if (!strcmp(c, "terminate_client") && n >= 3) {
        if (!sv)
            fprintf(out, "Server %s not found\n", w[1]);
        else
            kill((pid_t)atoi(w[2]), SIGKILL);
    } else if (!strcmp(c, "set_default_active_thread_percentage") && n >= 2) {
        double v = clamp_pct(w[1], &ok);
        if (ok)
            D.pct = v;
        fprintf(out, "%.1f\n", D.pct);
    } else if (!strcmp(c, "get_default_active_thread_percentage")) {
        fprintf(out, "%.1f\n", D.pct);
    } else if (!strcmp(c, "set_active_thread_percentage") && n >= 3) {
        if (!sv) {
            fprintf(out, "Server %s not found\n", w[1]);
        } else {
            double v = clamp_pct(w[2], &ok);
            if (ok)
                sv->pct = v;
            fprintf(out, "%.1f\n", sv->pct);
        }
    } else if (!strcmp(c, "get_active_thread_percentage") && n >= 2) {
        if (sv)
            fprintf(out, "%.1f\n", sv->pct);
        else
            fprintf(out, "Server %s not found\n", w[1]);
    } else if (!strcmp(c, "set_default_device_pinned_mem_limit") && n >= 3) {
        unsigned dev = (unsigned)atoi(w[1]);
        unsigned long long b;
        if (dev >= D.ndev || !parse_size(w[2], &b))
            fprintf(out, "Invalid arguments\n");
        else
            D.pinned[dev] = b;
    } else if (!strcmp(c, "get_default_device_pinned_mem_limit") && n >= 2) {
        unsigned dev = (unsigned)atoi(w[1]);
        if (dev < D.ndev && D.pinned[dev])
            print_size(out, D.pinned[dev]);
        else
            logf_("No default pinned memory limit set for the device!");
    } else if (!strcmp(c, "set_device_pinned_mem_limit") && n >= 4) {
        unsigned dev = (unsigned)atoi(w[2]);
        unsigned long long b;
        if (!sv)
            fprintf(out, "Server %s not found\n", w[1]);
        else if (dev >= D.ndev || !parse_size(w[3], &b))
            fprintf(out, "Invalid arguments\n");
        else
            sv->pinned[dev] = b;
    } else if (!strcmp(c, "get_device_pinned_mem_limit") && n >= 3) {
        unsigned dev = (unsigned)atoi(w[2]);
        if (!sv)
            fprintf(out, "Server %s not found\n", w[1]);
        else if (dev < D.ndev)
            print_size(out, sv->pinned[dev]);
    } else if (!strcmp(c, "get_default_client_priority")) {
        fprintf(out, "%d\n", D.priority);
    } else if (!strcmp(c, "set_default_client_priority") && n >= 2) {
        D.priority = atoi(w[1]) ? 1 : 0;
    } else if (!strcmp(c, "quit")) {
        D.quit = 1;
    } else {
        fprintf(out, "Unknown command \"%s\"\n", line);
    }
}

/* ---- daemon ------------------------------------------------------------------------------------------- */

static void on_term(int sig)
{
    (void)sig;
    D.quit = 1;
}

static int bind_socket(const char *name, mode_t mode)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    char p[2100];
    path_in(p, sizeof p, pipe_dir, name);
    if (strlen(p) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, p);
    unlink(p);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0)
        return -1;
    chmod(p, mode);
    return fd;
}

static int serve(void)
{
    struct fs_state *st = fs_state();
    devices_from_env(st);
    char p[2100];
    path_in(p, sizeof p, log_dir, "control.log");
    ctl_log = fopen(p, "a");
    path_in(p, sizeof p, log_dir, "server.log");
    FILE *sl = fopen(p, "a");
    if (sl)
        fclose(sl);
    logf_("Starting control daemon using socket %s/control", pipe_dir);
    logf_("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    int lfd = bind_socket("control", 0666);
    int pfd = bind_socket("control_privileged", 0755);
    if (lfd < 0 || pfd < 0) {
        logf_("Failed to create the control socket: %s", strerror(errno));
        return 1;
    }
    path_in(p, sizeof p, pipe_dir, "control_lock");
    int lk = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (lk >= 0)
        close(lk);
    path_in(p, sizeof p, pipe_dir, "log");
    unlink(p);
    mkfifo(p, 0777);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    mirror(true);
    /* The pid file last: its presence means "up". */
    char tmp[2200];
    path_in(p, sizeof p, pipe_dir, "nvidia-cuda-mps-control.pid");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *pf = fopen(tmp, "w");
    if (pf) {
        fprintf(pf, "%d", (int)getpid());
        fclose(pf);
        chmod(tmp, 0666);
        rename(tmp, p);
    }
    while (!D.quit) {
        struct pollfd pl = { .fd = lfd, .events = POLLIN };
        int r = poll(&pl, 1, 100);
        if (r > 0 && (pl.revents & POLLIN)) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd < 0)
                continue;
            FILE *io = fdopen(cfd, "r+");
            if (!io) {
                close(cfd);
                continue;
            }
            char line[1024];
            logf_("Accepting connection...");
            if (!D.deaf && fgets(line, sizeof line, io)) {
                line[strcspn(line, "\n")] = 0;
                scan_clients();
                handle(line, io);
            }
            fclose(io);
            logf_("UI closed");
        }
        if (!D.quit) {
            scan_clients();
            mirror(true);
        }
    }
    for (int s = 0; s < MAX_SERVERS; s++)
        if (D.srv[s].pid) {
            logf_("Try shutting down server %d, backoff is disabled", (int)D.srv[s].pid);
            stop_server(&D.srv[s]);
        }
    mirror(false);
    path_in(p, sizeof p, pipe_dir, "nvidia-cuda-mps-control.pid");
    unlink(p);
    path_in(p, sizeof p, pipe_dir, "log");
    unlink(p);
    logf_("Exit with status 0");
    return 0;
}

static int daemon_main(bool background)
{
    if (running_daemon()) {
        printf("An instance of this daemon is already running\n");
        return 1;
    }
    const char *fault = getenv("VGPU_FAKE_MPS_FAULT");
    fault = fault ? fault : "";
    if (!strcmp(fault, "exit")) {
        printf("Failed to start the MPS control daemon: simulated failure\n");
        return 1;
    }
    D.deaf = !strcmp(fault, "deaf");
    if (mkdir(pipe_dir, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "Failed to create pipe directory %s: %s\n", pipe_dir, strerror(errno));
        return 1;
    }
    /* An existing path must be a directory (not a link to one): chmod 0777 on whatever was
     * passed would open an ordinary file, or a link's target, to everyone. */
    struct stat pst, lst;
    if (lstat(pipe_dir, &pst) < 0 || !S_ISDIR(pst.st_mode)) {
        fprintf(stderr, "Failed to create pipe directory %s: %s\n", pipe_dir, "it exists and is not a directory");
        return 1;
    }
    chmod(pipe_dir, 0777);
    if (mkdir(log_dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "Failed to create log directory %s: %s\n", log_dir, strerror(errno));
        return 1;
    }
    if (lstat(log_dir, &lst) < 0 || !S_ISDIR(lst.st_mode)) {
        fprintf(stderr, "Failed to create log directory %s: %s\n", log_dir, "it exists and is not a directory");
        return 1;
    }
    if (!background)
        return serve();
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        setsid();
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
            if (nul > 2)
                close(nul);
        }
        if (!strcmp(fault, "die"))
            _exit(1);
        _exit(serve());
    }
    /* Return once it is up (or gone), as the real -d returns promptly. */
    for (int i = 0; i < 300 && running_daemon() != pid; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            break;
        usleep(10000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *pd = getenv("CUDA_MPS_PIPE_DIRECTORY"), *ld = getenv("CUDA_MPS_LOG_DIRECTORY");
    snprintf(pipe_dir, sizeof pipe_dir, "%s", pd && *pd ? pd : "/tmp/nvidia-mps");
    snprintf(log_dir, sizeof log_dir, "%s", ld && *ld ? ld : "/var/log/nvidia-mps");
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("Usage: nvidia-cuda-mps-control [-d | -f | -h]\n");
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "-d") || !strcmp(argv[1], "-f"))) {
        if (!fs_open()) {
            fprintf(stderr, "fake nvidia-cuda-mps-control: %s\n", fs_error());
            return 1;
        }
        return daemon_main(!strcmp(argv[1], "-d"));
    }
    if (argc >= 2) {
        printf("Unknown option %s\n", argv[1]);
        return 1;
    }
    return client();
}
