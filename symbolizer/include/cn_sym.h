/* cn_sym.h — canopy's symbolizer: the whole public API of symbolizer/.
 *
 * The symbolizer turns native frames — (object, file offset) for ELF objects, kernel
 * addresses, absolute addresses in JIT code — into inline chains of functions: outer
 * function first, then the functions inlined into it, each with the source file and line
 * of the frame's location inside it when debug information exists. It knows nothing of
 * sockets, sessions or aggregate's tables.
 *
 * Data flow: a caller describes an object with a cn_sym_object (file to read, identity
 * key, kind) and asks either
 *   (a) synchronously: cn_sym_lookup() on a cn_sym_cache, or, for hot loops,
 *       cn_sym_handle_get() + cn_sym_handle_symbol() (symbol table only, no allocation);
 *   (b) asynchronously: cn_sym_worker_submit() batches of (tag, cookie, object, offset);
 *       a worker thread resolves them and queues results; its eventfd
 *       (cn_sym_worker_fd()) becomes readable; the owner's loop calls
 *       cn_sym_worker_take() and converts the chains into cn_agg_frame_symbols for
 *       cn_agg_regroup(). Submitting never blocks on resolution.
 *
 * Objects are loaded once and cached by identity (build-id hex, else "dev:inode:mtime")
 * in a cn_sym_cache shared by every user and session. The cache is thread-safe (one
 * mutex; loaded objects are reference-counted and immutable) and bounded three ways — the
 * heap bytes of the loaded objects, their number, and the bytes of their debug data (the
 * sections libdw reads into memory and its line tables while open, and the index of the
 * compilation units looked up, which outlives libdw): while a bound is exceeded, unreferenced
 * objects are evicted, the least recently used first, an object that was slow to load counting as
 * used more recently (cfg.reload_credit).
 *
 * ELF and DWARF files come from target processes and are untrusted: reads are bounded,
 * sizes and counts checked; a corrupt file gives an error or fewer symbols, never a crash.
 *
 * Ownership: results (cn_sym_result, cn_sym_batch) own their strings and are freed with
 * their _clear/_free function. Errors are negative errno values. A frame that cannot be
 * resolved is reported as unresolved (status -ENOENT); naming it `LIB+0xOFFSET` or
 * `0xADDRESS` is the caller's business (aggregate does it). One exception: in a USER object
 * without a full symbol table, an address that no exported symbol covers but an FDE range
 * of .eh_frame does resolves to that function, named `LIB+0xSTART` (LIB: the base name of
 * the object's path, START: the range's file offset) exactly as aggregate would name the
 * function's first address (docs/cli.md "Names"); not for /proc/PID/map_files paths,
 * whose base name is not the file's. cn_sym_handle_symbol does not use FDE ranges.
 */
#ifndef CN_SYM_H
#define CN_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cn_obj.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Objects
 */

typedef enum cn_sym_kind {
    CN_SYM_USER = 0, /* an ELF file; addresses are FILE OFFSETS into it */
    CN_SYM_KERNEL,   /* the kernel and its modules (/proc/kallsyms); absolute addresses */
    CN_SYM_JIT,      /* JIT code named by a perf map (/tmp/perf-PID.map); absolute addresses */
    CN_SYM_VDSO,     /* the running kernel's vDSO; addresses are offsets into its image */
} cn_sym_kind;

