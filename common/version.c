/* version.c — the one version canopy reports: CMake's project VERSION (CANOPY_VERSION, set
 * for every file by the top-level CMakeLists.txt), and the running binary's GNU build-id,
 * which names the exact build (the linker's hash of its contents: what `readelf -n`,
 * `file` and debuginfod show). `canopy --version`, `canopyd --version` and the protocol's
 * `hello` print both; the Debian package's version and NEWS.md's newest entry are checked
 * against CANOPY_VERSION by tests/integration/test_version.sh. */
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "cn_common.h"

typedef struct {
    char *out;
    size_t cap;
} build_id_ctx;

/* Copies the build-id note's bytes as hex from one PT_NOTE segment; 1 when found. */
static int note_build_id(const unsigned char *p, size_t len, build_id_ctx *c)
{
    while (len >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
        size_t name = (n->n_namesz + 3) & ~(size_t)3, desc = (n->n_descsz + 3) & ~(size_t)3;
        if (sizeof(*n) + name + desc > len)
            return 0;
        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(p + sizeof(*n), "GNU", 4) &&
            2 * (size_t)n->n_descsz < c->cap) {
            const unsigned char *d = p + sizeof(*n) + name;
            for (size_t i = 0; i < n->n_descsz; i++)
                snprintf(c->out + 2 * i, 3, "%02x", d[i]);
            return 1;
        }
        p += sizeof(*n) + name + desc;
        len -= sizeof(*n) + name + desc;
    }
    return 0;
}

/* dl_iterate_phdr visits the main program first; it stops the walk there (returns 1). */
static int main_program(struct dl_phdr_info *info, size_t size, void *arg)
{
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE &&
            note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz, arg))
            break;
    }
    return 1;
}

const char *cn_common_build_id(char *buf, size_t n)
{
    build_id_ctx c = {buf, n};
    if (n)
        buf[0] = '\0';
    if (n > 1)
        dl_iterate_phdr(main_program, &c);
    return buf;
}

const char *cn_common_version_line(const char *prog, char *buf, size_t n)
{
    char id[CN_COMMON_BUILD_ID_MAX];
    cn_common_build_id(id, sizeof(id));
    snprintf(buf, n, "%s %s (build-id %s)", prog, CANOPY_VERSION, *id ? id : "none");
    return buf;
}
