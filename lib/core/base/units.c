/* Sizes and percents (see units.h for the grammar). Decimal only, an explicit suffix table,
 * overflow detected: none of the traps of strtoul(s, 0) with a last-character suffix
 * (reference/interception.md, pitfall 14). libc only: libvgpu.so parses HAMi's variables here. */
#include "vgpu/units.h"
#include "vgpu/exitcode.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct suffix { const char *text; uint64_t mult; };

static const struct suffix suffixes[] = {
    { "",    1 }, { "B", 1 },
    { "K",   VGPU_KIB }, { "KB", VGPU_KIB }, { "KiB", VGPU_KIB }, { "Ki", VGPU_KIB },
    { "M",   VGPU_MIB }, { "MB", VGPU_MIB }, { "MiB", VGPU_MIB }, { "Mi", VGPU_MIB },
    { "G",   VGPU_GIB }, { "GB", VGPU_GIB }, { "GiB", VGPU_GIB }, { "Gi", VGPU_GIB },
    { "T",   VGPU_GIB * 1024 }, { "TB", VGPU_GIB * 1024 }, { "TiB", VGPU_GIB * 1024 }, { "Ti", VGPU_GIB * 1024 },
};

int vgpu_parse_size(const char *text, uint64_t *bytes, const char *what, struct vgpu_err *e)
{
    const char *w = what ? what : "size";
    if (!text || !*text) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: empty size; give a number with an optional unit, e.g. 4G, 512MiB, 1.5G", w);
        return -1;
    }
    const char *p = text;
    uint64_t whole = 0;
    int ndigits = 0;
    while (*p >= '0' && *p <= '9') {
        if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            goto overflow;
        p++;
        ndigits++;
    }
    /* Up to 9 fractional digits, kept as a numerator over 10^nfrac. */
    uint64_t frac = 0, frac_den = 1;
    int nfrac = 0;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (nfrac < 9) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_den *= 10;
            } else if (*p != '0') {
                goto bad;
            }
            nfrac++;
            p++;
        }
        if (nfrac == 0)
            goto bad;
    }
    if (ndigits == 0)
        goto bad;
    /* Leading zeros are fine ("010G" is ten GiB, never octal), but "0x10" stops at 'x' and fails. */
    const struct suffix *sx = NULL;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strcasecmp(p, suffixes[i].text) == 0) {
            sx = &suffixes[i];
            break;
        }
    if (!sx)
        goto bad;
    uint64_t total;
    if (__builtin_mul_overflow(whole, sx->mult, &total))
        goto overflow;
    if (frac) {
        /* frac/frac_den * mult, exact when the product is a whole number of bytes. */
        unsigned __int128 f = (unsigned __int128)frac * sx->mult;
        if (f % frac_den != 0) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is not a whole number of bytes; use a larger unit or fewer decimals", w, text);
            return -1;
        }
        if (__builtin_add_overflow(total, (uint64_t)(f / frac_den), &total))
            goto overflow;
    }
    *bytes = total;
    return 0;
bad:
    vgpu_err_set(e, VGPU_EXIT_USAGE,
                 "%s: '%s' is not a size; use a decimal number with an optional unit B, K, M, G, T "
                 "(Ki/KiB/KB ... Ti/TiB/TB mean the same, binary), no spaces or exponents, e.g. 4G, 512MiB, 1.5G",
                 w, text);
    return -1;
overflow:
    vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is too large: a size is at most 16 EiB (18446744073709551615 bytes)",
                 w, text);
    return -1;
}

int vgpu_parse_percent(const char *text, unsigned *pct, const char *what, struct vgpu_err *e)
{
    return vgpu_parse_percent_range(text, 0, 100, pct, what, e);
}

