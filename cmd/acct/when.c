/* vgpu acct: parsing --since and --until (when.h). Strict: a time that is not one of the forms
 * is an error, never a guess. */
#include "acct/when.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/exitcode.h"

static int bad(const char *text, const char *option, struct vgpu_err *e)
{
    vgpu_err_set(e, VGPU_EXIT_USAGE, "%s '%s': give a date (2026-11-01), a local time (2026-11-01T14:30), a time "
                 "before now (-7d, -2h, -30m, -90s), now, or @SECONDS since the epoch", option, text);
    return -1;
}

static int no_such_day(const char *text, const char *option, const struct tm *asked, struct vgpu_err *e)
{
    static const char *const months[] = { "January", "February", "March", "April", "May", "June", "July",
                                          "August", "September", "October", "November", "December" };
    vgpu_err_set(e, VGPU_EXIT_USAGE, "%s '%s': there is no %d %s %d", option, text, asked->tm_mday,
                 months[asked->tm_mon >= 0 && asked->tm_mon < 12 ? asked->tm_mon : 0], asked->tm_year + 1900);
    return -1;
}

int vgpu_acct_parse_when(const char *text, const char *option, uint64_t now_ns, uint64_t *ns, struct vgpu_err *e)
{
    if (!strcmp(text, "now")) {
        *ns = now_ns;
        return 0;
    }
    char *end;
    if (text[0] == '-' || text[0] == '@') {
        errno = 0;
        unsigned long long n = strtoull(text + 1, &end, 10);
        if (errno || end == text + 1 || !(text[1] >= '0' && text[1] <= '9'))
            return bad(text, option, e);
        if (text[0] == '@') {
            if (*end || n > 4000000000ULL)
                return bad(text, option, e);
            *ns = n * 1000000000ULL;
            return 0;
        }
        uint64_t unit = !strcmp(end, "d") ? 86400 : !strcmp(end, "h") ? 3600 : !strcmp(end, "m") ? 60
                        : !strcmp(end, "s") ? 1 : 0;
        if (!unit || n > 100000ULL * 86400 / unit)
            return bad(text, option, e);
        uint64_t back = n * unit * 1000000000ULL;
        *ns = back < now_ns ? now_ns - back : 0;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *forms[] = { "%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        memset(&tm, 0, sizeof tm);
        end = strptime(text, forms[i], &tm);
        if (end && !*end) {
            struct tm asked = tm;
            tm.tm_isdst = -1;
            time_t t = mktime(&tm);
            if (t == (time_t)-1 || t < 0)
                return bad(text, option, e);
            /* mktime makes 2026-02-30 into 2 March and 18:34:61 into 18:35:01: a date or time
             * that does not exist is refused, never moved. */
            if (tm.tm_mday != asked.tm_mday || tm.tm_mon != asked.tm_mon || tm.tm_year != asked.tm_year)
                return no_such_day(text, option, &asked, e);
            if (tm.tm_sec != asked.tm_sec || tm.tm_min != asked.tm_min || tm.tm_hour != asked.tm_hour) {
                vgpu_err_set(e, VGPU_EXIT_USAGE, "%s '%s': there is no such local time that day (seconds go to 59, "
                             "and a clock change may skip an hour)", option, text);
                return -1;
            }
            /* CLOCK_REALTIME ns fit in 64 bits (signed, as the database keeps them) until 2262:
             * a time past that is later than every record, not a wrapped number. */
            *ns = (uint64_t)t > VGPU_ACCT_WHEN_LAST / 1000000000ULL ? VGPU_ACCT_WHEN_LAST
                                                                    : (uint64_t)t * 1000000000ULL;
            return 0;
        }
    }
    return bad(text, option, e);
}
