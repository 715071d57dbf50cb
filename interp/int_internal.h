/* int_internal.h — interp/'s internals (cn_int__), shared by its files and its unit test.
 *
 * A version's layout has two halves: what the BPF program needs to walk frames (struct
 * cn_int_abi_layout, bpf/python_abi.h) and what user space needs to name a code object
 * (cn_int__names). Line tables and object reads go through a reader callback so the unit test
 * can hand them forged memory. */
#ifndef CN_INT_INTERNAL_H
#define CN_INT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "bpf/python_abi.h"
#include "cn_int.h"

/* Line-table formats. */
enum {
    CN_INT__LNOTAB = 0, /* 3.8, 3.9: co_lnotab, (byte delta, line delta) pairs, byte offsets */
    CN_INT__LT310 = 1,  /* 3.10: co_linetable, (byte delta, line delta; -128 none) pairs */
    CN_INT__LOC311 = 2, /* 3.11+: co_linetable, the location table, code units */
};

/* What naming a code object reads. */
typedef struct cn_int__names {
    uint32_t co_filename, co_name, co_qualname; /* co_qualname CN_INT_ABI_NONE before 3.11 */
    uint32_t co_firstlineno, co_linetable;
    uint32_t ascii_size, compact_size; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
    int line_format;                   /* CN_INT__LNOTAB … */
    bool instr_bytes;                  /* the frames' instr counts bytes (3.8/3.9 f_lasti,
                                          3.11+ offsets), else code units (3.10 f_lasti) */
} cn_int__names;

typedef struct cn_int__layout {
    int major, minor;
    struct cn_int_abi_layout abi; /* runtime left 0: the caller sets it */
    cn_int__names names;
    /* PyThreadState.native_thread_id (3.11+: the thread's tid in the target's pid namespace),
     * else CN_INT_ABI_NONE: what a user-space read of a thread's frames (cn_int_capture)
     * searches by, where the program compares thread_id with the thread's fs base */
    uint32_t ts_native_id;
} cn_int__layout;

/* The built-in layout of major.minor (3.8–3.13), checked against each pyenv build's DWARF
 * (docs/python.md). 0 and *out, -ENOTSUP. */
int cn_int__layout_for(int major, int minor, cn_int__layout *out);

/* The layout described by a _Py_DebugOffsets block (the first bytes of _PyRuntime, 3.13):
 * cookie "xdebugpy", its version, its offsets. 0, -ENOENT no cookie, -ENOTSUP a version whose
 * block this reader does not know (3.14+ changed it) or a free-threaded build, -EINVAL
 * absurd offsets. */
int cn_int__layout_debug(const uint8_t *p, size_t n, cn_int__layout *out);

/* Line of instruction index instr (code units) in a line table of the given format; first is
 * co_firstlineno. > 0, or 0 when the table has no line for it. Every byte read is bounded by n. */
int cn_int__line(int format, const uint8_t *p, size_t n, int first, int32_t instr);

/* Reads n bytes at addr of the target; returns 0 or a negative errno (short reads fail). */
typedef int (*cn_int__read_fn)(void *arg, uint64_t addr, void *buf, size_t n);

/* A code object read from the target. Strings malloc'ed (NULL when unreadable); linetable
 * malloc'ed (NULL, 0 when unreadable). cn_int__code_clear frees them. */
typedef struct cn_int__code {
    char *name, *filename;
    int first_line;
    uint8_t *linetable;
    size_t linetable_len;
    uint64_t ident[2]; /* the name and file objects' addresses read: what cn_int__code_same
                          compares (0, 0 when the object was not a code object) */
} cn_int__code;

#define CN_INT__MAX_STR       1024      /* characters of a name or a file name */
#define CN_INT__MAX_LINETABLE (1 << 20) /* bytes of a line table */

/* Type objects already checked by name, per process (0 = not yet): a type is trusted by its
 * address once its tp_name read "code", "str" or "bytes". */
typedef struct cn_int__types {
    uint64_t code, str, bytes;
} cn_int__types;

