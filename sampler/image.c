/* image.c — the ELF facts of an object, from an image of its file the sampler owns.
 *
 * Objects' files are read once (pread, never mmap: see read_image) into a sparse
 * anonymous image and parsed with objfile/'s bounds-checked decoders (cn_obj.h), so a
 * truncated or hostile ELF file gives an error, never a crash. The facts: PT_LOAD
 * segments (file offset <-> virtual address), .eh_frame_hdr, .debug_frame, and whether
 * the code keeps frame pointers. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "smp_internal.h"

/* Largest object file we load (bounds a target's influence on our address space: the
 * image is reserved, not committed), and most bytes read from one (bounds our memory). */
#define CN_SMP_MAX_OBJECT_BYTES (4ULL << 30)
#define CN_SMP_MAX_READ_BYTES   (1ULL << 30)

static bool in_file(const cn_smp__elf *e, uint64_t off, uint64_t n)
{
    return off <= e->size && n <= e->size - off;
}

static void find_debug_frame(cn_smp__elf *e)
{
    Elf64_Shdr sh;
    if (cn_obj_elf_section(e->data, e->size, ".debug_frame", &sh) == 0 &&
        sh.sh_type == SHT_PROGBITS && in_file(e, sh.sh_offset, sh.sh_size)) {
        e->debug_frame_off = sh.sh_offset;
        e->debug_frame_size = sh.sh_size;
    }
}

/* Samples function starts from the .eh_frame_hdr search table and tests their prologues:
 * an object built with frame pointers opens (nearly) every function with one. */
static void detect_fp(cn_smp__elf *e)
{
    const cn_smp__arch *arch = cn_smp__arch_get();
    cn_obj_ehhdr h;
    e->has_fp = -1;
    const uint8_t *hdr = cn_smp__elf_ehhdr(e, &h);
    if (!hdr)
        return;
    uint64_t step = h.count > 200 ? h.count / 200 : 1;
    uint32_t tested = 0, with_fp = 0;
    for (uint64_t i = 0; i < h.count; i += step) {
        int64_t loc, fde;
        uint8_t code[48];
        cn_obj_ehhdr_entry(hdr, i, false, &loc, &fde);
        if (cn_smp__elf_read(e, e->eh_frame_hdr_vaddr + (uint64_t)loc, code, sizeof(code)) < 0)
            continue;
        tested++;
        with_fp += arch->fp_prologue(code, sizeof(code));
    }
    e->fp_tested = tested;
    e->fp_found = with_fp;
    if (tested >= 4)
        e->has_fp = with_fp * 4 >= tested;
}

/* Reads the facts unwinding needs from e's image (data, size). Returns 0 or -ENOEXEC. */
static int elf_parse(cn_smp__elf *e)
{
    Elf64_Ehdr eh;
    if (cn_obj_elf_header(e->data, e->size, &eh) < 0)
        return -ENOEXEC;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, e->data + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD && e->nload < sizeof(e->load) / sizeof(e->load[0])) {
            e->load[e->nload].vaddr = ph.p_vaddr;
            e->load[e->nload].offset = ph.p_offset;
            e->load[e->nload].filesz = ph.p_filesz;
            e->load[e->nload].memsz = ph.p_memsz;
            e->load[e->nload].exec = ph.p_flags & PF_X;
            e->nload++;
        } else if (ph.p_type == PT_GNU_EH_FRAME) {
            e->eh_frame_hdr_vaddr = ph.p_vaddr;
            e->eh_frame_hdr_size = ph.p_memsz;
        }
    }
    find_debug_frame(e);
    e->ok = e->nload > 0;
    if (!e->ok)
        return -ENOEXEC;
    detect_fp(e);
    return 0;
}

/* Reads [off, off + n) of fd into the same place of img (size bytes), within the budget
 * *left. A short read (the file shrank meanwhile) leaves zeros: a corrupt image, which
 * the parsers reject or read as garbage, never a fault. */
static void read_part(int fd, uint8_t *img, size_t size, uint64_t off, uint64_t n, uint64_t *left)
{
    if (off >= size)
        return;
    if (n > size - off)
        n = size - off;
    if (n > *left)
        n = *left;
    *left -= n;
    while (n) {
        ssize_t r = pread(fd, img + off, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
}

/* The file's image in memory we own: an anonymous, reserved-not-committed region of the
 * file's size in which only what unwinding reads is filled by pread (headers, executable
 * and note segments, .eh_frame_hdr, .eh_frame, .debug_frame); the rest stays zero pages.
 * Never a mapping of the file itself: the target's user may truncate the file while a
 * session runs, and touching a mapped page past the new end is SIGBUS for the whole
 * daemon (docs/security.md). Returns 0 and *out (munmap size bytes), or negative errno. */
static int read_image(int fd, size_t size, uint8_t **out)
{
    uint8_t *img = mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (img == MAP_FAILED)
        return -errno;
    uint64_t left = CN_SMP_MAX_READ_BYTES;
    Elf64_Ehdr eh;
    read_part(fd, img, size, 0, sizeof(eh), &left);
    memcpy(&eh, img, sizeof(eh));
    if (eh.e_phentsize == sizeof(Elf64_Phdr))
        read_part(fd, img, size, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), &left);
    if (cn_obj_elf_header(img, size, &eh) == 0) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            memcpy(&ph, img + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
            if ((ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) || ph.p_type == PT_NOTE ||
                ph.p_type == PT_GNU_EH_FRAME)
                read_part(fd, img, size, ph.p_offset, ph.p_filesz, &left);
        }
    }
    if (eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shstrndx < eh.e_shnum && eh.e_shoff < size &&
        (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) <= size - eh.e_shoff) {
        read_part(fd, img, size, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), &left);
        static const char *const want[] = {".eh_frame", ".eh_frame_hdr", ".debug_frame"};
        Elf64_Shdr strs, sh;
        memcpy(&strs, img + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(strs), sizeof(strs));
        read_part(fd, img, size, strs.sh_offset, strs.sh_size, &left);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
            if (cn_obj_elf_section(img, size, want[i], &sh) == 0 && sh.sh_type != SHT_NOBITS)
                read_part(fd, img, size, sh.sh_offset, sh.sh_size, &left);
    }
    *out = img;
    return 0;
}

