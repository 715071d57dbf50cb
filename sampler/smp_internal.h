/* smp_internal.h — what sampler/'s files share (cn_smp__ prefix). Not part of the public
 * API (cn_smp.h); tests and fuzz targets include it to reach the parsers (their targets
 * get sampler/ as a private include directory).
 *
 * Layers, bottom up:
 *   arch_*.c      register sets, DWARF numbering, return-address masking, prologue test
 *   records.c     perf record parsing (pure: bytes in, struct out, never trusts sizes)
 *   maps.c        /proc/PID/maps parsing, address spaces
 *   image.c       objects' ELF facts, from an image of their file (read, never mapped)
 *   cache.c       those tables shared by file identity across processes and sessions
 *   cfi.c         compiled CFI rules: the fast path of DWARF unwinding
 *   unwind.c      DWARF unwinding of a copied stack (compiled CFI, then libunwind)
 *   procs.c       the session's tasks: tid sets, processes, objects, vDSO, kernel modules
 *   perf_open.c   perf_event_attr, perf_event_open with fallbacks, fds, enable/disable
 *   ring.c        ring mapping, in-place reading, k-way merge in time order, held records
 *   offcpu.c      off-CPU intervals: switch-out stacks per thread, closed by switch-ins
 *   session.c     the session's lifecycle, the public entry points, record dispatch
 *   spawn.c       held child for `canopy run`
 *   adapt.c       auto's adaptive stack copy: learning, shrinking, growing back
 */
#ifndef CN_SMP_INTERNAL_H
#define CN_SMP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cn_int.h"
#include "cn_obj.h"
#include "cn_smp.h"

/* ---------------------------------------------------------------------------------------
 * Architecture interface (one implementation is compiled per target architecture).
 */
typedef struct cn_smp__arch {
    const char *name;
    uint16_t elf_machine;          /* e_machine of this architecture's objects */
    uint64_t regs_mask;            /* PERF_SAMPLE_REGS_USER mask */
    int perf_ip, perf_sp, perf_fp; /* perf register indices */
    int perf_lr;                   /* perf index of the link register, or -1 */
    int unw_ip, unw_sp;            /* libunwind numbers of the pc and sp */
    int dw_sp, dw_fp;              /* DWARF numbers of the stack and frame pointers */
    int dw_ra;                     /* DWARF return-address column (arm64: the link register) */
    /* A callee-saved register that compiled CFI tracks through every frame, for the CFAs
     * based on it (x86-64: %rbx, which ld.so's lazy-binding trampoline sets to its entry
     * stack pointer before realigning the stack): DWARF and perf numbers, or -1. */
    int dw_x, perf_x;
    /* The DWARF number of the pc in expressions (x86-64: %rip, 16), or -1. */
    int dw_pc;
    /* perf index of the register a system call returns in (0 in a new thread). */
    int perf_ret;
    /* Frame-pointer frames give the caller's stack pointer: FP + 2 words (x86-64), so that
     * auto can go on from a frame-pointer step with CFI. false: auto uses CFI only. */
    bool fp_gives_sp;
    /* A signal frame (CFI 'S' augmentation: the sigreturn trampoline, entered with SP at
     * the ucontext the kernel saved): offsets from that SP of the interrupted pc, SP and
     * FP, and of the link register (0: none). 0: signal frames are left to libunwind. */
    int sig_pc, sig_sp, sig_fp, sig_lr;
    /* The sigreturn trampoline's two instructions, for a trampoline without CFI (arm64's
     * vDSO), or zeros. */
    uint32_t sig_code[2];
    /* perf register index for a libunwind (DWARF) register number, or -1. */
    int (*unw_to_perf)(int unw_reg);
    /* Strips pointer-authentication bits from a return address (arm64), else identity. */
    uint64_t (*mask_ret)(uint64_t addr);
    /* True when code (a function's first bytes) opens with a frame-pointer prologue. */
    bool (*fp_prologue)(const uint8_t *code, size_t len);
} cn_smp__arch;

/* The host's descriptor. Both descriptors are built on every host, for tests. */
const cn_smp__arch *cn_smp__arch_get(void);
extern const cn_smp__arch cn_smp__arch_x86_64, cn_smp__arch_arm64;

/* Index of perf register `reg` in a sample's register array for mask, or -1. */
int cn_smp__reg_index(uint64_t mask, int reg);

/* ---------------------------------------------------------------------------------------
 * Record parsing (records.c)
 */
typedef struct cn_smp__layout {
    uint64_t sample_type; /* PERF_SAMPLE_* */
    uint64_t regs_mask;   /* PERF_SAMPLE_REGS_USER mask */
    bool sample_id_all;
} cn_smp__layout;

typedef struct cn_smp__rec {
    uint32_t type;
    uint16_t misc;
    /* From the sample or the sample_id trailer (0 when absent). */
    uint32_t pid, tid, cpu;
    uint64_t time;
    union {
        struct {
            uint64_t id; /* PERF_SAMPLE_IDENTIFIER (WALL: which event), else 0 */
            uint64_t ip, period;
            uint64_t nr;           /* callchain entries */
            const uint64_t *chain; /* unaligned-safe: read with memcpy */
            uint64_t abi;          /* PERF_SAMPLE_REGS_ABI_* (0 = none) */
            const uint8_t *regs;   /* nregs u64, unaligned */
            uint32_t nregs;
            const uint8_t *stack; /* user stack copy */
            uint64_t stack_size;  /* bytes valid in stack (dyn_size) */
            uint64_t stack_req;   /* the copy's size as the event asked (which event: auto's
                                     adaptive copy, adapt.c) */
            uint64_t cgroup;      /* PERF_SAMPLE_CGROUP: the task's cgroup id then, or 0 */
        } sample;
        struct {
            uint32_t pid, tid;
            uint64_t addr, len, pgoff;
            uint32_t maj, min;
            uint64_t ino, ino_gen;
            uint32_t prot, flags;
            bool has_build_id;
            const char *filename; /* NUL-terminated inside the record */
        } mmap;
        struct {
            uint32_t pid, tid;
            const char *comm;
        } comm;
        struct {
            uint32_t pid, ppid, tid, ptid;
            uint64_t time;
        } task;
        struct {
            uint64_t id, lost;
        } lost;
        struct {
            uint32_t next_prev_pid, next_prev_tid; /* SWITCH_CPU_WIDE only */
        } sw;
    } u;
} cn_smp__rec;

