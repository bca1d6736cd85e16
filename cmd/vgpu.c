/* vgpu: the multi-call binary. `vgpu CMD ARGS...`, or a link named `vgpu-CMD` (busybox style).
 * The command table is generated from the files in cmd/ (see cmd/cmd.h). */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "common.h"
#include "main.h"
#include "run/adopt.h"
#include "vgpu/acct.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/trust.h"

static void print_commands(FILE *to)
{
    fprintf(to,
            "usage: vgpu COMMAND [OPTIONS] [ARGS...]\n"
            "       vgpu-COMMAND [OPTIONS] [ARGS...]   (a link named vgpu-COMMAND runs COMMAND)\n"
            "\n"
            "Share NVIDIA GPUs between jobs on one machine: memory and GPU-time limits, MIG\n"
            "partitions, driver policies, and a live view of all of it.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; vgpu_commands[i]; i++) {
        const struct vgpu_cmd *c = vgpu_commands[i];
        if (c->flags & VGPU_CMD_HIDDEN)
            continue;
        char name[40];
        if (c->alias)
            snprintf(name, sizeof name, "%s, %s", c->name, c->alias);
        else
            snprintf(name, sizeof name, "%s", c->name);
        fprintf(to, "  %-14s %s\n", name, c->summary);
    }
    fprintf(to,
            "  %-14s %s\n"
            "\n"
            "'vgpu help COMMAND' or 'vgpu COMMAND --help' shows a command's usage; 'man vgpu-COMMAND'\n"
            "has the details. 'vgpu --version' prints the version.\n",
            "help", "show this list, or a command's usage");
}

static int unknown_command(const char *name)
{
    const char *cands[128];
    size_t n = 0;
    for (size_t i = 0; vgpu_commands[i] && n < 120; i++) {
        if (vgpu_commands[i]->flags & VGPU_CMD_HIDDEN)
            continue;
        cands[n++] = vgpu_commands[i]->name;
        if (vgpu_commands[i]->alias)
            cands[n++] = vgpu_commands[i]->alias;
    }
    cands[n++] = "help";
    const char *best = vgpu_closest(name, cands, n);
    if (best)
        return vgpu_fail(VGPU_EXIT_USAGE, "'%s' is not a vgpu command; did you mean '%s'? (see 'vgpu help')", name, best);
    return vgpu_fail(VGPU_EXIT_USAGE, "'%s' is not a vgpu command (see 'vgpu help')", name);
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_commands(stdout);
        return 0;
    }
    /* "vgpu help help", "vgpu help --help", "vgpu-help --help": help is a command too. */
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_commands(stdout);
        return 0;
    }
    if (argc > 2)
        return vgpu_fail(VGPU_EXIT_USAGE, "unexpected argument '%s': vgpu help takes one command (see 'vgpu help')",
                         argv[2]);
    const struct vgpu_cmd *c = vgpu_cmd_find(argv[1]);
    if (!c)
        return unknown_command(argv[1]);
    vgpu_cmd_help(c, stdout);
    printf("\nSee 'man vgpu-%s' for details.\n", c->name);
    return 0;
}

static int run_command(const struct vgpu_cmd *c, int argc, char **argv)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "vgpu %s", c->name);
    vgpu_log_set_prefix(prefix);
    /* Reads VGPU_LOG now, so that a bad value is said by every command, not only by one that
     * happens to log something (vgpu ps said nothing). It is read once a process. */
    (void)vgpu_log_level();
    argv[0] = (char *)c->name;
    /* Root first checks every path its environment names (vgpu/trust.h): sudo -E keeps VGPU_*
     * variables, and a command need not use one for the refusal to be right (the next may). */
    struct vgpu_err e;
    if (vgpu_trust_env(&e) != 0) {
        vgpu_err_report(&e);
        return strcmp(c->name, "run") == 0 ? VGPU_EXIT_RUN_FAILED : e.code;
    }
    optind = 0; /* getopt_long: full reinitialisation, so a shell can run many commands */
    return c->fn(argc, argv);
}

int vgpu_main(int argc, char **argv)
{
    vgpu_log_set_prefix("vgpu");
    /* An ended job that vgpu run could not record is recorded by whoever removes it. */
    vgpu_jobs_on_ended(vgpu_acct_recover);
    /* A running job whose vgpu run was killed is adopted by its owner's next listing. */
    vgpu_jobs_on_orphan(vgpu_run_adopt);
    char self[256];
    snprintf(self, sizeof self, "%s", argc > 0 && argv[0] ? argv[0] : "vgpu");
    const char *base = basename(self);
    if (*base == '-')
        base++; /* login-shell style names */

    /* Busybox style: a link named vgpu-CMD runs CMD. */
    if (strncmp(base, "vgpu-", 5) == 0) {
        if (strcmp(base + 5, "help") == 0)
            return cmd_help(argc, argv);
        const struct vgpu_cmd *c = vgpu_cmd_find(base + 5);
        if (!c)
            return unknown_command(base + 5);
        return run_command(c, argc, argv);
    }

    if (argc < 2) {
        print_commands(stderr);
        return VGPU_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0) {
        printf("vgpu %s\n", VGPU_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return cmd_help(argc - 1, argv + 1);
    if (cmd[0] == '-') {
        const char *cands[] = { "--help", "--version" };
        const char *best = vgpu_closest(cmd, cands, 2);
        if (best)
            return vgpu_fail(VGPU_EXIT_USAGE, "unknown option '%s'; did you mean '%s'? (see 'vgpu help')", cmd, best);
        return vgpu_fail(VGPU_EXIT_USAGE, "unknown option '%s' (see 'vgpu help')", cmd);
    }
    const struct vgpu_cmd *c = vgpu_cmd_find(cmd);
    if (!c)
        return unknown_command(cmd);
    return run_command(c, argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    return vgpu_main(argc, argv);
}
