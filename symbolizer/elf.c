/* elf.c — loading one ELF object: segments, symbols, separate debug files, MiniDebugInfo.
 *
 * Symbol sources, best first: the file's own .symtab; the .symtab of its separate debug
 * file (/usr/lib/debug/.build-id/xx/rest.debug, .gnu_debuglink with its CRC checked,
 * debuginfod); the .symtab inside MiniDebugInfo (.gnu_debugdata, xz) together with
 * .dynsym; .dynsym alone. PLT entries are added as `name@plt` (x86-64, AArch64). Everything read
 * from the file is untrusted: section sizes, entry sizes, name offsets, counts and the
 * decompressed size are checked or bounded through libelf's checked accessors. */
#include "sym_fuzz.h"
#include "sym_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SECTIONS 65536

typedef struct secinfo {
    uint64_t addr, size;
    int exec;
} secinfo;

/* Section address ranges and flags, for symbol limits and the exec test. *out malloc'ed. */
static int read_sections(Elf *elf, secinfo **out, size_t *n_out)
{
    size_t n = 0;
    if (elf_getshdrnum(elf, &n) != 0)
        return -EINVAL;
    if (n > MAX_SECTIONS)
        return -E2BIG;
    secinfo *s = calloc(n ? n : 1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        size_t idx = elf_ndxscn(scn);
        GElf_Shdr sh;
        if (idx >= n || !gelf_getshdr(scn, &sh))
            continue;
        s[idx].addr = sh.sh_addr;
        s[idx].size = sh.sh_size;
        s[idx].exec = (sh.sh_flags & SHF_EXECINSTR) != 0;
    }
    *out = s;
    *n_out = n;
    return 0;
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh_out)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
        if (n && strcmp(n, name) == 0) {
            *sh_out = sh;
            return scn;
        }
    }
    return NULL;
}

static Elf_Scn *find_section_type(Elf *elf, Elf64_Word type, GElf_Shdr *sh_out)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        if (gelf_getshdr(scn, sh_out) && sh_out->sh_type == type)
            return scn;
    }
    return NULL;
}

/* Adds the function symbols of one symbol section. Returns the number added or
 * negative errno. */
static int add_symbols(cn_sym__table *t, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh)
{
    secinfo *secs = NULL;
    size_t nsecs = 0;
    int rc = read_sections(elf, &secs, &nsecs);
    if (rc < 0)
        return rc;
    Elf_Data *data = elf_getdata(scn, NULL);
    int added = 0;
    if (!data || sh->sh_entsize == 0)
        goto out;
    size_t count = data->d_size / sh->sh_entsize;
    t->section_bytes += sh->sh_size;
    Elf_Scn *strscn = elf_getscn(elf, sh->sh_link);
    GElf_Shdr strsh;
    if (strscn && gelf_getshdr(strscn, &strsh))
        t->section_bytes += strsh.sh_size;
    for (size_t i = 1; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym))
            break;
        int type = GELF_ST_TYPE(sym.st_info);
        size_t shndx = sym.st_shndx;
        if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE || shndx >= nsecs)
            continue;
        if (type != STT_FUNC && type != STT_GNU_IFUNC && !(type == STT_NOTYPE && secs[shndx].exec))
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (!name || !name[0] || name[0] == '$' || (name[0] == '.' && name[1] == 'L'))
            continue;
        int bind = GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? CN_SYM__BIND_GLOBAL
                   : GELF_ST_BIND(sym.st_info) == STB_WEAK ? CN_SYM__BIND_WEAK
                                                           : CN_SYM__BIND_LOCAL;
        uint64_t limit = secs[shndx].size ? secs[shndx].addr + secs[shndx].size : UINT64_MAX;
        size_t len = strnlen(name, CN_SYM__MAX_NAME);
        const char *at = memchr(name, '@', len); /* strip symbol versions (foo@@GLIBC_2.2) */
        if (at)
            len = (size_t)(at - name);
        if (len == 0)
            continue;
        rc = cn_sym__table_add(t, sym.st_value, sym.st_size, limit, name, len, bind);
        if (rc < 0) {
            added = rc;
            goto out;
        }
        added++;
    }
