/* vgpu top's users view (the u key): today's totals per user from the accounting records
 * (vgpu/acct.h: through the arbiter when one answers, else the caller's own store). A leaf of the
 * screen's files: ui_keys.c reads it when the view opens, ui_draw.c paints it; it knows neither. */
#ifndef VGPU_CMD_TOP_USERS_H
#define VGPU_CMD_TOP_USERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct top_user_total {
    uint32_t uid;
    char user[64];
    uint64_t jobs;
    double gpu_hours, gib_hours, energy_j;
    double req_gib_hours, borrow_gib_hours;   /* memory promised, and held past it (vgpu/acct.h) */
    bool energy_known;              /* some job of theirs had its energy measured */
};

struct top_users {
    struct top_user_total *t;       /* sorted by GPU-hours, most first */
    size_t n;
    uint64_t since_ns, read_ns;     /* local midnight, and when read (CLOCK_REALTIME) */
    char msg[600];                  /* why nothing could be read ("" when it was) */
    bool partial;                   /* the arbiter is down: the caller's own store only */
    int finishing;                  /* the caller's jobs that ended but whose record vgpu run's
                                     * finisher is still writing, as the read began: read again
                                     * (top_users_tick) until none is left */
};

/* Reads today's totals into v (replacing what it held). */
void top_users_read(struct top_users *v);
void top_users_free(struct top_users *v);
/* Called on each refresh while the view is open: reads again while a record was on its way. */
void top_users_tick(struct top_users *v);
/* Paints the view in rows y .. y+h-1, cols wide (curses). */
void top_users_draw(const struct top_users *v, int y, int h, int cols);

#endif
