/* vgpu top's keys (ui_keys.c): above the state, beside the painting, below the loop (the layers
 * are in ui_state.h). */
#ifndef VGPU_CMD_TOP_UI_KEYS_H
#define VGPU_CMD_TOP_UI_KEYS_H

#include "ui_state.h"

/* Acts on key `ch` (a curses key code): changes u, and may signal processes or change limits. */
void ui_key(struct ui *u, int ch);

#endif
