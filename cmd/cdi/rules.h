/* The CDI spec's version rules, shared by `vgpu cdi generate` (which writes the lowest version
 * its fields need) and `vgpu cdi validate` (which checks a spec against them).
 * Facts from container-device-interface SPEC.md ("Released versions") and specs-go/version.go:
 * a loader refuses a cdiVersion it does not know, unknown fields, and a cdiVersion below what the
 * fields used need; an engine knows the versions up to its bundled CDI library's own (podman 4.3,
 * CDI 0.5: up to 0.5.0). */
#ifndef VGPU_CMD_CDI_RULES_H
#define VGPU_CMD_CDI_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

/* Index of a known version, oldest first ("0.3.0" or "v0.3.0"), or -1. */
int cdi_version_parse(const char *s);
const char *cdi_version_name(int idx);
/* The earliest version loaders accept (0.3.0; 0.1.0 and 0.2.0 are known but below it). */
int cdi_version_earliest(void);
/* "0.3.0, 0.4.0, ... 1.1.0", for messages. */
const char *cdi_versions_accepted(void);

/* Device names: [A-Za-z0-9] first, then letters, digits, '_', '.', '-' (CDI also allows ':',
 * which we leave out because the name is part of a file name), a letter or digit last,
 * at most 63. */
bool cdi_device_name_valid(const char *s);

/* A field that needs a version above the earliest: the version and why. */
struct cdi_need {
    int version;
    char why[200];
};
/* Every field of spec that needs more than the earliest version, into out (at most max);
 * returns how many there were (which may exceed max). *lowest (when not NULL): the highest
 * version needed, or the earliest when none is. */
size_t cdi_spec_needs(struct json_object *spec, struct cdi_need *out, size_t max, int *lowest);
/* The lowest version spec can carry: the highest of its needs, or the earliest. */
int cdi_spec_lowest(struct json_object *spec);

/* Structure a loader checks: known fields only, required fields present and of the right
 * type, names valid. Appends one line per problem to buf ("\n"-separated); returns the count. */
int cdi_spec_problems(struct json_object *spec, char *buf, size_t len);

#endif
