/* Logging for the vgpu binary and libvgpu.so: VGPU_LOG=error|warn|info|debug (default warn).
 * Messages go to stderr as "vgpu: LEVEL: text" (the library adds its pid). */
#ifndef VGPU_LOG_H
#define VGPU_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum vgpu_log_level { VGPU_LOG_ERROR = 0, VGPU_LOG_WARN = 1, VGPU_LOG_INFO = 2, VGPU_LOG_DEBUG = 3 };

/* Reads VGPU_LOG once; an unknown value is reported once and warn is used. */
enum vgpu_log_level vgpu_log_level(void);
void vgpu_log_set_level(enum vgpu_log_level lvl);
/* The prefix printed before every message ("vgpu", "vgpu list", "vgpu[1234]"). */
void vgpu_log_set_prefix(const char *prefix);
const char *vgpu_log_prefix(void);

void vgpu_log(enum vgpu_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define vgpu_error(...) vgpu_log(VGPU_LOG_ERROR, __VA_ARGS__)
#define vgpu_warn(...)  vgpu_log(VGPU_LOG_WARN, __VA_ARGS__)
#define vgpu_info(...)  vgpu_log(VGPU_LOG_INFO, __VA_ARGS__)
#define vgpu_debug(...) vgpu_log(VGPU_LOG_DEBUG, __VA_ARGS__)

/* Copies len bytes of in to out (NUL-terminated, at most size bytes with the NUL), control
 * bytes written as \n, \t, \r or \xHH; returns the length written. With keep_newlines, the
 * newlines of the text are kept, but not those inside a quoted value ('...': a quote opens
 * after a non-alphanumeric byte and closes before one, so "job's" opens nothing): a value
 * is what the user gave, and a raw newline in it would start a line that looks like the
 * message's own. Every log message goes through it (keeping its newlines), so no escape sequence in
 * a value echoed in a message reaches a terminal raw. */
size_t vgpu_escape_controls(const char *in, size_t len, char *out, size_t size, bool keep_newlines);

/* Prints "PREFIX: error: text" and returns code, so commands can `return vgpu_fail(2, ...)`. */
int vgpu_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A small error carrier for library functions that must not print (the caller decides). */
struct vgpu_err {
    int code;           /* an enum vgpu_exit value */
    char msg[512];
};
void vgpu_err_set(struct vgpu_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints e->msg as an error and returns e->code. */
int vgpu_err_report(const struct vgpu_err *e);

#endif
