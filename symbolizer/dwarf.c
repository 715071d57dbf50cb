/* dwarf.c — source lines and inline chains from DWARF, kept in an index of our own.
 *
 * The first lookup in a compilation unit (CU) reads it with libdw once and keeps what
 * lookups need: one row per pc range of every subprogram and inlined subroutine, sorted
 * by low pc (outer before inner at equal low pc), each with its scope (name, call site,
 * enclosing function scope), and the CU's line table, less the rows that repeat their
 * predecessor's file and line. Because function scopes nest, the innermost scope
 * containing an address is the last row with low <= address whose range contains it; its
 * parents give the inline chain. The CU holding an address comes from a copy of libdw's
 * address ranges (dwarf_getaranges, as dwarf_addrdie finds it), taken at the first open.
 *
 * libdw keeps the DIEs and the decoded line table of every CU it read until dwarf_end: for
 * libpython3.11 620 000 line rows, ~40 bytes each, on top of the 12 MiB of sections it read
 * into memory. The index answers every address of the CUs it holds, so libdw can be closed
 * while the index stays (cn_sym__dwarf_release(d, false)); it is opened again only for a
 * CU not indexed yet. Names and file names are interned per object.
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
#include <xxhash.h>

#define MAX_DEPTH   128
#define MAX_ROWS_CU (1u << 22)

/* A function scope: a subprogram or an inlined subroutine. */
typedef struct scope {
    uint64_t low;       /* entry pc, or UINT64_MAX when the DIE has none */
    uint32_t link_name; /* string: the linkage (mangled) name, 0 when none */
    uint32_t name;      /* string: DW_AT_name, 0 when none */
    uint32_t call_file; /* string: an inlined subroutine's call site, 0 when none */
    int32_t call_line;
    int32_t parent; /* enclosing function scope, -1 at a subprogram */
    int32_t is_inline;
} scope;

typedef struct row {
    uint64_t low, high;
    int32_t scope;
    int32_t depth;
} row;

/* A line table row; file END_SEQUENCE marks the first address after a sequence. */
typedef struct line_row {
    uint64_t addr;
    uint32_t file; /* string, 0 when libdw names none */
    int32_t line;
} line_row;
#define END_SEQUENCE UINT32_MAX

/* An address range of a CU, from libdw's aranges. */
typedef struct arange {
    uint64_t low, high;
    Dwarf_Off cu_off;
} arange;

/* What libdw holds per line-table row (its Dwarf_Line and the sorted index), roughly,
 * and for its handles and the CU headers of an open Dwarf. */
#define LINE_BYTES  64
#define LIBDW_BYTES (64 * 1024)
/* The least bound on the line tables libdw keeps decoded while open (cn_sym_config). */
#define TABLES_MIN (4u << 20)
/* Units indexed after which the rest are indexed at once and libdw closes for good
 * (cn_sym_config.index_all_after), in an object loaded at least INDEX_ALL_AGE_NS ago (a
 * program that keeps running, not one run's burst: the object of a program run less
 * often than the cache's 30 s idle expiry would be indexed whole at each run) with at
 * most INDEX_ALL_SECTIONS of debug sections: the whole index of libpython3.11 is 9.8 MiB,
 * libc6-dbg's libc's 4.1 MiB, each ~0.3 s to build. */
#define INDEX_ALL_AFTER    64
#define INDEX_ALL_AGE_NS   (30LL * 1000000000)
#define INDEX_ALL_SECTIONS (16u << 20)

typedef struct cu_index {
    Dwarf_Off cu_off;
    scope *scopes;
    size_t n_scopes, cap_scopes;
    row *rows;
    size_t n_rows, cap_rows;
    line_row *lines;
    size_t n_lines;
    int failed;
} cu_index;