out:
    free(secs);
    return added;
}

/* The name of PLT relocation r into buf: its symbol's with `@plt` (a version dropped),
 * or for an IRELATIVE one (a call to one of the object's own IFUNCs: no symbol) objdump's
 * and perf's `*ABS*+0xRESOLVER@plt`. Returns the length, 0 for none. */
static int plt_name(Elf *elf, const GElf_Shdr *dsh, Elf_Data *sd, const GElf_Rela *r, char *buf,
                    size_t cap)
{
    GElf_Sym sym;
    const char *name = NULL;
    if (GELF_R_SYM(r->r_info) != 0 && gelf_getsym(sd, (int)GELF_R_SYM(r->r_info), &sym))
        name = elf_strptr(elf, dsh->sh_link, sym.st_name);
    int len;
    if (name && name[0])
        len = snprintf(buf, cap, "%.*s@plt", CN_SYM__MAX_NAME - 8, name);
    else if (GELF_R_SYM(r->r_info) == 0 && r->r_addend > 0)
        len = snprintf(buf, cap, "*ABS*+0x%llx@plt", (unsigned long long)r->r_addend);
    else
        return 0;
    char *at = strchr(buf, '@');
    if (at && at != buf + len - 4) { /* drop a version before @plt */
        memmove(at, buf + len - 4, 5);
        len = (int)strlen(buf);
    }
    return len;
}

/* x86-64: the GOT slot a PLT entry at va jumps through (`jmp *disp(%rip)`, after an
 * endbr64 and a bnd prefix where the linker put them). */
static bool x86_plt_slot(const uint8_t *p, size_t n, uint64_t va, uint64_t *slot)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    size_t i = n >= 4 && memcmp(p, endbr64, 4) == 0 ? 4 : 0;
    if (i < n && p[i] == 0xf2)
        i++;
    if (i + 6 > n || p[i] != 0xff || p[i + 1] != 0x25)
        return false;
    int32_t disp;
    memcpy(&disp, p + i + 2, sizeof(disp));
    *slot = va + i + 6 + (uint64_t)(int64_t)disp;
    return true;
}

/* .rela.plt's relocations by r_offset, the GOT slot each fills. */
static int rela_by_slot(const void *x, const void *y)
{
    const GElf_Rela *a = x, *b = y;
    return (a->r_offset > b->r_offset) - (a->r_offset < b->r_offset);
}

/* The header of .plt: the lazy binder's trampoline a first call runs through (the ABI's
 * PLT0; objdump labels it relative to the first entry). */
static int add_plt0(cn_sym__table *t, Elf *elf)
{
    GElf_Shdr sh;
    if (!find_section(elf, ".plt", &sh) || sh.sh_size < 16)
        return 0;
    return cn_sym__table_add(t, sh.sh_addr, 16, sh.sh_addr + sh.sh_size, "PLT0@plt", 8,
                             CN_SYM__BIND_LOCAL);
}

/* x86-64's header (PLT0) and entries, each entry named by the relocation of the GOT slot
 * it jumps through (the linker's order of entries need not be .rela.plt's: Debian's
 * libc.so.6 interleaves its IRELATIVE entries with named ones). */
static int add_plt_x86(cn_sym__table *t, Elf_Scn *plt, const GElf_Shdr *pltsh, uint64_t first,
                       Elf *elf, Elf_Data *rd, size_t n, const GElf_Shdr *dsh, Elf_Data *sd)
{
    int rc = add_plt0(t, elf);
    Elf_Data *code = elf_getdata(plt, NULL);
    if (rc < 0 || !code || !code->d_buf || code->d_size < pltsh->sh_size)
        return rc; /* SHT_NOBITS or short: nothing to decode */
    GElf_Rela *rels = calloc(n ? n : 1, sizeof(*rels));
    if (!rels)
        return -ENOMEM;
    size_t nr = 0;
    for (size_t i = 0; i < n; i++)
        nr += gelf_getrela(rd, (int)i, &rels[nr]) != NULL;
    qsort(rels, nr, sizeof(*rels), rela_by_slot);
    char buf[CN_SYM__MAX_NAME + 8];
    uint64_t end = pltsh->sh_addr + pltsh->sh_size;
    for (uint64_t va = first; rc == 0 && va + 16 <= end; va += 16) {
        uint64_t slot;
        const uint8_t *p = (const uint8_t *)code->d_buf + (va - pltsh->sh_addr);
        if (!x86_plt_slot(p, 16, va, &slot))
            continue;
        GElf_Rela key = {.r_offset = slot};
        const GElf_Rela *hit = bsearch(&key, rels, nr, sizeof(*rels), rela_by_slot);
        int len = hit ? plt_name(elf, dsh, sd, hit, buf, sizeof(buf)) : 0;
        if (len > 0)
            rc = cn_sym__table_add(t, va, 16, end, buf, (size_t)len, CN_SYM__BIND_LOCAL);
    }
    free(rels);
    return rc;
}

