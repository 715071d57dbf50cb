/* test_interp.c — interp/ without a kernel: the three line-table decoders on byte strings, the
 * layout tables (shape, and 3.13's against the interpreter's own _Py_DebugOffsets when pyenv's
 * libpython3.13 is on the machine), and hostile target memory: forged code objects, absurd
 * lengths, unreadable pointers, loops in frame chains. Every read of forged memory goes through
 * a bounded fake address space, so ASan sees any read past what a decoder was given. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "int_internal.h"

/* ---- line tables ---------------------------------------------------------------------- */

static void lnotab_38(void **state)
{
    /* first line 10; (0,+1) (6,+1) (8,+2): bytes 0–5 line 11, 6–13 line 12, 14– line 14 */
    const uint8_t t[] = {0, 1, 6, 1, 8, 2};
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, t, sizeof(t), 10, 0), 11);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, t, sizeof(t), 10, 2), 11);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, t, sizeof(t), 10, 3), 12);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, t, sizeof(t), 10, 7), 14);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, t, sizeof(t), 10, 1000), 14);
    /* a negative delta (signed since 3.6) */
    const uint8_t back[] = {4, 5, 4, (uint8_t)-3};
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, back, sizeof(back), 10, 1), 10);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, back, sizeof(back), 10, 2), 15);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, back, sizeof(back), 10, 4), 12);
}

static void linetable_310(void **state)
{
    /* first 10: [0,4) line 10, [4,10) 11, [10,12) none, [12,16) 13 */
    const uint8_t t[] = {4, 0, 6, 1, 2, 0x80, 4, 2};
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 0), 10);
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 2), 11);
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 4), 11);
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 5), 0);
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 6), 13);
    assert_int_equal(cn_int__line(CN_INT__LT310, t, sizeof(t), 10, 8), 0);
}

static void locations_311(void **state)
{
    const uint8_t t[] = {
        0xe9, 0x02,                   /* no column, 2 units, line +1: [0,2) 11 */
        0x82, 0x05,                   /* short form, 3 units: [2,5) 11 */
        0xd8, 0x01, 0x02,             /* one line, +1, 1 unit: [5,6) 12 */
        0xf8,                         /* no location, 1 unit: [6,7) none */
        0xf1, 0x07, 0x00, 0x01, 0x02, /* long form, −3, 2 units: [7,9) 9 */
        0xe8, 0x48, 0x03,             /* no column, +100 (a two-byte varint): [9,10) 109 */
    };
    const int want[] = {11, 11, 11, 11, 11, 12, 0, 9, 9, 109, 0};
    for (int i = 0; i < (int)(sizeof(want) / sizeof(want[0])); i++)
        assert_int_equal(cn_int__line(CN_INT__LOC311, t, sizeof(t), 10, i), want[i]);
    assert_int_equal(cn_int__line(CN_INT__LOC311, t, sizeof(t), 10, -1), 0);
}

/* Truncated and random tables: no line or some line, never a read past the bytes (ASan). */
static void line_tables_hostile(void **state)
{
    const uint8_t cut[] = {0xf1, 0x47}; /* long form whose varint never ends */
    assert_int_equal(cn_int__line(CN_INT__LOC311, cut, sizeof(cut), 10, 0), 0);
    const uint8_t cont[] = {0x02}; /* no start bit */
    assert_int_equal(cn_int__line(CN_INT__LOC311, cont, sizeof(cont), 10, 0), 0);
    const uint8_t odd[] = {4};
    assert_int_equal(cn_int__line(CN_INT__LT310, odd, sizeof(odd), 10, 0), 0);
    assert_int_equal(cn_int__line(CN_INT__LNOTAB, odd, sizeof(odd), 10, 0), 10);
    assert_int_equal(cn_int__line(CN_INT__LOC311, NULL, 0, 10, 0), 0);
    assert_int_equal(cn_int__line(99, odd, sizeof(odd), 10, 0), 0);
    srand(7);
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(rand() % 64);
        uint8_t *p = malloc(n ? n : 1);
        assert_non_null(p);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)rand();
        for (int f = CN_INT__LNOTAB; f <= CN_INT__LOC311; f++)
            for (int32_t instr = 0; instr < 80; instr += 7)
                assert_true(cn_int__line(f, p, n, 1, instr) >= 0);
        free(p);
    }
}

/* Every instruction of every code object of argparse.py, compiled by each interpreter on the
 * machine: interp/lines.c must give the line CPython itself gives (co_positions from 3.11,
 * co_lines in 3.10, dis.findlinestarts before; tests/data/python/line_oracle.py). */
static const char *const pythons[] = {
    "/usr/bin/python3",
    "/root/.pyenv/versions/3.8.18/bin/python3.8",
    "/root/.pyenv/versions/3.9.18/bin/python3.9",
    "/root/.pyenv/versions/3.10.13/bin/python3.10",
    "/root/.pyenv/versions/3.11.7/bin/python3.11",
    "/root/.pyenv/versions/3.12.1/bin/python3.12",
    "/root/.pyenv/versions/3.13.0/bin/python3.13",
};

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void lines_vs_cpython(void **state)
{
    const char *data = getenv("CANOPY_TEST_DATA");
    size_t ran = 0;
    for (size_t k = 0; k < sizeof(pythons) / sizeof(pythons[0]); k++) {
        if (access(pythons[k], X_OK) < 0)
            continue;
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s %s/python/line_oracle.py", pythons[k],
                 data ? data : "tests/data");
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        char *line = NULL;
        size_t cap = 0;
        uint8_t *table = NULL;
        size_t n = 0, checked = 0, wrong = 0, codes = 0;
        int fmt = -1, first = 0;
        while (getline(&line, &cap, f) > 0) {
            if (line[0] == 'T') {
                char name[16], hex[1 << 16];
                if (strlen(line) >= sizeof(hex) ||
                    sscanf(line, "T %15s %d %65535s", name, &first, hex) != 3) {
                    fmt = -1;
                    continue;
                }
                fmt = strcmp(name, "lnotab") == 0  ? CN_INT__LNOTAB
                      : strcmp(name, "lt310") == 0 ? CN_INT__LT310
                                                   : CN_INT__LOC311;
                free(table);
                n = strcmp(hex, "-") == 0 ? 0 : strlen(hex) / 2;
                table = malloc(n ? n : 1);
                assert_non_null(table);
                for (size_t i = 0; i < n; i++)
                    table[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
                codes++;
            } else if (line[0] == 'L' && fmt >= 0) {
                char *p = line + 1;
                int idx, want, used;
                while (sscanf(p, " %d:%d%n", &idx, &want, &used) == 2) {
                    int got = cn_int__line(fmt, table, n, first, idx);
                    checked++;
                    if (got != want && wrong++ < 5)
                        print_message("%s: first %d instr %d: line %d, CPython says %d\n",
                                      pythons[k], first, idx, got, want);
                    p += used;
                }
            }
        }
        free(line);
        free(table);
        assert_int_equal(pclose(f), 0);
        print_message("[ lines    ] %s: %zu code objects, %zu instructions, %zu wrong\n",
                      pythons[k], codes, checked, wrong);
        assert_true(codes > 50 && checked > 1000);
        assert_int_equal(wrong, 0);
        ran++;
    }
    if (!ran)
        skip();
}

