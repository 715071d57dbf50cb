/* dwarf.c — source lines and inline chains with libdw.
 *
 * libdw's dwarf_getscopes() walks a compilation unit's DIE tree from its root for every
 * address. Instead, the first lookup in a CU walks its tree once and keeps a "scope
 * index": one row per pc range of every subprogram and inlined subroutine, sorted by
 * low pc (outer before inner at equal low pc), each with its enclosing function scope.
 * Because function scopes nest, the innermost scope containing an address is the last
 * row with low <= address whose range contains it; its parents give the inline chain.
 * Lines come from libdw's per-CU line table (dwarf_getsrc_die: binary search).
 * The walk is bounded (depth, rows per CU) since the DWARF comes from a target process. */
#include "sym_internal.h"

#include <assert.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEPTH     128
#define MAX_ROWS_CU   (1u << 22)
#define CU_TABLE_INIT 256

typedef struct scope {
    Dwarf_Off die;  /* DIE offset of the subprogram / inlined subroutine */
    int32_t parent; /* enclosing function scope, -1 at a subprogram */
    int32_t is_inline;
} scope;

typedef struct row {
    uint64_t low, high;
    int32_t scope;
    int32_t depth;
} row;

/* What libdw holds per line-table row (its Dwarf_Line and the sorted index), roughly. */
#define LINE_BYTES 64

typedef struct cu_index {
    Dwarf_Off cu_off;
    scope *scopes;
    size_t n_scopes, cap_scopes;
    row *rows;
    size_t n_rows, cap_rows;
    int failed;
} cu_index;

struct cn_sym__dwarf {
    Dwarf *dbg;     /* NULL while released (cn_sym__dwarf_release): reopened by a lookup */
    Elf *elf;       /* dbg's ELF handle, read with pread (ELF_C_READ), never mapped */
    int fd;         /* kept open while released: a reopen reads the very same file */
    cu_index **cus; /* open addressing by cu_off */
    size_t cap, n;
    size_t memory; /* the scope index and libdw's line tables while open */
    size_t mapped; /* debug sections libdw read into memory while open */
};

/* Debug sections no lookup here uses (lookups read lines, inline chains and address
 * ranges; never locations, macros, name indexes or DWARF CFI), after ".debug_" or
 * ".zdebug_". dwarf_begin_elf reads every debug section it knows into memory, and location
 * lists alone are a fifth of an -O2 -g library's DWARF (libpython3.11: 3.5 of 15.9 MiB). */
static const char *const UNUSED_SECTIONS[] = {
    "loc",      "loclists",     "macro",        "macinfo", "pubnames",
    "pubtypes", "gnu_pubnames", "gnu_pubtypes", "frame",   NULL};

static bool unused_debug_section(const char *name)
{
    const char *rest = !strncmp(name, ".debug_", 7)    ? name + 7
                       : !strncmp(name, ".zdebug_", 8) ? name + 8
                                                       : NULL;
    for (size_t i = 0; rest && UNUSED_SECTIONS[i]; i++)
        if (!strcmp(rest, UNUSED_SECTIONS[i]))
            return true;
    return false;
}

/* The debug sections of elf: with hide, the unused ones are hidden from libdw first,
 * marked SHT_NOBITS in libelf's copy of the section headers (ELF_C_READ: never written
 * back), which libdw skips as stripped. Returns the bytes of the others: after
 * dwarf_begin_elf, what libdw holds of them, since with ELF_C_READ libelf reads each one
 * into a buffer of its own, decompressed when compressed (the header then gives that
 * size): not the file's size (libc6-dbg's 4 MiB file holds 10 MiB of sections, a
 * binary's own DWARF is a small part of its file). */
static size_t debug_sections(Elf *elf, bool hide)
{
    size_t shstrndx, bytes = 0;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return 0;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
            !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
            (strncmp(name, ".debug_", 7) && strncmp(name, ".zdebug_", 8)))
            continue;
        sh.sh_type = SHT_NOBITS;
        if (!hide || !unused_debug_section(name) || !gelf_update_shdr(scn, &sh))
            bytes += sh.sh_size; /* libdw reads it (also when the update failed) */
    }
    return bytes;
}

