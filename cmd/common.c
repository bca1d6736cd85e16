/* Helpers every command uses: option parsing with "did you mean" (vgpu/closest.h), usage errors, help. */
#include "cmd.h"

#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "common.h"

const struct vgpu_cmd *vgpu_cmd_find(const char *name)
{
    for (size_t i = 0; vgpu_commands[i]; i++) {
        const struct vgpu_cmd *c = vgpu_commands[i];
        if (strcmp(c->name, name) == 0 || (c->alias && strcmp(c->alias, name) == 0))
            return c;
    }
    return NULL;
}

void vgpu_cmd_help(const struct vgpu_cmd *cmd, FILE *to)
{
    fputs(cmd->usage, to);
    size_t n = strlen(cmd->usage);
    if (n && cmd->usage[n - 1] != '\n')
        fputc('\n', to);
}

static int unknown_option(const struct vgpu_cmd *cmd, const char *bad)
{
    /* Candidates: every long option as "--name". */
    const char *cands[128];
    char store[128][48];
    size_t n = 0;
    for (const struct option *o = cmd->options; o && o->name && n < 128; o++) {
        snprintf(store[n], sizeof store[n], "--%s", o->name);
        cands[n] = store[n];
        n++;
    }
    char word[64];
    snprintf(word, sizeof word, "%s", bad);
    char *eq = strchr(word, '=');
    if (eq)
        *eq = 0;
    const char *best = vgpu_closest(word, cands, n);
    if (best)
        vgpu_fail(VGPU_EXIT_USAGE, "unknown option '%s'; did you mean '%s'? (see 'vgpu %s --help')", word, best,
                  cmd->name);
    else
        vgpu_fail(VGPU_EXIT_USAGE, "unknown option '%s' (see 'vgpu %s --help')", word, cmd->name);
    return '?';
}

int vgpu_getopt(const struct vgpu_cmd *cmd, int argc, char **argv, const char *shortopts)
{
    char spec[128];
    const char *s = shortopts ? shortopts : "";
    bool posix = *s == '+';
    snprintf(spec, sizeof spec, "%s:%s", posix ? "+" : "", posix ? s + 1 : s);
    opterr = 0;
    int prev = optind;
    int longidx = -1;
    int c = getopt_long(argc, argv, spec, cmd->options, &longidx);
    if (c == VGPU_OPT_HELP || (c == 'h' && strchr(s, 'h'))) {
        vgpu_cmd_help(cmd, stdout);
        return VGPU_OPT_HELP;
    }
    if (c == ':') {
        const char *arg = argv[optind - 1];
        if (optopt && !(arg[0] == '-' && arg[1] == '-'))
            vgpu_fail(VGPU_EXIT_USAGE, "option '-%c' needs a value (see 'vgpu %s --help')", optopt, cmd->name);
        else
            vgpu_fail(VGPU_EXIT_USAGE, "option '%s' needs a value (see 'vgpu %s --help')", arg, cmd->name);
        return '?';
    }
    if (c == '?') {
        const char *arg = optind - 1 < argc && optind - 1 >= prev ? argv[optind - 1] : NULL;
        if (optopt && !(arg && arg[0] == '-' && arg[1] == '-')) {
            char b[3] = { '-', (char)optopt, 0 };
            return unknown_option(cmd, b);
        }
        if (arg && arg[0] == '-' && arg[1] == '-') {
            /* An option that takes no value given one, or an unknown/ambiguous long option. */
            const char *eq = strchr(arg, '=');
            if (eq) {
                for (const struct option *o = cmd->options; o && o->name; o++)
                    if (strlen(o->name) == (size_t)(eq - arg - 2) && strncmp(o->name, arg + 2, (size_t)(eq - arg - 2)) == 0) {
                        vgpu_fail(VGPU_EXIT_USAGE, "option '--%s' takes no value (see 'vgpu %s --help')", o->name, cmd->name);
                        return '?';
                    }
            }
            return unknown_option(cmd, arg);
        }
        return unknown_option(cmd, arg ? arg : "?");
    }
    /* getopt_long takes the next word as a required value even when it is an option or the
     * "--" that ends them ("vgpu run --mem -- cmd" would make "--" the size): refuse it. */
    if (c != -1 && optarg && optarg[0] == '-' && optarg[1] == '-' && optind >= 2 && argv[optind - 1] == optarg) {
        const char *opt = argv[optind - 2];
        vgpu_fail(VGPU_EXIT_USAGE, "option '%s' needs a value, but it is followed by '%s' (see 'vgpu %s --help')", opt,
                  optarg, cmd->name);
        return '?';
    }
    return c;
}

int vgpu_usage_error(const struct vgpu_cmd *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vgpu_fail(VGPU_EXIT_USAGE, "%s (see 'vgpu %s --help')", msg, cmd->name);
}

int vgpu_unknown_word(const struct vgpu_cmd *cmd, const char *what, const char *bad,
                      const char *const *candidates)
{
    size_t n = 0;
    while (candidates[n])
        n++;
    const char *best = vgpu_closest(bad, candidates, n);
    if (best)
        return vgpu_fail(VGPU_EXIT_USAGE, "unknown %s '%s'; did you mean '%s'? (see 'vgpu %s --help')", what, bad,
                         best, cmd->name);
    /* Nothing close: say what is accepted instead of guessing. */
    char list[400] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                 candidates[i]);
    return vgpu_fail(VGPU_EXIT_USAGE, "unknown %s '%s': use %s (see 'vgpu %s --help')", what, bad, list, cmd->name);
}

bool vgpu_opt_once(const char **slot, const char *opt)
{
    if (*slot) {
        vgpu_fail(VGPU_EXIT_USAGE, "%s is given twice ('%s' and '%s'): give it once", opt, *slot, optarg);
        return false;
    }
    *slot = optarg;
    return true;
}

/* Moved from cmd/ps.c: vgpu acct names signals too. */
const char *vgpu_signal_name(int sig, char *buf, size_t len)
{
    static const struct { int sig; const char *name; } names[] = {
        { SIGHUP, "SIGHUP" }, { SIGINT, "SIGINT" }, { SIGQUIT, "SIGQUIT" }, { SIGILL, "SIGILL" },
        { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" }, { SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" },
        { SIGKILL, "SIGKILL" }, { SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
        { SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" }, { SIGXCPU, "SIGXCPU" },
        { SIGXFSZ, "SIGXFSZ" }, { SIGSYS, "SIGSYS" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, len, "SIG%d", sig);
    return buf;
}