/* ---- layouts ---------------------------------------------------------------------------- */

static void layout_rows(void **state)
{
    for (int minor = 8; minor <= 13; minor++) {
        cn_int__layout l;
        assert_int_equal(cn_int__layout_for(3, minor, &l), 0);
        assert_int_equal(l.minor, minor);
        assert_int_equal(l.abi.kind, minor >= 11 ? CN_INT_ABI_IFRAME : CN_INT_ABI_FRAMEOBJ);
        assert_int_not_equal(l.abi.fr_code, l.abi.fr_previous);
        assert_int_not_equal(l.abi.ts_next, l.abi.ts_thread_id);
        assert_true(l.abi.ts_thread_id < 512 && l.abi.fr_instr < 512);
        assert_true((l.abi.cf_current_frame != CN_INT_ABI_NONE) == (minor == 11 || minor == 12));
        assert_true((l.abi.fr_owner != CN_INT_ABI_NONE) == (minor >= 12));
        assert_true((l.abi.fr_is_entry != CN_INT_ABI_NONE) == (minor == 11));
        assert_true((l.names.co_qualname != CN_INT_ABI_NONE) == (minor >= 11));
        assert_int_equal(l.names.ascii_size, minor >= 12 ? 40 : 48);
        assert_int_equal(l.names.line_format, minor <= 9    ? CN_INT__LNOTAB
                                              : minor == 10 ? CN_INT__LT310
                                                            : CN_INT__LOC311);
        assert_int_equal(l.abi.runtime, 0);
        /* native_thread_id (3.11+): the word after thread_id (cpython/pystate.h) */
        assert_int_equal(l.ts_native_id, minor >= 11 ? l.abi.ts_thread_id + 8 : CN_INT_ABI_NONE);
    }
    cn_int__layout l;
    assert_int_equal(cn_int__layout_for(3, 7, &l), -ENOTSUP);
    assert_int_equal(cn_int__layout_for(3, 14, &l), -ENOTSUP);
    assert_int_equal(cn_int__layout_for(2, 7, &l), -ENOTSUP);
}

static void instr_index(void **state)
{
    cn_int__layout l;
    cn_int__layout_for(3, 9, &l);
    assert_int_equal(cn_int__instr_index(&l.names, 10), 5); /* f_lasti in bytes */
    assert_int_equal(cn_int__instr_index(&l.names, (uint32_t)-1), -1);
    cn_int__layout_for(3, 10, &l);
    assert_int_equal(cn_int__instr_index(&l.names, 10), 10); /* in code units */
    cn_int__layout_for(3, 12, &l);
    assert_int_equal(cn_int__instr_index(&l.names, 10), 5); /* bytes from the first one */
    assert_int_equal(cn_int__instr_index(&l.names, (uint32_t)-2), -1);
}

static void version_names(void **state)
{
    int ma, mi;
    assert_int_equal(cn_int__version_from_name("/usr/bin/python3.11", &ma, &mi), 0);
    assert_true(ma == 3 && mi == 11);
    assert_int_equal(cn_int__version_from_name("/x/lib/libpython3.8.so.1.0", &ma, &mi), 0);
    assert_true(ma == 3 && mi == 8);
    assert_int_equal(cn_int__version_from_name("/usr/bin/python3", &ma, &mi), -ENOENT);
    assert_int_equal(cn_int__version_from_name("/usr/lib/python3.11/x/libfoo.so", &ma, &mi),
                     -ENOENT);
}

/* cn_int__elf_u32 on the libc this test runs with: _thread_db_sizeof_pthread (what
 * cn_int_register reads on arm64 to find pthread_self() from the thread pointer) read from the
 * file equals the value the loaded libc holds; a name the file lacks, a file that is no ELF. */
static void elf_u32_libc(void **state)
{
    const uint32_t *mem = dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
    if (!mem) {
        print_message("[ skip     ] no _thread_db_sizeof_pthread in this process's libc\n");
        skip();
    }
    Dl_info info; /* the file that defines it (not fclose's: ASan intercepts that) */
    assert_true(dladdr(mem, &info) && info.dli_fname);
    int fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint32_t v = 0;
    assert_int_equal(cn_int__elf_u32(fd, "_thread_db_sizeof_pthread", &v), 0);
    assert_int_equal(v, *mem);
    print_message("%s: sizeof(struct pthread) %u\n", info.dli_fname, v);
    assert_int_equal(cn_int__elf_u32(fd, "_thread_db_no_such_thing", &v), -ENOENT);
    assert_int_equal(cn_int__elf_u32(fd, "fclose", &v), -ENOENT); /* a function, not 4 bytes */
    close(fd);
    fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(cn_int__elf_u32(fd, "_thread_db_sizeof_pthread", &v), -ENOEXEC);
    close(fd);
}

/* The tid glibc keeps in a thread's descriptor, read where cn_int__pthread_field says
 * (from the libc file's _thread_db_pthread_tid), is the kernel's tid of the thread whose
 * pthread_self() that is: for this process's main thread (its descriptor in static TLS) and
 * for a thread it starts (on its stack). What cn_int_capture matches a 3.8–3.10 thread
 * state's thread_id by. */
static void *tid_at(void *arg)
{
    uint32_t off = *(const uint32_t *)arg;
    pid_t in_desc;
    memcpy(&in_desc, (const char *)pthread_self() + off, sizeof(in_desc));
    return (void *)(intptr_t)(in_desc == (pid_t)syscall(SYS_gettid) ? 1 : 0);
}