struct cn_sym__dwarf {
    Dwarf *dbg;               /* NULL while closed (cn_sym__dwarf_release): opened for a new CU */
    Elf *elf;                 /* dbg's ELF handle, read with pread (ELF_C_READ), never mapped */
    int fd;                   /* kept open while closed: a reopen reads the very same file */
    size_t libdw_bytes;       /* the sections libdw read and its line tables, while open */
    size_t libdw_base;        /* of which the sections and its handles (libdw_bytes at open) */
    size_t tables_max;        /* cn_sym_config.max_line_tables */
    size_t index_all_after;   /* cn_sym_config.index_all_after, or INDEX_ALL_AFTER */
    int64_t index_all_age_ns; /* cn_sym_config.index_all_age_ns, or INDEX_ALL_AGE_NS */
    int64_t opened_ns;        /* when cn_sym__dwarf_open opened it (cn_common_now_ns) */
    bool complete;            /* every unit of the ranges is indexed: libdw is not needed */
    int64_t libdw_used_ns;    /* when a lookup last needed libdw (cn_common_now_ns) */
    int64_t libdw_open_ns;    /* how long its last opening took (reading the sections) */
    /* The index, kept while libdw is closed. */
    cu_index **cus;
    size_t n_cus, cap_cus;
    cn_u64map cu_at; /* CU DIE offset -> its position in cus */
    arange *ar;      /* sorted by low */
    size_t n_ar;
    bool have_ar; /* ar was read (it may be empty: then no address has a CU) */
    char *str;    /* interned strings, each NUL-terminated; offset 0 is "" */
    size_t str_len, str_cap;
    cn_u64map str_at; /* XXH3 of a string -> its offset in str */
    size_t cu_bytes;  /* what the CUs' indexes hold */
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

/* Frees c's tables, leaving it an empty unit at the same offset marked failed. */
static void cu_fail(cu_index *c)
{
    free(c->scopes);
    free(c->rows);
    free(c->lines);
    *c = (cu_index){.cu_off = c->cu_off, .failed = 1};
}

static void cu_free(cu_index *c)
{
    if (!c)
        return;
    cu_fail(c);
    free(c);
}

static size_t cu_size(const cu_index *c)
{
    return sizeof(*c) + c->cap_rows * sizeof(row) + c->cap_scopes * sizeof(scope) +
           c->n_lines * sizeof(line_row);
}

/* The string at offset off of d's interned strings, or NULL for 0 (none). */
static const char *str_at(const cn_sym__dwarf *d, uint32_t off)
{
    assert(off < d->str_len || off == 0);
    return off ? d->str + off : NULL;
}

/* Interns s (NULL or "" give 0). Returns its offset, or 0 when out of memory. A hash
 * that matches a different string (forged DWARF can make one) adds the string again,
 * uninterned: the answer stays right. */
static uint32_t intern(cn_sym__dwarf *d, const char *s)
{
    if (!s || !*s)
        return 0;
    size_t len = strlen(s);
    uint64_t h = XXH3_64bits(s, len);
    int32_t at = cn_u64map_get(&d->str_at, h);
    if (at > 0 && strcmp(d->str + at, s) == 0)
        return (uint32_t)at;
    size_t off = d->str_len ? d->str_len : 1; /* offset 0 is the empty string */
    if (len >= INT32_MAX - off || CN_RESERVE(d->str, d->str_cap, off + len + 1) < 0)
        return 0;
    d->str[0] = '\0';
    memcpy(d->str + off, s, len + 1);
    d->str_len = off + len + 1;
    if (at < 0)
        (void)cn_u64map_put(&d->str_at, h, (int32_t)off); /* on failure: uninterned */
    return (uint32_t)off;
}

/* Frees the index (every CU's, the ranges, the strings). */
static void index_free(cn_sym__dwarf *d)
{
    for (size_t i = 0; i < d->n_cus; i++)
        cu_free(d->cus[i]);
    free(d->cus);
    d->cus = NULL;
    d->n_cus = d->cap_cus = 0;
    cn_u64map_clear(&d->cu_at);
    free(d->ar);
    d->ar = NULL;
    d->n_ar = 0;
    d->have_ar = false;
    free(d->str);
    d->str = NULL;
    d->str_len = d->str_cap = 0;
    cn_u64map_clear(&d->str_at);
    d->cu_bytes = 0;
    d->complete = false;
}

static size_t index_bytes(const cn_sym__dwarf *d)
{
    size_t slot = sizeof(uint64_t) + sizeof(int32_t);
    size_t maps =
        (d->cu_at.mask ? d->cu_at.mask + 1 : 0) + (d->str_at.mask ? d->str_at.mask + 1 : 0);
    return d->cu_bytes + d->cap_cus * sizeof(*d->cus) + d->n_ar * sizeof(*d->ar) + d->str_cap +
           maps * slot;
}

static int arange_cmp(const void *a, const void *b)
{
    const arange *x = a, *y = b;
    return x->low < y->low ? -1 : x->low > y->low;
}

/* Copies libdw's address ranges into d->ar: the CU of an address, as dwarf_addrdie finds
 * it, without libdw. None when libdw has none (no address has a CU, as before). */
static int read_aranges(cn_sym__dwarf *d)
{
    Dwarf_Aranges *all;
    size_t n;
    d->have_ar = true;
    if (dwarf_getaranges(d->dbg, &all, &n) != 0 || n == 0)
        return 0;
    d->ar = malloc(n * sizeof(*d->ar));
    if (!d->ar) {
        d->have_ar = false;
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        Dwarf_Arange *a = dwarf_onearange(all, i);
        Dwarf_Addr start;
        Dwarf_Word len;
        Dwarf_Off off;
        if (!a || dwarf_getarangeinfo(a, &start, &len, &off) != 0 || len == 0)
            continue;
        uint64_t end = len > UINT64_MAX - start ? UINT64_MAX : start + len;
        d->ar[d->n_ar++] = (arange){start, end, off};
    }
    qsort(d->ar, d->n_ar, sizeof(*d->ar), arange_cmp);
    return 0;
}

/* The CU DIE offset of the range holding vaddr. */
static bool arange_find(const cn_sym__dwarf *d, uint64_t vaddr, Dwarf_Off *off)
{
    size_t i = cn_count_le_u64(d->n_ar ? &d->ar[0].low : NULL, d->n_ar, sizeof(*d->ar), vaddr);
    if (i == 0 || vaddr >= d->ar[i - 1].high)
        return false;
    *off = d->ar[i - 1].cu_off;
    return true;
}

/* Opens libdw on d->fd (and copies its ranges the first time). 0, or -ENOENT when there is
 * no usable debug info, -ENOMEM. */
static int dw_begin(cn_sym__dwarf *d)
{
    /* Not dwarf_begin(fd): it maps the file, and the lazily parsed CUs would fault (SIGBUS)
     * on a file the target's user truncated meanwhile. libelf's ELF_C_READ preads each
     * section libdw asks for into a buffer it owns (docs/security.md). */
    int64_t t0 = cn_common_now_ns();
    Elf *elf = elf_begin(d->fd, ELF_C_READ, NULL);
    if (elf)
        debug_sections(elf, true);
    Dwarf *dbg = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
    if (!dbg) {
        if (elf)
            elf_end(elf);
        return -ENOENT;
    }
    d->dbg = dbg;
    d->elf = elf;
    d->libdw_bytes = d->libdw_base = LIBDW_BYTES + debug_sections(elf, false);
    d->libdw_used_ns = cn_common_now_ns();
    d->libdw_open_ns = d->libdw_used_ns - t0;
    if (!d->have_ar && read_aranges(d) < 0) {
        cn_sym__dwarf_release(d, false);
        return -ENOMEM;
    }
    return 0;
}

cn_sym__dwarf *cn_sym__dwarf_open(int fd, const cn_sym_config *cfg)
{
    cn_sym__dwarf *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->fd = fd;
    d->tables_max = cfg->max_line_tables;
    d->index_all_after = cfg->index_all_after ? cfg->index_all_after : INDEX_ALL_AFTER;
    d->index_all_age_ns = cfg->index_all_age_ns ? cfg->index_all_age_ns : INDEX_ALL_AGE_NS;
    d->opened_ns = cn_common_now_ns();
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
    cn_sym__dwarf_release(d, true);
    close(d->fd);
    free(d);
    return NULL;
}

bool cn_sym__dwarf_release(cn_sym__dwarf *d, bool index_too)
{
    bool freed = false;
    if (d && d->dbg) {
        dwarf_end(d->dbg);
        elf_end(d->elf); /* after dwarf_end: libdw reads through it */
        d->dbg = NULL;
        d->elf = NULL;
        d->libdw_bytes = 0;
        freed = true;
    }
    if (d && index_too && (d->have_ar || d->n_cus || d->str_cap)) {
        index_free(d);
        freed = true;
    }
    return freed;
}

bool cn_sym__dwarf_is_open(const cn_sym__dwarf *d)
{
    return d && d->dbg;
}

int64_t cn_sym__dwarf_libdw_used_ns(const cn_sym__dwarf *d, int64_t *open_ns)
{
    *open_ns = d ? d->libdw_open_ns : 0;
    return d ? d->libdw_used_ns : 0;
}

size_t cn_sym__dwarf_bytes(const cn_sym__dwarf *d)
{
    return d ? d->libdw_bytes + index_bytes(d) : 0;
}

/* A CU being indexed: its files name inlined subroutines' call sites. */
typedef struct walk_ctx {
    cn_sym__dwarf *d;
    cu_index *c;
    Dwarf_Files *files;
    size_t nfiles;
} walk_ctx;

/* The call site (file, line) of an inlined subroutine DIE into s. */
static void call_site(walk_ctx *w, Dwarf_Die *die, scope *s)
{
    Dwarf_Attribute attr;
    Dwarf_Word v;
    if (dwarf_attr(die, DW_AT_call_line, &attr) && dwarf_formudata(&attr, &v) == 0 && v < INT32_MAX)
        s->call_line = (int32_t)v;
    if (w->files && dwarf_attr(die, DW_AT_call_file, &attr) && dwarf_formudata(&attr, &v) == 0 &&
        v < w->nfiles)
        s->call_file = intern(w->d, dwarf_filesrc(w->files, v, NULL, NULL));
}

/* Adds the scope of die (following abstract_origin and specification for its names).
 * Returns its index or -ENOMEM. */
static int add_scope(walk_ctx *w, Dwarf_Die *die, int32_t parent, int is_inline)
{
    cu_index *c = w->c;
    if (c->n_scopes >= INT32_MAX || CN_RESERVE(c->scopes, c->cap_scopes, c->n_scopes + 1) < 0)
        return -ENOMEM;
    assert(parent >= -1 && parent < (int32_t)c->n_scopes); /* parents come first */
    scope s = {.low = UINT64_MAX, .parent = parent, .is_inline = is_inline};
    Dwarf_Attribute attr;
    const char *str;
    if ((dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
         dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) &&
        (str = dwarf_formstring(&attr)))
        s.link_name = intern(w->d, str);
    if (dwarf_attr_integrate(die, DW_AT_name, &attr) && (str = dwarf_formstring(&attr)))
        s.name = intern(w->d, str);
    Dwarf_Addr low;
    if (dwarf_entrypc(die, &low) == 0 || dwarf_lowpc(die, &low) == 0)
        s.low = low;
    if (is_inline)
        call_site(w, die, &s);
    c->scopes[c->n_scopes] = s;
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
static int walk(walk_ctx *w, Dwarf_Die *die, int32_t parent, int depth)
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
                    int inl = tag == DW_TAG_inlined_subroutine;
                    sc = add_scope(w, &child, inl ? parent : -1, inl);
                    if (sc < 0)
                        return sc;
                }
                int rc = add_row(w->c, low, high, sc, depth);
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
            int rc = walk(w, &child, next_parent, depth + 1);
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

/* Copies the CU's line table (libdw's, sorted by address) into c->lines, leaving out a
 * row that repeats its predecessor's file and line: the last row at or below an address
 * then still carries that address's line. 0, or -ENOMEM. */
static int index_lines(cn_sym__dwarf *d, cu_index *c, Dwarf_Die *cudie)
{
    Dwarf_Lines *lines;
    size_t n;
    if (dwarf_getsrclines(cudie, &lines, &n) != 0 || n == 0)
        return 0;                     /* chains without a line, as libdw would answer */
    d->libdw_bytes += n * LINE_BYTES; /* libdw keeps the table until dwarf_end */
    c->lines = malloc(n * sizeof(*c->lines));
    if (!c->lines)
        return -ENOMEM;
    const char *last_src = NULL;
    uint32_t last_file = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        Dwarf_Line *l = dwarf_onesrcline(lines, i);
        Dwarf_Addr addr;
        bool end = false;
        int ln = 0;
        if (!l || dwarf_lineaddr(l, &addr) != 0)
            return -EINVAL; /* i < n: libdw has it */
        dwarf_lineendsequence(l, &end);
        dwarf_lineno(l, &ln);
        uint32_t file = END_SEQUENCE;
        if (!end) {
            const char *src = dwarf_linesrc(l, NULL, NULL);
            if (src != last_src || i == 0) {
                last_src = src;
                last_file = intern(d, src);
            }
            file = last_file;
        }
        if (k > 0 && file != END_SEQUENCE && c->lines[k - 1].file == file &&
            c->lines[k - 1].line == ln)
            continue;
        c->lines[k++] = (line_row){addr, file, ln};
    }
    line_row *t = realloc(c->lines, k * sizeof(*c->lines));
    if (t)
        c->lines = t;
    c->n_lines = k;
    return 0;
}