int vgpu_parse_percent_range(const char *text, unsigned min, unsigned max, unsigned *pct, const char *what,
                             struct vgpu_err *e)
{
    const char *w = what ? what : "percent";
    const char *p = text;
    unsigned v = 0;
    int n = 0;
    if (!p)
        p = "";
    while (*p >= '0' && *p <= '9' && n < 4) {
        v = v * 10 + (unsigned)(*p - '0');
        p++;
        n++;
    }
    if (*p == '%')
        p++;
    /* One message for every refusal, naming the range this caller really accepts. */
    if (n == 0 || *p || n >= 4 || v < min || v > max) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' is not a percentage from %u to %u; give a whole number such as 30 or 30%%",
                     w, text ? text : "", min, max);
        return -1;
    }
    *pct = v;
    return 0;
}

int vgpu_parse_mem_limit(const char *text, uint64_t *bytes, const char *what, struct vgpu_err *e)
{
    const char *w = what ? what : "size";
    uint64_t v;
    if (vgpu_parse_size(text, &v, w, e) < 0)
        return -1;
    /* A bare number is bytes, and no GPU job fits in less than a mebibyte: "--mem 50" is a
     * percentage or megabytes forgotten, never 50 bytes (a job could not even make a context). */
    const char *p = text;
    while ((*p >= '0' && *p <= '9') || *p == '.')
        p++;
    if (*p == '\0' && v && v < VGPU_MIB) {
        /* Only advice that is itself valid: N% exists only for 1..100, and NM/NG only while
         * they stay sizes a GPU could have (not "1048575%" or "1048575G"). */
        char advice[160];
        if (v <= 100)
            snprintf(advice, sizeof advice, "e.g. %sM or %sG, or %s%% for a share of the GPU", text, text, text);
        else if (v < 1024)
            snprintf(advice, sizeof advice, "e.g. %sM or %sMiB", text, text);
        else
            snprintf(advice, sizeof advice, "e.g. 512M or 4G");
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' has no unit, so it would be %llu bytes; a number without a unit must "
                     "be at least 1048576 (1 MiB): write the unit, %s", w, text, (unsigned long long)v, advice);
        return -1;
    }
    *bytes = v;
    return 0;
}

char *vgpu_format_size_near(uint64_t x, uint64_t other, char *buf, size_t len)
{
    char o[32];
    vgpu_format_size(x, buf, len);
    vgpu_format_size(other, o, sizeof o);
    if (x != other && (strcmp(buf, o) == 0 || (x > other ? x - other : other - x) < (x > other ? x : other) / 1000)) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, " = %llu bytes", (unsigned long long)x);
    }
    return buf;
}

/* What to type for "at most `total`": its size when that prints exactly (80G), else its bytes:
 * the rounded "79.65 GiB" would itself be more than the GPU has. */
static void exact_size(uint64_t total, char *buf, size_t len)
{
    static const char *const unit[] = { "", "K", "M", "G", "T" };
    int u = 0;
    uint64_t v = total;
    while (u < 4 && v && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu%s", (unsigned long long)v, unit[u]);
}

int vgpu_mem_value(const char *what, const char *text, uint64_t total, const char *gpu_desc, bool allow_none,
                   uint64_t *out, struct vgpu_err *e)
{
    size_t len = strlen(text);
    const char *alt = allow_none ? ", or none to remove the limit" : "";
    if (allow_none && strcasecmp(text, "none") == 0) {
        *out = 0;
        return 0;
    }
    uint64_t v;
    if (len > 0 && text[len - 1] == '%') {
        unsigned pct;
        if (vgpu_parse_percent_range(text, 1, 100, &pct, what, e) < 0)
            return -1;
        if (!total) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s %s: the total memory of %s is not known; give a size such as 4G",
                         what, text, gpu_desc);
            return -1;
        }
        v = total / 100 * pct + total % 100 * pct / 100;
    } else {
        if (vgpu_parse_mem_limit(text, &v, what, e) < 0)
            return -1;
        if (v == 0) {
            vgpu_err_set(e, VGPU_EXIT_USAGE, "%s: '%s' leaves no memory at all; give a size such as 4G%s", what, text,
                         alt);
            return -1;
        }
    }
    if (total && v > total) {
        char a[64], b[64], c[32];
        vgpu_format_size_near(v, total, a, sizeof a);
        vgpu_format_size_near(total, v, b, sizeof b);
        exact_size(total, c, sizeof c);
        vgpu_err_set(e, VGPU_EXIT_USAGE, "%s %s (%s) is larger than %s (%s total); give at most %s (or 100%%)", what,
                     text, a, gpu_desc, b, c);
        return -1;
    }
    *out = v;
    return 0;
}

