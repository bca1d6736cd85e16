/* Logging and error helpers shared by vgpu and libvgpu.so (libc only). */
#include "vgpu/log.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int level_cached = -1;
static char prefix[64] = "vgpu";

static const char *const level_names[] = { "error", "warn", "info", "debug" };

enum vgpu_log_level vgpu_log_level(void)
{
    /* A benign race: every thread computes the same value from the same environment. */
    int lvl = __atomic_load_n(&level_cached, __ATOMIC_RELAXED);
    if (lvl >= 0)
        return (enum vgpu_log_level)lvl;
    lvl = VGPU_LOG_WARN;
    const char *env = getenv("VGPU_LOG");
    if (env && *env) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (strcasecmp(env, level_names[i]) == 0)
                found = i;
        if (strcasecmp(env, "warning") == 0)
            found = VGPU_LOG_WARN;
        if (found < 0) {
            char shown[128];
            vgpu_escape_controls(env, strlen(env), shown, sizeof shown, false);
            fprintf(stderr, "%s: warning: VGPU_LOG='%s' is not one of error, warn, info, debug; using warn\n",
                    prefix, shown);
        }
        else
            lvl = found;
    }
    __atomic_store_n(&level_cached, lvl, __ATOMIC_RELAXED);
    return (enum vgpu_log_level)lvl;
}

void vgpu_log_set_level(enum vgpu_log_level lvl)
{
    __atomic_store_n(&level_cached, (int)lvl, __ATOMIC_RELAXED);
}

void vgpu_log_set_prefix(const char *p)
{
    snprintf(prefix, sizeof prefix, "%s", p);
}

const char *vgpu_log_prefix(void)
{
    return prefix;
}

size_t vgpu_escape_controls(const char *in, size_t len, char *out, size_t size, bool keep_newlines)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    bool quoted = false;
    if (!size)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)in[i];
        char esc[5];
        size_t el = 0;
        if (ch == '\'') {
            bool word_before = i > 0 && isalnum((unsigned char)in[i - 1]);
            bool word_after = i + 1 < len && isalnum((unsigned char)in[i + 1]);
            if (!quoted && !word_before)
                quoted = true;
            else if (quoted && !word_after)
                quoted = false;
        }
        if ((ch >= 0x20 && ch != 0x7f) || (ch == '\n' && keep_newlines && !quoted)) {
            esc[el++] = (char)ch;
        } else {
            esc[el++] = '\\';
            if (ch == '\n' || ch == '\t' || ch == '\r') {
                esc[el++] = ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r';
            } else {
                esc[el++] = 'x';
                esc[el++] = hex[ch >> 4];
                esc[el++] = hex[ch & 15];
            }
        }
        if (o + el >= size)
            break;      /* never half an escape */
        memcpy(out + o, esc, el);
        o += el;
    }
    out[o] = '\0';
    return o;
}

static void vlog(enum vgpu_log_level lvl, const char *fmt, va_list ap)
{
    /* One write per message, so lines of concurrent processes do not interleave. */
    char msg[1024], buf[1024];
    int n = snprintf(buf, sizeof buf, "%s: %s: ", prefix, lvl == VGPU_LOG_WARN ? "warning" : level_names[lvl]);
    if (n < 0 || (size_t)n >= sizeof buf - 2)
        return;
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0)
        return;
    size_t ml = (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    if (ml && msg[ml - 1] == '\n')
        ml--;
    /* A message echoes what it was given (a job name, a path, an option's value): control bytes
     * in it would reach the terminal raw (an escape sequence could recolour or retitle it, or
     * hide the message), so they are written as \t, \r or \xHH. Newlines stay, but for those in
     * a quoted value: some messages are several lines (a list of the GPUs). */
    n += (int)vgpu_escape_controls(msg, ml, buf + n, sizeof buf - 1 - (size_t)n, true);
    buf[n++] = '\n';
    fwrite(buf, 1, (size_t)n, stderr);
}

void vgpu_log(enum vgpu_log_level lvl, const char *fmt, ...)
{
    if (lvl > vgpu_log_level())
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, fmt, ap);
    va_end(ap);
}

int vgpu_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(VGPU_LOG_ERROR, fmt, ap);
    va_end(ap);
    return code;
}

void vgpu_err_set(struct vgpu_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

int vgpu_err_report(const struct vgpu_err *e)
{
    return vgpu_fail(e->code, "%s", e->msg);
}
