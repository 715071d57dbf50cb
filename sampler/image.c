/* image.c — the ELF facts of an object, from an image of its file the sampler owns.
 *
 * Objects' files are read once (pread, never mmap: see read_image) into a sparse
 * anonymous image and parsed with objfile/'s bounds-checked decoders (cn_obj.h), so a
 * truncated or hostile ELF file gives an error, never a crash. The facts: PT_LOAD
 * segments (file offset <-> virtual address), .eh_frame_hdr, .eh_frame, .debug_frame, and
 * whether the code keeps frame pointers. Only those parts of the file are read: never its
 * code, which would make the sampler's memory grow with every binary the machine runs
 * (a compiler's text is tens of MiB); the prologues that tell frame pointers apart are
 * read from the file once, at load. A large .eh_frame is not read at load either: its
 * pages are read when a lookup needs them ("lazy" below). cache.c shares the result by
 * file identity. */
#include <assert.h>
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
#define CN_SMP_MAX_READ_BYTES   (256ULL << 20)

static bool in_file(const cn_smp__elf *e, uint64_t off, uint64_t n)
{
    return off <= e->size && n <= e->size - off;
}

/* .eh_frame read on demand. A whole-system session during a build held every program's
 * and library's .eh_frame from its first sample on (cc1 2.3 MiB, LLVM's and clang's 4.8
 * MiB each for one compile of the BPF program), of which unwinding the samples of a run
 * reads the FDEs of the functions it met: a few pages. The search table (.eh_frame_hdr,
 * read at load) finds an address's FDE; its page and its CIE's are read before libdw
 * looks (cn_smp__elf_fill_fde), and any other reader's pages when it reads them
 * (cn_smp__elf_ptr). A page that was read stays; the file stays open (pread: never a
 * mapping, see read_image) until the entry is freed. Only a section of LAZY_MIN bytes or
 * more, with a search table that points at it, is read so. */
#define LAZY_MIN  (64u << 10)
#define LAZY_PAGE 4096u

typedef struct cn_smp__lazy {
    uint8_t *img;      /* the image (e->data), written here only */
    int fd;            /* the file, owned */
    uint64_t off, len; /* .eh_frame's bytes in the file */
    uint64_t first;    /* the page number (file offset / LAZY_PAGE) of off */
    uint8_t *filled;   /* a bit per page from first on: read already */
    uint64_t bytes;    /* bytes read into img so far */
} cn_smp__lazy;

static void lazy_free(cn_smp__lazy *z)
{
    if (!z)
        return;
    if (z->fd >= 0)
        close(z->fd);
    free(z->filled);
    free(z);
}

static bool page_filled(const cn_smp__lazy *z, uint64_t page)
{
    uint64_t i = page - z->first;
    return z->filled[i / 8] & (1u << (i % 8));
}

/* Reads the pages of [off, off + n) that lie in z's section and were not read yet. */
static void lazy_fill(cn_smp__lazy *z, uint64_t off, uint64_t n)
{
    uint64_t end = z->off + z->len;
    if (off >= end)
        return;
    uint64_t lo = off > z->off ? off : z->off, hi = n > end - off ? end : off + n;
    if (lo >= hi)
        return;
    for (uint64_t page = lo / LAZY_PAGE; page <= (hi - 1) / LAZY_PAGE; page++) {
        if (page_filled(z, page))
            continue;
        uint64_t i = page - z->first;
        z->filled[i / 8] |= (uint8_t)(1u << (i % 8));
        uint64_t a = page * LAZY_PAGE > z->off ? page * LAZY_PAGE : z->off;
        uint64_t b = (page + 1) * LAZY_PAGE < end ? (page + 1) * LAZY_PAGE : end;
        z->bytes += b - a;
        while (a < b) { /* a short read (the file shrank) leaves zeros, as read_part */
            ssize_t r = pread(z->fd, z->img + a, b - a, (off_t)a);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            a += (uint64_t)r;
        }
    }
}

/* Whether every byte of [off, off + n) lies in z's section, on pages read already. */
static bool lazy_holds(const cn_smp__lazy *z, uint64_t off, uint64_t n)
{
    if (!z || n == 0 || off < z->off || off - z->off >= z->len || n > z->len - (off - z->off))
        return false;
    for (uint64_t page = off / LAZY_PAGE; page <= (off + n - 1) / LAZY_PAGE; page++)
        if (!page_filled(z, page))
            return false;
    return true;
}