static void pthread_tid_libc(void **state)
{
    const uint32_t *size = dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
    if (!size || !dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid")) {
        print_message("[ skip     ] no _thread_db_ descriptors in this process's libc\n");
        skip();
    }
    Dl_info info;
    assert_true(dladdr(size, &info) && info.dli_fname);
    int fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint32_t desc[3], off = 0;
    assert_int_equal(cn_int__elf_words(fd, "_thread_db_pthread_tid", desc, 3), 0);
    assert_int_equal(cn_int__elf_words(fd, "_thread_db_pthread_tid", desc, 1), -ENOENT);
    close(fd);
    assert_int_equal(cn_int__pthread_field(desc, 32, *size, &off), 0);
    print_message("%s: struct pthread's tid at %u of %u bytes\n", info.dli_fname, off, *size);
    assert_int_equal((intptr_t)tid_at(&off), 1);
    pthread_t t;
    void *ok = NULL;
    assert_int_equal(pthread_create(&t, NULL, tid_at, &off), 0);
    assert_int_equal(pthread_join(t, &ok), 0);
    assert_int_equal((intptr_t)ok, 1);
    /* descriptors that name no single aligned 32-bit field inside the struct */
    const uint32_t bad[][3] = {
        {64, 1, 720}, {32, 0, 720}, {32, 4, 720}, {32, 1, 722}, {32, 1, 2368}, {32, 1, UINT32_MAX},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(cn_int__pthread_field(bad[i], 32, 2368, &off), -EINVAL);
    const uint32_t last[3] = {32, 1, 2364};
    assert_int_equal(cn_int__pthread_field(last, 32, 2368, &off), 0);
    assert_int_equal(off, 2364);
}

/* cn_int__ts_match: one state names a thread, or none does; two states naming one thread (in
 * two interpreters, or a stale one) give none rather than the first; id 0 (unreadable)
 * names no thread even where unreadable states were indexed as 0. */
static void ts_match(void **state)
{
    const cn_int__ts_id v[] = {
        {101, 0x1000, 0}, {102, 0x2000, 0}, {0, 0x3000, 0},   {0, 0x4000, 0},
        {103, 0x5000, 0}, {103, 0x6000, 1}, {104, 0x7000, 1},
    };
    size_t n = sizeof(v) / sizeof(v[0]), at = 99;
    assert_int_equal(cn_int__ts_match(v, n, 102, &at), 1);
    assert_int_equal(at, 1);
    assert_int_equal(cn_int__ts_match(v, n, 104, &at), 1);
    assert_int_equal(at, 6);
    assert_int_equal(cn_int__ts_match(v, n, 103, &at), -EEXIST);
    assert_int_equal(cn_int__ts_match(v, n, 105, &at), 0);
    assert_int_equal(cn_int__ts_match(v, n, 0, &at), 0);
    assert_int_equal(cn_int__ts_match(v, 0, 101, &at), 0);
    assert_int_equal(cn_int__ts_match(NULL, 0, 101, &at), 0);
}

/* A _Py_DebugOffsets block made from the 3.13 row parses back into it; wrong cookie, another
 * version, absurd offsets are refused. */
static void debug_offsets_synthetic(void **state)
{
    uint8_t b[600];
    memset(b, 0, sizeof(b));
    memcpy(b, "xdebugpy", 8);
    uint64_t hex = 0x030d00f0;
    memcpy(b + 8, &hex, 8);
    cn_int__layout l;
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &l), 0);
    hex = 0x030e00f0;
    memcpy(b + 8, &hex, 8);
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &l), -ENOTSUP);
    hex = 0x030d00f0;
    memcpy(b + 8, &hex, 8);
    b[16] = 1; /* free-threaded */
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &l), -ENOTSUP);
    b[16] = 0;
    hex = 0x030d00f0;
    memcpy(b + 8, &hex, 8);
    uint64_t absurd = 1ull << 40;
    memcpy(b + 184, &absurd, 8);
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &l), -EINVAL);
    b[0] = 'y';
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &l), -ENOENT);
    assert_int_equal(cn_int__layout_debug(b, 8, &l), -ENOENT);
}

/* The 3.13 row equals what libpython3.13's own _PyRuntime initializer (.data) says. */
static void debug_offsets_313_file(void **state)
{
    const char *lib = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";
    int fd = open(lib, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        print_message("[ skip     ] %s: not installed\n", lib);
        skip();
    }
    cn_int__elfsyms syms;
    assert_int_equal(cn_int__elf_syms(fd, &syms), 0);
    assert_true(syms.runtime_size >= 600);
    assert_int_equal((syms.version_hex >> 16) & 0xffff, 0x030d);
    /* the file offset of _PyRuntime: through its section */
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    assert_non_null(e);
    Elf_Scn *scn = NULL;
    int64_t off = -1;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_ALLOC) &&
            syms.runtime >= sh.sh_addr && syms.runtime + 600 <= sh.sh_addr + sh.sh_size)
            off = (int64_t)(sh.sh_offset + (syms.runtime - sh.sh_addr));
    }
    elf_end(e);
    assert_true(off > 0);
    uint8_t b[600];
    assert_int_equal(pread(fd, b, sizeof(b), off), (ssize_t)sizeof(b));
    close(fd);
    cn_int__layout got, want;
    assert_int_equal(cn_int__layout_debug(b, sizeof(b), &got), 0);
    assert_int_equal(cn_int__layout_for(3, 13, &want), 0);
    assert_memory_equal(&got.abi, &want.abi, sizeof(got.abi));
    assert_int_equal(got.ts_native_id, want.ts_native_id);
    assert_int_equal(got.names.co_filename, want.names.co_filename);
    assert_int_equal(got.names.co_qualname, want.names.co_qualname);
    assert_int_equal(got.names.co_firstlineno, want.names.co_firstlineno);
    assert_int_equal(got.names.co_linetable, want.names.co_linetable);
    assert_int_equal(got.names.ascii_size, want.names.ascii_size);
    assert_int_equal(got.names.compact_size, want.names.compact_size);
}

/* ---- hostile memory --------------------------------------------------------------------- */

/* A fake address space: one buffer at BASE; reads elsewhere fault. */
#define BASE  0x10000000ull
#define SPACE 65536
typedef struct space {
    uint8_t *mem; /* malloc'ed, exactly SPACE bytes */
    size_t reads;
    bool gone; /* the process exited: every read fails with ESRCH */
} space;

static int fake_read(void *arg, uint64_t addr, void *buf, size_t n)
{
    space *s = arg;
    s->reads++;
    if (s->gone)
        return -ESRCH;
    if (addr < BASE || n > SPACE || addr - BASE > SPACE - n)
        return -EFAULT;
    memcpy(buf, s->mem + (addr - BASE), n);
    return 0;
}

static void put64(space *s, uint64_t addr, uint64_t v)
{
    memcpy(s->mem + (addr - BASE), &v, 8);
}
static void put32(space *s, uint64_t addr, uint32_t v)
{
    memcpy(s->mem + (addr - BASE), &v, 4);
}

