/* unwind.c — DWARF unwinding of a sample's user stack: first through compiled CFI (cfi.c),
 * and for the samples it cannot take, with libunwind through a custom ("remote") address
 * space: registers come from the sample, memory from the copied stack or, outside it, from
 * the mapped object files; unwind tables from the objects' .eh_frame_hdr search tables
 * (each object's file image and facts are loaded once and cached on the object; libunwind
 * caches the parsed rules per address). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libunwind.h>

#include "smp_internal.h"

/* Not in libunwind's public headers, but exported (perf uses it the same way). */
extern int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di, unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);
#define search_unwind_table UNW_OBJ(dwarf_search_unwind_table)

struct cn_smp__unwinder {
    unw_addr_space_t as;
    pid_t last_pid;
    cn_smp__unwind_how how;
    cn_smp__unwind_stats stats;
};

typedef struct uctx {
    const cn_smp__proc *p;
    const cn_smp__rec *r;
    const cn_smp__arch *arch;
    uint64_t sp;
    cn_smp__obj *cur; /* object of the last find_proc_info, for reads of its tables */
    uint64_t cur_bias;
    cn_smp_stop reason;
    uint64_t popped_at[3], popped_val[3]; /* cn_smp__cfi_popped(): slots below sp */
    int npopped;
    uint64_t frameless_ret; /* frameless_jit_leaf(), or 0: libunwind starts at the caller */
} uctx;

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg)
{
    uctx *c = arg;
    const cn_smp__map *m = cn_smp__proc_find(c->p, ip);
    uint64_t bias;
    cn_obj_ehhdr h;
    if (!m || m->obj->pub.kind != CN_SMP_OBJ_USER || cn_smp__elf_load(m->obj) < 0 ||
        !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias) ||
        !cn_smp__elf_ehhdr(m->obj->elf, &h))
        goto noinfo;
    const cn_smp__elf *e = m->obj->elf;
    c->cur = m->obj;
    c->cur_bias = bias;
    unw_dyn_info_t di;
    memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = m->start;
    di.end_ip = m->end;
    di.u.rti.segbase = bias + e->eh_frame_hdr_vaddr;
    di.u.rti.table_data = bias + e->eh_frame_hdr_vaddr + h.table_off;
    di.u.rti.table_len = h.count * 8 / sizeof(unw_word_t);
    int ret = search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
    if (ret == -UNW_ENOINFO && c->reason == CN_SMP_STOP_NONE)
        c->reason = CN_SMP_STOP_NO_INFO;
    return ret;
noinfo:
    if (c->reason == CN_SMP_STOP_NONE)
        c->reason = CN_SMP_STOP_NO_INFO;
    return -UNW_ENOINFO;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg)
{
    return -UNW_ENOINFO;
}

