/* Shell-like word splitting for `vgpu shell` (see words.h). */
#include "shell/words.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(struct vgpu_words *w, const char *s, size_t n)
{
    char **grown = realloc(w->argv, (size_t)(w->argc + 2) * sizeof *grown);
    if (!grown)
        return -1;
    w->argv = grown;
    w->argv[w->argc] = strndup(s, n);
    if (!w->argv[w->argc])
        return -1;
    w->argc++;
    w->argv[w->argc] = NULL;
    return 0;
}

int vgpu_words_split(const char *line, struct vgpu_words *w, char *msg, size_t msglen)
{
    w->argc = 0;
    w->argv = calloc(1, sizeof *w->argv);
    size_t len = strlen(line);
    char *buf = malloc(len + 1);
    if (!w->argv || !buf) {
        free(buf);
        snprintf(msg, msglen, "out of memory");
        vgpu_words_free(w);
        return -1;
    }
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        size_t n = 0;
        bool in_word = true;
        while (in_word && *p) {
            switch (*p) {
            case ' ': case '\t': case '\n': case '\r':
                in_word = false;
                break;
            case '\'': {
                const char *end = strchr(p + 1, '\'');
                if (!end)
                    goto unterminated;
                memcpy(buf + n, p + 1, (size_t)(end - p - 1));
                n += (size_t)(end - p - 1);
                p = end + 1;
                break;
            }
            case '"':
                p++;
                while (*p && *p != '"') {
                    if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
                        p++;
                    buf[n++] = *p++;
                }
                if (*p != '"')
                    goto unterminated;
                p++;
                break;
            case '\\':
                /* A shell would join the next line; each line here is a command of its own, and
                 * a lone backslash at the end made an empty last word. */
                if (!p[1])
                    goto trailing_backslash;
                buf[n++] = p[1];
                p += 2;
                break;
            default:
                buf[n++] = *p++;
            }
        }
        if (push(w, buf, n) < 0) {
            free(buf);
            snprintf(msg, msglen, "out of memory");
            vgpu_words_free(w);
            return -1;
        }
    }
    free(buf);
    return 0;
trailing_backslash:
    free(buf);
    snprintf(msg, msglen, "the line ends with a backslash, but lines do not continue; join them into one line, "
             "or write '\\\\' for a backslash: %s", line);
    vgpu_words_free(w);
    return -1;
unterminated:
    free(buf);
    snprintf(msg, msglen, "unterminated quote in: %s", line);
    vgpu_words_free(w);
    return -1;
}

void vgpu_words_free(struct vgpu_words *w)
{
    if (w->argv)
        for (int i = 0; i < w->argc; i++)
            free(w->argv[i]);
    free(w->argv);
    w->argv = NULL;
    w->argc = 0;
}