/* Describes an object to symbolize. Nothing is owned; strings are copied when needed.
 * - USER: path is the file to read: a plain path, /proc/PID/root/PATH (other mount
 *   namespaces) or /proc/PID/map_files/START-END (deleted or replaced binaries).
 *   identity is the cache key: the build-id in lowercase hex, or "dev:inode:mtime";
 *   NULL means path is the key. pid (0 = none) lets debug files be searched inside
 *   /proc/PID/root as well as in the host's directories.
 * - KERNEL: path NULL reads /proc/kallsyms (module symbols included); a non-NULL path
 *   names another file in kallsyms format (tests). identity NULL = "[kernel]".
 * - JIT: pid selects the perf map /proc/PID/root/tmp/perf-NSPID.map (NSPID: the pid
 *   inside the process's own pid namespace); path, when not NULL, overrides it (e.g.
 *   /tmp/perf-PID.map for a process known to share our mount namespace: that path still
 *   works after the process exited). The map is untrusted: it is opened with O_NOFOLLOW |
 *   O_NONBLOCK (a symlink is refused, a FIFO never blocks), must be a regular file owned
 *   by the target's uid (owner_uid when has_owner, else the owner of /proc/PID at read
 *   time, else — the process exited — our own uid), and at most 256 MiB are read. Once
 *   the process is gone, its root is too: the default path becomes /tmp/perf-PID.map.
 *   When the map grows only the appended lines are read. identity NULL = "jit:PID".
 * - VDSO: the vDSO image of the running kernel, which is the same in every (64-bit)
 *   process: the symbolizer reads its own copy (getauxval(AT_SYSINFO_EHDR)); path, pid
 *   and identity are ignored. Addresses are offsets into the image (the mapping's file
 *   offsets, as for USER). */
typedef struct cn_sym_object {
    cn_sym_kind kind;
    const char *path;
    const char *identity;
    const char *name; /* USER: the file's name as profiles show it, LIB of the `LIB+0xSTART`
                         names of stripped code; NULL = path's last component, and none
                         for a /proc/PID/map_files path (whose name is an address range) */
    int32_t pid;
    bool has_owner;     /* JIT: owner_uid is the uid the perf map must belong to */
    uint32_t owner_uid; /* JIT: see has_owner */
    cn_obj_ident file;  /* USER: the file path must be (device, inode, size, mtime, as the
                           sampler checked it: cn_smp_object.file); a different file there
                           is not read (-ESTALE). ino 0: path is a name the caller chose
                           itself (tests, tools; never a target's): opened as one of
                           root's own (CN_OBJ_TRUSTED: symlinks followed, still only a
                           regular file, O_NOCTTY) */
} cn_sym_object;

/* ---------------------------------------------------------------------------------------
 * Results
 */

/* One element of an inline chain. file NULL / line 0 when unknown. */
typedef struct cn_sym_frame {
    const char *name; /* demangled function name (never NULL) */
    const char *file; /* source file of this frame's location inside the function */
    int32_t line;     /* line of that location (for the innermost: the address's line) */
} cn_sym_frame;

/* The result for one address. status 0: chain[0..depth) is valid, outer function first
 * (depth >= 1). status < 0: unresolved (depth 0, chain NULL): -ENOENT no symbol covers
 * the address, or the object could not be read (-EACCES, -EINVAL for a corrupt file…). */
typedef struct cn_sym_result {
    int status;
    size_t depth;
    cn_sym_frame *chain; /* owned by the result */
    /* The symbol table's name for the address when DWARF named the chain's outer function
     * and the symbol table names it otherwise (a clone such as msort_with_tmp.part.0, an
     * alias such as malloc for DWARF's __libc_malloc): what `--no-inline` shows, as perf
     * does (docs/calltree.md §4.5). NULL when no symbol covers the address or the names
     * agree (then chain[0].name is the symbol table's). Owned by the result. */
    const char *symbol;
    uint64_t sym_offset;  /* address - start of the outer symbol (status 0) */
    uint64_t map_bytes;   /* JIT: bytes of the perf map the lookup used (0: none could be
                             read): a caller may retry an unresolved address once the map
                             has grown past this */
    int64_t map_mtime_ns; /* JIT: that map's modification time (with map_bytes, its version:
                             a map another process of the same pid left, rewritten to the
                             same size, has another) */
    /* When range_lo < range_hi: every address of [range_lo, range_hi) in this object (the
     * lookup's address space) has this same answer: one frame, no file or line (the object
     * has no DWARF and is not a JIT map, so nothing varies inside a function). A caller may
     * name such addresses without a lookup (live/: a build's compilers meet thousands of
     * new addresses in functions already named). Both 0 otherwise. */
    uint64_t range_lo, range_hi;
} cn_sym_result;

/* Frees what a result owns and zeroes it. Accepts a zeroed result. */
void cn_sym_result_clear(cn_sym_result *r);

/* ---------------------------------------------------------------------------------------
 * The object cache (shared, thread-safe)
 */