/* Parses one record of len bytes (header included). Returns 0, -EINVAL when malformed
 * (sizes out of range, strings unterminated), -ENOTSUP for a type we do not use. */
int cn_smp__parse(const cn_smp__layout *lay, const void *rec, size_t len, cn_smp__rec *out);
/* Reads callchain entry i (unaligned-safe). */
uint64_t cn_smp__chain_at(const cn_smp__rec *r, uint64_t i);
/* Reads user register i of the sample (i < nregs). */
uint64_t cn_smp__reg_at(const cn_smp__rec *r, uint32_t i);

/* ---------------------------------------------------------------------------------------
 * Maps, objects and address spaces (maps.c; ELF facts: image.c)
 */

/* Most parts of a file an image holds (headers, program and section headers, section
 * names, notes, .eh_frame_hdr, .eh_frame, .debug_frame). */
#define CN_SMP__ELF_PARTS 24

/* An object file's unwind tables (image.c reads them, cache.c shares them across
 * processes and sessions: cn_smp_cache in cn_smp.h). */
typedef struct cn_smp__elf {
    bool ok;
    const uint8_t *data; /* the file's sparse image (anonymous mmap: only parts[] are read
                            into it, see image.c read_image), or a heap copy when heap */
    size_t size;
    bool heap;
    /* The file ranges data holds (the rest reads as zeros and is refused by _read/_ptr).
     * A heap image holds everything. */
    struct {
        uint64_t off, len;
    } parts[CN_SMP__ELF_PARTS];
    uint32_t nparts;
    uint64_t read_bytes; /* bytes read into data */
    /* PT_LOAD segments */
    uint32_t nload;
    struct {
        uint64_t vaddr, offset, filesz, memsz;
        bool exec;
    } load[16];
    uint64_t eh_frame_hdr_vaddr; /* 0 when none */
    uint64_t eh_frame_hdr_size;
    uint64_t debug_frame_off, debug_frame_size; /* .debug_frame in the file, 0 when none */
    /* .eh_frame read on demand (image.c, "lazy"): NULL when the image was read whole at
     * load. Its pages are filled as lookups need them (cn_smp__elf_fill_fde, and every
     * reader through cn_smp__elf_ptr), from the file kept open. */
    struct cn_smp__lazy *lazy;
    int has_fp;                   /* 1 yes, 0 no, -1 unknown */
    uint32_t fp_tested, fp_found; /* functions sampled, with a frame-pointer prologue */
    struct cn_smp__cfi *cfi;      /* compiled unwind rules (cfi.c), owned; NULL until used */
    /* Sharing (cache.c): the cache holding it (NULL: owned by one object alone), the
     * file's identity (its key), holders, bytes as last counted, when the last holder let
     * go (CLOCK_MONOTONIC ns), hash and LRU links. */
    cn_smp_cache *cache;
    cn_obj_ident id;
    uint32_t refs;
    uint64_t bytes;
    int64_t released_ns;
    struct cn_smp__elf *hnext, *lru_prev, *lru_next;
} cn_smp__elf;

typedef struct cn_smp__obj {
    cn_smp_object pub;
    /* keys */
    uint32_t maj, min;
    uint64_t ino;
    char *key;       /* lookup key: "maj:min:ino:path" or special */
    char *open_path; /* path we can open now (may differ from pub.path), or NULL */
    /* Unwind tables: held (one reference) while some live address space of the session
     * maps the object (nmapped > 0), else released to the cache (procs.c). elf_failed: the
     * last load failed; not tried again until the object is mapped anew. */
    cn_smp__elf *elf;
    cn_smp_cache *cache; /* the session's (NULL: standalone objects of tests) */
    uint32_t nmapped;    /* mappings of address spaces that refer to the object */
    bool elf_failed;
} cn_smp__obj;

typedef struct cn_smp__map {
    uint64_t start, end, pgoff;
    cn_smp__obj *obj;
} cn_smp__map;

typedef struct cn_smp__proc {
    pid_t pid;
    bool maps_loaded, exited;
    /* Python frames (python.c): registered with interp/ since py_since (CLOCK_MONOTONIC),
     * and registrations tried for this image. */
    bool py_registered;
    uint8_t py_tries;
    uint64_t py_since;
    char *cgroup;       /* the last cgroup path read or inherited, or NULL */
    uint64_t cgroup_ns; /* the sample time it was read at */
    bool cgroup_known;  /* false: read it at the next sample */
    /* With the samples' cgroup ids (PERF_SAMPLE_CGROUP): the id cgroup is the path of
     * (or inherited from a parent that had it), and an id with no path found, read from
     * /proc instead: 0 when none. */
    uint64_t cgroup_id, cgroup_tried;
    cn_smp__map *maps; /* sorted by start, non-overlapping; exec mappings only */
    size_t nmaps, cap;
    struct cn_smp__proc *next; /* hash chain */
} cn_smp__proc;

/* Inserts [start,end) replacing whatever overlapped it. Returns 0 or -ENOMEM. */
int cn_smp__proc_map(cn_smp__proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
                     cn_smp__obj *obj);
/* The mapping containing addr, or NULL. */
const cn_smp__map *cn_smp__proc_find(const cn_smp__proc *p, uint64_t addr);
void cn_smp__proc_clear(cn_smp__proc *p);

/* Makes sure o->elf holds the object's unwind tables: held already, else found in the
 * cache by the file's identity (pub.file), else read from open_path opened with
 * cn_obj_open() and that identity. Returns 0 when usable, negative errno else (and then
 * not tried again until the object is mapped anew). */
