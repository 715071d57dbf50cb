/* maps.c — per-process address spaces (a /proc/PID/maps line is parsed by objfile/'s
 * cn_obj_maps_parse_line).
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
    return p->nmaps ? cn_count_le_u64(&p->maps[0].end, p->nmaps, sizeof(*p->maps), addr) : 0;
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
