/* test_objfile.c — objfile/: the identity-checked open (cn_obj_open) and the mount tables.
 *
 * Each rule is checked with the thing a target's user would put at a checked path: a
 * symlink, a FIFO without a writer (must not block), a pty (must never become a
 * controlling terminal), another file with the same name, "." and ".." components; and
 * the paths canopyd does open: /proc/PID/map_files links, /proc/PID/root paths, root's
 * own directories with their symlinks. Then the decoders over raw bytes, on a real object
 * (our own executable) and on hostile ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cn_obj.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/cn_obj_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A regular file opens, and reports its identity; the fd reads it. */
static void test_regular(void **state)
{
    (void)state;
    char p[128], buf[8] = "";
    snprintf(p, sizeof(p), "%s/f", dir);
    write_file(p, "hello");
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    cn_obj_ident id;
    int fd = cn_obj_open(p, 0, NULL, &id);
    assert_true(fd >= 0);
    assert_int_equal(id.ino, (uint64_t)st.st_ino);
    assert_int_equal(id.dev, (uint64_t)st.st_dev);
    assert_int_equal(id.size, 5);
    assert_int_equal(id.uid, st.st_uid);
    assert_int_equal(read(fd, buf, sizeof(buf) - 1), 5);
    assert_string_equal(buf, "hello");
    int fl = fcntl(fd, F_GETFL);
    assert_true(fl & O_NONBLOCK);
    assert_int_equal(fl & O_ACCMODE, O_RDONLY);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    /* The same file again, with its whole identity: accepted. */
    fd = cn_obj_open(p, CN_OBJ_MATCH_ALL, &id, NULL);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(cn_obj_open(NULL, 0, NULL, NULL), -EINVAL);
    assert_int_equal(cn_obj_open(p, CN_OBJ_MATCH_INO, NULL, NULL), -EINVAL);
}

/* Another file at the checked name (same size, another inode; or the same inode in
 * another version) is not the file wanted. */
static void test_identity(void **state)
{
    (void)state;
    char p[128], q[128];
    snprintf(p, sizeof(p), "%s/lib", dir);
    snprintf(q, sizeof(q), "%s/lib.old", dir);
    write_file(p, "checked");
    cn_obj_ident id;
    int fd = cn_obj_open(p, 0, NULL, &id);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(rename(p, q), 0);
    write_file(p, "swapped");
    assert_int_equal(cn_obj_open(p, CN_OBJ_MATCH_INO, &id, NULL), -ESTALE);
    cn_obj_ident other = id;
    other.dev++;
    assert_int_equal(cn_obj_open(q, CN_OBJ_MATCH_INO | CN_OBJ_MATCH_DEV, &other, NULL), -ESTALE);
    write_file(q, "changed!"); /* same inode, another version */
    assert_int_equal(cn_obj_open(q, CN_OBJ_MATCH_ALL, &id, NULL), -ESTALE);
    fd = cn_obj_open(q, CN_OBJ_MATCH_INO | CN_OBJ_MATCH_DEV, &id, NULL);
    assert_true(fd >= 0);
    close(fd);
}

/* A symlink anywhere on the way is refused, unless the directory is root's own
 * (CN_OBJ_TRUSTED); "." and ".." components are refused. */
static void test_symlinks(void **state)
{
    (void)state;
    char p[128], l[128], d[128], via[160];
    snprintf(p, sizeof(p), "%s/target", dir);
    snprintf(l, sizeof(l), "%s/link", dir);
    snprintf(d, sizeof(d), "%s/dirlink", dir);
    write_file(p, "x");
    assert_int_equal(symlink(p, l), 0);
    assert_int_equal(symlink(dir, d), 0);
    assert_int_equal(cn_obj_open(l, 0, NULL, NULL), -ELOOP);
    snprintf(via, sizeof(via), "%s/target", d);
    assert_int_equal(cn_obj_open(via, 0, NULL, NULL), -ELOOP);
    int fd = cn_obj_open(l, CN_OBJ_TRUSTED, NULL, NULL);
    assert_true(fd >= 0);
    close(fd);
    snprintf(via, sizeof(via), "%s/../%s/target", dir, strrchr(dir, '/') + 1);
    assert_int_equal(cn_obj_open(via, 0, NULL, NULL), -EINVAL);
    snprintf(via, sizeof(via), "%s/./target", dir);
    assert_int_equal(cn_obj_open(via, 0, NULL, NULL), -EINVAL);
    snprintf(via, sizeof(via), "%s/.target", dir); /* a dot file is no "." component */
    write_file(via, "y");
    fd = cn_obj_open(via, 0, NULL, NULL);
    assert_true(fd >= 0);
    close(fd);
}

