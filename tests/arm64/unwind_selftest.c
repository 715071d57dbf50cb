/* unwind_selftest.c — the sampler's arm64 DWARF unwinders run for real, on a snapshot of
 * this process taken the way the kernel fills a PERF_SAMPLE_REGS_USER | STACK_USER sample.
 *
 * README. Cross-compiled with aarch64-linux-gnu-gcc against the cross-built sampler and run
 * under qemu-aarch64 (perf_event_open does not exist there) by tests/arm64/cross.sh, from
 * the ctest tests sampler.aarch64_build and sampler.aarch64_unwind (tests/cmake/sampler.cmake):
 *     ctest --test-dir build -R aarch64 --output-on-failure
 * Built three times: frame pointers (SELFTEST_FP=1), -fomit-frame-pointer (SELFTEST_FP=0),
 * and frame pointers with return-address signing (-mbranch-protection=pac-ret, SELFTEST_PAC=1;
 * qemu's default CPU implements pointer authentication, so saved return addresses carry a
 * signature in their high bits).
 *
 * main -> level_a -> level_b -> level_c -> snap: snap is a leaf with no frame (its return
 * address is still in x30). It stores x0..x30, sp and pc in perf's arm64 order, then copies
 * the stack from sp up to the end of [stack] (at most STACK_MAX bytes, like perf's
 * sample_stack_user). The snapshot is then unwound by compiled CFI (cfi.c), by libunwind
 * (unwind.c) and by the CHECK unwinder that compares the two. Each unwind must give snap,
 * level_c, level_b, level_a, main (names from the executable's .symtab), frame 0 at the
 * sampled pc and every return address (pointer-authentication code stripped with
 * cn_smp__arch_arm64.mask_ret) right after a bl to the function of the frame below; the
 * unwinders must agree. The frame-pointer prologue test runs on the functions' real bytes.
 * Exit 0 on success, 1 with a message
 * naming what differs. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <libunwind.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "smp_internal.h"

#ifndef SELFTEST_FP
#error "build with -DSELFTEST_FP=0 or 1"
#endif
#ifndef SELFTEST_PAC
#define SELFTEST_PAC 0
#endif
#if !defined(__aarch64__)
#error "an aarch64 program: cross-compile it (tests/arm64/cross.sh)"
#endif

#define NREGS     33    /* x0..x30, sp, pc */
#define STACK_MAX 65528 /* perf's largest sample_stack_user */
#define MAX_OBJS  64    /* executable file mappings kept */
#define NLEVELS   5     /* snap, level_c, level_b, level_a, main */
#define NOINLINE  __attribute__((noipa))

typedef struct snapshot {
    uint64_t regs[NREGS];          /* perf order: x0..x30 = 0..30, sp = 31, pc = 32 */
    uint64_t top;                  /* in: end of the stack (exclusive) */
    uint64_t size;                 /* out: bytes copied from sp */
    uint64_t stack[STACK_MAX / 8]; /* the copy, from sp up */
} snapshot;

/* Static: 64 KiB would not be a fair thing to put on the stack being copied. */
static snapshot snapshot_buf;

void snap(snapshot *s);
void level_c(snapshot *s);
void level_b(snapshot *s);
void level_a(snapshot *s);

/* The leaf: no frame, no call. The stores must come first, before the compiler reuses any
 * register; x16/x17 (the intra-procedure-call scratch registers) are clobbered only after
 * they were stored. pc is the adr instruction's own address, inside snap. */