int cn_smp__elf_load(cn_smp__obj *o);
/* The same from fd, the object's file already opened and checked (not closed here). */
int cn_smp__elf_load_fd(cn_smp__obj *o, int fd);
/* Whether o holds its tables, taking them from the cache when it has them (no file read). */
bool cn_smp__elf_from_cache(cn_smp__obj *o);
/* The same from a copy of an in-memory image (the vDSO, which has no file); the tables
 * are the object's alone. Returns 0 or negative errno. */
int cn_smp__elf_load_image(cn_smp__obj *o, const void *image, size_t size);
/* Reads a file's tables into a new, unshared entry (image.c). Returns 0 and *out, or
 * -ENOEXEC (not an ELF file we can use), -ENOMEM. */
int cn_smp__elf_read_fd(int fd, cn_smp__elf **out);
/* Frees an entry and what it holds; accepts NULL. */
void cn_smp__elf_free(cn_smp__elf *e);
/* Bytes an entry holds in memory (read parts, .eh_frame pages filled since, compiled
 * rules). */
uint64_t cn_smp__elf_bytes(const cn_smp__elf *e);
/* Drops o's hold on its tables (to the cache, or freed when unshared). */
void cn_smp__obj_release(cn_smp__obj *o);
/* maps.c: an address space refers to o once more / once less; the last release drops
 * o's tables (cn_smp__obj_release). */
void cn_smp__obj_mapped(cn_smp__obj *o);
void cn_smp__obj_unmapped(cn_smp__obj *o);

/* cache.c: the tables of the file with identity id, held (one more reference), or NULL
 * when the cache has none. */
cn_smp__elf *cn_smp__cache_get(cn_smp_cache *c, const cn_obj_ident *id);
/* cache.c: gives e (fresh from cn_smp__elf_read_fd, one reference: the caller's) to the
 * cache under id. */
void cn_smp__cache_add(cn_smp_cache *c, cn_smp__elf *e, const cn_obj_ident *id);
/* cache.c: the mount tables of every open of a mapped file (cn_obj_open_in), or NULL
 * for no cache (c NULL: read at each open). */
cn_obj_mounts *cn_smp__cache_mounts(cn_smp_cache *c);
/* cache.c: drops one reference; the last one puts e in its cache's LRU list (evicting the
 * oldest beyond the bound), or frees it when e is unshared. */
void cn_smp__elf_put(cn_smp__elf *e);

/* Load bias of an object mapped at (start, pgoff): process address = bias + ELF vaddr. */
bool cn_smp__elf_bias(const cn_smp__elf *e, uint64_t start, uint64_t pgoff, uint64_t *bias);
/* A pointer to [vaddr, vaddr + n) of e's image when one loaded segment holds it in the
 * file and the image holds those bytes (e->parts), else NULL. */
const uint8_t *cn_smp__elf_ptr(const cn_smp__elf *e, uint64_t vaddr, size_t n);
/* e's .eh_frame_hdr, decoded (cn_obj_ehhdr_parse): its bytes and *h, or NULL. */
const uint8_t *cn_smp__elf_ehhdr(const cn_smp__elf *e, cn_obj_ehhdr *h);
/* The index of the first entry of that table (hdr, h) whose function starts above vaddr
 * (h->count when none): the entry before it is the one that covers vaddr, if any. */
uint64_t cn_smp__ehhdr_after(const cn_smp__elf *e, const uint8_t *hdr, const cn_obj_ehhdr *h,
                             uint64_t vaddr);
/* Reads n bytes at ELF virtual address vaddr from the file image: the parts it holds, and
 * zeros for the rest of a loaded segment (code is not kept: image.c). Returns 0, or
 * -EFAULT outside every loaded segment's file bytes. */
int cn_smp__elf_read(const cn_smp__elf *e, uint64_t vaddr, void *out, size_t n);
/* Makes the image hold the .eh_frame entries that describe vaddr (its FDE, found through
 * .eh_frame_hdr's table, and that FDE's CIE), read from the file when .eh_frame is read on
 * demand (e->lazy); nothing otherwise. libdw reads the image directly: call it before each
 * of libdw's lookups of vaddr in .eh_frame (cfi.c). The image is logically constant: it
 * stands for the file's bytes, whether they were read yet or not. */
void cn_smp__elf_fill_fde(const cn_smp__elf *e, uint64_t vaddr);
/* Whether e's .eh_frame is read on demand; false after cn_smp__elf_fill_all. */
bool cn_smp__elf_lazy(const cn_smp__elf *e);
/* Reads the rest of .eh_frame now and stops reading on demand (for a libdw that would not
 * find an entry through the search table: cfi.c checks at open). */
void cn_smp__elf_fill_all(cn_smp__elf *e);

/* ---------------------------------------------------------------------------------------
 * Unwinding (unwind.c)
 */
typedef struct cn_smp__unwinder cn_smp__unwinder;

typedef enum cn_smp__unwind_how {
    CN_SMP__UNWIND_CFI_FIRST = 0, /* compiled CFI, libunwind for what it cannot take */
    CN_SMP__UNWIND_LIBUNWIND,     /* libunwind alone */
    CN_SMP__UNWIND_CHECK,         /* CFI first, and each CFI result compared with libunwind */
} cn_smp__unwind_how;

typedef struct cn_smp__unwind_stats {
    uint64_t cfi;                   /* samples unwound wholly through compiled CFI */
    uint64_t libunwind;             /* samples unwound with libunwind */
    uint64_t why[CN_SMP_FB__COUNT]; /* of those, by the compiled walk's cause */
    uint64_t checked;               /* CHECK: CFI results compared */
    uint64_t mismatches;            /* CHECK: of those, different from libunwind's */
} cn_smp__unwind_stats;

cn_smp__unwinder *cn_smp__unwinder_new(cn_smp__unwind_how how);
cn_smp__unwinder *cn_smp__unwinder_free(cn_smp__unwinder *u);