/* Builds the index of the CU whose DIE is at off (libdw open). */
static int index_cu(cn_sym__dwarf *d, cu_index *c, Dwarf_Off off)
{
    Dwarf_Die cudie;
    if (!dwarf_offdie(d->dbg, off, &cudie))
        return -ENOENT;
    walk_ctx w = {.d = d, .c = c};
    if (dwarf_getsrcfiles(&cudie, &w.files, &w.nfiles) != 0)
        w.files = NULL;
    int rc = walk(&w, &cudie, -1, 0);
    if (rc < 0)
        return rc;
    if (c->n_rows > 1) /* rows may be NULL when a CU has none */
        qsort(c->rows, c->n_rows, sizeof(*c->rows), row_cmp);
    assert(rows_sorted(c));
    return index_lines(d, c, &cudie);
}

/* Closes libdw when the line tables it decoded since it opened are over their bound:
 * cfg.max_line_tables, or by default the sections it read, at least TABLES_MIN. The index
 * holds what lookups need of them; libdw frees a table only with the whole Dwarf, so a
 * program that keeps asking new units (python3 run every few seconds: libpython's tables
 * reached 28 MiB beside 12 of sections) would otherwise hold every table it ever read.
 * Opening again costs reading the sections (9 ms for libpython): at most once per bound's
 * worth of new tables. */
