/* scenario.c: reads a scenario JSON (format in tests/fakegpu/README.md) into a fresh state,
 * and parses injected failures from the scenario or VGPU_FAKE_FAIL. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_internal.h"

struct code_name {
    const char *name;
    int code;
};

/* nvmlReturn_t / CUresult values (vgpu_nvml.h, vgpu_cuda.h); repeated as numbers so the
 * common code does not depend on either header. */
static const struct code_name nvml_codes[] = {
    {"driver_not_loaded", 9}, {"lib_version_mismatch", 18}, {"no_gpus", 28}, {"no_permission", 4},
    {"unknown", 999},         {"uninitialized", 1},         {"timeout", 10}, {"gpu_lost", 15},
};
static const struct code_name cuda_codes[] = {
    {"no_device", 100},          {"insufficient_driver", 35},  {"not_initialized", 3},
    {"system_driver_mismatch", 803}, {"compat_not_supported", 804}, {"unknown", 999},
    {"not_permitted", 800},      {"operating_system", 304},
};

static int lookup(const struct code_name *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return t[i].code;
    char *end;
    long v = strtol(name, &end, 10);
    return (*name && !*end && v > 0) ? (int)v : -1;
}

int fs_nvml_failure_code(const char *name) { return lookup(nvml_codes, sizeof nvml_codes / sizeof nvml_codes[0], name); }
int fs_cuda_failure_code(const char *name) { return lookup(cuda_codes, sizeof cuda_codes / sizeof cuda_codes[0], name); }

static bool add_slow(struct fs_failures *f, const char *fn, long ms, char *err, size_t errlen)
{
    if (f->nslow >= FS_MAX_SLOW || ms < 0 || strlen(fn) >= sizeof f->slow[0].fn) {
        snprintf(err, errlen, "slow call '%s': too many entries (max %d), bad milliseconds or name too long", fn,
                 FS_MAX_SLOW);
        return false;
    }
    snprintf(f->slow[f->nslow].fn, sizeof f->slow[0].fn, "%s", fn);
    f->slow[f->nslow++].ms = (unsigned)ms;
    return true;
}

bool fs_failures_parse(const char *spec, struct fs_failures *f, struct fs_state *st, char *err, size_t errlen)
{
    char *copy = strdup(spec), *save = NULL;
    bool ok = copy != NULL;
    for (char *item = strtok_r(copy, ",", &save); ok && item; item = strtok_r(NULL, ",", &save)) {
        char *val = strchr(item, '=');
        if (!val) {
            snprintf(err, errlen, "'%s' is not key=value (keys: nvml_init, cuda_init, gpu_lost, slow, "
                                  "slow_while, mig_create_fail_after)", item);
            ok = false;
            break;
        }
        *val++ = 0;
        if (strcmp(item, "nvml_init") == 0 || strcmp(item, "cuda_init") == 0) {
            bool nvml = item[0] == 'n';
            int code = strcmp(val, "none") == 0 ? 0 : nvml ? fs_nvml_failure_code(val) : fs_cuda_failure_code(val);
            if (code < 0) {
                snprintf(err, errlen, "unknown %s failure '%s'", item, val);
                ok = false;
            } else if (nvml) {
                f->nvml_init = code;
            } else {
                f->cuda_init = code;
            }
        } else if (strcmp(item, "gpu_lost") == 0) { /* gpu_lost=1+3 */
            char *s2 = NULL;
            for (char *n = strtok_r(val, "+:", &s2); n; n = strtok_r(NULL, "+:", &s2)) {
                long i = strtol(n, NULL, 10);
                if (i < 0 || i >= FS_MAX_GPUS || (st && (unsigned long)i >= st->ngpus)) {
                    snprintf(err, errlen, "gpu_lost: no GPU %s", n);
                    ok = false;
                    break;
                }
                f->gpu_lost_mask |= 1u << i;
            }
        } else if (strcmp(item, "slow") == 0) { /* slow=nvmlDeviceGetProcessUtilization:300 */
            char *colon = strrchr(val, ':');
            if (!colon) {
                snprintf(err, errlen, "slow=%s: expected slow=FUNCTION:MILLISECONDS", val);
                ok = false;
            } else {
                *colon = 0;
                ok = add_slow(f, val, strtol(colon + 1, NULL, 10), err, errlen);
            }
        } else if (strcmp(item, "slow_while") == 0) { /* slow_while=/tmp/x: slow only while it exists */
            if (!*val || strlen(val) >= sizeof f->slow_while) {
                snprintf(err, errlen, "slow_while=%s: expected a path shorter than %zu bytes", val, sizeof f->slow_while);
                ok = false;
            } else {
                snprintf(f->slow_while, sizeof f->slow_while, "%s", val);
            }
        } else if (strcmp(item, "mig_create_fail_after") == 0) {
            f->mig_create_fail_after = (int)strtol(val, NULL, 10);
        } else {
            snprintf(err, errlen, "unknown failure key '%s' (keys: nvml_init, cuda_init, gpu_lost, slow, "
                                  "slow_while, mig_create_fail_after)", item);
            ok = false;
        }
    }
    free(copy);
    return ok;
}