/* Compiled CFI (cfi.c): the fast path of DWARF unwinding. An object's rules are read with
 * libdw from .eh_frame (else .debug_frame) on first use of an address and kept in a sorted
 * range table on the object. The shapes compilers and the C library emit compile (cfi.c's
 * opening comment); anything else makes the whole sample go to libunwind. */
typedef struct cn_smp__cfi cn_smp__cfi;

/* A failed read this far above the stack copy means the copy was too short. */
#define CN_SMP__STACK_GUESS (8u << 20)

/* Frees an object's compiled rules; accepts NULL. */
void cn_smp__cfi_free(cn_smp__cfi *c);
/* Bytes the compiled rules hold (0 for NULL). */
uint64_t cn_smp__cfi_bytes(const cn_smp__cfi *c);

/* Whether ELF virtual address vaddr of e lies in its entry-point code that no CFI
 * describes (the dynamic loader's _start): a frame there is the process's first, where
 * its stack begins (cfi.c, struct cn_smp__cfi). */
bool cn_smp__entry_code(cn_smp__elf *e, uint64_t vaddr);
/* Whether vaddr (an ELF virtual address of e) is in x86-64 crti code without CFI that
 * compiled CFI unwinds by its known shape (cfi.c, init_code); libunwind cannot. */
bool cn_smp__init_code(cn_smp__elf *e, uint64_t vaddr);

/* Unwinds the user part of a sample of architecture arch through compiled CFI. Returns the
 * number of return addresses written to pcs (leaf first, raw) with *stop, or -EAGAIN when
 * a frame needs the general unwinder (nothing usable is written then).
 *
 * fw non-NULL (auto): a frame above the leaf whose code is in an object built with frame
 * pointers (cn_smp__elf.has_fp, where arch->fp_gives_sp) is stepped through its frame
 * pointer instead, without looking up its rule. The leaf, frames of other objects and
 * implausible frame pointers take CFI steps: the walk gives the same frames as CFI alone
 * (docs/perf-sampler.md). Where the copy ends inside frame-pointer code, the kernel's
 * chain (fw->chain) finishes the stack. */
typedef struct cn_smp__fpwalk {
    /* The kernel's user callchain (chain[0]: the sampled pc), read from the record only
     * when a join needs it (its cache lines are cold: docs/perf-sampler.md): nchain < 0
     * until then, when chain (room for CN_SMP_MAX_FRAMES) receives the record's user
     * entries from index chain_from on (cn_smp__user_chain). */
    uint64_t *chain;
    int nchain;
    uint64_t chain_from;
    /* A small copy (adapt.c): at the first frame above the leaf in frame-pointer code,
     * the kernel's chain is joined at once rather than after walking the copy (the same
     * frames: both follow the frame pointers; the chain's are a few cache lines, the
     * copy's one per frame). */
    bool chain_first;
    bool early_join;   /* out: the chain was joined that way (before the copy's end) */
    uint64_t fp_steps; /* out (added to): frames stepped by frame pointer */
    int joined_at;     /* out: frames before chain's were appended; -1 when none were */
} cn_smp__fpwalk;
/* The user entries of r's callchain from index from on (context markers skipped, stopping
 * at a context other than user), at most max, into out. Returns the count. */
int cn_smp__user_chain(const cn_smp__rec *r, uint64_t from, uint64_t *out, int max);
/* Whether sample r's sampled frame is a new thread's first instruction (glibc's clone3 and
 * clone: no CFI right after the system call, which returned 0): the thread's first frame,
 * as the entry code is a process's (cfi.c). */
bool cn_smp__thread_start(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r);
/* why (may be NULL): set to the cause when the result is -EAGAIN. */
int cn_smp__unwind_cfi(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t *pcs, int max, cn_smp__fpwalk *fw, cn_smp_stop *stop,
                       cn_smp_fallback *why);

/* The slots of the leaf frame of sample r that its CFI places below the sampled stack
 * pointer (registers an epilogue popped, cfi.c's step()): up to 3 addresses and, for
 * each, the value it held (the sampled register). Returns how many; 0 when the leaf's rule
 * does not compile. For libunwind, whose reads of the stack stop at the copy. */
int cn_smp__cfi_popped(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t addr[3], uint64_t val[3]);

/* Unwinds the user part of a sample from its registers and stack copy (compiled CFI, then
 * libunwind, as u was created), writing up to max return addresses (leaf first, raw: not
 * yet adjusted) into pcs. Returns the count (>= 0) and *stop. fw: as for
 * cn_smp__unwind_cfi (auto), else NULL. */
int cn_smp__unwind_dwarf(cn_smp__unwinder *u, const cn_smp__proc *p, const cn_smp__rec *r,
                         uint64_t *pcs, int max, cn_smp__fpwalk *fw, cn_smp_stop *stop);
void cn_smp__unwinder_stats(const cn_smp__unwinder *u, cn_smp__unwind_stats *out);

/* ---------------------------------------------------------------------------------------
 * The session (session.c), shared with procs.c, perf_open.c and ring.c
 */
#define CN_SMP__PROC_BUCKETS   1024 /* hash chains of processes, by pid */
#define CN_SMP__CGROUP_IDS_MAX 4096 /* cgroup ids remembered with their paths */
#define CN_SMP__MAX_RINGS      1024 /* CPUs (one ring each) */

/* One CPU's ring: perf_open.c opens the event that owns it, ring.c maps and reads it. */
typedef struct cn_smp__ring {
    int fd, cpu;
    uint8_t *base; /* metadata page, then data_size bytes of data (a power of two) */
    size_t data_size, map_len;
    uint8_t *wrap; /* a record that wraps the ring's end, made contiguous (64 KiB, owned) */
    bool hup;      /* poll reported POLLHUP/POLLERR: polled by time from then on */
} cn_smp__ring;

/* A set of tids (procs.c): open addressing, 0 = empty, -1 = tombstone; cap is 0 or a power
 * of two, and used (live + tombstones) stays at most cap / 2. */
