/* vgpu shell: an interactive console (readline) and a script runner for vgpu commands.
 * Each command runs in a child process, exactly as `vgpu CMD` would: a failing or crashing
 * command cannot take the shell down, Ctrl-C reaches the command and not the shell, and every
 * command starts from clean global state (getopt, ncurses, NVML). */
static const char usage[] =
    "usage: vgpu shell [-k] [-c COMMAND] [FILE]\n"
    "\n"
    "Run vgpu commands without the 'vgpu' prefix. On a terminal it is an interactive console:\n"
    "the prompt shows the host and the number of GPUs and jobs; Tab completes commands,\n"
    "options, GPU indexes and UUIDs, job names, MIG profiles and file names; history is kept\n"
    "in $XDG_STATE_HOME/vgpu/history (~/.local/state/vgpu/history); 'help', 'help CMD',\n"
    "'exit [0-255]' or Ctrl-D. Ctrl-C interrupts the running command, not the shell; a failing\n"
    "command prints its error and the shell goes on.\n"
    "\n"
    "When standard input is not a terminal, or FILE is given, the lines are a script: blank\n"
    "lines and lines starting with # are skipped, words are split like a shell does ('...',\n"
    "\"...\" and backslash quoting; a line ending in a backslash is refused), the script stops at\n"
    "the first failing command unless -k, and the shell exits with the status of the last\n"
    "command run.\n"
    "\n"
    "  -k, --keep-going   in a script, go on after a failing command\n"
    "  -c COMMAND         run one command line (one argument: quote it) and exit with its\n"
    "                     status\n"
    "  --help             show this help\n";

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "cmd.h"
#include "main.h"
#include "completion/complete.h"
#include "shell/words.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"
#include "vgpu/trust.h"

extern const struct vgpu_cmd vgpu_cmd_shell;