int vgpu_mem_limit_value(const char *text, uint64_t total, const char *gpu_desc, bool allow_none, uint64_t *out,
                         struct vgpu_err *e)
{
    return vgpu_mem_value("--mem", text, total, gpu_desc, allow_none, out, e);
}

int vgpu_mem_request_limit(const char *text, uint64_t total, const char *gpu_desc, bool allow_none, uint64_t *request,
                           uint64_t *limit, struct vgpu_err *e)
{
    const char *colon = strchr(text, ':');
    if (!colon) {
        if (vgpu_mem_limit_value(text, total, gpu_desc, allow_none, limit, e) < 0)
            return -1;
        *request = *limit;
        return 0;
    }
    char req_text[64];
    size_t n = (size_t)(colon - text);
    if (n == 0 || !colon[1] || strchr(colon + 1, ':') || n >= sizeof req_text) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem '%s': write REQUEST:LIMIT, two sizes (20G:100G), or one size", text);
        return -1;
    }
    memcpy(req_text, text, n);
    req_text[n] = 0;
    uint64_t req, lim;
    if (vgpu_mem_value("--mem REQUEST", req_text, total, gpu_desc, false, &req, e) < 0 ||
        vgpu_mem_value("--mem LIMIT", colon + 1, total, gpu_desc, false, &lim, e) < 0)
        return -1;
    if (req > lim) {
        char a[64], b[64];
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--mem %s: REQUEST (%s) is more than LIMIT (%s) on %s; REQUEST is what the "
                     "job is promised and LIMIT its cap, so give REQUEST <= LIMIT (e.g. 20G:100G)", text,
                     vgpu_format_size_near(req, lim, a, sizeof a), vgpu_format_size_near(lim, req, b, sizeof b),
                     gpu_desc);
        return -1;
    }
    *request = req;
    *limit = lim;
    return 0;
}

bool vgpu_mem_per_gpu(const char *text)
{
    if (*text < '0' || *text > '9')
        return false;
    while (*text >= '0' && *text <= '9')
        text++;
    return *text == ':';
}

const char *vgpu_fit_text(const char *text, size_t w, char *buf, size_t len)
{
    size_t n = strlen(text);
    if (n <= w)
        return text;
    if (w == 0 || len < 2) {
        if (len)
            buf[0] = 0;
        return buf;
    }
    size_t keep = w - 1 < len - 2 ? w - 1 : len - 2;
    memcpy(buf, text, keep);
    buf[keep] = '+';
    buf[keep + 1] = 0;
    return buf;
}

char *vgpu_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%llu %s", (unsigned long long)v, unit[u]);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}

char *vgpu_format_size_short(uint64_t bytes, char *buf, size_t len)
{
    static const char *const unit[] = { "B", "K", "M", "G", "T", "P" };
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0 || v >= 100 || v == (double)(uint64_t)v)
        snprintf(buf, len, "%.0f%s", v, unit[u]);
    else if (v >= 10)
        snprintf(buf, len, "%.1f%s", v, unit[u]);
    else
        snprintf(buf, len, "%.2g%s", v, unit[u]);
    return buf;
}

const char *vgpu_priority_name(int priority)
{
    return priority > 0 ? "high" : priority < 0 ? "low" : "normal";
}

char *vgpu_format_duration(uint64_t s, char *buf, size_t len)
{
    if (s >= 86400)
        snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400), (unsigned long long)(s % 86400 / 3600));
    else if (s >= 3600)
        snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600), (unsigned long long)(s % 3600 / 60));
    else if (s >= 60)
        snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
    else
        snprintf(buf, len, "%llus", (unsigned long long)s);
    return buf;
}
