/* vgpu ps's table, fitted to the terminal as ps(1) fits its columns: each column as wide as its
 * widest cell (up to its maximum). When the line is wider than the terminal, first the gaps
 * between columns narrow to one space, then the columns that may shrink (name, user, pids) give
 * up characters in their order, down to their minimum; a cell cut short ends in '+'. Only what
 * does not fit even then is cut at the terminal's edge, also marked '+'. */
#ifndef VGPU_CMD_PS_TABLE_H
#define VGPU_CMD_PS_TABLE_H

#include <stdio.h>

#define PS_TABLE_MAXCOL 16
#define PS_TABLE_CELL 128

struct ps_col {
    const char *head;
    int min;                    /* never narrower (the header may then be cut too) */
    int max;                    /* never wider; 0: as wide as the widest cell */
    int shrink;                 /* 0: keeps its width; 1, 2, ...: the order in which columns shrink */
};

struct ps_table {
    unsigned ncol;
    const struct ps_col *cols;
    char (*rows)[PS_TABLE_MAXCOL][PS_TABLE_CELL];
    size_t n, cap;
};

void ps_table_init(struct ps_table *t, const struct ps_col *cols, unsigned ncol);
/* Copies one row of ncol cells. 0, or -1 when out of memory. */
int ps_table_add(struct ps_table *t, const char *const *cells);
/* Adds a line of free text under the last row (not a row: it takes no part in the widths). */
#define PS_TABLE_NOTE '\001'
int ps_table_note(struct ps_table *t, const char *text);
/* Prints the header and the rows fitted to width columns (0: no limit). */
void ps_table_print(FILE *to, const struct ps_table *t, int width);
void ps_table_free(struct ps_table *t);

/* The width to fit: COLUMNS when it is a number, else the terminal's (standard output), else
 * 0 (not a terminal: no limit, as ps(1) does for a pipe). */
int ps_table_width(void);

#endif
