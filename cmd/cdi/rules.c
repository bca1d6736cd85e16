/* The CDI version rules and the structure a CDI loader checks (see rules.h for the sources).
 * One place, so that what generate writes and what validate accepts cannot drift apart. */
#include "cdi/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Oldest first; SPEC.md's "Released versions" table (0.1.0 and 0.2.0 predate it). */
static const char *const versions[] = { "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0",
                                        "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0" };
#define NVERSIONS (int)(sizeof versions / sizeof versions[0])
#define EARLIEST 2 /* 0.3.0: specs-go/version.go's earliest supported version */
#define V040 3
#define V050 4
#define V060 5
#define V070 6
#define V110 9

int cdi_version_parse(const char *s)
{
    if (s && s[0] == 'v')
        s++;
    for (int i = 0; s && i < NVERSIONS; i++)
        if (strcmp(s, versions[i]) == 0)
            return i;
    return -1;
}

const char *cdi_version_name(int idx)
{
    return idx >= 0 && idx < NVERSIONS ? versions[idx] : "?";
}

int cdi_version_earliest(void)
{
    return EARLIEST;
}

const char *cdi_versions_accepted(void)
{
    return "0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0, 1.0.0 or 1.1.0";
}

static bool alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool cdi_device_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* A vendor or class name of a kind: a letter first, a letter or digit last, and letters,
 * digits, '_', '.', '-' between (pkg/parser). */