/* A type object named name at addr. */
static void put_type(space *s, uint64_t addr, const char *name)
{
    put64(s, addr + 24, addr + 0x100);
    memcpy(s->mem + (addr + 0x100 - BASE), name, strlen(name) + 1);
}

/* A compact ASCII str (3.12 layout: 40-byte header) at addr. */
static void put_ascii(space *s, uint64_t addr, uint64_t str_type, const char *text)
{
    put64(s, addr + 8, str_type);
    put64(s, addr + 16, strlen(text));
    put32(s, addr + 32, (1u << 2) | (1u << 5) | (1u << 6)); /* kind 1, compact, ascii */
    memcpy(s->mem + (addr + 40 - BASE), text, strlen(text));
}

enum { T_CODE = BASE + 0x0, T_STR = BASE + 0x400, T_BYTES = BASE + 0x800, CODE = BASE + 0x1000 };

static void setup_code(space *s, const cn_int__names *n)
{
    put_type(s, T_CODE, "code");
    put_type(s, T_STR, "str");
    put_type(s, T_BYTES, "bytes");
    put64(s, CODE + 8, T_CODE);
    put64(s, CODE + n->co_qualname, BASE + 0x2000);
    put_ascii(s, BASE + 0x2000, T_STR, "Runner.work_c");
    put64(s, CODE + n->co_filename, BASE + 0x2100);
    put_ascii(s, BASE + 0x2100, T_STR, "/srv/app.py");
    put32(s, CODE + n->co_firstlineno, 41);
    put64(s, CODE + n->co_linetable, BASE + 0x2200);
    put64(s, BASE + 0x2200 + 8, T_BYTES);
    put64(s, BASE + 0x2200 + 16, 2);
    s->mem[0x2200 + 32] = 0xe9; /* no column, 2 units, +1 */
    s->mem[0x2200 + 33] = 0x02;
}

static int space_setup(void **state)
{
    space *s = calloc(1, sizeof(*s));
    s->mem = calloc(1, SPACE);
    *state = s;
    return s && s->mem ? 0 : -1;
}

static int space_teardown(void **state)
{
    space *s = *state;
    free(s->mem);
    free(s);
    return 0;
}

static void code_ok(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 12, &l);
    setup_code(s, &l.names);
    cn_int__code c;
    cn_int__types types = {0};
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, &types, &c), 0);
    assert_string_equal(c.name, "Runner.work_c");
    assert_string_equal(c.filename, "/srv/app.py");
    assert_int_equal(c.first_line, 41);
    assert_int_equal(
        cn_int__line(l.names.line_format, c.linetable, c.linetable_len, c.first_line, 1), 42);
    assert_int_equal(types.code, T_CODE);
    cn_int__code_clear(&c);
}

static void code_forged(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 12, &l);
    cn_int__code c;
    setup_code(s, &l.names);
    /* not a code object: its type is called "cod" */
    put_type(s, T_CODE, "cod");
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), -EFAULT);
    assert_null(c.name);
    setup_code(s, &l.names);
    /* pointers outside the space, NULL */
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, 0, NULL, &c), -EFAULT);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, ~0ull - 4, NULL, &c), -EFAULT);
    /* an absurd str length, a negative one, a non-compact str, a wide kind with ascii set */
    put64(s, BASE + 0x2000 + 16, 1ull << 40);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.name);
    assert_string_equal(c.filename, "/srv/app.py");
    cn_int__code_clear(&c);
    put64(s, BASE + 0x2000 + 16, (uint64_t)-5);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.name);
    cn_int__code_clear(&c);
    put64(s, BASE + 0x2000 + 16, 13);
    put32(s, BASE + 0x2000 + 32, (1u << 2)); /* not compact */
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.name);
    cn_int__code_clear(&c);
    put32(s, BASE + 0x2000 + 32, (4u << 2) | (1u << 5) | (1u << 6));
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.name);
    cn_int__code_clear(&c);
    /* a string running off the end of the space */
    put32(s, BASE + 0x2000 + 32, (1u << 2) | (1u << 5) | (1u << 6));
    put64(s, CODE + l.names.co_qualname, BASE + SPACE - 48);
    put64(s, BASE + SPACE - 48 + 8, T_STR);
    put64(s, BASE + SPACE - 48 + 16, 100);
    put32(s, BASE + SPACE - 48 + 32, (1u << 2) | (1u << 5) | (1u << 6));
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.name);
    cn_int__code_clear(&c);
    /* a line table of absurd size, one whose type is not bytes */
    setup_code(s, &l.names);
    put64(s, BASE + 0x2200 + 16, 1ull << 33);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.linetable);
    assert_string_equal(c.name, "Runner.work_c");
    cn_int__code_clear(&c);
    put64(s, BASE + 0x2200 + 16, 2);
    put64(s, BASE + 0x2200 + 8, T_STR);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_null(c.linetable);
    cn_int__code_clear(&c);
}

/* A cached code object is checked against the object now at its address: same pointers,
 * same object; a new name, file or type: another object. */
static void code_same(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 11, &l);
    setup_code(s, &l.names);
    cn_int__code c;
    cn_int__types types = {0};
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, &types, &c), 0);
    assert_true(cn_int__code_same(&l.names, fake_read, s, CODE, &types, &c));
    put64(s, CODE + l.names.co_qualname, BASE + 0x2100); /* another name */
    assert_false(cn_int__code_same(&l.names, fake_read, s, CODE, &types, &c));
    put64(s, CODE + l.names.co_qualname, BASE + 0x2000);
    put64(s, CODE + 8, T_STR); /* now a str lies there */
    assert_false(cn_int__code_same(&l.names, fake_read, s, CODE, &types, &c));
    cn_int__code_clear(&c);
    /* unreadable then and now: the same (nothing to read again) */
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, 8, &types, &c), -EFAULT);
    assert_true(cn_int__code_same(&l.names, fake_read, s, 8, &types, &c));
    cn_int__code_clear(&c);
    /* the process gone (reads fail with ESRCH): what was read while it ran still holds */
    setup_code(s, &l.names);
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, &types, &c), 0);
    s->gone = true;
    assert_true(cn_int__code_same(&l.names, fake_read, s, CODE, &types, &c));
    s->gone = false;
    cn_int__code_clear(&c);
}

/* The check reads the type, name and file words in one read where they lie within 256 bytes
 * (every layout's), in three where a layout (3.13's, from the target's _Py_DebugOffsets)
 * puts them farther apart; the answers are the same either way, and a span the target does
 * not map is unreadable. */