typedef struct cn_sym_cache cn_sym_cache;

typedef struct cn_sym_config {
    size_t max_memory;        /* bound on loaded objects' bytes; 0 = default (256 MiB) */
    size_t max_objects;       /* bound on loaded objects; 0 = default (1024) */
    size_t max_mapped;        /* bound on the bytes of debug data they hold (sections read
                                 into memory, decompressed; line tables; the index); 0 =
                                 default (512 MiB). The most recently
                                 used object is exempt from this bound and max_objects, so one
                                 object larger than the bound is not reloaded for every lookup. */
    size_t max_line_tables;   /* bound on the line tables libdw keeps decoded for one object
                                 while open: past it libdw closes (the index keeps what
                                 lookups need) and opens again for the next new unit; 0 =
                                 default (the object's debug sections' size, at least 4 MiB) */
    size_t index_all_after;   /* units indexed after which all the others are indexed at once
                                 and libdw closes for good (objects with at most 16 MiB of
                                 debug sections) loaded index_all_age_ns ago or more; 0 =
                                 default (64) */
    int64_t index_all_age_ns; /* 0 = default (30 s) */
    bool lines;             /* resolve lines and inline chains with libdw when debug info exists */
    bool debuginfod;        /* query debuginfod when DEBUGINFOD_URLS is set */
    const char *debug_dirs; /* ':'-separated global debug directories; NULL = /usr/lib/debug */
    int load_wait_ms;       /* how long a lookup waits for an ELF object's load (its own
                               thread) before answering -ETIMEDOUT; the load goes on and
                               later lookups get its result. 0 = default (3000), < 0 =
                               never wait (tests) */
    int64_t reload_credit;  /* eviction order: an object's last use plus this times its load
                               time (ns per ns) — 1000: a 100 ms load is kept 100 s longer
                               than a cheap one last used at the same time; 0 = pure LRU */
    cn_obj_mounts *mounts;  /* mount tables for the FUSE check of every open (cn_obj.h),
                               shared with the loads (a reference each); NULL = the cache
                               makes its own */
} cn_sym_config;

/* Fills *cfg with defaults (256 MiB, 1024 objects, 512 MiB mapped, lines on, debuginfod
 * on, /usr/lib/debug, reload credit 1000). */
void cn_sym_config_init(cn_sym_config *cfg);

/* A new cache (cfg NULL = defaults; copied). NULL on ENOMEM. */
cn_sym_cache *cn_sym_cache_new(const cn_sym_config *cfg);
/* Frees the cache and every object it holds; accepts NULL; returns NULL. All handles
 * must have been released and all workers using it freed first. */
cn_sym_cache *cn_sym_cache_free(cn_sym_cache *c);

/* Resolves one address of obj (file offset for USER, absolute address otherwise) into
 * *out (cleared first; free with cn_sym_result_clear). Loads the object on first use.
 * Returns 0 when *out was filled (check out->status for resolved/unresolved), or
 * negative errno on bad arguments (-EINVAL) or -ENOMEM. Thread-safe. */
int cn_sym_lookup(cn_sym_cache *c, const cn_sym_object *obj, uint64_t addr, cn_sym_result *out);

/* Cache statistics (for `status` and tests). */
typedef struct cn_sym_stats {
    size_t objects; /* objects loaded now */
    size_t memory;  /* their bytes */
    size_t mapped;  /* bytes of debug data they hold (cn_sym_config.max_mapped) */
    uint64_t loads; /* objects loaded since creation */
    uint64_t evictions;
    uint64_t lookups;
    uint64_t debug_releases;       /* debug data released (idle or line tables over
                                      max_line_tables: libdw closed; over the bound: with
                                      the index) */
    uint64_t debug_opens;          /* libdw opened: by a load, or again by a lookup */
    uint64_t debug_units;          /* compilation units indexed (dwarf.c) */
    size_t max_memory, max_mapped; /* the bounds (cn_sym_config) */
} cn_sym_stats;
void cn_sym_cache_stats(cn_sym_cache *c, cn_sym_stats *out);
/* Drops unreferenced objects not looked up for idle_ns: once a program's frames have
 * their names, its tables wait for nothing (a build's compilers, gone). Returns how many
 * were dropped (counted as evictions). */
