/* Splitting a command line into words the way a POSIX shell does for simple commands:
 * blanks separate words; '...' is literal; "..." allows \" \\ \$ \` escapes; a backslash
 * outside quotes escapes the next character. No expansion of any kind. */
#ifndef VGPU_SHELL_WORDS_H
#define VGPU_SHELL_WORDS_H

#include <stddef.h>

struct vgpu_words {
    int argc;
    char **argv;   /* NULL-terminated */
};

/* 0, or -1 with msg set (an unterminated quote, a trailing backslash). Free with vgpu_words_free(). */
int vgpu_words_split(const char *line, struct vgpu_words *w, char *msg, size_t msglen);
void vgpu_words_free(struct vgpu_words *w);

#endif
