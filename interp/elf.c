/* elf.c — the few ELF facts registering an interpreter needs: where _PyRuntime, Py_Version and
 * _PyEval_EvalFrameDefault are (.dynsym, which Debian's stripped python3 keeps, else .symtab),
 * Py_Version's value, and the first PT_LOAD (for the load bias). libelf over an fd the caller
 * opened with cn_obj_open; the file is untrusted: libelf checks its tables, sizes are checked here.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

#include "int_internal.h"

/* Calls fn(ctx, name, sym) for each defined, named symbol of the file's tables of type
 * (SHT_DYNSYM or SHT_SYMTAB), until fn returns true. */
typedef bool (*sym_fn)(void *ctx, const char *name, const GElf_Sym *sym);

static void each_symbol(Elf *e, Elf64_Word type, sym_fn fn, void *ctx)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym s;
            const char *name;
            if (!gelf_getsym(d, (int)i, &s) || !s.st_name || s.st_shndx == SHN_UNDEF ||
                !(name = elf_strptr(e, sh.sh_link, s.st_name)))
                continue;
            if (fn(ctx, name, &s))
                return;
        }
    }
}

/* each_symbol's callback for cn_int__elf_syms: the interpreter's three symbols. */
static bool python_symbol(void *ctx, const char *name, const GElf_Sym *s)
{
    cn_int__elfsyms *out = ctx;
    if (!out->runtime && strcmp(name, "_PyRuntime") == 0) {
        out->runtime = s->st_value;
        out->runtime_size = s->st_size;
    } else if (!out->py_version && strcmp(name, "Py_Version") == 0) {
        out->py_version = s->st_value;
    } else if (!out->eval && strcmp(name, "_PyEval_EvalFrameDefault") == 0) {
        out->eval = s->st_value;
        out->eval_size = s->st_size;
    }
    return false;
}

/* The n 4-byte words at addr (Py_Version's value, say), read from the section holding them:
 * 0, or -ENOENT when none holds them all. */
static int words_at(Elf *e, uint64_t addr, uint32_t *out, size_t n)
{
    Elf_Scn *scn = NULL;
    size_t len = 4 * n;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
            addr < sh.sh_addr || addr + len > sh.sh_addr + sh.sh_size)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || addr - sh.sh_addr + len > d->d_size)
            return -ENOENT;
        memcpy(out, (const char *)d->d_buf + (addr - sh.sh_addr), len);
        return 0;
    }
    return -ENOENT;
}

int cn_int__elf_syms(int fd, cn_int__elfsyms *out)
{
    int ret = -ENOEXEC;
    memset(out, 0, sizeof(*out));
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64)
        goto out;
    size_t phnum;
    if (elf_getphdrnum(e, &phnum) == 0) {
        for (size_t i = 0; i < phnum; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
                out->load_vaddr = ph.p_vaddr & ~(uint64_t)0xfff;
                out->load_off = ph.p_offset & ~(uint64_t)0xfff;
                break;
            }
        }
    }
    for (int pass = 0; pass < 2 && !out->runtime; pass++)
        each_symbol(e, pass ? SHT_SYMTAB : SHT_DYNSYM, python_symbol, out);
    uint32_t hex = 0;
    if (out->py_version && words_at(e, out->py_version, &hex, 1) == 0)
        out->version_hex = (int)hex;
    ret = out->runtime ? 0 : -ENOENT;
out:
    if (e)
        elf_end(e);
    return ret;
}

/* each_symbol's callback for cn_int__elf_words: the object name, n words long. */
typedef struct named_words {
    Elf *e;
    const char *name;
    uint32_t *val;
    size_t n;
    int ret; /* -ENOENT until found */
} named_words;

static bool named_symbol(void *ctx, const char *name, const GElf_Sym *s)
{
    named_words *w = ctx;
    if (s->st_size != 4 * w->n || strcmp(name, w->name) != 0)
        return false;
    w->ret = words_at(w->e, s->st_value, w->val, w->n) < 0 ? -ENODATA : 0;
    return true;
}

int cn_int__elf_words(int fd, const char *name, uint32_t *val, size_t n)
{
    named_words w = {NULL, name, val, n, -ENOENT};
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64) {
        w.ret = -ENOEXEC;
        goto out;
    }
    w.e = e;
    for (int pass = 0; pass < 2 && w.ret == -ENOENT; pass++)
        each_symbol(e, pass ? SHT_SYMTAB : SHT_DYNSYM, named_symbol, &w);
out:
    if (e)
        elf_end(e);
    return w.ret;
}

int cn_int__elf_u32(int fd, const char *name, uint32_t *val)
{
    int ret = cn_int__elf_words(fd, name, val, 1);
    /* a value of 0 is not told from an unreadable one: no caller wants 0 */
    return ret == 0 && !*val ? -ENODATA : ret;
}

int cn_int__version_from_name(const char *path, int *major, int *minor)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = strstr(base, "python");
    int ma, mi, used = 0;
    if (!p || sscanf(p + 6, "%d.%d%n", &ma, &mi, &used) != 2 || used == 0)
        return -ENOENT;
    *major = ma;
    *minor = mi;
    return 0;
}