int cn_smp__elf_load_fd(cn_smp__obj *o, int fd)
{
    cn_smp__elf *e = &o->elf;
    if (e->tried)
        return e->ok ? 0 : -ENOEXEC;
    e->tried = true;
    e->has_fp = -1;
    struct stat st;
    int ret = 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
        (uint64_t)st.st_size > CN_SMP_MAX_OBJECT_BYTES)
        return -ENOEXEC;
    uint8_t *img = NULL;
    ret = read_image(fd, (size_t)st.st_size, &img);
    if (ret < 0)
        return ret;
    e->data = img;
    e->size = (size_t)st.st_size;
    ret = elf_parse(e);
    if (ret < 0)
        cn_smp__elf_unload(e), e->tried = true;
    return ret;
}

int cn_smp__elf_load(cn_smp__obj *o)
{
    cn_smp__elf *e = &o->elf;
    if (e->tried)
        return e->ok ? 0 : -ENOEXEC;
    if (!o->open_path) {
        e->tried = true;
        return -ENOENT;
    }
    /* The file checked when the object appeared, or nothing (cn_obj.h). */
    const cn_obj_ident *want = &o->pub.file;
    int fd = cn_obj_open(o->open_path, want->ino ? CN_OBJ_MATCH_ALL : 0, want, NULL);
    if (fd < 0) {
        e->tried = true;
        e->has_fp = -1;
        return fd;
    }
    int ret = cn_smp__elf_load_fd(o, fd);
    close(fd);
    return ret;
}

int cn_smp__elf_load_image(cn_smp__obj *o, const void *image, size_t size)
{
    cn_smp__elf *e = &o->elf;
    cn_smp__elf_unload(e);
    e->tried = true;
    e->has_fp = -1;
    uint8_t *copy = size >= sizeof(Elf64_Ehdr) ? malloc(size) : NULL;
    if (!copy)
        return size >= sizeof(Elf64_Ehdr) ? -ENOMEM : -ENOEXEC;
    memcpy(copy, image, size);
    e->data = copy;
    e->size = size;
    e->heap = true;
    int ret = elf_parse(e);
    if (ret < 0)
        cn_smp__elf_unload(e), e->tried = true;
    return ret;
}

void cn_smp__elf_unload(cn_smp__elf *e)
{
    cn_smp__cfi_free(e->cfi); /* its Elf handle reads the image below */
    if (e->data && e->heap)
        free((void *)e->data);
    else if (e->data)
        munmap((void *)e->data, e->size);
    memset(e, 0, sizeof(*e));
}

bool cn_smp__elf_bias(const cn_smp__elf *e, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
    for (uint32_t i = 0; i < e->nload; i++) {
        const typeof(e->load[0]) *l = &e->load[i];
        uint64_t seg_page = l->offset & ~0xfffULL;
        if (pgoff >= seg_page && pgoff < l->offset + l->filesz) {
            /* start maps file offset pgoff = vaddr (pgoff - offset + vaddr) */
            *bias = start - (pgoff - l->offset + l->vaddr);
            return true;
        }
    }
    return false;
}

const uint8_t *cn_smp__elf_ptr(const cn_smp__elf *e, uint64_t vaddr, size_t n)
{
    for (uint32_t i = 0; i < e->nload; i++) {
        const typeof(e->load[0]) *l = &e->load[i];
        if (vaddr < l->vaddr || vaddr - l->vaddr >= l->filesz || n > l->filesz - (vaddr - l->vaddr))
            continue;
        uint64_t off = l->offset + (vaddr - l->vaddr);
        return in_file(e, off, n) ? e->data + off : NULL;
    }
    return NULL;
}

const uint8_t *cn_smp__elf_ehhdr(const cn_smp__elf *e, cn_obj_ehhdr *h)
{
    const uint8_t *p = e->eh_frame_hdr_vaddr && e->eh_frame_hdr_size <= SIZE_MAX
                           ? cn_smp__elf_ptr(e, e->eh_frame_hdr_vaddr, e->eh_frame_hdr_size)
                           : NULL;
    return p && cn_obj_ehhdr_parse(p, e->eh_frame_hdr_size, false, h) == 0 ? p : NULL;
}

int cn_smp__elf_read(const cn_smp__elf *e, uint64_t vaddr, void *out, size_t n)
{
    for (uint32_t i = 0; i < e->nload; i++) {
        const typeof(e->load[0]) *l = &e->load[i];
        if (vaddr < l->vaddr || vaddr - l->vaddr >= l->filesz || n > l->filesz - (vaddr - l->vaddr))
            continue;
        uint64_t off = l->offset + (vaddr - l->vaddr);
        if (!in_file(e, off, n))
            return -EFAULT;
        memcpy(out, e->data + off, n);
        return 0;
    }
    return -EFAULT;
}
