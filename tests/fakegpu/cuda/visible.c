/* visible.c: CUDA_VISIBLE_DEVICES, as the real driver reads it.
 * Unset: every GPU in order. Set: a comma-separated list whose entries are indexes, GPU UUIDs
 * ("GPU-" and a unique prefix of the rest, case-insensitive) or MIG device UUIDs ("MIG-...");
 * the first entry that is invalid, ambiguous or a repeat ends the list (so "" or "-1" hides
 * every device). A GPU in MIG mode is not a CUDA device itself: asked for by index or UUID (or
 * with the variable unset) it stands for its first MIG device, and is skipped if it has none. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fakecuda.h"

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* The GPU (or MIG device) an entry names; false when it names none or several. */
static bool resolve(const char *e, const struct fc_phys_gpu *g, int n, struct fc_pick *out)
{
    if (all_digits(e)) {
        long i = strtol(e, NULL, 10);
        if (i >= n)
            return false;
        out->gpu = (int)i;
        out->mig = g[i].mig_enabled ? 0 : -1;
        return !g[i].mig_enabled || g[i].nmig > 0;
    }
    size_t len = strlen(e);
    int found = 0;
    if (strncasecmp(e, "GPU-", 4) == 0 && len > 4) {
        for (int i = 0; i < n; i++)
            if (strncasecmp(g[i].uuid, e, len) == 0) {
                found++;
                out->gpu = i;
                out->mig = g[i].mig_enabled ? 0 : -1;
                if (g[i].mig_enabled && g[i].nmig == 0)
                    return false;
            }
        return found == 1;
    }
    if (strncasecmp(e, "MIG-", 4) == 0 && len > 4) {
        for (int i = 0; i < n; i++)
            for (int m = 0; g[i].mig_enabled && m < g[i].nmig; m++)
                if (strncasecmp(g[i].mig_uuids[m], e, len) == 0) {
                    found++;
                    out->gpu = i;
                    out->mig = m;
                }
        return found == 1;
    }
    return false;
}

int fc_visible_select(const char *env, const struct fc_phys_gpu *gpus, int ngpus, struct fc_pick *out, int max)
{
    int k = 0;
    if (!env) {
        for (int i = 0; i < ngpus && k < max; i++) {
            if (gpus[i].mig_enabled && gpus[i].nmig == 0)
                continue;
            out[k].gpu = i;
            out[k].mig = gpus[i].mig_enabled ? 0 : -1;
            k++;
        }
        return k;
    }
    char *copy = strdup(env);
    if (!copy)
        return 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && k < max; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        char *end = tok + strlen(tok);
        while (end > tok && isspace((unsigned char)end[-1]))
            *--end = 0;
        struct fc_pick p;
        if (!resolve(tok, gpus, ngpus, &p))
            break;
        bool repeat = false;
        for (int j = 0; j < k; j++)
            if (out[j].gpu == p.gpu && out[j].mig == p.mig)
                repeat = true;
        if (repeat)
            break;
        out[k++] = p;
    }
    free(copy);
    return k;
}
