/* vgpu limit: change a running job's limits, live. */
static const char usage[] =
    "usage: vgpu limit JOB [--mem SIZE|PCT%|REQUEST:LIMIT|none] [--core PCT|none] [--gpu IDX]\n"
    "\n"
    "Change the limits of a running job (by id, unique id prefix, or name; see vgpu ps). The\n"
    "job's processes see the new limit at their next allocation. Lowering the memory limit\n"
    "below what the job uses is allowed: nothing is taken away, but new allocations fail until\n"
    "its use drops below the limit. Lowering a REQUEST below use is allowed too: the excess\n"
    "counts as borrowed from then on.\n"
    "\n"
    "  --mem SIZE    new memory limit: 4G, 4Gi, 512MiB ...; PCT% of the GPU's total;\n"
    "                none to remove it; SIZE alone is SIZE:SIZE (nothing lent)\n"
    "  --mem REQUEST:LIMIT  what the job is promised and its cap (20G:100G, vgpu-run(1));\n"
    "                REQUEST: or :LIMIT changes one part and keeps the other\n"
    "  --core PCT    new GPU time cap in percent; none to remove it\n"
    "  --gpu IDX     only this GPU of the job (counted from 0 in the job's order, as in\n"
    "                vgpu ps --json job_index); default: every GPU of the job\n"
    "  --help        show this help\n"
    "\n"
    "Only the job's owner and root may change it.\n"
    "\n"
    "JOB is looked up as an exact id, then a name, then a unique id start; a word that names\n"
    "one job and starts another's id is ambiguous (an error: give the full id).\n"
    "\n"
    "Exit status: 0 changed; 2 bad option, size or GPU, or an ambiguous JOB; 6 another user's\n"
    "job; 8 no such job (or it has ended); 11 the job's region file is damaged (which,\n"
    "and why).\n";

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"
#include "vgpu/region.h"
#include "vgpu/userjobs.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_limit;

static const struct option options[] = {
    { "mem", required_argument, NULL, 'm' },
    { "core", required_argument, NULL, 'c' },
    { "gpu", required_argument, NULL, 'g' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "mem", VGPU_ARG_SIZE, NULL },
    { "core", VGPU_ARG_PERCENT, NULL },
    { "gpu", VGPU_ARG_OTHER, NULL },
    { NULL, 0, NULL },
};

/* The new memory limit for one job GPU: 0 means none (cmd/common.c: the check vgpu run and
 * vgpu top's 'm' key share), and *req its REQUEST (== *out: nothing lent). REQUEST:LIMIT with
 * one part empty keeps that part as it is. */
static int mem_for(const struct vgpu_region *r, unsigned d, const char *text, uint64_t *req, uint64_t *out,
                   struct vgpu_err *e)
{
    char desc[160];
    snprintf(desc, sizeof desc, "the job's GPU %u (%s)", d, r->info->dev[d].uuid);
    /* An oversubscribed job's limit is its cap, which may exceed the GPU (vgpu run --oversubscribe). */
    bool pct = *text && text[strlen(text) - 1] == '%';
    bool virt = vgpu_region_oversub(r, d, NULL) && !pct;
    uint64_t total = virt ? 0 : r->hdr->dev[d].mem_total;
    const char *colon = strchr(text, ':');
    if (colon && vgpu_region_oversub(r, d, NULL)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s: job %s runs with --oversubscribe, which cannot also borrow "
                     "(REQUEST:LIMIT); give one size", text, r->info->id);
        return -1;
    }
    if (!colon || (colon != text && colon[1]))
        return vgpu_mem_request_limit(text, total, desc, true, req, out, e);
    /* One part given: the other is the job's now. */
    char both[160];
    uint64_t cur_req = vgpu_region_mem_request(r, d), cur_lim = vgpu_region_mem_limit(r, d);
    if (colon == text && colon[1] == 0) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem ':': give REQUEST:LIMIT, REQUEST: or :LIMIT");
        return -1;
    }
    if (!cur_lim) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s: the job has no memory limit on GPU %u to keep a part of; give "
                     "REQUEST:LIMIT", text, d);
        return -1;
    }
    if (colon == text)
        snprintf(both, sizeof both, "%lluB:%s", (unsigned long long)cur_req, colon + 1);
    else
        snprintf(both, sizeof both, "%.*s:%lluB", (int)(colon - text), text, (unsigned long long)cur_lim);
    return vgpu_mem_request_limit(both, total, desc, false, req, out, e);
}