static bool kind_part_valid(const char *s, size_t n)
{
    if (n == 0 || !letter(s[0]) || !alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

struct needs {
    struct cdi_need *out;
    size_t max, n;
    int highest; /* of all needs, those past max included */
};

static void need(struct needs *nd, int version, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void need(struct needs *nd, int version, const char *fmt, ...)
{
    if (version > nd->highest)
        nd->highest = version;
    if (nd->n < nd->max) {
        nd->out[nd->n].version = version;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(nd->out[nd->n].why, sizeof nd->out[nd->n].why, fmt, ap);
        va_end(ap);
    }
    nd->n++;
}

static size_t arr_len(struct json_object *o, const char *key)
{
    struct json_object *a;
    return json_object_object_get_ex(o, key, &a) && json_object_is_type(a, json_type_array)
               ? json_object_array_length(a) : 0;
}

static size_t obj_len(struct json_object *o, const char *key)
{
    struct json_object *a;
    return json_object_object_get_ex(o, key, &a) && json_object_is_type(a, json_type_object)
               ? (size_t)json_object_object_length(a) : 0;
}

static const char *str_of(struct json_object *o, const char *key)
{
    struct json_object *s;
    return json_object_object_get_ex(o, key, &s) && json_object_is_type(s, json_type_string)
               ? json_object_get_string(s) : NULL;
}

/* The needs of one containerEdits (the spec's or a device's); `where` names it. */
static void edits_needs(struct json_object *ed, const char *where, struct needs *nd)
{
    if (!ed || !json_object_is_type(ed, json_type_object))
        return;
    struct json_object *a;
    if (json_object_object_get_ex(ed, "mounts", &a) && json_object_is_type(a, json_type_array))
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            struct json_object *m = json_object_array_get_idx(a, i);
            const char *type = json_object_is_type(m, json_type_object) ? str_of(m, "type") : NULL;
            if (type && *type) {
                const char *cp = str_of(m, "containerPath");
                need(nd, V040, "%s: the %s mount at %s has a \"type\" (added in CDI 0.4.0)", where, type,
                     cp ? cp : "?");
            }
        }
    if (json_object_object_get_ex(ed, "deviceNodes", &a) && json_object_is_type(a, json_type_array))
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            struct json_object *d = json_object_array_get_idx(a, i);
            const char *hp = json_object_is_type(d, json_type_object) ? str_of(d, "hostPath") : NULL;
            if (hp && *hp)
                need(nd, V050, "%s: device node %s has a \"hostPath\" (added in CDI 0.5.0)", where, hp);
        }
    struct json_object *rdt;
    if (json_object_object_get_ex(ed, "intelRdt", &rdt) && !json_object_is_type(rdt, json_type_null)) {
        need(nd, V070, "%s: \"intelRdt\" (added in CDI 0.7.0)", where);
        struct json_object *mon;
        if (arr_len(rdt, "schemata") ||
            (json_object_object_get_ex(rdt, "enableMonitoring", &mon) && json_object_get_boolean(mon)))
            need(nd, V110, "%s: intelRdt's \"schemata\" or \"enableMonitoring\" (added in CDI 1.1.0)", where);
    }
    if (arr_len(ed, "additionalGids"))
        need(nd, V070, "%s: \"additionalGids\" (added in CDI 0.7.0)", where);
    if (arr_len(ed, "netDevices"))
        need(nd, V110, "%s: \"netDevices\" (added in CDI 1.1.0)", where);
}

size_t cdi_spec_needs(struct json_object *spec, struct cdi_need *out, size_t max, int *lowest)
{
    struct needs nd = { out, max, 0, EARLIEST };
    if (lowest)
        *lowest = EARLIEST;
    if (!spec || !json_object_is_type(spec, json_type_object))
        return 0;
    if (obj_len(spec, "annotations"))
        need(&nd, V060, "the spec's \"annotations\" (added in CDI 0.6.0)");
    const char *kind = str_of(spec, "kind");
    const char *slash = kind ? strchr(kind, '/') : NULL;
    if (slash && strchr(slash + 1, '.'))
        need(&nd, V060, "the kind %s has a '.' in its class (allowed from CDI 0.6.0)", kind);
    struct json_object *ed, *devs;
    if (json_object_object_get_ex(spec, "containerEdits", &ed))
        edits_needs(ed, "the spec's containerEdits", &nd);
    if (json_object_object_get_ex(spec, "devices", &devs) && json_object_is_type(devs, json_type_array))
        for (size_t i = 0; i < json_object_array_length(devs); i++) {
            struct json_object *d = json_object_array_get_idx(devs, i);
            if (!json_object_is_type(d, json_type_object))
                continue;
            const char *name = str_of(d, "name");
            char where[120];
            snprintf(where, sizeof where, "device %s", name ? name : "?");
            if (name && name[0] >= '0' && name[0] <= '9')
                need(&nd, V050, "%s: its name starts with a digit (allowed from CDI 0.5.0)", where);
            if (obj_len(d, "annotations"))
                need(&nd, V060, "%s: \"annotations\" (added in CDI 0.6.0)", where);
            if (json_object_object_get_ex(d, "containerEdits", &ed))
                edits_needs(ed, where, &nd);
        }
    if (lowest)
        *lowest = nd.highest;
    return nd.n;
}

int cdi_spec_lowest(struct json_object *spec)
{
    int v;
    cdi_spec_needs(spec, NULL, 0, &v);
    return v;
}

/* ---- structure ------------------------------------------------------------------------------ */

struct probs {
    char *buf;
    size_t len;
    int n;
};

static void prob(struct probs *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void prob(struct probs *p, const char *fmt, ...)
{
    size_t l = strlen(p->buf);
    if (l + 2 < p->len) {
        if (l)
            p->buf[l++] = '\n', p->buf[l] = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->buf + l, p->len - l, fmt, ap);
        va_end(ap);
    }
    p->n++;
}

/* Unknown keys are refused by CDI loaders (strict decoding): each one is a problem. */
static void known_keys(struct json_object *o, const char *where, const char *const *keys, struct probs *p)
{
    json_object_object_foreach(o, k, v) {
        (void)v;
        bool ok = false;
        for (const char *const *x = keys; *x && !ok; x++)
            ok = strcmp(k, *x) == 0;
        if (!ok)
            prob(p, "%s: unknown field \"%s\" (CDI loaders refuse unknown fields)", where, k);
    }
}

static bool is(struct json_object *o, enum json_type t)
{
    return o && json_object_is_type(o, t);
}

static void strings_field(struct json_object *o, const char *key, const char *where, bool env, struct probs *p)
{
    struct json_object *a;
    if (!json_object_object_get_ex(o, key, &a) || is(a, json_type_null))
        return;
    if (!is(a, json_type_array)) {
        prob(p, "%s: \"%s\" must be a list of strings", where, key);
        return;
    }
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        struct json_object *s = json_object_array_get_idx(a, i);
        if (!is(s, json_type_string))
            prob(p, "%s: \"%s\" must be a list of strings", where, key);
        else if (env && !strchr(json_object_get_string(s), '='))
            prob(p, "%s: env entry \"%s\" is not NAME=VALUE", where, json_object_get_string(s));
    }
}

static void required_string(struct json_object *o, const char *key, const char *where, struct probs *p)
{
    const char *s = str_of(o, key);
    if (!s || !*s)
        prob(p, "%s: \"%s\" is required (a non-empty string)", where, key);
}

