/* sym_internal.h — helpers shared between the symbolizer's files (cn_sym__ prefix). Not
 * part of the public API (include/cn_sym.h); test_symbolizer includes it (its target gets
 * symbolizer/ as a private include directory).
 *
 * A loaded object (cn_sym__obj) is immutable once built and reference-counted by the
 * cache: a sorted symbol array plus one string pool (offsets, so growing the pool never
 * invalidates a name), the PT_LOAD segments that map file offsets to virtual addresses,
 * and optionally an open libdw handle for lines and inlines (serialised by its own mutex,
 * because libdw's lazily built tables are not safe to fill from two threads). */
#ifndef CN_SYM_INTERNAL_H
#define CN_SYM_INTERNAL_H

#include "cn_common.h"
#include "cn_obj.h"
#include "cn_sym.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on what an untrusted object may make us hold. */
#define CN_SYM__MAX_SYMBOLS   (4u << 20) /* symbols per object */
#define CN_SYM__MAX_NAME      4096       /* bytes per symbol name */
#define CN_SYM__MAX_POOL      (256u << 20)
#define CN_SYM__MAX_XZ_OUT    (128u << 20) /* decompressed MiniDebugInfo */
#define CN_SYM__MAX_TEXT_FILE (256u << 20) /* kallsyms / perf map bytes read */
#define CN_SYM__MAX_SEGMENTS  64
#define CN_SYM__MAX_INLINE    64 /* inline chain depth */

/* Symbol priorities for choosing between aliases at one address (higher wins). */
enum {
    CN_SYM__BIND_LOCAL = 0,
    CN_SYM__BIND_WEAK = 1,
    CN_SYM__BIND_GLOBAL = 2,
};

typedef struct cn_sym__entry {
    uint64_t start;
    uint64_t size;     /* 0 while building = unknown (extends to the next symbol, to limit) */
    uint64_t limit;    /* while building: end of the symbol's section (UINT64_MAX unknown);
                          after _finish: 1 when size was inferred (gap to the next symbol),
                          0 when the source gave it */
    uint32_t name;     /* offset into the pool */
    uint32_t seq_bind; /* binding (top 2 bits) and insertion order (later perf-map lines win) */
} cn_sym__entry;

typedef struct cn_sym__table {
    cn_sym__entry *e;
    size_t n, cap;
    uint64_t *starts; /* after _finish: e[i].start, a compact array for the search */
    char *pool;
    size_t pool_len, pool_cap;
    size_t section_bytes; /* sizes of the sections the table came from */
} cn_sym__table;

/* Adds a symbol (name copied as the object spells it). Returns 0, -E2BIG past the
 * bounds, -ENOMEM. */
int cn_sym__table_add(cn_sym__table *t, uint64_t start, uint64_t size, uint64_t limit,
                      const char *name, size_t len, int bind);
/* Sorts, resolves aliases (sized > sizeless, global > weak > local, fewer leading
 * underscores, shorter), gives sizeless symbols the gap to the next one (bounded by
 * limit and by max_gap) and compacts the pool. Returns 0 or -ENOMEM. */
int cn_sym__table_finish(cn_sym__table *t, uint64_t max_gap, int later_wins);
/* The entry covering addr, or NULL. */
const cn_sym__entry *cn_sym__table_find(const cn_sym__table *t, uint64_t addr);
/* The interval of sorted starts[0, n) around addr, where i = how many starts are <= addr
 * and entry i - 1 (when i > 0) covers [starts[i - 1], end_prev): narrows [*lo, *hi)
 * (which contains addr) to the addresses with the same i and the same "covered" (the
 * region where a search of these starts answers as it does for addr). */
void cn_sym__narrow_region(uint64_t addr, const uint64_t *starts, size_t n, size_t i,
                           uint64_t end_prev, uint64_t *lo, uint64_t *hi);
/* Narrows [*lo, *hi) (which contains addr) to the addresses for which cn_sym__table_find
 * gives the same answer as for addr (the same entry, or NULL). */
void cn_sym__table_region(const cn_sym__table *t, uint64_t addr, uint64_t *lo, uint64_t *hi);
/* The name to show for entry e: demangled (C++, Rust) into *owned, which the caller frees,
 * else the pool's own (*owned NULL). At most CN_SYM__MAX_NAME bytes. */
const char *cn_sym__table_name(const cn_sym__table *t, const cn_sym__entry *e, char **owned);
void cn_sym__table_clear(cn_sym__table *t);
size_t cn_sym__table_memory(const cn_sym__table *t);

typedef struct cn_sym__segment {
    uint64_t offset, vaddr, filesz;
} cn_sym__segment;

typedef struct cn_sym__dwarf cn_sym__dwarf; /* dwarf.c */

/* Function ranges from the call-frame information (fde.c), for objects whose symbol
 * table misses local functions: sorted, disjoint [start[i], end[i]) virtual addresses. */
typedef struct cn_sym__fdes {
    uint64_t *start, *end;
    size_t n;
} cn_sym__fdes;