static void code_same_reads(void **state)
{
    space *s = *state;
    cn_int__types types = {.code = T_CODE};
    for (int minor = 8; minor <= 13; minor++) {
        cn_int__layout l;
        assert_int_equal(cn_int__layout_for(3, minor, &l), 0);
        cn_int__names n = l.names;
        uint32_t name_off = n.co_qualname != CN_INT_ABI_NONE ? n.co_qualname : n.co_name;
        cn_int__code c = {.ident = {BASE + 0x2000, BASE + 0x2100}};
        put64(s, CODE + 8, T_CODE);
        put64(s, CODE + name_off, BASE + 0x2000);
        put64(s, CODE + n.co_filename, BASE + 0x2100);
        s->reads = 0;
        assert_true(cn_int__code_same(&n, fake_read, s, CODE, &types, &c));
        assert_int_equal(s->reads, 1);
        put64(s, CODE + n.co_filename, BASE + 0x2000); /* another file */
        assert_false(cn_int__code_same(&n, fake_read, s, CODE, &types, &c));
        put64(s, CODE + n.co_filename, BASE + 0x2100);
        /* far apart: three reads, the same answers */
        n.co_filename = 4000;
        put64(s, CODE + 4000, BASE + 0x2100);
        s->reads = 0;
        assert_true(cn_int__code_same(&n, fake_read, s, CODE, &types, &c));
        assert_int_equal(s->reads, 3);
        put64(s, CODE + 4000, BASE + 0x2000);
        assert_false(cn_int__code_same(&n, fake_read, s, CODE, &types, &c));
        /* an offset past any object, and a code object at the end of the mapped space */
        n.co_filename = 0xffffffffu;
        assert_false(cn_int__code_same(&n, fake_read, s, CODE, &types, &c));
        n = l.names;
        assert_false(cn_int__code_same(&n, fake_read, s, BASE + SPACE - 64, &types, &c));
        cn_int__code none = {0};
        assert_true(cn_int__code_same(&n, fake_read, s, BASE + SPACE - 64, &types, &none));
        memset(s->mem, 0, SPACE);
    }
}

/* UCS-2 and UCS-4 names become UTF-8; a NUL inside becomes U+FFFD. */
static void code_wide_names(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 12, &l);
    setup_code(s, &l.names);
    uint64_t str = BASE + 0x3000;
    put64(s, CODE + l.names.co_qualname, str);
    put64(s, str + 8, T_STR);
    put64(s, str + 16, 3);
    put32(s, str + 32, (2u << 2) | (1u << 5));
    const uint16_t w[] = {0x00e9, 0x4e2d, 0};
    memcpy(s->mem + (str + l.names.compact_size - BASE), w, sizeof(w));
    cn_int__code c;
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_string_equal(c.name, "\xc3\xa9\xe4\xb8\xad\xef\xbf\xbd");
    cn_int__code_clear(&c);
    put32(s, str + 32, (4u << 2) | (1u << 5));
    put64(s, str + 16, 2);
    const uint32_t u[] = {0x1f600, 0x110000};
    memcpy(s->mem + (str + l.names.compact_size - BASE), u, sizeof(u));
    assert_int_equal(cn_int__read_code(&l.names, fake_read, s, CODE, NULL, &c), 0);
    assert_string_equal(c.name, "\xf0\x9f\x98\x80\xef\xbf\xbd");
    cn_int__code_clear(&c);
}

/* Frame chains: a loop is cut at max frames (TRUNCATED); a chain of C-stack shims pointing at
 * itself ends within max + 32 steps with no frame; a frame in unreadable memory ends the walk
 * (FAULT) with the frames before it. 3.12 layout. */
static void walk_hostile(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 12, &l);
    const struct cn_int_abi_layout *a = &l.abi;
    uint64_t ts = BASE + 0x4000, cf = BASE + 0x4400, f1 = BASE + 0x5000, f2 = BASE + 0x5100;
    put64(s, ts + a->ts_frame, cf);
    put64(s, cf + a->cf_current_frame, f1);
    put64(s, f1 + a->fr_code, CODE);
    put64(s, f1 + a->fr_previous, f2);
    put64(s, f1 + a->fr_instr, CODE + a->co_code_adaptive + 6);
    put64(s, f2 + a->fr_code, CODE);
    put64(s, f2 + a->fr_previous, f1); /* the loop */
    cn_int_frame out[CN_INT_MAX_FRAMES];
    int status;
    uint32_t n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
    assert_int_equal(n, CN_INT_MAX_FRAMES);
    assert_int_equal(status, CN_INT_TRUNCATED);
    assert_int_equal(out[0].code, CODE);
    assert_int_equal(out[0].instr, 6);
    /* f2 is a C-stack shim pointing to itself: f1 is an entry frame, then nothing */
    s->mem[f2 + a->fr_owner - BASE] = 3;
    put64(s, f2 + a->fr_previous, f2);
    s->reads = 0;
    n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
    assert_int_equal(n, 1);
    assert_true(out[0].entry);
    assert_true(s->reads < 8 * (CN_INT_MAX_FRAMES + 40));
    /* f1's previous is unreadable, or half readable */
    put64(s, f1 + a->fr_previous, 0x42);
    n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
    assert_int_equal(n, 1);
    assert_int_equal(status, CN_INT_FAULT);
    put64(s, f1 + a->fr_previous, BASE + SPACE - 4);
    n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
    assert_int_equal(n, 1);
    assert_int_equal(status, CN_INT_FAULT);
    /* a thread state outside the space: no frames */
    n = cn_int__walk(a, fake_read, s, 8, out, CN_INT_MAX_FRAMES, &status);
    assert_int_equal(n, 0);
}

/* cn_int_capture's index over forged 3.10 memory: states found by the tid in the glibc
 * descriptor their thread_id points at (pthread_tid_libc shows a real one); a state of an
 * ended thread (tid 0), an unreadable or misaligned thread_id name no thread; a thread with
 * states in two interpreters is ambiguous; a looping thread list ends at the program's
 * bound; without the descriptor's offset no state names a thread. */