/* PLT entries as `name@plt`. x86-64: 16-byte entries, in .plt.sec when IBT splits the PLT,
 * otherwise in .plt after its 16-byte header, each named by the GOT slot it jumps through.
 * AArch64: .plt opens with a 32-byte header; entries are 16 bytes, or 24 with
 * return-address signing (DT_AARCH64_PAC_PLT; BTI adds a landing pad in some linkers'
 * entries too), so the entry size is derived from the section's size: anything but 16 or
 * 24 is not trusted; entries are in .rela.plt's order (checked against objdump by
 * unit.test_symbolizer). */
static int add_plt(cn_sym__table *t, Elf *elf)
{
    GElf_Ehdr eh;
    if (!gelf_getehdr(elf, &eh) || (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64))
        return 0;
    GElf_Shdr relsh, pltsh;
    Elf_Scn *rel = find_section(elf, ".rela.plt", &relsh);
    if (!rel || relsh.sh_type != SHT_RELA || relsh.sh_entsize == 0)
        return 0;
    uint64_t nrel = relsh.sh_size / relsh.sh_entsize;
    uint64_t base, entry = 16;
    Elf_Scn *plt = eh.e_machine == EM_X86_64 ? find_section(elf, ".plt.sec", &pltsh) : NULL;
    if (plt) {
        base = pltsh.sh_addr;
    } else {
        plt = find_section(elf, ".plt", &pltsh);
        if (!plt)
            return 0;
        uint64_t header = eh.e_machine == EM_AARCH64 ? 32 : 16;
        if (pltsh.sh_size < header || nrel == 0)
            return 0;
        base = pltsh.sh_addr + header;
        if (eh.e_machine == EM_AARCH64) {
            uint64_t body = pltsh.sh_size - header;
            entry = body % nrel == 0 ? body / nrel : 0;
            if (entry != 16 && entry != 24)
                return 0;
        }
    }
    Elf_Scn *dynsym = elf_getscn(elf, relsh.sh_link);
    GElf_Shdr dsh;
    if (!dynsym || !gelf_getshdr(dynsym, &dsh) || dsh.sh_type != SHT_DYNSYM)
        return 0;
    Elf_Data *rd = elf_getdata(rel, NULL);
    Elf_Data *sd = elf_getdata(dynsym, NULL);
    if (!rd || !sd)
        return 0;
    size_t n = rd->d_size / relsh.sh_entsize;
    if (eh.e_machine == EM_X86_64)
        return add_plt_x86(t, plt, &pltsh, base, elf, rd, n, &dsh, sd);
    uint64_t end = pltsh.sh_addr + pltsh.sh_size;
    char buf[CN_SYM__MAX_NAME + 8];
    for (size_t i = 0; i < n && base + (i + 1) * entry <= end; i++) {
        GElf_Rela r;
        if (!gelf_getrela(rd, (int)i, &r))
            break;
        int len = plt_name(elf, &dsh, sd, &r, buf, sizeof(buf));
        if (len <= 0)
            continue;
        int rc = cn_sym__table_add(t, base + i * entry, entry, end, buf, (size_t)len,
                                   CN_SYM__BIND_LOCAL);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int read_segments(cn_sym__obj *o, Elf *elf)
{
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0)
        return -EINVAL;
    o->n_seg = 0;
    for (size_t i = 0; i < n && o->n_seg < CN_SYM__MAX_SEGMENTS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        o->seg[o->n_seg].offset = ph.p_offset;
        o->seg[o->n_seg].vaddr = ph.p_vaddr;
        o->seg[o->n_seg].filesz = ph.p_filesz;
        o->n_seg++;
    }
    return 0;
}

int cn_sym__obj_to_vaddr(const cn_sym__obj *o, uint64_t off, uint64_t *vaddr)
{
    if (o->is_exec_addr) {
        *vaddr = off;
        return 0;
    }
    for (size_t i = 0; i < o->n_seg; i++) {
        const cn_sym__segment *s = &o->seg[i];
        if (off >= s->offset && off - s->offset < s->filesz) {
            *vaddr = off - s->offset + s->vaddr;
            return 0;
        }
    }
    return -ENOENT;
}

int cn_sym__obj_segment_region(const cn_sym__obj *o, uint64_t off, uint64_t *lo, uint64_t *hi)
{
    if (o->is_exec_addr)
        return 0; /* one mapping for every address */
    const cn_sym__segment *hit = NULL;
    for (size_t i = 0; i < o->n_seg && !hit; i++)
        if (off >= o->seg[i].offset && off - o->seg[i].offset < o->seg[i].filesz)
            hit = &o->seg[i];
    if (!hit)
        return -ENOENT;
    uint64_t end = hit->offset + hit->filesz; /* no overflow: off is inside */
    for (size_t i = 0; i < o->n_seg; i++) {   /* a hostile file's segments may overlap */
        const cn_sym__segment *g = &o->seg[i];
        if (g != hit && g->offset < end && hit->offset < g->offset + g->filesz)
            return -ENOENT;
    }
    *lo = hit->offset > *lo ? hit->offset : *lo;
    *hi = end < *hi ? end : *hi;
    return 0;
}

/* The build-id note's bytes, or 0 if none: the first SHT_NOTE section that has one
 * (cn_obj_note_build_id over libelf's copy, in our byte order). */
static size_t elf_build_id(Elf *elf, uint8_t *out, size_t max)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n = d && d->d_buf
                       ? cn_obj_note_build_id(d->d_buf, d->d_size, sh.sh_addralign, out, max)
                       : 0;
        if (n)
            return n;
    }
    return 0;
}

