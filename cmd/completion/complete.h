/* Completion candidates computed from the command table (cmd/completion.c uses it; so does
 * the readline completion of `vgpu shell`). */
#ifndef VGPU_COMPLETE_H
#define VGPU_COMPLETE_H

#include <stdio.h>
#include "cmd.h"

/* Prints the candidates for words[cword] (words[0] is the program name), one per line.
 * Special lines: "@files", "@dirs", "@commands" ask the shell for its own completion. */
int vgpu_complete_words(int cword, int nwords, char **words, FILE *to);

/* Prints the candidates of one kind (GPUs, jobs, MIG profiles...). */
void vgpu_complete_kind(enum vgpu_arg_kind kind, const char *words, FILE *to);

/* Job ids and names from the state directory; MIG profile names of the GPUs (from NVML). */
void vgpu_complete_jobs(FILE *to);
void vgpu_complete_profiles(FILE *to);
/* The number of live jobs the caller can see (for the shell prompt); 0 when unknown. */
/* The caller's jobs that have not ended (the shell's prompt). */
int vgpu_complete_count_jobs(void);

#endif
