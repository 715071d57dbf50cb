/* Unit tests of symbolizer/: symbol-table rules (sizes, aliases, sizeless symbols), perf
 * maps and kallsyms, ELF objects (PIE, stripped + .gnu_debuglink, inline chains),
 * functions of stripped code from FDE ranges, arm64 ELF (PLT names against objdump's,
 * $x/$d mapping symbols never used as names), corrupt files, the cache's memory bound, the worker
 * thread, and a live tree that keeps a client's focus path valid while symbols arrive (with
 * aggregate's regroup). The ELF tests use the binaries tests/cmake/symbolizer.cmake builds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cn_agg.h"
#include "cn_sym.h"
#include "sym_fuzz.h"
#include "sym_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin_dir[4096];

static int have_bins(void)
{
    const char *b = getenv("CANOPY_BUILD_DIR");
    snprintf(bin_dir, sizeof(bin_dir), "%s/tests/sym", b ? b : ".");
    char p[4200];
    snprintf(p, sizeof(p), "%s/inl_pie", bin_dir);
    return access(p, R_OK) == 0;
}

static void bin_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", bin_dir, name);
}

/* A symbol's file offset in path (via the ELF's .symtab and PT_LOAD), or 0. */
static uint64_t sym_offset(const char *path, const char *name, uint64_t *size)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    uint64_t va = 0, off = 0;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; i < d->d_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            gelf_getsym(d, (int)i, &s);
            const char *n = elf_strptr(elf, sh.sh_link, s.st_name);
            if (n && strcmp(n, name) == 0 && GELF_ST_TYPE(s.st_info) == STT_FUNC) {
                va = s.st_value;
                if (size)
                    *size = s.st_size;
            }
        }
    }
    size_t np = 0;
    elf_getphdrnum(elf, &np);
    for (size_t i = 0; i < np; i++) {
        GElf_Phdr ph;
        gelf_getphdr(elf, (int)i, &ph);
        if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va < ph.p_vaddr + ph.p_filesz)
            off = va - ph.p_vaddr + ph.p_offset;
    }
    elf_end(elf);
    close(fd);
    return off;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Makes a new file from path's XXXXXX template (rewritten with its name) holding text. */
static void temp_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, text);
}

/* --- symbol tables ------------------------------------------------------------------ */

static void test_table_rules(void **state)
{
    (void)state;
    cn_sym__table t = {0};
    /* aliases at 0x100: sized beats sizeless, global beats weak, fewer underscores */
    assert_int_equal(cn_sym__table_add(&t, 0x100, 0, UINT64_MAX, "nosize", 6, 2), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x100, 0x20, UINT64_MAX, "__GI_foo", 8, 2), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x100, 0x20, UINT64_MAX, "foo_weak", 8, 1), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x100, 0x20, UINT64_MAX, "foo", 3, 2), 0);
    /* a sized symbol with a gap after it */
    assert_int_equal(cn_sym__table_add(&t, 0x200, 0x10, UINT64_MAX, "bar", 3, 0), 0);
    /* a sizeless one extends to the next symbol, bounded by its section's end */
    assert_int_equal(cn_sym__table_add(&t, 0x300, 0, 0x380, "asm_label", 9, 0), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x400, 8, UINT64_MAX, "_ZN1A3fooEv", 11, 2), 0);
    /* perf's order past underscores: local beats weak, the longer name, then table order */
    assert_int_equal(cn_sym__table_add(&t, 0x500, 8, UINT64_MAX, "weak_one", 8, 1), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x500, 8, UINT64_MAX, "loc", 3, 0), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x600, 8, UINT64_MAX, "abc", 3, 2), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x600, 8, UINT64_MAX, "abcdef", 6, 2), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x700, 8, UINT64_MAX, "xmemmove", 8, 0), 0);
    assert_int_equal(cn_sym__table_add(&t, 0x700, 8, UINT64_MAX, "xmemcpy_", 8, 0), 0);
    assert_int_equal(cn_sym__table_finish(&t, 0, 0), 0);
    assert_int_equal(t.n, 7);
    assert_string_equal(t.pool + cn_sym__table_find(&t, 0x500)->name, "loc");
    assert_string_equal(t.pool + cn_sym__table_find(&t, 0x600)->name, "abcdef");
    assert_string_equal(t.pool + cn_sym__table_find(&t, 0x700)->name, "xmemmove");
    const cn_sym__entry *e = cn_sym__table_find(&t, 0x11f);
    assert_non_null(e);
    assert_string_equal(t.pool + e->name, "foo");
    assert_null(cn_sym__table_find(&t, 0x120)); /* past foo's end */
    assert_null(cn_sym__table_find(&t, 0xff));
    assert_string_equal(t.pool + cn_sym__table_find(&t, 0x20f)->name, "bar");
    assert_null(cn_sym__table_find(&t, 0x210));
    assert_string_equal(t.pool + cn_sym__table_find(&t, 0x37f)->name, "asm_label");
    assert_null(cn_sym__table_find(&t, 0x380));
    /* Names are kept as the object spells them and demangled when looked up. */
    e = cn_sym__table_find(&t, 0x404);
    assert_string_equal(t.pool + e->name, "_ZN1A3fooEv");
    char *owned;
    assert_string_equal(cn_sym__table_name(&t, e, &owned), "A::foo()");
    assert_non_null(owned);
    free(owned);
    assert_string_equal(cn_sym__table_name(&t, cn_sym__table_find(&t, 0x500), &owned), "loc");
    assert_null(owned);
    cn_sym__table_clear(&t);
}

static void test_demangle(void **state)
{
    (void)state;
    char *s = cn_sym_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
    assert_non_null(s);
    assert_string_equal(s, "std::vector<int, std::allocator<int> >::push_back(int const&)");
    free(s);
    assert_null(cn_sym_demangle("main"));
    s = cn_sym_demangle("_RNvCs1234_7mycrate3foo"); /* Rust v0, as c++filt prints it */
    assert_non_null(s);
    int ok = strcmp(s, "mycrate[3c1c0]::foo") == 0;
    free(s);
    assert_true(ok);
}

static void test_perfmap(void **state)
{
    (void)state;
    char path[] = "/tmp/cn_sym_test_XXXXXX";
    temp_file(path, "1000 10 LazyCompile:~foo file.js:1\n"
                    "garbage line\n"
                    "0x2000 0x20 bar with spaces\n"
                    "1000 10 LazyCompile:*foo file.js:1\n"
                    "3000 0 zero size skipped\n");
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {
        .kind = CN_SYM_JIT, .path = path, .pid = 1, .has_owner = true, .owner_uid = getuid()};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, 0x100f, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "LazyCompile:*foo file.js:1"); /* later wins */
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &o, 0x1010, &r), 0);
    assert_int_equal(r.status, -ENOENT);
    assert_int_equal(cn_sym_lookup(c, &o, 0x201f, &r), 0);
    assert_string_equal(r.chain[0].name, "bar with spaces");
    cn_sym_result_clear(&r);
    /* The map grows: re-read on the next lookup. */
    FILE *f = fopen(path, "a");
    fputs("5000 40 grown\n", f);
    fclose(f);
    assert_int_equal(cn_sym_lookup(c, &o, 0x5001, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "grown");
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
    unlink(path);
}

/* A map rewritten in place, longer than before (a map left in /tmp by an earlier process of
 * the same pid, truncated and written by its successor): read again whole, not "appended"
 * from the old length, which would keep the old names and cut the new file's first bytes. */
static void test_perfmap_rewritten(void **state)
{
    (void)state;
    char path[] = "/tmp/cn_sym_test_XXXXXX";
    temp_file(path, "1000 10 stale_a\n2000 10 stale_b\n");
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {
        .kind = CN_SYM_JIT, .path = path, .pid = 1, .has_owner = true, .owner_uid = getuid()};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, 0x2005, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "stale_b");
    cn_sym_result_clear(&r);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    FILE *f = fopen(path, "w"); /* truncated: the same inode */
    assert_non_null(f);
    fputs("3000 10 fresh_c\n4000 10 fresh_d\n5000 10 fresh_e\n", f);
    fclose(f);
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    assert_int_equal(cn_sym_lookup(c, &o, 0x3005, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "fresh_c");
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &o, 0x1005, &r), 0);
    assert_int_equal(r.status, -ENOENT); /* the old names are gone */
    assert_int_equal(r.map_bytes, (uint64_t)after.st_size);
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
    unlink(path);
}

/* A map rewritten in place to the same size (the same JIT writing the same line at another
 * address, over a map an earlier process of the same pid left): its modification time
 * tells it apart, for the cache and for a caller waiting for the map to change. */
static void test_perfmap_rewritten_same_size(void **state)
{
    (void)state;
    char path[] = "/tmp/cn_sym_test_XXXXXX";
    temp_file(path, "1000 10 old_name\n");
    struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0); /* written long ago */
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {
        .kind = CN_SYM_JIT, .path = path, .pid = 1, .has_owner = true, .owner_uid = getuid()};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, 0x2005, &r), 0);
    assert_int_equal(r.status, -ENOENT);
    uint64_t bytes = r.map_bytes;
    int64_t mtime = r.map_mtime_ns;
    assert_int_equal(mtime, 1000000000LL * 1000000000LL);
    cn_sym_result_clear(&r);
    FILE *f = fopen(path, "w"); /* truncated: the same inode, the same length */
    assert_non_null(f);
    fputs("2000 10 new_name\n", f);
    fclose(f);
    uint64_t size;
    int64_t mtime_now;
    assert_int_equal(cn_sym_perfmap_size(c, &o, &size, &mtime_now), 0);
    assert_int_equal(size, bytes);
    assert_true(mtime_now != mtime);
    assert_int_equal(cn_sym_lookup(c, &o, 0x2005, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "new_name");
    assert_int_equal(r.map_mtime_ns, mtime_now);
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
    unlink(path);
}

/* The perf map's reading rules (cn_sym.h): no symlink followed, no FIFO blocking, the
 * target's owner only, whole lines only, and only the appended part read again. */