/* Whether the image holds [off, off + n) of the file (a heap image holds all of it). */
static bool in_parts(const cn_smp__elf *e, uint64_t off, uint64_t n)
{
    if (!in_file(e, off, n))
        return false;
    if (e->heap)
        return true;
    for (uint32_t i = 0; i < e->nparts; i++)
        if (off >= e->parts[i].off && n <= e->parts[i].len &&
            off - e->parts[i].off <= e->parts[i].len - n)
            return true;
    return lazy_holds(e->lazy, off, n);
}

static void find_debug_frame(cn_smp__elf *e)
{
    Elf64_Shdr sh;
    if (cn_obj_elf_section(e->data, e->size, ".debug_frame", &sh) == 0 &&
        sh.sh_type == SHT_PROGBITS && in_parts(e, sh.sh_offset, sh.sh_size)) {
        e->debug_frame_off = sh.sh_offset;
        e->debug_frame_size = sh.sh_size;
    }
}

/* File offset of [vaddr, vaddr + n) when one loaded segment holds it in the file. */
static bool vaddr_to_off(const cn_smp__elf *e, uint64_t vaddr, uint64_t n, uint64_t *off)
{
    for (uint32_t i = 0; i < e->nload; i++) {
        const typeof(e->load[0]) *l = &e->load[i];
        if (vaddr < l->vaddr || vaddr - l->vaddr >= l->filesz || n > l->filesz - (vaddr - l->vaddr))
            continue;
        *off = l->offset + (vaddr - l->vaddr);
        return in_file(e, *off, n);
    }
    return false;
}

/* Reads n code bytes at vaddr: from fd (the file, at load) when fd >= 0, else from the
 * image (a heap image holds its code). Returns 0 or -EFAULT. */
static int read_code(const cn_smp__elf *e, int fd, uint64_t vaddr, uint8_t *out, size_t n)
{
    uint64_t off;
    if (fd < 0)
        return cn_smp__elf_read(e, vaddr, out, n);
    if (!vaddr_to_off(e, vaddr, n, &off))
        return -EFAULT;
    ssize_t r;
    do
        r = pread(fd, out, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r == (ssize_t)n ? 0 : -EFAULT;
}

/* Samples function starts from the .eh_frame_hdr search table and tests their prologues
 * (read through fd, or the image when fd < 0): an object built with frame pointers opens
 * (nearly) every function with one. */
static void detect_fp(cn_smp__elf *e, int fd)
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
        if (read_code(e, fd, e->eh_frame_hdr_vaddr + (uint64_t)loc, code, sizeof(code)) < 0)
            continue;
        tested++;
        with_fp += arch->fp_prologue(code, sizeof(code));
    }
    e->fp_tested = tested;
    e->fp_found = with_fp;
    if (tested >= 4)
        e->has_fp = with_fp * 4 >= tested;
}

/* Reads the facts unwinding needs from e's image (data, size); fd as for detect_fp.
 * Returns 0 or -ENOEXEC. */
static int elf_parse(cn_smp__elf *e, int fd)
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
    detect_fp(e, fd);
    return 0;
}

#define PART_SLACK 16

/* Reads [off, off + n) of fd into the same place of e's image, within the budget *left,
 * and records the part. A short read (the file shrank meanwhile) leaves zeros: a corrupt
 * image, which the parsers reject or read as garbage, never a fault. */
static void read_part(cn_smp__elf *e, int fd, uint64_t off, uint64_t n, uint64_t *left)
{
    uint8_t *img = (uint8_t *)e->data;
    if (off >= e->size || n == 0 || e->nparts == CN_SMP__ELF_PARTS)
        return;
    if (n > e->size - off)
        n = e->size - off;
    /* A little more on each side: a reader of words (libunwind) may read past a table's
     * last entry into the alignment padding before the next section. */
    uint64_t lo = off > PART_SLACK ? off - PART_SLACK : 0;
    uint64_t hi = e->size - (off + n) > PART_SLACK ? off + n + PART_SLACK : e->size;
    off = lo;
    n = hi - lo;
    if (n > *left)
        n = *left;
    *left -= n;
    e->parts[e->nparts].off = off;
    e->parts[e->nparts].len = n;
    e->nparts++;
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

static int part_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b; /* parts[i].off first */
    return *x < *y ? -1 : *x > *y;
}

/* Sorts the parts and joins those that overlap or touch, so that a read spanning two
 * neighbouring sections (one range of the file, every byte read) is found in one part. */