int cn_sym_build_id(const char *path, char *buf, size_t size)
{
    if (!path || !buf || size < 41)
        return -EINVAL;
    int fd = cn_obj_open(path, CN_OBJ_TRUSTED, NULL, NULL); /* the caller's own name */
    if (fd < 0)
        return fd;
    elf_version(EV_CURRENT);
    int rc = -EINVAL;
    /* ELF_C_READ: libelf preads what it needs into its own buffers; nothing of a target's
     * file is mapped, so truncating it cannot raise SIGBUS here (docs/security.md). */
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (elf && elf_kind(elf) == ELF_K_ELF) {
        uint8_t id[20];
        size_t n = elf_build_id(elf, id, sizeof(id));
        rc = -ENOENT;
        if (n) {
            cn_obj_hex(id, n, buf);
            rc = (int)(2 * n);
        }
    }
    elf_end(elf);
    close(fd);
    return rc;
}

/* An opened ELF file: fd + Elf handle. */
typedef struct elf_file {
    int fd;
    Elf *elf;
    cn_obj_mounts *mounts; /* the FUSE check's mount tables (cfg->mounts), set by the opener */
} elf_file;

static void elf_file_close(elf_file *f)
{
    if (f->elf)
        elf_end(f->elf);
    if (f->fd >= 0)
        close(f->fd);
    f->elf = NULL;
    f->fd = -1;
}

/* Opens path with cn_obj_open(flags, want): only a regular file, checked on the fd that
 * is read (cn_obj.h); *got (may be NULL) receives its identity. */
