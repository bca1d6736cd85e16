/* GPU enumeration through NVML and `--gpu` selection (see vgpu/gpu.h). */
#include "vgpu/gpu.h"
#include "vgpu/watchdog.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vgpu/exitcode.h"
#include "vgpu/nvml.h"

static void fill_memory(struct vgpu_nvml *nv, nvmlDevice_t h, struct vgpu_gpu *g)
{
    /* v2 is what nvidia-smi shows (used excludes the driver's reservation); v1 is the fallback. */
    if (nv->nvmlDeviceGetMemoryInfo_v2) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        if (nv->nvmlDeviceGetMemoryInfo_v2(h, &m) == NVML_SUCCESS) {
            g->mem_total = m.total;
            g->mem_used = m.used;
            g->mem_reserved = m.reserved;
            return;
        }
    }
    nvmlMemory_t m1;
    if (nv->nvmlDeviceGetMemoryInfo(h, &m1) == NVML_SUCCESS) {
        g->mem_total = m1.total;
        g->mem_used = m1.used;
    }
}

static void fill_common(struct vgpu_nvml *nv, nvmlDevice_t h, struct vgpu_gpu *g)
{
    g->handle = h;
    g->compute_mode = -1;
    /* A lost GPU still has a handle, but every query answers GPU_IS_LOST: say so, rather
     * than show a row of empty fields as if it were a GPU without a name. */
    nvmlReturn_t rc = nv->nvmlDeviceGetUUID(h, g->uuid, sizeof g->uuid);
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        g->uuid[0] = 0;
        g->lost = true;
        return;
    }
    if (rc != NVML_SUCCESS)
        g->uuid[0] = 0;
    if (nv->nvmlDeviceGetName(h, g->name, sizeof g->name) != NVML_SUCCESS)
        g->name[0] = 0;
    fill_memory(nv, h, g);
    if (nv->nvmlDeviceGetComputeMode) {
        nvmlComputeMode_t cm;
        if (nv->nvmlDeviceGetComputeMode(h, &cm) == NVML_SUCCESS)
            g->compute_mode = (int)cm;
    }
}

int vgpu_gpus_enumerate(struct vgpu_nvml *nv, struct vgpu_gpu_list *out, struct vgpu_err *e)
{
    memset(out, 0, sizeof *out);
    unsigned count = 0;
    /* Bounded (vgpu/watchdog.h): a GPU that fell off the bus can hang these queries. */
    vgpu_watchdog_arm("listing the GPUs through NVML");
    nvmlReturn_t rc = nv->nvmlDeviceGetCount_v2(&count);
    if (rc != NVML_SUCCESS) {
        vgpu_watchdog_disarm();
        vgpu_err_set(e, VGPU_EXIT_FAIL, "cannot count the GPUs (NVML: %s)", vgpu_nvml_strerror(nv, rc));
        return -1;
    }
    for (unsigned i = 0; i < count && out->count < VGPU_MAX_GPUS; i++) {
        nvmlDevice_t h;
        rc = nv->nvmlDeviceGetHandleByIndex_v2(i, &h);
        struct vgpu_gpu *g = &out->gpu[out->count];
        g->index = i;
        if (rc != NVML_SUCCESS) {
            /* A lost or inaccessible GPU stays in the list, so indexes keep their meaning. */
            if (rc == NVML_ERROR_GPU_IS_LOST)
                g->lost = true;
            else
                snprintf(g->unreachable, sizeof g->unreachable, "%s", vgpu_nvml_strerror(nv, rc));
            g->compute_mode = -1;
            out->count++;
            continue;
        }
        fill_common(nv, h, g);
        if (g->lost) {
            out->count++;
            continue;
        }
        if (nv->nvmlDeviceGetPciInfo_v3) {
            nvmlPciInfo_t pci;
            if (nv->nvmlDeviceGetPciInfo_v3(h, &pci) == NVML_SUCCESS)
                snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", pci.busId);
        }
        if (nv->nvmlDeviceGetMigMode &&
            nv->nvmlDeviceGetMigMode(h, &g->mig_current, &g->mig_pending) == NVML_SUCCESS)
            g->has_mig_mode = true;
        out->count++;

        if (!g->has_mig_mode || !g->mig_current || !nv->nvmlDeviceGetMaxMigDeviceCount ||
            !nv->nvmlDeviceGetMigDeviceHandleByIndex)
            continue;
        unsigned max = 0;
        if (nv->nvmlDeviceGetMaxMigDeviceCount(h, &max) != NVML_SUCCESS)
            continue;
        for (unsigned m = 0; m < max && out->count < VGPU_MAX_GPUS; m++) {
            nvmlDevice_t mh;
            /* Slots without a MIG device answer NOT_FOUND or INVALID_ARGUMENT: skip them. */
            if (nv->nvmlDeviceGetMigDeviceHandleByIndex(h, m, &mh) != NVML_SUCCESS)
                continue;
            struct vgpu_gpu *mg = &out->gpu[out->count];
            mg->index = i;
            mg->is_mig = true;
            fill_common(nv, mh, mg);
            if (nv->nvmlDeviceGetGpuInstanceId)
                nv->nvmlDeviceGetGpuInstanceId(mh, &mg->mig_gi);
            if (nv->nvmlDeviceGetComputeInstanceId)
                nv->nvmlDeviceGetComputeInstanceId(mh, &mg->mig_ci);
            out->count++;
        }
    }
    vgpu_watchdog_disarm();
    return 0;
}