static void test_perfmap_rules(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_sym_rules_XXXXXX", map[4200], target[4200];
    assert_non_null(mkdtemp(dir));
    snprintf(map, sizeof(map), "%s/perf-1.map", dir);
    snprintf(target, sizeof(target), "%s/elsewhere", dir);
    write_file(target, "1000 10 secret\n");
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {
        .kind = CN_SYM_JIT, .path = map, .pid = 1, .has_owner = true, .owner_uid = getuid()};
    cn_sym_result r;
    uint64_t size;

    assert_int_equal(symlink(target, map), 0); /* a symlink is refused, never followed */
    assert_int_equal(cn_sym_lookup(c, &o, 0x1001, &r), 0);
    assert_int_equal(r.status, -ELOOP);
    assert_int_equal(cn_sym_perfmap_size(NULL, &o, &size, NULL), -ELOOP);
    unlink(map);

    assert_int_equal(mkfifo(map, 0600), 0); /* a FIFO without a writer: must not block */
    cn_sym_cache_free(c); /* (a failed map is only re-read when its size changes) */
    c = cn_sym_cache_new(NULL);
    assert_int_equal(cn_sym_lookup(c, &o, 0x1001, &r), 0);
    assert_int_equal(r.status, -EINVAL);
    unlink(map);

    write_file(map, "1000 10 mine\n2000 10 par"); /* the last line is not finished */
    o.owner_uid = getuid() + 1;                   /* someone else's map */
    assert_int_equal(cn_sym_lookup(c, &o, 0x1001, &r), 0);
    assert_int_equal(r.status, -EPERM);
    o.owner_uid = getuid();
    assert_int_equal(cn_sym_lookup(c, &o, 0x1001, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "mine");
    assert_int_equal(r.map_bytes, strlen("1000 10 mine\n2000 10 par"));
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &o, 0x2001, &r), 0);
    assert_int_equal(r.status, -ENOENT); /* half a line is not read */

    FILE *f = fopen(map, "a");
    fputs("tial\n3000 10 third\n", f);
    fclose(f);
    assert_int_equal(cn_sym_perfmap_size(c, &o, &size, NULL), 0);
    assert_true(size > r.map_bytes);
    assert_int_equal(cn_sym_lookup(c, &o, 0x2001, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "partial");
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &o, 0x1001, &r), 0); /* kept from the first read */
    assert_string_equal(r.chain[0].name, "mine");
    cn_sym_result_clear(&r);
    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &o, &h), 0);
    cn_sym_object_info info;
    cn_sym_handle_info(h, &info);
    assert_int_equal(info.symbols, 3);
    cn_sym_handle_put(c, h);

    cn_sym_cache_free(c);
    unlink(map);
    unlink(target);
    rmdir(dir);
}

/* A perf map of a process with another root (a chroot here) is resolved in that root: a
 * /tmp there that links to an absolute path must not lead to our file system's file. */
static void test_perfmap_root(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* chroot needs root */
    char dir[] = "/tmp/cn_sym_root_XXXXXX", out[] = "/tmp/cn_sym_out_XXXXXX";
    char p1[4200], p2[4200], path[128];
    assert_non_null(mkdtemp(dir));
    assert_non_null(mkdtemp(out));
    snprintf(p1, sizeof(p1), "%s/perf-77.map", out);
    write_file(p1, "1000 10 host_file\n");
    snprintf(p2, sizeof(p2), "%s/tmp", dir);
    assert_int_equal(symlink(out, p2), 0); /* the target's /tmp -> our out/ */
    int pfd[2], ctl[2];
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(pipe(ctl), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* lives until the test, or the whole binary, is done with it */
        char c = chroot(dir) == 0 && chdir("/") == 0;
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        close(ctl[1]);
        if (write(pfd[1], &c, 1) != 1 || read(ctl[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(ctl[0]);
    char ok = 0;
    assert_int_equal(read(pfd[0], &ok, 1), 1);
    assert_true(ok);
    snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-77.map", (int)child);
    cn_sym__obj o;
    memset(&o, 0, sizeof(o));
    assert_true(cn_sym__perfmap_load(&o, NULL, path, getuid(), NULL) < 0);
    assert_int_equal(o.syms.n, 0);
    cn_sym__obj_clear(&o);
    /* A real /tmp in that root is read. */
    unlink(p2);
    assert_int_equal(mkdir(p2, 0755), 0);
    snprintf(p2, sizeof(p2), "%s/tmp/perf-77.map", dir);
    write_file(p2, "1000 10 in_root\n");
    memset(&o, 0, sizeof(o));
    assert_int_equal(cn_sym__perfmap_load(&o, NULL, path, getuid(), NULL), 0);
    const cn_sym__entry *e = cn_sym__table_find(&o.syms, 0x1001);
    assert_non_null(e);
    assert_string_equal(o.syms.pool + e->name, "in_root");
    cn_sym__obj_clear(&o);
    close(ctl[1]);
    waitpid(child, NULL, 0);
    close(pfd[0]);
    close(pfd[1]);
    unlink(p2);
    snprintf(p2, sizeof(p2), "%s/tmp", dir);
    rmdir(p2);
    rmdir(dir);
    unlink(p1);
    rmdir(out);
}

/* A big perf map is read a bounded part per load (so one target cannot hold the worker),
 * each lookup going on where the last load stopped, until all of it is known. */
static void test_perfmap_budget(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_sym_budget_XXXXXX", map[4200];
    assert_non_null(mkdtemp(dir));
    snprintf(map, sizeof(map), "%s/perf-9.map", dir);
    FILE *f = fopen(map, "w");
    assert_non_null(f);
    enum { LINES = 40000 }; /* ~10 MiB at 256 bytes a line */
    for (int i = 0; i < LINES; i++)
        fprintf(f, "%x 10 jit_%05d_%0230d\n", 0x100000 + i * 0x10, i, 0);
    fclose(f);
    struct stat st;
    assert_int_equal(stat(map, &st), 0);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {
        .kind = CN_SYM_JIT, .path = map, .pid = 9, .has_owner = true, .owner_uid = getuid()};
    cn_sym_result r;
    uint64_t last = 0x100000 + (LINES - 1) * 0x10 + 1;
    int loads = 0;
    for (; loads < 20; loads++) {
        assert_int_equal(cn_sym_lookup(c, &o, last, &r), 0);
        if (loads == 0) {
            assert_int_equal(r.status, -ENOENT); /* not read yet */
            assert_true(r.map_bytes > 0 && r.map_bytes <= (4u << 20));
        }
        int done = r.status == 0;
        if (done)
            assert_non_null(strstr(r.chain[0].name, "jit_39999_"));
        cn_sym_result_clear(&r);
        if (done)
            break;
    }
    /* ceil(size / 4 MiB) loads, the last one finding it. */
    assert_int_equal(loads + 1, (int)((st.st_size + (4 << 20) - 1) / (4 << 20)));
    assert_int_equal(cn_sym_lookup(c, &o, 0x100001, &r), 0); /* the first part is kept */
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.chain[0].name, "jit_00000_"));
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
    unlink(map);
    rmdir(dir);
}

/* [vdso] frames: the kernel's image, read from our own process. */
static void test_vdso(void **state)
{
    (void)state;
    uint64_t base = getauxval(AT_SYSINFO_EHDR);
    if (!base)
        skip(); /* no vDSO on this kernel */
    /* Find clock_gettime's offset in the image with libelf, as the sampler reports it
     * (an offset into the mapping). The ELF header says how far the image reaches. */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(uintptr_t)base;
    size_t len = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    elf_version(EV_CURRENT);
    Elf *elf = elf_memory((char *)(uintptr_t)base, len);
    assert_non_null(elf);
    uint64_t off = 0, load_vaddr = UINT64_MAX;
    size_t nph = 0;
    elf_getphdrnum(elf, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && load_vaddr == UINT64_MAX)
            load_vaddr = ph.p_vaddr - ph.p_offset;
    }
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            const char *name =
                gelf_getsym(d, (int)i, &sym) ? elf_strptr(elf, sh.sh_link, sym.st_name) : NULL;
            if (name && strstr(name, "clock_gettime") && sym.st_value)
                off = sym.st_value - load_vaddr;
        }
    }
    elf_end(elf);
    assert_true(off > 0);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {.kind = CN_SYM_VDSO}; /* no path: the image is the kernel's */
    assert_true(cn_sym_object_valid(&o));
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, off + 1, &r), 0);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.chain[0].name, "clock_gettime"));
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
}

static void test_kallsyms(void **state)
{
    (void)state;
    char path[] = "/tmp/cn_sym_test_XXXXXX";
    temp_file(path, "ffffffff81000000 T _text\n"
                    "ffffffff81000100 t do_thing\n"
                    "ffffffff81000200 D some_data\n"
                    "ffffffff81000300 T next_func\n"
                    "ffffffffc0001000 t mod_func\t[mymod]\n");
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {.kind = CN_SYM_KERNEL, .path = path};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, 0xffffffff81000250, &r), 0);
    assert_string_equal(r.chain[0].name, "do_thing"); /* data symbols are not functions */
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &o, 0xffffffffc0001010, &r), 0);
    assert_string_equal(r.chain[0].name, "mod_func");
    cn_sym_result_clear(&r);
    cn_sym_cache_free(c);
    /* kptr_restrict: every address zero */
    write_file(path, "0000000000000000 T _text\n0000000000000000 t foo\n");
    c = cn_sym_cache_new(NULL);
    assert_int_equal(cn_sym_lookup(c, &o, 0x10, &r), 0);
    assert_int_equal(r.status, -EACCES);
    cn_sym_cache_free(c);
    unlink(path);
    /* the real one, when readable, resolves a well-known kernel function */
    c = cn_sym_cache_new(NULL);
    cn_sym_object k = {.kind = CN_SYM_KERNEL};
    cn_sym_handle *h = NULL;
    if (cn_sym_handle_get(c, &k, &h) == 0) {
        cn_sym_object_info info;
        cn_sym_handle_info(h, &info);
        assert_true(info.symbols > 1000);
        cn_sym_handle_put(c, h);
    }
    cn_sym_cache_free(c);
}

/* --- ELF objects -------------------------------------------------------------------- */