static void merge_parts(cn_smp__elf *e)
{
    qsort(e->parts, e->nparts, sizeof(e->parts[0]), part_cmp);
    uint32_t n = 0;
    for (uint32_t i = 0; i < e->nparts; i++) {
        if (n > 0 && e->parts[i].off <= e->parts[n - 1].off + e->parts[n - 1].len) {
            uint64_t end = e->parts[i].off + e->parts[i].len;
            if (end > e->parts[n - 1].off + e->parts[n - 1].len)
                e->parts[n - 1].len = end - e->parts[n - 1].off;
        } else {
            e->parts[n++] = e->parts[i];
        }
    }
    e->nparts = n;
    e->read_bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        e->read_bytes += e->parts[i].len;
}

/* Without section headers, .eh_frame is found through .eh_frame_hdr's eh_frame_ptr
 * (pc-relative sdata4, as linkers write it) and read to the end of its segment. */
static void read_eh_frame_by_hdr(cn_smp__elf *e, int fd, const Elf64_Ehdr *eh,
                                 const Elf64_Phdr *hdr, uint64_t *left)
{
    uint8_t h[8];
    int32_t rel;
    if (!in_parts(e, hdr->p_offset, sizeof(h)))
        return;
    memcpy(h, e->data + hdr->p_offset, sizeof(h));
    if (h[0] != 1 || h[1] != 0x1b /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */)
        return;
    memcpy(&rel, h + 4, sizeof(rel));
    uint64_t at = hdr->p_vaddr + 4 + (uint64_t)(int64_t)rel;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, e->data + eh->e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD && at >= ph.p_vaddr && at - ph.p_vaddr < ph.p_filesz)
            read_part(e, fd, ph.p_offset + (at - ph.p_vaddr), ph.p_filesz - (at - ph.p_vaddr),
                      left);
    }
}

/* The program headers' parts: notes (the build-id) and .eh_frame_hdr; .eh_frame through
 * the latter when there are no section headers. */
static void read_segments(cn_smp__elf *e, int fd, bool have_sections, uint64_t *left)
{
    Elf64_Ehdr eh;
    if (cn_obj_elf_header(e->data, e->size, &eh) < 0)
        return;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, e->data + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_NOTE || ph.p_type == PT_GNU_EH_FRAME)
            read_part(e, fd, ph.p_offset, ph.p_filesz, left);
        if (ph.p_type == PT_GNU_EH_FRAME && !have_sections)
            read_eh_frame_by_hdr(e, fd, &eh, &ph, left);
    }
}

/* The section headers, their names, the unwind sections and crti's code. Returns whether .eh_frame
 * was found among them; one of LAZY_MIN bytes or more is not read but left in *later
 * (lazy_start reads it on demand, or now). */
static bool read_sections(cn_smp__elf *e, int fd, const Elf64_Ehdr *eh, uint64_t *left,
                          Elf64_Shdr *later)
{
    /* .init and .fini: crti's code, a few bytes whose shape compiled CFI knows (cfi.c). */
    static const char *const want[] = {".eh_frame", ".eh_frame_hdr", ".debug_frame", ".init",
                                       ".fini"};
    bool found = false;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum ||
        eh->e_shoff >= e->size ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > e->size - eh->e_shoff)
        return false;
    read_part(e, fd, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), left);
    Elf64_Shdr strs, sh;
    memcpy(&strs, e->data + eh->e_shoff + (size_t)eh->e_shstrndx * sizeof(strs), sizeof(strs));
    read_part(e, fd, strs.sh_offset, strs.sh_size, left);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (cn_obj_elf_section(e->data, e->size, want[i], &sh) == 0 && sh.sh_type != SHT_NOBITS) {
            found |= i == 0;
            if (i == 0 && sh.sh_size >= LAZY_MIN && sh.sh_size <= *left) {
                *later = sh;
                *left -= sh.sh_size; /* its pages, when all are read, count as read now */
            } else {
                read_part(e, fd, sh.sh_offset, sh.sh_size, left);
            }
        }
    return found;
}

/* Whether e's .eh_frame_hdr has a search table and points at .eh_frame (sh, at its
 * address): then every lookup goes through the table, and an FDE's bytes are where the
 * table says. */