static void index_states_310(void **state)
{
    space *s = *state;
    cn_int__layout l;
    assert_int_equal(cn_int__layout_for(3, 10, &l), 0);
    enum {
        RT = BASE + 0x4000,
        IS1 = BASE + 0x4100,
        IS2 = BASE + 0x4200,
        TS = BASE + 0x5000,
        D_MAIN = BASE + 0x8000,
        D_WORK = BASE + 0x9000,
        D_GONE = BASE + 0xa000,
        TID = 720,
    };
    l.abi.runtime = RT;
    put64(s, RT + l.abi.rt_interp_head, IS1);
    put64(s, IS1 + l.abi.is_next, IS2);
    put64(s, IS1 + l.abi.is_threads_head, TS);
    const uint64_t self[] = {D_MAIN, D_WORK, D_GONE, 0xdead0000ull, D_WORK + 1};
    for (int i = 0; i < 5; i++) {
        put64(s, TS + 0x200 * i + l.abi.ts_next, i < 4 ? TS + 0x200 * (i + 1) : 0);
        put64(s, TS + 0x200 * i + l.abi.ts_thread_id, self[i]);
    }
    put32(s, D_MAIN + TID, 100);
    put32(s, D_WORK + TID, 101);
    put32(s, D_GONE + TID, 0);
    const uint64_t sub = TS + 0x200 * 5; /* the worker's state in a sub-interpreter, a loop */
    put64(s, IS2 + l.abi.is_threads_head, sub);
    put64(s, sub + l.abi.ts_next, sub);
    put64(s, sub + l.abi.ts_thread_id, D_WORK);
    size_t cap = (size_t)CN_INT_ABI_MAX_INTERPS * CN_INT_ABI_MAX_THREADS, at = 0;
    cn_int__ts_id *v = calloc(cap, sizeof(*v));
    uint32_t ni = 0;
    size_t n = cn_int__index_states(&l, TID, fake_read, s, v, cap, &ni);
    assert_int_equal(ni, 2);
    assert_int_equal(n, 5 + CN_INT_ABI_MAX_THREADS);
    assert_int_equal(cn_int__ts_match(v, n, 100, &at), 1);
    assert_int_equal(v[at].tstate, TS);
    assert_int_equal(cn_int__ts_match(v, n, 101, &at), -EEXIST);
    for (int i = 2; i < 5; i++)
        assert_int_equal(v[i].id, 0);
    /* without the sub-interpreter the worker is found */
    put64(s, IS1 + l.abi.is_next, 0);
    n = cn_int__index_states(&l, TID, fake_read, s, v, cap, &ni);
    assert_int_equal(ni, 1);
    assert_int_equal(n, 5);
    assert_int_equal(cn_int__ts_match(v, n, 101, &at), 1);
    assert_int_equal(v[at].tstate, TS + 0x200);
    /* the bound of the output, and no offset known */
    assert_int_equal(cn_int__index_states(&l, TID, fake_read, s, v, 2, &ni), 2);
    n = cn_int__index_states(&l, 0, fake_read, s, v, cap, &ni);
    assert_int_equal(cn_int__ts_match(v, n, 100, &at), 0);
    /* an unreadable runtime */
    l.abi.runtime = 0xdead0000ull;
    assert_int_equal(cn_int__index_states(&l, TID, fake_read, s, v, cap, &ni), 0);
    assert_int_equal(ni, 0);
    free(v);
}

/* Reads of the fake space that fault where they touch [HOLE, HOLE + 0x100): memory below a
 * frame that a window read would take and a frame read alone would not. */
#define HOLE (BASE + 0x7b80)
static int holed_read(void *arg, uint64_t addr, void *buf, size_t n)
{
    if (addr < HOLE + 0x100 && addr + n > HOLE)
        return -EFAULT;
    return fake_read(arg, addr, buf, n);
}

/* 3.11+ frames next to each other in a data-stack chunk, each caller below its callee: one
 * read of up to CN_INT_ABI_WINDOW bytes serves several frames, never below the page of the
 * frame read; where the window faults, the frame's own bytes are read, and the frames come
 * out the same. 3.11 layout (is_entry), 20 frames of 0x58 bytes crossing a page. */
static void walk_window(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 11, &l);
    const struct cn_int_abi_layout *a = &l.abi;
    enum { NF = 20, STEP = 0x58 };
    uint64_t ts = BASE + 0x4000, cf = BASE + 0x4400, top = BASE + 0x8300;
    put64(s, ts + a->ts_frame, cf);
    put64(s, cf + a->cf_current_frame, top);
    for (int i = 0; i < NF; i++) {
        uint64_t f = top - (uint64_t)i * STEP;
        put64(s, f + a->fr_code, CODE + 8 * (uint64_t)i);
        put64(s, f + a->fr_previous, i + 1 < NF ? f - STEP : 0);
        put64(s, f + a->fr_instr, CODE + 8 * (uint64_t)i + a->co_code_adaptive + 2 * (uint64_t)i);
        s->mem[f + a->fr_is_entry - BASE] = i % 4 == 3;
    }
    cn_int_frame out[CN_INT_MAX_FRAMES];
    int status;
    for (int holed = 0; holed < 2; holed++) {
        s->reads = 0;
        uint32_t n =
            cn_int__walk(a, holed ? holed_read : fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
        assert_int_equal(n, NF);
        assert_int_equal(status, CN_INT_OK);
        for (int i = 0; i < NF; i++) {
            assert_int_equal(out[i].code, CODE + 8 * (uint64_t)i);
            assert_int_equal(out[i].instr, 2 * i);
            assert_int_equal(out[i].entry, i % 4 == 3);
        }
        /* the frame word, the cframe's, then 0x8300 - 0x8000 (down to the page's start) and
         * one window below 0x8000; holed: the windows below 0x8000 reach the hole, so each
         * frame there is read alone after its window faulted */
        if (!holed)
            assert_int_equal(s->reads, 4);
        else
            assert_true(s->reads > 2 + NF / 2 && s->reads < 2 + 2 * NF);
    }
}

/* The entry check (python.bpf.c entry_checked): the frame that entered the innermost
 * eval-loop call must lead to the current frame of the caller's _PyCFrame. A sample between
 * an eval call's publishing its cframe and writing the cframe's words reads what an earlier
 * call left there: a popped frame whose memory now holds other frames (the first case below)
 * or garbage (STALE, no frames); a chain that ends before any entry frame is no chain of
 * that call's either. 3.11 (is_entry) and 3.12 (the C-stack shim). */
