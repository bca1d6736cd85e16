/* JSON output helpers for the vgpu binary (json-c; never used by libvgpu.so).
 * DESIGN.md decision 8: one document per command (JSON Lines for streams), "schema": 1 at the
 * top, numbers as numbers with the unit in the key (mem_used_bytes), N/A as null. */
#ifndef VGPU_JSON_H
#define VGPU_JSON_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#define VGPU_JSON_SCHEMA 1

/* A new top-level object holding "schema": 1. */
struct json_object *vgpu_json_doc(void);
/* Prints the document on stdout (pretty when `pretty`, else one line), frees it.
 * Returns 0, or -1 when stdout could not be written (errno set). */
int vgpu_json_emit(struct json_object *doc, bool pretty);

void vgpu_json_str(struct json_object *o, const char *key, const char *val);   /* NULL → null */
void vgpu_json_u64(struct json_object *o, const char *key, uint64_t val);
void vgpu_json_i64(struct json_object *o, const char *key, int64_t val);
void vgpu_json_dbl(struct json_object *o, const char *key, double val);
void vgpu_json_bool(struct json_object *o, const char *key, bool val);
void vgpu_json_null(struct json_object *o, const char *key);
/* Adds the value when `valid`, else null: "not available" kept apart from 0. */
void vgpu_json_u64_or_null(struct json_object *o, const char *key, bool valid, uint64_t val);

/* Does some object of the (valid) JSON text have a key twice? json-c keeps the last silently, so
 * a hand-written file with "gpu" twice would be taken half. True with the key and its line. */
bool vgpu_json_duplicate_key(const char *text, char *key, size_t keylen, unsigned *line);

#endif
