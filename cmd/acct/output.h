/* vgpu acct: records and totals as a table, CSV or JSON (vgpu-acct(1), vgpu-json(7)). */
#ifndef VGPU_CMD_ACCT_OUTPUT_H
#define VGPU_CMD_ACCT_OUTPUT_H

#include "vgpu/acct.h"

enum vgpu_acct_format { VGPU_ACCT_TABLE, VGPU_ACCT_CSV, VGPU_ACCT_JSON };

struct vgpu_acct_out;

struct vgpu_acct_out *vgpu_acct_out_begin(enum vgpu_acct_format f, bool totals);
/* Callbacks for vgpu_acct_query / vgpu_acct_totals (arg: the output). */
int vgpu_acct_out_record(const struct vgpu_acct_record *rec, void *arg);
int vgpu_acct_out_total(const struct vgpu_acct_total *t, void *arg);
/* Where the records came from: JSON's "source" and "partial" (vgpu-json(7)). */
void vgpu_acct_out_origin(struct vgpu_acct_out *o, const struct vgpu_acct_origin *from);
/* Prints what is left (the JSON document, "no records"), frees; 0, or -1 when stdout failed.
 * failed: the records could not all be read (said on stderr): no "no records", no document. */
int vgpu_acct_out_end(struct vgpu_acct_out *o, bool failed);

#endif