static int elf_file_open(elf_file *f, const char *path, unsigned flags, const cn_obj_ident *want,
                         cn_obj_ident *got)
{
    f->elf = NULL;
    f->fd = cn_obj_open_in(f->mounts, path, flags, want, got);
    if (f->fd < 0)
        return f->fd;
    /* Read, never mapped: a target's user may truncate the file while we parse it, and a
     * read past the new end of a mapping is SIGBUS for the whole daemon; pread just comes
     * back short and libelf reports an error (docs/security.md). */
    f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
    if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
        elf_file_close(f);
        return -EINVAL;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(f->elf, &eh)) {
        elf_file_close(f);
        return -EINVAL;
    }
    return 0;
}

static int file_crc(int fd, uint32_t *crc_out)
{
    static const size_t chunk = 1 << 16;
    char *buf = malloc(chunk);
    if (!buf)
        return -ENOMEM;
    uint32_t crc = 0;
    off_t pos = 0;
    *crc_out = 0;
    ssize_t got;
    while ((got = pread(fd, buf, chunk, pos)) > 0) {
        crc = cn_sym__crc32(crc, buf, (size_t)got);
        pos += got;
    }
    free(buf);
    if (got < 0)
        return -errno;
    *crc_out = crc;
    return 0;
}

/* Where a debug file is looked for, and what it must then be. */
typedef struct debug_rule {
    unsigned flags; /* CN_OBJ_TRUSTED for root's own debug directories, else 0 */
    uint32_t owner; /* the main file's owner: outside root's directories, a debug file
                       must be its, or readable by anyone (S_IROTH) */
} debug_rule;

/* Opens candidate as a debug file if it matches: same build-id (when we have one) or
 * the debuglink CRC (when given). Outside root's own directories the candidate is in a
 * directory the target's user may own: besides cn_obj_open's rules (no symlink on the way,
 * a regular file), a file that user could not read (another owner's, not world-readable:
 * a hard link to a root-only file) is refused before any byte of it is read. */
static int try_debug(elf_file *f, const char *candidate, const debug_rule *rule, const uint8_t *id,
                     size_t id_len, const uint32_t *crc)
{
    cn_obj_ident file;
    if (elf_file_open(f, candidate, rule->flags, NULL, &file) < 0)
        return -ENOENT;
    if (!(rule->flags & CN_OBJ_TRUSTED) && file.uid != rule->owner && !(file.mode & S_IROTH)) {
        elf_file_close(f);
        return -EACCES;
    }
    if (id_len) {
        uint8_t got[64];
        size_t n = elf_build_id(f->elf, got, sizeof(got));
        if (n == id_len && memcmp(got, id, n) == 0)
            return 0;
        if (n) { /* a different build */
            elf_file_close(f);
            return -ENOENT;
        }
    }
    if (crc) {
        uint32_t c = 0;
        if (file_crc(f->fd, &c) == 0 && c == *crc)
            return 0;
    } else if (id_len) {
        return 0; /* found by build-id path, file has no note: accept */
    }
    elf_file_close(f);
    return -ENOENT;
}

/* Searches the separate debug file of main (build-id directory, .gnu_debuglink,
 * debuginfod). owner: the main file's owner (try_debug's rule). Root's own directories
 * (the configured debug dirs, debuginfod's cache) are trusted: their symlinks (the
 * .build-id links) are followed. The same directories inside a target's root, and the
 * main file's own directory, are not: there no symlink is followed and the file must be
 * one the target's user could read. 0 and *f opened, or -ENOENT. */