/* A FIFO without a writer is refused at once (an open for reading would wait), and so are
 * directories and devices. */
static void test_not_regular(void **state)
{
    (void)state;
    char p[128];
    snprintf(p, sizeof(p), "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    alarm(10); /* a blocked open fails the test instead of hanging it */
    assert_int_equal(cn_obj_open(p, 0, NULL, NULL), -EINVAL);
    alarm(0);
    assert_int_equal(cn_obj_open(dir, 0, NULL, NULL), -EINVAL);
    assert_int_equal(cn_obj_open("/dev/null", CN_OBJ_TRUSTED, NULL, NULL), -EINVAL);
}

/* A session leader without a controlling terminal that is handed a pty's path never gets
 * the pty as its terminal (run in a child that makes itself one). */
static void test_pty(void **state)
{
    (void)state;
    int master, slave;
    char name[64], link[128];
    assert_int_equal(openpty(&master, &slave, name, NULL, NULL), 0);
    close(slave);
    snprintf(link, sizeof(link), "%s/pty", dir);
    assert_int_equal(symlink(name, link), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setsid() < 0)
            _exit(2);
        int a = cn_obj_open(name, CN_OBJ_TRUSTED, NULL, NULL); /* even in a trusted place */
        int b = cn_obj_open(link, 0, NULL, NULL);
        int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_NONBLOCK);
        _exit(a == -EINVAL && b == -ELOOP && tty < 0 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(master);
}

/* /proc/PID/map_files/START-END opens the mapped file itself (its name may be anything
 * now); /proc/PID/root/... resolves inside that root. */
static void test_proc_paths(void **state)
{
    (void)state;
    char p[128], q[128], mf[128], root[256];
    snprintf(p, sizeof(p), "%s/mapped", dir);
    snprintf(q, sizeof(q), "%s/renamed", dir);
    write_file(p, "mapped file");
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    assert_true(m != MAP_FAILED);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    close(fd);
    assert_int_equal(rename(p, q), 0);
    write_file(p, "another");
    snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIxPTR "-%" PRIxPTR, (int)getpid(),
             (uintptr_t)m, (uintptr_t)m + 4096);
    cn_obj_ident want = {.ino = (uint64_t)st.st_ino}, got;
    fd = cn_obj_open(mf, CN_OBJ_MATCH_INO, &want, &got);
    assert_true(fd >= 0);
    assert_int_equal(got.ino, (uint64_t)st.st_ino);
    close(fd);
    munmap(m, 4096);
    snprintf(root, sizeof(root), "/proc/%d/root%s", (int)getpid(), q);
    fd = cn_obj_open(root, 0, NULL, &got);
    assert_true(fd >= 0);
    assert_int_equal(got.ino, (uint64_t)st.st_ino);
    close(fd);
    char l[128];
    snprintf(l, sizeof(l), "%s/rootlink", dir);
    assert_int_equal(symlink(q, l), 0);
    snprintf(root, sizeof(root), "/proc/%d/root%s", (int)getpid(), l);
    assert_int_equal(cn_obj_open(root, 0, NULL, NULL), -ELOOP);
}

/* The mount covering a path: the longest mount point that prefixes it, the later on
 * ties; FUSE is found by its type. */