static void cu_free(cu_index *c)
{
    if (!c)
        return;
    free(c->scopes);
    free(c->rows);
    free(c);
}

/* Opens libdw on d->fd. 0, or -ENOENT when there is no usable debug info, -ENOMEM. */
static int dw_begin(cn_sym__dwarf *d)
{
    /* Not dwarf_begin(fd): it maps the file, and the lazily parsed CUs would fault (SIGBUS)
     * on a file the target's user truncated meanwhile. libelf's ELF_C_READ preads each
     * section libdw asks for into a buffer it owns (docs/security.md). */
    Elf *elf = elf_begin(d->fd, ELF_C_READ, NULL);
    if (elf)
        debug_sections(elf, true);
    Dwarf *dbg = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
    cu_index **cus = dbg ? calloc(CU_TABLE_INIT, sizeof(*cus)) : NULL;
    if (!cus) {
        int rc = dbg ? -ENOMEM : -ENOENT;
        if (dbg)
            dwarf_end(dbg);
        if (elf)
            elf_end(elf);
        return rc;
    }
    d->dbg = dbg;
    d->elf = elf;
    d->cus = cus;
    d->cap = CU_TABLE_INIT;
    d->n = 0;
    d->memory = CU_TABLE_INIT * sizeof(*d->cus) + 64 * 1024;
    d->mapped = debug_sections(elf, false);
    return 0;
}

/* Closes libdw and frees the index, keeping d and its fd. */
static void dw_end(cn_sym__dwarf *d)
{
    if (!d->dbg)
        return;
    for (size_t i = 0; i < d->cap; i++)
        cu_free(d->cus[i]);
    free(d->cus);
    d->cus = NULL;
    d->cap = d->n = 0;
    dwarf_end(d->dbg);
    elf_end(d->elf); /* after dwarf_end: libdw reads through it */
    d->dbg = NULL;
    d->elf = NULL;
    d->memory = d->mapped = 0;
}

cn_sym__dwarf *cn_sym__dwarf_open(int fd)
{
    cn_sym__dwarf *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->fd = fd;
    if (dw_begin(d) < 0) {
        free(d);
        return NULL;
    }
    return d;
}

cn_sym__dwarf *cn_sym__dwarf_free(cn_sym__dwarf *d)
{
    if (!d)
        return NULL;
    dw_end(d);
    close(d->fd);
    free(d);
    return NULL;
}

bool cn_sym__dwarf_release(cn_sym__dwarf *d)
{
    if (!d || !d->dbg)
        return false;
    dw_end(d);
    return true;
}

bool cn_sym__dwarf_is_open(const cn_sym__dwarf *d)
{
    return d && d->dbg;
}

size_t cn_sym__dwarf_bytes(const cn_sym__dwarf *d)
{
    return d ? d->memory + d->mapped : 0;
}

static int add_scope(cu_index *c, Dwarf_Off die, int32_t parent, int is_inline)
{
    if (CN_RESERVE(c->scopes, c->cap_scopes, c->n_scopes + 1) < 0)
        return -ENOMEM;
    assert(parent >= -1 && parent < (int32_t)c->n_scopes); /* parents come first */
    c->scopes[c->n_scopes] = (scope){die, parent, is_inline};
    return (int)c->n_scopes++;
}

static int add_row(cu_index *c, uint64_t low, uint64_t high, int32_t sc, int32_t depth)
{
    if (c->n_rows >= MAX_ROWS_CU)
        return -E2BIG;
    if (CN_RESERVE(c->rows, c->cap_rows, c->n_rows + 1) < 0)
        return -ENOMEM;
    assert(sc >= 0 && (size_t)sc < c->n_scopes);
    c->rows[c->n_rows++] = (row){low, high, sc, depth};
    return 0;
}

/* Walks the children of die, recording function scopes. parent: the enclosing function
 * scope (-1 outside functions). */