static int find_debug(elf_file *f, Elf *main_elf, const char *path, const char *root,
                      uint32_t owner, const cn_sym_config *cfg)
{
    uint8_t id[64];
    size_t id_len = elf_build_id(main_elf, id, sizeof(id));
    char idhex[2 * sizeof(id) + 1];
    char cand[4096];
    const char *dirs = cfg->debug_dirs ? cfg->debug_dirs : "/usr/lib/debug";
    const char *roots[2] = {root && root[0] ? root : "", ""};
    int nroots = root && root[0] ? 2 : 1;
    const debug_rule trusted = {CN_OBJ_TRUSTED, 0}, target = {0, owner};
    if (id_len >= 2) {
        cn_obj_hex(id, id_len, idhex);
        for (int r = 0; r < nroots; r++) {
            const debug_rule *rule = roots[r][0] ? &target : &trusted;
            for (const char *d = dirs; *d;) {
                size_t dl = strcspn(d, ":");
                snprintf(cand, sizeof(cand), "%s%.*s/.build-id/%.2s/%s.debug", roots[r], (int)dl, d,
                         idhex, idhex + 2);
                if (try_debug(f, cand, rule, id, id_len, NULL) == 0)
                    return 0;
                d += dl + (d[dl] == ':');
            }
        }
    }
    GElf_Shdr sh;
    Elf_Scn *link = find_section(main_elf, ".gnu_debuglink", &sh);
    Elf_Data *ld = link ? elf_getdata(link, NULL) : NULL;
    if (ld && ld->d_size >= 8 && ld->d_size < 4096) {
        const char *name = ld->d_buf;
        size_t nl = strnlen(name, ld->d_size);
        size_t crc_off = (nl + 4) & ~(size_t)3;
        if (nl > 0 && nl < ld->d_size && crc_off + 4 <= ld->d_size && !strchr(name, '/')) {
            uint32_t crc;
            memcpy(&crc, (const char *)ld->d_buf + crc_off, 4);
            /* The file's directory, and the same directory as seen from the root. */
            char dir[2048];
            const char *slash = strrchr(path, '/');
            snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
            const char *rel = dir;
            if (root && root[0] && strncmp(dir, root, strlen(root)) == 0)
                rel = dir + strlen(root);
            const char *subs[2] = {"", "/.debug"};
            for (int k = 0; k < 2 && !strstr(dir, "/map_files"); k++) {
                snprintf(cand, sizeof(cand), "%s%s/%s", dir, subs[k], name);
                if (try_debug(f, cand, &target, id, 0, &crc) == 0)
                    return 0;
            }
            for (int r = 0; r < nroots; r++) {
                const debug_rule *rule = roots[r][0] ? &target : &trusted;
                for (const char *d = dirs; *d;) {
                    size_t dl = strcspn(d, ":");
                    snprintf(cand, sizeof(cand), "%s%.*s%s/%s", roots[r], (int)dl, d, rel, name);
                    if (try_debug(f, cand, rule, id, 0, &crc) == 0)
                        return 0;
                    d += dl + (d[dl] == ':');
                }
            }
        }
    }
    if (cfg->debuginfod && id_len >= 2 && getenv("DEBUGINFOD_URLS")) {
        char *dl = NULL;
        if (cn_sym__debuginfod_find(idhex, &dl) == 0) {
            int rc = try_debug(f, dl, &trusted, id, id_len, NULL);
            free(dl);
            if (rc == 0)
                return 0;
        }
    }
    return -ENOENT;
}

/* Decompresses MiniDebugInfo (xz) into *out (malloc'ed), bounded. */
static int unxz(const void *in, size_t in_len, char **out, size_t *out_len)
{
    lzma_stream s = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&s, 256u << 20, 0) != LZMA_OK)
        return -ENOMEM;
    size_t cap = in_len * 4 + 4096, len = 0;
    char *buf = NULL;
    int rc = 0;
    s.next_in = in;
    s.avail_in = in_len;
    for (;;) {
        if (cap > CN_SYM__MAX_XZ_OUT) {
            rc = -E2BIG;
            break;
        }
        char *bigger = realloc(buf, cap);
        if (!bigger) {
            rc = -ENOMEM;
            break;
        }
        buf = bigger;
        s.next_out = (uint8_t *)buf + len;
        s.avail_out = cap - len;
        lzma_ret r = lzma_code(&s, LZMA_FINISH);
        len = cap - s.avail_out;
        if (r == LZMA_STREAM_END)
            break;
        if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
            rc = -EINVAL;
            break;
        }
        if (s.avail_out != 0) { /* truncated input */
            rc = -EINVAL;
            break;
        }
        cap *= 2;
    }
    lzma_end(&s);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

