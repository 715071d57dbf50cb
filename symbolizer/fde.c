/* fde.c — function ranges of stripped code from its call-frame information.
 *
 * An object without a symbol table (only .dynsym, or nothing) still has one FDE per
 * function in .eh_frame, because unwinding needs it. .eh_frame_hdr's binary-search table
 * lists every FDE's start and address; the FDE gives the length. The result is a sorted
 * array of disjoint [start, end) ranges (virtual addresses), built once per object, so
 * that the addresses of one local function get one name: the function's start
 * (docs/cli.md "Names"). Everything comes from an untrusted file: the header's encodings
 * must be the standard ones, the count must fit the section, ranges are checked and
 * bounded; a malformed table gives fewer ranges, never a crash. */
#include "sym_internal.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

/* One function is never this large; a bigger range is a corrupt FDE. */
#define MAX_FDE_RANGE (256u << 20)

typedef struct fde_range {
    uint64_t start, end;
} fde_range;

static int cmp_range(const void *a, const void *b)
{
    const fde_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorts f's parallel arrays by start (already sorted, the usual case: one pass). */
static void sort_ranges(cn_sym__fdes *f)
{
    size_t i = 1;
    while (i < f->n && f->start[i - 1] <= f->start[i])
        i++;
    if (i >= f->n)
        return;
    fde_range *r = malloc(f->n * sizeof(*r));
    if (!r) { /* no memory to sort: keep none rather than search an unsorted array */
        f->n = 0;
        return;
    }
    for (i = 0; i < f->n; i++)
        r[i] = (fde_range){f->start[i], f->end[i]};
    qsort(r, f->n, sizeof(*r), cmp_range);
    for (i = 0; i < f->n; i++) {
        f->start[i] = r[i].start;
        f->end[i] = r[i].end;
    }
    free(r);
}

static int32_t rd32(const uint8_t *p, int swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    if (swap)
        v = __builtin_bswap32(v);
    return (int32_t)v;
}

/* A section's address and bytes by name, or -ENOENT. */
static int find_progbits(Elf *elf, const char *name, uint64_t *addr, const uint8_t **buf,
                         size_t *len)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return -ENOENT;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
            continue;
        const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!n || strcmp(n, name) != 0)
            continue;
        Elf_Data *d = elf_rawdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size < 4)
            return -ENOENT;
        *addr = sh.sh_addr;
        *buf = d->d_buf;
        *len = d->d_size;
        return 0;
    }
    return -ENOENT;
}

/* The end of the function whose FDE is at fde (a virtual address inside .eh_frame) and
 * whose start the table says is start, or 0. pc_begin's encoding lives in the CIE; rather
 * than trust and parse it, the forms linkers write are tried and one is accepted only
 * when it decodes to the table's start: pcrel|sdata4 (x86-64 default), 4-byte absolute,
 * 8-byte absolute. pc_range has pc_begin's size. */
static uint64_t fde_end(const uint8_t *ehf, uint64_t ehf_addr, size_t ehf_len, uint64_t fde,
                        uint64_t start, int swap)
{
    if (fde < ehf_addr || fde - ehf_addr > ehf_len || ehf_len - (fde - ehf_addr) < 16)
        return 0;
    size_t avail = ehf_len - (fde - ehf_addr) - 4; /* bytes after the length field */
    const uint8_t *p = ehf + (fde - ehf_addr);
    uint32_t length = (uint32_t)rd32(p, swap);
    if (length < 12 || length == 0xffffffffu || length > avail || rd32(p + 4, swap) == 0)
        return 0; /* too short, 64-bit DWARF, overrunning, or a CIE */
    uint64_t len_pc = 0;
    int32_t v = rd32(p + 8, swap);
    if (fde + 8 + (uint64_t)(int64_t)v == start || (uint64_t)(int64_t)v == start ||
        (uint32_t)v == start) {
        len_pc = (uint32_t)rd32(p + 12, swap);
    } else if (length >= 20) {
        uint64_t abs, r;
        memcpy(&abs, p + 8, 8);
        memcpy(&r, p + 16, 8);
        if (swap) {
            abs = __builtin_bswap64(abs);
            r = __builtin_bswap64(r);
        }
        if (abs != start)
            return 0;
        len_pc = r;
    }
    if (len_pc == 0 || len_pc > MAX_FDE_RANGE || start + len_pc < start)
        return 0;
    return start + len_pc;
}