static void close_if_tables_over(cn_sym__dwarf *d, cn_sym__chain *chain)
{
    assert(d->dbg && d->libdw_bytes >= d->libdw_base);
    size_t bound = d->tables_max                ? d->tables_max
                   : d->libdw_base > TABLES_MIN ? d->libdw_base
                                                : TABLES_MIN;
    if (d->libdw_bytes - d->libdw_base > bound)
        chain->closed_libdw += cn_sym__dwarf_release(d, false);
}

/* Indexes the unit at DIE offset off with libdw (open) and adds it to the index, failed
 * or not. NULL only when out of memory. */
static cu_index *add_cu(cn_sym__dwarf *d, Dwarf_Off off, cn_sym__chain *chain)
{
    assert(d->dbg && cn_u64map_get(&d->cu_at, off) < 0);
    d->libdw_used_ns = cn_common_now_ns();
    if (d->n_cus >= INT32_MAX || CN_RESERVE(d->cus, d->cap_cus, d->n_cus + 1) < 0)
        return NULL;
    cu_index *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cu_off = off;
    if (index_cu(d, c, off) < 0)
        cu_fail(c);
    if (cn_u64map_put(&d->cu_at, off, (int32_t)d->n_cus) < 0) {
        cu_free(c);
        return NULL;
    }
    /* Trimmed to size: the index outlives libdw. */
    scope *ts = c->n_scopes ? realloc(c->scopes, c->n_scopes * sizeof(*c->scopes)) : NULL;
    row *tr = c->n_rows ? realloc(c->rows, c->n_rows * sizeof(*c->rows)) : NULL;
    if (ts) {
        c->scopes = ts;
        c->cap_scopes = c->n_scopes;
    }
    if (tr) {
        c->rows = tr;
        c->cap_rows = c->n_rows;
    }
    d->cus[d->n_cus++] = c;
    d->cu_bytes += cu_size(c);
    chain->indexed_units++;
    close_if_tables_over(d, chain);
    return c;
}