static void check_func(cn_sym_cache *c, const char *file, const char *func, const char *source)
{
    char path[4200];
    bin_path(path, sizeof(path), file);
    char ref[4200];
    bin_path(ref, sizeof(ref), strcmp(file, "inl_stripped") == 0 ? "inl_stripped.debug" : file);
    uint64_t size = 0;
    uint64_t off = sym_offset(strcmp(file, "inl_stripped") == 0 ? path : ref, func, &size);
    if (strcmp(file, "inl_stripped") == 0) { /* no .symtab: take the PIE's (same layout) */
        char pie[4200];
        bin_path(pie, sizeof(pie), "inl_pie");
        off = sym_offset(pie, func, &size);
    }
    assert_true(off != 0 && size > 2);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    cn_sym_result r;
    for (uint64_t d = 0; d < size; d += size / 7 + 1) {
        assert_int_equal(cn_sym_lookup(c, &o, off + d, &r), 0);
        assert_int_equal(r.status, 0);
        assert_true(r.depth >= 1);
        assert_string_equal(r.chain[0].name, func);
        assert_null(r.symbol); /* DWARF and the symbol table agree */
        assert_non_null(r.chain[r.depth - 1].file);
        assert_true(r.chain[r.depth - 1].line > 0);
        assert_int_equal(r.sym_offset, d);
        cn_sym_result_clear(&r);
    }
    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &o, &h), 0);
    cn_sym_object_info info;
    cn_sym_handle_info(h, &info);
    assert_string_equal(info.source, source);
    assert_true(info.has_dwarf);
    const char *name;
    uint64_t start, sz;
    assert_int_equal(cn_sym_handle_symbol(h, off + 1, &name, &start, &sz), 0);
    assert_int_equal(start, off);
    assert_int_equal(sz, size);
    cn_sym_handle_put(c, h);
}

/* Objects nobody looked up for a while leave the cache; held or recent ones stay. */
static void test_cache_expire(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing in %s (build target sym_test_binaries)", bin_dir);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    char a[4200], b[4200];
    bin_path(a, sizeof(a), "inl_pie");
    bin_path(b, sizeof(b), "inl_nopie");
    cn_sym_object oa = {.kind = CN_SYM_USER, .path = a}, ob = {.kind = CN_SYM_USER, .path = b};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &oa, 0x1000, &r), 0);
    cn_sym_result_clear(&r);
    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &ob, &h), 0);
    cn_sym_stats st;
    assert_int_equal(cn_sym_cache_expire(c, 3600LL * 1000000000), 0); /* both recent */
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    assert_int_equal(cn_sym_cache_expire(c, 1000000), 1); /* a; b is held */
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 1);
    cn_sym_handle_put(c, h);
    assert_int_equal(cn_sym_cache_expire(c, 1000000), 1);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(st.evictions, 2);
    /* Looked up again: loaded again. */
    assert_int_equal(cn_sym_lookup(c, &oa, 0x1000, &r), 0);
    cn_sym_result_clear(&r);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 1);
    cn_sym_cache_free(c);
}

static void test_elf_objects(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing in %s (build target sym_test_binaries)", bin_dir);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    check_func(c, "inl_pie", "work_a", "symtab");
    check_func(c, "inl_nopie", "work_b", "symtab");
    check_func(c, "inl_stripped", "work_a", "debug"); /* via .gnu_debuglink */
    /* An inline chain: somewhere in work_a, mix() is inlined (outer first). */
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t size, off = sym_offset(path, "work_a", &size);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    int found = 0;
    for (uint64_t d = 0; d < size && !found; d++) {
        cn_sym_result r;
        assert_int_equal(cn_sym_lookup(c, &o, off + d, &r), 0);
        if (r.depth >= 2 && strcmp(r.chain[r.depth - 1].name, "mix") == 0) {
            found = 1;
            assert_string_equal(r.chain[0].name, "work_a");
            assert_true(r.chain[0].line > 0); /* the call site inside work_a */
        }
        cn_sym_result_clear(&r);
    }
    assert_true(found);
    /* A missing file is reported, not fatal; and an offset outside every segment. */
    cn_sym_object missing = {.kind = CN_SYM_USER, .path = "/nonexistent/lib.so"};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &missing, 0x10, &r), 0);
    assert_int_equal(r.status, -ENOENT);
    assert_int_equal(cn_sym_lookup(c, &o, 0x7fffffff, &r), 0);
    assert_int_equal(r.status, -ENOENT);
    char id[64];
    assert_int_equal(cn_sym_build_id(path, id, sizeof(id)), 40);
    cn_sym_cache_free(c);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    char *buf;
    assert_int_equal(cn_obj_read_file(path, 64u << 20, &buf, len), 0);
    return (uint8_t *)buf;
}

static void test_corrupt_elf(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    size_t len;
    uint8_t *img = slurp(path, &len);
    int full = cn_sym_fuzz_elf(img, len);
    assert_true(full > 5);
    /* Truncations: fewer (or no) symbols, never a crash. */
    for (size_t cut = 0; cut < len; cut += len / 97 + 1)
        assert_true(cn_sym_fuzz_elf(img, cut) <= full);
    /* Bit flips in the headers and tables. */
    uint8_t *copy = malloc(len);
    srand(7);
    for (int round = 0; round < 300; round++) {
        memcpy(copy, img, len);
        for (int k = 0; k < 8; k++) {
            size_t at = round % 2 ? (size_t)rand() % 128 : (size_t)rand() % len;
            copy[at] ^= (uint8_t)(1u << (rand() % 8));
        }
        (void)cn_sym_fuzz_elf(copy, len);
    }
    free(copy);
    free(img);
    assert_true(cn_sym_fuzz_perfmap((const uint8_t *)"1 2 x\n", 6) == 1);
}

/* --- stripped code: functions from FDE ranges ------------------------------------------ */

/* A shared library with two local functions and two exported ones, built by the test and
 * stripped with `strip --strip-all` (.dynsym keeps exported_fn and asm_entry only).
 * asm_entry has no size (hand-written assembly): the gap after it, which the symbol
 * table gives it, covers the local functions that follow (-fno-toplevel-reorder keeps
 * that order), and their FDE ranges must still win there. */
static const char stripped_src[] =
    "__asm__(\".text\\n.globl asm_entry\\n.type asm_entry,@function\\nasm_entry:\\n"
    ".cfi_startproc\\nret\\n.cfi_endproc\\n\");\n"
    "__attribute__((noinline, noclone)) static int local_fn(volatile int *a, int n)\n"
    "{ int s = 0; for (int i = 0; i < n; i++) s += (a[i] * a[i]) ^ i; return s; }\n"
    "__attribute__((noinline, noclone)) static int local_two(int x)\n"
    "{ volatile int y = x; for (int i = 0; i < x; i++) y = y * 3 + i; return y; }\n"
    "int exported_fn(volatile int *a, int n) { return local_fn(a, n) + local_two(n); }\n";

/* Builds DIR/libfde.so (unstripped, for the reference offsets) and DIR/libfde_s.so
 * (stripped). Returns 0, or -1 when the compiler is missing. */
static int build_stripped(const char *dir)
{
    char cmd[8192], src[4200];
    snprintf(src, sizeof(src), "%s/fde.c", dir);
    write_file(src, stripped_src);
    snprintf(cmd, sizeof(cmd),
             "cc -O2 -fPIC -shared -fasynchronous-unwind-tables -fno-toplevel-reorder -o "
             "%s/libfde.so %s && "
             "strip --strip-all -o %s/libfde_s.so %s/libfde.so",
             dir, src, dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void expect_name(cn_sym_cache *c, const char *path, uint64_t off, const char *want)
{
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.depth, 1);
    assert_string_equal(r.chain[0].name, want);
    cn_sym_result_clear(&r);
}

static void test_stripped_fde(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_sym_fde_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(build_stripped(dir), 0);
    char full[4200], stripped[4200];
    snprintf(full, sizeof(full), "%s/libfde.so", dir);
    snprintf(stripped, sizeof(stripped), "%s/libfde_s.so", dir);
    uint64_t lsize = 0, tsize = 0, esize = 0;
    uint64_t loc = sym_offset(full, "local_fn", &lsize);
    uint64_t two = sym_offset(full, "local_two", &tsize);
    uint64_t exp = sym_offset(full, "exported_fn", &esize);
    assert_true(loc && lsize > 4 && two && tsize > 4 && exp && esize > 0);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    /* The unstripped file names its local functions from .symtab. */
    expect_name(c, full, loc + lsize / 2, "local_fn");
    /* Stripped: two addresses inside local_fn share one name, its start (the FDE's
     * start is the function's); local_two gets its own; exported_fn keeps its name. */
    char want[64], want2[64];
    snprintf(want, sizeof(want), "libfde_s.so+0x%" PRIx64, loc);
    snprintf(want2, sizeof(want2), "libfde_s.so+0x%" PRIx64, two);
    expect_name(c, stripped, loc + 1, want);
    expect_name(c, stripped, loc + lsize - 1, want);
    expect_name(c, stripped, two + tsize / 2, want2);
    expect_name(c, stripped, exp, "exported_fn");
    uint64_t asize = 0, asm_off = sym_offset(full, "asm_entry", &asize);
    assert_true(asm_off && asize == 0 && asm_off < loc); /* sizeless, before local_fn */
    expect_name(c, stripped, asm_off, "asm_entry");
    cn_sym_object o = {.kind = CN_SYM_USER, .path = stripped};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, loc + 1, &r), 0);
    assert_int_equal(r.sym_offset, 1);
    cn_sym_result_clear(&r);
    /* A /proc/PID/map_files path does not give the file's name: no FDE names there. */
    char link[4200];
    snprintf(link, sizeof(link), "%s/map_files", dir);
    assert_int_equal(mkdir(link, 0700), 0);
    snprintf(link, sizeof(link), "%s/map_files/1000-2000", dir);
    assert_int_equal(linkat(AT_FDCWD, stripped, AT_FDCWD, link, 0), 0); /* not a symlink */
    cn_sym_object mo = {.kind = CN_SYM_USER, .path = link, .identity = "mapfiles"};
    assert_int_equal(cn_sym_lookup(c, &mo, loc + 1, &r), 0);
    /* (the rules before FDE ranges: here asm_entry's stretched gap) */
    assert_true(r.status < 0 || strcmp(r.chain[0].name, want) != 0);
    cn_sym_result_clear(&r);
    assert_int_equal(cn_sym_lookup(c, &mo, exp, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "exported_fn");
    cn_sym_result_clear(&r);
    unlink(link);
    snprintf(link, sizeof(link), "%s/map_files", dir);
    rmdir(link);
    cn_sym_cache_free(c);

    /* Hostile .eh_frame_hdr: a count past the section, garbage table entries, a
     * truncated section. Fewer ranges, never a crash. */
    size_t len;
    uint8_t *img = slurp(stripped, &len);
    int fd = open(stripped, O_RDONLY);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx, hdr_off = 0, hdr_size = 0;
    assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (n && strcmp(n, ".eh_frame_hdr") == 0) {
            hdr_off = sh.sh_offset;
            hdr_size = sh.sh_size;
        }
    }
    elf_end(elf);
    close(fd);
    assert_true(hdr_off > 0 && hdr_size >= 20 && hdr_off + hdr_size <= len);
    cn_sym__obj ob;
    memset(&ob, 0, sizeof(ob));
    assert_int_equal(cn_sym__elf_load_mem(&ob, img, len), 0);
    size_t nfde = ob.fdes.n;
    assert_true(nfde >= 3); /* local_fn, local_two, exported_fn at least */
    cn_sym__obj_clear(&ob);
    int full_n = cn_sym_fuzz_elf(img, len);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    /* A count the section cannot hold: no ranges at all. */
    memcpy(copy, img, len);
    uint32_t big = 0x7fffffff;
    memcpy(copy + hdr_off + 8, &big, 4);
    memset(&ob, 0, sizeof(ob));
    assert_int_equal(cn_sym__elf_load_mem(&ob, copy, len), 0);
    assert_int_equal(ob.fdes.n, 0);
    cn_sym__obj_clear(&ob);
    /* Garbage table entries (initial locations and FDE pointers anywhere). */
    srand(11);
    for (int round = 0; round < 200; round++) {
        memcpy(copy, img, len);
        for (size_t k = 12; k < hdr_size; k++)
            if (rand() % 3 == 0)
                copy[hdr_off + k] = (uint8_t)rand();
        assert_true(cn_sym_fuzz_elf(copy, len) <= full_n + (int)nfde);
    }
    /* The section cut short: the image ends inside the table. */
    for (size_t cut = hdr_off; cut < hdr_off + hdr_size; cut += 3)
        assert_true(cn_sym_fuzz_elf(img, cut) <= full_n);
    free(copy);
    free(img);
    snprintf(full, sizeof(full), "rm -rf %s", dir);
    assert_int_equal(system(full), 0);
}