const char *vgpu_gpu_trouble(const struct vgpu_gpu *g, char *buf, size_t len)
{
    if (g->lost)
        snprintf(buf, len, "is lost (it stopped answering the driver)");
    else if (g->unreachable[0])
        snprintf(buf, len, "cannot be reached (NVML: %s)", g->unreachable);
    else
        return NULL;
    return buf;
}

int vgpu_gpus_report_lost(const struct vgpu_gpu_list *list, const struct vgpu_gpu_sel *sel)
{
    int rc = 0;
    unsigned n = sel ? sel->count : list->count;
    for (unsigned i = 0; i < n; i++) {
        const struct vgpu_gpu *g = &list->gpu[sel ? sel->pos[i] : i];
        char why[128];
        if (!vgpu_gpu_trouble(g, why, sizeof why))
            continue;
        vgpu_error("GPU %u %s; its jobs cannot use it: see 'nvidia-smi -q -i %u' and the kernel log (Xid "
                   "errors); a reset (nvidia-smi -r -i %u) or a reboot brings it back", g->index, why, g->index,
                   g->index);
        rc = VGPU_EXIT_GPU_LOST;
    }
    return rc;
}

void vgpu_gpus_describe(const struct vgpu_gpu_list *list, char *buf, size_t len)
{
    size_t used = strlen(buf);
    for (unsigned i = 0; i < list->count && used + 1 < len; i++) {
        const struct vgpu_gpu *g = &list->gpu[i];
        int n;
        if (g->is_mig)
            n = snprintf(buf + used, len - used, "\n    %u/gi%u/ci%u  %s  %s", g->index, g->mig_gi, g->mig_ci,
                         g->uuid, g->name);
        else
            n = snprintf(buf + used, len - used, "\n    %u  %s  %s%s%s", g->index, g->uuid, g->name,
                         g->pci_bus_id[0] ? "  " : "", g->pci_bus_id);
        if (n < 0)
            break;
        used += (size_t)n;
        if (used >= len)
            used = len - 1;
    }
}

/* A PCI bus id split into its domain and the rest ("1B:00.0"): NVML writes the domain with 8
 * hex digits (00000000:1B:00.0), lspci with 4 (0000:1b:00.0), nvidia-smi also accepts none. */
