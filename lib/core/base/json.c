/* JSON output helpers (vgpu only; see vgpu/json.h). */
#include "vgpu/json.h"

#include <errno.h>
#include <stdio.h>

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