/* --- cache bound -------------------------------------------------------------------- */

static void test_cache_bound(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.max_memory = 1; /* everything unreferenced is evicted */
    cfg.lines = false;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    char a[4200], b[4200];
    bin_path(a, sizeof(a), "inl_pie");
    bin_path(b, sizeof(b), "inl_nopie");
    cn_sym_object oa = {.kind = CN_SYM_USER, .path = a}, ob = {.kind = CN_SYM_USER, .path = b};
    cn_sym_handle *ha, *hb;
    assert_int_equal(cn_sym_handle_get(c, &oa, &ha), 0);
    assert_int_equal(cn_sym_handle_get(c, &ob, &hb), 0);
    cn_sym_stats st;
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 2); /* held handles are never evicted */
    cn_sym_handle_put(c, ha);
    cn_sym_handle_put(c, hb);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(st.evictions, 2);
    cn_sym_cache_free(c);
    /* With room, an object loads once and is shared. */
    c = cn_sym_cache_new(NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cn_sym_handle_get(c, &oa, &ha), 0);
        cn_sym_handle_put(c, ha);
    }
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.loads, 1);
    cn_sym_cache_free(c);
}

/* The count and mapped-bytes bounds: LRU, the most recent object exempt. */
static void get_put(cn_sym_cache *c, const char *path)
{
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &o, &h), 0);
    cn_sym_handle_put(c, h);
}

/* Loads path into c and returns how long the load took (cn_sym_object_info.load_ns). */
static int64_t load_time(cn_sym_cache *c, const char *path)
{
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    cn_sym_handle *h;
    cn_sym_object_info info;
    assert_int_equal(cn_sym_handle_get(c, &o, &h), 0);
    cn_sym_handle_info(h, &info);
    cn_sym_handle_put(c, h);
    return info.load_ns;
}

/* The bytes of path's .debug_* sections, read with libelf here: what libdw reads into
 * memory for it (the test binaries' sections are not compressed). */
static size_t debug_bytes(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx, bytes = 0;
    assert_non_null(e);
    assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        assert_non_null(gelf_getshdr(scn, &sh));
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (name && strncmp(name, ".debug_", 7) == 0)
            bytes += sh.sh_size;
    }
    elf_end(e);
    close(fd);
    return bytes;
}

/* Location lists (and macros, name indexes, DWARF CFI) are never read: inl_bigloc is
 * inl_pie with 8 MiB of .debug_loclists, and holds no more debug data than inl_pie, with
 * the same answers (names, lines, inline chains) at every offset of work_a. */
static void test_dwarf_unused_sections_unread(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char big[4200], pie[4200];
    bin_path(big, sizeof(big), "inl_bigloc");
    bin_path(pie, sizeof(pie), "inl_pie");
    assert_true(debug_bytes(big) > (8u << 20));
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.debuginfod = false;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    cn_sym_stats st;
    get_put(c, big);
    cn_sym_cache_stats(c, &st);
    assert_true(st.mapped > 0 && st.mapped < (1u << 20));
    cn_sym_object ob = {.kind = CN_SYM_USER, .path = big}, op = {.kind = CN_SYM_USER, .path = pie};
    uint64_t size, off = sym_offset(pie, "work_a", &size);
    int lines = 0;
    for (uint64_t d = 0; d < size; d++) {
        cn_sym_result rb, rp;
        assert_int_equal(cn_sym_lookup(c, &ob, off + d, &rb), 0);
        assert_int_equal(cn_sym_lookup(c, &op, off + d, &rp), 0);
        assert_int_equal(rb.status, rp.status);
        assert_int_equal(rb.depth, rp.depth);
        for (size_t i = 0; i < rb.depth; i++) {
            assert_string_equal(rb.chain[i].name, rp.chain[i].name);
            assert_int_equal(rb.chain[i].line, rp.chain[i].line);
            lines += rb.chain[i].line > 0;
        }
        cn_sym_result_clear(&rb);
        cn_sym_result_clear(&rp);
    }
    assert_true(lines > 0);
    cn_sym_cache_free(c);
}

static void test_cache_count_and_mapped_bounds(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char a[4200], b[4200], s[4200];
    bin_path(a, sizeof(a), "inl_pie");
    bin_path(b, sizeof(b), "inl_nopie");
    bin_path(s, sizeof(s), "inl_stripped");
    cn_sym_config cfg;
    cn_sym_stats st;
    cn_sym_config_init(&cfg);
    assert_true(cfg.max_objects > 0 && cfg.max_mapped > 0);

    /* At most two objects, least recently used out first (no credit for load times). */
    cfg.lines = false;
    cfg.max_objects = 2;
    cfg.reload_credit = 0;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    get_put(c, a);
    get_put(c, b);
    get_put(c, s); /* evicts a */
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 2);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.mapped, 0); /* no DWARF kept without lines */
    get_put(c, b);                  /* a hit: b is now more recent than s */
    get_put(c, a);                  /* reloads a, evicts s (not b) */
    get_put(c, b);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.loads, 4);
    assert_int_equal(st.objects, 2);
    assert_int_equal(st.evictions, 2);
    cn_sym_cache_free(c);

    /* With a credit for load time that outweighs any recency here, the object that was
     * quicker to load goes first, whichever was used last. */
    cfg.reload_credit = 1000000000;
    c = cn_sym_cache_new(&cfg);
    int64_t load_a = load_time(c, a), load_b = load_time(c, b);
    assert_true(load_a > 0 && load_b > 0 && load_a != load_b);
    get_put(c, s); /* evicts the cheaper of a and b; s is the most recent, exempt */
    get_put(c, load_a > load_b ? a : b); /* the costlier one stayed: no load */
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.loads, 3);
    assert_int_equal(st.evictions, 1);
    get_put(c, load_a > load_b ? b : a); /* the cheaper one went: loaded again */
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.loads, 4);
    cn_sym_cache_free(c);
    cfg.reload_credit = 0;

    /* Debug data: one byte allowed, so only the most recent object keeps its debug data,
     * whatever its size; the others keep their symbol tables (no reload) and read their
     * debug data again when a lookup needs it. Counted: the sections libdw read and its
     * index (CU table, scope rows, line tables). */
    cn_sym_config_init(&cfg);
    cfg.debuginfod = false;
    cfg.max_mapped = 1;
    c = cn_sym_cache_new(&cfg);
    get_put(c, a);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 1); /* the most recent stays */
    size_t dbg_a = debug_bytes(a), dbg_b = debug_bytes(b), slack = 1u << 20;
    struct stat sa;
    assert_int_equal(stat(a, &sa), 0);
    assert_true(dbg_a > 0 && dbg_a < (size_t)sa.st_size);
    /* a carries its own DWARF: its sections, not the file */
    assert_true(st.mapped >= dbg_a && st.mapped < dbg_a + slack);
    get_put(c, b);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 2);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(st.debug_releases, 1); /* a's */
    assert_true(st.mapped >= dbg_b && st.mapped < dbg_b + slack);
    get_put(c, a); /* a hit: b's debug data goes */
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 2);
    assert_int_equal(st.loads, 2);
    assert_int_equal(st.debug_releases, 2);
    assert_int_equal(st.mapped, 0);
    /* a lookup reads a's debug data again and still resolves lines */
    cn_sym_object oa = {.kind = CN_SYM_USER, .path = a};
    uint64_t wsize, woff = sym_offset(a, "work_b", &wsize);
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &oa, woff, &r), 0);
    assert_int_equal(r.status, 0);
    assert_true(r.depth > 0 && r.chain[r.depth - 1].line > 0);
    cn_sym_result_clear(&r);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.loads, 2);
    assert_true(st.mapped >= dbg_a && st.mapped < dbg_a + slack);
    cn_sym_cache_free(c);

    /* Over the heap bound, objects go whole, their debug data with them. */
    cn_sym_config_init(&cfg);
    cfg.debuginfod = false;
    cfg.max_memory = 1;
    cfg.reload_credit = 0;
    c = cn_sym_cache_new(&cfg);
    get_put(c, a);
    get_put(c, b);
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.objects, 0); /* the heap bound has no exemption */
    assert_int_equal(st.evictions, 2);
    assert_int_equal(st.debug_releases, 0);
    assert_int_equal(st.mapped, 0);
    cn_sym_cache_free(c);
}