static bool pci_split(const char *id, unsigned long *domain, const char **rest)
{
    const char *c1 = strchr(id, ':');
    if (!c1)
        return false;
    const char *c2 = strchr(c1 + 1, ':');
    if (!c2) {
        *domain = 0;
        *rest = id;
        return strlen(id) >= 7;                 /* BB:DD.F */
    }
    if (c1 == id || (size_t)(c1 - id) > 8 || strspn(id, "0123456789abcdefABCDEF") != (size_t)(c1 - id))
        return false;
    *domain = strtoul(id, NULL, 16);
    *rest = c1 + 1;
    return true;
}

/* PCI bus ids compare by domain value and case-insensitively: "18:00.0", "0000:18:00.0" and
 * "00000000:18:00.0" name the same GPU. */
static bool pci_match(const char *want, const char *have)
{
    if (!*have)
        return false;
    if (strcasecmp(want, have) == 0)
        return true;
    unsigned long dw, dh;
    const char *rw, *rh;
    return pci_split(want, &dw, &rw) && pci_split(have, &dh, &rh) && dw == dh && strcasecmp(rw, rh) == 0;
}

/* One typing slip away from `want` (a letter wrong, missing, extra, or two swapped), case
 * aside: "al", "alll", "lal" for "all". */
static bool one_slip(const char *s, const char *want)
{
    size_t ls = strlen(s), lw = strlen(want), i = 0;
    while (i < ls && i < lw && tolower((unsigned char)s[i]) == want[i])
        i++;
    if (i == ls && i == lw)
        return false;                           /* the word itself */
    if (ls == lw)
        return strcasecmp(s + i + 1, want + i + 1) == 0 ||
               (i + 1 < ls && tolower((unsigned char)s[i]) == want[i + 1] &&
                tolower((unsigned char)s[i + 1]) == want[i] && strcasecmp(s + i + 2, want + i + 2) == 0);
    if (ls + 1 == lw)
        return strcasecmp(s + i, want + i + 1) == 0;
    if (ls == lw + 1)
        return strcasecmp(s + i + 1, want + i) == 0;
    return false;
}

