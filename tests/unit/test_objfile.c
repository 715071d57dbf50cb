/* test_objfile.c — objfile/: the identity-checked open (cn_obj_open) and the mount tables.
 *
 * Each rule is checked with the thing a target's user would put at a checked path: a
 * symlink, a FIFO without a writer (must not block), a pty (must never become a
 * controlling terminal), another file with the same name, "." and ".." components; and
 * the paths canopyd does open: /proc/PID/map_files links, /proc/PID/root paths, root's
 * own directories with their symlinks. */
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
#include <sys/mman.h>
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
    assert_int_equal(cn_obj_mount_fstype("", "/tmp/perf-1.map", t, sizeof(t)), -ENOENT);
    assert_int_equal(cn_obj_mount_fstype("garbage\n1 2 3\n", "/tmp/x", t, sizeof(t)), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular),      cmocka_unit_test(test_identity),
        cmocka_unit_test(test_symlinks),     cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_pty),          cmocka_unit_test(test_proc_paths),
        cmocka_unit_test(test_mount_fstype),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