/* The .symtab inside .gnu_debugdata. Returns symbols added (>= 0) or negative errno. */
static int add_minidebug(cn_sym__table *t, Elf *elf)
{
    GElf_Shdr sh;
    Elf_Scn *scn = find_section(elf, ".gnu_debugdata", &sh);
    if (!scn || sh.sh_type == SHT_NOBITS)
        return 0;
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || !d->d_buf || d->d_size == 0)
        return 0;
    char *img = NULL;
    size_t len = 0;
    int rc = unxz(d->d_buf, d->d_size, &img, &len);
    if (rc < 0)
        return rc;
    Elf *mini = elf_memory(img, len);
    rc = 0;
    if (mini && elf_kind(mini) == ELF_K_ELF) {
        Elf_Scn *st = find_section_type(mini, SHT_SYMTAB, &sh);
        if (st)
            rc = add_symbols(t, mini, st, &sh);
    }
    if (mini)
        elf_end(mini);
    free(img);
    return rc;
}

/* Fills o's symbol table from elf (and dbg when not NULL). */
static int load_symbols(cn_sym__obj *o, Elf *elf, Elf *dbg)
{
    GElf_Shdr sh;
    Elf_Scn *scn;
    int rc = 0;
    if ((scn = find_section_type(elf, SHT_SYMTAB, &sh)) != NULL &&
        (rc = add_symbols(&o->syms, elf, scn, &sh)) > 0) {
        snprintf(o->source, sizeof(o->source), "symtab");
    } else if (rc >= 0 && dbg && (scn = find_section_type(dbg, SHT_SYMTAB, &sh)) != NULL &&
               (rc = add_symbols(&o->syms, dbg, scn, &sh)) > 0) {
        snprintf(o->source, sizeof(o->source), "debug");
    } else if (rc >= 0 && (rc = add_minidebug(&o->syms, elf)) > 0) {
        snprintf(o->source, sizeof(o->source), "minidebug");
        if ((scn = find_section_type(elf, SHT_DYNSYM, &sh)) != NULL)
            rc = add_symbols(&o->syms, elf, scn, &sh);
    } else if ((scn = find_section_type(elf, SHT_DYNSYM, &sh)) != NULL) {
        /* A corrupt .symtab or MiniDebugInfo still leaves .dynsym. */
        rc = add_symbols(&o->syms, elf, scn, &sh);
        snprintf(o->source, sizeof(o->source), "dynsym");
    }
    if (rc < 0 && rc != -EINVAL && rc != -E2BIG)
        return rc;
    rc = add_plt(&o->syms, elf);
    if (rc < 0)
        return rc;
    /* Without a full symbol table, local functions are found by their CFI ranges
     * (fde.c); a .symtab (own, debug file or MiniDebugInfo) names them already. */
    if (!strcmp(o->source, "dynsym") || !o->source[0]) {
        rc = cn_sym__fdes_load(&o->fdes, elf);
        if (rc < 0)
            return rc;
    }
    return cn_sym__table_finish(&o->syms, 0, 0);
}

static int has_debug_info(Elf *elf)
{
    GElf_Shdr sh;
    Elf_Scn *scn = find_section(elf, ".debug_info", &sh);
    return scn && sh.sh_type != SHT_NOBITS && sh.sh_size > 0;
}

int cn_sym__elf_load(cn_sym__obj *o, const char *path, const cn_obj_ident *want,
                     const char *root_prefix, const cn_sym_config *cfg)
{
    elf_version(EV_CURRENT);
    elf_file main_f = {-1, NULL, cfg->mounts}, dbg_f = {-1, NULL, cfg->mounts};
    cn_obj_ident got;
    /* With the sampler's identity: exactly that file. Without: a name the caller chose
     * itself (a tool's argument, which may go through /lib -> usr/lib), never a target's. */
    unsigned flags = want && want->ino ? CN_OBJ_MATCH_ALL : CN_OBJ_TRUSTED;
    int rc = elf_file_open(&main_f, path, flags, want, &got);
    if (rc < 0)
        return rc;
    rc = read_segments(o, main_f.elf);
    if (rc < 0)
        goto out;
    int has_symtab = 0;
    GElf_Shdr sh;
    has_symtab = find_section_type(main_f.elf, SHT_SYMTAB, &sh) != NULL;
    int need_dbg = !has_symtab || (cfg->lines && !has_debug_info(main_f.elf));
    if (need_dbg)
        find_debug(&dbg_f, main_f.elf, path, root_prefix, got.uid, cfg);
    rc = load_symbols(o, main_f.elf, dbg_f.elf);
    if (rc < 0)
        goto out;
    if (cfg->lines) {
        elf_file *src = dbg_f.elf && has_debug_info(dbg_f.elf) ? &dbg_f
                        : has_debug_info(main_f.elf)           ? &main_f
                                                               : NULL;
        if (src) {
            int fd = dup(src->fd);
            if (fd >= 0) {
                o->dw = cn_sym__dwarf_open(fd, cfg);
                if (!o->dw)
                    close(fd);
            }
        }
    }
out:
    elf_file_close(&dbg_f);
    elf_file_close(&main_f);
    if (rc < 0)
        cn_sym__obj_clear(o);
    return rc;
}

