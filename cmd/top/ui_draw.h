/* vgpu top's painting (ui_draw.c): above the state, beside the keys, below the loop (the layers
 * are in ui_state.h). */
#ifndef VGPU_CMD_TOP_UI_DRAW_H
#define VGPU_CMD_TOP_UI_DRAW_H

#include "ui_state.h"

/* After initscr: the colour pairs, when u->color and the terminal has colours (else u->color
 * becomes false). */
void ui_draw_colors(struct ui *u);
/* Paints the whole screen from u. */
void ui_draw(struct ui *u);

#endif