/* Indexes every unit of the ranges not indexed yet, then closes libdw, which no lookup
 * needs again. Called once index_all_after units are indexed (INDEX_ALL_AFTER): a program whose new
 * leaves keep landing in new units (libc6-dbg's libc: 4 126 units of one small function each) would
 * otherwise keep libdw and its sections (10.9 MiB) open for as long as it runs. Stops early when
 * out of memory or libdw cannot open again. */
static void index_rest(cn_sym__dwarf *d, cn_sym__chain *chain)
{
    for (size_t i = 0; i < d->n_ar; i++) {
        if (cn_u64map_get(&d->cu_at, d->ar[i].cu_off) >= 0)
            continue;
        if (!d->dbg && (chain->opened_libdw++, dw_begin(d) < 0))
            return;
        if (!add_cu(d, d->ar[i].cu_off, chain))
            return;
    }
    d->complete = true;
    if (d->dbg)
        chain->closed_libdw += cn_sym__dwarf_release(d, false);
}

/* The index of the CU at DIE offset off: kept, or built now with libdw (opened again when
 * closed; chain's counts say what happened). NULL when it cannot be had; a CU that failed
 * is kept as failed. */
static cu_index *get_cu(cn_sym__dwarf *d, Dwarf_Off off, cn_sym__chain *chain)
{
    int32_t at = cn_u64map_get(&d->cu_at, off);
    if (at >= 0)
        return d->cus[at]->failed ? NULL : d->cus[at];
    assert(!d->complete); /* every unit of the ranges is in the index */
    if (!d->dbg && (chain->opened_libdw++, dw_begin(d) < 0))
        return NULL;
    cu_index *c = add_cu(d, off, chain);
    if (c && d->n_cus >= d->index_all_after && d->libdw_base <= INDEX_ALL_SECTIONS &&
        d->libdw_used_ns - d->opened_ns >= d->index_all_age_ns)
        index_rest(d, chain);
    return c && !c->failed ? c : NULL;
}

