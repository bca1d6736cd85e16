/* settings.c: the Slurm plugin's rules (settings.h). */
#include "settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/exitcode.h"
#include "vgpu/units.h"

/* Slurm's special step ids (slurm.h): spelled out, so names read as Slurm prints them. */
#define STEP_PENDING     0xfffffffdu
#define STEP_EXTERN      0xfffffffcu
#define STEP_BATCH       0xfffffffbu
#define STEP_INTERACTIVE 0xfffffffau

static bool is_pct(const char *s)
{
    size_t n = strlen(s);
    return n && s[n - 1] == '%';
}

static int mem_syntax(const char *v, const char *what, uint64_t *bytes, unsigned *pct, struct vgpu_err *e);

/* --vgpu-mem=REQUEST:LIMIT (vgpu-run(1), lent memory): both parts' syntax, and REQUEST <= LIMIT
 * where both are sizes or both shares; *bytes / *pct are the LIMIT's (what a site maximum caps). */
static int mem_pair_syntax(const char *v, const char *what, uint64_t *bytes, unsigned *pct, struct vgpu_err *e)
{
    const char *colon = strchr(v, ':');
    char req[32];
    uint64_t rb;
    unsigned rp;
    if (colon == v || !colon[1] || strchr(colon + 1, ':') || (size_t)(colon - v) >= sizeof req) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s=%s: write REQUEST:LIMIT, two sizes (20G:100G), or one size", what, v);
        return -1;
    }
    snprintf(req, sizeof req, "%.*s", (int)(colon - v), v);
    if (mem_syntax(req, what, &rb, &rp, e) < 0 || mem_syntax(colon + 1, what, bytes, pct, e) < 0)
        return -1;
    if ((rb && *bytes && rb > *bytes) || (rp && *pct && rp > *pct)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s=%s: REQUEST is more than LIMIT; REQUEST is what each task is promised "
                     "and LIMIT its cap, so give REQUEST <= LIMIT", what, v);
        return -1;
    }
    return 0;
}

/* A memory value's syntax, without a GPU: SIZE (>= 1 MiB) or PCT% (1..100). */
static int mem_syntax(const char *v, const char *what, uint64_t *bytes, unsigned *pct, struct vgpu_err *e)
{
    *bytes = 0;
    *pct = 0;
    if (is_pct(v)) {
        char num[32];
        snprintf(num, sizeof num, "%.*s", (int)strlen(v) - 1, v);
        return vgpu_parse_percent_range(num, 1, 100, pct, what, e);
    }
    if (vgpu_parse_mem_limit(v, bytes, what, e) < 0)
        return -1;
    if (*bytes == 0) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: 0 is not a memory limit; give a size (4G) or a share (50%%)", what);
        return -1;
    }
    return 0;
}

static int policy_word(const char *v, enum vgpu_core_policy *p, const char *what, struct vgpu_err *e)
{
    if (strcmp(v, "hard") == 0)
        *p = VGPU_CORE_HARD;
    else if (strcmp(v, "soft") == 0)
        *p = VGPU_CORE_SOFT;
    else {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is not a policy; give hard or soft", what, v);
        return -1;
    }
    return 0;
}

int vgslurm_site_parse(struct vgslurm_site *site, int ac, char **av, const char *default_library, struct vgpu_err *e)
{
    memset(site, 0, sizeof *site);
    site->policy = VGPU_CORE_HARD;
    snprintf(site->library, sizeof site->library, "%s", default_library);
    for (int i = 0; i < ac; i++) {
        const char *eq = strchr(av[i], '=');
        if (!eq) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "plugstack.conf argument '%s' is not KEY=VALUE (keys: mem, max_mem, "
                         "core, max_core, policy, shards_per_gpu, library)", av[i]);
            return -1;
        }
        size_t kl = (size_t)(eq - av[i]);
        const char *v = eq + 1;
        char what[64];
        snprintf(what, sizeof what, "plugstack.conf %.*s", (int)kl, av[i]);
        uint64_t b;
        unsigned p;