/* Whether path's object in c has libdw open now (its debug data beyond the index). */
static bool libdw_open(cn_sym_cache *c, const char *path)
{
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &o, &h), 0);
    bool open = cn_sym__dwarf_is_open(((cn_sym__obj *)h)->dw);
    cn_sym_handle_put(c, h);
    return open;
}

/* Every step-th address of [off, off + size) in o resolves, with a line. */
static void assert_lines(cn_sym_cache *c, const cn_sym_object *o, uint64_t off, uint64_t size,
                         uint64_t step)
{
    for (uint64_t at = off; at < off + size; at += step) {
        cn_sym_result r;
        assert_int_equal(cn_sym_lookup(c, o, at, &r), 0);
        assert_int_equal(r.status, 0);
        assert_true(r.depth > 0 && r.chain[r.depth - 1].line > 0);
        cn_sym_result_clear(&r);
    }
}

/* two_cu's second unit (o at off2, size2) names its function, file and line. */
static void assert_second_cu(cn_sym_cache *c, const cn_sym_object *o, uint64_t off2, uint64_t size2)
{
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, o, off2 + size2 / 2, &r), 0);
    assert_int_equal(r.status, 0);
    assert_true(r.depth > 0);
    assert_string_equal(r.chain[0].name, "second_cu_work");
    assert_non_null(strstr(r.chain[r.depth - 1].file, "second_cu.c"));
    assert_true(r.chain[r.depth - 1].line > 0);
    cn_sym_result_clear(&r);
}

/* Debug data released while idle (cn_sym_cache_release_debug): libdw closes (its sections
 * and line tables go), the symbol table and the index of the compilation units looked up
 * stay, the counts follow; a lookup in an indexed unit gives the same answer without
 * libdw, one in another unit opens it again. A held object keeps its debug data, and so
 * does one whose load time earns it a credit longer than its idle time. */
static void test_cache_release_debug(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char a[4200];
    bin_path(a, sizeof(a), "two_cu");
    uint64_t size, off = sym_offset(a, "work_b", &size);
    uint64_t size2, off2 = sym_offset(a, "second_cu_work", &size2);
    cn_sym_object oa = {.kind = CN_SYM_USER, .path = a};
    cn_sym_stats st0, st1, st2, st3;
    cn_sym_result r1, r2;
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.debuginfod = false;
    /* A credit for load time that outweighs any idle time here: kept. */
    cfg.reload_credit = 1000000000;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    get_put(c, a);
    assert_int_equal(cn_sym_cache_release_debug(c, 0), 0);
    cn_sym_cache_free(c);
    cfg.reload_credit = 0; /* idle time alone */
    c = cn_sym_cache_new(&cfg);
    get_put(c, a);
    cn_sym_cache_stats(c, &st0);
    assert_true(st0.mapped > debug_bytes(a)); /* the sections and the CU table */
    assert_int_equal(cn_sym_lookup(c, &oa, off, &r1), 0);
    assert_int_equal(r1.status, 0);
    assert_true(r1.depth > 0 && r1.chain[r1.depth - 1].line > 0);
    cn_sym_cache_stats(c, &st1);
    assert_true(st1.mapped > st0.mapped); /* the CU index and line table, counted */

    cn_sym_handle *h;
    assert_int_equal(cn_sym_handle_get(c, &oa, &h), 0);
    assert_int_equal(cn_sym_cache_release_debug(c, 0), 0); /* held: kept */
    cn_sym_handle_put(c, h);
    assert_int_equal(cn_sym_cache_release_debug(c, 3600LL * 1000000000), 0); /* not idle */
    assert_int_equal(cn_sym_cache_release_debug(c, 0), 1);
    assert_int_equal(cn_sym_cache_release_debug(c, 0), 0); /* nothing left to release */
    assert_false(libdw_open(c, a));
    cn_sym_cache_stats(c, &st2);
    assert_true(st2.mapped > 0 && st2.mapped < st1.mapped / 4); /* the index alone */
    assert_int_equal(st2.debug_releases, 1);
    assert_int_equal(st2.objects, 1);
    assert_int_equal(st2.memory, st0.memory); /* the symbol table stays */

    /* Every address of work_b again: the same answers from the index, libdw closed. */
    assert_int_equal(cn_sym_lookup(c, &oa, off, &r2), 0);
    assert_int_equal(r2.status, 0);
    assert_int_equal(r2.depth, r1.depth);
    for (size_t i = 0; i < r1.depth; i++) {
        assert_string_equal(r2.chain[i].name, r1.chain[i].name);
        assert_int_equal(r2.chain[i].line, r1.chain[i].line);
    }
    cn_sym_result_clear(&r2);
    assert_lines(c, &oa, off, size, 1);
    assert_false(libdw_open(c, a));
    cn_sym_cache_stats(c, &st3);
    assert_int_equal(st3.loads, 1); /* the object was not loaded again */
    assert_int_equal(st3.mapped, st2.mapped);
    assert_int_equal(st3.memory, st0.memory);
    assert_true(st3.max_memory > 0 && st3.max_mapped > 0);

    /* The other unit: libdw opens again and indexes it. */
    assert_second_cu(c, &oa, off2, size2);
    assert_true(libdw_open(c, a));
    cn_sym_cache_stats(c, &st3);
    assert_true(st3.mapped > st2.mapped + debug_bytes(a) / 2); /* the sections again */
    cn_sym_result_clear(&r1);
    cn_sym_result_clear(&r2);
    cn_sym_cache_free(c);
}

/* two_cu, its two units' functions, and a config without debuginfod. */
typedef struct two_cu {
    char path[4200];
    uint64_t off, size;   /* work_b, in inlines.c's unit */
    uint64_t off2, size2; /* second_cu_work, in second_cu.c's */
    cn_sym_object obj;    /* points into path: a two_cu is not copied */
    cn_sym_config cfg;
} two_cu;

static void two_cu_init(two_cu *t)
{
    if (!have_bins())
        fail_msg("test binaries missing");
    bin_path(t->path, sizeof(t->path), "two_cu");
    t->off = sym_offset(t->path, "work_b", &t->size);
    t->off2 = sym_offset(t->path, "second_cu_work", &t->size2);
    t->obj = (cn_sym_object){.kind = CN_SYM_USER, .path = t->path};
    cn_sym_config_init(&t->cfg);
    t->cfg.debuginfod = false;
}

static void assert_debug_counts(cn_sym_cache *c, uint64_t units, uint64_t opens, uint64_t releases)
{
    cn_sym_stats st;
    cn_sym_cache_stats(c, &st);
    assert_int_equal(st.debug_units, units);
    assert_int_equal(st.debug_opens, opens);
    assert_int_equal(st.debug_releases, releases);
}

/* The line tables libdw decodes are bounded (cfg.max_line_tables): past the bound libdw
 * closes after the lookup that indexed a unit, the index answers that unit's addresses,
 * and the next unit not indexed opens libdw again. Counted in debug_opens, debug_units
 * and debug_releases. With the default bound (4 MiB at least) two small units leave it
 * open. */
static void test_dwarf_line_tables_bound(void **state)
{
    (void)state;
    two_cu t;
    two_cu_init(&t);
    t.cfg.max_line_tables = 1;
    cn_sym_cache *c = cn_sym_cache_new(&t.cfg);
    for (int pass = 0; pass < 2; pass++) {
        assert_lines(c, &t.obj, t.off, t.size, 3);
        assert_false(libdw_open(c, t.path));
        assert_second_cu(c, &t.obj, t.off2, t.size2);
        assert_false(libdw_open(c, t.path));
        /* each unit once; the load, then the second unit; closed after each unit */
        assert_debug_counts(c, 2, 2, 2);
    }
    cn_sym_cache_free(c);

    t.cfg.max_line_tables = 0; /* the default */
    c = cn_sym_cache_new(&t.cfg);
    assert_lines(c, &t.obj, t.off, 1, 1);
    assert_second_cu(c, &t.obj, t.off2, t.size2);
    assert_true(libdw_open(c, t.path));
    assert_debug_counts(c, 2, 1, 0);
    cn_sym_cache_free(c);
}

/* Once index_all_after units are indexed in an object loaded index_all_age_ns ago, the
 * rest are indexed at once and libdw closes for good: every address of every unit, and
 * any address in none (the C runtime's _start), is answered without opening it again. */
static void test_dwarf_index_all(void **state)
{
    (void)state;
    two_cu t;
    two_cu_init(&t);
    uint64_t size3, off3 = sym_offset(t.path, "_start", &size3);
    t.cfg.index_all_after = 1;
    t.cfg.index_all_age_ns = 1;
    cn_sym_cache *c = cn_sym_cache_new(&t.cfg);
    assert_lines(c, &t.obj, t.off, t.size, 1); /* its unit, then the other: libdw closes */
    assert_false(libdw_open(c, t.path));
    assert_second_cu(c, &t.obj, t.off2, t.size2);
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &t.obj, off3, &r), 0); /* no unit: the symbol table */
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "_start");
    cn_sym_result_clear(&r);
    assert_false(libdw_open(c, t.path));
    assert_debug_counts(c, 2, 1, 1); /* the load's opening; closed once */
    cn_sym_stats st;
    cn_sym_cache_stats(c, &st);
    assert_true(st.mapped > 0); /* the index */
    cn_sym_cache_free(c);

    /* An object loaded less than index_all_age_ns ago (30 s) is indexed as asked. */
    t.cfg.index_all_age_ns = 0;
    c = cn_sym_cache_new(&t.cfg);
    assert_lines(c, &t.obj, t.off, t.size, 7);
    assert_true(libdw_open(c, t.path));
    assert_debug_counts(c, 1, 1, 0);
    cn_sym_cache_free(c);
}

/* --- worker ------------------------------------------------------------------------- */

