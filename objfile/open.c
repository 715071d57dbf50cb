/* open.c — the identity-checked open (cn_obj.h) and the mount-table lookup it needs.
 *
 * Why O_PATH first: every side effect of opening a target-named path happens in open(2)
 * itself — a FIFO waits for a writer, a tty becomes the controlling terminal of a session
 * leader, a device runs its driver's open — before any fstat could refuse it. An O_PATH
 * open runs none of that; the checks run on it, and the file is opened for reading only
 * once it is known to be the regular file wanted. Re-opening /proc/self/fd/N follows the
 * fd's own magic link: the same inode, whatever has been renamed since. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cn_obj.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

#define MOUNTINFO_MAX (4u << 20)

int cn_obj_read_file(const char *path, size_t max, char **buf_out, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : -ENOMEM;
    while (rc == 0) {
        if (len == cap) {
            if (cap >= max) {
                rc = -EFBIG;
                break;
            }
            size_t ncap = cap * 2 > max ? max : cap * 2;
            char *bigger = realloc(buf, ncap + 1);
            if (!bigger) {
                rc = -ENOMEM;
                break;
            }
            buf = bigger;
            cap = ncap;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            rc = -errno;
        else if (got == 0)
            break;
        else
            len += (size_t)got;
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *buf_out = buf;
    *len_out = len;
    return 0;
}

/* Undoes mountinfo's escapes in place: the kernel writes a space, tab, newline or
 * backslash of a mount point as \ooo (octal), and a path compared with it has the byte. */
static void unescape_octal(char *s)
{
    char *w = s;
    for (const char *r = s; *r; w++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
            r += 4;
        } else {
            *w = *r++;
        }
    }
    *w = '\0';
}