static void walk_entry(void **state)
{
    space *s = *state;
    for (int minor = 11; minor <= 12; minor++) {
        memset(s->mem, 0, SPACE);
        cn_int__layout l;
        cn_int__layout_for(3, minor, &l);
        const struct cn_int_abi_layout *a = &l.abi;
        uint64_t ts = BASE + 0x4000, cf = BASE + 0x4400, caller_cf = BASE + 0x4480;
        uint64_t outer = BASE + 0x5000, f1 = BASE + 0x5100, f2 = BASE + 0x5200;
        uint64_t shim = BASE + 0x5300, other = BASE + 0x5400;
        put64(s, ts + a->ts_frame, cf);
        put64(s, cf + a->cf_current_frame, f1);
        put64(s, cf + a->cf_current_frame + 8, caller_cf); /* _PyCFrame.previous */
        put64(s, caller_cf + a->cf_current_frame, outer);
        put64(s, f1 + a->fr_code, CODE);
        put64(s, f1 + a->fr_previous, f2);
        put64(s, f2 + a->fr_code, CODE);
        put64(s, outer + a->fr_code, CODE);
        if (minor == 11) { /* f2 entered the call */
            s->mem[f2 + a->fr_is_entry - BASE] = 1;
            s->mem[outer + a->fr_is_entry - BASE] = 1;
            put64(s, f2 + a->fr_previous, outer);
        } else { /* the call's shim, then the caller's frames */
            put64(s, f2 + a->fr_previous, shim);
            s->mem[shim + a->fr_owner - BASE] = 3;
            put64(s, shim + a->fr_previous, outer);
        }
        cn_int_frame out[CN_INT_MAX_FRAMES];
        int status;
        uint32_t n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
        assert_int_equal(status, CN_INT_OK);
        assert_int_equal(n, 3);
        assert_true(out[1].entry);
        /* the entry frame leads elsewhere: a frame of another moment */
        put64(s, (minor == 11 ? f2 : shim) + a->fr_previous, other);
        put64(s, other + a->fr_code, CODE);
        n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
        assert_int_equal(status, CN_INT_STALE);
        assert_int_equal(n, 0);
        /* no entry frame at all before the chain ends */
        put64(s, f1 + a->fr_previous, 0);
        n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
        assert_int_equal(status, CN_INT_STALE);
        assert_int_equal(n, 0);
        /* a cframe without a previous one: nothing to check against */
        put64(s, cf + a->cf_current_frame + 8, 0);
        n = cn_int__walk(a, fake_read, s, ts, out, CN_INT_MAX_FRAMES, &status);
        assert_int_equal(status, CN_INT_OK);
        assert_int_equal(n, 1);
    }
}

/* The epoch's batched check merges nearby spans into one read each: a gap up to
 * CN_INT__RUN_GAP joins, a larger one or a run past CN_INT__RUN_MAX bytes starts a new run. */
static void plan_runs(void **state)
{
    (void)state;
    uint64_t addr[] = {0x1000, 0x1080, 0x1500, 0x1581, 0x2000, 0x2300,
                       0x2600, 0x2900, 0x2c00, 0x2f00, 0x3200};
    size_t n = sizeof(addr) / sizeof(addr[0]);
    uint64_t lo[16];
    uint32_t len[16], of[16];
    size_t nruns = cn_int__plan_runs(addr, n, 0x80, lo, len, of);
    assert_int_equal(nruns, 3);
    /* 0x1500 is 0x400 past 0x1100 (joins), 0x1581 0x1 past 0x1580 (joins) */
    assert_int_equal(lo[0], 0x1000);
    assert_int_equal(len[0], 0x1601 - 0x1000);
    /* 0x2000 is 0x9ff past 0x1601: a new run, which takes 0x2000-0x2f80 (3968 bytes) but
     * not 0x3200 (0x1280 bytes) */
    assert_int_equal(lo[1], 0x2000);
    assert_int_equal(len[1], 0xf80);
    assert_int_equal(lo[2], 0x3200);
    assert_int_equal(len[2], 0x80);
    const uint32_t want[] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2};
    for (size_t i = 0; i < n; i++)
        assert_int_equal(of[i], want[i]);
    assert_int_equal(cn_int__plan_runs(addr, 0, 0x80, lo, len, of), 0);
}

/* 3.8's PyFrameObject chain: every frame an entry, f_lasti kept raw (bytes). */
static void walk_frameobj(void **state)
{
    space *s = *state;
    cn_int__layout l;
    cn_int__layout_for(3, 8, &l);
    const struct cn_int_abi_layout *a = &l.abi;
    uint64_t ts = BASE + 0x4000, f1 = BASE + 0x5000, f2 = BASE + 0x5100;
    put64(s, ts + a->ts_frame, f1);
    put64(s, f1 + a->fr_code, CODE);
    put64(s, f1 + a->fr_previous, f2);
    put32(s, f1 + a->fr_instr, 24);
    put64(s, f2 + a->fr_code, CODE + 8);
    put64(s, f2 + a->fr_previous, 0);
    put32(s, f2 + a->fr_instr, (uint32_t)-1);
    cn_int_frame out[4];
    int status;
    uint32_t n = cn_int__walk(a, fake_read, s, ts, out, 4, &status);
    assert_int_equal(n, 2);
    assert_int_equal(status, CN_INT_OK);
    assert_true(out[0].entry && out[1].entry);
    assert_int_equal(cn_int__instr_index(&l.names, (uint32_t)out[0].instr), 12);
    assert_int_equal(cn_int__instr_index(&l.names, (uint32_t)out[1].instr), -1);
}

/* ---- the join's queue -------------------------------------------------------------------- */

static void push(cn_int__queue *q, uint32_t tid, uint64_t time, int src, uint32_t nframes,
                 const cn_int__names *names)
{
    struct cn_int_abi_record r;
    memset(&r, 0, sizeof(r));
    r.pid = 7;
    r.tid = tid;
    r.time = time;
    r.time_src = (uint8_t)src;
    r.nframes = (uint16_t)nframes;
    for (uint32_t i = 0; i < nframes; i++) {
        r.frames[i].code = 0x1000 + i;
        r.frames[i].instr = 10 * i;
        r.frames[i].flags = i == nframes - 1 ? CN_INT_ABI_F_ENTRY : 0;
    }
    assert_int_equal(cn_int__queue_push(q, &r, CN_INT_ABI_HEADER_SIZE + nframes * 16, names), 0);
}

/* Exact keys: a record is its sample's (pid, tid, time), in any order of taking. */
static void queue_exact(void **state)
{
    cn_int__queue q = {0};
    cn_int__layout l;
    cn_int__layout_for(3, 12, &l);
    push(&q, 1, 100, CN_INT_ABI_T_SAMPLE, 3, &l.names);
    push(&q, 2, 100, CN_INT_ABI_T_SAMPLE, 1, &l.names);
    push(&q, 1, 200, CN_INT_ABI_T_SAMPLE, 2, &l.names);
    cn_int_record r;
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 200, &r), 1);
    assert_int_equal(r.nframes, 2);
    assert_true(r.sample_time);
    assert_int_equal(r.frames[1].instr, 5); /* 10 bytes = 5 code units */
    assert_true(r.frames[1].entry && !r.frames[0].entry);
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 100, &r), 1);
    assert_int_equal(r.nframes, 3);
    assert_int_equal(r.frames[2].code, 0x1002);
    assert_int_equal(cn_int__queue_take(&q, 7, 2, 150, &r), 0); /* no such sample */
    assert_int_equal(cn_int__queue_take(&q, 8, 2, 100, &r), 0); /* another process */
    assert_int_equal(cn_int__queue_take(&q, 7, 2, 100, &r), 1);
    assert_int_equal(cn_int__queue_take(&q, 7, 2, 100, &r), 0); /* taken once */
    assert_int_equal(cn_int__queue_len(&q), 0);
    cn_int__queue_free(&q);
}

