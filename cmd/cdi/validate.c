/* vgpu cdi validate FILE: a spec checked as a CDI loader would check it (cdi/rules.c), and the
 * library each device preloads checked as `vgpu run` checks its own (run/libcheck.c), since a
 * spec that preloads the wrong file would run every container without limits. */
#include "cdi/validate.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "cdi/rules.h"
#include "run/libcheck.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"

static const char *str_of(struct json_object *o, const char *key)
{
    struct json_object *s;
    return o && json_object_object_get_ex(o, key, &s) && json_object_is_type(s, json_type_string)
               ? json_object_get_string(s) : NULL;
}

/* The host file mounted at ctr_path by the device's edits or the spec's, or NULL. */
static const char *mounted_from(struct json_object *spec, struct json_object *dev, const char *ctr_path)
{
    struct json_object *eds[2] = { NULL, NULL }, *mounts;
    json_object_object_get_ex(dev, "containerEdits", &eds[0]);
    json_object_object_get_ex(spec, "containerEdits", &eds[1]);
    for (int k = 0; k < 2; k++) {
        if (!eds[k] || !json_object_object_get_ex(eds[k], "mounts", &mounts) ||
            !json_object_is_type(mounts, json_type_array))
            continue;
        for (size_t i = 0; i < json_object_array_length(mounts); i++) {
            struct json_object *m = json_object_array_get_idx(mounts, i);
            const char *cp = str_of(m, "containerPath");
            if (cp && strcmp(cp, ctr_path) == 0)
                return str_of(m, "hostPath");
        }
    }
    return NULL;
}

/* Each library in LD_PRELOAD (':' or ' ' separated, as ld.so reads it) of one env list. */
static int check_preloads(const char *file, struct json_object *spec, struct json_object *dev, const char *name,
                          struct json_object *env)
{
    int bad = 0;
    for (size_t i = 0; env && json_object_is_type(env, json_type_array) && i < json_object_array_length(env); i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(env, i));
        if (!v || strncmp(v, "LD_PRELOAD=", 11) != 0)
            continue;
        char list[4096];
        snprintf(list, sizeof list, "%s", v + 11);
        char *save = NULL;
        for (char *lib = strtok_r(list, ": ", &save); lib; lib = strtok_r(NULL, ": ", &save)) {
            const char *host = mounted_from(spec, dev, lib);
            if (!host) {
                /* Not an error for CDI: the image may have it. It is for a vgpu device. */
                vgpu_warn("%s: device %s preloads %s, which the spec does not mount: the image must have it", file,
                          name, lib);
                continue;
            }
            char src[256];
            snprintf(src, sizeof src, "%s: device %s preloads %s, mounted from", file, name, lib);
            struct vgpu_err e = { 0 };
            if (vgpu_run_check_library(host, src, &e) < 0) {
                vgpu_error("%s", e.msg);
                bad++;
            }
        }
    }
    return bad;
}

int cdi_validate_file(const char *file)
{
    struct stat st;
    if (stat(file, &st) != 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "%s: %s", file, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return vgpu_fail(VGPU_EXIT_FAIL, "%s: not a regular file", file);
    struct json_object *spec = json_object_from_file(file);
    if (!spec) {
        char why[256];
        snprintf(why, sizeof why, "%s", json_util_get_last_err() ? json_util_get_last_err() : "unreadable");
        why[strcspn(why, "\n")] = 0;   /* json-c ends its message with a newline */
        return vgpu_fail(VGPU_EXIT_FAIL, "%s: not JSON (%s); vgpu cdi validate reads JSON specs", file, why);
    }
    int bad = 0;
    char probs[8192];
    if (cdi_spec_problems(spec, probs, sizeof probs) > 0) {
        char *save = NULL;
        for (char *l = strtok_r(probs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            vgpu_error("%s: %s", file, l);
            bad++;
        }
    }
    int declared = cdi_version_parse(str_of(spec, "cdiVersion"));
    struct cdi_need needs[32];
    int lowest;
    size_t n = cdi_spec_needs(spec, needs, 32, &lowest);
    if (declared >= 0) {
        for (size_t i = 0; i < n && i < 32; i++)
            if (needs[i].version > declared) {
                vgpu_error("%s: cdiVersion %s cannot carry %s: loaders refuse the spec", file,
                           cdi_version_name(declared), needs[i].why);
                bad++;
            }
    }
    struct json_object *devs;
    if (json_object_object_get_ex(spec, "devices", &devs) && json_object_is_type(devs, json_type_array))
        for (size_t i = 0; i < json_object_array_length(devs); i++) {
            struct json_object *d = json_object_array_get_idx(devs, i), *ed, *env;
            const char *name = str_of(d, "name");
            if (json_object_object_get_ex(d, "containerEdits", &ed) && json_object_object_get_ex(ed, "env", &env))
                bad += check_preloads(file, spec, d, name ? name : "?", env);
        }
    if (bad) {
        json_object_put(spec);
        return vgpu_fail(VGPU_EXIT_FAIL, "%s is not a valid CDI spec (%d problem%s above)", file, bad,
                         bad == 1 ? "" : "s");
    }
    printf("%s: valid: cdiVersion %s, kind %s, %zu device%s", file, cdi_version_name(declared),
           str_of(spec, "kind"), json_object_array_length(devs), json_object_array_length(devs) == 1 ? "" : "s");
    if (lowest < declared)
        printf("; %s would carry it too, and more engines read it (vgpu-cdi(1))", cdi_version_name(lowest));
    printf("\n");
    json_object_put(spec);
    return 0;
}
