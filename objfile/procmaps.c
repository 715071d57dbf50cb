/* procmaps.c — one line of /proc/PID/maps, as the sampler (address spaces) and interp/ (where a
 * process's interpreter is mapped) read them. The text is the target's: every field is
 * checked, the path is cut in place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cn_obj.h"

static int hexnum(const char **s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*s, &end, 16);
    if (end == *s || errno)
        return -EINVAL;
    *s = end;
    *out = v;
    return 0;
}

int cn_obj_maps_parse_line(char *line, cn_obj_maps_line *out)
{
    /* start-end perms offset maj:min inode   path */
    const char *s = line;
    uint64_t maj, min;
    memset(out, 0, sizeof(*out));
    if (hexnum(&s, &out->start) < 0 || *s++ != '-' || hexnum(&s, &out->end) < 0 || *s++ != ' ')
        return -EINVAL;
    if (out->end <= out->start || strlen(s) < 5)
        return -EINVAL;
    out->exec = s[2] == 'x';
    s += 4;
    if (*s++ != ' ' || hexnum(&s, &out->pgoff) < 0 || *s++ != ' ')
        return -EINVAL;
    if (hexnum(&s, &maj) < 0 || *s++ != ':' || hexnum(&s, &min) < 0 || *s++ != ' ')
        return -EINVAL;
    if (maj > UINT32_MAX || min > UINT32_MAX)
        return -EINVAL;
    out->maj = (uint32_t)maj;
    out->min = (uint32_t)min;
    char *end;
    errno = 0;
    out->ino = strtoull(s, &end, 10);
    if (end == s || errno)
        return -EINVAL;
    s = end;
    while (*s == ' ')
        s++;
    char *path = line + (s - line);
    size_t n = strlen(path);
    while (n && (path[n - 1] == '\n' || path[n - 1] == ' '))
        path[--n] = 0;
    static const char del[] = " (deleted)";
    if (n >= sizeof(del) - 1 && strcmp(path + n - (sizeof(del) - 1), del) == 0) {
        out->deleted = true;
        path[n - (sizeof(del) - 1)] = 0;
    }
    out->path = path;
    return 0;
}