static void test_worker(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t size, off = sym_offset(path, "work_b", &size);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_worker *w;
    assert_int_equal(cn_sym_worker_new(c, 100, &w), 0);
    cn_sym_request reqs[50];
    for (int i = 0; i < 50; i++)
        reqs[i] = (cn_sym_request){.tag = (uint64_t)(i % 2),
                                   .cookie = (uint64_t)i,
                                   .obj = {.kind = CN_SYM_USER, .path = path},
                                   .addr = off + (uint64_t)i % size};
    assert_int_equal(cn_sym_worker_submit(w, reqs, 50), 0);
    assert_int_equal(cn_sym_worker_submit(w, reqs, 50), 0);
    assert_int_equal(cn_sym_worker_submit(w, reqs, 1), -EAGAIN); /* bound of 100 pending */
    assert_int_equal(cn_sym_worker_drain(w, 20000), 0);
    struct pollfd p = {.fd = cn_sym_worker_fd(w), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 1);
    cn_sym_worker_cancel(w, 1); /* drops queued answers of tag 1 */
    cn_sym_batch *b;
    assert_int_equal(cn_sym_worker_take(w, &b), 50);
    for (size_t i = 0; i < b->n; i++) {
        assert_int_equal(b->answers[i].tag, 0);
        assert_int_equal(b->answers[i].result.status, 0);
        assert_string_equal(b->answers[i].result.chain[0].name, "work_b");
    }
    cn_sym_batch_free(b);
    assert_int_equal(cn_sym_worker_take(w, &b), 0);
    assert_null(b);
    cn_sym_worker_free(w);
    cn_sym_cache_free(c);
}

/* The pause before a fork (ASan builds, daemon/workers.c) never waits for a lookup: a try
 * during one fails, the thread steps out before its next lookup and signals its fd, and a
 * try then succeeds — within a lookup and a wake-up: nearly every refusal is followed by
 * a success (without the stepping out, 5 tries in 300 succeed, refusals run for hundreds of
 * ms); answers are all there and right afterwards. */
static void test_worker_try_pause(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    enum { N = 100000 };
    const int64_t bound_ns = 1000000000; /* never a second */
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t size, off = sym_offset(path, "work_b", &size);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_worker *w;
    assert_int_equal(cn_sym_worker_new(c, N, &w), 0);
    cn_sym_request *reqs = calloc(N, sizeof(*reqs));
    for (int i = 0; i < N; i++)
        reqs[i] = (cn_sym_request){.cookie = (uint64_t)i,
                                   .obj = {.kind = CN_SYM_USER, .path = path},
                                   .addr = off + (uint64_t)i % size};
    assert_int_equal(cn_sym_worker_submit(w, reqs, N), 0);
    size_t answered = 0, held = 0, refused = 0;
    int64_t refused_since = 0, longest = 0, t0 = cn_common_now_ns();
    while (answered < N && cn_common_now_ns() - t0 < 60 * (int64_t)1000000000) {
        if (cn_sym_worker_try_pause(w)) {
            if (refused_since && cn_common_now_ns() - refused_since > longest)
                longest = cn_common_now_ns() - refused_since;
            refused_since = 0;
            held++;
            usleep(500); /* a fork's length */
            cn_sym_worker_resume(w);
        } else {
            refused++;
            if (!refused_since)
                refused_since = cn_common_now_ns();
        }
        struct pollfd p = {.fd = cn_sym_worker_fd(w), .events = POLLIN};
        if (poll(&p, 1, 1) == 1) {
            cn_sym_batch *b;
            int n = cn_sym_worker_take(w, &b);
            assert_true(n >= 0);
            for (size_t i = 0; b && i < b->n; i++) {
                assert_int_equal(b->answers[i].result.status, 0);
                assert_string_equal(b->answers[i].result.chain[0].name, "work_b");
            }
            answered += (size_t)n;
            cn_sym_batch_free(b);
        }
    }
    if (refused_since && cn_common_now_ns() - refused_since > longest)
        longest = cn_common_now_ns() - refused_since;
    print_message("try_pause over %.0f ms: held %zu times, refused %zu, longest refusal %.1f ms\n",
                  (double)(cn_common_now_ns() - t0) / 1e6, held, refused, (double)longest / 1e6);
    assert_int_equal(answered, N);
    assert_true(refused > 0 && held > 0); /* both paths were taken */
    assert_true(held * 4 >= refused);
    assert_true(longest < bound_ns);
    assert_true(cn_sym_worker_try_pause(w)); /* idle */
    cn_sym_worker_resume(w);
    free(reqs);
    cn_sym_worker_free(w);
    cn_sym_cache_free(c);
}

/* Polls a lookup of o at off until its status is not -ETIMEDOUT (at most 10 s). */
static int settled_status(cn_sym_cache *c, const cn_sym_object *o, uint64_t off)
{
    cn_sym_result r;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(cn_sym_lookup(c, o, off, &r), 0);
        int st = r.status;
        cn_sym_result_clear(&r);
        if (st != -ETIMEDOUT)
            return st;
        usleep(10000);
    }
    return -ETIMEDOUT;
}

/* An ELF load runs in its own thread and a lookup waits for it only so long (here: not at
 * all): the first answer is -ETIMEDOUT, a later lookup gets the object once its load has
 * landed; at most 8 loads may outlast their wait, the next is refused (-EBUSY) without
 * being cached; a cache freed while a load runs leaves that load to end on its own. */
static void test_load_wait(void **state)
{
    (void)state;
    char path[4200], id[32];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t size = 0, off = sym_offset(path, "work_a", &size);
    assert_true(off != 0);
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.load_wait_ms = -1;
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path, .identity = id};
    cn_sym_result r;
    for (int i = 0; i < 8; i++) {
        snprintf(id, sizeof(id), "wait-%d", i);
        assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
        assert_int_equal(r.status, -ETIMEDOUT);
    }
    snprintf(id, sizeof(id), "wait-8");
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, -EBUSY); /* 8 placeholders: no ninth thread */
    snprintf(id, sizeof(id), "wait-0");
    assert_int_equal(settled_status(c, &o, off), 0); /* landed: the placeholder goes */
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.chain[0].name, "work_a");
    cn_sym_result_clear(&r);
    snprintf(id, sizeof(id), "wait-8"); /* room again; it was not cached as refused */
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, -ETIMEDOUT);
    assert_int_equal(settled_status(c, &o, off), 0);
    snprintf(id, sizeof(id), "wait-9"); /* freed while its load runs */
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    cn_sym_cache_free(c);
    usleep(500000); /* (the load ends and frees itself: ASan checks) */
}

/* A placeholder whose load still runs is not evicted: its thread counts against the 8
 * loads that may outlast their wait for as long as it runs, however many other objects
 * push it out of the cache (else each eviction would let one more thread pile up on a
 * stalled file system). The stall: a stripped binary whose debug file is asked of a
 * debuginfod server that accepts the connection and never answers (DEBUGINFOD_TIMEOUT,
 * 3 s, ends the loads). */
static void test_load_wait_evicted(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_evict_XXXXXX", path[4200], cmd[8600], url[64], cache[64], id[32];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/inl_stripped", dir);
    snprintf(cmd, sizeof(cmd), "cp %s/inl_stripped %s", bin_dir, path);
    assert_int_equal(system(cmd), 0);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(ls, 64), 0); /* never accepted: the request is never answered */
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    setenv("DEBUGINFOD_URLS", url, 1);
    setenv("DEBUGINFOD_TIMEOUT", "3", 1);
    setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
    cn_sym_config cfg;
    cn_sym_config_init(&cfg);
    cfg.load_wait_ms = -1;
    cfg.max_objects = 1; /* every placeholder but the newest is over the bound */
    cn_sym_cache *c = cn_sym_cache_new(&cfg);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path, .identity = id};
    cn_sym_result r;
    for (int i = 0; i < 8; i++) {
        snprintf(id, sizeof(id), "evict-%d", i);
        assert_int_equal(cn_sym_lookup(c, &o, 0x1000, &r), 0);
        assert_int_equal(r.status, -ETIMEDOUT);
    }
    snprintf(id, sizeof(id), "evict-8");
    assert_int_equal(cn_sym_lookup(c, &o, 0x1000, &r), 0);
    assert_int_equal(r.status, -EBUSY);  /* the 8 still run: no ninth thread */
    snprintf(id, sizeof(id), "evict-7"); /* the newest, still cached: lands after 3 s */
    assert_int_not_equal(settled_status(c, &o, 0x1000), -ETIMEDOUT);
    usleep(500000); /* (the other seven, started with it, end too: ASan checks) */
    cn_sym_cache_free(c);
    unsetenv("DEBUGINFOD_URLS");
    unsetenv("DEBUGINFOD_TIMEOUT");
    unsetenv("DEBUGINFOD_CACHE_PATH");
    close(ls);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A USER object with the sampler's identity: the file at its path is read only if it is
 * that file (device, inode, size, mtime); a symlink or a FIFO put there is refused
 * without blocking. */
static void test_identity(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_sym_ident_XXXXXX", lib[4200], path[4200], other[4200];
    assert_non_null(mkdtemp(dir));
    bin_path(path, sizeof(path), "inl_pie");
    bin_path(other, sizeof(other), "inl_nopie");
    snprintf(lib, sizeof(lib), "%s/lib.so", dir);
    char cmd[9000];
    snprintf(cmd, sizeof(cmd), "cp -p %s %s", path, lib);
    assert_int_equal(system(cmd), 0);
    uint64_t size = 0, off = sym_offset(lib, "work_a", &size);
    cn_obj_ident id;
    int fd = cn_obj_open(lib, 0, NULL, &id);
    assert_true(fd >= 0);
    close(fd);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = lib, .identity = "ident-1", .file = id};
    cn_sym_result r;
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, 0);
    cn_sym_result_clear(&r);
    /* Renamed, and another file (a copy: same size, another inode) put at the path. */
    char old[4300];
    snprintf(old, sizeof(old), "%s.old", lib);
    assert_int_equal(rename(lib, old), 0);
    snprintf(cmd, sizeof(cmd), "cp -p %s %s", old, lib);
    assert_int_equal(system(cmd), 0);
    o.identity = "ident-2";
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, -ESTALE);
    unlink(lib);
    assert_int_equal(symlink(other, lib), 0);
    o.identity = "ident-3";
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, -ELOOP);
    unlink(lib);
    assert_int_equal(mkfifo(lib, 0600), 0);
    o.identity = "ident-4";
    assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
    assert_int_equal(r.status, -EINVAL);
    unlink(lib);
    unlink(old);
    rmdir(dir);
    cn_sym_cache_free(c);
}

