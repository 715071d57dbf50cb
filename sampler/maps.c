/* maps.c — /proc/PID/maps parsing and per-process address spaces.
 *
 * An address space is a sorted array of non-overlapping executable mappings (binary
 * search by start); a new mapping replaces whatever it overlaps (splitting partial
 * overlaps), which is how MMAP2 records supersede older mappings. Objects' files are
 * loaded by image.c. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "smp_internal.h"

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

int cn_smp__maps_parse_line(char *line, cn_smp__maps_line *out)
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

/* ---------------------------------------------------------------------------------------
 * Address spaces
 */

static int reserve(cn_smp__proc *p, size_t extra)
{
    return CN_RESERVE(p->maps, p->cap, p->nmaps + extra);
}

/* First index whose end > addr. */
static size_t lower(const cn_smp__proc *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->maps[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#ifndef NDEBUG
/* The address space's invariant: sorted by start, non-empty and non-overlapping ranges. */
static bool maps_ok(const cn_smp__proc *p)
{
    for (size_t i = 0; i < p->nmaps; i++)
        if (p->maps[i].start >= p->maps[i].end || (i > 0 && p->maps[i - 1].end > p->maps[i].start))
            return false;
    return p->nmaps <= p->cap;
}
#endif

int cn_smp__proc_map(cn_smp__proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
                     cn_smp__obj *obj)
{
    if (end <= start)
        return -EINVAL;
    if (reserve(p, 2) < 0)
        return -ENOMEM;
    size_t i = lower(p, start);
    /* Split a mapping that starts before us and extends past our end. */
    /* Counted before the mappings it replaces are uncounted: an object mapped again over
     * itself keeps its tables. */
    cn_smp__obj_mapped(obj);
    if (i < p->nmaps && p->maps[i].start < start && p->maps[i].end > end) {
        cn_smp__map tail = p->maps[i];
        cn_smp__obj_mapped(tail.obj);
        tail.pgoff += end - tail.start;
        tail.start = end;
        p->maps[i].end = start;
        memmove(&p->maps[i + 2], &p->maps[i + 1], (p->nmaps - i - 1) * sizeof(*p->maps));
        p->maps[i + 1] = tail;
        p->nmaps++;
        i++;
    } else if (i < p->nmaps && p->maps[i].start < start) {
        p->maps[i].end = start; /* trim the head part that stays */
        i++;
    }
    /* Remove mappings fully covered; trim one that sticks out past end. */
    size_t j = i;
    while (j < p->nmaps && p->maps[j].end <= end)
        cn_smp__obj_unmapped(p->maps[j++].obj);
    if (j < p->nmaps && p->maps[j].start < end) {
        p->maps[j].pgoff += end - p->maps[j].start;
        p->maps[j].start = end;
    }
    memmove(&p->maps[i + 1], &p->maps[j], (p->nmaps - j) * sizeof(*p->maps));
    p->nmaps = p->nmaps - (j - i) + 1;
    p->maps[i] = (cn_smp__map){start, end, pgoff, obj};
    assert(maps_ok(p));
    return 0;
}

const cn_smp__map *cn_smp__proc_find(const cn_smp__proc *p, uint64_t addr)
{
    size_t i = lower(p, addr);
    if (i < p->nmaps && p->maps[i].start <= addr)
        return &p->maps[i];
    return NULL;
}

void cn_smp__proc_clear(cn_smp__proc *p)
{
    for (size_t i = 0; i < p->nmaps; i++)
        cn_smp__obj_unmapped(p->maps[i].obj);
    free(p->maps);
    p->maps = NULL;
    p->nmaps = p->cap = 0;
}