NOINLINE void snap(snapshot *s)
{
    __asm__ volatile("stp x0, x1, [%0, #0]\n\t"
                     "stp x2, x3, [%0, #16]\n\t"
                     "stp x4, x5, [%0, #32]\n\t"
                     "stp x6, x7, [%0, #48]\n\t"
                     "stp x8, x9, [%0, #64]\n\t"
                     "stp x10, x11, [%0, #80]\n\t"
                     "stp x12, x13, [%0, #96]\n\t"
                     "stp x14, x15, [%0, #112]\n\t"
                     "stp x16, x17, [%0, #128]\n\t"
                     "stp x18, x19, [%0, #144]\n\t"
                     "stp x20, x21, [%0, #160]\n\t"
                     "stp x22, x23, [%0, #176]\n\t"
                     "stp x24, x25, [%0, #192]\n\t"
                     "stp x26, x27, [%0, #208]\n\t"
                     "stp x28, x29, [%0, #224]\n\t"
                     "str x30, [%0, #240]\n\t"
                     "mov x16, sp\n\t"
                     "adr x17, .\n\t"
                     "stp x16, x17, [%0, #248]\n\t"
                     :
                     : "r"(s->regs)
                     : "x16", "x17", "memory");
    /* Volatile reads: no memcpy call (a leaf stays a leaf), nothing written below sp. */
    uint64_t sp = s->regs[31], n = s->top > sp ? (s->top - sp) & ~7ULL : 0;
    if (n > STACK_MAX)
        n = STACK_MAX & ~7ULL;
    const volatile uint64_t *src = (const volatile uint64_t *)(uintptr_t)sp;
    for (uint64_t i = 0; i < n / 8; i++)
        s->stack[i] = src[i];
    s->size = n;
}

/* The volatile local gives each level a frame with a slot; the statement after the call
 * keeps the call from becoming a tail call (which would take the level off the stack). */
NOINLINE void level_c(snapshot *s)
{
    volatile uint64_t mark = 3;
    snap(s);
    mark = mark + 1;
}

NOINLINE void level_b(snapshot *s)
{
    volatile uint64_t mark = 2;
    level_c(s);
    mark = mark + 1;
}

NOINLINE void level_a(snapshot *s)
{
    volatile uint64_t mark = 1;
    level_b(s);
    mark = mark + 1;
}

/* ---------------------------------------------------------------------------------------
 * This process's address space, from /proc/self/maps (emulated by qemu for the guest).
 */
typedef struct space {
    cn_smp__proc proc;
    cn_smp__obj *objs[MAX_OBJS];
    size_t nobjs;
    uint64_t stack_end; /* end of [stack], 0 when not found */
} space;

static cn_smp__obj *obj_for(space *sp, const char *path)
{
    for (size_t i = 0; i < sp->nobjs; i++)
        if (strcmp(sp->objs[i]->open_path, path) == 0)
            return sp->objs[i];
    if (sp->nobjs == MAX_OBJS)
        return NULL;
    cn_smp__obj *o = calloc(1, sizeof(*o));
    if (!o || !(o->open_path = strdup(path))) {
        free(o);
        return NULL;
    }
    o->pub.kind = CN_SMP_OBJ_USER;
    o->pub.path = o->open_path;
    const char *slash = strrchr(o->open_path, '/');
    o->pub.name = slash ? slash + 1 : o->open_path;
    sp->objs[sp->nobjs++] = o;
    return o;
}

/* Maps every executable file mapping. Returns 0 or a negative errno. */
static int space_load(space *sp)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4096];
    int ret = 0;
    if (!f)
        return -errno;
    while (ret == 0 && fgets(line, sizeof(line), f)) {
        cn_obj_maps_line ml;
        if (cn_obj_maps_parse_line(line, &ml) < 0) {
            ret = -EINVAL;
            break;
        }
        if (strcmp(ml.path, "[stack]") == 0)
            sp->stack_end = ml.end;
        if (!ml.exec || ml.path[0] != '/')
            continue;
        cn_smp__obj *o = obj_for(sp, ml.path);
        ret = o ? cn_smp__proc_map(&sp->proc, ml.start, ml.end, ml.pgoff, o) : -ENOMEM;
    }
    fclose(f);
    return ret;
}

static void space_free(space *sp)
{
    cn_smp__proc_clear(&sp->proc); /* uncounts the objects' mappings: before they go */
    for (size_t i = 0; i < sp->nobjs; i++) {
        cn_smp__obj_release(sp->objs[i]);
        free(sp->objs[i]->open_path);
        free(sp->objs[i]);
    }
}