size_t cn_sym_cache_expire(cn_sym_cache *c, int64_t idle_ns);
/* Closes libdw on unreferenced objects not looked up for idle_ns plus cfg.reload_credit
 * times their load time (its handles, the sections it read, its line tables), keeping
 * their symbol tables and the index of the compilation units already looked up, which
 * answers any address in them: libdw is opened again (from the file still open) only by a
 * lookup in a unit not indexed yet. Returns how many objects closed theirs. */
size_t cn_sym_cache_release_debug(cn_sym_cache *c, int64_t idle_ns);

/* Fast path: a reference to a loaded object. The object stays loaded (not evicted)
 * while a handle is held. Returns 0 and *out, or negative errno (-ENOENT, -EACCES,
 * -EINVAL corrupt, -ENOMEM). Release with cn_sym_handle_put (accepts NULL). */
typedef struct cn_sym_handle cn_sym_handle;
int cn_sym_handle_get(cn_sym_cache *c, const cn_sym_object *obj, cn_sym_handle **out);
void cn_sym_handle_put(cn_sym_cache *c, cn_sym_handle *h);

/* Symbol-table lookup on a held handle (no lines, no inlines, no locking, no allocation):
 * the name of the symbol covering addr as the object spells it (C++ and Rust names still
 * mangled: cn_sym_demangle; cn_sym_lookup demangles), valid while the handle is held, and
 * its start and size in the same address space as addr (file offset for USER). Returns
 * 0 or -ENOENT. Safe from several threads at once. */
int cn_sym_handle_symbol(const cn_sym_handle *h, uint64_t addr, const char **name, uint64_t *start,
                         uint64_t *size);

/* Whether obj describes something this symbolizer can read (USER with a path, JIT with a
 * pid or a path, KERNEL, VDSO). Requests for other objects are answered -EINVAL. */
bool cn_sym_object_valid(const cn_sym_object *obj);

/* The size and modification time of a JIT object's perf map as the symbolizer would read
 * it (its path is not followed if it is a symlink), so that a caller can retry addresses
 * once either differs from a result's map_bytes and map_mtime_ns. The open's FUSE check
 * uses c's mount tables (c NULL: the mount table is read for this call, 0.5 ms on a
 * loaded VM). Returns 0 and *size (and *mtime_ns unless NULL), -EINVAL (not a JIT object,
 * or not a regular file), or the negative errno of the open (-ENOENT: no map yet). */
int cn_sym_perfmap_size(cn_sym_cache *c, const cn_sym_object *obj, uint64_t *size,
                        int64_t *mtime_ns);

/* Counts for a handle's object (tests, benchmarks). */
typedef struct cn_sym_object_info {
    size_t symbols;       /* entries in the sorted symbol table */
    size_t memory;        /* bytes the object holds */
    size_t section_bytes; /* sizes of the symbol and string sections it was built from */
    bool has_dwarf;       /* line/inline information found */
    char source[16];      /* "symtab", "minidebug", "dynsym", "kallsyms", "perfmap", "vdso", "" */
    int64_t load_ns;      /* how long its load took */
} cn_sym_object_info;
void cn_sym_handle_info(const cn_sym_handle *h, cn_sym_object_info *out);

/* ---------------------------------------------------------------------------------------
 * The worker thread (asynchronous resolution)
 */

typedef struct cn_sym_worker cn_sym_worker;

/* One address to resolve. tag groups requests (e.g. a session id) for cancellation;
 * cookie is the caller's (e.g. a frame id); both come back untouched. obj is copied. */
typedef struct cn_sym_request {
    uint64_t tag;
    uint64_t cookie;
    cn_sym_object obj;
    uint64_t addr;
} cn_sym_request;

/* One result of a batch. */
typedef struct cn_sym_answer {
    uint64_t tag;
    uint64_t cookie;
    cn_sym_result result;
} cn_sym_answer;

/* A batch of answers taken from the worker; owns everything it points to. */
typedef struct cn_sym_batch {
    cn_sym_answer *answers;
    size_t n;
} cn_sym_batch;
cn_sym_batch *cn_sym_batch_free(cn_sym_batch *b); /* accepts NULL; returns NULL */

