/* "Did you mean": the nearest of some words to a mistyped one (see vgpu/closest.h). Here, not in
 * cmd/, so that the core's own messages (an unknown MIG profile) can suggest too. */
#include "vgpu/closest.h"

#include <ctype.h>
#include <string.h>

/* Edit distance (Damerau-style transpositions count as one), for "did you mean". */
size_t vgpu_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* s in lower case into buf (cut at len - 1). */
static const char *lower(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++)
        buf[i] = (char)tolower((unsigned char)s[i]);
    buf[i] = 0;
    return buf;
}

const char *vgpu_closest(const char *bad, const char *const *cands, size_t n)
{
    const char *best = NULL;
    size_t bestd = (size_t)-1;
    /* Case is no slip worth counting: HIGH is 'high' (issue 36 L3), not four edits from it. */
    char lbad[64], lcand[64];
    if (strlen(bad) >= sizeof lbad)
        return NULL;   /* as vgpu_edit_distance: too long to be a typo of a word */
    lower(bad, lbad, sizeof lbad);
    for (size_t i = 0; i < n; i++) {
        if (!cands[i])
            continue;
        size_t dd = vgpu_edit_distance(lbad, lower(cands[i], lcand, sizeof lcand));
        /* A prefix of a candidate is as good as a typo of it. */
        if (strncmp(lcand, lbad, strlen(lbad)) == 0 && *bad)
            dd = dd < 1 ? dd : 1;
        if (dd < bestd) {
            bestd = dd;
            best = cands[i];
        }
    }
    /* Only a near miss is worth suggesting: one slip in a short word, two in a longer one.
     * A looser bound ("bogus" -> "ls", "urgent" -> "high") suggests words nobody meant. */
    size_t limit = strlen(bad) <= 4 ? 1 : 2;
    return bestd <= limit ? best : NULL;
}