static void edits_problems(struct json_object *ed, const char *where, struct probs *p)
{
    static const char *const keys[] = { "env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt",
                                        "additionalGids", NULL };
    static const char *const mount_keys[] = { "hostPath", "containerPath", "options", "type", NULL };
    static const char *const node_keys[] = { "path", "hostPath", "type", "major", "minor", "fileMode",
                                             "permissions", "uid", "gid", NULL };
    static const char *const hook_keys[] = { "hookName", "path", "args", "env", "timeout", NULL };
    if (!is(ed, json_type_object)) {
        prob(p, "%s: containerEdits must be an object", where);
        return;
    }
    known_keys(ed, where, keys, p);
    strings_field(ed, "env", where, true, p);
    struct json_object *a;
    char w[200];
    if (json_object_object_get_ex(ed, "mounts", &a) && is(a, json_type_array))
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            struct json_object *m = json_object_array_get_idx(a, i);
            snprintf(w, sizeof w, "%s: mount %zu", where, i + 1);
            if (!is(m, json_type_object)) {
                prob(p, "%s: not an object", w);
                continue;
            }
            known_keys(m, w, mount_keys, p);
            required_string(m, "hostPath", w, p);
            required_string(m, "containerPath", w, p);
            strings_field(m, "options", w, false, p);
        }
    if (json_object_object_get_ex(ed, "deviceNodes", &a) && is(a, json_type_array))
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            struct json_object *d = json_object_array_get_idx(a, i);
            snprintf(w, sizeof w, "%s: device node %zu", where, i + 1);
            if (!is(d, json_type_object)) {
                prob(p, "%s: not an object", w);
                continue;
            }
            known_keys(d, w, node_keys, p);
            required_string(d, "path", w, p);
        }
    if (json_object_object_get_ex(ed, "hooks", &a) && is(a, json_type_array))
        for (size_t i = 0; i < json_object_array_length(a); i++) {
            struct json_object *h = json_object_array_get_idx(a, i);
            snprintf(w, sizeof w, "%s: hook %zu", where, i + 1);
            if (!is(h, json_type_object)) {
                prob(p, "%s: not an object", w);
                continue;
            }
            known_keys(h, w, hook_keys, p);
            required_string(h, "hookName", w, p);
            required_string(h, "path", w, p);
            strings_field(h, "env", w, true, p);
        }
}

int cdi_spec_problems(struct json_object *spec, char *buf, size_t len)
{
    struct probs p = { buf, len, 0 };
    if (len)
        buf[0] = 0;
    if (!is(spec, json_type_object)) {
        prob(&p, "the spec is not a JSON object");
        return p.n;
    }
    static const char *const keys[] = { "cdiVersion", "kind", "annotations", "devices", "containerEdits", NULL };
    known_keys(spec, "the spec", keys, &p);
    const char *ver = str_of(spec, "cdiVersion");
    if (!ver)
        prob(&p, "the spec: \"cdiVersion\" is required");
    else if (cdi_version_parse(ver) < 0)
        prob(&p, "the spec: cdiVersion \"%s\" is not a CDI version (%s)", ver, cdi_versions_accepted());
    else if (cdi_version_parse(ver) < EARLIEST)
        prob(&p, "the spec: cdiVersion %s is below %s, the earliest CDI loaders accept", ver, versions[EARLIEST]);
    const char *kind = str_of(spec, "kind");
    const char *slash = kind ? strchr(kind, '/') : NULL;
    if (!kind)
        prob(&p, "the spec: \"kind\" is required (vendor.tld/class)");
    else if (!slash || !kind_part_valid(kind, (size_t)(slash - kind)) || !kind_part_valid(slash + 1, strlen(slash + 1)))
        prob(&p, "the spec: kind \"%s\" is not VENDOR/CLASS (each a letter first, a letter or digit last, and "
             "letters, digits, '_', '.' or '-' between)", kind);
    struct json_object *ed, *devs;
    if (json_object_object_get_ex(spec, "containerEdits", &ed))
        edits_problems(ed, "the spec's containerEdits", &p);
    if (!json_object_object_get_ex(spec, "devices", &devs) || !is(devs, json_type_array) ||
        json_object_array_length(devs) == 0) {
        prob(&p, "the spec: \"devices\" is required (a non-empty list)");
        return p.n;
    }
    for (size_t i = 0; i < json_object_array_length(devs); i++) {
        struct json_object *d = json_object_array_get_idx(devs, i);
        char w[120];
        if (!is(d, json_type_object)) {
            prob(&p, "device %zu: not an object", i + 1);
            continue;
        }
        const char *name = str_of(d, "name");
        snprintf(w, sizeof w, "device %s", name ? name : "?");
        static const char *const dkeys[] = { "name", "annotations", "containerEdits", NULL };
        known_keys(d, w, dkeys, &p);
        if (!name || !cdi_device_name_valid(name))
            prob(&p, "%s: the name must be 1 to 63 letters, digits, '_', '.' or '-', with a letter or digit first "
                 "and last", w);
        for (size_t j = 0; name && j < i; j++) {
            const char *other = str_of(json_object_array_get_idx(devs, j), "name");
            if (other && strcmp(other, name) == 0)
                prob(&p, "%s: the name is given twice", w);
        }
        if (!json_object_object_get_ex(d, "containerEdits", &ed))
            prob(&p, "%s: \"containerEdits\" is required", w);
        else
            edits_problems(ed, w, &p);
    }
    return p.n;
}