/* Name of the function containing addr from the object's .symtab, or NULL (libraries
 * without one). *off receives addr's offset in it. The sampler keeps only the parts of a
 * file unwinding needs (a sparse image), so the symbol table is read from the file itself;
 * the name is copied into name_buf. */
static const char *func_name(const cn_smp__map *m, uint64_t addr, uint64_t *off, char *name_buf,
                             size_t name_size)
{
    uint64_t bias;
    if (cn_smp__elf_load(m->obj) < 0 || !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias))
        return NULL;
    const char *path = m->obj->open_path ? m->obj->open_path : m->obj->pub.path;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    const char *name = NULL;
    Elf_Scn *scn = NULL;
    while (e && !name && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        Elf_Data *d;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
            continue;
        for (size_t i = 0; sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
                addr - bias < sym.st_value || addr - bias >= sym.st_value + sym.st_size)
                continue;
            const char *s = elf_strptr(e, sh.sh_link, sym.st_name);
            if (s) {
                snprintf(name_buf, name_size, "%s", s);
                name = name_buf;
            }
            *off = addr - bias - sym.st_value;
            break;
        }
    }
    if (e)
        elf_end(e);
    if (fd >= 0)
        close(fd);
    return name;
}

/* ---------------------------------------------------------------------------------------
 * Checks
 */
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* The prologue test on the real bytes of the functions: the levels open with
 * stp x29, x30, [sp, #-N]! ... mov x29, sp only in the frame-pointer builds; snap never. */
static void check_prologues(void)
{
    static const struct {
        const char *name;
        void (*fn)(snapshot *);
        bool fp;
    } fns[] = {{"level_a", level_a, SELFTEST_FP},
               {"level_b", level_b, SELFTEST_FP},
               {"level_c", level_c, SELFTEST_FP},
               {"snap", snap, false}};
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const uint8_t *code = (const uint8_t *)(uintptr_t)fns[i].fn;
        uint32_t w[4];
        memcpy(w, code, sizeof(w));
        /* maps.c hands the test 48 bytes of each function. */
        bool got = cn_smp__arch_arm64.fp_prologue(code, 48);
        printf("  fp_prologue(%s) = %s  [%08x %08x %08x %08x]\n", fns[i].name,
               got ? "true" : "false", w[0], w[1], w[2], w[3]);
        CHECK(got == fns[i].fp, "fp_prologue(%s) is %s on a function %s a frame pointer",
              fns[i].name, got ? "true" : "false", fns[i].fp ? "setting up" : "without");
    }
}

/* Target of the bl instruction just before return address ra, or 0 when there is none. */
static uint64_t bl_target(uint64_t ra)
{
    uint32_t w;
    memcpy(&w, (const void *)(uintptr_t)(ra - 4), 4);
    if ((w & 0xfc000000u) != 0x94000000u)
        return 0;
    int64_t off = (int64_t)((uint64_t)(w & 0x03ffffffu) << 38) >> 36; /* imm26 * 4 */
    return ra - 4 + (uint64_t)off;
}

/* Prints the frames of one unwinder and checks the first NLEVELS: frame 0 is the sampled
 * pc, and each return address (signature stripped) follows a bl to the function of the
 * frame below, inside the function the symbol table names. Returns the failures found. */