/* Records without frames (a thread with no Python thread state) before any with frames:
 * the frame pool is still empty when they are taken (canopyd died of UBSan's report of a
 * memcpy from it in a system session). */
static void queue_no_frames(void **state)
{
    cn_int__queue q = {0};
    for (int i = 0; i < 2000; i++) /* enough to compact, with no frame pooled */
        push(&q, 1, 100 + (uint64_t)i, CN_INT_ABI_T_SAMPLE, 0, NULL);
    cn_int_record r;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(cn_int__queue_take(&q, 7, 1, 100 + (uint64_t)i, &r), 1);
        assert_int_equal(r.nframes, 0);
    }
    push(&q, 1, 9000, CN_INT_ABI_T_SAMPLE, 2, NULL);
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 9000, &r), 1);
    assert_int_equal(r.nframes, 2);
    cn_int__queue_free(&q);
}

/* The ktime fallback: the thread's latest record at or before the sample, within 1 ms. */
static void queue_ktime(void **state)
{
    /* records a few µs before their samples' times (the program runs before the kernel takes
     * the sample's time: the arm64 machine's 6.1 kernel, docs/python.md "The join") */
    cn_int__queue q = {0};
    push(&q, 1, 1500, CN_INT_ABI_T_KTIME, 1, NULL);
    push(&q, 1, 2500, CN_INT_ABI_T_KTIME, 2, NULL);
    push(&q, 2, 2600, CN_INT_ABI_T_KTIME, 9, NULL); /* another thread */
    push(&q, 1, 5000000, CN_INT_ABI_T_KTIME, 3, NULL);
    push(&q, 1, 9000000, CN_INT_ABI_T_KTIME, 4, NULL); /* its sample was lost */
    push(&q, 1, 9000400, CN_INT_ABI_T_KTIME, 5, NULL);
    cn_int_record r;
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 1000, &r), 0); /* before every record */
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 2000, &r), 1);
    assert_int_equal(r.nframes, 1);
    assert_false(r.sample_time);
    assert_int_equal(r.frames[0].instr, -1); /* no layout given */
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 3000, &r), 1);
    assert_int_equal(r.nframes, 2);
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 4000, &r), 0);    /* 5 ms later: not it */
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 7000000, &r), 0); /* 2 ms: too far */
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 9000500, &r), 1); /* the closer one */
    assert_int_equal(r.nframes, 5);
    assert_int_equal(cn_int__queue_take(&q, 7, 2, 2700, &r), 1);
    assert_int_equal(r.nframes, 9);
    assert_int_equal(cn_int__queue_expire(&q, 9500000), 2);
    assert_int_equal(cn_int__queue_len(&q), 0);
    cn_int__queue_free(&q);
}

/* Malformed ring records are refused; the queue is bounded (oldest dropped) and compacts. */
static void queue_bounds(void **state)
{
    cn_int__queue q = {0};
    struct cn_int_abi_record r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(cn_int__queue_push(&q, &r, 8, NULL), -EINVAL);
    r.nframes = CN_INT_MAX_FRAMES + 1;
    assert_int_equal(cn_int__queue_push(&q, &r, sizeof(r), NULL), -EINVAL);
    r.nframes = 4;
    assert_int_equal(cn_int__queue_push(&q, &r, CN_INT_ABI_HEADER_SIZE + 3 * 16, NULL), -EINVAL);
    for (uint64_t t = 0; t < CN_INT__QUEUE_MAX + 100; t++)
        push(&q, 1, t, CN_INT_ABI_T_SAMPLE, (uint32_t)(t % 3), NULL);
    assert_int_equal(cn_int__queue_len(&q), CN_INT__QUEUE_MAX);
    cn_int_record out;
    assert_int_equal(cn_int__queue_take(&q, 7, 1, 50, &out), 0); /* dropped */
    assert_int_equal(cn_int__queue_take(&q, 7, 1, CN_INT__QUEUE_MAX + 99, &out), 1);
    assert_int_equal(out.nframes, (CN_INT__QUEUE_MAX + 99) % 3);
    /* take them in order: the head moves, the array compacts, frames stay right */
    for (uint64_t t = 100; t < CN_INT__QUEUE_MAX + 99; t++) {
        assert_int_equal(cn_int__queue_take(&q, 7, 1, t, &out), 1);
        assert_int_equal(out.nframes, t % 3);
        if (out.nframes)
            assert_int_equal(out.frames[out.nframes - 1].code, 0x1000 + out.nframes - 1);
        if (t == 40000)
            push(&q, 2, 1, CN_INT_ABI_T_SAMPLE, 2, NULL);
    }
    assert_int_equal(cn_int__queue_next(&q, &out), 1);
    assert_int_equal(out.tid, 2);
    assert_int_equal(cn_int__queue_next(&q, &out), 0);
    cn_int__queue_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lnotab_38),
        cmocka_unit_test(linetable_310),
        cmocka_unit_test(locations_311),
        cmocka_unit_test(line_tables_hostile),
        cmocka_unit_test(lines_vs_cpython),
        cmocka_unit_test(layout_rows),
        cmocka_unit_test(instr_index),
        cmocka_unit_test(version_names),
        cmocka_unit_test(elf_u32_libc),
        cmocka_unit_test(pthread_tid_libc),
        cmocka_unit_test(ts_match),
        cmocka_unit_test(debug_offsets_synthetic),
        cmocka_unit_test(debug_offsets_313_file),
        cmocka_unit_test_setup_teardown(code_ok, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(code_forged, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(code_wide_names, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(code_same, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(code_same_reads, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(walk_hostile, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(index_states_310, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(walk_frameobj, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(walk_window, space_setup, space_teardown),
        cmocka_unit_test_setup_teardown(walk_entry, space_setup, space_teardown),
        cmocka_unit_test(plan_runs),
        cmocka_unit_test(queue_exact),
        cmocka_unit_test(queue_no_frames),
        cmocka_unit_test(queue_ktime),
        cmocka_unit_test(queue_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