typedef struct cn_smp__tidset {
    int32_t *slots;
    size_t cap, used, live;
} cn_smp__tidset;

/* A record copied out of its ring to wait for the next read (ring.c). */
typedef struct cn_smp__held {
    uint64_t time, seq; /* seq: arrival order, the tie-break between equal times */
    size_t off;         /* in the session's arena */
    uint32_t len;
} cn_smp__held;

/* The held records, v[0, n), and the merge's spare (tmp, kept between reads). */
typedef struct cn_smp__held_queue {
    cn_smp__held *v, *tmp;
    size_t n, cap, tmp_cap;
} cn_smp__held_queue;

/* Sorts q->v by (time, seq), given that it is nruns sorted runs starting at runs[0] = 0 <
 * runs[1] < ... < q->n (runs is overwritten). Never fails: without memory for the spare it
 * sorts in place. */
void cn_smp__held_sort(cn_smp__held_queue *q, size_t *runs, size_t nruns);

struct cn_smp_session {
    cn_smp_config cfg;
    char *event_req;   /* owned copy of cfg.event; NULL for auto */
    char *cgroup_path; /* owned copy of cfg.cgroup */
    int cgroup_fd;     /* its directory while the events are open (perf's cgroup mode), or -1 */
    cn_smp_callbacks cb;
    void *arg;
    const cn_smp__arch *arch;

    /* What we ask the kernel for (perf_open.c). */
    char event_name[32];
    uint32_t perf_type;
    uint64_t perf_config;
    cn_smp__layout lay;
    bool kernel, want_callchain, want_stack;
    /* read_format PERF_FORMAT_LOST (Linux >= 6.0; dropped where the kernel refuses it):
     * a read() of any event fd then gives the records the kernel dropped for that event,
     * the count its LOST records carry, so that another process holding a copy of the
     * fds can check cnt.lost against the kernel (tests/integration/test_daemon_churn.sh).
     * The sampler itself never reads the fds. */
    bool read_lost;
    /* PERF_SAMPLE_CGROUP (Linux >= 5.7; dropped where the kernel refuses it): each sample
     * carries its task's cgroup id, so a process's cgroup is read from /proc only when its
     * id is new to the session (procs.c), not at every exec of a build's programs. */
    bool cgroup_ids;
    uint32_t stack_copy, ring_pages;
    /* auto's adaptive copy decided that the copy alone finishes every stack (adapt.c): the
     * events ask for no user frame-pointer chain (exclude_callchain_user), whose walk in
     * the sampling interrupt costs the target as much as a 1 KiB copy. */
    bool user_chain_off;
    int pidfd; /* the PID target held from _start to the re-check (-1: none) */
    int *fds;  /* every perf fd, rings' included */
    size_t nfds, capfds;

    /* Rings and held records (ring.c). */
    cn_smp__ring *rings;
    size_t nrings;
    int *ring_fds;                  /* rings[i].fd, for cn_smp_session_fds() */
    struct cn_smp__cursor *cursors; /* one per ring, for the merge */
    uint8_t *arena, *arena2;        /* held records' bytes; arena2 is the spare */
    size_t arena_len, arena_cap, arena2_cap;
    cn_smp__held_queue held; /* held records, sorted by (time, seq) after a read */
    size_t *runs;            /* nrings + 1 run starts, for the merge */
    uint64_t seq;

    /* Tasks, address spaces and objects (procs.c). */
    cn_smp__tidset attached; /* tids with events of their own */
    cn_smp__tidset seen;     /* tids whose comm was reported */
    cn_smp__tidset live;     /* PID target: tasks not yet exited */
    cn_smp__proc *procs[CN_SMP__PROC_BUCKETS];
    /* Cgroup ids the samples carried, with the path of each one's directory in the v2
     * hierarchy (opened by its file handle; NULL: none found), at most
     * CN_SMP__CGROUP_IDS_MAX (procs.c). cg_root and cg_root_fd: the hierarchy's mount
     * point and a descriptor of it (-1: none), looked up at first use (cg_root_done). */
    cn_u64map cg_ids; /* id -> index into cg_paths */
    char **cg_paths;
    size_t ncg, capcg;
    char cg_root[256];
    int cg_root_fd;
    bool cg_root_done;
    /* Objects by key: the XXH3 of its key -> the first object's id of that hash, the others
     * chained by obj_next (by id, -1 ends); it grows with the objects, which a session never
     * forgets (~115 in a system session over a build of this project: 3 000 processes).
     * Every mapping of a new process is looked up here. */
    cn_u64map objmap;
    int32_t *obj_next;
    size_t cap_obj_next;
    cn_smp__obj **objs; /* by id: objs[i]->pub.id == i */
    size_t nobjs, capobjs;
    cn_smp__obj *kernel_obj, *module_obj, *unknown_obj;
    cn_smp_cache *cache;     /* cfg.cache, or own_cache */
    cn_smp_cache *own_cache; /* without cfg.cache: the session's own, freed with it */
    struct cn_smp__module *modules;
    size_t nmodules;
    struct cn_smp__snap *snap; /* SYSTEM: address spaces at the start, by pid */
    size_t nsnap, capsnap;

    /* Dispatch (session.c). */
    cn_smp_counters cnt;
    cn_smp__unwinder *unw;
    cn_smp_frame frames[CN_SMP_MAX_FRAMES + 2]; /* the sample being delivered */
    uint64_t pcs[CN_SMP_MAX_FRAMES];            /* its raw user addresses */
    uint64_t kpcs[CN_SMP_MAX_FRAMES];           /* auto: the kernel's user chain, kept */
    bool started, stopped, had_live;
    bool replay;     /* cn_smp_session_replay: fed records' files are opened */
    bool vdso_tried; /* the [vdso] object's image was looked for */

    /* Off-CPU intervals (offcpu.c); NULL in CPU mode. */
    struct cn_smp__offcpu *off;
    /* auto's adaptive stack copy (adapt.c); NULL when the copy is fixed. */
    struct cn_smp__adapt *ad;
    /* Python frames (python.c); NULL with no_python. py_state: cn_smp_session_python(). */
    struct cn_smp__py *py;
    char py_state[240];
};