static int read_obj(cn_smp__obj *o, uint64_t bias, uint64_t addr, unw_word_t *val)
{
    return o && o->elf && addr >= bias ? cn_smp__elf_read(o->elf, addr - bias, val, sizeof(*val))
                                       : -EFAULT;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
    uctx *c = arg;
    if (write)
        return -UNW_EINVAL;
    uint64_t size = c->r->u.sample.stack_size;
    if (addr >= c->sp && addr - c->sp <= size && size - (addr - c->sp) >= sizeof(*val)) {
        memcpy(val, c->r->u.sample.stack + (addr - c->sp), sizeof(*val));
        return 0;
    }
    for (int i = 0; i < c->npopped; i++)
        if (addr == c->popped_at[i]) {
            *val = c->popped_val[i];
            return 0;
        }
    if (read_obj(c->cur, c->cur_bias, addr, val) == 0)
        return 0;
    const cn_smp__map *m = cn_smp__proc_find(c->p, addr);
    uint64_t bias;
    if (m && m->obj->pub.kind == CN_SMP_OBJ_USER && cn_smp__elf_load(m->obj) == 0 &&
        cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias) &&
        read_obj(m->obj, bias, addr, val) == 0)
        return 0;
    /* JIT code (anonymous executable memory): readable in the process, but its bytes are
     * not read (a system call per word); it reads as zeros, which match none of the code
     * patterns libunwind looks for (PLT entries, sigreturn). libunwind (x86-64, 1.6) also
     * reads a frame's pc before its frame-chain guess: when that read fails, it takes the
     * word at the stack pointer for the return address (its fixup for a call through a bad
     * function pointer). In JIT code that keeps frame pointers that word is often a stack
     * address (HotSpot's interpreter frames, C2 code at its epilogue's `pop %rbp`), and the
     * stack ended there (about 1 JVM stack in 2 000); a frameless leaf, the fixup's case,
     * is stepped before libunwind starts (frameless_jit_leaf). */
    if (m && m->obj->pub.kind == CN_SMP_OBJ_JIT && addr + sizeof(*val) <= m->end) {
        *val = 0;
        return 0;
    }
    /* A non-executable segment of a mapped object (only executable mappings are tracked):
     * libunwind evaluates a cached rule's DWARF expression (__restore_rt's) by reading it
     * from the object's .eh_frame while another object is current. */
    for (size_t i = 0; i < c->p->nmaps; i++) {
        const cn_smp__map *o = &c->p->maps[i];
        if (o->obj->pub.kind == CN_SMP_OBJ_USER && o->obj->elf &&
            cn_smp__elf_bias(o->obj->elf, o->start, o->pgoff, &bias) &&
            read_obj(o->obj, bias, addr, val) == 0)
            return 0;
    }
    if (c->reason == CN_SMP_STOP_NONE)
        c->reason = addr >= c->sp && addr - c->sp < CN_SMP__STACK_GUESS ? CN_SMP_STOP_STACK_SHORT
                                                                        : CN_SMP_STOP_BAD_READ;
    return -UNW_EINVAL;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t regnum, unw_word_t *val, int write,
                      void *arg)
{
    uctx *c = arg;
    if (write)
        return -UNW_EINVAL;
    int perf = c->arch->unw_to_perf(regnum);
    int idx = cn_smp__reg_index(c->r->u.sample.nregs ? cn_smp__arch_get()->regs_mask : 0, perf);
    if (idx < 0 || (uint32_t)idx >= c->r->u.sample.nregs)
        return -UNW_EBADREG;
    *val = cn_smp__reg_at(c->r, (uint32_t)idx);
    /* A frameless JIT leaf was stepped: the unwind starts at its caller. */
    if (c->frameless_ret && perf == c->arch->perf_ip)
        *val = c->frameless_ret;
    else if (c->frameless_ret && perf == c->arch->perf_sp)
        *val += sizeof(uint64_t);
    /* The link register holds a return address, signed inside pac-ret functions (arm64's
     * vDSO among them): libunwind 1.6 takes it as is when a leaf has no CFI, and then finds
     * no caller (docs/perf-sampler.md "arm64"). */
    if (perf == c->arch->perf_lr)
        *val = c->arch->mask_ret(*val);
    return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t num, unw_fpreg_t *val, int write,
                        void *arg)
{
    return -UNW_EINVAL;
}

static int resume(unw_addr_space_t as, unw_cursor_t *cu, void *arg)
{
    return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
                         unw_word_t *offp, void *arg)
{
    return -UNW_EINVAL;
}

/* Never written: libunwind copies the table into each address space, but its API takes
 * a non-const pointer, so a local copy is handed over. */
static const unw_accessors_t accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = access_reg,
    .access_fpreg = access_fpreg,
    .resume = resume,
    .get_proc_name = get_proc_name,
};

cn_smp__unwinder *cn_smp__unwinder_new(cn_smp__unwind_how how)
{
    cn_smp__unwinder *u = calloc(1, sizeof(*u));
    if (!u)
        return NULL;
    u->how = how;
    unw_accessors_t acc = accessors;
    u->as = unw_create_addr_space(&acc, 0);
    if (!u->as) {
        free(u);
        return NULL;
    }
    unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
    return u;
}

cn_smp__unwinder *cn_smp__unwinder_free(cn_smp__unwinder *u)
{
    if (!u)
        return NULL;
    unw_destroy_addr_space(u->as);
    free(u);
    return NULL;
}