static int check_frames(const char *who, const space *sp, const snapshot *s, const uint64_t *pcs,
                        int n, cn_smp_stop stop)
{
    static const char *const want[NLEVELS] = {"snap", "level_c", "level_b", "level_a", "main"};
    void (*const callee[NLEVELS])(snapshot *) = {NULL, snap, level_c, level_b, level_a};
    uint64_t (*mask)(uint64_t) = cn_smp__arch_arm64.mask_ret;
    int before = failures, nsigned = 0;
    printf("%s: %d frames, %s\n", who, n, cn_smp_stop_name(stop));
    for (int i = 0; i < n; i++) {
        uint64_t pc = mask(pcs[i]), at = pc - (i > 0), off = 0;
        const cn_smp__map *m = cn_smp__proc_find(&sp->proc, at);
        char name_buf[256];
        const char *name = m ? func_name(m, at, &off, name_buf, sizeof(name_buf)) : NULL;
        nsigned += pcs[i] != pc;
        printf("  #%-2d %#018llx %s%s%s+%#llx%s\n", i, (unsigned long long)pcs[i],
               m ? m->obj->pub.name : "?", name ? ":" : "", name ? name : "",
               (unsigned long long)(name || !m ? off : at - m->start),
               pcs[i] != pc ? "  (signed)" : "");
        if (i >= NLEVELS)
            continue;
        CHECK(name && strcmp(name, want[i]) == 0, "%s: frame %d is in %s, expected %s", who, i,
              name ? name : "?", want[i]);
        if (i == 0)
            CHECK(pc == s->regs[32], "%s: frame 0 is %#llx, the sample's pc %#llx", who,
                  (unsigned long long)pc, (unsigned long long)s->regs[32]);
        else if (m)
            CHECK(bl_target(pc) == (uint64_t)(uintptr_t)callee[i],
                  "%s: frame %d (%#llx) does not follow a call to %s", who, i,
                  (unsigned long long)pc, want[i - 1]);
    }
    CHECK(n > NLEVELS, "%s: %d frames, expected at least %d (main's caller too)", who, n,
          NLEVELS + 1);
    /* The copy reached the end of [stack]: nothing can be missing above it. */
    if (s->size == sp->stack_end - s->regs[31])
        CHECK(stop == CN_SMP_STOP_NONE, "%s: stopped early (%s) with the whole stack copied", who,
              cn_smp_stop_name(stop));
    if (SELFTEST_PAC) {
        printf("  %d signed return address(es)\n", nsigned);
        CHECK(nsigned >= NLEVELS - 2, "%s: pac-ret build, but only %d signed return addresses", who,
              nsigned);
    }
    return failures - before;
}

/* Whether b (nb frames, stop sb) is the same unwind as a. */
static bool same_unwind(const uint64_t *a, int na, cn_smp_stop sa, const uint64_t *b, int nb,
                        cn_smp_stop sb)
{
    return na == nb && sa == sb && memcmp(a, b, (size_t)na * sizeof(*a)) == 0;
}

/* libunwind before 1.7 cannot strip pointer-authentication codes (libunwind PR #360 added
 * the ptrauth_insn_mask accessor): it stops at the first signed return address. */
#define OLD_LIBUNWIND_PAC                                                                          \
    (SELFTEST_PAC && (UNW_VERSION_MAJOR < 1 || (UNW_VERSION_MAJOR == 1 && UNW_VERSION_MINOR < 7)))

/* Runtime address of this executable's first PLT entry (past the 32-byte header), or 0.
 * The PLT has no CFI: a leaf there is what compiled CFI's link-register step is for. */
static uint64_t first_plt_entry(const space *sp)
{
    const cn_smp__map *m = cn_smp__proc_find(&sp->proc, (uint64_t)(uintptr_t)level_a);
    uint64_t bias, plt = 0;
    if (!m || cn_smp__elf_load(m->obj) < 0 ||
        !cn_smp__elf_bias(m->obj->elf, m->start, m->pgoff, &bias))
        return 0;
    Elf *e = elf_memory((char *)m->obj->elf->data, m->obj->elf->size);
    size_t shstr;
    Elf_Scn *scn = NULL;
    if (!e || elf_getshdrstrndx(e, &shstr) != 0) {
        elf_end(e);
        return 0;
    }
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        const char *name;
        if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstr, sh.sh_name)) &&
            strcmp(name, ".plt") == 0 && sh.sh_size >= 48)
            plt = sh.sh_addr + 32 + bias;
    }
    elf_end(e);
    return plt;
}

/* The snapshot moved into a PLT entry (a leaf without CFI, same SP and link register): its
 * callers are snap's (level_c, level_b, ...), through the link register. */