static const struct option options[] = {
    { "keep-going", no_argument, NULL, 'k' },
    { "command", required_argument, NULL, 'c' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "command", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

/* Runs one parsed command line in a child; returns its status like a shell ($?). */
static int run_words(int argc, char **argv)
{
    if (argc == 0)
        return 0;
    if (strcmp(argv[0], "vgpu") == 0) { /* tolerate a habitual prefix */
        argc--;
        argv++;
        if (argc == 0)
            return 0;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        vgpu_fail(VGPU_EXIT_FAIL, "cannot start '%s': %s", argv[0], strerror(errno));
        return VGPU_EXIT_FAIL;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        signal(SIGTSTP, SIG_DFL);
        /* The same entry as the binary itself: `vgpu ARGS...`. */
        char **av = calloc((size_t)argc + 2, sizeof *av);
        if (!av)
            _exit(VGPU_EXIT_FAIL);
        av[0] = (char *)"vgpu";
        for (int i = 0; i < argc; i++)
            av[i + 1] = argv[i];
        int rc = vgpu_main(argc + 1, av);
        fflush(stdout);
        fflush(stderr);
        _exit(rc & 0xff);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return VGPU_EXIT_FAIL;
    if (WIFSIGNALED(status)) {
        if (WTERMSIG(status) == SIGINT)
            fputc('\n', stderr);
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

static int run_line(const char *line, bool *is_exit)
{
    struct vgpu_words w;
    char msg[200];
    *is_exit = false;
    if (vgpu_words_split(line, &w, msg, sizeof msg) < 0) {
        vgpu_fail(VGPU_EXIT_USAGE, "%s", msg);
        return VGPU_EXIT_USAGE;
    }
    int rc = 0;
    if (w.argc > 0 && (strcmp(w.argv[0], "exit") == 0 || strcmp(w.argv[0], "quit") == 0)) {
        /* A status the shell can return, or an error (atoi made "exit abc" a silent 0). */
        *is_exit = true;
        rc = 0;
        if (w.argc > 2) {
            rc = vgpu_fail(VGPU_EXIT_USAGE, "%s: unexpected argument '%s' (%s [STATUS])", w.argv[0], w.argv[2],
                           w.argv[0]);
        } else if (w.argc == 2) {
            const char *s = w.argv[1];
            size_t n = strspn(s, "0123456789");
            if (!*s || s[n] || n > 3 || atoi(s) > 255)
                rc = vgpu_fail(VGPU_EXIT_USAGE, "%s: '%s' is not an exit status; give a whole number from 0 to 255",
                               w.argv[0], s);
            else
                rc = atoi(s);
        }
    } else {
        rc = run_words(w.argc, w.argv);
    }
    vgpu_words_free(&w);
    return rc;
}

/* ---- interactive ---------------------------------------------------------------------- */

static char **completions;
static size_t ncompletions;
static bool want_files;

static void clear_completions(void)
{
    for (size_t i = 0; i < ncompletions; i++)
        free(completions[i]);
    free(completions);
    completions = NULL;
    ncompletions = 0;
}

static char *candidate_generator(const char *text, int state)
{
    static size_t idx;
    if (state == 0)
        idx = 0;
    size_t len = strlen(text);
    while (idx < ncompletions) {
        const char *c = completions[idx++];
        if (strncmp(c, text, len) == 0)
            return strdup(c);
    }
    return NULL;
}

static char **shell_completion(const char *text, int start, int end)
{
    (void)end;
    /* Split what is before the word being completed, prefix "vgpu", and ask the table. */
    char *before = strndup(rl_line_buffer, (size_t)start);
    struct vgpu_words w;
    char msg[100];
    clear_completions();
    want_files = false;
    rl_attempted_completion_over = 1;
    if (!before || vgpu_words_split(before, &w, msg, sizeof msg) < 0) {
        free(before);
        return NULL;
    }
    free(before);
    int n = w.argc + 2;
    char **words = calloc((size_t)n + 1, sizeof *words);
    if (!words) {
        vgpu_words_free(&w);
        return NULL;
    }
    words[0] = (char *)"vgpu";
    for (int i = 0; i < w.argc; i++)
        words[i + 1] = w.argv[i];
    words[w.argc + 1] = (char *)text;
    char *buf = NULL;
    size_t buflen = 0;
    FILE *mem = open_memstream(&buf, &buflen);
    if (mem) {
        vgpu_complete_words(w.argc + 1, n, words, mem);
        fclose(mem);
    }
    free(words);
    vgpu_words_free(&w);
    for (char *save = NULL, *l = buf ? strtok_r(buf, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        if (strcmp(l, "@files") == 0 || strcmp(l, "@dirs") == 0 || strcmp(l, "@commands") == 0) {
            want_files = true;
            continue;
        }
        char **grown = realloc(completions, (ncompletions + 1) * sizeof *grown);
        if (!grown)
            break;
        completions = grown;
        completions[ncompletions++] = strdup(l);
    }
    free(buf);
    if (want_files && ncompletions == 0) {
        rl_attempted_completion_over = 0; /* readline's own file name completion */
        return NULL;
    }
    return rl_completion_matches(text, candidate_generator);
}

static void history_path(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char dir[PATH_MAX - 16];
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/vgpu", xdg);
    else if (home && *home)
        snprintf(dir, sizeof dir, "%s/.local/state/vgpu", home);
    else {
        buf[0] = 0;
        return;
    }
    /* mkdir -p with 0700 for the parts we create. */
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0700);
            *p = '/';
        }
    mkdir(dir, 0700);
    /* Root writes its history there: not into a directory another user could change (a HOME
     * kept by sudo -E, vgpu/trust.h). Then no history, said once. */
    struct vgpu_err e;
    if (vgpu_trust_path(dir, xdg && *xdg ? "XDG_STATE_HOME" : "HOME", VGPU_TRUST_DIR, &e) != 0) {
        vgpu_warn("%s; no command history is kept", e.msg);
        buf[0] = 0;
        return;
    }
    snprintf(buf, len, "%s/history", dir);
}

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

static int sigint_hook(void)
{
    if (got_sigint) {
        got_sigint = 0;
        /* Ctrl-C at the prompt: abandon the line, like bash does. */
        rl_replace_line("", 0);
        rl_crlf();
        rl_on_new_line();
        rl_redisplay();
    }
    return 0;
}

static void make_prompt(char *buf, size_t len, unsigned ngpus, bool gpus_known)
{
    char host[64] = "localhost";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    int njobs = vgpu_complete_count_jobs();
    char g[24], j[24];
    if (gpus_known)
        snprintf(g, sizeof g, "%u GPU%s", ngpus, ngpus == 1 ? "" : "s");
    else
        snprintf(g, sizeof g, "no GPU");
    snprintf(j, sizeof j, "%d job%s", njobs, njobs == 1 ? "" : "s");
    snprintf(buf, len, "vgpu@%s [%s, %s]> ", host, g, j);
}

static int interactive(void)
{
    char hist[PATH_MAX];
    history_path(hist, sizeof hist);
    if (hist[0])
        read_history(hist);
    rl_readline_name = "vgpu";
    rl_attempted_completion_function = shell_completion;
    rl_signal_event_hook = sigint_hook;
    rl_catch_signals = 0;

    struct sigaction sa = { 0 }, old_int, old_quit;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    struct sigaction ign = { 0 };
    ign.sa_handler = SIG_IGN;
    sigaction(SIGQUIT, &ign, &old_quit);

    unsigned ngpus = 0;
    bool gpus_known = false;
    {
        struct vgpu_err e;
        struct vgpu_nvml *nv = vgpu_nvml_open(&e);
        if (nv) {
            gpus_known = nv->nvmlDeviceGetCount_v2(&ngpus) == NVML_SUCCESS;
            vgpu_nvml_close(nv);
        } else {
            fprintf(stderr, "vgpu shell: no GPU data: %s\n", e.msg);
        }
    }
    printf("vgpu %s shell: 'help' lists the commands, 'exit' or Ctrl-D leaves.\n", VGPU_VERSION);
    int rc = 0;
    for (;;) {
        char prompt[160];
        make_prompt(prompt, sizeof prompt, ngpus, gpus_known);
        got_sigint = 0;
        char *line = readline(prompt);
        if (!line) {
            putchar('\n');
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0 || *p == '#') {
            free(line);
            continue;
        }
        add_history(line);
        if (hist[0]) {
            /* Append at once, so history survives a killed shell and concurrent shells. */
            FILE *hf = fopen(hist, "a");
            if (hf) {
                fchmod(fileno(hf), 0600);
                fprintf(hf, "%s\n", line);
                fclose(hf);
            }
        }
        bool is_exit;
        rc = run_line(line, &is_exit);
        free(line);
        if (is_exit)
            break;
    }
    clear_completions();
    if (hist[0])
        history_truncate_file(hist, 1000);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return rc;
}

/* ---- scripts ---------------------------------------------------------------------------- */

static int script(FILE *in, const char *name, bool keep_going)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    unsigned lineno = 0;
    while (getline(&line, &cap, in) > 0) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == 0 || *p == '#')
            continue;
        bool is_exit;
        rc = run_line(p, &is_exit);
        if (is_exit)
            break;
        if (rc != 0 && !keep_going) {
            /* The script's name and line as escaped as any message's (log.h). */
            char qname[512], qline[1024];
            vgpu_escape_controls(name, strlen(name), qname, sizeof qname, false);
            vgpu_escape_controls(p, strlen(p), qline, sizeof qline, false);
            fprintf(stderr, "vgpu shell: %s:%u: '%s' failed with status %d; stopping (use -k to go on)\n", qname,
                    lineno, qline, rc);
            break;
        }
    }
    free(line);
    return rc;
}

static int cmd_shell(int argc, char **argv)
{
    bool keep_going = false;
    const char *command = NULL;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_shell, argc, argv, "kc:")) != -1) {
        switch (c) {
        case 'k': keep_going = true; break;
        case 'c': command = optarg; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    signal(SIGPIPE, SIG_DFL);
    if (command) {
        /* -c takes one command line: "vgpu shell -c list extra" would drop "extra". */
        if (optind < argc)
            return vgpu_usage_error(&vgpu_cmd_shell, "unexpected argument '%s': -c takes one command line; quote "
                                    "it whole, e.g. -c 'list --json'", argv[optind]);
        bool is_exit;
        return run_line(command, &is_exit);
    }
    if (optind < argc) {
        if (optind + 1 < argc)
            return vgpu_usage_error(&vgpu_cmd_shell, "unexpected argument '%s'", argv[optind + 1]);
        const char *path = argv[optind];
        FILE *f = fopen(path, "r");
        /* As vgpu mig apply: missing or not a file is a bad argument (2), no permission 6. */
        if (!f)
            return vgpu_fail(errno == EACCES || errno == EPERM ? VGPU_EXIT_PERMISSION
                             : errno == ENOENT || errno == ENOTDIR || errno == EISDIR ? VGPU_EXIT_USAGE : VGPU_EXIT_FAIL,
                             "cannot read the script %s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
            fclose(f);
            return vgpu_fail(VGPU_EXIT_USAGE, "cannot read the script %s: it is a directory; give a file of vgpu "
                             "command lines", path);
        }
        int rc = script(f, path, keep_going);
        if (ferror(f) && rc == 0)
            rc = vgpu_fail(VGPU_EXIT_FAIL, "cannot read the script %s: %s", path, strerror(errno));
        fclose(f);
        return rc;
    }
    if (isatty(STDIN_FILENO))
        return interactive();
    return script(stdin, "stdin", keep_going);
}

const struct vgpu_cmd vgpu_cmd_shell = {
    .name = "shell",
    .fn = cmd_shell,
    .summary = "an interactive console for vgpu commands, or a script runner",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .operand = VGPU_ARG_FILE,
};
