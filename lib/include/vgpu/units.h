/* Sizes and percents as users write them on the command line and in the environment.
 * Sizes are decimal numbers (an optional fraction) with an optional binary suffix:
 *   B; K, Ki, KB, KiB; M, Mi, MB, MiB; G, Gi, GB, GiB; T, Ti, TB, TiB (case-insensitive; "KB"
 *   means 1024, as nvidia-smi and Docker users expect; "Gi" as Kubernetes writes it). Plain
 *   digits are bytes.
 * Rejected, with the bad text quoted: empty, whitespace anywhere, signs, hex/octal/exponent
 * forms ("1e3"), unknown suffixes, a fraction of a byte, overflow. Percents: "30" or "30%",
 * integers in the caller's range, no whitespace. Every option of vgpu takes its value by this
 * grammar (vgpu(1), SIZES): no option trims spaces or reads exponents where another refuses them.
 * Memory limits typed by a user (vgpu_parse_mem_limit) also refuse a number without a unit
 * below 1 MiB: "--mem 50" is a forgotten unit or '%', never 50 bytes. */
#ifndef VGPU_UNITS_H
#define VGPU_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "vgpu/log.h"

#define VGPU_KIB (1024ULL)
#define VGPU_MIB (1024ULL * 1024)
#define VGPU_GIB (1024ULL * 1024 * 1024)

/* 0 on success; -1 with e filled (code VGPU_EXIT_USAGE) otherwise. `what` names the value
 * in the message ("--mem"). */
int vgpu_parse_size(const char *text, uint64_t *bytes, const char *what, struct vgpu_err *e);
int vgpu_parse_percent(const char *text, unsigned *pct, const char *what, struct vgpu_err *e);
/* The same, accepting only min..max; the message states that range. */
int vgpu_parse_percent_range(const char *text, unsigned min, unsigned max, unsigned *pct, const char *what,
                             struct vgpu_err *e);
/* vgpu_parse_size, refusing a number without a unit below 1 MiB (0 stays 0: callers say what
 * 0 means for them). */
int vgpu_parse_mem_limit(const char *text, uint64_t *bytes, const char *what, struct vgpu_err *e);

/* One memory limit as a user types it, for a GPU of `total` bytes (0: unknown), checked the
 * same way by vgpu run --mem, vgpu limit --mem and vgpu top's 'm' key: SIZE (a number
 * without a unit must be at least 1 MiB), PCT% (1..100 of total), and with allow_none "none"
 * (stored as 0). Refuses 0 and more than the GPU has. `gpu_desc` names the GPU in messages.
 * 0, or -1 with e filled (code VGPU_EXIT_USAGE). */
int vgpu_mem_limit_value(const char *text, uint64_t total, const char *gpu_desc, bool allow_none, uint64_t *out,
                         struct vgpu_err *e);
/* The same for another option than --mem (--oversubscribe=SIZE): `what` names it in messages. */
int vgpu_mem_value(const char *what, const char *text, uint64_t total, const char *gpu_desc, bool allow_none,
                   uint64_t *out, struct vgpu_err *e);

/* --mem REQUEST:LIMIT (decision 13): two such values, REQUEST promised on the GPU and LIMIT the
 * hard cap; REQUEST above LIMIT is refused saying so. One value (no ':') is both: "4G" = "4G:4G".
 * "none" (allow_none) only as the whole text (both 0). 0, or -1 with e (VGPU_EXIT_USAGE). */
int vgpu_mem_request_limit(const char *text, uint64_t total, const char *gpu_desc, bool allow_none, uint64_t *request,
                           uint64_t *limit, struct vgpu_err *e);
/* Whether a --mem value is the per-GPU form IDX:VALUE,... (digits alone before the first ':'),
 * not REQUEST:LIMIT (whose REQUEST has a unit or '%': "20G:100G"). */
bool vgpu_mem_per_gpu(const char *text);

/* text when it fits in w characters, else its first w-1 and a '+' (written into buf), so a cut
 * name never passes for a whole one; "" when w is 0. ASCII text (names are sanitized). */
const char *vgpu_fit_text(const char *text, size_t w, char *buf, size_t len);

/* "4.00 GiB", "512 MiB", "1023 B": binary units, at most 3 significant decimals. */
char *vgpu_format_size(uint64_t bytes, char *buf, size_t len);
/* vgpu_format_size, adding " = N bytes" when x and `other` print alike or nearly, so a message
 * comparing them never says "79.65 GiB is larger than 79.65 GiB". */
char *vgpu_format_size_near(uint64_t x, uint64_t other, char *buf, size_t len);
/* "4G"-style compact form used in tables: "4G", "1.5G", "512M". */
char *vgpu_format_size_short(uint64_t bytes, char *buf, size_t len);
/* "1h02m", "3m05s", "12s". */
char *vgpu_format_duration(uint64_t seconds, char *buf, size_t len);
/* A job's --priority as vgpu run takes it, the one spelling of ps, top, acct and their --json:
 * "high" (> 0), "normal" (0) or "low" (< 0). */
const char *vgpu_priority_name(int priority);

#endif
