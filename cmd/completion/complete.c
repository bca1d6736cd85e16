/* Completion candidates from the command table: commands, verbs, long options from the getopt
 * tables, and option values by kind (GPUs from NVML, jobs from the state directory, MIG
 * profiles of the GPUs). Never fails loudly: completion must stay quiet. */
#include "completion/complete.h"

#include <stdlib.h>
#include <string.h>

#include "vgpu/gpu.h"
#include "vgpu/nvml.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"

static void emit_words(const char *words, FILE *to)
{
    if (!words)
        return;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", words);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        fprintf(to, "%s\n", w);
}

static void emit_gpus(FILE *to)
{
    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return;
    struct vgpu_gpu_list *list = calloc(1, sizeof *list);
    if (list && vgpu_gpus_enumerate(nv, list, &e) == 0) {
        for (unsigned i = 0; i < list->count; i++)
            if (!list->gpu[i].is_mig)
                fprintf(to, "%u\n", list->gpu[i].index);
        for (unsigned i = 0; i < list->count; i++)
            fprintf(to, "%s\n", list->gpu[i].uuid);
        fprintf(to, "all\n");
    }
    free(list);
    vgpu_nvml_close(nv);
}

/* The jobs the caller can see; NULL when there is no state directory yet. */
static struct vgpu_job_ref *list_jobs(size_t *count)
{
    char dir[4096];
    struct vgpu_err e;
    struct vgpu_job_ref *jobs = NULL;
    *count = 0;
    if (vgpu_statedir(dir, sizeof dir, false, &e) < 0)
        return NULL;
    if (vgpu_jobs_list_all(dir, &jobs, count, NULL, &e) < 0)
        return NULL;
    return jobs;
}

void vgpu_complete_jobs(FILE *to)
{
    size_t n;
    struct vgpu_job_ref *jobs = list_jobs(&n);
    for (size_t i = 0; i < n; i++) {
        fprintf(to, "%s\n", jobs[i].id);
        if (jobs[i].name[0])
            fprintf(to, "%s\n", jobs[i].name);
    }
    free(jobs);
}

int vgpu_complete_count_jobs(void)
{
    /* The jobs that have not ended, as vgpu top counts them: an ended job is only kept a
     * while for vgpu wait. */
    size_t n, live = 0;
    struct vgpu_job_ref *jobs = list_jobs(&n);
    for (size_t i = 0; jobs && i < n; i++)
        live += jobs[i].readable && jobs[i].state != VGPU_JOB_EXITED;
    free(jobs);
    return (int)live;
}

void vgpu_complete_profiles(FILE *to)
{
    struct vgpu_err e;
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    if (!nv)
        return;
    unsigned count = 0;
    if (nv->nvmlDeviceGetGpuInstanceProfileInfoV && nv->nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS) {
        for (unsigned i = 0; i < count; i++) {
            nvmlDevice_t h;
            if (nv->nvmlDeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS)
                continue;
            /* Profile indexes until INVALID_ARGUMENT; NOT_SUPPORTED ones are skipped. */
            for (unsigned idx = 0; idx < 32; idx++) {
                nvmlGpuInstanceProfileInfo_v2_t info;
                memset(&info, 0, sizeof info);
                info.version = nvmlGpuInstanceProfileInfo_v2;
                nvmlReturn_t rc = nv->nvmlDeviceGetGpuInstanceProfileInfoV(h, idx, &info);
                if (rc == NVML_ERROR_INVALID_ARGUMENT)
                    break;
                if (rc != NVML_SUCCESS)
                    continue;
                /* Driver names read "MIG 1g.10gb"; users type "1g.10gb". */
                const char *n = strncmp(info.name, "MIG ", 4) == 0 ? info.name + 4 : info.name;
                fprintf(to, "%s\n", n);
            }
        }
    }
    vgpu_nvml_close(nv);
}