static void unwind_plt_leaf(const space *sp, const cn_smp__rec *r0, const uint64_t *cpcs, int cn,
                            cn_smp_stop cstop)
{
    uint64_t regs[NREGS], pcs[CN_SMP_MAX_FRAMES], plt = first_plt_entry(sp);
    CHECK(plt != 0, "no .plt in the executable");
    if (!plt)
        return;
    memcpy(regs, r0->u.sample.regs, sizeof(regs));
    regs[32] = plt + 4;
    cn_smp__rec r = *r0;
    r.u.sample.ip = regs[32];
    r.u.sample.regs = (const uint8_t *)regs;
    cn_smp_stop stop = CN_SMP_STOP_OTHER;
    int n = cn_smp__unwind_cfi(&cn_smp__arch_arm64, &sp->proc, &r, pcs, CN_SMP_MAX_FRAMES, NULL,
                               &stop, NULL);
    printf("leaf in the PLT (no CFI) at %#llx: %d frames, %s\n", (unsigned long long)regs[32], n,
           n >= 0 ? cn_smp_stop_name(stop) : "gave up");
    CHECK(n == cn && pcs[0] == regs[32] && stop == cstop &&
              memcmp(pcs + 1, cpcs + 1, (size_t)(cn - 1) * sizeof(*pcs)) == 0,
          "a leaf in the PLT does not unwind to snap's callers through the link register");
}

static void unwind_all(const space *sp, const snapshot *s)
{
    cn_smp__rec r = {.type = PERF_RECORD_SAMPLE, .pid = (uint32_t)getpid()};
    r.tid = r.pid;
    r.u.sample.ip = s->regs[32];
    r.u.sample.abi = PERF_SAMPLE_REGS_ABI_64;
    r.u.sample.regs = (const uint8_t *)s->regs;
    r.u.sample.nregs = NREGS;
    r.u.sample.stack = (const uint8_t *)s->stack;
    r.u.sample.stack_size = s->size;

    uint64_t lpcs[CN_SMP_MAX_FRAMES], cpcs[CN_SMP_MAX_FRAMES], kpcs[CN_SMP_MAX_FRAMES];
    cn_smp_stop lstop, cstop = CN_SMP_STOP_OTHER, kstop = CN_SMP_STOP_OTHER;
    cn_smp__unwinder *lu = cn_smp__unwinder_new(CN_SMP__UNWIND_LIBUNWIND);
    cn_smp__unwinder *ku = cn_smp__unwinder_new(CN_SMP__UNWIND_CHECK);
    CHECK(lu && ku, "cn_smp__unwinder_new failed");
    if (!lu || !ku)
        goto out;

    /* Compiled CFI takes these frames whole: it must not hand them to libunwind. */
    int cn = cn_smp__unwind_cfi(&cn_smp__arch_arm64, &sp->proc, &r, cpcs, CN_SMP_MAX_FRAMES, NULL,
                                &cstop, NULL);
    CHECK(cn >= 0, "compiled CFI gave up (%d): a frame needs libunwind", cn);
    if (cn >= 0) {
        check_frames("compiled CFI", sp, s, cpcs, cn, cstop);
        unwind_plt_leaf(sp, &r, cpcs, cn, cstop);
    }

    int ln = cn_smp__unwind_dwarf(lu, &sp->proc, &r, lpcs, CN_SMP_MAX_FRAMES, NULL, &lstop);
    bool lsame = cn >= 0 && same_unwind(cpcs, cn, cstop, lpcs, ln, lstop);
    if (!OLD_LIBUNWIND_PAC || lsame) {
        if (check_frames("libunwind", sp, s, lpcs, ln, lstop) == 0)
            CHECK(lsame, "libunwind and compiled CFI differ");
    } else {
        /* libunwind 1.6 does not know DW_CFA_AARCH64_negate_ra_state: past the first frame
         * that signs its return address (level_c) its frames are wrong, and it stops. What
         * the sampler owes is the frames before that one and a stop that says the unwind
         * is incomplete (cn_smp.h: every early-stopped unwind is counted). */
        printf("libunwind %d.%d (no pointer-authentication support): %d frames, %s\n",
               UNW_VERSION_MAJOR, UNW_VERSION_MINOR, ln, cn_smp_stop_name(lstop));
        for (int i = 0; i < ln; i++)
            printf("  #%-2d %#018llx\n", i, (unsigned long long)lpcs[i]);
        CHECK(ln >= 2 && memcmp(lpcs, cpcs, 2 * sizeof(*lpcs)) == 0,
              "libunwind: snap and level_c are not compiled CFI's first frames");
        CHECK(lstop != CN_SMP_STOP_NONE,
              "libunwind gave %d frames of %d (a pac-ret frame), but the sampler reports the "
              "unwind complete",
              ln, cn);
    }

    int kn = cn_smp__unwind_dwarf(ku, &sp->proc, &r, kpcs, CN_SMP_MAX_FRAMES, NULL, &kstop);
    cn_smp__unwind_stats st;
    cn_smp__unwinder_stats(ku, &st);
    printf("check mode: %d frames, %s; cfi %llu, libunwind %llu, checked %llu, mismatches "
           "%llu\n",
           kn, cn_smp_stop_name(kstop), (unsigned long long)st.cfi,
           (unsigned long long)st.libunwind, (unsigned long long)st.checked,
           (unsigned long long)st.mismatches);
    CHECK(cn < 0 || same_unwind(cpcs, cn, cstop, kpcs, kn, kstop),
          "check mode did not return compiled CFI's frames");
    CHECK(st.checked == (cn >= 0) && st.mismatches == (uint64_t)(cn >= 0 && !lsame),
          "check mode: %llu of %llu mismatched, expected %d", (unsigned long long)st.mismatches,
          (unsigned long long)st.checked, cn >= 0 && !lsame);
out:
    cn_smp__unwinder_free(ku);
    cn_smp__unwinder_free(lu);
}