struct Elf;
/* Reads elf's .eh_frame_hdr table and each FDE's range into *f (zeroed first). A missing
 * or malformed table leaves f empty. Returns 0 or -ENOMEM. */
int cn_sym__fdes_load(cn_sym__fdes *f, struct Elf *elf);
/* The start of the FDE range covering va: 0 and *start, or -ENOENT. */
int cn_sym__fdes_find(const cn_sym__fdes *f, uint64_t va, uint64_t *start);
/* Narrows [*lo, *hi) (which contains va) to the addresses for which cn_sym__fdes_find
 * gives the same answer as for va. */
void cn_sym__fdes_region(const cn_sym__fdes *f, uint64_t va, uint64_t *lo, uint64_t *hi);
void cn_sym__fdes_clear(cn_sym__fdes *f);
size_t cn_sym__fdes_memory(const cn_sym__fdes *f);

typedef struct cn_sym__obj {
    /* Cache bookkeeping (cache.c; guarded by the cache mutex). */
    struct cn_sym__obj *hnext;
    struct cn_sym__obj *lru_prev, *lru_next;
    char *key;
    uint64_t hash;
    int refs;
    int status;      /* 0 loaded, or the negative errno of the failed load */
    int64_t used_ns; /* CLOCK_MONOTONIC of the last lookup (cn_sym_cache_expire) */
    int64_t load_ns; /* how long its load took: what evicting it would cost again */
    /* What the object is, immutable after load. */
    cn_sym_kind kind;
    int64_t jit_size;      /* JIT: perf map bytes parsed (whole lines) */
    int64_t jit_file_size; /* JIT: the map's size when loaded (-1: none); reloaded when the
                              size or jit_mtime_ns changes, reading only what was appended */
    int64_t jit_mtime_ns;  /* JIT: the map's modification time then (0: none): a map left
                              by an earlier process of the same pid, rewritten by its
                              successor to the same size, is told apart by it */
    uint64_t jit_dev, jit_ino;
    uint64_t jit_tail; /* JIT: hash of the last bytes parsed (PERFMAP_TAIL): a reload reads
                          on from jit_size only while they are unchanged; else the file was
                          rewritten (a map left by an earlier process of the same pid) */
    cn_sym__table syms;
    cn_sym__fdes fdes; /* only when syms lacks local functions (.dynsym alone, or none) */
    cn_sym__segment seg[CN_SYM__MAX_SEGMENTS];
    size_t n_seg;
    int is_exec_addr; /* addresses are absolute (kernel, JIT): no segment mapping */
    char source[16];
    cn_sym__dwarf *dw; /* NULL when no debug info (or lines disabled) */
    pthread_mutex_t dw_lock;
    size_t memory;            /* heap bytes but dw's debug data */
    size_t mapped;            /* dw's debug data (cn_sym__dwarf_bytes), as last counted */
    struct cn_sym__load *job; /* a load that outlasted its wait (cache.c): this object is
                                 its placeholder (status -ETIMEDOUT) until it lands */
} cn_sym__obj;

/* Loads an ELF object (elf.c): symbols from .symtab, the separate debug file's
 * .symtab, MiniDebugInfo (+ .dynsym) or .dynsym; segments; DWARF when cfg->lines.
 * path is opened with cn_obj_open() and must be want (when want->ino != 0: -ESTALE
 * otherwise). root_prefix ("" or "/proc/PID/root") is tried first when searching debug
 * files.
 * Returns 0 or negative errno; o is filled either way (cleared on error). */
int cn_sym__elf_load(cn_sym__obj *o, const char *path, const cn_obj_ident *want,
                     const char *root_prefix, const cn_sym_config *cfg);
/* The same from an in-memory image (fuzzing): no debug-file search, no DWARF. */
int cn_sym__elf_load_mem(cn_sym__obj *o, const void *data, size_t size);
/* File offset -> virtual address; 0 and *vaddr, or -ENOENT. */
int cn_sym__obj_to_vaddr(const cn_sym__obj *o, uint64_t off, uint64_t *vaddr);
/* Narrows [*lo, *hi) (which contains off) to the offsets that cn_sym__obj_to_vaddr maps as
 * it maps off (the same segment). Returns 0, or -ENOENT when off is in no segment or its
 * segment overlaps another (then nothing is narrowed). */
int cn_sym__obj_segment_region(const cn_sym__obj *o, uint64_t off, uint64_t *lo, uint64_t *hi);
/* Releases everything o holds (not o itself). */
void cn_sym__obj_clear(cn_sym__obj *o);

