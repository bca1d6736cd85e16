/* JSON output helpers (vgpu only; see vgpu/json.h). */
#include "vgpu/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct json_object *vgpu_json_doc(void)
{
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "schema", json_object_new_int(VGPU_JSON_SCHEMA));
    return o;
}

int vgpu_json_emit(struct json_object *doc, bool pretty)
{
    int flags = pretty ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED : JSON_C_TO_STRING_PLAIN;
    const char *s = json_object_to_json_string_ext(doc, flags | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = 0;
    if (fputs(s, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
        rc = -1;
    json_object_put(doc);
    return rc;
}

void vgpu_json_str(struct json_object *o, const char *key, const char *val)
{
    json_object_object_add(o, key, val ? json_object_new_string(val) : NULL);
}

void vgpu_json_u64(struct json_object *o, const char *key, uint64_t val)
{
    json_object_object_add(o, key, json_object_new_uint64(val));
}

void vgpu_json_i64(struct json_object *o, const char *key, int64_t val)
{
    json_object_object_add(o, key, json_object_new_int64(val));
}

void vgpu_json_dbl(struct json_object *o, const char *key, double val)
{
    json_object_object_add(o, key, json_object_new_double(val));
}

void vgpu_json_bool(struct json_object *o, const char *key, bool val)
{
    json_object_object_add(o, key, json_object_new_boolean(val));
}

void vgpu_json_null(struct json_object *o, const char *key)
{
    json_object_object_add(o, key, NULL);
}

void vgpu_json_u64_or_null(struct json_object *o, const char *key, bool valid, uint64_t val)
{
    json_object_object_add(o, key, valid ? json_object_new_uint64(val) : NULL);
}

/* One object's keys seen so far, as spans of the text (escapes left as written). */
struct key_level {
    bool is_object, want_key;
    const char **key;
    size_t *len, n, cap;
};

bool vgpu_json_duplicate_key(const char *text, char *key, size_t keylen, unsigned *line)
{
    enum { MAX_DEPTH = 64 };         /* deeper than json-c's own limit (32): never reached on valid input */
    struct key_level st[MAX_DEPTH];
    int depth = -1;
    bool found = false;
    unsigned ln = 1;
    for (const char *p = text; *p && !found; p++) {
        if (*p == '\n') {
            ln++;
        } else if (*p == '{' || *p == '[') {
            if (depth + 1 >= MAX_DEPTH)
                break;
            st[++depth] = (struct key_level){ .is_object = *p == '{', .want_key = *p == '{' };
        } else if (*p == '}' || *p == ']') {
            if (depth >= 0) {
                free(st[depth].key);
                free(st[depth].len);
                depth--;
            }
        } else if (*p == ',') {
            if (depth >= 0 && st[depth].is_object)
                st[depth].want_key = true;
        } else if (*p == '"') {
            const char *s = ++p;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1])
                    p++;
                p++;
            }
            if (!*p)
                break;
            size_t n = (size_t)(p - s);
            struct key_level *l = depth >= 0 ? &st[depth] : NULL;
            if (!l || !l->is_object || !l->want_key)
                continue;
            l->want_key = false;
            for (size_t k = 0; k < l->n && !found; k++)
                if (l->len[k] == n && !memcmp(l->key[k], s, n)) {
                    snprintf(key, keylen, "%.*s", (int)(n < 200 ? n : 200), s);
                    *line = ln;
                    found = true;
                }
            if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 8;
                const char **nk = realloc(l->key, cap * sizeof *nk);
                if (nk)
                    l->key = nk;
                size_t *nl = realloc(l->len, cap * sizeof *nl);
                if (nl)
                    l->len = nl;
                if (!nk || !nl)
                    break;      /* out of memory: no verdict, json-c's parse stands */
                l->cap = cap;
            }
            l->key[l->n] = s;
            l->len[l->n++] = n;
        }
    }
    for (; depth >= 0; depth--) {
        free(st[depth].key);
        free(st[depth].len);
    }
    return found;
}