int cn_obj_mount_fstype(const char *mountinfo, const char *path, char *fstype, size_t size)
{
    size_t best = 0;
    bool found = false;
    for (const char *line = mountinfo; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char mp[4096], type[64];
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        const char *dash = memmem(line, len, " - ", 3);
        if (dash && sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 &&
            sscanf(dash + 3, "%63s", type) == 1) {
            unescape_octal(mp);
            size_t n = strlen(mp);
            bool covers =
                !strcmp(mp, "/") || (!strncmp(path, mp, n) && (path[n] == '/' || path[n] == '\0'));
            if (covers && (!found || n >= best)) { /* ties: the later mount is on top */
                best = n;
                found = true;
                snprintf(fstype, size, "%s", type);
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return found ? 0 : -ENOENT;
}

/* The type of the file system holding path as mountinfo file proc describes it. */
static int fstype_in(const char *proc, const char *path, char *type, size_t size)
{
    char *info = NULL;
    size_t len;
    int rc = cn_obj_read_file(proc, MOUNTINFO_MAX, &info, &len);
    if (rc == 0)
        rc = cn_obj_mount_fstype(info, path, type, size);
    free(info);
    return rc;
}

/* Whether two /proc paths name the same file (for namespaces). */
static bool same_inode(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Whether the file system holding path inside process pid's root (pid 0: ours) is one a
 * user could make stall our lookups and reads (FUSE: every one is answered by a process
 * of theirs). Found in the mount tables, so that nothing on that file system is touched
 * to find out: the target's /proc/PID/mountinfo, or, for a chroot (whose table shows
 * nothing above its root) in our own mount namespace, ours at the root's path. Unknown
 * counts as stalling. */
static bool stalling_fs(int pid, const char *path)
{
    char proc[64], type[64], root[4096], full[8192];
    if (pid == 0)
        return fstype_in("/proc/self/mountinfo", path, type, sizeof(type)) < 0 ||
               !strncmp(type, "fuse", 4);
    snprintf(proc, sizeof(proc), "/proc/%d/mountinfo", pid);
    if (fstype_in(proc, path, type, sizeof(type)) < 0) {
        snprintf(proc, sizeof(proc), "/proc/%d/ns/mnt", pid);
        char link[64];
        snprintf(link, sizeof(link), "/proc/%d/root", pid);
        ssize_t n = readlink(link, root, sizeof(root) - 1);
        if (n <= 0 || !same_inode(proc, "/proc/self/ns/mnt"))
            return true;
        root[n] = '\0';
        snprintf(full, sizeof(full), "%s%s", strcmp(root, "/") ? root : "", path);
        if (fstype_in("/proc/self/mountinfo", full, type, sizeof(type)) < 0)
            return true;
    }
    return !strncmp(type, "fuse", 4);
}

/* Whether path has a "." or ".." component (the mount tables are matched by text, so
 * the text must be the way the lookup goes). */
static bool has_dots(const char *path)
{
    for (const char *p = path; (p = strchr(p, '.')) != NULL; p++) {
        bool start = p == path || p[-1] == '/';
        size_t n = p[1] == '.' ? 2 : 1;
        if (start && (p[n] == '/' || p[n] == '\0'))
            return true;
    }
    return false;
}

/* openat2 with resolve flags; before Linux 5.6, openat with O_NOFOLLOW (the last
 * component only). Returns an fd or -errno. */
static int open_resolved(int dfd, const char *path, int flags, uint64_t resolve)
{
    struct open_how how = {.flags = (uint64_t)flags, .resolve = resolve};
    int fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS)
        fd = openat(dfd, path, flags | O_NOFOLLOW);
    return fd < 0 ? -errno : fd;
}

/* Step 1 of cn_obj_open: an O_PATH fd for path, or -errno. */
static int open_path_fd(const char *path, unsigned flags)
{
    const int opath = O_PATH | O_CLOEXEC;
    const uint64_t strict = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int pid = 0, n = 0;
    if (path[0] != '/') /* the caller's own name (tools, tests): never a target's */
        return open_resolved(AT_FDCWD, path, opath, strict);
    if (sscanf(path, "/proc/%d/map_files/%n", &pid, &n) == 1 && n > 0 && pid > 0) {
        /* The magic link is the mapped file itself: no lookup on the target's file
         * system, nothing a rename can change. */
        if (strchr(path + n, '/'))
            return -EINVAL;
        int fd = open(path, opath);
        return fd < 0 ? -errno : fd;
    }
    if (flags & CN_OBJ_TRUSTED) {
        int fd = open(path, opath);
        return fd < 0 ? -errno : fd;
    }
    if (has_dots(path))
        return -EINVAL;
    n = 0;
    if (sscanf(path, "/proc/%d/root/%n", &pid, &n) == 1 && n > 0 && pid > 0) {
        /* Inside another root (a container): every component resolved in that root and
         * no symlink on the way (even with RESOLVE_IN_ROOT, a process that shares our
         * root but not our mounts could link to our files), so the mount the tables
         * show is the one the file is on. */
        char inside[4096], root[64];
        snprintf(inside, sizeof(inside), "/%s", path + n);
        if (stalling_fs(pid, inside))
            return -EREMOTE;
        snprintf(root, sizeof(root), "/proc/%d/root", pid);
        int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -errno;
        int fd = open_resolved(dfd, path + n, opath, strict | RESOLVE_IN_ROOT);
        close(dfd);
        return fd;
    }
    if (stalling_fs(0, path))
        return -EREMOTE;
    return open_resolved(AT_FDCWD, path, opath, strict);
}

int cn_obj_ident_of(int fd, cn_obj_ident *out)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *out = (cn_obj_ident){
        .dev = (uint64_t)st.st_dev,
        .ino = (uint64_t)st.st_ino,
        .size = (int64_t)st.st_size,
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .uid = (uint32_t)st.st_uid,
        .mode = (uint32_t)st.st_mode,
    };
    return 0;
}

bool cn_obj_ident_same(const cn_obj_ident *a, const cn_obj_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

/* Step 2: whether the O_PATH fd's file is one we read (0) and is the one wanted. */
static int check(int pfd, unsigned flags, const cn_obj_ident *want, cn_obj_ident *id)
{
    struct statfs sfs;
    int rc = cn_obj_ident_of(pfd, id);
    if (rc < 0)
        return rc;
    if (!S_ISREG(id->mode))
        return -EINVAL;
    if (fstatfs(pfd, &sfs) < 0)
        return -errno;
    if ((uint32_t)sfs.f_type == (uint32_t)FUSE_SUPER_MAGIC)
        return -EREMOTE;
    if ((flags & CN_OBJ_MATCH_INO) && id->ino != want->ino)
        return -ESTALE;
    if ((flags & CN_OBJ_MATCH_DEV) && id->dev != want->dev)
        return -ESTALE;
    if ((flags & CN_OBJ_MATCH_FILE) && (id->size != want->size || id->mtime_ns != want->mtime_ns))
        return -ESTALE;
    return 0;
}

int cn_obj_open(const char *path, unsigned flags, const cn_obj_ident *want, cn_obj_ident *got)
{
    cn_obj_ident id = {0}, again = {0}; /* zeroed: GCC -O2 cannot see that rc == 0 sets again */
    char self[64];
    int fd = -1;
    if (!path || (!want && (flags & CN_OBJ_MATCH_ALL)))
        return -EINVAL;
    int pfd = open_path_fd(path, flags);
    if (pfd < 0)
        return pfd;
    int rc = check(pfd, flags, want, &id);
    if (rc < 0)
        goto out;
    snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
    fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = cn_obj_ident_of(fd, &again);
    if (rc == 0 && (again.dev != id.dev || again.ino != id.ino))
        rc = -ESTALE; /* cannot happen: the fd's link names its own inode */
out:
    close(pfd);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (got)
        *got = id;
    return fd;
}