/* Whether the frame at pc (a return address unless leaf) lies in code of its object that
 * is_code (cn_smp__entry_code, cn_smp__init_code) says of the ELF virtual address. */
static bool frame_in(const cn_smp__arch *arch, const cn_smp__proc *p, uint64_t pc, bool leaf,
                     bool (*is_code)(cn_smp__elf *, uint64_t))
{
    uint64_t at = arch->mask_ret(pc) - (leaf ? 0 : 1), bias;
    const cn_smp__map *m = cn_smp__proc_find(p, at);
    return m && m->obj->pub.kind == CN_SMP_OBJ_USER && cn_smp__elf_load(m->obj) == 0 &&
           cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias) &&
           is_code(m->obj->elf, at - bias);
}

/* Whether the frame at pc is in its object's entry-point code without CFI: the process's
 * first frame (cn_smp__entry_code), where libunwind finds no unwind info, as compiled CFI
 * does, and the stack is complete. */
static bool at_entry(const cn_smp__arch *arch, const cn_smp__proc *p, uint64_t pc, bool leaf)
{
    return frame_in(arch, p, pc, leaf, cn_smp__entry_code);
}

/* The return address of a leaf in JIT code that has no frame of its own (before its
 * prologue, after its epilogue, or never one), where the call left it: the word at the
 * stack pointer, when that is in executable memory. Else 0. x86-64 only (arm64's is in
 * the link register, which libunwind's guess reads). libunwind then starts at the caller
 * (access_reg): its frame-chain guess would skip the caller, and its fixup for such a
 * frame reads the caller's frame pointer from memory, skipping the caller's caller. */
static uint64_t frameless_jit_leaf(const cn_smp__arch *arch, const cn_smp__proc *p,
                                   const cn_smp__rec *r, uint64_t pc)
{
    uint64_t top;
    if (arch->perf_lr >= 0 || r->u.sample.stack_size < sizeof(top))
        return 0;
    const cn_smp__map *m = cn_smp__proc_find(p, pc);
    if (!m || m->obj->pub.kind != CN_SMP_OBJ_JIT)
        return 0;
    memcpy(&top, r->u.sample.stack, sizeof(top));
    return top != 0 && cn_smp__proc_find(p, arch->mask_ret(top) - 1) ? top : 0;
}