#define KEY(k) (kl == strlen(k) && strncmp(av[i], k, kl) == 0)
        if (KEY("mem") || KEY("max_mem")) {
            if (mem_syntax(v, what, &b, &p, e) < 0)
                return -1;
            snprintf(KEY("mem") ? site->mem : site->max_mem, sizeof site->mem, "%s", v);
        } else if (KEY("core") || KEY("max_core")) {
            if (vgpu_parse_percent_range(v, 1, 100, &p, what, e) < 0)
                return -1;
            *(KEY("core") ? &site->core : &site->max_core) = p;
        } else if (KEY("policy")) {
            if (policy_word(v, &site->policy, what, e) < 0)
                return -1;
        } else if (KEY("shards_per_gpu")) {
            char *end;
            errno = 0;
            unsigned long n = strtoul(v, &end, 10);
            if (errno || end == v || *end || n < 1 || n > 100000 || v[0] == '-') {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is not a count of shards (1 or more, as gres.conf's "
                             "Count of shard per GPU)", what, v);
                return -1;
            }
            site->shards_per_gpu = (unsigned)n;
        } else if (KEY("library")) {
            if (v[0] != '/' || strlen(v) >= sizeof site->library) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is not an absolute path to libvgpu.so", what, v);
                return -1;
            }
            snprintf(site->library, sizeof site->library, "%s", v);
        } else {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "plugstack.conf: unknown argument '%.*s' (keys: mem, max_mem, core, "
                         "max_core, policy, shards_per_gpu, library)", (int)kl, av[i]);
            return -1;
        }
#undef KEY
    }
    /* The site's own default must be allowed by its own maximum. */
    if (site->core && site->max_core && site->core > site->max_core) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "plugstack.conf: core=%u is above max_core=%u", site->core, site->max_core);
        return -1;
    }
    return 0;
}

int vgslurm_opt_parse(struct vgslurm_opts *o, const struct vgslurm_site *site, const char *name, const char *val,
                    struct vgpu_err *e)
{
    char what[48];
    snprintf(what, sizeof what, "--%s", name);
    if (!val || !*val) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s needs a value", what);
        return -1;
    }
    if (strcmp(name, "vgpu-mem") == 0) {
        uint64_t b, mb;
        unsigned p, mp;
        if ((strchr(val, ':') ? mem_pair_syntax(val, what, &b, &p, e) : mem_syntax(val, what, &b, &p, e)) < 0)
            return -1;
        if (site->max_mem[0] && mem_syntax(site->max_mem, "max_mem", &mb, &mp, e) == 0 &&
            ((b && mb && b > mb) || (p && mp && p > mp))) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s=%s is above this site's maximum, %s", what, val, site->max_mem);
            return -1;
        }
        snprintf(o->mem, sizeof o->mem, "%s", val);
    } else if (strcmp(name, "vgpu-core") == 0) {
        unsigned p;
        if (vgpu_parse_percent_range(val, 1, 100, &p, what, e) < 0)
            return -1;
        if (site->max_core && p > site->max_core) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s=%u is above this site's maximum, %u", what, p, site->max_core);
            return -1;
        }
        o->core = p;
    } else if (strcmp(name, "vgpu-policy") == 0) {
        enum vgpu_core_policy p;
        if (policy_word(val, &p, what, e) < 0)
            return -1;
        o->policy = (int)p;
    } else {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "unknown option --%s", name);
        return -1;
    }
    return 0;
}

bool vgslurm_wants_limits(const struct vgslurm_site *site, const struct vgslurm_opts *o, unsigned shards)
{
    /* A site maximum limits every task with GPUs, also those that ask for nothing. */
    return o->mem[0] || o->core || site->mem[0] || site->core || site->max_mem[0] || site->max_core ||
           (shards && site->shards_per_gpu);
}