static bool table_finds(const cn_smp__elf *e, const Elf64_Shdr *sh)
{
    cn_obj_ehhdr h;
    const uint8_t *hdr = cn_smp__elf_ehhdr(e, &h);
    int32_t rel;
    if (!hdr || hdr[1] != 0x1b /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */)
        return false;
    memcpy(&rel, hdr + 4, sizeof(rel));
    return e->eh_frame_hdr_vaddr + 4 + (uint64_t)(int64_t)rel == sh->sh_addr;
}

/* Puts .eh_frame_hdr's section header before .eh_frame's in the image, where it came
 * after (clang's section order: LLVM's own libraries, clang-built programs). libdw 0.188
 * takes the search table only from an .eh_frame_hdr it met before .eh_frame in the
 * section headers: without it, each lookup scans .eh_frame from the start up to the
 * address (keeping every entry it passed: LLVM's 100 000 FDEs for a lookup near the
 * end), and finds nothing past the first page of a lazy .eh_frame not read yet. The two
 * headers trade places, nothing else moves (no section refers to either by index); the
 * image is ours, never written back. */
static void eh_frame_hdr_first(cn_smp__elf *e)
{
    Elf64_Shdr eh_sh, hdr_sh;
    size_t eh_at, hdr_at;
    if (cn_obj_elf_section_at(e->data, e->size, ".eh_frame", &eh_sh, &eh_at) < 0 ||
        cn_obj_elf_section_at(e->data, e->size, ".eh_frame_hdr", &hdr_sh, &hdr_at) < 0 ||
        hdr_at < eh_at)
        return;
    uint8_t *img = (uint8_t *)e->data;
    memcpy(img + eh_at, &hdr_sh, sizeof(hdr_sh));
    memcpy(img + hdr_at, &eh_sh, sizeof(eh_sh));
}

/* Reads .eh_frame (sh, left out by read_sections) on demand from a copy of fd, or now
 * when its search table would not find its entries or there is no memory to track it.
 * Runs after elf_parse (the search table's place). */
static void lazy_start(cn_smp__elf *e, int fd, const Elf64_Shdr *sh)
{
    uint64_t pages = (sh->sh_offset + sh->sh_size - 1) / LAZY_PAGE - sh->sh_offset / LAZY_PAGE + 1;
    cn_smp__lazy *z = NULL;
    if (table_finds(e, sh) && in_file(e, sh->sh_offset, sh->sh_size) &&
        (z = calloc(1, sizeof(*z))) && (z->filled = calloc((pages + 7) / 8, 1)) &&
        (z->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
        z->img = (uint8_t *)e->data;
        z->off = sh->sh_offset;
        z->len = sh->sh_size;
        z->first = sh->sh_offset / LAZY_PAGE;
        e->lazy = z;
        return;
    }
    if (z)
        z->fd = -1;
    lazy_free(z);
    uint64_t left = sh->sh_size; /* reserved by read_sections */
    read_part(e, fd, sh->sh_offset, sh->sh_size, &left);
    merge_parts(e);
}

/* The file's image in memory we own: an anonymous, reserved-not-committed region of the
 * file's size in which only what unwinding reads is filled by pread (headers, notes,
 * .eh_frame_hdr, .eh_frame, .debug_frame: e->parts); the rest stays zero pages, never
 * touched. Never a mapping of the file itself: the target's user may truncate the file
 * while a session runs, and touching a mapped page past the new end is SIGBUS for the
 * whole daemon (docs/security.md). Returns 0 (unmap size bytes of e->data), or negative
 * errno. */
static int read_image(cn_smp__elf *e, int fd, size_t size, Elf64_Shdr *later)
{
    uint8_t *img = mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (img == MAP_FAILED)
        return -errno;
    e->data = img;
    e->size = size;
    uint64_t left = CN_SMP_MAX_READ_BYTES;
    Elf64_Ehdr eh;
    read_part(e, fd, 0, sizeof(eh), &left);
    memcpy(&eh, img, sizeof(eh));
    if (eh.e_phentsize == sizeof(Elf64_Phdr))
        read_part(e, fd, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), &left);
    bool have_sections = read_sections(e, fd, &eh, &left, later);
    if (have_sections)
        eh_frame_hdr_first(e);
    read_segments(e, fd, have_sections, &left);
    merge_parts(e);
    return 0;
}

int cn_smp__elf_read_fd(int fd, cn_smp__elf **out)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
        (uint64_t)st.st_size > CN_SMP_MAX_OBJECT_BYTES)
        return -ENOEXEC;
    cn_smp__elf *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->has_fp = -1;
    Elf64_Shdr later = {0};
    int ret = read_image(e, fd, (size_t)st.st_size, &later);
    if (ret == 0)
        ret = elf_parse(e, fd);
    if (ret == 0 && later.sh_size)
        lazy_start(e, fd, &later);
    if (ret < 0) {
        cn_smp__elf_free(e);
        return ret;
    }
    *out = e;
    return 0;
}