static void test_mount_fstype(void **state)
{
    (void)state;
    const char *info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                       "30 22 0:40 / /tmp rw shared:9 - tmpfs tmpfs rw\n"
                       "31 30 0:41 / /tmp/fuse rw - fuse.sshfs host:/ rw\n"
                       "32 22 0:42 / /tmpx rw - fuse x rw\n"
                       "33 22 0:43 / /var rw - tmpfs a rw\n"
                       "34 22 0:44 / /var rw - fuse b rw\n";
    char t[64];
    assert_int_equal(cn_obj_mount_fstype(info, "/tmp/perf-1.map", t, sizeof(t)), 0);
    assert_string_equal(t, "tmpfs");
    assert_int_equal(cn_obj_mount_fstype(info, "/tmp/fuse/perf-1.map", t, sizeof(t)), 0);
    assert_string_equal(t, "fuse.sshfs");
    assert_int_equal(cn_obj_mount_fstype(info, "/tmpx/perf-1.map", t, sizeof(t)), 0);
    assert_string_equal(t, "fuse"); /* /tmp is no prefix of /tmpx */
    assert_int_equal(cn_obj_mount_fstype(info, "/etc/perf-1.map", t, sizeof(t)), 0);
    assert_string_equal(t, "ext4");
    assert_int_equal(cn_obj_mount_fstype(info, "/var/perf-1.map", t, sizeof(t)), 0);
    assert_string_equal(t, "fuse"); /* mounted over the tmpfs: the later one is on top */
    /* mountinfo spells a space, tab, newline or backslash of a mount point in octal; a
     * path (as /proc/PID/maps shows it) has the byte itself */
    const char *esc = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                      "40 22 0:50 / /home/u/my\\040fuse rw - fuse.x x rw\n"
                      "41 22 0:51 / /home/u/a\\134b rw - fuse.y y rw\n";
    assert_int_equal(cn_obj_mount_fstype(esc, "/home/u/my fuse/lib.so", t, sizeof(t)), 0);
    assert_string_equal(t, "fuse.x");
    assert_int_equal(cn_obj_mount_fstype(esc, "/home/u/a\\b/lib.so", t, sizeof(t)), 0);
    assert_string_equal(t, "fuse.y");
    assert_int_equal(cn_obj_mount_fstype(esc, "/home/u/my\\040fuse/lib.so", t, sizeof(t)), 0);
    assert_string_equal(t, "ext4"); /* a name with a backslash in it is not that mount */
    assert_int_equal(cn_obj_mount_fstype("", "/tmp/perf-1.map", t, sizeof(t)), -ENOENT);
    assert_int_equal(cn_obj_mount_fstype("garbage\n1 2 3\n", "/tmp/x", t, sizeof(t)), -ENOENT);
}

/* Build-id notes: found in a 4-aligned run and after an 8-aligned property note; a
 * hostile size, a longer id than asked for, a truncated run give nothing. */
static void test_build_id_notes(void **state)
{
    (void)state;
    uint8_t buf[128], id[64];
    uint32_t hdr[3];
    size_t n = 0;
    /* an 8-aligned NT_GNU_PROPERTY_TYPE_0 (5) of 16 bytes, then the build-id (3) */
    hdr[0] = 4, hdr[1] = 16, hdr[2] = 5;
    memcpy(buf + n, hdr, 12), memcpy(buf + n + 12, "GNU", 4), memset(buf + n + 16, 0xaa, 16);
    n += 32;
    hdr[0] = 4, hdr[1] = 20, hdr[2] = 3;
    memcpy(buf + n, hdr, 12), memcpy(buf + n + 12, "GNU", 4);
    for (int i = 0; i < 20; i++)
        buf[n + 16 + i] = (uint8_t)i;
    n += 36;
    assert_int_equal(cn_obj_note_build_id(buf, n, 8, id, sizeof(id)), 20);
    assert_int_equal(id[19], 19);
    assert_int_equal(cn_obj_note_build_id(buf + 32, 36, 4, id, sizeof(id)), 20);
    assert_int_equal(cn_obj_note_build_id(buf + 32, 36, 4, id, 16), 0); /* longer than max */
    assert_int_equal(cn_obj_note_build_id(buf + 32, 35, 4, id, sizeof(id)), 0); /* cut */
    hdr[0] = 0xffffffffu, hdr[1] = 0xffffffffu; /* sizes past the end */
    memcpy(buf + 32, hdr, 8);
    assert_int_equal(cn_obj_note_build_id(buf + 32, 36, 4, id, sizeof(id)), 0);
    assert_int_equal(cn_obj_note_build_id(buf, 11, 4, id, sizeof(id)), 0);
    assert_int_equal(cn_obj_note_build_id(NULL, 0, 4, id, sizeof(id)), 0);
    char hex[9];
    cn_obj_hex((const uint8_t *)"\x01\xab\xff\x00", 4, hex);
    assert_string_equal(hex, "01abff00");
}

/* A real object (our own executable): its header, a section by name, its build-id as
 * readelf prints it; then the same image cut short or with hostile counts. */