/* A request the symbolizer cannot take is answered -EINVAL; the others in its batch are
 * resolved as usual (it used to fail the whole batch, forever). */
static void test_worker_bad_frame(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t size, off = sym_offset(path, "work_b", &size);
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_worker *w;
    assert_int_equal(cn_sym_worker_new(c, 0, &w), 0);
    cn_sym_request reqs[3] = {
        {.cookie = 0, .obj = {.kind = CN_SYM_USER, .path = path}, .addr = off},
        {.cookie = 1, .obj = {.kind = CN_SYM_USER, .path = NULL}, .addr = 0xb46},
        {.cookie = 2, .obj = {.kind = CN_SYM_USER, .path = path}, .addr = off + 1},
    };
    assert_false(cn_sym_object_valid(&reqs[1].obj));
    assert_int_equal(cn_sym_worker_submit(w, reqs, 3), 0);
    assert_int_equal(cn_sym_worker_drain(w, 20000), 0);
    cn_sym_batch *b;
    assert_int_equal(cn_sym_worker_take(w, &b), 3);
    for (size_t i = 0; i < b->n; i++) {
        if (b->answers[i].cookie == 1) {
            assert_int_equal(b->answers[i].result.status, -EINVAL);
        } else {
            assert_int_equal(b->answers[i].result.status, 0);
            assert_string_equal(b->answers[i].result.chain[0].name, "work_b");
        }
    }
    cn_sym_batch_free(b);
    cn_sym_worker_free(w);
    cn_sym_cache_free(c);
}

/* --- a live tree keeps a held focus path valid while symbols arrive ----------------- */

static double focus_total(cn_agg_profile *p, const cn_agg_transform *t)
{
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.transforms = t;
    q.n_transforms = t ? 1 : 0;
    cn_agg_tree *tree = NULL;
    cn_err err;
    assert_int_equal(cn_agg_query_run(p, &q, &tree, &err), 0);
    double total = tree->total;
    cn_agg_tree_free(tree);
    return total;
}

static void test_live_regroup(void **state)
{
    (void)state;
    if (!have_bins())
        fail_msg("test binaries missing");
    char path[4200];
    bin_path(path, sizeof(path), "inl_pie");
    uint64_t sz_main, sz_a, sz_b;
    uint64_t o_main = sym_offset(path, "main", &sz_main);
    uint64_t o_a = sym_offset(path, "work_a", &sz_a);
    uint64_t o_b = sym_offset(path, "work_b", &sz_b);
    cn_agg_profile *p = cn_agg_profile_new();
    int32_t res = cn_agg_resource(p, "inl_pie", "test-id", path, CN_AGG_RES_LIBRARY);
    assert_true(res >= 0);
    /* Stacks (leaf first): main -> work_b (two addresses), main -> work_a. */
    cn_agg_frame_ref s1[2] = {{res, o_b + 4}, {res, o_main + 2}};
    cn_agg_frame_ref s2[2] = {{res, o_b + sz_b / 2}, {res, o_main + 2}};
    cn_agg_frame_ref s3[2] = {{res, o_a + 3}, {res, o_main + 2}};
    int32_t st1 = cn_agg_stack_from_refs(p, s1, 2), st2 = cn_agg_stack_from_refs(p, s2, 2),
            st3 = cn_agg_stack_from_refs(p, s3, 2);
    assert_true(st1 >= 0 && st2 >= 0 && st3 >= 0);
    for (int i = 0; i < 10; i++) {
        cn_agg_add_sample(p, st1, i, 1, -1);
        cn_agg_add_sample(p, st2, i, 2, -1);
        cn_agg_add_sample(p, st3, i, 4, -1);
    }
    /* The client holds focus on the path main+2 -> work_b+4 (placeholder names). */
    const int32_t *f;
    int32_t fr_main = cn_agg_stack_frame(p, cn_agg_stack_prefix(p, st1));
    int32_t fr_b = cn_agg_stack_frame(p, st1);
    cn_agg_frame_funcs(p, fr_main, &f);
    char spec[1024];
    int n = snprintf(spec, sizeof(spec), "focus:%s;", cn_agg_func_name(p, f[0]));
    cn_agg_frame_funcs(p, fr_b, &f);
    snprintf(spec + n, sizeof(spec) - (size_t)n, "%s", cn_agg_func_name(p, f[0]));
    cn_agg_transform t;
    cn_err err;
    assert_int_equal(cn_agg_transform_parse(spec, &t, &err), 0);
    double all_before = focus_total(p, NULL), focus_before = focus_total(p, &t);
    assert_true(all_before == 70.0);
    assert_true(focus_before == 10.0);

    /* Symbols arrive through the worker; the loop applies them with cn_agg_regroup. */
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    cn_sym_worker *w;
    assert_int_equal(cn_sym_worker_new(c, 0, &w), 0);
    size_t nf = cn_agg_frame_count(p);
    for (size_t i = 0; i < nf; i++) {
        cn_sym_request r = {.tag = 7,
                            .cookie = i,
                            .obj = {.kind = CN_SYM_USER, .path = path, .identity = "test-id"},
                            .addr = (uint64_t)cn_agg_frame_address(p, (int32_t)i)};
        assert_int_equal(cn_sym_worker_submit(w, &r, 1), 0);
    }
    assert_int_equal(cn_sym_worker_drain(w, 20000), 0);
    cn_sym_batch *b;
    assert_int_equal(cn_sym_worker_take(w, &b), (int)nf);
    cn_agg_frame_symbols *fs = calloc(b->n, sizeof(*fs));
    cn_agg_symbol *chains = calloc(b->n * CN_SYM__MAX_INLINE, sizeof(*chains));
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        const cn_sym_result *r = &b->answers[i].result;
        if (r->status < 0)
            continue;
        for (size_t d = 0; d < r->depth; d++)
            chains[i * CN_SYM__MAX_INLINE + d] =
                (cn_agg_symbol){r->chain[d].name, r->chain[d].file, r->chain[d].line};
        fs[k++] = (cn_agg_frame_symbols){(int32_t)b->answers[i].cookie,
                                         &chains[i * CN_SYM__MAX_INLINE], r->depth, r->symbol};
    }
    assert_int_equal(k, nf);
    assert_int_equal(cn_agg_regroup(p, fs, k), 0);
    free(fs);
    free(chains);
    cn_sym_batch_free(b);
    cn_sym_worker_free(w);
    cn_sym_cache_free(c);

    /* Totals unchanged; the held path now names functions and selects the same samples
     * plus the other work_b address, which collapsed into the same function. */
    assert_true(focus_total(p, NULL) == all_before);
    assert_int_equal(cn_agg_remap_transform(p, &t), 1);
    assert_string_equal(t.path[0], "main");
    int has_b = 0;
    for (size_t i = 1; i < t.path_len; i++)
        has_b |= strcmp(t.path[i], "work_b") == 0;
    assert_true(has_b);
    double focus_after = focus_total(p, &t);
    assert_true(focus_after >= focus_before);
    assert_true(focus_after <= 30.0);
    cn_agg_transform_clear(&t);
    cn_agg_profile_free(p);
}

/* --- arm64 ELF: PLT names and mapping symbols ----------------------------------------- */

/* A program with PLT calls (puts, strlen, abs) and a function with a literal word in its
 * code, so that the linker emits a $d mapping symbol inside it ($x symbols mark code). */
static const char arm64_src[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "__asm__(\".text\\n.globl data_fn\\n.type data_fn,%function\\ndata_fn:\\nret\\n"
    ".word 0x12345678\\n.size data_fn, .-data_fn\\n\");\n"
    "int main(int argc, char **argv)\n"
    "{ puts(argv[0]); return (int)strlen(argv[0]) + abs(argc); }\n";

/* vaddr -> file offset through PT_LOAD (0 when outside every segment). */
static uint64_t va_to_off(const char *path, uint64_t va)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    size_t np = 0;
    uint64_t off = 0;
    elf_getphdrnum(elf, &np);
    for (size_t i = 0; i < np; i++) {
        GElf_Phdr ph;
        gelf_getphdr(elf, (int)i, &ph);
        if (ph.p_type == PT_LOAD && va >= ph.p_vaddr && va < ph.p_vaddr + ph.p_filesz)
            off = va - ph.p_vaddr + ph.p_offset;
    }
    elf_end(elf);
    close(fd);
    return off;
}

/* Every "ADDR <NAME@plt>:" label objdump prints for path's .plt (its own reading of the
 * PLT, the oracle) resolves to NAME@plt, at the entry's first and last instruction.
 * Returns the number of entries checked. */
static int check_plt_against_objdump(cn_sym_cache *c, const char *objdump, const char *section,
                                     const char *path, uint64_t entry)
{
    char cmd[4600], line[512], name[256];
    snprintf(cmd, sizeof(cmd), "%s -d -j %s %s", objdump, section, path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    int n = 0;
    unsigned long long va;
    while (fgets(line, sizeof(line), f)) {
        size_t len = 0;
        if (sscanf(line, "%llx <%255[^>]>:", &va, name) != 2 || (len = strlen(name)) < 4 ||
            strcmp(name + len - 4, "@plt") != 0)
            continue; /* x86-64's objdump labels the header NAME@plt-0x10 */
        uint64_t off = va_to_off(path, va);
        assert_true(off > 0);
        expect_name(c, path, off, name);
        expect_name(c, path, off + entry - 4, name);
        n++;
    }
    assert_int_equal(pclose(f), 0);
    return n;
}

/* The lookups at every $x/$d mapping symbol of path's .symtab: none is named after one.
 * Returns how many were looked up. */
static int check_mapping_symbols(cn_sym_cache *c, const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    int n = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; i < d->d_size / sh.sh_entsize; i++) {
            GElf_Sym sym;
            gelf_getsym(d, (int)i, &sym);
            const char *nm = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (!nm || nm[0] != '$' || sym.st_shndx == SHN_UNDEF)
                continue;
            uint64_t off = va_to_off(path, sym.st_value);
            if (off == 0)
                continue;
            cn_sym_result r;
            assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
            if (r.status == 0 && r.depth > 0 && r.chain[0].name[0] == '$')
                fail_msg("%s+0x%" PRIx64 " named after the mapping symbol %s", path, off,
                         r.chain[0].name);
            cn_sym_result_clear(&r);
            n++;
        }
    }
    elf_end(elf);
    close(fd);
    return n;
}