int main(void)
{
    space sp = {.proc = {.pid = getpid()}};
    setvbuf(stdout, NULL, _IOLBF, 0); /* FAIL lines (stderr) in order with the frames */
    snapshot *s = &snapshot_buf;
    printf("arm64 unwind selftest (%s%s)\n", SELFTEST_FP ? "frame pointers" : "no frame pointers",
           SELFTEST_PAC ? ", pac-ret" : "");
    CHECK(cn_smp__arch_get() == &cn_smp__arch_arm64, "host descriptor is %s, not aarch64",
          cn_smp__arch_get()->name);
    CHECK(__builtin_popcountll(cn_smp__arch_arm64.regs_mask) == NREGS,
          "regs_mask has %d registers, expected %d",
          __builtin_popcountll(cn_smp__arch_arm64.regs_mask), NREGS);
    CHECK(elf_version(EV_CURRENT) != EV_NONE, "libelf refuses EV_CURRENT");
    int ret = space_load(&sp);
    CHECK(ret == 0, "reading /proc/self/maps: %s", strerror(-ret));
    CHECK(cn_smp__proc_find(&sp.proc, (uint64_t)(uintptr_t)main) != NULL,
          "no executable file mapping holds main (qemu's /proc/self/maps?)");
    CHECK(cn_smp__proc_find(&sp.proc, (uint64_t)(uintptr_t)fopen) != NULL,
          "no executable file mapping holds libc");
    if (failures)
        goto out;
    /* Without [stack], copy up to a little above main's own frame. */
    volatile uint64_t local = 0;
    s->top = sp.stack_end ? sp.stack_end : (uint64_t)(uintptr_t)&local + 4096;
    level_a(s);
    local = local + 1;
    printf("snapshot: pc %#llx sp %#llx lr %#llx fp %#llx, %llu stack bytes (stack ends "
           "%#llx)\n",
           (unsigned long long)s->regs[32], (unsigned long long)s->regs[31],
           (unsigned long long)s->regs[30], (unsigned long long)s->regs[29],
           (unsigned long long)s->size, (unsigned long long)s->top);
    check_prologues();
    unwind_all(&sp, s);
out:
    space_free(&sp);
    if (failures) {
        fprintf(stderr, "arm64 unwind selftest: %d check(s) failed\n", failures);
        return 1;
    }
    printf("arm64 unwind selftest: ok\n");
    return 0;
}