static bool is_number(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static void add(struct vgpu_gpu_sel *out, unsigned pos)
{
    for (unsigned i = 0; i < out->count; i++)
        if (out->pos[i] == pos)
            return;
    if (out->count < VGPU_MAX_GPUS)
        out->pos[out->count++] = pos;
}

static void select_all(const struct vgpu_gpu_list *list, struct vgpu_gpu_sel *out)
{
    for (unsigned i = 0; i < list->count; i++) {
        const struct vgpu_gpu *g = &list->gpu[i];
        if (g->is_mig)
            continue;
        bool has_mig_devices = false;
        for (unsigned j = 0; j < list->count; j++)
            if (list->gpu[j].is_mig && list->gpu[j].index == g->index) {
                add(out, j);
                has_mig_devices = true;
            }
        if (!has_mig_devices)
            add(out, i);
    }
}

static int fail_sel(const struct vgpu_gpu_list *list, const char *what, struct vgpu_err *e)
{
    char gpus[400] = "";
    vgpu_gpus_describe(list, gpus, sizeof gpus);
    vgpu_err_set(e, VGPU_EXIT_USAGE, "%s; the GPUs are:%s", what, gpus);
    return -1;
}

static int select_one(const struct vgpu_gpu_list *list, const char *s, struct vgpu_gpu_sel *out, struct vgpu_err *e)
{
    char what[200];
    if (is_number(s)) {
        if (strlen(s) < 4) {
            unsigned idx = (unsigned)atoi(s);
            for (unsigned i = 0; i < list->count; i++)
                if (!list->gpu[i].is_mig && list->gpu[i].index == idx) {
                    add(out, i);
                    return 0;
                }
            snprintf(what, sizeof what, "--gpu: there is no GPU %s", s);
            return fail_sel(list, what, e);
        }
        /* A long number is more likely the start of a UUID ("8f3a..." style); fall through. */
    }
    int found = -1, matches = 0;
    for (unsigned i = 0; i < list->count; i++) {
        const struct vgpu_gpu *g = &list->gpu[i];
        const char *u = g->uuid;
        if (strcasecmp(u, s) == 0 || pci_match(s, g->pci_bus_id)) {
            found = (int)i;
            matches = 1;
            break;
        }
        /* Unique prefix, with or without the "GPU-" / "MIG-" part; at least two characters of
         * the UUID itself: "GPU-" or "G" says nothing about which GPU, even on a machine with one. */
        const char *bare = strchr(u, '-') ? strchr(u, '-') + 1 : u;
        const char *key = s;
        if (bare != u && strncasecmp(s, u, (size_t)(bare - u)) == 0)
            key = s + (bare - u);
        size_t lk = strlen(key);
        if (lk >= 2 && strncasecmp(bare, key, lk) == 0) {
            found = (int)i;
            matches++;
        }
    }
    if (matches == 1) {
        add(out, (unsigned)found);
        return 0;
    }
    if (matches > 1)
        snprintf(what, sizeof what, "--gpu: '%s' matches %d GPUs; give more of the UUID", s, matches);
    else if (*s && strlen(s) <= 4 && (strncasecmp(s, "all", strlen(s)) == 0 || one_slip(s, "all")))
        snprintf(what, sizeof what, "--gpu: no GPU matches '%s' (did you mean 'all'?)", s);
    else
        snprintf(what, sizeof what, "--gpu: no GPU matches '%s' (give an index, a UUID or its unique start (two "
                 "characters or more after GPU-), a PCI bus id, a MIG UUID, or 'all')", s);
    return fail_sel(list, what, e);
}

int vgpu_gpus_select(const struct vgpu_gpu_list *list, const char *sel, struct vgpu_gpu_sel *out, struct vgpu_err *e)
{
    memset(out, 0, sizeof *out);
    if (!sel || !*sel)
        return fail_sel(list, "--gpu: empty GPU selector", e);
    if (strcasecmp(sel, "all") == 0) {
        select_all(list, out);
        return 0;
    }
    char buf[1024];
    if (strlen(sel) >= sizeof buf)
        return fail_sel(list, "--gpu: selector too long", e);
    snprintf(buf, sizeof buf, "%s", sel);
    /* strtok_r would skip empty fields, and add() drops repeats: both would let a list mean
     * something other than what was typed ("0,0,1" is then two GPUs, and IDX:SIZE lists that
     * count the job's GPUs go wrong). Refuse them. */
    size_t blen = strlen(buf);
    char what[400];
    if (buf[0] == ',' || buf[blen - 1] == ',' || strstr(buf, ",,")) {
        snprintf(what, sizeof what, "--gpu: '%.200s' has an empty entry (a stray comma)", sel);
        return fail_sel(list, what, e);
    }
    /* No spaces, as in every other value (vgpu(1), SIZES): "0, 1" was read as 0,1 while
     * "--mem '4G '" was refused. */
    if (strpbrk(buf, " \t\n\r\v\f")) {
        snprintf(what, sizeof what, "--gpu: '%.200s' has a space; write the list without spaces, e.g. 0,1", sel);
        return fail_sel(list, what, e);
    }
    bool has_comma = strchr(buf, ',') != NULL;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcasecmp(tok, "all") == 0) {
            if (has_comma) {
                snprintf(what, sizeof what, "--gpu: '%.200s': 'all' already names every GPU; give it alone", sel);
                return fail_sel(list, what, e);
            }
            select_all(list, out);
            continue;
        }
        unsigned before = out->count;
        if (select_one(list, tok, out, e) < 0)
            return -1;
        if (out->count == before) {
            snprintf(what, sizeof what, "--gpu: '%.200s' names the same GPU twice ('%.60s'); give each GPU once", sel,
                     tok);
            return fail_sel(list, what, e);
        }
    }
    if (out->count == 0)
        return fail_sel(list, "--gpu: empty GPU selector", e);
    return 0;
}

int vgpu_gpus_select_default(const struct vgpu_gpu_list *list, const char *sel, struct vgpu_gpu_sel *out,
                             struct vgpu_err *e)
{
    if (!sel) {
        memset(out, 0, sizeof *out);
        select_all(list, out);
        return 0;
    }
    return vgpu_gpus_select(list, sel, out, e);
}
