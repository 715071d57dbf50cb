/* cfi.c — the fast path of DWARF unwinding: call-frame rules read with libdw from an
 * object's .eh_frame (else .debug_frame), compiled on first use of an address into a
 * sorted range table kept on the object, so that unwinding one frame is a table lookup
 * and one or two reads from the sample's stack copy.
 *
 * libunwind (unwind.c) stays the general unwinder. Here the shapes compilers and the C
 * library emit are compiled: CFA = SP, FP or the tracked callee-saved register (x86-64
 * %rbx: ld.so's lazy-binding trampoline) + offset, or any register the sample carries in
 * the sampled frame; binutils' lazy PLT CFA expression, matched op by op; the return
 * address, the frame pointer and the tracked register saved at CFA + offset, unchanged,
 * undefined (the outermost frame) or in a register (vfork); where the architecture
 * describes it (x86-64), a signal frame, whose caller's registers are read from the
 * ucontext; the instructions after clone3's system call in the child (no CFI) as its
 * first frame; and glibc's x86-64 .init/.fini code (crti, no CFI) by its known shape. Another DWARF
 * expression, a register not known at its frame, an address without CFI or a stack that does not
 * grow the expected way returns -EAGAIN with the cause, and the caller hands the whole sample to
 * libunwind: both give the same frames (tests/unit/test_sampler.c checks that sample by sample,
 * test_cfi_shapes.c each shape on hand-made stacks; docs/perf-sampler.md, "Compiled CFI: what falls
 * back"). auto also steps frames of frame-pointer objects by their frame pointer
 * (docs/perf-sampler.md). Rule tables are per object and so independent of the process, unlike
 * libunwind's per-address cache, which must be flushed when the process changes. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include "smp_internal.h"

/* Rules kept per object; beyond this, rules are compiled on every use (still correct). */
#define MAX_RULES (1u << 16)

/* Tracked registers: the stack pointer (the CFA becomes the caller's), the frame pointer,
 * the return-address column, and arch->dw_x (x86-64: %rbx, the base of ld.so's
 * lazy-binding trampoline's CFA). A frame's other registers are known only in the sampled
 * frame itself (the sample's registers). */
enum { SLOT_SP, SLOT_FP, SLOT_RA, SLOT_X, NSLOTS };

/* Bytes of a sample's stack copy prefetched before it is walked (cn_smp__unwind_cfi). */
#define PREFETCH_BYTES 4096

/* rule.cfa_slot beyond the tracked registers' slots (SLOT_SP, SLOT_FP, SLOT_X: the CFA is
 * that register + cfa_off): */
#define CFA_NONE   NSLOTS       /* not compilable: libunwind's; arg is the cn_smp_fallback */
#define CFA_SIGNAL (NSLOTS + 1) /* a signal frame: the caller's registers from the ucontext */
#define CFA_REG    (NSLOTS + 2) /* DWARF register arg + cfa_off: known in the sampled frame */
/* The CFA expression binutils writes for x86-64 lazy PLT entries (a known pattern: matched
 * op by op): SP + cfa_off + ((pc & arg) >= arg2 ? 8 : 0). An entry's `push` of the
 * relocation index moves the CFA 8 bytes from its offset arg2 on; .plt's entries have
 * arg 15, arg2 11 (jmp *GOT 6 bytes, push 5), IBT's .plt 15 and 10 or 9. */
#define CFA_PLT (NSLOTS + 3)

/* The longest entry-point code taken as a process's first frame (cn_smp__cfi.entry). */
#define ENTRY_MAX 256

/* glibc's x86-64 crti.o and crtn.o wrap each object's .init and .fini sections in
 *     [endbr64]  sub $N,%rsp  ...body: calls...  add $N,%rsp  ret
 * without CFI. Matched byte by byte (cn_smp__cfi.init): in [lo, body) and [body_end, hi)
 * the return address is at SP (CFA = SP + 8), in [body, body_end) N bytes above it. */
typedef struct init_code {
    uint64_t lo, body, body_end, hi; /* ELF virtual addresses; lo == hi: none */
    uint8_t frame;                   /* N */
} init_code;
#define INIT_CODE_MAX 64 /* longer .init/.fini code is not crti's shape */

typedef enum rule_kind {
    R_SAME = 0, /* unchanged from the callee */
    R_UNDEF,    /* not recoverable (for the return address: the outermost frame; for
                   SLOT_X also a rule that does not compile: unknown from there on) */
    R_AT_CFA,   /* saved in memory at CFA + off */
    R_VAL_CFA,  /* the value CFA + off */
    R_REG,      /* the value of DWARF register off in this frame (vfork keeps its return
                   address in %rdi across the system call) */
} rule_kind;

typedef struct rule {
    uint64_t start, end; /* ELF virtual addresses the rule covers: [start, end) */
    int64_t cfa_off;
    int32_t off[NSLOTS]; /* a register's offset from the CFA (R_AT_CFA, R_VAL_CFA) or its
                            DWARF number (R_REG) */
    uint8_t kind[NSLOTS];
    uint8_t cfa_slot;  /* SLOT_SP, SLOT_FP, SLOT_X or a CFA_* kind */
    uint8_t arg, arg2; /* CFA_REG, CFA_PLT, CFA_NONE: see there; arg2 of a CFA_NONE rule:
                          THREAD_GAP or 0 */
} rule;
_Static_assert(sizeof(rule) == 48, "small rules: the table and the hot cache hold copies");

/* A CFA_NONE rule's arg2: the address lies within THREAD_GAP_MAX bytes before code whose
 * CFI starts with the return address undefined (a thread's first frame). glibc's clone3 and
 * clone leave the instructions after their system call without CFI (parent and child run
 * them on different stacks); the new thread then runs into its first frame. */
#define THREAD_GAP     1
#define THREAD_GAP_MAX 16

/* A block of the sorted rule table (cn_smp__cfi.blocks). An insert moves at most one block's
 * rules: in one sorted array it moved half the table, and cc1's tens of thousands of rules
 * made that memmove 9% of canopyd's CPU during a build (docs/perf-sampler.md). A block
 * holds up to BLOCK_RULES (3 KiB of moves at most), its room growing from 4 by doubling, so
 * that the few rules of a small library take a few hundred bytes. */
#define BLOCK_RULES 64
typedef struct rule_block {
    uint32_t n, cap;
    rule r[];
} rule_block;

/* A block in the table's list, with the start of its first rule: the search over blocks
 * reads this array alone, not each block it passes. */
typedef struct block_ref {
    uint64_t lo;
    rule_block *k;
} block_ref;

/* A position in the table: rule i of block b. */
typedef struct table_pos {
    size_t b;
    uint32_t i;
} table_pos;

/* A direct-mapped cache of rule lookups by exact address, in front of the sorted table of
 * a large object: a process's samples return to the same call sites over and over, and
 * the table's binary search (16 levels for a compiler, a cache miss each) was the loop
 * thread's largest own cost during a build (docs/perf-daemon.md). A slot holds a copy of
 * the rule: rules are only ever added, never changed, so a copy never goes stale. */
#define HOT_SLOTS     256
#define HOT_MIN_RULES 64 /* smaller tables are searched as fast */

typedef struct hot_slot {
    uint64_t key; /* the address + 1; 0: empty */
    rule r;
} hot_slot;