/* How long ring.c holds records back so that another CPU's cannot overtake them. */
#define CN_SMP__HOLD_NS 5000000ULL

/* offcpu.c: OFFCPU/WALL state, created by cn_smp_session_new. Returns 0 or -ENOMEM. */
int cn_smp__offcpu_new(cn_smp_session *s);
void cn_smp__offcpu_free(cn_smp_session *s);
/* offcpu.c: turns a (filled as for the CPU event) into the context-switch event: every
 * switch sampled (period 1) with the session's sample layout, plus PERF_RECORD_SWITCH
 * records for the switch-ins. sideband false: no task and mmap records (WALL: the CPU
 * event has them). */
struct perf_event_attr;
void cn_smp__offcpu_attr(const cn_smp_session *s, struct perf_event_attr *a, bool sideband);
/* offcpu.c: WALL: remembers the id (PERF_EVENT_IOC_ID) of a context-switch event. */
int cn_smp__offcpu_add_id(cn_smp_session *s, uint64_t id);
/* offcpu.c: whether sample r is a context switch (a thread going off CPU). */
bool cn_smp__offcpu_is_switch(const cn_smp_session *s, const cn_smp__rec *r);
/* offcpu.c: a context-switch sample whose frames are s->frames[0..n): kept as the
 * thread's stack until its switch-in. */
void cn_smp__offcpu_out(cn_smp_session *s, const cn_smp__rec *r, uint32_t n, uint32_t nk,
                        cn_smp_stop stop);
/* offcpu.c: a thread seen running at time t (a switch-in record, or a CPU sample): closes
 * its interval, if any. */
void cn_smp__offcpu_in(cn_smp_session *s, pid_t tid, uint64_t t, bool from_switch);
/* A thread found already off CPU (waiting.c), r a record made for it: opens its interval at
 * r->time with the stack s->frames[0, n), read from seen_at on, unless one is open (counted:
 * offcpu_waiting). A switch of the thread older than seen_at closes it without delivering
 * it (counted unmatched instead): the thread ran after r->time, the stack is of a later wait. */
void cn_smp__offcpu_seed(cn_smp_session *s, const cn_smp__rec *r, uint32_t n, uint32_t nk,
                         cn_smp_stop stop, uint64_t seen_at);
/* The threads of pid with an open interval (at most max), for waiting.c. */
size_t cn_smp__offcpu_waiters(const cn_smp_session *s, pid_t pid, pid_t *tids, size_t max);
/* Gives tid's open interval the user stack s->frames[nk, n) (read again, with Python frames
 * now) when its innermost user frame is the one it blocked in. true if replaced. */
bool cn_smp__offcpu_restack(cn_smp_session *s, pid_t tid, uint32_t n, uint32_t nk,
                            cn_smp_stop stop);

/* offcpu.c: SWITCH / SWITCH_CPU_WIDE records. */
void cn_smp__offcpu_switch(cn_smp_session *s, const cn_smp__rec *r);
/* offcpu.c: task events: a new thread (forgets that tid exited), an exited thread. */
void cn_smp__offcpu_fork(cn_smp_session *s, pid_t tid);
void cn_smp__offcpu_exit(cn_smp_session *s, pid_t tid, uint64_t t);
/* offcpu.c: WALL: the time a CPU sample stands for, in ns. */
uint64_t cn_smp__offcpu_cpu_weight(const cn_smp_session *s, const cn_smp__rec *r);

/* ring.c: a record read from a ring, to the caller's tap (cn_smp_callbacks.record). */
static inline void cn_smp__tap(cn_smp_session *s, const uint8_t *rec, size_t len)
{
    if (s->cb.record)
        s->cb.record(s->arg, rec, len);
}
/* session.c: hands a parsed record (parse_ret 0) to its handler; counts malformed ones
 * (any other parse_ret but -ENOTSUP, a type we do not use). */
void cn_smp__dispatch(cn_smp_session *s, int parse_ret, const cn_smp__rec *r);
/* session.c: a task event to the callback (comm valid during the call). */
/* Reports p's cgroup (CN_SMP_TASK_CGROUP) when it changed: with the sample's cgroup id
 * (id, 0 without), when the id is not the one p's path is known for; without, when it is
 * not known or was read more than 10 s of sample time before time (procs.c). */
void cn_smp__proc_cgroup(cn_smp_session *s, cn_smp__proc *p, uint64_t time, uint64_t id);
void cn_smp__emit_task(cn_smp_session *s, cn_smp_task_kind kind, pid_t pid, pid_t tid, pid_t ppid,
                       pid_t ptid, uint64_t time, const char *comm, bool exec);

/* adapt.c: auto's adaptive stack copy (docs/perf-sampler.md). _new sets s->ad when the
 * session may adapt (auto, CPU mode, no stack_size asked): 0 or -ENOMEM. */
typedef struct cn_smp__adapt cn_smp__adapt;
int cn_smp__adapt_new(cn_smp_session *s);
void cn_smp__adapt_free(cn_smp_session *s);
/* adapt.c: whether sample r carries the small copy (its walk joins the chain first). */
bool cn_smp__adapt_small(const cn_smp_session *s, const cn_smp__rec *r);
/* adapt.c: whether sample r comes from events replaced by a reopen after the new ones ran
 * (a twin of one of theirs): dropped, counted. */
bool cn_smp__adapt_drop(cn_smp_session *s, const cn_smp__rec *r);
/* adapt.c: after auto's walk of r into s->pcs[0..*n) with *stop (joined_at: where the
 * kernel's chain was appended, or -1; chain_from: r's user chain's index): a small copy's
 * stack gets its learned tail or is marked cut short; a full copy's teaches and is compared
 * with what the small copy would give. May decide a reopen. */
void cn_smp__adapt_sample(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r,
                          uint64_t chain_from, int *n, cn_smp_stop *stop, int joined_at);
