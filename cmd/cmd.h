/* The command table: every subcommand is one file cmd/NAME.c that defines
 *     const struct vgpu_cmd vgpu_cmd_NAME = { ... };
 * The Makefile collects them into vgpu_commands[] (build/gen/cmdtable.c), so help, the
 * busybox-style dispatch, unknown-option suggestions and the shell completions are all
 * generated from this one table and cannot drift apart. */
#ifndef VGPU_CMD_H
#define VGPU_CMD_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/* What an option's or an operand's value is, so completion can offer candidates. */
enum vgpu_arg_kind {
    VGPU_ARG_NONE = 0,
    VGPU_ARG_GPU,       /* GPU selector: index, UUID, PCI bus id, MIG UUID, all */
    VGPU_ARG_JOB,       /* job id or name */
    VGPU_ARG_SIZE,      /* 4G, 512MiB, ... */
    VGPU_ARG_PERCENT,
    VGPU_ARG_FILE,
    VGPU_ARG_DIR,
    VGPU_ARG_COMMAND,   /* a program and its arguments (vgpu run) */
    VGPU_ARG_PROFILE,   /* MIG profile name */
    VGPU_ARG_WORD,      /* one of a fixed list: see vgpu_opt_doc.words */
    VGPU_ARG_OTHER,
};

/* Completion metadata for one long option (matched by name with the getopt table). */
struct vgpu_opt_doc {
    const char *name;            /* long option name without "--" */
    enum vgpu_arg_kind kind;
    const char *words;           /* for VGPU_ARG_WORD: space-separated choices */
};

/* A verb of a command with verbs (vgpu mig create ...). */
struct vgpu_verb {
    const char *name;
    const char *summary;
    enum vgpu_arg_kind operand;  /* what the verb's operands are */
    const char *words;           /* for VGPU_ARG_WORD operands */
};

struct vgpu_cmd {
    const char *name;
    const char *alias;                   /* another name it answers to, or NULL */
    int (*fn)(int argc, char **argv);    /* argv[0] is the command name */
    const char *summary;                 /* one line, for `vgpu help` */
    const char *usage;                   /* the whole --help text */
    const struct option *options;        /* the getopt_long table the command parses with */
    const struct vgpu_opt_doc *optdocs;  /* value kinds of options, for completion (may be NULL) */
    const struct vgpu_verb *verbs;       /* NULL-name terminated, or NULL */
    enum vgpu_arg_kind operand;          /* what plain operands are (when no verbs) */
    unsigned flags;
};

/* Every command's getopt table has VGPU_OPTION_HELP; vgpu_getopt() prints the usage and
 * returns VGPU_OPT_HELP, and the command returns 0. */
#define VGPU_OPT_HELP 0x7001
#define VGPU_OPTION_HELP { "help", no_argument, NULL, VGPU_OPT_HELP }
#define VGPU_OPTION_END  { NULL, 0, NULL, 0 }

/* flags */
#define VGPU_CMD_HIDDEN 0x1   /* internal (completion helpers): not listed by `vgpu help` */

extern const struct vgpu_cmd *const vgpu_commands[];

const struct vgpu_cmd *vgpu_cmd_find(const char *name);

/* Parses a command's options with getopt_long on cmd->options; handles --help itself.
 * Returns the option character as getopt_long does, -1 at the end, VGPU_OPT_HELP after
 * printing the usage (also for -h when shortopts contains 'h'), and for an unknown or
 * malformed option prints an error naming the closest valid option and returns '?'
 * (the command then returns VGPU_EXIT_USAGE).
 * Commands call it in a loop exactly like getopt_long, with a short-options string. */
int vgpu_getopt(const struct vgpu_cmd *cmd, int argc, char **argv, const char *shortopts);

/* Error for a bad operand or verb: names the closest of the candidates; returns 2. */
int vgpu_usage_error(const struct vgpu_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int vgpu_unknown_word(const struct vgpu_cmd *cmd, const char *what, const char *bad,
                      const char *const *candidates);

/* An option that takes a value may be given once: "--mem 1G --mem 2G" is a slip (an edited
 * command line, a wrapper adding its own), and taking the last silently uses a value its user
 * did not check. Stores optarg in *slot and returns true the first time; the second time
 * prints "OPT is given twice ('A' and 'B'): give it once" and returns false (the command then
 * fails with its usage status). */
bool vgpu_opt_once(const char **slot, const char *opt);

/* Prints the usage text. */
void vgpu_cmd_help(const struct vgpu_cmd *cmd, FILE *to);

#endif