struct cn_smp__cfi {
    const cn_smp__elf *owner; /* the object's tables, which own this */
    Elf *elf;                 /* over the object's file image (owned by the object) */
    Dwarf_CFI *eh;            /* from .eh_frame, or NULL */
    Dwarf *dbg;               /* for .debug_frame, or NULL */
    Dwarf_CFI *debug;         /* from .debug_frame, or NULL */
    uint16_t machine;         /* e_machine */
    /* [entry, entry_end): the code at the ELF entry point when no CFI describes it, up to
     * the next function with CFI (at most ENTRY_MAX bytes); empty otherwise. The kernel
     * starts a process there (in the dynamic loader, or in a static executable): a frame in
     * it is the stack's first, which nothing called. glibc's ld.so has no CFI for its
     * _start, so every sample of a process still in the loader (relocating a C++ program:
     * most of a short-lived cmake's or as's time) would otherwise end there "without
     * unwind info" (docs/perf-sampler.md, "Whole-system sessions"). */
    uint64_t entry, entry_end;
    /* The x86-64 .init and .fini code glibc's crti.o and crtn.o put in every object, which
     * has no CFI (init_code): a library's _init runs in ld.so's _dl_init before anything
     * else of it, and its first touch of the page is sampled there (cmake's 30-odd
     * libraries: 1-7% of a short run's samples ended there). Empty where not matched. */
    init_code init[2];
    /* The compiled rules, sorted by start and disjoint, in blocks (rule_block): every rule
     * of blocks[i] starts before every rule of blocks[i + 1], and no block is empty. */
    block_ref *blocks;
    size_t nblocks, capblocks;
    size_t n;             /* rules in all blocks */
    uint64_t block_bytes; /* the blocks' allocations, kept as they change (counted at every
                             release of the object, which a build does per process) */
    hot_slot *hot;        /* HOT_SLOTS, made once n reaches HOT_MIN_RULES; NULL before */
};

/* libdw's frame at addr in cfi (c->eh or c->debug): dwarf_cfi_addrframe, after the
 * image was given the .eh_frame entries it reads (image.c, "lazy"). */
static int frame_at(const cn_smp__cfi *c, Dwarf_CFI *cfi, uint64_t addr, Dwarf_Frame **f)
{
    if (!cfi)
        return -1;
    if (cfi == c->eh)
        cn_smp__elf_fill_fde(c->owner, addr);
    return dwarf_cfi_addrframe(cfi, addr, f);
}

static bool has_cfi(const cn_smp__cfi *c, Dwarf_CFI *cfi, uint64_t addr)
{
    Dwarf_Frame *f = NULL;
    if (frame_at(c, cfi, addr, &f) < 0)
        return false;
    free(f);
    return true;
}

/* The start of the first function with CFI in .eh_frame_hdr's table after addr, or
 * UINT64_MAX. */
static uint64_t next_fde(const cn_smp__elf *e, uint64_t addr)
{
    cn_obj_ehhdr h;
    const uint8_t *hdr = cn_smp__elf_ehhdr(e, &h);
    uint64_t i = hdr ? cn_smp__ehhdr_after(e, hdr, &h, addr) : 0;
    if (!hdr || i >= h.count)
        return UINT64_MAX;
    int64_t loc, fde;
    cn_obj_ehhdr_entry(hdr, i, false, &loc, &fde);
    return e->eh_frame_hdr_vaddr + (uint64_t)loc;
}

/* Sets c->entry/entry_end (see cn_smp__cfi) from the ELF entry point e_entry. */
static void find_entry_code(cn_smp__cfi *c, const cn_smp__elf *e, uint64_t e_entry)
{
    c->entry = c->entry_end = e_entry;
    if (!e_entry || has_cfi(c, c->eh, e_entry) || has_cfi(c, c->debug, e_entry))
        return;
    uint64_t next = next_fde(e, e_entry);
    c->entry_end = next - e_entry < ENTRY_MAX ? next : e_entry + ENTRY_MAX;
}

/* Matches section name of e against crti's shape (init_code) into *out. */
static void find_init_code(const cn_smp__elf *e, const char *name, init_code *out)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    Elf64_Shdr sh;
    uint8_t b[INIT_CODE_MAX];
    *out = (init_code){0};
    if (cn_obj_elf_section(e->data, e->size, name, &sh) < 0 || sh.sh_type != SHT_PROGBITS ||
        !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_size < 9 || sh.sh_size > sizeof(b) ||
        cn_smp__elf_read(e, sh.sh_addr, b, sh.sh_size) < 0)
        return;
    size_t n = sh.sh_size, at = memcmp(b, endbr64, sizeof(endbr64)) == 0 ? 4 : 0;
    /* sub $N,%rsp (48 83 ec N) first; add $N,%rsp (48 83 c4 N) and ret (c3) last. An image
     * that does not hold these bytes reads zeros: no match. */
    if (n < at + 9 || b[at] != 0x48 || b[at + 1] != 0x83 || b[at + 2] != 0xec || b[n - 5] != 0x48 ||
        b[n - 4] != 0x83 || b[n - 3] != 0xc4 || b[n - 2] != b[at + 3] || b[n - 1] != 0xc3 ||
        b[at + 3] == 0 || b[at + 3] % 8 != 0 || b[at + 3] > 0x78)
        return;
    *out = (init_code){.lo = sh.sh_addr,
                       .body = sh.sh_addr + at + 4,
                       .body_end = sh.sh_addr + n - 1,
                       .hi = sh.sh_addr + n,
                       .frame = b[at + 3]};
}

/* The rule of crti's code at addr (no CFI there), from c->init; false when addr is not in
 * it. */
static bool init_rule(const cn_smp__cfi *c, uint64_t addr, rule *r)
{
    for (size_t i = 0; i < sizeof(c->init) / sizeof(c->init[0]); i++) {
        const init_code *ic = &c->init[i];
        if (addr < ic->lo || addr >= ic->hi)
            continue;
        bool body = addr >= ic->body && addr < ic->body_end;
        *r = (rule){.start = body              ? ic->body
                             : addr < ic->body ? ic->lo
                                               : ic->body_end,
                    .end = body              ? ic->body_end
                           : addr < ic->body ? ic->body
                                             : ic->hi,
                    .cfa_off = 8 + (body ? ic->frame : 0),
                    .cfa_slot = SLOT_SP};
        r->kind[SLOT_SP] = R_VAL_CFA; /* the caller's stack pointer is the CFA */
        r->kind[SLOT_RA] = R_AT_CFA;
        r->off[SLOT_RA] = -8;
        r->kind[SLOT_FP] = r->kind[SLOT_X] = R_SAME;
        return true;
    }
    return false;
}

/* Whether libdw finds FDEs spread over a lazily read .eh_frame, the image holding only
 * them and their CIEs: then it looks entries up through the search table, as the lazy
 * image requires. A libdw that scanned .eh_frame from its start would stop at the first
 * page not read yet and find at most those of its first pages. Half of eight is asked
 * for: a few entries are found by none (a zero-length FDE that shares its start with
 * another, which LLVM's libraries have). */
static bool lazy_works(const cn_smp__cfi *c, const cn_smp__elf *e)
{
    cn_obj_ehhdr h;
    const uint8_t *hdr = cn_smp__elf_ehhdr(e, &h);
    unsigned found = 0;
    for (uint64_t k = 0; hdr && k < 8; k++) {
        int64_t loc, fde;
        cn_obj_ehhdr_entry(hdr, (2 * k + 1) * h.count / 16, false, &loc, &fde);
        uint64_t at = e->eh_frame_hdr_vaddr + (uint64_t)loc;
        Dwarf_Frame *f = NULL;
        Dwarf_Addr start, end;
        bool signal;
        found += frame_at(c, c->eh, at, &f) == 0 &&
                 dwarf_frame_info(f, &start, &end, &signal) >= 0 && start == at;
        free(f);
    }
    return found >= 4;
}