int cn_sym__elf_load_mem(cn_sym__obj *o, const void *data, size_t size)
{
    elf_version(EV_CURRENT);
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, data, size);
    int rc = -EINVAL;
    Elf *elf = elf_memory(copy, size);
    GElf_Ehdr eh;
    if (elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &eh)) {
        rc = read_segments(o, elf);
        if (rc == 0)
            rc = load_symbols(o, elf, NULL);
    }
    if (elf)
        elf_end(elf);
    free(copy);
    if (rc < 0)
        cn_sym__obj_clear(o);
    return rc;
}

/* Length of our own [vdso] mapping starting at addr, from /proc/self/maps; 0 if none. */
static size_t own_vdso_len(uint64_t addr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    size_t len = 0;
    if (!f)
        return 0;
    while (!len && fgets(line, sizeof(line), f)) {
        unsigned long long start, end;
        if (sscanf(line, "%llx-%llx", &start, &end) == 2 && start == addr && end > start &&
            strstr(line, "[vdso]"))
            len = (size_t)(end - start);
    }
    fclose(f);
    return len;
}

int cn_sym__vdso_load(cn_sym__obj *o)
{
    /* The kernel maps one vDSO image into every 64-bit process, so ours names the
     * target's [vdso] frames. The image is copied (cn_sym__elf_load_mem) so that the
     * object owns what it was built from. */
    uint64_t own = getauxval(AT_SYSINFO_EHDR);
    size_t len = own ? own_vdso_len(own) : 0;
    if (!len)
        return -ENOENT;
    int rc = cn_sym__elf_load_mem(o, (const void *)(uintptr_t)own, len);
    if (rc == 0)
        snprintf(o->source, sizeof(o->source), "vdso");
    return rc;
}

int cn_sym_fuzz_elf(const uint8_t *data, size_t size)
{
    cn_sym__obj o;
    memset(&o, 0, sizeof(o));
    int rc = cn_sym__elf_load_mem(&o, data, size);
    if (rc < 0)
        return rc;
    /* Exercise lookups at every segment boundary and a spread of offsets. */
    for (size_t i = 0; i < o.n_seg; i++) {
        uint64_t probes[3] = {o.seg[i].offset, o.seg[i].offset + o.seg[i].filesz / 2,
                              o.seg[i].offset + o.seg[i].filesz - 1};
        for (int k = 0; k < 3; k++) {
            uint64_t va;
            if (cn_sym__obj_to_vaddr(&o, probes[k], &va) == 0)
                (void)cn_sym__table_find(&o.syms, va);
        }
    }
    for (size_t i = 0; i < o.syms.n; i++)
        (void)cn_sym__table_find(&o.syms, o.syms.e[i].start + o.syms.e[i].size / 2);
    uint64_t s;
    for (size_t i = 0; i < o.fdes.n; i++)
        (void)cn_sym__fdes_find(&o.fdes, o.fdes.start[i] + (o.fdes.end[i] - o.fdes.start[i]) / 2,
                                &s);
    rc = (int)(o.syms.n + o.fdes.n);
    cn_sym__obj_clear(&o);
    return rc;
}

void cn_sym__obj_clear(cn_sym__obj *o)
{
    cn_sym__table_clear(&o->syms);
    cn_sym__fdes_clear(&o->fdes);
    o->dw = cn_sym__dwarf_free(o->dw);
    o->n_seg = 0;
    o->source[0] = '\0';
}