int cn_sym__fdes_load(cn_sym__fdes *f, Elf *elf)
{
    memset(f, 0, sizeof(*f));
    GElf_Ehdr eh;
    uint64_t hdr_addr, ehf_addr;
    const uint8_t *p, *ehf;
    size_t len, ehf_len;
    if (!gelf_getehdr(elf, &eh) || find_progbits(elf, ".eh_frame_hdr", &hdr_addr, &p, &len) < 0 ||
        find_progbits(elf, ".eh_frame", &ehf_addr, &ehf, &ehf_len) < 0)
        return 0;
    const uint16_t one = 1;
    int host_lsb = *(const uint8_t *)&one == 1;
    bool swap = (eh.e_ident[EI_DATA] == ELFDATA2LSB) != host_lsb;
    cn_obj_ehhdr h;
    if (cn_obj_ehhdr_parse(p, len, swap, &h) < 0 || h.count > CN_SYM__MAX_SYMBOLS)
        return 0;
    uint64_t count = h.count;
    f->start = malloc(count * sizeof(*f->start));
    f->end = malloc(count * sizeof(*f->end));
    if (!f->start || !f->end) {
        cn_sym__fdes_clear(f);
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < count; i++) {
        int64_t loc, at;
        cn_obj_ehhdr_entry(p, i, swap, &loc, &at);
        uint64_t s = hdr_addr + (uint64_t)loc;
        uint64_t fde = hdr_addr + (uint64_t)at;
        uint64_t e = fde_end(ehf, ehf_addr, ehf_len, fde, s, swap);
        if (!e)
            continue;
        f->start[f->n] = s;
        f->end[f->n] = e;
        f->n++;
    }
    /* Sorted by the linker, but not trusted: sort, then make the ranges disjoint (an
     * overlapped range ends where the next one starts). */
    sort_ranges(f);
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (k > 0 && f->start[k - 1] == f->start[i])
            continue;
        if (k > 0 && f->end[k - 1] > f->start[i])
            f->end[k - 1] = f->start[i];
        f->start[k] = f->start[i];
        f->end[k] = f->end[i];
        k++;
    }
    f->n = k;
    if (f->n == 0) {
        cn_sym__fdes_clear(f);
        return 0;
    }
    uint64_t *ns = realloc(f->start, f->n * sizeof(*ns)); /* keep only what is used */
    if (ns)
        f->start = ns;
    uint64_t *ne = realloc(f->end, f->n * sizeof(*ne));
    if (ne)
        f->end = ne;
    return 0;
}

int cn_sym__fdes_find(const cn_sym__fdes *f, uint64_t va, uint64_t *start)
{
    size_t lo = f->n ? cn_count_le_u64(f->start, f->n, sizeof(*f->start), va) : 0;
    if (lo == 0 || va >= f->end[lo - 1])
        return -ENOENT;
    *start = f->start[lo - 1];
    return 0;
}

void cn_sym__fdes_region(const cn_sym__fdes *f, uint64_t va, uint64_t *lo, uint64_t *hi)
{
    if (!f->n)
        return;
    size_t a = cn_count_le_u64(f->start, f->n, sizeof(*f->start), va); /* as fdes_find */
    cn_sym__narrow_region(va, f->start, f->n, a, a ? f->end[a - 1] : 0, lo, hi);
}

void cn_sym__fdes_clear(cn_sym__fdes *f)
{
    free(f->start);
    free(f->end);
    memset(f, 0, sizeof(*f));
}

size_t cn_sym__fdes_memory(const cn_sym__fdes *f)
{
    return f->n * 2 * sizeof(uint64_t);
}
