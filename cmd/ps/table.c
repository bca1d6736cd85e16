/* vgpu ps's table fitted to the terminal (see table.h). */
#include "ps/table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vgpu/units.h"

void ps_table_init(struct ps_table *t, const struct ps_col *cols, unsigned ncol)
{
    memset(t, 0, sizeof *t);
    t->cols = cols;
    t->ncol = ncol < PS_TABLE_MAXCOL ? ncol : PS_TABLE_MAXCOL;
}

int ps_table_add(struct ps_table *t, const char *const *cells)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        void *nr = realloc(t->rows, cap * sizeof *t->rows);
        if (!nr)
            return -1;
        t->rows = nr;
        t->cap = cap;
    }
    for (unsigned c = 0; c < t->ncol; c++)
        snprintf(t->rows[t->n][c], PS_TABLE_CELL, "%s", cells[c] ? cells[c] : "");
    t->n++;
    return 0;
}

int ps_table_note(struct ps_table *t, const char *text)
{
    const char *cells[PS_TABLE_MAXCOL] = { 0 };
    char first[PS_TABLE_CELL];
    snprintf(first, sizeof first, "%c%s", PS_TABLE_NOTE, text);
    cells[0] = first;
    return ps_table_add(t, cells);
}

static bool is_note(const struct ps_table *t, size_t r)
{
    return t->rows[r][0][0] == PS_TABLE_NOTE;
}

void ps_table_free(struct ps_table *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = t->cap = 0;
}

int ps_table_width(void)
{
    const char *c = getenv("COLUMNS");
    if (c && *c && strspn(c, "0123456789") == strlen(c) && strlen(c) < 6 && atoi(c) > 0)
        return atoi(c);
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 0;
}

/* One line: cells padded to their widths, two spaces apart, cut at `width` (0: not cut). */
static void print_line(FILE *to, const struct ps_table *t, const int *w, const char *const *cells, int width,
                       int gap)
{
    char line[PS_TABLE_MAXCOL * (PS_TABLE_CELL + 2) + 1];
    size_t n = 0;
    for (unsigned c = 0; c < t->ncol && n < sizeof line; c++) {
        char cut[PS_TABLE_CELL];
        const char *s = vgpu_fit_text(cells[c], (size_t)w[c], cut, sizeof cut);
        if (c + 1 == t->ncol)
            n += (size_t)snprintf(line + n, sizeof line - n, "%s", s);
        else
            n += (size_t)snprintf(line + n, sizeof line - n, "%-*s%*s", w[c], s, gap, "");
    }
    if (n >= sizeof line)
        n = sizeof line - 1;
    while (n > 0 && line[n - 1] == ' ')
        line[--n] = 0;
    if (width > 0 && n > (size_t)width) {
        /* Even at their minimum the columns do not fit: cut the line, and say so. */
        line[width - 1] = '+';
        line[width] = 0;
    }
    fprintf(to, "%s\n", line);
}

void ps_table_print(FILE *to, const struct ps_table *t, int width)
{
    int w[PS_TABLE_MAXCOL];
    int total = 0;
    for (unsigned c = 0; c < t->ncol; c++) {
        int m = (int)strlen(t->cols[c].head);
        for (size_t r = 0; r < t->n; r++) {
            if (is_note(t, r))
                continue;
            int l = (int)strlen(t->rows[r][c]);
            m = l > m ? l : m;
        }
        if (t->cols[c].max && m > t->cols[c].max)
            m = t->cols[c].max;
        w[c] = m;
        total += m + (c + 1 < t->ncol ? 2 : 0);
    }
    /* Too wide: first the gaps narrow to one space, then the shrinkable columns give up
     * characters in their order, down to their minimum. */
    int gap = 2;
    if (width > 0 && total > width && t->ncol > 1) {
        gap = 1;
        total -= (int)t->ncol - 1;
    }
    for (int order = 1; width > 0 && total > width && order <= (int)t->ncol; order++)
        for (unsigned c = 0; c < t->ncol && total > width; c++)
            while (t->cols[c].shrink == order && w[c] > t->cols[c].min && total > width) {
                w[c]--;
                total--;
            }
    const char *cells[PS_TABLE_MAXCOL];
    for (unsigned c = 0; c < t->ncol; c++)
        cells[c] = t->cols[c].head;
    print_line(to, t, w, cells, width, gap);
    for (size_t r = 0; r < t->n; r++) {
        if (is_note(t, r)) {
            /* A line under the row before it, cut at the edge like any other. */
            char cut[PS_TABLE_CELL];
            const char *text = t->rows[r][0] + 1;
            fprintf(to, "%s\n", width > 0 ? vgpu_fit_text(text, (size_t)width, cut, sizeof cut) : text);
            continue;
        }
        for (unsigned c = 0; c < t->ncol; c++)
            cells[c] = t->rows[r][c];
        print_line(to, t, w, cells, width, gap);
    }
}