/* Holds e as o's tables, given to o's cache (when o has one and a file identity). */
static void obj_hold(cn_smp__obj *o, cn_smp__elf *e)
{
    if (o->cache && o->pub.file.ino)
        cn_smp__cache_add(o->cache, e, &o->pub.file);
    o->elf = e;
}

bool cn_smp__elf_from_cache(cn_smp__obj *o)
{
    if (!o->elf && o->cache && o->pub.file.ino)
        o->elf = cn_smp__cache_get(o->cache, &o->pub.file);
    return o->elf != NULL;
}

int cn_smp__elf_load_fd(cn_smp__obj *o, int fd)
{
    if (o->elf || cn_smp__elf_from_cache(o))
        return 0;
    if (o->elf_failed)
        return -ENOEXEC;
    cn_smp__elf *e;
    int ret = cn_smp__elf_read_fd(fd, &e);
    if (ret < 0) {
        o->elf_failed = true;
        return ret;
    }
    obj_hold(o, e);
    return 0;
}

int cn_smp__elf_load(cn_smp__obj *o)
{
    if (o->elf || cn_smp__elf_from_cache(o))
        return 0;
    if (o->elf_failed)
        return -ENOEXEC;
    if (!o->open_path) {
        o->elf_failed = true;
        return -ENOENT;
    }
    /* The file checked when the object appeared, or nothing (cn_obj.h). */
    const cn_obj_ident *want = &o->pub.file;
    int fd = cn_obj_open_in(cn_smp__cache_mounts(o->cache), o->open_path,
                            want->ino ? CN_OBJ_MATCH_ALL : 0, want, NULL);
    if (fd < 0) {
        o->elf_failed = true;
        return fd;
    }
    int ret = cn_smp__elf_load_fd(o, fd);
    close(fd);
    return ret;
}

int cn_smp__elf_load_image(cn_smp__obj *o, const void *image, size_t size)
{
    cn_smp__obj_release(o);
    o->elf_failed = true; /* until it succeeds */
    if (size < sizeof(Elf64_Ehdr))
        return -ENOEXEC;
    cn_smp__elf *e = calloc(1, sizeof(*e));
    uint8_t *copy = malloc(size);
    if (!e || !copy) {
        free(e);
        free(copy);
        return -ENOMEM;
    }
    memcpy(copy, image, size);
    e->data = copy;
    e->size = size;
    e->heap = true;
    e->read_bytes = size;
    e->has_fp = -1;
    int ret = elf_parse(e, -1);
    if (ret < 0) {
        cn_smp__elf_free(e);
        return ret;
    }
    o->elf = e; /* the object's alone: an image has no file to share by */
    o->elf_failed = false;
    return 0;
}

void cn_smp__elf_free(cn_smp__elf *e)
{
    if (!e)
        return;
    cn_smp__cfi_free(e->cfi); /* its Elf handle reads the image below */
    lazy_free(e->lazy);
    if (e->data && e->heap)
        free((void *)e->data);
    else if (e->data)
        munmap((void *)e->data, e->size);
    free(e);
}

uint64_t cn_smp__elf_bytes(const cn_smp__elf *e)
{
    return sizeof(*e) + e->read_bytes + (e->lazy ? e->lazy->bytes : 0) + cn_smp__cfi_bytes(e->cfi);
}

void cn_smp__obj_release(cn_smp__obj *o)
{
    if (o->elf)
        cn_smp__elf_put(o->elf);
    o->elf = NULL;
    o->elf_failed = false;
}

void cn_smp__obj_mapped(cn_smp__obj *o)
{
    o->nmapped++;
}

void cn_smp__obj_unmapped(cn_smp__obj *o)
{
    assert(o->nmapped > 0); /* every mapping counted once when made */
    if (--o->nmapped == 0 && o->pub.kind == CN_SMP_OBJ_USER && o->pub.file.ino)
        cn_smp__obj_release(o);
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
    uint64_t off;
    if (!vaddr_to_off(e, vaddr, n, &off))
        return NULL;
    if (e->lazy)
        lazy_fill(e->lazy, off, n);
    return in_parts(e, off, n) ? e->data + off : NULL;
}