static int walk(cu_index *c, Dwarf_Die *die, int32_t parent, int depth)
{
    if (depth > MAX_DEPTH)
        return 0;
    Dwarf_Die child;
    if (dwarf_child(die, &child) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&child);
        int32_t next_parent = parent;
        int recurse = 0;
        switch (tag) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine: {
            Dwarf_Addr base, low, high;
            ptrdiff_t off = 0;
            int sc = -1;
            int n = 0;
            while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0) {
                if (high <= low)
                    continue;
                if (sc < 0) {
                    sc = add_scope(c, dwarf_dieoffset(&child),
                                   tag == DW_TAG_inlined_subroutine ? parent : -1,
                                   tag == DW_TAG_inlined_subroutine);
                    if (sc < 0)
                        return sc;
                }
                int rc = add_row(c, low, high, sc, depth);
                if (rc < 0)
                    return rc;
                if (++n > 100000)
                    break;
            }
            if (sc >= 0) {
                next_parent = sc;
                recurse = 1;
            }
            break;
        }
        case DW_TAG_lexical_block:
        case DW_TAG_namespace:
        case DW_TAG_try_block:
        case DW_TAG_catch_block:
        case DW_TAG_module:
            recurse = 1;
            break;
        default:
            break;
        }
        if (recurse) {
            int rc = walk(c, &child, next_parent, depth + 1);
            if (rc < 0)
                return rc;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->low != y->low)
        return x->low < y->low ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->scope < y->scope ? -1 : (x->scope > y->scope);
}

#ifndef NDEBUG
/* The scope index's order: by low pc, outer before inner at equal low pc. */
static bool rows_sorted(const cu_index *c)
{
    for (size_t i = 1; i < c->n_rows; i++)
        if (row_cmp(&c->rows[i - 1], &c->rows[i]) > 0)
            return false;
    return true;
}
#endif

/* The index of the CU whose DIE is cudie, built on first use. NULL on failure. */
static cu_index *get_cu(cn_sym__dwarf *d, Dwarf_Die *cudie)
{
    Dwarf_Off off = dwarf_dieoffset(cudie);
    size_t h = (size_t)(off * 0x9e3779b97f4a7c15ull) & (d->cap - 1);
    while (d->cus[h]) {
        if (d->cus[h]->cu_off == off)
            return d->cus[h]->failed ? NULL : d->cus[h];
        h = (h + 1) & (d->cap - 1);
    }
    if ((d->n + 1) * 2 > d->cap) {
        size_t cap = d->cap * 2;
        cu_index **t = calloc(cap, sizeof(*t));
        if (!t)
            return NULL;
        for (size_t i = 0; i < d->cap; i++) {
            if (!d->cus[i])
                continue;
            size_t k = (size_t)(d->cus[i]->cu_off * 0x9e3779b97f4a7c15ull) & (cap - 1);
            while (t[k])
                k = (k + 1) & (cap - 1);
            t[k] = d->cus[i];
        }
        free(d->cus);
        d->memory += (cap - d->cap) * sizeof(*t);
        d->cus = t;
        d->cap = cap;
        h = (size_t)(off * 0x9e3779b97f4a7c15ull) & (cap - 1);
        while (d->cus[h])
            h = (h + 1) & (cap - 1);
    }
    cu_index *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cu_off = off;
    if (walk(c, cudie, -1, 0) < 0) {
        free(c->scopes);
        free(c->rows);
        c->scopes = NULL;
        c->rows = NULL;
        c->n_rows = c->n_scopes = 0;
        c->failed = 1;
    } else {
        if (c->n_rows > 1) /* rows may be NULL when a CU has none */
            qsort(c->rows, c->n_rows, sizeof(*c->rows), row_cmp);
        assert(rows_sorted(c));
    }
    d->cus[h] = c;
    d->n++;
    d->memory += sizeof(*c) + c->cap_rows * sizeof(row) + c->cap_scopes * sizeof(scope);
    /* libdw keeps the CU's line table once a lookup reads it (dwarf_getsrc_die): counted
     * here, as it is read for every CU a lookup enters, or the cache's bound would miss
     * the largest part of a debug file's memory. */
    Dwarf_Lines *lines;
    size_t nlines;
    if (!c->failed && dwarf_getsrclines(cudie, &lines, &nlines) == 0)
        d->memory += nlines * LINE_BYTES;
    return c->failed ? NULL : c;
}

/* Function name of a DIE: demangled linkage name, else DW_AT_name (following
 * abstract_origin and specification). *owned is set when the result must be freed. */
