/* cn_obj.h — object files as canopyd reads them on a target's behalf: the whole API of
 * objfile/, the layer below the sampler and the symbolizer.
 *
 * A root daemon reads files a target process named (its mapped ELF files, their debug
 * files, its perf maps). A path is only a name: between the moment the sampler checked
 * the mapped file and the moment anything reads it, its user can put a symlink to a
 * root-only file, a FIFO, a pty or a FUSE file at that name. cn_obj_open() therefore opens
 * so that the fd it returns is *the* file that was checked:
 *   1. the path is resolved to an O_PATH fd, which opens nothing (no device's open, no
 *      FIFO wait, never a controlling terminal): /proc/PID/map_files/… through its magic
 *      link (the mapped file itself, no lookup), /proc/PID/root/… with openat2 inside that
 *      root, any other path with openat2 — no symlink anywhere on the way, no magic link,
 *      no "." or ".." — unless the caller says the directory is root's own
 *      (CN_OBJ_TRUSTED); a path the mount tables put on FUSE is refused before any lookup
 *      (a relative path, only ever the caller's own name, is not looked up there);
 *   2. fstat and fstatfs on that fd: a regular file, not on FUSE, and, when asked, the
 *      device, inode, size and modification time the caller checked before;
 *   3. only then is the same inode opened for reading (through /proc/self/fd/N, which
 *      re-opens the checked file, not the name) with O_NONBLOCK | O_NOCTTY | O_CLOEXEC.
 *
 * Below the open, the decoders both modules need over an object's raw bytes: the ELF
 * header, a section by name, build-id notes, the .eh_frame_hdr search table (one of each;
 * the sampler and the symbolizer keep their own jobs on top); and the one /proc/PID/maps
 * line parser (the sampler's address spaces, interp/'s interpreter detection).
 *
 * Nothing here logs. The one state kept is the caller's: a cache of mount tables
 * (cn_obj_mounts) that the FUSE check of step 1 reads instead of a mountinfo file per open.
 * Functions return 0 or an fd, else a negative errno.
 */
#ifndef CN_OBJ_H
#define CN_OBJ_H

