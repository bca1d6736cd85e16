/* "Did you mean": the word nearest to a mistyped one, when it is near enough to suggest. */
#ifndef VGPU_CLOSEST_H
#define VGPU_CLOSEST_H

#include <stddef.h>

/* Edit distance (Damerau-style: a transposition counts as one); 64 for words over 63 bytes. */
size_t vgpu_edit_distance(const char *a, const char *b);
/* The candidate closest to `bad`, or NULL when none is close enough to suggest. */
const char *vgpu_closest(const char *bad, const char *const *cands, size_t n);

#endif