/* Reads the .eh_frame entry (CIE or FDE) at file offset off into the image: its length
 * word, then the rest. Returns its size in the file, or 0 when it is not one; *head: the
 * bytes of its length field (4, or 12 in 64-bit DWARF). */
static uint64_t fill_entry(const cn_smp__elf *e, uint64_t off, uint64_t *head_out)
{
    cn_smp__lazy *z = e->lazy;
    uint32_t len32;
    uint64_t len, head = 4;
    lazy_fill(z, off, 4);
    if (!lazy_holds(z, off, 4))
        return 0;
    memcpy(&len32, e->data + off, 4);
    len = len32;
    if (len32 == 0xffffffffu) { /* 64-bit DWARF: the length follows */
        lazy_fill(z, off + 4, 8);
        if (!lazy_holds(z, off + 4, 8))
            return 0;
        memcpy(&len, e->data + off + 4, 8);
        head = 12;
    }
    if (len == 0 || len > z->len)
        return 0;
    lazy_fill(z, off, head + len);
    *head_out = head;
    return head + len;
}

void cn_smp__elf_fill_fde(const cn_smp__elf *e, uint64_t vaddr)
{
    cn_obj_ehhdr h;
    const uint8_t *hdr;
    if (!e->lazy || !(hdr = cn_smp__elf_ehhdr(e, &h)))
        return;
    /* The table's last entry starting at or below vaddr, as libdw's search picks it. */
    uint64_t after = cn_smp__ehhdr_after(e, hdr, &h, vaddr);
    int64_t loc, fde;
    if (after == 0)
        return;
    cn_obj_ehhdr_entry(hdr, after - 1, false, &loc, &fde);
    uint64_t at, head = 4;
    if (!vaddr_to_off(e, e->eh_frame_hdr_vaddr + (uint64_t)fde, 4, &at) ||
        fill_entry(e, at, &head) < head + 4)
        return;
    /* After an FDE's length, its distance back to its CIE (.eh_frame's CIE pointer). */
    uint64_t ptr_at = at + head;
    uint32_t back;
    if (!lazy_holds(e->lazy, ptr_at, 4))
        return;
    memcpy(&back, e->data + ptr_at, 4);
    if (back != 0 && back <= ptr_at)
        fill_entry(e, ptr_at - back, &head);
}

bool cn_smp__elf_lazy(const cn_smp__elf *e)
{
    return e->lazy != NULL;
}

void cn_smp__elf_fill_all(cn_smp__elf *e)
{
    cn_smp__lazy *z = e->lazy;
    if (!z)
        return;
    lazy_fill(z, z->off, z->len);
    /* Now a part like the others: the image holds all of it. */
    if (e->nparts < CN_SMP__ELF_PARTS) {
        e->parts[e->nparts].off = z->off;
        e->parts[e->nparts].len = z->len;
        e->nparts++;
        merge_parts(e);
        e->lazy = NULL;
        lazy_free(z);
    }
}

uint64_t cn_smp__ehhdr_after(const cn_smp__elf *e, const uint8_t *hdr, const cn_obj_ehhdr *h,
                             uint64_t vaddr)
{
    uint64_t lo = 0, hi = h->count; /* the table is sorted by initial location */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int64_t loc, fde;
        cn_obj_ehhdr_entry(hdr, mid, false, &loc, &fde);
        if (e->eh_frame_hdr_vaddr + (uint64_t)loc <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
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
    const uint8_t *p = cn_smp__elf_ptr(e, vaddr, n);
    if (p) {
        memcpy(out, p, n);
        return 0;
    }
    /* The rest of a loaded segment reads as zeros, never as a fault: libunwind dereferences
     * a CIE's indirect personality pointer (in .data.rel.ro), which unwinding never uses,
     * and reads the code at each frame's pc to recognise a signal trampoline (arm64: at
     * every step, taking a failed read for a bad pc and the link register for the caller).
     * Zeros are no trampoline and no PLT stub; the trampolines that matter are recognised
     * otherwise (glibc's x86-64 __restore_rt by its CFI, the vDSO's kept whole). */
    for (uint32_t i = 0; i < e->nload; i++) {
        const typeof(e->load[0]) *l = &e->load[i];
        if (vaddr >= l->vaddr && vaddr - l->vaddr < l->filesz &&
            n <= l->filesz - (vaddr - l->vaddr)) {
            memset(out, 0, n);
            return 0;
        }
    }
    return -EFAULT;
}