static const char *die_name(Dwarf_Die *die, char **owned)
{
    Dwarf_Attribute attr;
    *owned = NULL;
    const char *s = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) {
        s = dwarf_formstring(&attr);
        if (s) {
            *owned = cn_sym_demangle(s);
            if (*owned)
                return *owned;
        }
    }
    if (dwarf_attr_integrate(die, DW_AT_name, &attr)) {
        const char *n = dwarf_formstring(&attr);
        if (n)
            return n;
    }
    return s;
}

/* The call site (file, line) of an inlined subroutine DIE. */
static void call_site(Dwarf_Die *die, Dwarf_Files *files, size_t nfiles, const char **file,
                      int32_t *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word w;
    *file = NULL;
    *line = 0;
    if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &w) == 0 && w < INT32_MAX)
        *line = (int32_t)w;
    if (files && dwarf_attr(die, DW_AT_call_file, &attr) && dwarf_formudata(&attr, &w) == 0 &&
        w < nfiles)
        *file = dwarf_filesrc(files, w, NULL, NULL);
}

void cn_sym__chain_clear(cn_sym__chain *chain)
{
    for (size_t i = 0; i < chain->depth; i++)
        free(chain->owned[i]);
    chain->depth = 0;
}

int cn_sym__dwarf_lookup(cn_sym__dwarf *d, uint64_t vaddr, cn_sym__chain *chain)
{
    chain->depth = 0;
    chain->func_low = UINT64_MAX;
    Dwarf_Die cudie;
    if (!d->dbg && dw_begin(d) < 0) /* released while idle: read again */
        return -ENOENT;
    if (!dwarf_addrdie(d->dbg, vaddr, &cudie))
        return -ENOENT;
    cu_index *c = get_cu(d, &cudie);
    if (!c || c->n_rows == 0)
        return -ENOENT;
    /* Last row with low <= vaddr, then back to the first that contains vaddr. */
    size_t lo = cn_count_le_u64(&c->rows[0].low, c->n_rows, sizeof(*c->rows), vaddr);
    int32_t sc = -1;
    for (size_t i = lo; i-- > 0;) {
        if (vaddr < c->rows[i].high) {
            sc = c->rows[i].scope;
            break;
        }
        if (lo - i > 4096) /* bounded: deep overlap means broken DWARF */
            break;
    }
    if (sc < 0)
        return -ENOENT;
    /* Innermost first into a temporary list. */
    int32_t inner[CN_SYM__MAX_INLINE];
    size_t n = 0;
    for (int32_t s = sc; s >= 0 && n < CN_SYM__MAX_INLINE; s = c->scopes[s].parent) {
        assert((size_t)s < c->n_scopes && c->scopes[s].parent < s); /* scopes nest */
        inner[n++] = s;
        if (!c->scopes[s].is_inline)
            break;
    }
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (dwarf_getsrcfiles(&cudie, &files, &nfiles) != 0)
        files = NULL;
    /* Outer first: element k is inner[n-1-k]. Its location is the call site of the next
     * inner element, or the address's own line for the innermost. */
    for (size_t k = 0; k < n; k++) {
        Dwarf_Die die;
        if (!dwarf_offdie(d->dbg, c->scopes[inner[n - 1 - k]].die, &die))
            break;
        char *owned;
        const char *name = die_name(&die, &owned);
        chain->name[k] = name ? name : "??";
        chain->owned[k] = owned;
        chain->file[k] = NULL;
        chain->line[k] = 0;
        chain->depth = k + 1;
        if (k == 0) {
            Dwarf_Addr low;
            if (dwarf_entrypc(&die, &low) == 0 || dwarf_lowpc(&die, &low) == 0)
                chain->func_low = low;
        }
        if (k + 1 < n) {
            Dwarf_Die callee;
            if (dwarf_offdie(d->dbg, c->scopes[inner[n - 2 - k]].die, &callee))
                call_site(&callee, files, nfiles, &chain->file[k], &chain->line[k]);
        }
    }
    if (chain->depth == 0)
        return -ENOENT;
    Dwarf_Line *l = dwarf_getsrc_die(&cudie, vaddr);
    if (l) {
        int ln = 0;
        dwarf_lineno(l, &ln);
        chain->line[chain->depth - 1] = ln;
        chain->file[chain->depth - 1] = dwarf_linesrc(l, NULL, NULL);
    }
    return 0;
}