static void test_arm64_elf(void **state)
{
    (void)state;
    if (system("aarch64-linux-gnu-gcc --version >/dev/null 2>&1") != 0) {
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0)
            fail_msg("aarch64-linux-gnu-gcc missing (gcc-aarch64-linux-gnu)");
        skip();
    }
    char dir[] = "/tmp/cn_sym_a64_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char src[4200], cmd[16384];
    snprintf(src, sizeof(src), "%s/a64.c", dir);
    write_file(src, arm64_src);
    /* Plain 16-byte PLT entries, BTI (DT_AARCH64_BTI_PLT) and PAC (DT_AARCH64_PAC_PLT:
     * 24-byte entries). */
    static const struct {
        const char *name, *flags;
        uint64_t entry;
    } v[] = {
        {"plain", "", 16},
        {"bti", "-mbranch-protection=standard -Wl,-z,force-bti", 16},
        {"pac", "-mbranch-protection=standard -Wl,-z,pac-plt", 24},
    };
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char path[4400];
        snprintf(path, sizeof(path), "%s/a64_%s", dir, v[i].name);
        snprintf(cmd, sizeof(cmd), "aarch64-linux-gnu-gcc -O2 %s %s -o %s 2>/dev/null", v[i].flags,
                 src, path);
        assert_int_equal(system(cmd), 0);
        assert_true(check_plt_against_objdump(c, "aarch64-linux-gnu-objdump", ".plt", path,
                                              v[i].entry) >= 3);
        assert_true(check_mapping_symbols(c, path) >= 2);
        uint64_t size = 0, off = sym_offset(path, "data_fn", &size);
        assert_true(off > 0 && size == 8);
        expect_name(c, path, off + 4, "data_fn"); /* the literal word, under $d */
    }
    cn_sym_cache_free(c);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The address of path's section name (0 when absent). */
static uint64_t section_addr(const char *path, const char *name)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    size_t shstrndx = 0;
    assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
    uint64_t addr = 0;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while (!addr && (scn = elf_nextscn(elf, scn)) != NULL) {
        const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (n && strcmp(n, name) == 0)
            addr = sh.sh_addr;
    }
    elf_end(elf);
    close(fd);
    return addr;
}

/* x86-64 PLT entries named by the GOT slot each jumps through, against objdump: a
 * program's .plt, its .plt.sec under IBT (-fcf-protection, -z ibtplt), and Debian's
 * libc.so.6, whose .plt interleaves IRELATIVE entries (`*ABS*+0xRESOLVER@plt`) with named
 * ones in an order that is not .rela.plt's (entry i was named after relocation i before:
 * libc's first entry came out as realloc@plt, objdump's *ABS*+0x9f550@plt). */
static void test_x86_plt(void **state)
{
    (void)state;
#if !defined(__x86_64__)
    skip();
#else
    char dir[] = "/tmp/cn_sym_plt_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char src[4200], cmd[16384], path[4400];
    snprintf(src, sizeof(src), "%s/p.c", dir);
    write_file(src, "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                    "int main(int argc, char **argv)\n"
                    "{ const char *e = getenv(argv[0]); puts(argv[0]); fflush(stdout);\n"
                    "  return (int)strlen(argv[0]) + atoi(e ? e : \"1\") + argc; }\n");
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    static const struct {
        const char *name, *flags, *section;
    } v[] = {
        {"plain", "", ".plt"},
        {"ibt", "-fcf-protection=full -Wl,-z,ibtplt", ".plt.sec"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        snprintf(path, sizeof(path), "%s/p_%s", dir, v[i].name);
        snprintf(cmd, sizeof(cmd), "gcc -O2 %s %s -o %s", v[i].flags, src, path);
        assert_int_equal(system(cmd), 0);
        assert_true(check_plt_against_objdump(c, "objdump", v[i].section, path, 16) >= 3);
        if (i == 0) /* the lazy binder's trampoline, .plt's first 16 bytes */
            expect_name(c, path, va_to_off(path, section_addr(path, ".plt")) + 8, "PLT0@plt");
    }
    const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
    if (access(libc, R_OK) == 0)
        assert_true(check_plt_against_objdump(c, "objdump", ".plt", libc, 16) >= 10);
    cn_sym_cache_free(c);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
#endif
}

/* The file offsets of path's first executable PT_LOAD: [*from, *to). */
static void exec_segment(const char *path, uint64_t *from, uint64_t *to)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(elf);
    size_t np = 0;
    *from = *to = 0;
    elf_getphdrnum(elf, &np);
    for (size_t i = 0; i < np && *to == 0; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            *from = ph.p_offset;
            *to = ph.p_offset + ph.p_filesz;
        }
    }
    elf_end(elf);
    close(fd);
    assert_true(*to > *from);
}

/* Looks up `probes` offsets spread over path's code; for each answer with a range, the
 * range holds the offset and every address of it tested (its ends, its thirds) gets the
 * same name and the same range. Returns how many answers had one. */
static size_t check_ranges(cn_sym_cache *c, const char *path, size_t probes)
{
    uint64_t from, to;
    exec_segment(path, &from, &to);
    cn_sym_object o = {.kind = CN_SYM_USER, .path = path};
    size_t ranged = 0;
    for (size_t k = 0; k < probes; k++) {
        uint64_t off = from + (to - from) * k / probes;
        cn_sym_result r, q;
        assert_int_equal(cn_sym_lookup(c, &o, off, &r), 0);
        if (!(r.range_lo < r.range_hi)) {
            cn_sym_result_clear(&r);
            continue;
        }
        ranged++;
        assert_int_equal(r.status, 0);
        assert_int_equal(r.depth, 1);
        assert_null(r.chain[0].file);
        assert_true(r.range_lo <= off && off < r.range_hi);
        assert_true(r.range_lo >= from && r.range_hi <= to); /* inside the segment */
        uint64_t len = r.range_hi - r.range_lo;
        uint64_t at[] = {r.range_lo, r.range_hi - 1, r.range_lo + len / 3,
                         r.range_lo + 2 * len / 3};
        for (size_t j = 0; j < sizeof(at) / sizeof(at[0]); j++) {
            assert_int_equal(cn_sym_lookup(c, &o, at[j], &q), 0);
            assert_int_equal(q.status, 0);
            assert_int_equal(q.depth, 1);
            assert_string_equal(q.chain[0].name, r.chain[0].name);
            assert_int_equal(q.range_lo, r.range_lo);
            assert_int_equal(q.range_hi, r.range_hi);
            cn_sym_result_clear(&q);
        }
        cn_sym_result_clear(&r);
    }
    return ranged;
}

/* Answers without DWARF carry the range of addresses they hold for (cn_sym_result's
 * range_lo; live/ names new frames inside one without a lookup). Checked on the test
 * library with its symbols, stripped (FDE-named local functions, the exported ones, the
 * sizeless asm_entry's stretched gap) and with DWARF (no range: lines vary), and on
 * Debian's stripped programs: xz, its liblzma, gcc's cc1 (29 000 dynamic symbols). */
static void test_answer_ranges(void **state)
{
    (void)state;
    char dir[] = "/tmp/cn_sym_rng_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(build_stripped(dir), 0);
    char path[4200], cmd[9000];
    cn_sym_cache *c = cn_sym_cache_new(NULL);
    snprintf(path, sizeof(path), "%s/libfde.so", dir);
    assert_true(check_ranges(c, path, 400) > 10);
    snprintf(path, sizeof(path), "%s/libfde_s.so", dir);
    assert_true(check_ranges(c, path, 400) > 10);
    snprintf(cmd, sizeof(cmd), "cc -g -O2 -fPIC -shared -o %s/libfde_g.so %s/fde.c", dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/libfde_g.so", dir);
    assert_int_equal(check_ranges(c, path, 400), 0);
    const char *debian[] = {"/usr/bin/xz", "/lib/x86_64-linux-gnu/liblzma.so.5",
                            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"};
    size_t seen = 0;
    for (size_t i = 0; i < sizeof(debian) / sizeof(debian[0]); i++) {
        char real[4096];
        if (!realpath(debian[i], real))
            continue;
        seen++;
        assert_true(check_ranges(c, real, 2000) > 100);
    }
#if defined(__x86_64__) /* the paths are Debian's amd64 ones: under CI all are there */
    if (getenv("CI") && strcmp(getenv("CI"), "true") == 0)
        assert_int_equal(seen, sizeof(debian) / sizeof(debian[0]));
#endif
    cn_sym_cache_free(c);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rules),
        cmocka_unit_test(test_demangle),
        cmocka_unit_test(test_perfmap),
        cmocka_unit_test(test_kallsyms),
        cmocka_unit_test(test_elf_objects),
        cmocka_unit_test(test_cache_expire),
        cmocka_unit_test(test_corrupt_elf),
        cmocka_unit_test(test_cache_bound),
        cmocka_unit_test(test_cache_count_and_mapped_bounds),
        cmocka_unit_test(test_dwarf_unused_sections_unread),
        cmocka_unit_test(test_cache_release_debug),
        cmocka_unit_test(test_dwarf_line_tables_bound),
        cmocka_unit_test(test_dwarf_index_all),
        cmocka_unit_test(test_worker),
        cmocka_unit_test(test_worker_try_pause),
        cmocka_unit_test(test_live_regroup),
        cmocka_unit_test(test_perfmap_rules),
        cmocka_unit_test(test_perfmap_rewritten),
        cmocka_unit_test(test_perfmap_rewritten_same_size),
        cmocka_unit_test(test_perfmap_root),
        cmocka_unit_test(test_perfmap_budget),
        cmocka_unit_test(test_vdso),
        cmocka_unit_test(test_worker_bad_frame),
        cmocka_unit_test(test_stripped_fde),
        cmocka_unit_test(test_arm64_elf),
        cmocka_unit_test(test_x86_plt),
        cmocka_unit_test(test_answer_ranges),
        cmocka_unit_test(test_load_wait),
        cmocka_unit_test(test_load_wait_evicted),
        cmocka_unit_test(test_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