/* Function name of a scope: the demangled linkage name, else DW_AT_name, else the linkage
 * name as it is. *owned is set when the result must be freed. */
static const char *scope_name(const cn_sym__dwarf *d, const scope *s, char **owned)
{
    *owned = NULL;
    if (s->link_name) {
        *owned = cn_sym_demangle(str_at(d, s->link_name));
        if (*owned)
            return *owned;
    }
    return s->name ? str_at(d, s->name) : str_at(d, s->link_name);
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
    chain->opened_libdw = chain->indexed_units = chain->closed_libdw = 0;
    if (!d->have_ar && (d->dbg || (chain->opened_libdw++, dw_begin(d) < 0)))
        return -ENOENT;            /* released whole: read again */
    assert(!d->dbg || d->have_ar); /* an open libdw's ranges are copied */
    Dwarf_Off off;
    if (!arange_find(d, vaddr, &off))
        return -ENOENT;
    cu_index *c = get_cu(d, off, chain);
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
    /* Outer first: element k is inner[n-1-k]. Its location is the call site of the next
     * inner element, or the address's own line for the innermost. */
    for (size_t k = 0; k < n; k++) {
        const scope *s = &c->scopes[inner[n - 1 - k]];
        char *owned;
        const char *name = scope_name(d, s, &owned);
        chain->name[k] = name ? name : "??";
        chain->owned[k] = owned;
        chain->file[k] = NULL;
        chain->line[k] = 0;
        chain->depth = k + 1;
        if (k == 0)
            chain->func_low = s->low;
        if (k + 1 < n) {
            const scope *callee = &c->scopes[inner[n - 2 - k]];
            chain->file[k] = str_at(d, callee->call_file);
            chain->line[k] = callee->call_line;
        }
    }
    size_t at = cn_count_le_u64(c->n_lines ? &c->lines[0].addr : NULL, c->n_lines,
                                sizeof(*c->lines), vaddr);
    if (at > 0 && c->lines[at - 1].file != END_SEQUENCE) {
        chain->line[n - 1] = c->lines[at - 1].line;
        chain->file[n - 1] = str_at(d, c->lines[at - 1].file);
    }
    return 0;
}