static cn_smp__cfi *cfi_open(cn_smp__elf *e)
{
    cn_smp__cfi *c = calloc(1, sizeof(*c));
    /* elf_version() only records the version: calling it per object is harmless. */
    if (!c || elf_version(EV_CURRENT) == EV_NONE)
        goto fail;
    c->elf = elf_memory((char *)e->data, e->size);
    if (!c->elf)
        goto fail;
    GElf_Ehdr eh;
    if (!gelf_getehdr(c->elf, &eh))
        goto fail;
    c->machine = eh.e_machine;
    c->owner = e;
    c->eh = dwarf_getcfi_elf(c->elf);
    if (c->eh && cn_smp__elf_lazy(e) && !lazy_works(c, e)) {
        /* This libdw does not look the entries up through the search table: it would scan
         * .eh_frame from its start, and find the end at the first page not read yet. */
        dwarf_cfi_end(c->eh);
        cn_smp__elf_fill_all(e);
        c->eh = dwarf_getcfi_elf(c->elf);
    }
    if (e->debug_frame_size) {
        c->dbg = dwarf_begin_elf(c->elf, DWARF_C_READ, NULL);
        c->debug = c->dbg ? dwarf_getcfi(c->dbg) : NULL;
    }
    find_entry_code(c, e, eh.e_entry);
    if (c->machine == EM_X86_64) {
        find_init_code(e, ".init", &c->init[0]);
        find_init_code(e, ".fini", &c->init[1]);
    }
    return c;
fail:
    cn_smp__cfi_free(c);
    return NULL;
}

void cn_smp__cfi_free(cn_smp__cfi *c)
{
    if (!c)
        return;
    if (c->eh)
        dwarf_cfi_end(c->eh);
    if (c->dbg)
        dwarf_end(c->dbg); /* also ends c->debug */
    if (c->elf)
        elf_end(c->elf);
    for (size_t b = 0; b < c->nblocks; b++)
        free(c->blocks[b].k);
    free(c->blocks);
    free(c->hot);
    free(c);
}

uint64_t cn_smp__cfi_bytes(const cn_smp__cfi *c)
{
    /* libdw's own FDE and CIE caches are not counted: they hold what lookups touched. */
    if (!c)
        return 0;
#ifndef NDEBUG
    uint64_t walked = 0;
    for (size_t b = 0; b < c->nblocks; b++)
        walked += sizeof(rule_block) + c->blocks[b].k->cap * sizeof(rule);
    assert(walked == c->block_bytes);
#endif
    uint64_t bytes = sizeof(*c) + c->capblocks * sizeof(*c->blocks) + c->block_bytes;
    return bytes + (c->hot ? HOT_SLOTS * sizeof(*c->hot) : 0);
}

/* The position of the first rule with start > addr within the last block whose first rule
 * starts at or before addr (block 0 when none does). So a rule starting at or before addr
 * is the one just before the position, in the same block (table_before). */
static table_pos upper_bound(const cn_smp__cfi *c, uint64_t addr)
{
    /* the keys are the first fields: an element's address is its key's (NULL when empty) */
    _Static_assert(offsetof(block_ref, lo) == 0 && offsetof(rule, start) == 0,
                   "cn_count_le_u64 is given the elements' addresses");
    size_t b = cn_count_le_u64(c->blocks, c->nblocks, sizeof(*c->blocks), addr);
    table_pos p = {b ? b - 1 : 0, 0};
    if (c->nblocks == 0)
        return p;
    const rule_block *k = c->blocks[p.b].k;
    p.i = (uint32_t)cn_count_le_u64(k->r, k->n, sizeof(rule), addr);
    return p;
}

/* The rule just before position p (the last one starting at or before the address p was
 * found for), or NULL. */
static rule *table_before(const cn_smp__cfi *c, table_pos p)
{
    /* Only block 0 can hold addresses below its first rule (upper_bound). */
    assert(p.i > 0 || p.b == 0);
    return p.i > 0 ? &c->blocks[p.b].k->r[p.i - 1] : NULL;
}

/* The rule at position p (the first one starting after the address), or NULL. */
static const rule *table_after(const cn_smp__cfi *c, table_pos p)
{
    if (c->nblocks == 0)
        return NULL;
    if (p.i < c->blocks[p.b].k->n)
        return &c->blocks[p.b].k->r[p.i];
    return p.b + 1 < c->nblocks ? &c->blocks[p.b + 1].k->r[0] : NULL;
}

/* A new block of room cap holding the n rules from, inserted at index b of the block list.
 * NULL without memory. */
static rule_block *block_insert(cn_smp__cfi *c, size_t b, uint32_t cap, const rule *from,
                                uint32_t n)
{
    rule_block *k = malloc(sizeof(*k) + cap * sizeof(rule));
    if (!k || CN_RESERVE(c->blocks, c->capblocks, c->nblocks + 1) < 0) {
        free(k);
        return NULL;
    }
    k->n = n;
    k->cap = cap;
    c->block_bytes += sizeof(*k) + cap * sizeof(rule);
    if (n)
        memcpy(k->r, from, n * sizeof(rule));
    memmove(&c->blocks[b + 1], &c->blocks[b], (c->nblocks - b) * sizeof(*c->blocks));
    c->blocks[b] = (block_ref){n ? from[0].start : 0, k}; /* empty: lo set by the insert */
    c->nblocks++;
    return k;
}

/* Makes room for one more rule at *p: grows its block, or splits a full one (a rule added
 * at a full block's end starts a new block instead: rules compiled in address order then
 * fill blocks whole). *p is moved to where the rule goes. false without memory. */
static bool table_room(cn_smp__cfi *c, table_pos *p)
{
    if (c->nblocks == 0)
        return block_insert(c, 0, 4, NULL, 0) != NULL;
    rule_block *k = c->blocks[p->b].k;
    if (k->n < k->cap)
        return true;
    if (k->cap < BLOCK_RULES) {
        rule_block *g = realloc(k, sizeof(*k) + 2 * k->cap * sizeof(rule));
        if (!g)
            return false;
        c->block_bytes += g->cap * sizeof(rule);
        g->cap *= 2;
        c->blocks[p->b].k = g;
        return true;
    }
    if (p->i == k->n) {
        if (!block_insert(c, p->b + 1, 4, NULL, 0))
            return false;
        *p = (table_pos){p->b + 1, 0};
        return true;
    }
    uint32_t half = k->n / 2;
    if (!block_insert(c, p->b + 1, BLOCK_RULES, &k->r[half], k->n - half))
        return false;
    k->n = half;
    if (p->i > half)
        *p = (table_pos){p->b + 1, p->i - half};
    return true;
}

/* The slot tracking DWARF register reg, or -1. */
static int slot_of(const cn_smp__arch *arch, Dwarf_Word reg)
{
    if (reg == (Dwarf_Word)arch->dw_sp)
        return SLOT_SP;
    if (reg == (Dwarf_Word)arch->dw_fp)
        return SLOT_FP;
    if (arch->dw_x >= 0 && reg == (Dwarf_Word)arch->dw_x)
        return SLOT_X;
    return -1;
}

/* Whether the sample carries DWARF register reg (one of perf's user registers). */
static bool sampled_reg(const cn_smp__arch *arch, Dwarf_Word reg)
{
    return reg < 64 && arch->unw_to_perf((int)reg) >= 0 &&
           cn_smp__reg_index(arch->regs_mask, arch->unw_to_perf((int)reg)) >= 0;
}