/* libunwind over the sample: the general case. */
static int unwind_libunwind(cn_smp__unwinder *u, const cn_smp__proc *p, const cn_smp__rec *r,
                            uint64_t *pcs, int max, cn_smp_stop *stop)
{
    const cn_smp__arch *arch = cn_smp__arch_get();
    uctx c = {.p = p, .r = r, .arch = arch, .reason = CN_SMP_STOP_NONE};
    int n = 0;
    *stop = CN_SMP_STOP_OTHER;
    int isp = cn_smp__reg_index(arch->regs_mask, arch->perf_sp);
    int iip = cn_smp__reg_index(arch->regs_mask, arch->perf_ip);
    if (!r->u.sample.regs || isp < 0 || iip < 0 || (uint32_t)isp >= r->u.sample.nregs ||
        (uint32_t)iip >= r->u.sample.nregs || max <= 0)
        return 0;
    c.sp = cn_smp__reg_at(r, (uint32_t)isp);
    if (r->u.sample.stack_size == 0) { /* no stack copied: as cn_smp__unwind_cfi says it */
        pcs[n++] = cn_smp__reg_at(r, (uint32_t)iip);
        *stop = CN_SMP_STOP_BAD_READ;
        return n;
    }
    /* A leaf in its epilogue: the slots it popped are below the copy (cfi.c's step()). */
    c.npopped = cn_smp__cfi_popped(arch, p, r, c.popped_at, c.popped_val);
    c.frameless_ret = frameless_jit_leaf(arch, p, r, cn_smp__reg_at(r, (uint32_t)iip));
    if (c.frameless_ret)
        pcs[n++] = cn_smp__reg_at(r, (uint32_t)iip);
    if (p->pid != u->last_pid) {
        unw_flush_cache(u->as, 0, 0); /* cached rules are per address, hence per process */
        u->last_pid = p->pid;
    }
    unw_cursor_t cur;
    if (unw_init_remote(&cur, u->as, &c) < 0) {
        n = 0;
        pcs[n++] = cn_smp__reg_at(r, (uint32_t)iip);
        *stop = c.reason != CN_SMP_STOP_NONE ? c.reason : CN_SMP_STOP_OTHER;
        return n;
    }
    unw_word_t prev_ip = 0, prev_sp = 0;
    for (;;) {
        unw_word_t ip, sp;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0) {
            *stop = CN_SMP_STOP_NONE;
            break;
        }
        bool have_sp = unw_get_reg(&cur, UNW_REG_SP, &sp) == 0;
        /* A step that made no progress (libunwind 1.6 on a frame whose CFI it cannot
         * read, such as arm64's DW_CFA_AARCH64_negate_ra_state) is no frame: cut short. */
        if (n > 0 && have_sp && ip == prev_ip && sp <= prev_sp) {
            *stop = c.reason != CN_SMP_STOP_NONE ? c.reason : CN_SMP_STOP_OTHER;
            break;
        }
        /* A return address in no executable mapping is no frame: libunwind's frame-chain
         * guess above code without unwind info (JIT code that keeps no frame pointer, such
         * as Python's -X perf trampolines) read a register that held something else. The
         * stack ends at the frame before it, with no unwind info as the reason. */
        if (n > 0 && p->nmaps > 0 && !cn_smp__proc_find(p, arch->mask_ret(ip) - 1)) {
            *stop = CN_SMP_STOP_NO_INFO;
            break;
        }
        prev_ip = ip;
        prev_sp = have_sp ? sp : 0;
        if (n >= max) {
            *stop = CN_SMP_STOP_MAX_DEPTH;
            break;
        }
        pcs[n++] = ip;
        /* The process's first frame (entry code without CFI), or a new thread's (the
         * instructions after clone3's system call), as compiled CFI ends there:
         * libunwind would go on with its frame-chain guess and add what a register held
         * (check_unwind's comparison failed on 1 sample in 12 000, when one landed in
         * ld.so's relocation). */
        if (at_entry(arch, p, ip, n == 1) || (n == 1 && cn_smp__thread_start(arch, p, r))) {
            *stop = CN_SMP_STOP_NONE;
            break;
        }
        /* Only the last step's reason says why the stack ends: an earlier step may have
         * found no CFI (a JIT frame) and still worked, through libunwind's frame-chain
         * guess where the runtime keeps frame pointers (docs/perf-sampler.md, "Interpreters
         * and JITs"). */
        c.reason = CN_SMP_STOP_NONE;
        int ret = unw_step(&cur);
        if (ret > 0)
            continue;
        /* libunwind also ends "normally" when it found no unwind info for the frame (its
         * frame-chain guess gave up): the reason recorded on the way says so. */
        if (ret == 0)
            *stop = c.reason;
        else
            *stop = c.reason != CN_SMP_STOP_NONE ? c.reason
                    : ret == -UNW_ENOINFO        ? CN_SMP_STOP_NO_INFO
                                                 : CN_SMP_STOP_OTHER;
        break;
    }
    /* Reaching the max only matters to a caller who asked for everything. */
    if (*stop == CN_SMP_STOP_MAX_DEPTH && max < CN_SMP_MAX_FRAMES)
        *stop = CN_SMP_STOP_NONE;
    if (*stop == CN_SMP_STOP_NO_INFO && n > 0 && at_entry(arch, p, pcs[n - 1], n == 1))
        *stop = CN_SMP_STOP_NONE;
    assert(n >= 0 && n <= max);
    return n;
}

void cn_smp__unwinder_stats(const cn_smp__unwinder *u, cn_smp__unwind_stats *out)
{
    *out = u->stats;
}

/* Whether a frame of pcs[0..n) is in crti's code (cn_smp__init_code), which compiled CFI
 * steps by its known shape and libunwind cannot (no CFI): no comparison there. */