void vgpu_complete_kind(enum vgpu_arg_kind kind, const char *words, FILE *to)
{
    switch (kind) {
    case VGPU_ARG_GPU: emit_gpus(to); break;
    case VGPU_ARG_JOB: vgpu_complete_jobs(to); break;
    case VGPU_ARG_PROFILE: vgpu_complete_profiles(to); break;
    case VGPU_ARG_FILE: fputs("@files\n", to); break;
    case VGPU_ARG_DIR: fputs("@dirs\n", to); break;
    case VGPU_ARG_COMMAND: fputs("@commands\n", to); break;
    case VGPU_ARG_WORD: emit_words(words, to); break;
    default: break;
    }
}

static const struct vgpu_opt_doc *optdoc(const struct vgpu_cmd *c, const char *name)
{
    for (const struct vgpu_opt_doc *d = c->optdocs; d && d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

static const struct option *find_long(const struct vgpu_cmd *c, const char *name)
{
    for (const struct option *o = c->options; o && o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static void emit_commands(FILE *to)
{
    for (size_t i = 0; vgpu_commands[i]; i++) {
        if (vgpu_commands[i]->flags & VGPU_CMD_HIDDEN)
            continue;
        fprintf(to, "%s\n", vgpu_commands[i]->name);
        if (vgpu_commands[i]->alias)
            fprintf(to, "%s\n", vgpu_commands[i]->alias);
    }
    fprintf(to, "help\n");
}

int vgpu_complete_words(int cword, int nwords, char **words, FILE *to)
{
    if (cword < 1 || cword > nwords)
        return 0;
    const char *cur = cword < nwords ? words[cword] : "";
    const char *prog = strrchr(words[0], '/') ? strrchr(words[0], '/') + 1 : words[0];
    const struct vgpu_cmd *c = NULL;
    int first = 1; /* first word after the command name */
    if (strncmp(prog, "vgpu-", 5) == 0) {
        c = vgpu_cmd_find(prog + 5);
    } else {
        if (cword == 1) {
            emit_commands(to);
            return 0;
        }
        if (strcmp(words[1], "help") == 0) {
            if (cword == 2)
                emit_commands(to);
            return 0;
        }
        c = vgpu_cmd_find(words[1]);
        first = 2;
    }
    if (!c)
        return 0;

    /* Walk the words before the cursor: options (and their values), the verb, "--". */
    const char *verb = NULL;
    int operands = 0;
    bool dashdash = false;
    for (int i = first; i < cword; i++) {
        const char *w = words[i];
        if (!dashdash && strcmp(w, "--") == 0) {
            dashdash = true;
            continue;
        }
        if (!dashdash && w[0] == '-' && w[1] == '-' && !strchr(w, '=')) {
            const struct option *o = find_long(c, w + 2);
            if (o && o->has_arg == required_argument)
                i++; /* skip its value */
            continue;
        }
        if (!dashdash && w[0] == '-' && w[1])
            continue;
        if (c->verbs && !verb)
            verb = w;
        else
            operands++;
    }
    /* The value of an option? */
    const char *prev = cword > first ? words[cword - 1] : "";
    if (prev[0] == '-' && prev[1] == '-' && !dashdash) {
        const struct option *o = find_long(c, prev + 2);
        if (o && o->has_arg == required_argument) {
            const struct vgpu_opt_doc *d = optdoc(c, o->name);
            if (d)
                vgpu_complete_kind(d->kind, d->words, to);
            return 0;
        }
    }
    if (cur[0] == '-' && !dashdash) {
        for (const struct option *o = c->options; o && o->name; o++)
            fprintf(to, "--%s\n", o->name);
        return 0;
    }
    if (c->verbs && !verb) {
        for (const struct vgpu_verb *v = c->verbs; v->name; v++)
            fprintf(to, "%s\n", v->name);
        return 0;
    }
    if (verb && c->verbs) {
        for (const struct vgpu_verb *v = c->verbs; v->name; v++)
            if (strcmp(v->name, verb) == 0)
                vgpu_complete_kind(v->operand, v->words, to);
        return 0;
    }
    /* A command operand: for `vgpu run` the first is a program, later ones its arguments. */
    if (c->operand == VGPU_ARG_COMMAND && operands > 0)
        fputs("@files\n", to);
    else
        vgpu_complete_kind(c->operand, NULL, to);
    return 0;
}