/* Compiles the rule of DWARF register regno; false when its shape is not one we handle. */
static bool compile_reg(const cn_smp__arch *arch, Dwarf_Frame *f, int regno, uint8_t *kind,
                        int32_t *off)
{
    Dwarf_Op mem[3], *ops;
    size_t nops;
    if (dwarf_frame_register(f, regno, mem, &ops, &nops) < 0)
        return false;
    *off = 0;
    if (nops == 0) {
        *kind = ops == NULL ? R_SAME : R_UNDEF;
        return true;
    }
    if (nops == 1 && ops[0].atom == DW_OP_regx && sampled_reg(arch, ops[0].number)) {
        *kind = R_REG;
        *off = (int32_t)ops[0].number;
        return true;
    }
    if (ops[0].atom != DW_OP_call_frame_cfa)
        return false;
    size_t i = 1;
    if (i < nops && ops[i].atom == DW_OP_plus_uconst) {
        /* a negative offset, as libdw gives it: the word's two's complement */
        int64_t o = (int64_t)ops[i++].number;
        if (o < INT32_MIN || o > INT32_MAX)
            return false;
        *off = (int32_t)o;
    }
    *kind = R_AT_CFA;
    if (i < nops && ops[i].atom == DW_OP_stack_value) {
        *kind = R_VAL_CFA;
        i++;
    }
    return i == nops;
}

/* Whether a CFA expression is the x86-64 lazy PLT entries' (CFA_PLT), exactly:
 * DW_OP_breg7 (rsp) A; DW_OP_breg16 (rip) 0; DW_OP_litM; DW_OP_and; DW_OP_litK; DW_OP_ge;
 * DW_OP_lit3; DW_OP_shl; DW_OP_plus. Sets r's CFA from A, M and K when it is. */
static bool plt_expr(const cn_smp__arch *arch, const Dwarf_Op *ops, size_t nops, rule *r)
{
    if (arch->dw_pc < 0 || arch->dw_sp >= 32 || arch->dw_pc >= 32 || nops != 9 ||
        ops[0].atom != DW_OP_breg0 + arch->dw_sp || ops[1].atom != DW_OP_breg0 + arch->dw_pc ||
        ops[1].number != 0 || ops[2].atom < DW_OP_lit0 || ops[2].atom > DW_OP_lit31 ||
        ops[3].atom != DW_OP_and || ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31 ||
        ops[5].atom != DW_OP_ge || ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl ||
        ops[8].atom != DW_OP_plus)
        return false;
    r->cfa_off = (int64_t)ops[0].number;
    r->arg = (uint8_t)(ops[2].atom - DW_OP_lit0);
    r->arg2 = (uint8_t)(ops[4].atom - DW_OP_lit0);
    return true;
}

/* Compiles the frame that libdw found for an address into r (cfa_slot CFA_NONE, with the
 * cause in arg, when the frame needs libunwind). */
static void compile_frame(const cn_smp__arch *arch, Dwarf_Frame *f, rule *r)
{
    Dwarf_Addr start, end;
    bool signal = false;
    int ra = dwarf_frame_info(f, &start, &end, &signal);
    r->cfa_slot = CFA_NONE;
    r->arg = CN_SMP_FB_OTHER;
    if (ra < 0)
        return;
    r->start = start;
    r->end = end;
    if (signal && arch->sig_pc) {
        r->cfa_slot = CFA_SIGNAL;
        return;
    }
    Dwarf_Op *ops;
    size_t nops;
    if (signal || ra != arch->dw_ra || dwarf_frame_cfa(f, &ops, &nops) < 0)
        return;
    uint8_t cfa;
    if (nops == 1 && ops[0].atom == DW_OP_bregx) {
        int slot = slot_of(arch, ops[0].number);
        cfa = slot >= 0 ? (uint8_t)slot : CFA_REG;
        r->cfa_off = (int64_t)ops[0].number2;
        r->arg = (uint8_t)ops[0].number;
        if (slot < 0 && !sampled_reg(arch, ops[0].number)) {
            r->arg = CN_SMP_FB_CFA_REG;
            return;
        }
    } else if (plt_expr(arch, ops, nops, r)) {
        cfa = CFA_PLT;
    } else {
        r->arg = CN_SMP_FB_CFA_EXPR;
        return;
    }
    if (!compile_reg(arch, f, arch->dw_fp, &r->kind[SLOT_FP], &r->off[SLOT_FP]) ||
        !compile_reg(arch, f, arch->dw_ra, &r->kind[SLOT_RA], &r->off[SLOT_RA])) {
        r->arg = CN_SMP_FB_REG_RULE;
        return;
    }
    /* The tracked callee-saved register: any rule that does not compile makes it unknown
     * in the caller (a CFA based on it then falls back), which costs nothing where no
     * frame uses it. */
    if (arch->dw_x < 0 || !compile_reg(arch, f, arch->dw_x, &r->kind[SLOT_X], &r->off[SLOT_X]))
        r->kind[SLOT_X] = R_UNDEF;
    r->kind[SLOT_SP] = R_VAL_CFA; /* the caller's stack pointer is the CFA */
    r->off[SLOT_SP] = 0;
    r->cfa_slot = cfa;
}

/* Whether libdw's row at start is [start, end). */
static bool row_is(const cn_smp__cfi *c, Dwarf_CFI *cfi, uint64_t start, uint64_t end)
{
    Dwarf_Frame *f = NULL;
    Dwarf_Addr s, e;
    bool signal;
    if (frame_at(c, cfi, start, &f) < 0)
        return false;
    bool same = dwarf_frame_info(f, &s, &e, &signal) >= 0 && s == start && e == end;
    free(f);
    return same;
}

/* Looks up CFI for addr in one table; true with *r filled when found. */
static bool from_cfi(const cn_smp__arch *arch, const cn_smp__cfi *c, Dwarf_CFI *cfi, uint64_t addr,
                     rule *r)
{
    Dwarf_Frame *f = NULL;
    if (frame_at(c, cfi, addr, &f) < 0)
        return false;
    compile_frame(arch, f, r);
    free(f);
    if (!(r->end > r->start && addr >= r->start && addr < r->end))
        return false;
    /* After DW_CFA_restore_state, libdw (0.188) reports the start of the row where the
     * state was remembered, not of the restored row: gcc's functions with several
     * epilogues restore the body's state after each one, and the rule would cover the
     * epilogue before it (cc1: "CFA = rsp+64" over a `pop; pop; ret` whose CFA is rsp+16),
     * silently giving wrong callers to later samples there. The end is right. A start that
     * is not where the row containing it begins is not trusted: the rule starts at addr. */
    if (r->start < addr && !row_is(c, cfi, r->start, r->end))
        r->start = addr;
    return true;
}

/* Inserts r at position at (upper_bound's for its address), clipped so that the table
 * stays disjoint. Returns the kept rule, or NULL when it was not kept (empty once clipped,
 * table full, no memory). */
static const rule *insert_rule(cn_smp__cfi *c, table_pos at, rule r)
{
    const rule *before = table_before(c, at), *after = table_after(c, at);
    if (before && r.start < before->end)
        r.start = before->end;
    if (after && r.end > after->start)
        r.end = after->start;
    if (r.end <= r.start || c->n >= MAX_RULES)
        return NULL;
    assert((!before || before->end <= r.start) && (!after || r.end <= after->start));
    if (!table_room(c, &at)) /* may move the block: before and after are stale from here */
        return NULL;
    rule_block *k = c->blocks[at.b].k;
    assert(at.i <= k->n && k->n < k->cap);
    memmove(&k->r[at.i + 1], &k->r[at.i], (k->n - at.i) * sizeof(rule));
    k->r[at.i] = r;
    if (at.i == 0)
        c->blocks[at.b].lo = r.start;
    k->n++;
    c->n++;
    return &k->r[at.i];
}