static int cmd_limit(int argc, char **argv)
{
    const char *mem = NULL, *core = NULL, *gpu = NULL;
    int c;
    while ((c = vgpu_getopt(&vgpu_cmd_limit, argc, argv, "")) != -1) {
        switch (c) {
        case 'm': mem = optarg; break;
        case 'c': core = optarg; break;
        case 'g': gpu = optarg; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return vgpu_usage_error(&vgpu_cmd_limit, "which job? give its id or name (see vgpu ps)");
    if (optind + 1 < argc)
        return vgpu_usage_error(&vgpu_cmd_limit, "unexpected argument '%s' (one job at a time)", argv[optind + 1]);
    if (!mem && !core)
        return vgpu_usage_error(&vgpu_cmd_limit, "nothing to change: give --mem and/or --core");
    const char *job = argv[optind];

    struct vgpu_err e;
    unsigned pct = 0;
    if (core && strcasecmp(core, "none") != 0) {
        /* 0 would stop the job: the range is 1..100, or none. */
        if (vgpu_parse_percent_range(core, 1, 100, &pct, "--core", &e) < 0)
            return vgpu_fail(VGPU_EXIT_USAGE, "%s, or none to remove the limit", e.msg);
    }
    char statedir[4096];
    if (vgpu_statedir_or_none(statedir, sizeof statedir, &e) < 0)
        return vgpu_err_report(&e);
    struct vgpu_region r;
    if (vgpu_jobs_find_all(statedir, job, VGPU_REGION_ADMIN, &r, &e) < 0)
        return vgpu_err_report(&e);
    if (atomic_load(&r.hdr->state) == VGPU_JOB_EXITED) {
        /* Kept a while for vgpu ps and vgpu wait only: there is nothing left to limit. */
        int rc = vgpu_fail(VGPU_EXIT_NOT_FOUND, "job %s has ended: it has no limits to change", r.info->id);
        vgpu_region_close(&r);
        return rc;
    }

    unsigned ndev = vgpu_region_device_count(&r), first = 0, last = ndev - 1;
    if (gpu) {
        char *end;
        errno = 0;
        unsigned long idx = strtoul(gpu, &end, 10);
        if (!*gpu || *end || errno || gpu[0] < '0' || gpu[0] > '9' || idx >= ndev) {
            vgpu_region_close(&r);
            return vgpu_fail(VGPU_EXIT_USAGE, "--gpu '%s': job %s has %u GPU%s, numbered 0..%u in the job's order", gpu,
                             job, ndev, ndev == 1 ? "" : "s", ndev - 1);
        }
        first = last = (unsigned)idx;
    }
    uint64_t newmem[VGPU_REGION_MAX_DEVICES], newreq[VGPU_REGION_MAX_DEVICES];
    int rc = 0;
    /* Validate everything before changing anything. */
    for (unsigned d = first; mem && d <= last && rc == 0; d++)
        if (mem_for(&r, d, mem, &newreq[d], &newmem[d], &e) < 0)
            rc = vgpu_err_report(&e);
    for (unsigned d = first; rc == 0 && d <= last; d++) {
        char a[32], b[32], u[32];
        if (mem) {
            uint64_t old = vgpu_region_mem_limit(&r, d), old_req = vgpu_region_mem_request(&r, d);
            bool lent_before = vgpu_region_lending(&r, d, NULL);
            if (vgpu_region_set_mem(&r, d, newreq[d], newmem[d], &e) < 0) {
                rc = vgpu_err_report(&e);
                break;
            }
            printf("job %s GPU %u: memory limit %s (was %s)\n", r.info->id, d,
                   newmem[d] ? vgpu_format_size(newmem[d], a, sizeof a) : "none",
                   old ? vgpu_format_size(old, b, sizeof b) : "none");
            if (vgpu_region_lending(&r, d, NULL) || lent_before)
                printf("job %s GPU %u: memory request %s (was %s)\n", r.info->id, d,
                       newmem[d] ? vgpu_format_size(vgpu_region_mem_request(&r, d), a, sizeof a) : "none",
                       old_req ? vgpu_format_size(old_req, b, sizeof b) : "none");
            uint64_t borrowed = vgpu_region_mem_borrowed(&r, d);
            if (borrowed)
                printf("job %s GPU %u: %s of its use is past the request, borrowed from now on\n", r.info->id, d,
                       vgpu_format_size(borrowed, u, sizeof u));
            uint64_t used = vgpu_region_mem_used(&r, d);
            if (newmem[d] && used > newmem[d])
                vgpu_warn("job %s uses %s on GPU %u, more than the new limit: nothing is taken away, but its new "
                          "allocations there will fail until its use drops below %s",
                          r.info->id, vgpu_format_size(used, u, sizeof u), d, vgpu_format_size(newmem[d], a, sizeof a));
        }
        if (core) {
            uint32_t old = atomic_load(&r.hdr->dev[d].core_limit);
            if (vgpu_region_set_core_limit(&r, d, pct, VGPU_CORE_HARD, &e) < 0) {
                rc = vgpu_err_report(&e);
                break;
            }
            char was[16];
            if (old)
                snprintf(was, sizeof was, "%u%%", (unsigned)old);
            else
                snprintf(was, sizeof was, "none");
            if (pct)
                printf("job %s GPU %u: core limit %u%% (was %s)\n", r.info->id, d, pct, was);
            else
                printf("job %s GPU %u: core limit none (was %s)\n", r.info->id, d, was);
        }
    }
    vgpu_region_close(&r);
    if (rc == 0 && fflush(stdout) == EOF)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
    return rc;
}

const struct vgpu_cmd vgpu_cmd_limit = {
    .name = "limit",
    .fn = cmd_limit,
    .summary = "change a running job's memory or core limit, live",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .operand = VGPU_ARG_JOB,
};