/* adapt.c: a process's address space changed (exec) or ended: its tails are never used
 * again; a new process (fork) starts with its parent's. */
void cn_smp__adapt_forget(cn_smp_session *s, pid_t pid);
void cn_smp__adapt_fork(cn_smp_session *s, pid_t ppid, pid_t pid);
/* adapt.c: does the reopen decided while dispatching (called between drains). */
void cn_smp__adapt_apply(cn_smp_session *s);

/* python.c: Python frames (docs/python.md, "Phase 2"). _start, before the events are
 * opened: loads the program (a failure only turns Python frames off, with the reason);
 * -ENOMEM. _attach: after each perf_event_open. _free: after the events are closed. */
typedef struct cn_smp__py cn_smp__py;
int cn_smp__py_start(cn_smp_session *s);
void cn_smp__py_attach(cn_smp_session *s, int fd);
/* python.c: once per read (session.c): interp's code-object caches, and the frames named
 * from them, are checked again before their next use (a code object freed, another at its
 * address). */
void cn_smp__py_epoch(cn_smp_session *s);
void cn_smp__py_stop(cn_smp_session *s); /* after the events are closed: the context goes */
void cn_smp__py_free(cn_smp_session *s);
/* python.c: registering: p mapped the object at path (MMAP2); p's mappings as loaded, or
 * as the text of its exec lines of /proc/PID/maps (a system session's snapshot), for a
 * process that already ran; a fork of a registered process; an exec or exit (unregisters). */
void cn_smp__py_mapped(cn_smp_session *s, cn_smp__proc *p, const char *path);
void cn_smp__py_scan(cn_smp_session *s, cn_smp__proc *p);
void cn_smp__py_scan_text(cn_smp_session *s, cn_smp__proc *p, const char *maps);
void cn_smp__py_fork(cn_smp_session *s, const cn_smp__proc *parent, cn_smp__proc *child);
void cn_smp__py_forget(cn_smp_session *s, cn_smp__proc *p);
/* python.c: whether samples of p are joined with interpreter records, and the join and
 * splice itself (python.c's comment): the user frames s->pcs[0, nuser) into s->frames from
 * *n, through add_user for the native ones. false: no record, nothing written. */
typedef void (*cn_smp__add_user_fn)(cn_smp_session *s, const cn_smp__proc *p, uint32_t *n,
                                    uint64_t addr, const cn_smp__map **last);
bool cn_smp__py_wanted(const cn_smp_session *s, const cn_smp__proc *p);
/* Queues thread tid's Python frames read now from user space as the record of a sample at
 * time (waiting.c): 0, or a negative errno (not registered, a version before 3.11). */
int cn_smp__py_capture(cn_smp_session *s, const cn_smp__proc *p, pid_t tid, uint64_t time);
/* The frames of sample r into s->frames (kernel, then user, Python frames spliced): the count,
 * *nk the kernel ones, *stop why the user part ended. synthetic: a record waiting.c made from
 * a waiting thread's registers, unwound by CFI (dwarf) whatever the mode, never teaching
 * auto's adaptive copy. session.c. */
uint32_t cn_smp__sample_frames(cn_smp_session *s, cn_smp__proc *p, const cn_smp__rec *r,
                               bool synthetic, uint32_t *nk, cn_smp_stop *stop);
/* Threads already off CPU (waiting.c, OFFCPU and WALL sessions): at an attach, every thread
 * of pid that waits gets an interval from time t with its stack read from /proc and its
 * memory; at a system session's start, those of the CPython processes it registered (a
 * thousand threads in all); at a CPython registration (python.c), the waiting threads of p
 * get their stack again, with Python frames. */
void cn_smp__waiting_attach(cn_smp_session *s, pid_t pid, uint64_t t);
void cn_smp__waiting_system(cn_smp_session *s, uint64_t t);
void cn_smp__waiting_python(cn_smp_session *s, cn_smp__proc *p);
/* One thread of p, whose switch-out sample predates p's registration: as waiting_python. */
void cn_smp__waiting_restack(cn_smp_session *s, cn_smp__proc *p, pid_t tid);

bool cn_smp__py_splice(cn_smp_session *s, const cn_smp__proc *p, const cn_smp__rec *r, int nuser,
                       uint32_t *n, cn_smp__add_user_fn add_user, const cn_smp__map **last);
/* python.c, the splice's plan (pure). Cuts a record's nf frames (innermost first) into the
 * Python frames of one eval-loop call each, by their entry flags (frames past the last
 * flagged one: one more segment): seg_end[k] is one past segment k's outermost frame.
 * Returns the count. */
uint32_t cn_smp__py_segments(const cn_int_frame *f, uint32_t nf, uint32_t *seg_end);
/* python.c: the stack, leaf first, from nuser native frames (kind[i]: frame i is in the
 * eval loop, the -X perf trampoline just outward of an eval frame, or another) and nseg
 * segments: steps[k] >= 0 native frame steps[k], < 0 segment -steps[k] - 1. Eval frames and
 * segments pair from the innermost; a replaced eval frame's trampoline goes with it; extra
 * outer eval frames stay native, extra outer segments go above the outermost native frame.
 * whole: the segments are the thread's whole chain (a record walked to its end, of the main
 * interpreter): extra eval frames are then the innermost ones, which stay native (a call
 * entering or leaving the eval loop, its frames not or no longer in the chain).
 * Returns the count (at most nuser + nseg) and *matched (as many eval frames as segments). */
enum { CN_SMP__PY_NATIVE = 0, CN_SMP__PY_EVAL, CN_SMP__PY_TRAMPOLINE };
uint32_t cn_smp__py_plan(const uint8_t *kind, int nuser, uint32_t nseg, bool whole, int32_t *steps,
                         bool *matched);
/* procs.c: the object of the Python source file at path ("" when unknown), created on
 * first use. NULL on ENOMEM. */
cn_smp__obj *cn_smp__obj_python(cn_smp_session *s, const char *path);