/* Whether addr (without CFI) lies just before a thread's first frame (THREAD_GAP). */
static bool thread_gap(const cn_smp__arch *arch, const cn_smp__cfi *c, const cn_smp__elf *e,
                       uint64_t addr)
{
    uint64_t next = next_fde(e, addr);
    rule r = {0};
    return next - addr <= THREAD_GAP_MAX && from_cfi(arch, c, c->eh, next, &r) && r.start == next &&
           r.cfa_slot != CFA_NONE && r.cfa_slot != CFA_SIGNAL && r.kind[SLOT_RA] == R_UNDEF;
}

/* The rule covering addr from the table, compiled and added on a miss. *tmp holds a rule
 * that could not be kept. */
static const rule *table_rule(const cn_smp__arch *arch, cn_smp__cfi *c, const cn_smp__elf *e,
                              uint64_t addr, rule *tmp)
{
    table_pos at = upper_bound(c, addr);
    const rule *before = table_before(c, at);
    if (before && addr < before->end)
        return before;
    memset(tmp, 0, sizeof(*tmp));
    if (!from_cfi(arch, c, c->eh, addr, tmp) && !from_cfi(arch, c, c->debug, addr, tmp) &&
        !init_rule(c, addr, tmp)) {
        /* No CFI here: remember that for this one address. */
        *tmp = (rule){.start = addr,
                      .end = addr + 1,
                      .cfa_slot = CFA_NONE,
                      .arg = CN_SMP_FB_NO_CFI,
                      .arg2 = thread_gap(arch, c, e, addr) ? THREAD_GAP : 0};
    }
    /* The neighbours do not cover addr, so clipping keeps it inside the kept rule. */
    const rule *kept = insert_rule(c, at, *tmp);
    assert(!kept || (kept->start <= addr && addr < kept->end));
    return kept ? kept : tmp;
}

/* The rule covering addr (an ELF virtual address of object e), compiled on a miss; NULL
 * when the object's CFI cannot be read. The rule returned stays valid until the next
 * lookup in e (a table insert may move it; *tmp holds one that could not be kept). */
static const rule *rule_for(const cn_smp__arch *arch, cn_smp__elf *e, uint64_t addr, rule *tmp)
{
    if (!e->cfi) {
        e->cfi = cfi_open(e);
        if (!e->cfi)
            return NULL;
    }
    cn_smp__cfi *c = e->cfi;
    if (c->machine != arch->elf_machine)
        return NULL;
    if (!c->hot && c->n >= HOT_MIN_RULES)
        c->hot = calloc(HOT_SLOTS, sizeof(*c->hot)); /* an accelerator: NULL only slows */
    hot_slot *h = c->hot ? &c->hot[(addr * 0x9e3779b97f4a7c15ULL) >> 56] : NULL;
    _Static_assert(HOT_SLOTS == 256, "the slot is the hash's top 8 bits");
    if (h && h->key == addr + 1)
        return &h->r;
    const rule *ru = table_rule(arch, c, e, addr, tmp);
    if (h) {
        h->key = addr + 1;
        h->r = *ru;
    }
    return ru;
}

bool cn_smp__entry_code(cn_smp__elf *e, uint64_t vaddr)
{
    if (!e->cfi)
        e->cfi = cfi_open(e);
    return e->cfi && vaddr >= e->cfi->entry && vaddr < e->cfi->entry_end;
}

bool cn_smp__init_code(cn_smp__elf *e, uint64_t vaddr)
{
    rule r;
    if (!e->cfi)
        e->cfi = cfi_open(e);
    return e->cfi && init_rule(e->cfi, vaddr, &r);
}

/* One frame's registers while unwinding. */
typedef struct regs {
    uint64_t pc;
    uint64_t v[NSLOTS];
    bool ok[NSLOTS];
} regs;

static bool sample_reg(const cn_smp__arch *arch, const cn_smp__rec *r, int perf, uint64_t *out)
{
    int idx = perf < 0 ? -1 : cn_smp__reg_index(arch->regs_mask, perf);
    if (idx < 0 || (uint32_t)idx >= r->u.sample.nregs)
        return false;
    *out = cn_smp__reg_at(r, (uint32_t)idx);
    return true;
}

/* Reads a word of the stack copy; the copy starts at the sample's stack pointer sp0. */
static int read_stack(const cn_smp__rec *r, uint64_t sp0, uint64_t addr, uint64_t *out)
{
    uint64_t size = r->u.sample.stack_size;
    if (addr < sp0 || addr - sp0 > size || size - (addr - sp0) < sizeof(*out))
        return -EFAULT;
    memcpy(out, r->u.sample.stack + (addr - sp0), sizeof(*out));
    return 0;
}

/* Through a signal frame (cur: the sigreturn trampoline, SP at the ucontext): the
 * interrupted code's pc, SP and FP as the kernel saved them. Returns 0, -EFAULT (address
 * in *fault) or -EAGAIN (the interrupted stack is not above: an alternate signal stack). */
static int sig_step(const cn_smp__arch *arch, const cn_smp__rec *r, uint64_t sp0, const regs *cur,
                    regs *next, uint64_t *fault)
{
    uint64_t sp = cur->v[SLOT_SP];
    if (!cur->ok[SLOT_SP])
        return -EAGAIN;
    if (read_stack(r, sp0, *fault = sp + (uint64_t)arch->sig_pc, &next->pc) < 0 ||
        read_stack(r, sp0, *fault = sp + (uint64_t)arch->sig_sp, &next->v[SLOT_SP]) < 0 ||
        read_stack(r, sp0, *fault = sp + (uint64_t)arch->sig_fp, &next->v[SLOT_FP]) < 0)
        return -EFAULT;
    next->ok[SLOT_SP] = next->ok[SLOT_FP] = true;
    next->ok[SLOT_RA] = next->ok[SLOT_X] = false;
    if (arch->sig_lr) {
        if (read_stack(r, sp0, *fault = sp + (uint64_t)arch->sig_lr, &next->v[SLOT_RA]) < 0)
            return -EFAULT;
        next->ok[SLOT_RA] = true; /* live in the interrupted code: lr_step() may use it */
    }
    return next->v[SLOT_SP] > sp ? 0 : -EAGAIN;
}

/* The value of DWARF register reg in frame cur: a tracked slot's, or in the sampled frame
 * (sampled: cur's registers are the sample's) the sample's. */
static bool reg_value(const cn_smp__arch *arch, const cn_smp__rec *r, const regs *cur, bool sampled,
                      uint64_t reg, uint64_t *out)
{
    int slot = slot_of(arch, reg);
    if (slot >= 0 && cur->ok[slot]) {
        *out = cur->v[slot];
        return true;
    }
    return slot < 0 && sampled && sampled_reg(arch, reg) &&
           sample_reg(arch, r, arch->unw_to_perf((int)reg), out);
}

/* The CFA of frame cur by rule ru (not CFA_NONE or CFA_SIGNAL); false when a register it
 * needs is not known there (*why says which kind). */
static bool cfa_of(const cn_smp__arch *arch, const cn_smp__rec *r, const rule *ru, const regs *cur,
                   bool exact, bool sampled, uint64_t *cfa, cn_smp_fallback *why)
{
    uint64_t base;
    switch (ru->cfa_slot) {
    case CFA_REG:
        if (!reg_value(arch, r, cur, sampled, ru->arg, &base))
            goto unknown;
        break;
    case CFA_PLT:
        /* A PLT entry never calls: a return address there is not one of its frames. */
        if (!exact || !cur->ok[SLOT_SP]) {
            *why = CN_SMP_FB_OTHER;
            return false;
        }
        base = cur->v[SLOT_SP] + ((cur->pc & ru->arg) >= ru->arg2 ? 8 : 0);
        break;
    default:
        assert(ru->cfa_slot < NSLOTS && ru->cfa_slot != SLOT_RA);
        if (!cur->ok[ru->cfa_slot])
            goto unknown;
        base = cur->v[ru->cfa_slot];
        break;
    }
    *cfa = base + (uint64_t)ru->cfa_off;
    return true;
unknown:
    *why = CN_SMP_FB_CFA_REG;
    return false;
}