/* ---- JSON helpers ---- */
static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static void get_u64(json_object *o, const char *key, unsigned long long *out)
{
    json_object *v = get(o, key);
    if (v)
        *out = (unsigned long long)json_object_get_int64(v);
}

static void get_uint(json_object *o, const char *key, unsigned *out)
{
    json_object *v = get(o, key);
    if (v)
        *out = (unsigned)json_object_get_int64(v);
}

static void get_str(json_object *o, const char *key, char *out, size_t len)
{
    json_object *v = get(o, key);
    if (v && json_object_is_type(v, json_type_string))
        snprintf(out, len, "%s", json_object_get_string(v));
}

/* Default identities, so a scenario may leave them out: bus ids as on an 8-GPU HGX board. */
static const unsigned default_bus[] = {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};

static void default_identity(struct fs_gpu_static *g, unsigned i)
{
    unsigned bus = i < 8 ? default_bus[i] : 0xe0 + i;
    g->pci_bus = bus;
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0", bus);
    snprintf(g->uuid, sizeof g->uuid, "GPU-%08x-%04x-%04x-%04x-%012x", 0x5a1e0000u + i, 0xfa4e, 0x4000 + i, 0x8000 + i,
             0xc0ffee00u + i);
}

static unsigned hexval(char c) { return (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10); }