static bool through_init_code(const cn_smp__arch *arch, const cn_smp__proc *p, const uint64_t *pcs,
                              int n)
{
    for (int i = 0; i < n; i++)
        if (frame_in(arch, p, pcs[i], i == 0, cn_smp__init_code))
            return true;
    return false;
}

/* check_unwind: the first disagreements are written to stderr, both stacks as object +
 * file offset, so that a test failing on one says where (once in CI, 1 sample in ~3 900
 * of test_epilogue_unwind's; none in ~160 000 when looked for). Tests only: nothing else
 * sets check_unwind. */
#define MISMATCHES_SHOWN 3

static void show_stack(const cn_smp__proc *p, const char *what, const uint64_t *pcs, int n,
                       cn_smp_stop stop)
{
    fprintf(stderr, "  %s, %d frames, stop %s:", what, n, cn_smp_stop_name(stop));
    for (int i = 0; i < n; i++) {
        const cn_smp__map *m = cn_smp__proc_find(p, pcs[i]);
        if (m)
            fprintf(stderr, " %s+0x%" PRIx64, m->obj->pub.name, pcs[i] - m->start + m->pgoff);
        else
            fprintf(stderr, " 0x%" PRIx64, pcs[i]);
    }
    fputc('\n', stderr);
}

/* CN_SMP__UNWIND_CHECK: a compiled-CFI result is compared with libunwind's. prefix: only
 * its first n frames (the kernel's chain was joined before the copy's end, which libunwind
 * goes on walking). */
static void check_against_libunwind(cn_smp__unwinder *u, const cn_smp__proc *p,
                                    const cn_smp__rec *r, const uint64_t *pcs, int n, int max,
                                    cn_smp_stop stop, bool prefix)
{
    uint64_t other[CN_SMP_MAX_FRAMES];
    cn_smp_stop ostop;
    if (through_init_code(cn_smp__arch_get(), p, pcs, n))
        return;
    int m =
        unwind_libunwind(u, p, r, other, max < CN_SMP_MAX_FRAMES ? max : CN_SMP_MAX_FRAMES, &ostop);
    u->stats.checked++;
    if ((prefix ? m < n : m != n || ostop != stop) ||
        memcmp(other, pcs, (size_t)n * sizeof(*pcs)) != 0) {
        if (++u->stats.mismatches <= MISMATCHES_SHOWN) {
            fprintf(stderr, "check_unwind: compiled CFI and libunwind disagree (pid %d)%s\n",
                    (int)p->pid, prefix ? ", prefix compared" : "");
            show_stack(p, "compiled CFI", pcs, n, stop);
            show_stack(p, "libunwind", other, m, ostop);
        }
    }
}

int cn_smp__unwind_dwarf(cn_smp__unwinder *u, const cn_smp__proc *p, const cn_smp__rec *r,
                         uint64_t *pcs, int max, cn_smp__fpwalk *fw, cn_smp_stop *stop)
{
    uint64_t fp_steps = fw ? fw->fp_steps : 0;
    if (fw)
        fw->joined_at = -1;
    if (u->how != CN_SMP__UNWIND_LIBUNWIND) {
        cn_smp_fallback why;
        int n = cn_smp__unwind_cfi(cn_smp__arch_get(), p, r, pcs, max, fw, stop, &why);
        assert(n <= max);
        if (n >= 0) {
            u->stats.cfi++;
            /* A stack finished from the kernel's chain: libunwind sees the copy only. */
            if (u->how == CN_SMP__UNWIND_CHECK && fw && fw->joined_at >= 0)
                check_against_libunwind(u, p, r, pcs, fw->joined_at, max, CN_SMP_STOP_STACK_SHORT,
                                        fw->early_join);
            else if (u->how == CN_SMP__UNWIND_CHECK)
                check_against_libunwind(u, p, r, pcs, n, max, *stop, false);
            return n;
        }
        u->stats.why[why < CN_SMP_FB__COUNT ? why : CN_SMP_FB_OTHER]++;
    }
    if (fw)
        fw->fp_steps = fp_steps; /* the walk was abandoned */
    u->stats.libunwind++;
    return unwind_libunwind(u, p, r, pcs, max, stop);
}