/* Starts a worker thread resolving through cache (not owned; must outlive the worker).
 * max_pending bounds queued requests (0 = 1 Mi). Returns 0 and *out or negative errno. */
int cn_sym_worker_new(cn_sym_cache *cache, size_t max_pending, cn_sym_worker **out);
/* Stops the thread (pending requests are dropped), frees everything; accepts NULL. */
cn_sym_worker *cn_sym_worker_free(cn_sym_worker *w);
/* Asks the thread to stop and waits at most timeout_ms (< 0: for ever) for it to end.
 * 0: it has ended (cn_sym_worker_free then frees at once). -ETIMEDOUT: it is still inside
 * a lookup (a system call on a target's file that does not return): the thread still uses
 * the worker and its cache, so neither may be freed; a process about to exit leaves
 * them. Accepts NULL. */
int cn_sym_worker_stop(cn_sym_worker *w, int timeout_ms);
/* Tests only: the thread pauses ns before resolving each batch (a slow symbolizer, as
 * under heavy load, made deterministic). 0, the default, turns it off. */
void cn_sym_worker_set_test_delay(cn_sym_worker *w, int64_t ns);

/* Holds the worker thread where it allocates nothing (between two lookups, or idle), until
 * cn_sym_worker_resume(), and joins the threads of the loads that have finished (an
 * exiting thread frees its thread-local state); the caller then knows these threads own
 * no allocator lock (e.g. before fork() under an allocator that does not lock itself
 * across fork). A load that outlasted its wait (a stalled read) still runs. Never waits
 * for a lookup: false when one is running; the thread then stays out of its next lookup
 * for a while (at most 50 ms) and signals the fd (cn_sym_worker_fd), so that a try when
 * the owner's loop wakes succeeds. true (then resume) for NULL. */
bool cn_sym_worker_try_pause(cn_sym_worker *w);
void cn_sym_worker_resume(cn_sym_worker *w);

/* Queues n requests (copied). Never waits on resolution. A request the symbolizer cannot
 * take (an object without the file its kind needs, an unknown kind) does not fail the
 * batch: it is queued and answered with status -EINVAL, like any unresolved address.
 * Returns 0, or -EAGAIN when the pending bound would be exceeded (nothing queued: retry
 * later), -ENOMEM (nothing queued), -EINVAL (w NULL, or reqs NULL with n > 0). */
int cn_sym_worker_submit(cn_sym_worker *w, const cn_sym_request *reqs, size_t n);

/* The eventfd (O_NONBLOCK, O_CLOEXEC) that is readable while answers wait. Owned by the
 * worker. cn_sym_worker_take() drains it. */
int cn_sym_worker_fd(const cn_sym_worker *w);

/* Takes every answer queued so far: *out is a batch (free with cn_sym_batch_free), or
 * NULL when none waits. Returns the number of answers (>= 0) or negative errno. */
int cn_sym_worker_take(cn_sym_worker *w, cn_sym_batch **out);

/* Drops queued requests and queued answers carrying tag (a session going away). A
 * request being resolved at the time may still produce an answer: callers ignore
 * answers for unknown tags. */
void cn_sym_worker_cancel(cn_sym_worker *w, uint64_t tag);

/* Blocks until every request submitted so far is answered (tests, `canopy record`
 * finishing a file). timeout_ms < 0 = forever. Returns 0 or -ETIMEDOUT. */
int cn_sym_worker_drain(cn_sym_worker *w, int timeout_ms);

/* ---------------------------------------------------------------------------------------
 * Helpers exposed for the daemon, tests and fuzzing
 */

/* Demangles a C++ (Itanium) or Rust symbol like c++filt; returns a malloc'ed string
 * (caller frees), or NULL if name is not mangled (or on ENOMEM). */
char *cn_sym_demangle(const char *name);

/* Reads the GNU build-id of an ELF file as lowercase hex into buf (size >= 41).
 * Returns the number of hex chars, -ENOENT when the file has none, or negative errno. */
int cn_sym_build_id(const char *path, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CN_SYM_H */