/* Reads the code object at code: its type must be named "code", its strings "str", its line
 * table "bytes"; lengths bounded. 0 (fields possibly NULL) or -EFAULT (not a code object).
 * types (may be NULL) caches the type checks. */
int cn_int__read_code(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t code,
                      cn_int__types *types, cn_int__code *out);
void cn_int__code_clear(cn_int__code *c);

/* Whether the code object at code is still the one c was read from: its type pointer still
 * the checked code type, its name and file pointers the same (one read of the span they lie
 * in; three where a layout puts them far apart). A code object freed and another allocated
 * at its address almost always differs in both strings. A read failing with -ESRCH (the
 * process exited; its samples are handled up to a read interval later) counts as the same:
 * nothing can have replaced the object. */
bool cn_int__code_same(const cn_int__names *l, cn_int__read_fn rd, void *arg, uint64_t code,
                       const cn_int__types *types, const cn_int__code *c);

/* The bytes of a code object cn_int__code_same compares, when they lie in one span of at
 * most 256 bytes (every layout's: 112–128): [code + *off, code + *off + *len). false when a
 * layout puts them further apart (then only cn_int__code_same checks it). */
bool cn_int__ident_span(const cn_int__names *l, uint32_t *off, uint32_t *len);
/* The offsets of the three words cn_int__code_same compares: ob_type, the name (co_qualname,
 * else co_name), co_filename. false when the layout has none. */
bool cn_int__ident_offsets(const cn_int__names *l, uint32_t off[3]);
/* cn_int__code_same's answer for a span read (cn_int__ident_span) that succeeded. */
bool cn_int__ident_same(const cn_int__names *l, const uint8_t *span, const cn_int__types *types,
                        const cn_int__code *c);

/* The epoch's batched check (ctx.c) reads n spans [addr[i], addr[i] + len), addr ascending,
 * as runs: a span at most CN_INT__RUN_GAP bytes past the run before it joins that run while
 * the run stays within CN_INT__RUN_MAX bytes. A read of the target costs about as much for
 * 128 bytes as for 4 KiB (one iovec per run, not per span: ~12 µs against ~5 µs per extra
 * iovec on the project's VM), and code objects of one module lie close together. A gap
 * below a page's size means every page a run touches holds part of a span: no page is
 * read that the spans alone would not have read. run_lo, run_len get the runs (at most n),
 * run_of[i] the run of span i; returns the number of runs. */
#define CN_INT__RUN_GAP 1024
#define CN_INT__RUN_MAX 4096
size_t cn_int__plan_runs(const uint64_t *addr, size_t n, uint32_t len, uint64_t *run_lo,
                         uint32_t *run_len, uint32_t *run_of);

/* The code-unit index of a frame's instr as captured by the program (see python_abi.h). */
int32_t cn_int__instr_index(const cn_int__names *l, uint32_t raw);

/* A user-space walk of one thread state's frames with the same rules as the BPF program
 * (bounded, fault-tolerant): the oracle the tests compare the program against, and what a
 * hostile-memory test drives. Returns the number of frames written (≤ max), *status. */
uint32_t cn_int__walk(const struct cn_int_abi_layout *l, cn_int__read_fn rd, void *arg,
                      uint64_t tstate, cn_int_frame *out, uint32_t max, int *status);

/* Symbols of an ELF file (fd): values of the named symbols (.dynsym, then .symtab; 0 when
 * absent) and the first PT_LOAD's page-aligned vaddr and file offset (for the load bias). */
typedef struct cn_int__elfsyms {
    uint64_t runtime, runtime_size, py_version; /* _PyRuntime, its size, &Py_Version */
    uint64_t eval, eval_size;                   /* _PyEval_EvalFrameDefault */
    uint64_t load_vaddr, load_off;
    int version_hex; /* Py_Version's value read from the file, 0 */
} cn_int__elfsyms;
int cn_int__elf_syms(int fd, cn_int__elfsyms *out);
/* The 4-byte object named name (.dynsym, then .symtab), read from the file: 0 and *val; -ENOENT
 * without such a symbol, -ENODATA when its bytes are not in the file or are 0, -ENOEXEC. */
