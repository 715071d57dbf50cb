/* smp_internal.h — helpers shared between sampler/'s files (cn_smp__ prefix). Not part of
 * the public API (cn_smp.h); tests and fuzz targets include it to reach the parsers.
 *
 * Layers, bottom up:
 *   arch_*.c    register sets, DWARF numbering, return-address masking, prologue test
 *   records.c   perf record parsing (pure: bytes in, struct out, never trusts sizes)
 *   maps.c      /proc/PID/maps parsing, objects (build-id, file image), address spaces
 *   unwind.c    libunwind over a copied stack; CFI leaf fix-up; frame-pointer detection
 *   session.c   perf_event setup, rings, ordering, dispatch to callbacks
 *   spawn.c     held child for `canopy run`
 */
#ifndef CN_SMP_INTERNAL_H
#define CN_SMP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
            uint64_t ip, period;
            uint64_t nr;           /* callchain entries */
            const uint64_t *chain; /* unaligned-safe: read with memcpy */
            uint64_t abi;          /* PERF_SAMPLE_REGS_ABI_* (0 = none) */
            const uint8_t *regs;   /* nregs u64, unaligned */
            uint32_t nregs;
            const uint8_t *stack; /* user stack copy */
            uint64_t stack_size;  /* bytes valid in stack (dyn_size) */
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
 * Maps, objects and address spaces (maps.c)
 */
typedef struct cn_smp__maps_line {
    uint64_t start, end, pgoff;
    uint32_t maj, min;
    uint64_t ino;
    bool exec, deleted;
    const char *path; /* points into the caller's line buffer; "" when anonymous */
} cn_smp__maps_line;

/* Parses one line of /proc/PID/maps (modified in place: the path is NUL-terminated and
 * " (deleted)" stripped). Returns 0 or -EINVAL. */
int cn_smp__maps_parse_line(char *line, cn_smp__maps_line *out);

/* An object's in-memory file image and the facts unwinding needs (lazy, cached). */
typedef struct cn_smp__elf {
    bool tried, ok;
    const uint8_t *data; /* private mmap of the file, or a heap copy when heap */
    size_t size;
    bool heap;
    /* PT_LOAD segments */
    uint32_t nload;
    struct {
        uint64_t vaddr, offset, filesz, memsz;
        bool exec;
    } load[16];
    uint64_t eh_frame_hdr_vaddr; /* 0 when none */
    uint64_t eh_frame_hdr_size;
    uint64_t debug_frame_off, debug_frame_size; /* .debug_frame in the file, 0 when none */
    int has_fp;                                 /* 1 yes, 0 no, -1 unknown */
    uint32_t fp_tested, fp_found; /* functions sampled, with a frame-pointer prologue */
    struct cn_smp__cfi *cfi;      /* compiled unwind rules (cfi.c), owned; NULL until used */
} cn_smp__elf;

typedef struct cn_smp__obj {
    cn_smp_object pub;
    /* keys */
    uint32_t maj, min;
    uint64_t ino;
    char *key;       /* lookup key: "maj:min:ino:path" or special */
    char *open_path; /* path we can open now (may differ from pub.path), or NULL */
    cn_smp__elf elf;
} cn_smp__obj;

typedef struct cn_smp__map {
    uint64_t start, end, pgoff;
    cn_smp__obj *obj;
} cn_smp__map;

typedef struct cn_smp__proc {
    pid_t pid;
    bool maps_loaded, exited;
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

/* Loads the ELF facts of an object (once). Returns 0 when usable, negative errno else. */
int cn_smp__elf_load(cn_smp__obj *o);
/* Loads them from a copy of an in-memory image instead (the vDSO, which has no file).
 * Returns 0 or negative errno. */
int cn_smp__elf_load_image(cn_smp__obj *o, const void *image, size_t size);
void cn_smp__elf_unload(cn_smp__elf *e);
/* Load bias of an object mapped at (start, pgoff): process address = bias + ELF vaddr. */
bool cn_smp__elf_bias(const cn_smp__elf *e, uint64_t start, uint64_t pgoff, uint64_t *bias);
/* Reads n bytes at ELF virtual address vaddr from the file image. Returns 0 or -EFAULT. */
int cn_smp__elf_read(const cn_smp__elf *e, uint64_t vaddr, void *out, size_t n);
/* Reads the GNU build-id note of an ELF image into hex (2*20+1 bytes at most used).
 * Returns 0 or -ENOENT. */
int cn_smp__elf_build_id(const uint8_t *data, size_t size, char *hex, size_t hexlen);

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
    uint64_t cfi;        /* samples unwound wholly through compiled CFI */
    uint64_t libunwind;  /* samples unwound with libunwind */
    uint64_t checked;    /* CHECK: CFI results compared */
    uint64_t mismatches; /* CHECK: of those, different from libunwind's */
} cn_smp__unwind_stats;

cn_smp__unwinder *cn_smp__unwinder_new(cn_smp__unwind_how how);
cn_smp__unwinder *cn_smp__unwinder_free(cn_smp__unwinder *u);

/* Compiled CFI (cfi.c): the fast path of DWARF unwinding. An object's rules are read with
 * libdw from .eh_frame (else .debug_frame) on first use of an address and kept in a sorted
 * range table on the object. Only simple rules compile (CFA = SP or FP + offset; return
 * address and frame pointer saved at CFA + offset, unchanged, or undefined); anything
 * else makes the whole sample go to libunwind. */
typedef struct cn_smp__cfi cn_smp__cfi;

/* A failed read this far above the stack copy means the copy was too short. */
#define CN_SMP__STACK_GUESS (8u << 20)

/* Frees an object's compiled rules; accepts NULL. */
void cn_smp__cfi_free(cn_smp__cfi *c);

/* Unwinds the user part of a sample of architecture arch through compiled CFI. Returns the
 * number of return addresses written to pcs (leaf first, raw) with *stop, or -EAGAIN when
 * a frame needs the general unwinder (nothing usable is written then). */
int cn_smp__unwind_cfi(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t *pcs, int max, cn_smp_stop *stop);

/* Unwinds the user part of a sample from its registers and stack copy (compiled CFI, then
 * libunwind, as u was created), writing up to max return addresses (leaf first, raw: not
 * yet adjusted) into pcs. Returns the count (>= 0) and *stop. */
int cn_smp__unwind_dwarf(cn_smp__unwinder *u, const cn_smp__proc *p, const cn_smp__rec *r,
                         uint64_t *pcs, int max, cn_smp_stop *stop);
void cn_smp__unwinder_stats(const cn_smp__unwinder *u, cn_smp__unwind_stats *out);

#endif /* CN_SMP_INTERNAL_H */