int vgslurm_task_limits(const struct vgslurm_site *site, const struct vgslurm_opts *o, unsigned shards, uint64_t total,
                      const char *gpu_desc, uint64_t *mem, unsigned *core, enum vgpu_core_policy *policy,
                      struct vgpu_err *e)
{
    *mem = 0;
    *core = 0;
    *policy = o->policy >= 0 ? (enum vgpu_core_policy)o->policy : site->policy;
    bool by_shards = shards && site->shards_per_gpu;
    /* Memory: the option, else the shards' share, else the site default. */
    if (o->mem[0]) {
        uint64_t req;   /* vgslurm_task_request's */
        if (vgpu_mem_request_limit(o->mem, total, gpu_desc, false, &req, mem, e) < 0)
            return -1;
    } else if (by_shards) {
        if (shards > site->shards_per_gpu) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "the step has %u shards on %s, more than shards_per_gpu=%u in "
                         "plugstack.conf: make it gres.conf's Count of shard per GPU", shards, gpu_desc,
                         site->shards_per_gpu);
            return -1;
        }
        /* Whole MiB, rounded down, so that N shards of N always fit. */
        *mem = (uint64_t)((__uint128_t)total * shards / site->shards_per_gpu) & ~(uint64_t)(1024 * 1024 - 1);
    } else if (site->mem[0]) {
        if (vgpu_mem_limit_value(site->mem, total, gpu_desc, false, mem, e) < 0)
            return -1;
    }
    if (o->core)
        *core = o->core;
    else if (by_shards)
        *core = shards * 100 / site->shards_per_gpu ? shards * 100 / site->shards_per_gpu : 1;
    else
        *core = site->core;
    if (*core >= 100)
        *core = 0;                      /* the whole GPU: no cap */
    if (site->max_mem[0]) {
        uint64_t max;
        if (vgpu_mem_limit_value(site->max_mem, total, gpu_desc, false, &max, e) < 0)
            return -1;
        if (*mem == 0 || *mem > max) {
            char a[32], b[32];
            if (*mem == 0 && !o->mem[0]) {
                *mem = max;             /* no limit asked: the maximum is the limit */
            } else {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "--vgpu-mem: %s on %s is above this site's maximum, %s",
                             vgpu_format_size(*mem, a, sizeof a), gpu_desc, vgpu_format_size(max, b, sizeof b));
                return -1;
            }
        }
    }
    if (site->max_core && site->max_core < 100) {
        if (*core == 0 && !o->core)
            *core = site->max_core;
        else if (*core == 0 || *core > site->max_core) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "--vgpu-core: %u%% is above this site's maximum, %u%%",
                         *core ? *core : 100, site->max_core);
            return -1;
        }
    }
    return 0;
}

int vgslurm_task_request(const struct vgslurm_opts *o, uint64_t total, const char *gpu_desc, uint64_t limit,
                         uint64_t *request, struct vgpu_err *e)
{
    uint64_t lim;
    *request = 0;
    if (!o->mem[0] || !strchr(o->mem, ':'))
        return 0;
    if (vgpu_mem_request_limit(o->mem, total, gpu_desc, false, request, &lim, e) < 0)
        return -1;
    if (lim != limit || *request >= limit)
        *request = 0;   /* the LIMIT was not the task's (a site maximum decided it): nothing lent */
    return 0;
}

void vgslurm_job_name(char *buf, size_t len, uint32_t job, uint32_t step, uint32_t task)
{
    char s[16];
    switch (step) {
    case STEP_BATCH: snprintf(s, sizeof s, "batch"); break;
    case STEP_EXTERN: snprintf(s, sizeof s, "extern"); break;
    case STEP_INTERACTIVE: snprintf(s, sizeof s, "interactive"); break;
    case STEP_PENDING: snprintf(s, sizeof s, "pending"); break;
    default: snprintf(s, sizeof s, "%u", step); break;
    }
    snprintf(buf, len, "slurm-%u.%s.%u", job, s, task);
}
