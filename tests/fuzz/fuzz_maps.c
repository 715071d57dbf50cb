/* fuzz_maps.c — /proc/PID/maps lines into the sampler's parser, and the parsed ranges into
 * an address space (insert with overlap splitting, then lookups). Never crashes; the
 * address space stays sorted and non-overlapping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smp_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    cn_smp__proc p = {.pid = 1};
    cn_smp__obj objs[4];
    memset(objs, 0, sizeof(objs));
    char *save = NULL;
    int k = 0;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cn_obj_maps_line m;
        if (cn_obj_maps_parse_line(line, &m) < 0)
            continue;
        if (cn_smp__proc_map(&p, m.start, m.end, m.pgoff, &objs[k++ % 4]) < 0)
            break;
        (void)cn_smp__proc_find(&p, m.start);
        (void)cn_smp__proc_find(&p, m.end - 1);
        (void)cn_smp__proc_find(&p, m.end);
    }
    for (size_t i = 0; i + 1 < p.nmaps; i++)
        if (p.maps[i].end > p.maps[i + 1].start || p.maps[i].start >= p.maps[i].end)
            abort(); /* invariant broken */
    cn_smp__proc_clear(&p);
    free(buf);
    return 0;
}