static void test_elf_image(void **state)
{
    (void)state;
    FILE *f = fopen("/proc/self/exe", "rb");
    assert_non_null(f);
    static uint8_t img[64 << 20];
    size_t size = fread(img, 1, sizeof(img), f);
    fclose(f);
    assert_true(size > sizeof(Elf64_Ehdr) && size < sizeof(img));
    Elf64_Ehdr eh;
    Elf64_Shdr sh;
    uint8_t id[64];
    assert_int_equal(cn_obj_elf_header(img, size, &eh), 0);
    assert_int_equal(cn_obj_elf_section(img, size, ".eh_frame_hdr", &sh), 0);
    assert_int_equal(sh.sh_type, SHT_PROGBITS);
    cn_obj_ehhdr h;
    assert_int_equal(cn_obj_ehhdr_parse(img + sh.sh_offset, sh.sh_size, false, &h), 0);
    assert_true(h.count > 10); /* every function has an FDE */
    int64_t loc0, fde0, loc1, fde1;
    cn_obj_ehhdr_entry(img + sh.sh_offset, 0, false, &loc0, &fde0);
    cn_obj_ehhdr_entry(img + sh.sh_offset, h.count - 1, false, &loc1, &fde1);
    assert_true(loc0 < loc1); /* sorted by initial location */
    assert_int_equal(cn_obj_elf_section(img, size, ".no_such", &sh), -ENOENT);
    size_t n = cn_obj_elf_build_id(img, size, id, sizeof(id));
    assert_int_equal(n, 20);
    char hex[41], cmd[128], want[64] = "";
    cn_obj_hex(id, n, hex);
    snprintf(cmd, sizeof(cmd), "readelf -n /proc/%d/exe | awk '/Build ID/ {print $3}'",
             (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(want, sizeof(want), p));
    pclose(p);
    want[strcspn(want, "\n")] = 0;
    assert_string_equal(hex, want);
    /* Cut inside the program headers / before the section headers. */
    assert_int_equal(cn_obj_elf_header(img, 63, &eh), -ENOEXEC);
    assert_int_equal(cn_obj_elf_header(img, eh.e_phoff + 8, &eh), -ENOEXEC);
    assert_int_equal(cn_obj_elf_section(img, eh.e_shoff + 8, ".eh_frame_hdr", &sh), -ENOEXEC);
    assert_int_equal(cn_obj_elf_build_id(img, 200, id, sizeof(id)), 0);
    /* Hostile counts: more program or section headers than the file holds. */
    Elf64_Ehdr bad = eh;
    bad.e_phnum = 0xffff;
    memcpy(img, &bad, sizeof(bad));
    assert_int_equal(cn_obj_elf_header(img, size, &eh), -ENOEXEC);
    bad = eh;
    bad.e_shnum = 0xffff;
    bad.e_shstrndx = 0xfffe;
    memcpy(img, &bad, sizeof(bad));
    assert_int_equal(cn_obj_elf_section(img, size, ".eh_frame_hdr", &sh), -ENOEXEC);
    memcpy(img, &eh, sizeof(eh));
    assert_int_equal(cn_obj_elf_header(NULL, 0, &eh), -ENOEXEC);
}

/* .eh_frame_hdr headers: only the encodings linkers write, a count the section holds. */
static void test_ehhdr(void **state)
{
    (void)state;
    uint8_t b[12 + 16] = {1, 0x1b, 0x03, 0x3b};
    int32_t v[6] = {-100, 2, -50, -40, -30, -20};
    memcpy(b + 4, v, sizeof(v));
    cn_obj_ehhdr h;
    assert_int_equal(cn_obj_ehhdr_parse(b, sizeof(b), false, &h), 0);
    assert_int_equal(h.count, 2);
    int64_t loc, fde;
    cn_obj_ehhdr_entry(b, 1, false, &loc, &fde);
    assert_int_equal(loc, -30);
    assert_int_equal(fde, -20);
    assert_int_equal(cn_obj_ehhdr_parse(b, sizeof(b) - 1, false, &h), -EINVAL); /* 2 don't fit */
    assert_int_equal(cn_obj_ehhdr_parse(b, sizeof(b), true, &h), -EINVAL);      /* count 2 << 24 */
    uint8_t c[sizeof(b)];
    memcpy(c, b, sizeof(b));
    c[0] = 2; /* version */
    assert_int_equal(cn_obj_ehhdr_parse(c, sizeof(c), false, &h), -EINVAL);
    memcpy(c, b, sizeof(b));
    c[2] = 0xff; /* no count */
    assert_int_equal(cn_obj_ehhdr_parse(c, sizeof(c), false, &h), -EINVAL);
    memcpy(c, b, sizeof(b));
    c[3] = 0x1b; /* another table encoding */
    assert_int_equal(cn_obj_ehhdr_parse(c, sizeof(c), false, &h), -EINVAL);
    memcpy(c, b, sizeof(b));
    c[1] = 0x04; /* an 8-byte eh_frame_ptr */
    assert_int_equal(cn_obj_ehhdr_parse(c, sizeof(c), false, &h), -EINVAL);
    memset(c + 8, 0, 4); /* no entries */
    c[1] = 0x1b;
    assert_int_equal(cn_obj_ehhdr_parse(c, sizeof(c), false, &h), -EINVAL);
    assert_int_equal(cn_obj_ehhdr_parse(b, 11, false, &h), -EINVAL);
    assert_int_equal(cn_obj_ehhdr_parse(NULL, 0, false, &h), -EINVAL);
}

/* The replayed fuzz corpus runs cn_obj_fuzz; here it must at least take every edge. */
static void test_fuzz_entry(void **state)
{
    (void)state;
    static const uint8_t junk[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
    assert_true(cn_obj_fuzz(junk, sizeof(junk)) >= 0);
    assert_true(cn_obj_fuzz(NULL, 0) >= 0);
}

/* The body of test_mounts_cache, in a child with a mount namespace of its own: returns
 * the number of the first failed check, 0 when all held. */
static int mounts_cache_checks(void)
{
    char sub[128], file[160], type[64], before[64];
    cn_obj_mounts_stats st;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return 1;
    snprintf(sub, sizeof(sub), "%s/mnt", dir);
    snprintf(file, sizeof(file), "%s/lib.so", sub);
    if (mkdir(sub, 0700) < 0)
        return 2;
    cn_obj_mounts *m = cn_obj_mounts_new();
    if (!m || cn_obj_mounts_fstype(m, 0, file, before, sizeof(before)) < 0)
        return 3;
    /* The same namespace through our pid: the table held, not read again. */
    if (cn_obj_mounts_fstype(m, (int)getpid(), file, type, sizeof(type)) < 0 ||
        strcmp(type, before))
        return 4;
    cn_obj_mounts_stats_get(m, &st);
    if (st.reads != 1 || st.hits != 1 || st.rereads != 0)
        return 5;
    /* A mount in the namespace: the kernel's POLLPRI makes the next answer read it. */
    if (mount("cn_test", sub, "tmpfs", 0, "size=64k") < 0)
        return 6;
    if (cn_obj_mounts_fstype(m, 0, file, type, sizeof(type)) < 0 || strcmp(type, "tmpfs"))
        return 7;
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    if (fd < 0 || close(fd) < 0)
        return 8;
    fd = cn_obj_open_in(m, file, 0, NULL, NULL);
    if (fd < 0 || close(fd) < 0)
        return 9;
    cn_obj_mounts_stats_get(m, &st);
    if (st.reads != 1 || st.rereads != 1 || st.hits != 2)
        return 10;
    if (umount(sub) < 0)
        return 11;
    if (cn_obj_mounts_fstype(m, 0, file, type, sizeof(type)) < 0 || strcmp(type, before))
        return 12;
    cn_obj_mounts_stats_get(m, &st);
    if (st.rereads != 2)
        return 13;
    /* A reference outlives the creator's. */
    cn_obj_mounts *held = cn_obj_mounts_ref(m);
    cn_obj_mounts_unref(m);
    if (cn_obj_mounts_fstype(held, 0, file, type, sizeof(type)) < 0)
        return 14;
    cn_obj_mounts_unref(held);
    rmdir(sub);
    return 0;
}

/* The mount-table cache: one read per namespace, read again exactly when a mount changes
 * it (in a private mount namespace, so that the machine's mounts are not touched). */
static void test_mounts_cache(void **state)
{
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (unshare(CLONE_NEWNS) < 0)
            _exit(getenv("CI") && !strcmp(getenv("CI"), "true") ? 100 : 99);
        _exit(mounts_cache_checks());
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 99)
        skip(); /* no CAP_SYS_ADMIN outside CI */
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular),      cmocka_unit_test(test_identity),
        cmocka_unit_test(test_symlinks),     cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_pty),          cmocka_unit_test(test_proc_paths),
        cmocka_unit_test(test_mount_fstype), cmocka_unit_test(test_build_id_notes),
        cmocka_unit_test(test_elf_image),    cmocka_unit_test(test_ehhdr),
        cmocka_unit_test(test_fuzz_entry),   cmocka_unit_test(test_mounts_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