/* kallsyms and perf maps (textmaps.c), from a buffer. Return 0 or negative errno. */
int cn_sym__kallsyms_parse(cn_sym__table *t, const char *buf, size_t len);
int cn_sym__perfmap_parse(cn_sym__table *t, const char *buf, size_t len);
/* Loads a JIT object's perf map at path into o->syms with the rules of cn_sym.h
 * (O_NOFOLLOW | O_NONBLOCK, regular file owned by owner, bounded). When prev is the
 * same file's earlier load, its symbols are kept and only the bytes appended since are
 * read. Sets o->jit_file_size (-1 when the file could not be opened) and o->jit_mtime_ns
 * even on error.
 * Returns 0 or negative errno (-ELOOP symlink, -EINVAL not a regular file, -EPERM wrong
 * owner, -ENOENT…). */
int cn_sym__perfmap_load(cn_sym__obj *o, const cn_sym__obj *prev, const char *path, uint32_t owner,
                         cn_obj_mounts *mounts);
/* Opens a perf map's path as cn_sym__perfmap_load does: cn_obj_open() without a wanted
 * identity (no symlink on the way, nothing on FUSE, only a regular file is opened), with
 * mount tables m for the FUSE check (NULL: read at the open). Returns an fd and the file's
 * identity in *got (size, modification time, owner: the map's version and who wrote it),
 * or -errno. */
int cn_sym__perfmap_open(cn_obj_mounts *m, const char *path, cn_obj_ident *got);
/* The running kernel's vDSO from our own process into o (elf.c). */
int cn_sym__vdso_load(cn_sym__obj *o);

/* DWARF (dwarf.c). _open takes ownership of fd on success (and of nothing on error).
 * Returns NULL when there is no usable debug info. cfg: its bounds (max_line_tables,
 * index_all_after, index_all_age_ns) are copied. */
cn_sym__dwarf *cn_sym__dwarf_open(int fd, const cn_sym_config *cfg);
cn_sym__dwarf *cn_sym__dwarf_free(cn_sym__dwarf *d);
/* The debug data d holds: while libdw is open, the sections it read into memory and its
 * line tables; always, the index of the CUs looked up (dwarf.c). */
size_t cn_sym__dwarf_bytes(const cn_sym__dwarf *d);
/* Closes libdw (its handles, the sections it read, its line tables), keeping the file open
 * and, unless index_too, the index: lookups in the CUs it holds need no libdw, one in
 * another CU opens it again. Returns whether anything was freed. Nobody may be in a lookup
 * on d (the cache calls it on an object without references). */
bool cn_sym__dwarf_release(cn_sym__dwarf *d, bool index_too);
bool cn_sym__dwarf_is_open(const cn_sym__dwarf *d);
/* When a lookup last needed libdw (opened it, or indexed a unit with it): lookups in the
 * units indexed do not, and libdw may close while they go on. *open_ns: how long its last
 * opening took, what closing it costs again. */
int64_t cn_sym__dwarf_libdw_used_ns(const cn_sym__dwarf *d, int64_t *open_ns);

/* A chain under construction (outer first); strings point into the object, so the
 * caller copies them (into a cn_sym_result) while the object is held. */
typedef struct cn_sym__chain {
    const char *name[CN_SYM__MAX_INLINE];
    char *owned[CN_SYM__MAX_INLINE]; /* demangled names to free, or NULL */
    const char *file[CN_SYM__MAX_INLINE];
    int32_t line[CN_SYM__MAX_INLINE];
    uint64_t func_low; /* outer function's low pc, or UINT64_MAX */
    size_t depth;
    uint32_t opened_libdw;  /* times the lookup opened libdw again (it was closed) */
    uint32_t indexed_units; /* compilation units it indexed */
    uint32_t closed_libdw;  /* times it closed libdw (line tables over their bound, or
                               every unit indexed) */
} cn_sym__chain;
/* Fills chain for vaddr (and its three counts, also on -ENOENT). Returns 0, -ENOENT (no DWARF
 * covers it). Caller holds the object's dw_lock. Release with cn_sym__chain_clear. */
int cn_sym__dwarf_lookup(cn_sym__dwarf *d, uint64_t vaddr, cn_sym__chain *chain);
void cn_sym__chain_clear(cn_sym__chain *chain);

/* Standard CRC-32 (as .gnu_debuglink uses). */
uint32_t cn_sym__crc32(uint32_t crc, const void *buf, size_t len);

/* Debuginfod (debuginfod.c): downloads (or finds in its cache) the debug file for a
 * build-id; *path malloc'ed. Returns 0, -ENOENT, or negative errno. */
int cn_sym__debuginfod_find(const char *build_id_hex, char **path);

/* The hash of the cache's key for obj's object (cache.c): requests with one hash need one
 * object (the worker groups a batch by it). 0 when out of memory. */
uint64_t cn_sym__object_hash(const cn_sym_object *obj);

/* Joins the loader threads whose loads have finished (cache.c): afterwards no loader thread
 * is exiting, the time when one frees its thread-local state. Loads still running (those
 * that outlasted their wait) are left; their number is returned. Called with the worker's
 * gate held (cn_sym_worker_pause), so that no lookup is starting a load meanwhile. */
size_t cn_sym__cache_join_finished(cn_sym_cache *c);

#endif /* CN_SYM_INTERNAL_H */
