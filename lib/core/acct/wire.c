/* Accounting records and filters on the arbiter's socket (vgpu/acct.h): a record is its fixed
 * part and only the GPUs it has (a one-GPU record is ~1 KiB of the struct's 4 KiB, so a 32 KiB
 * reply carries some thirty). Both ends are the same vgpu (the requests carry the record's size,
 * and the daemon refuses another); what comes in is still checked, as everything from a client:
 * counts within bounds, strings cut at their size. libc only (the test tools link it too). */
#include "vgpu/acct.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define FIXED offsetof(struct vgpu_acct_record, gpu)

size_t vgpu_acct_pack(const struct vgpu_acct_record *rec, void *buf, size_t cap)
{
    unsigned n = rec->gpu_count < VGPU_REGION_MAX_DEVICES ? rec->gpu_count : VGPU_REGION_MAX_DEVICES;
    size_t len = FIXED + n * sizeof rec->gpu[0];
    if (len > cap)
        return 0;
    memcpy(buf, rec, FIXED);
    /* buf may sit anywhere in a message: the count is copied, not stored through a cast */
    memcpy((char *)buf + offsetof(struct vgpu_acct_record, gpu_count), &n, sizeof n);
    memcpy((char *)buf + FIXED, rec->gpu, n * sizeof rec->gpu[0]);
    return len;
}

#define TERMINATE(s) ((s)[sizeof(s) - 1] = 0)

size_t vgpu_acct_unpack(const void *buf, size_t len, struct vgpu_acct_record *rec)
{
    if (len < FIXED)
        return 0;
    memset(rec, 0, sizeof *rec);
    memcpy(rec, buf, FIXED);
    if (rec->gpu_count > VGPU_REGION_MAX_DEVICES || len < FIXED + rec->gpu_count * sizeof rec->gpu[0])
        return 0;
    memcpy(rec->gpu, (const char *)buf + FIXED, rec->gpu_count * sizeof rec->gpu[0]);
    TERMINATE(rec->id);
    TERMINATE(rec->name);
    TERMINATE(rec->user);
    TERMINATE(rec->command);
    for (unsigned d = 0; d < rec->gpu_count; d++) {
        TERMINATE(rec->gpu[d].uuid);
        TERMINATE(rec->gpu[d].core_policy);
        TERMINATE(rec->gpu[d].gpu_time_source);
    }
    /* bools from another process's bytes: only 0 or 1 */
    rec->run_as_user = ((const unsigned char *)&rec->run_as_user)[0] != 0;
    rec->recovered = ((const unsigned char *)&rec->recovered)[0] != 0;
    rec->end_approximate = ((const unsigned char *)&rec->end_approximate)[0] != 0;
    rec->bounded &= VGPU_ACCT_BOUND_ALL;
    for (unsigned d = 0; d < rec->gpu_count; d++) {
        rec->gpu[d].energy_known = ((const unsigned char *)&rec->gpu[d].energy_known)[0] != 0;
        rec->gpu[d].migrated_known = ((const unsigned char *)&rec->gpu[d].migrated_known)[0] != 0;
    }
    return FIXED + rec->gpu_count * sizeof rec->gpu[0];
}

static int put(char *dst, size_t cap, const char *src, uint8_t *has)
{
    *has = src != NULL;
    if (!src)
        return 0;
    if (strlen(src) >= cap)
        return -1;
    snprintf(dst, cap, "%s", src);
    return 0;
}

int vgpu_acct_filter_pack(const struct vgpu_acct_filter *f, struct vgpu_acct_wire_filter *w)
{
    memset(w, 0, sizeof *w);
    w->since_ns = f->since_ns;
    w->until_ns = f->until_ns;
    w->after_end_ns = f->after_end_ns;
    w->uid = f->uid;
    w->limit = f->limit;
    w->by_uid = f->by_uid;
    return put(w->gpu, sizeof w->gpu, f->gpu, &w->has_gpu) < 0 || put(w->name, sizeof w->name, f->name, &w->has_name) < 0 ||
                   put(w->id, sizeof w->id, f->id, &w->has_id) < 0 ||
                   put(w->after_id, sizeof w->after_id, f->after_id, &w->has_after) < 0
               ? -1 : 0;
}

void vgpu_acct_filter_unpack(struct vgpu_acct_wire_filter *w, struct vgpu_acct_filter *f)
{
    TERMINATE(w->gpu);
    TERMINATE(w->name);
    TERMINATE(w->id);
    TERMINATE(w->after_id);
    memset(f, 0, sizeof *f);
    f->since_ns = w->since_ns;
    f->until_ns = w->until_ns;
    f->after_end_ns = w->after_end_ns;
    f->uid = w->uid;
    f->limit = w->limit;
    f->by_uid = w->by_uid != 0;
    f->gpu = w->has_gpu ? w->gpu : NULL;
    f->name = w->has_name ? w->name : NULL;
    f->id = w->has_id ? w->id : NULL;
    f->after_id = w->has_after ? w->after_id : NULL;
}
