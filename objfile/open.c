/* open.c — the identity-checked open (cn_obj.h) and the mount-table lookup it needs.
 *
 * Why O_PATH first: every side effect of opening a target-named path happens in open(2)
 * itself — a FIFO waits for a writer, a tty becomes the controlling terminal of a session
 * leader, a device runs its driver's open — before any fstat could refuse it. An O_PATH
 * open runs none of that; the checks run on it, and the file is opened for reading only
 * once it is known to be the regular file wanted. Re-opening /proc/self/fd/N follows the
 * fd's own magic link: the same inode, whatever has been renamed since. */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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

/* Reads fd from its current offset to the end into a malloc'ed, NUL-terminated buffer of
 * at most max bytes (cn_obj_read_file's rules). Does not close fd. */
static int read_fd_all(int fd, size_t max, char **buf_out, size_t *len_out)
{
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
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *buf_out = buf;
    *len_out = len;
    return 0;
}

int cn_obj_read_file(const char *path, size_t max, char **buf_out, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    int rc = read_fd_all(fd, max, buf_out, len_out);
    close(fd);
    return rc;
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

/* ---------------------------------------------------------------------------------------
 * The mount-table cache (cn_obj_mounts). Reading a mountinfo file costs the kernel a line
 * per mount, path names rebuilt each time (0.5 ms for 21 mounts on a loaded VM), and every
 * object a busy machine's new processes map was checked that way: a sixth of canopyd's CPU
 * during a build (docs/perf-daemon.md). A table is therefore kept per mount namespace,
 * with its mountinfo file left open: the kernel marks that open file POLLPRI when a mount
 * or unmount changes the namespace, and only then is the table read again. The open file
 * holds the namespace, so its inode number (the key) cannot name another one meanwhile.
 */
#define MOUNT_SLOTS 16

typedef struct mount_table {
    uint64_t ns; /* the namespace's inode; 0: slot unused */
    int fd;      /* its mountinfo, open for poll(2) */
    char *text;  /* its content at the last read */
    uint64_t used;
} mount_table;

struct cn_obj_mounts {
    pthread_mutex_t lock;
    int refs;
    uint64_t tick;
    cn_obj_mounts_stats stats;
    mount_table slots[MOUNT_SLOTS];
};

cn_obj_mounts *cn_obj_mounts_new(void)
{
    cn_obj_mounts *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->refs = 1;
    for (size_t i = 0; i < MOUNT_SLOTS; i++)
        m->slots[i].fd = -1;
    return m;
}

cn_obj_mounts *cn_obj_mounts_ref(cn_obj_mounts *m)
{
    if (m) {
        pthread_mutex_lock(&m->lock);
        m->refs++;
        pthread_mutex_unlock(&m->lock);
    }
    return m;
}

static void slot_clear(mount_table *t)
{
    if (t->fd >= 0)
        close(t->fd);
    free(t->text);
    *t = (mount_table){.fd = -1};
}

void cn_obj_mounts_unref(cn_obj_mounts *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    assert(m->refs > 0); /* every unref matches a new or a ref */
    int left = --m->refs;
    pthread_mutex_unlock(&m->lock);
    if (left > 0)
        return;
    for (size_t i = 0; i < MOUNT_SLOTS; i++)
        slot_clear(&m->slots[i]);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void cn_obj_mounts_stats_get(cn_obj_mounts *m, cn_obj_mounts_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->stats;
    pthread_mutex_unlock(&m->lock);
}

/* The inode of process pid's mount namespace (pid 0: ours), or 0. */
static uint64_t mnt_ns_of(int pid)
{
    char p[64];
    struct stat st;
    if (pid == 0)
        snprintf(p, sizeof(p), "/proc/self/ns/mnt");
    else
        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", pid);
    return stat(p, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Reads t's open mountinfo again from its start. */
static int slot_reread(mount_table *t)
{
    char *text;
    size_t len;
    if (lseek(t->fd, 0, SEEK_SET) < 0)
        return -errno;
    int rc = read_fd_all(t->fd, MOUNTINFO_MAX, &text, &len);
    if (rc < 0)
        return rc;
    free(t->text);
    t->text = text;
    return 0;
}

/* Whether t's namespace changed since its table was read (the kernel's POLLPRI, reported
 * once per change). */
static bool slot_changed(const mount_table *t)
{
    struct pollfd pfd = {.fd = t->fd, .events = POLLPRI};
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLPRI | POLLERR));
}

/* The slot for namespace ns, current, or NULL (caller holds the lock). */
static mount_table *slot_find(cn_obj_mounts *m, uint64_t ns)
{
    for (size_t i = 0; i < MOUNT_SLOTS; i++) {
        mount_table *t = &m->slots[i];
        if (t->ns != ns)
            continue;
        if (slot_changed(t)) {
            m->stats.rereads++;
            if (slot_reread(t) < 0) {
                slot_clear(t);
                return NULL;
            }
        } else {
            m->stats.hits++;
        }
        t->used = ++m->tick;
        return t;
    }
    return NULL;
}

/* Opens and reads process pid's mountinfo into a free or the least recently used slot,
 * provided the process is still in namespace ns once the file is open. Caller holds the
 * lock. */
static mount_table *slot_load(cn_obj_mounts *m, int pid, uint64_t ns)
{
    char p[64];
    mount_table *t = &m->slots[0];
    for (size_t i = 1; i < MOUNT_SLOTS && t->ns; i++)
        if (!m->slots[i].ns || m->slots[i].used < t->used)
            t = &m->slots[i];
    slot_clear(t);
    if (pid == 0)
        snprintf(p, sizeof(p), "/proc/self/mountinfo");
    else
        snprintf(p, sizeof(p), "/proc/%d/mountinfo", pid);
    t->fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (t->fd < 0 || slot_reread(t) < 0 || mnt_ns_of(pid) != ns) {
        slot_clear(t);
        return NULL;
    }
    m->stats.reads++;
    t->ns = ns;
    t->used = ++m->tick;
    return t;
}

/* The type of the file system holding path in process pid's mount table (pid 0: ours),
 * from m's tables, or read now without m. *ns receives the namespace's inode (0 unknown). */
static int fstype_in(cn_obj_mounts *m, int pid, const char *path, char *type, size_t size,
                     uint64_t *ns)
{
    char proc[64], *info = NULL;
    size_t len;
    int rc;
    *ns = mnt_ns_of(pid);
    if (m && *ns) {
        pthread_mutex_lock(&m->lock);
        mount_table *t = slot_find(m, *ns);
        if (!t)
            t = slot_load(m, pid, *ns);
        rc = t ? cn_obj_mount_fstype(t->text, path, type, size) : -ESRCH;
        pthread_mutex_unlock(&m->lock);
        if (t)
            return rc;
    }
    if (pid == 0)
        snprintf(proc, sizeof(proc), "/proc/self/mountinfo");
    else
        snprintf(proc, sizeof(proc), "/proc/%d/mountinfo", pid);
    rc = cn_obj_read_file(proc, MOUNTINFO_MAX, &info, &len);
    if (rc == 0)
        rc = cn_obj_mount_fstype(info, path, type, size);
    free(info);
    return rc;
}

int cn_obj_mounts_fstype(cn_obj_mounts *m, int pid, const char *path, char *type, size_t size)
{
    uint64_t ns;
    return fstype_in(m, pid, path, type, size, &ns);
}

/* Whether the file system holding path inside process pid's root (pid 0: ours) is one a
 * user could make stall our lookups and reads (FUSE: every one is answered by a process
 * of theirs). Found in the mount tables, so that nothing on that file system is touched
 * to find out: the target's /proc/PID/mountinfo, or, for a chroot (whose table shows
 * nothing above its root) in our own mount namespace, ours at the root's path. Unknown
 * counts as stalling. */
static bool stalling_fs(cn_obj_mounts *m, int pid, const char *path)
{
    char type[64], root[4096], full[8192], link[64];
    uint64_t ns, self_ns;
    if (pid == 0)
        return fstype_in(m, 0, path, type, sizeof(type), &ns) < 0 || !strncmp(type, "fuse", 4);
    if (fstype_in(m, pid, path, type, sizeof(type), &ns) < 0) {
        snprintf(link, sizeof(link), "/proc/%d/root", pid);
        ssize_t n = readlink(link, root, sizeof(root) - 1);
        if (n <= 0 || !ns || ns != mnt_ns_of(0))
            return true;
        root[n] = '\0';
        snprintf(full, sizeof(full), "%s%s", strcmp(root, "/") ? root : "", path);
        if (fstype_in(m, 0, full, type, sizeof(type), &self_ns) < 0)
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
static int open_path_fd(cn_obj_mounts *m, const char *path, unsigned flags)
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
        if (stalling_fs(m, pid, inside))
            return -EREMOTE;
        snprintf(root, sizeof(root), "/proc/%d/root", pid);
        int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -errno;
        int fd = open_resolved(dfd, path + n, opath, strict | RESOLVE_IN_ROOT);
        close(dfd);
        return fd;
    }
    if (stalling_fs(m, 0, path))
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
    return cn_obj_open_in(NULL, path, flags, want, got);
}

int cn_obj_open_in(cn_obj_mounts *m, const char *path, unsigned flags, const cn_obj_ident *want,
                   cn_obj_ident *got)
{
    cn_obj_ident id = {0}, again = {0}; /* zeroed: GCC -O2 cannot see that rc == 0 sets again */
    char self[64];
    int fd = -1;
    if (!path || (!want && (flags & CN_OBJ_MATCH_ALL)))
        return -EINVAL;
    int pfd = open_path_fd(m, path, flags);
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