#include <elf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What identifies the file read: where it is (device, inode) and which version of it
 * (size, modification time). ino 0 = no identity known. uid and mode are reported by
 * cn_obj_open (for callers' ownership rules), never compared. */
typedef struct cn_obj_ident {
    uint64_t dev, ino;
    int64_t size;
    int64_t mtime_ns;
    uint32_t uid, mode;
} cn_obj_ident;

/* Flags of cn_obj_open. */
enum {
    CN_OBJ_TRUSTED = 1 << 0,    /* a directory root configured (debug dirs): symlinks
                                   are followed (/usr/lib/debug/.build-id links) */
    CN_OBJ_MATCH_INO = 1 << 1,  /* the file must have want->ino */
    CN_OBJ_MATCH_DEV = 1 << 2,  /* … and want->dev */
    CN_OBJ_MATCH_FILE = 1 << 3, /* … and want->size and want->mtime_ns (the same version) */
};
#define CN_OBJ_MATCH_ALL (CN_OBJ_MATCH_INO | CN_OBJ_MATCH_DEV | CN_OBJ_MATCH_FILE)

/* Opens path for reading under the rules above. want (may be NULL without MATCH flags) is
 * what the file must match; *got (may be NULL) receives what it is. Returns an fd
 * (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC; the caller closes it) or a negative
 * errno: -ELOOP a symlink or magic link on the way, -EINVAL not a regular file or a path
 * with "." or "..", -EREMOTE on FUSE, -ESTALE not the file wanted, else the open's. */
int cn_obj_open(const char *path, unsigned flags, const cn_obj_ident *want, cn_obj_ident *got);

/* A cache of mount tables, one per mount namespace, re-read only when the kernel says the
 * namespace's mounts changed (poll(2) on its open mountinfo: POLLPRI). Thread-safe;
 * reference counted, so that a loader thread may outlive its creator. At most 16
 * namespaces are kept (least recently used replaced). */
typedef struct cn_obj_mounts cn_obj_mounts;
typedef struct cn_obj_mounts_stats {
    uint64_t reads;   /* tables read for a namespace not held */
    uint64_t rereads; /* tables read again after a change */
    uint64_t hits;    /* answers from a held, current table */
} cn_obj_mounts_stats;
/* A new cache with one reference, or NULL (ENOMEM). */
cn_obj_mounts *cn_obj_mounts_new(void);
/* One more reference (m may be NULL); returns m. */
cn_obj_mounts *cn_obj_mounts_ref(cn_obj_mounts *m);
/* Drops a reference; the last closes the tables' files and frees m. Accepts NULL. */
void cn_obj_mounts_unref(cn_obj_mounts *m);
void cn_obj_mounts_stats_get(cn_obj_mounts *m, cn_obj_mounts_stats *out);
/* The type of the file system holding path in process pid's mount namespace (pid 0:
 * ours), as cn_obj_mount_fstype, from m's tables (m NULL: reads the table now). */
int cn_obj_mounts_fstype(cn_obj_mounts *m, int pid, const char *path, char *fstype, size_t size);

/* cn_obj_open with m's mount tables for the FUSE check (m NULL: read at each open). */
int cn_obj_open_in(cn_obj_mounts *m, const char *path, unsigned flags, const cn_obj_ident *want,
                   cn_obj_ident *got);

/* The identity of an open fd (fstat). 0 or negative errno. */
int cn_obj_ident_of(int fd, cn_obj_ident *out);

/* Whether two identities name the same version of the same file (dev, ino, size, mtime). */
bool cn_obj_ident_same(const cn_obj_ident *a, const cn_obj_ident *b);

/* The type of the file system whose mount (in mountinfo's text, /proc/PID/mountinfo)
 * covers path: the longest mount point (its \ooo escapes undone) that is a prefix of it,
 * the later on ties. Writes
 * fstype and returns 0, or -ENOENT. */
int cn_obj_mount_fstype(const char *mountinfo, const char *path, char *fstype, size_t size);

/* Reads at most max bytes of a (possibly /proc) file into a malloc'ed, NUL-terminated
 * buffer (caller frees). Returns 0 or negative errno (-EFBIG past max). */
int cn_obj_read_file(const char *path, size_t max, char **buf, size_t *len);

/* One line of /proc/PID/maps (procmaps.c). */
typedef struct cn_obj_maps_line {
    uint64_t start, end, pgoff;
    uint32_t maj, min;
    uint64_t ino;
    bool exec, deleted;
    const char *path; /* points into the caller's line buffer; "" when anonymous */
} cn_obj_maps_line;

/* Parses one line of /proc/PID/maps (modified in place: the path is NUL-terminated and
 * " (deleted)" stripped). Returns 0 or -EINVAL. */
int cn_obj_maps_parse_line(char *line, cn_obj_maps_line *out);

/* ---------------------------------------------------------------------------------------
 * Decoders over raw bytes (elf.c). Every offset and count is checked against the bytes
 * given; 64-bit ELF, host byte order unless told (swap).
 */

/* The ELF header of an image, checked: 64-bit, program headers inside. 0 or -ENOEXEC. */
int cn_obj_elf_header(const uint8_t *data, size_t size, Elf64_Ehdr *eh);

/* The header of the section called name (the first one) in an image of the whole file
 * (section headers and their string table must be inside it; the section's own bytes need
 * not be). 0 and *out, -ENOENT none, -ENOEXEC no usable section table. */
int cn_obj_elf_section(const uint8_t *data, size_t size, const char *name, Elf64_Shdr *out);
/* The same, with where that header lies in the image (*at, a byte offset). */
int cn_obj_elf_section_at(const uint8_t *data, size_t size, const char *name, Elf64_Shdr *out,
                          size_t *at);

/* The GNU build-id in a run of notes (a PT_NOTE segment or SHT_NOTE section; align its
 * alignment: 8, else 4): its bytes copied to out (at most max) and their number, 0 when
 * there is none (or it is longer than max). */
size_t cn_obj_note_build_id(const uint8_t *notes, size_t n, size_t align, uint8_t *out, size_t max);

/* The GNU build-id of an image, from its PT_NOTE segments: as cn_obj_note_build_id. */
size_t cn_obj_elf_build_id(const uint8_t *data, size_t size, uint8_t *out, size_t max);

/* Writes n bytes as 2n lowercase hex digits and a NUL into out (2n + 1 bytes). */
void cn_obj_hex(const uint8_t *bytes, size_t n, char *out);

/* The .eh_frame_hdr search table: count entries of (initial location, FDE address), both
 * signed 4-byte offsets from the section's start, from table_off on. */
typedef struct cn_obj_ehhdr {
    uint64_t count;
    uint64_t table_off;
} cn_obj_ehhdr;

/* Decodes an .eh_frame_hdr section's header (p, n bytes; swap: the file's byte order is
 * not ours): version 1, 4-byte eh_frame_ptr and fde_count, the datarel|sdata4 table every
 * linker writes, and a count the section holds. 0 and *out, or -EINVAL. */
int cn_obj_ehhdr_parse(const uint8_t *p, size_t n, bool swap, cn_obj_ehhdr *out);

/* Entry i (< the parsed count) of the table in p: offsets from the section's start. */
void cn_obj_ehhdr_entry(const uint8_t *p, uint64_t i, bool swap, int64_t *loc, int64_t *fde);

/* A fuzz target over every decoder above (tests/fuzz/fuzz_objfile.c). Returns >= 0. */
int cn_obj_fuzz(const uint8_t *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CN_OBJ_H */
