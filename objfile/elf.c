/* elf.c — decoders of ELF structures over raw bytes, shared by the sampler (its image of
 * a file) and the symbolizer (sections libelf hands it): the ELF header, sections by name,
 * build-id notes, and the .eh_frame_hdr search table.
 *
 * Every input comes from a target's file: each offset and count is checked against the
 * bytes given before anything is read, so a truncated or hostile file gives an error,
 * never a read out of bounds. Nothing allocates. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "cn_obj.h"

/* DWARF exception-header pointer encodings (LSB Core, .eh_frame_hdr). */
#define PE_OMIT    0xff
#define PE_UDATA4  0x03
#define PE_SDATA4  0x0b
#define PE_DATAREL 0x30
#define PE_FORMAT  0x0f

static bool in_bounds(size_t size, uint64_t off, uint64_t n)
{
    return off <= size && n <= size - off;
}

int cn_obj_elf_header(const uint8_t *data, size_t size, Elf64_Ehdr *eh)
{
    if (!data || size < sizeof(*eh) || memcmp(data, ELFMAG, SELFMAG) != 0 ||
        data[EI_CLASS] != ELFCLASS64)
        return -ENOEXEC;
    memcpy(eh, data, sizeof(*eh));
    if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
        !in_bounds(size, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
        return -ENOEXEC;
    return 0;
}

int cn_obj_elf_section(const uint8_t *data, size_t size, const char *name, Elf64_Shdr *out)
{
    size_t at;
    return cn_obj_elf_section_at(data, size, name, out, &at);
}

int cn_obj_elf_section_at(const uint8_t *data, size_t size, const char *name, Elf64_Shdr *out,
                          size_t *at)
{
    Elf64_Ehdr eh;
    Elf64_Shdr strs;
    if (!data || size < sizeof(eh) || memcmp(data, ELFMAG, SELFMAG) != 0 ||
        data[EI_CLASS] != ELFCLASS64)
        return -ENOEXEC;
    memcpy(&eh, data, sizeof(eh));
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
        !in_bounds(size, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return -ENOEXEC;
    memcpy(&strs, data + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(strs), sizeof(strs));
    if (!in_bounds(size, strs.sh_offset, strs.sh_size))
        return -ENOEXEC;
    size_t want = strlen(name);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, data + eh.e_shoff + (size_t)i * sizeof(sh), sizeof(sh));
        if (sh.sh_name >= strs.sh_size)
            continue;
        const char *n = (const char *)data + strs.sh_offset + sh.sh_name;
        size_t room = strs.sh_size - sh.sh_name;
        if (strnlen(n, room) == want && memcmp(n, name, want) == 0) {
            *out = sh;
            *at = eh.e_shoff + (size_t)i * sizeof(sh);
            return 0;
        }
    }
    return -ENOENT;
}

size_t cn_obj_note_build_id(const uint8_t *p, size_t n, size_t align, uint8_t *out, size_t max)
{
    size_t off = 0;
    uint64_t a = align == 8 ? 8 : 4;
    if (!p)
        return 0;
    while (n - off >= 12) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, p + off, 4);
        memcpy(&descsz, p + off + 4, 4);
        memcpy(&type, p + off + 8, 4);
        off += 12;
        /* the name is padded to 4 (both layouts); the descriptor to the note alignment */
        uint64_t nalign = ((uint64_t)namesz + 3) & ~3ULL;
        uint64_t desc = ((off + nalign + a - 1) & ~(a - 1)) - off;
        uint64_t dalign = ((uint64_t)descsz + a - 1) & ~(a - 1);
        if (desc > n - off || descsz > n - off - desc)
            return 0; /* (the last note's padding may be missing) */
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + off, "GNU", 4) == 0 &&
            descsz > 0 && descsz <= max) {
            memcpy(out, p + off + desc, descsz);
            return descsz;
        }
        if (desc + dalign >= n - off)
            break;
        off += desc + dalign;
    }
    return 0;
}

size_t cn_obj_elf_build_id(const uint8_t *data, size_t size, uint8_t *out, size_t max)
{
    Elf64_Ehdr eh;
    if (cn_obj_elf_header(data, size, &eh) < 0)
        return 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, data + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_type != PT_NOTE || !in_bounds(size, ph.p_offset, ph.p_filesz))
            continue;
        size_t n = cn_obj_note_build_id(data + ph.p_offset, ph.p_filesz, ph.p_align, out, max);
        if (n)
            return n;
    }
    return 0;
}

void cn_obj_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static uint32_t rd32(const uint8_t *p, bool swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

int cn_obj_ehhdr_parse(const uint8_t *p, size_t n, bool swap, cn_obj_ehhdr *out)
{
    /* version, eh_frame_ptr_enc, fde_count_enc, table_enc; then the two encoded values
     * and the table of (initial location, FDE address) pairs. Only 4-byte encodings and
     * the datarel|sdata4 table that every linker writes are accepted. */
    if (!p || n < 12 || p[0] != 1 || p[2] == PE_OMIT || p[3] != (PE_DATAREL | PE_SDATA4))
        return -EINVAL;
    int ptr_fmt = p[1] & PE_FORMAT, cnt_fmt = p[2] & PE_FORMAT;
    if ((ptr_fmt != PE_UDATA4 && ptr_fmt != PE_SDATA4) ||
        (cnt_fmt != PE_UDATA4 && cnt_fmt != PE_SDATA4))
        return -EINVAL;
    uint64_t count = rd32(p + 8, swap);
    if (count == 0 || count > (n - 12) / 8)
        return -EINVAL; /* a count the section cannot hold: truncated or garbage */
    out->count = count;
    out->table_off = 12;
    return 0;
}

void cn_obj_ehhdr_entry(const uint8_t *p, uint64_t i, bool swap, int64_t *loc, int64_t *fde)
{
    *loc = (int32_t)rd32(p + 12 + 8 * i, swap);
    *fde = (int32_t)rd32(p + 16 + 8 * i, swap);
}

int cn_obj_fuzz(const uint8_t *data, size_t size)
{
    static const char *const names[] = {".eh_frame_hdr",      ".eh_frame",      ".debug_frame",
                                        ".note.gnu.build-id", ".gnu_debuglink", ""};
    Elf64_Ehdr eh;
    Elf64_Shdr sh;
    uint8_t id[64];
    cn_obj_ehhdr h;
    int found = cn_obj_elf_header(data, size, &eh) == 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        found += cn_obj_elf_section(data, size, names[i], &sh) == 0;
    found += cn_obj_elf_build_id(data, size, id, sizeof(id)) > 0;
    found += cn_obj_note_build_id(data, size, 4, id, sizeof(id)) > 0;
    found += cn_obj_note_build_id(data, size, 8, id, sizeof(id)) > 0;
    for (int swap = 0; swap < 2; swap++) {
        if (cn_obj_ehhdr_parse(data, size, swap, &h) < 0)
            continue;
        int64_t loc, fde, sum = 0;
        for (uint64_t i = 0; i < h.count; i++) {
            cn_obj_ehhdr_entry(data, i, swap, &loc, &fde);
            sum += loc ^ fde;
        }
        found += sum != 0;
    }
    return found;
}