static bool finish_identity(struct fs_gpu_static *g, unsigned i, char *err, size_t errlen)
{
    unsigned dom, bus, dev, fn;
    if (sscanf(g->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
        snprintf(err, errlen, "GPU %u: pci_bus_id '%s' is not DOMAIN:BUS:DEVICE.FUNCTION", i, g->pci_bus_id);
        return false;
    }
    g->pci_domain = dom;
    g->pci_bus = bus;
    g->pci_device = dev;
    /* UUID bytes: the 32 hex digits after "GPU-" */
    const char *p = strncmp(g->uuid, "GPU-", 4) == 0 ? g->uuid + 4 : NULL;
    unsigned n = 0;
    for (; p && *p && n < 32; p++) {
        if (*p == '-')
            continue;
        if (!strchr("0123456789abcdefABCDEF", *p))
            break;
        unsigned v = hexval(*p);
        g->uuid_bytes[n / 2] = (unsigned char)(n % 2 ? g->uuid_bytes[n / 2] | v : v << 4);
        n++;
    }
    if (n != 32) {
        snprintf(err, errlen, "GPU %u: uuid '%s' is not GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", i, g->uuid);
        return false;
    }
    g->minor = i;
    return true;
}

/* Managed memory's rates, GB/s in the scenario (decimals allowed; 0: at once), MB/s in the state.
 * The defaults are the model's (models.c: the H200's as measured; 0 for the models not measured,
 * so the tests written before issue 37 keep their timing); a scenario sets its own. */
static bool get_rate(json_object *o, const char *key, unsigned *mbps, unsigned gpu, char *err, size_t errlen)
{
    json_object *v = get(o, key);
    if (!v)
        return true;
    double gbps = json_object_get_double(v);
    if ((!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) || gbps < 0 ||
        gbps > 100000) {
        snprintf(err, errlen, "GPU %u: %s must be a number of GB/s from 0 (no time) to 100000, not %s", gpu, key,
                 json_object_to_json_string(v));
        return false;
    }
    *mbps = (unsigned)(gbps * 1000.0 + 0.5);
    return true;
}

static bool load_rates(json_object *j, struct fs_uvm_rates *r, unsigned i, char *err, size_t errlen)
{
    return get_rate(j, "uvm_fault_gbps", &r->fault_mbps, i, err, errlen) &&
           get_rate(j, "uvm_prefetch_gbps", &r->prefetch_mbps, i, err, errlen) &&
           get_rate(j, "uvm_populate_gbps", &r->populate_mbps, i, err, errlen) &&
           get_rate(j, "uvm_prefetch_host_gbps", &r->prefetch_host_mbps, i, err, errlen);
}

static bool load_gpu(json_object *j, struct fs_gpu *gpu, unsigned i, char *err, size_t errlen)
{
    struct fs_gpu_static *g = &gpu->s;
    char model[32] = "h100-80gb";
    get_str(j, "model", model, sizeof model);
    if (!fs_model_apply(model, g)) {
        snprintf(err, errlen, "GPU %u: unknown model '%s' (known: %s)", i, model, fs_model_names());
        return false;
    }
    default_identity(g, i);
    get_str(j, "name", g->name, sizeof g->name);
    get_str(j, "uuid", g->uuid, sizeof g->uuid);
    get_str(j, "pci_bus_id", g->pci_bus_id, sizeof g->pci_bus_id);
    get_uint(j, "pci_device_id", &g->pci_device_id);
    get_u64(j, "memory_total", &g->mem_total);
    get_u64(j, "memory_reserved", &g->mem_reserved);
    get_u64(j, "context_overhead", &g->ctx_overhead);
    get_uint(j, "sm_count", &g->sm_count);
    get_uint(j, "cc_major", &g->cc_major);
    get_uint(j, "cc_minor", &g->cc_minor);
    get_uint(j, "temperature", &g->temperature);
    get_uint(j, "power_mw", &g->power_mw);
    get_uint(j, "power_limit_mw", &g->power_limit_mw);
    get_uint(j, "fan", &g->fan);
    get_uint(j, "pcie_gen", &g->pcie_gen);
    get_uint(j, "pcie_width", &g->pcie_width);
    get_uint(j, "nvlink_island", &g->nvlink_island);
    get_uint(j, "pcie_switch", &g->pcie_switch);
    get_uint(j, "numa_node", &g->numa_node);
    if (!load_rates(j, &g->uvm, i, err, errlen))
        return false;
    json_object *v;
    if ((v = get(j, "energy_counter")))
        g->no_energy = !json_object_get_boolean(v);
    if ((v = get(j, "mig_capable")))
        g->mig_capable = json_object_get_boolean(v);
    if (!g->mig_capable)
        g->nprofiles = 0;
    get_uint(j, "mig_mode", &gpu->mig_current);
    gpu->mig_pending = gpu->mig_current;
    get_uint(j, "compute_mode", &gpu->compute_mode);
    get_uint(j, "timeslice", &gpu->timeslice);
    if ((v = get(j, "lost")))
        gpu->lost = json_object_get_boolean(v);
    if (g->mem_reserved >= g->mem_total) {
        snprintf(err, errlen, "GPU %u: memory_reserved must be below memory_total", i);
        return false;
    }
    return finish_identity(g, i, err, errlen);
}

static bool load_failures(json_object *j, struct fs_state *st, char *err, size_t errlen)
{
    struct fs_failures *f = &st->fail;
    json_object *v;
    if ((v = get(j, "nvml_init")) && (f->nvml_init = fs_nvml_failure_code(json_object_get_string(v))) < 0) {
        snprintf(err, errlen, "failures.nvml_init: unknown failure '%s'", json_object_get_string(v));
        return false;
    }
    if ((v = get(j, "cuda_init")) && (f->cuda_init = fs_cuda_failure_code(json_object_get_string(v))) < 0) {
        snprintf(err, errlen, "failures.cuda_init: unknown failure '%s'", json_object_get_string(v));
        return false;
    }
    if ((v = get(j, "gpu_lost")) && json_object_is_type(v, json_type_array)) {
        for (size_t k = 0; k < json_object_array_length(v); k++) {
            int64_t i = json_object_get_int64(json_object_array_get_idx(v, k));
            if (i < 0 || (uint64_t)i >= st->ngpus) {
                snprintf(err, errlen, "failures.gpu_lost: no GPU %lld", (long long)i);
                return false;
            }
            st->gpu[i].lost = true;
        }
    }
    if ((v = get(j, "slow_ms")) && json_object_is_type(v, json_type_object)) {
        json_object_object_foreach(v, fn, ms) {
            if (!add_slow(f, fn, (long)json_object_get_int64(ms), err, errlen))
                return false;
        }
    }
    if ((v = get(j, "mig_create_fail_after")))
        f->mig_create_fail_after = (int)json_object_get_int64(v);
    return true;
}

static void defaults(struct fs_state *st)
{
    snprintf(st->driver_version, sizeof st->driver_version, "580.159.04");
    snprintf(st->nvml_version, sizeof st->nvml_version, "13.580.159.04");
    st->cuda_version = 13000;
    st->sample_period_ms = 200;
    st->fail.mig_create_fail_after = -1;
}

bool fs_scenario_load(const char *path, struct fs_state *st, char *err, size_t errlen)
{
    defaults(st);
    if (!path) { /* built-in: one H100 */
        st->ngpus = 1;
        return load_gpu(NULL, &st->gpu[0], 0, err, errlen);
    }
    json_object *root = json_object_from_file(path);
    if (!root) {
        snprintf(err, errlen, "cannot read scenario %s: %s (VGPU_FAKE_SCENARIO)", path, json_util_get_last_err());
        return false;
    }
    bool ok = false;
    get_str(root, "driver_version", st->driver_version, sizeof st->driver_version);
    get_str(root, "nvml_version", st->nvml_version, sizeof st->nvml_version);
    json_object *v;
    if ((v = get(root, "cuda_version")))
        st->cuda_version = json_object_get_int(v);
    get_uint(root, "sample_period_ms", &st->sample_period_ms);
    if (st->sample_period_ms == 0)
        st->sample_period_ms = 200;
    json_object *gpus = get(root, "gpus");
    if (!gpus || !json_object_is_type(gpus, json_type_array)) {
        snprintf(err, errlen, "scenario %s: no \"gpus\" array", path);
        goto out;
    }
    for (size_t k = 0; k < json_object_array_length(gpus); k++) {
        json_object *g = json_object_array_get_idx(gpus, k);
        unsigned count = 1;
        get_uint(g, "count", &count); /* "count": N repeats an entry (identities get defaults) */
        for (unsigned c = 0; c < count; c++) {
            if (st->ngpus >= FS_MAX_GPUS) {
                snprintf(err, errlen, "scenario %s: more than %d GPUs", path, FS_MAX_GPUS);
                goto out;
            }
            char e2[300];
            if (!load_gpu(g, &st->gpu[st->ngpus], st->ngpus, e2, sizeof e2)) {
                snprintf(err, errlen, "scenario %s: %s", path, e2);
                goto out;
            }
            if (count > 1) /* repeated entries cannot share one identity */
                default_identity(&st->gpu[st->ngpus].s, st->ngpus),
                    finish_identity(&st->gpu[st->ngpus].s, st->ngpus, e2, sizeof e2);
            st->ngpus++;
        }
    }
    for (unsigned a = 0; a < st->ngpus; a++)
        for (unsigned b = a + 1; b < st->ngpus; b++)
            if (strcmp(st->gpu[a].s.uuid, st->gpu[b].s.uuid) == 0 ||
                strcmp(st->gpu[a].s.pci_bus_id, st->gpu[b].s.pci_bus_id) == 0) {
                snprintf(err, errlen, "scenario %s: GPUs %u and %u share a UUID or PCI bus id", path, a, b);
                goto out;
            }
    if ((v = get(root, "failures"))) {
        char e2[300];
        if (!load_failures(v, st, e2, sizeof e2)) {
            snprintf(err, errlen, "scenario %s: %s", path, e2);
            goto out;
        }
    }
    ok = true;
out:
    json_object_put(root);
    return ok;
}