/* Applies rule ru to the callee's registers cur, giving the caller's in next. Returns 0,
 * 1 when the return address is undefined (cur is the outermost frame), -EAGAIN when
 * libunwind must take over (the cause in *why), or -EFAULT when a saved register lies
 * outside the copy (its address in *fault).
 *
 * exact: cur's registers are those of the interrupted code (the sample's, or a signal
 * frame's), not of a call. There a register saved below its stack pointer was popped by
 * the function's epilogue (x86-64 `pop %rbp; ret`: the CFI keeps
 * "saved at CFA - 16" until the `ret`): the register holds the popped value, which is also
 * what that slot still holds in the process (libunwind reads it there when unwinding its
 * own process; perf's copy starts at the stack pointer). sampled: cur is the sampled
 * frame, whose every register the sample carries. */
static int step(const cn_smp__arch *arch, const cn_smp__rec *r, uint64_t sp0, const rule *ru,
                const regs *cur, regs *next, bool exact, bool sampled, uint64_t *fault,
                cn_smp_fallback *why)
{
    /* The caller hands uncompilable rules to libunwind. */
    assert(ru->cfa_slot != CFA_NONE);
    if (ru->cfa_slot == CFA_SIGNAL) {
        int ret = sig_step(arch, r, sp0, cur, next, fault);
        *why = CN_SMP_FB_OTHER; /* -EAGAIN: another stack */
        return ret;
    }
    uint64_t cfa;
    if (!cfa_of(arch, r, ru, cur, exact, sampled, &cfa, why))
        return -EAGAIN;
    if (ru->kind[SLOT_RA] == R_UNDEF)
        return 1;
    for (int s = 0; s < NSLOTS; s++) {
        next->ok[s] = true;
        switch ((rule_kind)ru->kind[s]) {
        case R_SAME:
            next->v[s] = cur->v[s];
            next->ok[s] = cur->ok[s];
            break;
        case R_UNDEF:
            next->ok[s] = false;
            break;
        case R_AT_CFA:
            *fault = cfa + (uint64_t)(int64_t)ru->off[s];
            if (exact && *fault < cur->v[SLOT_SP] && cur->ok[s]) {
                next->v[s] = cur->v[s]; /* popped: see above */
                break;
            }
            if (read_stack(r, sp0, *fault, &next->v[s]) < 0) {
                /* The tracked register is not needed to go on: unknown from here. */
                if (s == SLOT_X) {
                    next->ok[s] = false;
                    break;
                }
                return -EFAULT;
            }
            break;
        case R_VAL_CFA:
            next->v[s] = cfa + (uint64_t)(int64_t)ru->off[s];
            break;
        case R_REG:
            next->ok[s] = reg_value(arch, r, cur, sampled, (uint64_t)ru->off[s], &next->v[s]);
            break;
        }
    }
    if (!next->ok[SLOT_RA]) {
        *why = CN_SMP_FB_REG_UNKNOWN;
        return -EAGAIN;
    }
    next->pc = next->v[SLOT_RA];
    /* The caller's frame lies above the callee's; anything else is libunwind's call. */
    if (next->v[SLOT_SP] < cur->v[SLOT_SP] ||
        (next->v[SLOT_SP] == cur->v[SLOT_SP] && next->pc == cur->pc)) {
        *why = CN_SMP_FB_NOT_UPWARD;
        return -EAGAIN;
    }
    return 0;
}

static bool initial_regs(const cn_smp__arch *arch, const cn_smp__rec *r, regs *g)
{
    memset(g, 0, sizeof(*g));
    if (!r->u.sample.regs || !sample_reg(arch, r, arch->perf_ip, &g->pc) ||
        !sample_reg(arch, r, arch->perf_sp, &g->v[SLOT_SP]))
        return false;
    g->ok[SLOT_SP] = true;
    g->ok[SLOT_FP] = sample_reg(arch, r, arch->perf_fp, &g->v[SLOT_FP]);
    g->ok[SLOT_RA] = sample_reg(arch, r, arch->perf_lr, &g->v[SLOT_RA]);
    g->ok[SLOT_X] = sample_reg(arch, r, arch->perf_x, &g->v[SLOT_X]);
    return true;
}

/* True when the code at vaddr (in m's object) is arch's sigreturn trampoline: a return
 * address there is a signal frame even without CFI. */
static bool is_sigreturn(const cn_smp__arch *arch, const cn_smp__map *m, uint64_t vaddr)
{
    uint32_t code[2];
    return arch->sig_code[0] && arch->sig_pc && m->obj->elf &&
           cn_smp__elf_read(m->obj->elf, vaddr, code, sizeof(code)) == 0 &&
           code[0] == arch->sig_code[0] && code[1] == arch->sig_code[1];
}

/* Interrupted code (the sampled leaf, or the code a signal interrupted) at an address
 * without CFI, on an architecture with a link register: its caller is the link register,
 * with the stack pointer unchanged. That is what a frameless leaf and a PLT stub look like,
 * and arm64's vDSO (built without unwind tables: docs/perf-sampler.md "arm64") is made of
 * frameless leaves. Returns false when there is no link register or it holds nothing. */
static bool lr_step(const cn_smp__arch *arch, const regs *cur, regs *next)
{
    if (arch->perf_lr < 0 || !cur->ok[SLOT_RA] || arch->mask_ret(cur->v[SLOT_RA]) == 0)
        return false;
    *next = *cur;
    next->pc = cur->v[SLOT_RA];
    next->ok[SLOT_RA] = false; /* the caller's own link register is gone */
    return true;
}

/* auto's frame-pointer step from frame cur (not the leaf) of a function that set up a
 * frame: the saved frame pointer at FP, the return address above it, the caller's stack
 * pointer (the CFA) above that. Returns 0, or -EAGAIN when the frame pointer is not
 * plausible here (outside the copy or below the stack pointer: the caller takes a CFI
 * step instead, which classifies a failure). */
static int fp_step(const cn_smp__rec *r, uint64_t sp0, const regs *cur, regs *next)
{
    uint64_t fp = cur->v[SLOT_FP];
    if (!cur->ok[SLOT_FP] || fp < cur->v[SLOT_SP] ||
        read_stack(r, sp0, fp, &next->v[SLOT_FP]) < 0 ||
        read_stack(r, sp0, fp + 8, &next->pc) < 0 || next->pc == 0)
        return -EAGAIN;
    next->v[SLOT_SP] = fp + 16;
    next->ok[SLOT_SP] = next->ok[SLOT_FP] = true;
    /* Where the function saved the tracked register is not known without its CFI. */
    next->ok[SLOT_RA] = next->ok[SLOT_X] = false;
    return 0;
}

/* auto: a run of frame-pointer steps through m, fp_step() and the walk's loop below fused
 * for the common case (frame-pointer programs spend most frames in one object): while
 * cur's pc is a return address into m (an object with has_fp), not 0, and its frame pointer
 * is plausible, cur's pc is written to pcs and cur becomes its caller — exactly what the
 * loop would do for such a frame, without its rule lookup set-up and register-set copies.
 * The frame cur is left at is not written to pcs: the loop writes it and takes it from
 * there. Returns the new n. */