int cn_int__elf_u32(int fd, const char *name, uint32_t *val);
/* The object of n 4-byte words named name (a glibc _thread_db_ descriptor: 3), the same way:
 * 0 and val[0, n) (0s included); -ENOENT, -ENODATA (its bytes not in the file), -ENOEXEC. */
int cn_int__elf_words(int fd, const char *name, uint32_t *val, size_t n);

/* Where glibc's struct pthread keeps a field, from the descriptor its libc exports for
 * libthread_db (_thread_db_pthread_tid: {the field's size in bits, its elements, its offset},
 * glibc's nptl_db/structs.def) and the struct's size (_thread_db_sizeof_pthread): 0 and *off
 * when the descriptor names one field of bits bits, aligned, inside the struct; -EINVAL. */
int cn_int__pthread_field(const uint32_t desc[3], uint32_t bits, uint32_t struct_size,
                          uint32_t *off);

/* One thread state of a process, under the thread it belongs to (cn_int_capture's index): id
 * is native_thread_id (3.11+) or the tid in the thread's glibc descriptor (before), 0 when
 * unreadable; interp the position of its interpreter in the runtime's list. */
typedef struct cn_int__ts_id {
    uint64_t id, tstate;
    uint32_t interp;
} cn_int__ts_id;
/* Indexes the thread states of the runtime at lay->abi.runtime: a bounded walk of the
 * interpreters and their threads (the program's search bounds, CN_INT_ABI_MAX_INTERPS ×
 * CN_INT_ABI_MAX_THREADS, and cap), two or three reads a state; pd_tid is offsetof(struct
 * pthread, tid) for a layout without native_thread_id (0: every id is 0). A failed read ends
 * that list. Returns the states put in out; *ninterps the interpreters seen. */
size_t cn_int__index_states(const cn_int__layout *lay, uint32_t pd_tid, cn_int__read_fn rd,
                            void *arg, cn_int__ts_id *out, size_t cap, uint32_t *ninterps);
/* The thread state of thread id among v[0, n): 1 and *at when exactly one state names it, 0
 * when none does (or id is 0), -EEXIST when several do (states of the thread in several
 * interpreters, or a state left by a thread that ended and a new one given its descriptor):
 * no state rather than perhaps another thread's, or another interpreter's. */
int cn_int__ts_match(const cn_int__ts_id *v, size_t n, uint64_t id, size_t *at);

/* The queue of records waiting for the sampler's join (queue.c). */
#define CN_INT__QUEUE_MAX 65536 /* records held; the oldest are dropped past it */
typedef struct cn_int__qrec {
    uint32_t pid, tid, cpu, nframes, first; /* first: index in the frame pool */
    uint64_t time;
    bool sample_time, taken, multi, sub;
    int status;
    uint32_t interp, nsub;
} cn_int__qrec;
typedef struct cn_int__queue {
    cn_int__qrec *q;
    size_t head, len, cap;
    cn_int_frame *pool;
    size_t plen, pcap;
} cn_int__queue;

/* Appends one record as the program wrote it (size bytes; checked against its frame count).
 * names: the process's layout, for the instruction index (NULL: -1). 0, -EINVAL, -ENOMEM. */
int cn_int__queue_push(cn_int__queue *q, const void *data, size_t size, const cn_int__names *names);
/* The join (cn_int_take's rule): 1 and *out, the record leaving the queue, or 0. */
int cn_int__queue_take(cn_int__queue *q, uint32_t pid, uint32_t tid, uint64_t time,
                       cn_int_record *out);
size_t cn_int__queue_expire(cn_int__queue *q, uint64_t time);
int cn_int__queue_next(cn_int__queue *q, cn_int_record *out);
size_t cn_int__queue_len(const cn_int__queue *q); /* records not taken */
void cn_int__queue_free(cn_int__queue *q);

/* (major, minor) from an object's file name: python3.11, libpython3.11.so.1.0, … 0 or -ENOENT. */
int cn_int__version_from_name(const char *path, int *major, int *minor);

#endif /* CN_INT_INTERNAL_H */