/* procs.c: tid sets. _add returns 1 when added, 0 when present (or tid <= 0), -ENOMEM. */
bool cn_smp__tidset_has(const cn_smp__tidset *t, int32_t tid);
int cn_smp__tidset_add(cn_smp__tidset *t, int32_t tid);
bool cn_smp__tidset_del(cn_smp__tidset *t, int32_t tid);
/* procs.c: a special object ("[kernel]", "[jit:PID]", ...) by key, created (and announced)
 * on first use; owned by the session. NULL on allocation failure. */
cn_smp__obj *cn_smp__obj_special(cn_smp_session *s, const char *key, const char *name,
                                 cn_smp_obj_kind kind, pid_t pid);
/* procs.c: the process of a sample, created with its /proc/PID/maps on first use (NULL on
 * allocation failure). */
cn_smp__proc *cn_smp__proc_for_sample(cn_smp_session *s, pid_t pid);
/* procs.c: address-space changes from MMAP/MMAP2 (exec mappings), exec (COMM_EXEC of the
 * main thread: emptied, MMAP2 records follow) and fork of a new process (a copy of the
 * parent's); the process's end (SYSTEM target: forgotten). */
void cn_smp__proc_mmap(cn_smp_session *s, const cn_smp__rec *r);
void cn_smp__proc_exec(cn_smp_session *s, pid_t pid);
void cn_smp__proc_fork(cn_smp_session *s, pid_t ppid, pid_t pid);
void cn_smp__proc_drop(cn_smp_session *s, pid_t pid);
/* procs.c: reports a thread's name from /proc the first time it is met without a COMM
 * record. */
void cn_smp__ensure_comm(cn_smp_session *s, pid_t pid, pid_t tid, uint64_t time);
/* procs.c: PID target, once its threads are attached: its address space from
 * /proc/PID/maps and its threads' names. */
void cn_smp__procs_attach(cn_smp_session *s);
/* procs.c: SYSTEM target, once its events are enabled: every process's exec mappings now
 * (text of /proc/PID/maps, parsed when the process is first met: its first sample, MMAP2
 * or fork), so that an address space is the one at the start brought up to date by the
 * records since (as perf synthesizes it), never /proc/PID/maps read when a record is
 * handled: records wait in the rings, and by then a short-lived process has often exec'd
 * or exited (docs/perf-sampler.md, "Whole-system sessions"). */
void cn_smp__procs_snapshot(cn_smp_session *s);
/* procs.c: the kernel's modules' ranges from /proc/modules (once, at start). */
void cn_smp__load_modules(cn_smp_session *s);
/* procs.c: [module] for an address inside a kernel module, else [kernel]. */
const cn_smp_object *cn_smp__kernel_obj(const cn_smp_session *s, uint64_t addr);
/* procs.c: frees the processes, objects, modules and tid sets (session teardown). */
void cn_smp__procs_free(cn_smp_session *s);

/* perf_open.c: the sample layout (and stack copy size) for the unwind mode and s->kernel. */
void cn_smp__compute_layout(cn_smp_session *s);
/* perf_open.c: picks the event, opens every event (per CPU, or per thread and CPU) into
 * its CPU's ring, disabled. Returns 0 or a negative errno with err filled. */
int cn_smp__perf_open(cn_smp_session *s, cn_err *err);
/* perf_open.c: enables every event (unless the kernel does it at exec). */
int cn_smp__perf_enable(cn_smp_session *s, cn_err *err);
/* The re-check of cfg.image and cfg.may_profile before enabling (perf_open.c): whether it
 * applies, the pidfd taken first (s->pidfd), and the check itself. 0 or -errno with err. */
bool cn_smp__recheck_wanted(const cn_smp_session *s);
int cn_smp__pidfd_open(cn_smp_session *s, cn_err *err);
int cn_smp__recheck(cn_smp_session *s, cn_err *err);
void cn_smp__perf_disable(cn_smp_session *s);
/* perf_open.c: CPU mode: reopens the events with a stack copy of copy bytes and, unless
 * user_chain, no user frame-pointer chain (auto's adaptive copy, adapt.c) into the same
 * rings, with no gap: the new events (PID target: on every task known alive and every
 * listed thread, inherited) are enabled before the old ones are disabled and closed (the
 * rings' owners stay open, disabled). Sets stack_copy, user_chain_off and *t_enabled
 * (CLOCK_MONOTONIC, once every new event runs). Returns 0, or a negative errno with
 * nothing changed. */
int cn_smp__perf_reopen(cn_smp_session *s, uint32_t copy, bool user_chain, uint64_t *t_enabled);
/* perf_open.c: closes every perf fd. */
void cn_smp__perf_close(cn_smp_session *s);

/* ring.c: one unmapped ring per CPU (fd -1). Returns 0 or -ENOMEM. */
int cn_smp__rings_new(cn_smp_session *s, const int *cpus, int ncpu);
/* ring.c: maps rg's ring from its owner fd (ring_pages data pages, halved while the kernel
 * refuses for lack of locked memory); rg->fd is the caller's to set. Returns 0 or negative
 * errno. */
int cn_smp__ring_map(cn_smp_session *s, cn_smp__ring *rg, int fd);
/* ring.c: undoes cn_smp__ring_map (rg's fd stays the caller's). */
void cn_smp__ring_unmap(cn_smp__ring *rg);
/* ring.c: after opening: drops the rings whose CPU could not be opened and allocates the
 * merge's cursors. Returns 0 or -ENOMEM. */
int cn_smp__rings_ready(cn_smp_session *s);
/* ring.c: delivers, in time order, what the rings and the held queue hold: everything
 * when all, else what is old enough (HOLD_NS) to be overtaken by nothing. Returns the
 * samples delivered or -ENOMEM. */
int cn_smp__drain(cn_smp_session *s, bool all);
/* ring.c: unmaps the rings and frees the held records (at stop; accepts none). */
void cn_smp__rings_free(cn_smp_session *s);

#endif /* CN_SMP_INTERNAL_H */