static int fp_run(const cn_smp__arch *arch, const cn_smp__rec *r, uint64_t sp0,
                  const cn_smp__map *m, regs *cur, uint64_t *pcs, int n, int max, uint64_t *steps)
{
    /* Locals: the stores to pcs could alias anything read through a pointer. */
    const uint8_t *stack = r->u.sample.stack;
    const uint64_t size = r->u.sample.stack_size, lo = m->start, span = m->end - m->start;
    uint64_t (*const mask_ret)(uint64_t) = arch->mask_ret;
    uint64_t pc = cur->pc, fp = cur->v[SLOT_FP], sp = cur->v[SLOT_SP], caller[2];
    int n0 = n;
    if (!cur->ok[SLOT_FP] || sp < sp0 || size < sizeof(caller))
        return n;
    /* the highest frame pointer whose two words lie in the copy */
    const uint64_t top = sp0 + (size - sizeof(caller));
    while (pc != 0 && n < max) {
        /* at in m; fp_step's plausibility: at or above the stack pointer (so above sp0,
         * which sp never goes below), inside the copy */
        if (mask_ret(pc) - 1 - lo >= span || fp < sp || fp > top)
            break;
        memcpy(caller, stack + (fp - sp0), sizeof(caller));
        if (caller[1] == 0)
            break;
        pcs[n++] = pc;
        sp = fp + 16;
        fp = caller[0];
        pc = caller[1];
    }
    *steps += (uint64_t)(n - n0);
    cur->pc = pc;
    cur->v[SLOT_SP] = sp;
    cur->v[SLOT_FP] = fp;
    cur->ok[SLOT_SP] = cur->ok[SLOT_FP] = true; /* and RA unknown, as after fp_step */
    if (n > n0)
        cur->ok[SLOT_X] = false; /* as after fp_step */
    return n;
}

/* auto: frame cur (pcs[n - 1], in frame-pointer code) could not be stepped inside the copy.
 * The kernel's chain was read from the sampled frame pointer f0: chain[i + 1] = *(f_i + 8),
 * f_(i + 1) = *f_i. When cur's frame pointer is one of the f_i (followed through the copy,
 * and one past it), its caller is chain[i + 1]: chain[i + 1 ..] is appended (and its
 * position recorded in fw->joined_at). Matching frame pointers, not return addresses,
 * keeps recursion (the same return address many times) aligned. Returns the new count,
 * or -1 when the chains do not meet. */
static int join_chain(const cn_smp__arch *arch, const cn_smp__rec *r, uint64_t sp0, const regs *cur,
                      cn_smp__fpwalk *fw, uint64_t *pcs, int n, int max)
{
    uint64_t f;
    if (fw->nchain < 0)
        fw->nchain = cn_smp__user_chain(r, fw->chain_from, fw->chain, CN_SMP_MAX_FRAMES);
    if (!cur->ok[SLOT_FP] || fw->nchain < 1 || fw->chain[0] != pcs[0] ||
        !sample_reg(arch, r, arch->perf_fp, &f))
        return -1;
    for (int i = 0; i + 1 < fw->nchain; i++) {
        if (f == cur->v[SLOT_FP]) {
            int add = fw->nchain - (i + 1);
            if (add > max - n)
                add = max - n;
            memcpy(pcs + n, fw->chain + i + 1, (size_t)add * sizeof(*pcs));
            fw->joined_at = n;
            return n + add;
        }
        uint64_t up;
        if (read_stack(r, sp0, f, &up) < 0 || up <= f)
            return -1;
        f = up;
    }
    return -1;
}

/* auto: the walk ended at frame pcs[n - 1] (no return address: ended normally), or found
 * no code at pcs[n - 1] (failed: libunwind's turn). Where the kernel's chain agrees with the
 * walk's first k frames and goes on, the frame pointer led across a stack switch the CFI
 * does not describe: Go's runtime.systemstack runs its callee on the thread's g0 stack,
 * whose CFI ends there or leads to garbage, but keeps the goroutine's frame pointer
 * (docs/perf-sampler.md "Real programs": perf -g follows it, and auto must not be worse
 * than fp). The chain from k on replaces the rest: k = n when the walk ended normally, the
 * longest agreeing prefix when it failed. Guards: at least three agreeing frames, the
 * frame pointer's use in frame k - 1's object not known absent (Go's prologues are not the
 * ones cn_smp__elf probes), the chain's next address mapped: in code without frame
 * pointers the kernel's chain goes astray within a frame or two, and _start and thread
 * starts clear the frame pointer (the chain ends with the walk). Returns the new count, or
 * -1 when the chain was not taken. */
static int chain_past_end(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                          cn_smp__fpwalk *fw, uint64_t *pcs, int n, bool failed, int max)
{
    /* The chain's length bounds its user entries (one fewer than the walk's frames when
     * it skipped one, below): most walks end where it does, and its cache lines are cold
     * (read only when it may go further). */
    if (!fw || n < 3 || !r->u.sample.chain || r->u.sample.nr <= fw->chain_from ||
        r->u.sample.nr - fw->chain_from <= (uint64_t)(failed ? 2 : n - 1))
        return -1;
    if (fw->nchain < 0)
        fw->nchain = cn_smp__user_chain(r, fw->chain_from, fw->chain, CN_SMP_MAX_FRAMES);
    /* d = 1: the chain skipped the caller of a leaf that had not set up its frame (the
     * walk has it: counters.leaf_fixups), so chain[j] is the walk's pcs[j + 1]. */
    int lim = failed ? n - 1 : n;
    int d = fw->nchain > 1 && fw->chain[1] != pcs[1] && fw->chain[1] == pcs[2] ? 1 : 0;
    int k = fw->nchain > 0 && fw->chain[0] == pcs[0] ? 1 + d : 0;
    while (k > 0 && k < lim && k - d < fw->nchain && fw->chain[k - d] == pcs[k])
        k++;
    if (k < 3 || (!failed && k < n) || fw->nchain <= k - d ||
        !cn_smp__proc_find(p, arch->mask_ret(fw->chain[k - d]) - 1))
        return -1;
    const cn_smp__map *m = cn_smp__proc_find(p, arch->mask_ret(pcs[k - 1]) - (k > 1 ? 1 : 0));
    if (!m || m->obj->pub.kind != CN_SMP_OBJ_USER || (m->obj->elf && m->obj->elf->has_fp == 0))
        return -1;
    int add = fw->nchain - (k - d) < max - k ? fw->nchain - (k - d) : max - k;
    memcpy(pcs + k, fw->chain + (k - d), (size_t)add * sizeof(*pcs));
    fw->joined_at = k;
    return k + add;
}

/* Whether the sampled frame, at vaddr of e with rule ru, is a new thread's first
 * instruction after clone3/clone (THREAD_GAP; the system call returned 0: the child). Its
 * stack holds nothing of its own yet, and the parent's registers it inherited lead into the
 * parent's stack, which the child's copy does not hold. */
static bool new_thread(const cn_smp__arch *arch, const cn_smp__rec *r, const rule *ru)
{
    uint64_t ret;
    return ru && ru->cfa_slot == CFA_NONE && ru->arg2 == THREAD_GAP &&
           sample_reg(arch, r, arch->perf_ret, &ret) && ret == 0;
}

bool cn_smp__thread_start(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r)
{
    uint64_t pc, bias;
    rule tmp;
    if (!r->u.sample.regs || !sample_reg(arch, r, arch->perf_ip, &pc))
        return false;
    const cn_smp__map *m = cn_smp__proc_find(p, pc);
    if (!m || m->obj->pub.kind != CN_SMP_OBJ_USER || cn_smp__elf_load(m->obj) < 0 ||
        !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias))
        return false;
    return new_thread(arch, r, rule_for(arch, m->obj->elf, pc - bias, &tmp));
}

int cn_smp__unwind_cfi(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t *pcs, int max, cn_smp__fpwalk *fw, cn_smp_stop *stop,
                       cn_smp_fallback *why)
{
    regs cur, next;
    cn_smp_fallback why_mem;
    if (!why)
        why = &why_mem;
    *why = CN_SMP_FB_OTHER;
    if (max <= 0 || !initial_regs(arch, r, &cur))
        return -EAGAIN;
    if (r->u.sample.stack_size == 0) {
        /* Not a byte of the user stack could be copied: the task runs in another address
         * space than its registers' (an execve past its point of no return, sampled in the
         * kernel with the old image's registers), or the page at its stack pointer is not
         * present. Its pc alone, cut short by the failed read (unwind.c says the same). */
        pcs[0] = cur.pc;
        *stop = CN_SMP_STOP_BAD_READ;
        return 1;
    }
    uint64_t sp0 = cur.v[SLOT_SP];
    int n = 0;
    bool exact = true; /* cur.pc is not a return address (the leaf) */
    /* The copy was just written by the kernel, often on another CPU, and the walk's reads
     * depend on each other (each frame pointer comes from the previous frame): one cache
     * miss after the other was most of auto's cost over fp's. Asking for the lines the
     * walk most likely visits first lets them load in parallel (docs/perf-sampler.md). */
    for (uint64_t off = 0; off < r->u.sample.stack_size && off < PREFETCH_BYTES; off += 64)
        __builtin_prefetch(r->u.sample.stack + off);
    /* Consecutive frames are mostly in one object: its map and bias are kept. */
    const cn_smp__map *m = NULL;
    uint64_t bias = 0;
    for (;;) {
        if (cur.pc == 0) {
            *stop = CN_SMP_STOP_NONE;
            int joined = chain_past_end(arch, p, r, fw, pcs, n, false, max);
            return joined >= 0 ? joined : n;
        }
        if (n >= max) {
            /* Reaching the max only matters to a caller who asked for everything. */
            *stop = max < CN_SMP_MAX_FRAMES ? CN_SMP_STOP_NONE : CN_SMP_STOP_MAX_DEPTH;
            return n;
        }
        pcs[n++] = cur.pc;
        /* A return address points after its call: look up the call itself. */
        uint64_t at = arch->mask_ret(cur.pc) - (exact ? 0 : 1);
        if (!m || at < m->start || at >= m->end) {
            m = cn_smp__proc_find(p, at);
            if (!m || m->obj->pub.kind != CN_SMP_OBJ_USER || cn_smp__elf_load(m->obj) < 0 ||
                !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias)) {
                /* Only where the address is in no mapping (a garbage return address):
                 * code without CFI (JIT) is libunwind's, whose frame-chain guess does
                 * better there than the kernel's chain (node: 8% of the stacks). */
                int joined = exact || m ? -1 : chain_past_end(arch, p, r, fw, pcs, n, true, max);
                *stop = joined >= CN_SMP_MAX_FRAMES ? CN_SMP_STOP_MAX_DEPTH : CN_SMP_STOP_NONE;
                *why = CN_SMP_FB_NO_MAP;
                return joined >= 0 ? joined : -EAGAIN;
            }
        }
        /* In an object built with frame pointers, a frame above the leaf is at a call, past
         * its function's prologue: its frame pointer is the frame's base. */
        bool fp_code = fw && arch->fp_gives_sp && m->obj->elf && m->obj->elf->has_fp == 1;
        if (fp_code && !exact && fw->chain_first) {
            fw->chain_first = false; /* tried once per walk: a failed join reads the copy */
            int joined = join_chain(arch, r, sp0, &cur, fw, pcs, n, max);
            if (joined >= 0) {
                fw->early_join = true;
                *stop = joined >= CN_SMP_MAX_FRAMES ? CN_SMP_STOP_MAX_DEPTH : CN_SMP_STOP_NONE;
                return joined;
            }
        }
        if (fp_code && !exact && fp_step(r, sp0, &cur, &next) == 0) {
            fw->fp_steps++;
            cur = next;
            n = fp_run(arch, r, sp0, m, &cur, pcs, n, max, &fw->fp_steps);
            continue;
        }
        rule tmp;
        const rule *ru = rule_for(arch, m->obj->elf, at - bias, &tmp);
        bool none = !ru || ru->cfa_slot == CFA_NONE;
        if (none &&
            (cn_smp__entry_code(m->obj->elf, at - bias) || (n == 1 && new_thread(arch, r, ru)))) {
            *stop = CN_SMP_STOP_NONE; /* the process's or the thread's first frame */
            return n;
        }
        if (none && exact && lr_step(arch, &cur, &next)) {
            cur = next;
            exact = false;
            continue;
        }
        if (none && !exact && is_sigreturn(arch, m, at + 1 - bias)) {
            tmp = (rule){.cfa_slot = CFA_SIGNAL};
            ru = &tmp;
            none = false;
        }
        if (none) {
            *why = ru ? (cn_smp_fallback)ru->arg : CN_SMP_FB_OTHER;
            return -EAGAIN;
        }
        uint64_t fault = 0;
        /* n == 1: cur is the sampled frame (lr_step's frames are not: n is 2 there). */
        int ret = step(arch, r, sp0, ru, &cur, &next, exact, n == 1, &fault, why);
        if (ret == 1) {
            *stop = CN_SMP_STOP_NONE;
            int joined = chain_past_end(arch, p, r, fw, pcs, n, false, max);
            return joined >= 0 ? joined : n;
        }
        if (ret == -EFAULT) {
            /* As unwind.c classifies it: just above the copy, the copy was too short. */
            *stop = fault >= sp0 && fault - sp0 < CN_SMP__STACK_GUESS ? CN_SMP_STOP_STACK_SHORT
                                                                      : CN_SMP_STOP_BAD_READ;
            int joined = *stop == CN_SMP_STOP_STACK_SHORT && fp_code
                             ? join_chain(arch, r, sp0, &cur, fw, pcs, n, max)
                             : -1;
            if (joined >= 0) {
                *stop = joined >= CN_SMP_MAX_FRAMES ? CN_SMP_STOP_MAX_DEPTH : CN_SMP_STOP_NONE;
                return joined;
            }
            return n;
        }
        if (ret < 0)
            return ret;
        /* Past a signal frame the pc is where the code was interrupted, not a return
         * address (and not at a call: no frame-pointer step there). */
        exact = ru->cfa_slot == CFA_SIGNAL;
        cur = next;
    }
}

int cn_smp__cfi_popped(const cn_smp__arch *arch, const cn_smp__proc *p, const cn_smp__rec *r,
                       uint64_t addr[3], uint64_t val[3])
{
    regs cur;
    uint64_t bias;
    rule tmp;
    if (!initial_regs(arch, r, &cur))
        return 0;
    const cn_smp__map *m = cn_smp__proc_find(p, cur.pc);
    if (!m || m->obj->pub.kind != CN_SMP_OBJ_USER || cn_smp__elf_load(m->obj) < 0 ||
        !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias))
        return 0;
    const rule *ru = rule_for(arch, m->obj->elf, cur.pc - bias, &tmp);
    uint64_t cfa;
    cn_smp_fallback why;
    if (!ru || ru->cfa_slot == CFA_NONE || ru->cfa_slot == CFA_SIGNAL ||
        !cfa_of(arch, r, ru, &cur, true, true, &cfa, &why))
        return 0;
    int n = 0;
    for (int s = SLOT_FP; s < NSLOTS; s++) {
        uint64_t at = cfa + (uint64_t)(int64_t)ru->off[s];
        if (ru->kind[s] == R_AT_CFA && at < cur.v[SLOT_SP] && cur.ok[s]) {
            addr[n] = at;
            val[n++] = cur.v[s];
        }
    }
    return n;
}
