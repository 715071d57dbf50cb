/* file.c — the one atomic file writer (cn_afile): the session snapshots and their .meta
 * (live/, daemon/) and the fleet spool (fleet/) all replace a file the same way, so a
 * crash leaves either the old file or the new one, never half of either.
 *
 * The new content goes to a temporary file next to the target, named
 * "<path>.<6 random chars>.tmp" and created with O_EXCL (a name planted by someone else
 * is never opened, a symlink never followed; two writers never share one temporary file).
 * Commit writes it out (fsync), renames it over the target and fsyncs the directory so
 * that the rename itself survives a crash. Any failure removes the temporary file;
 * directory scans remove leftovers of a crash by their ".tmp" ending. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cn_common.h"

#define TMP_TRIES 64 /* EEXIST retries: each name has 62^6 choices */

/* Fills 6 characters of a temporary name. */
static void random_suffix(char out[6])
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char rnd[6];
    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = cn_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                              ((uint64_t)getpid() << 48));
        memcpy(rnd, &x, sizeof(rnd));
    }
    for (int i = 0; i < 6; i++)
        out[i] = set[rnd[i] % (sizeof(set) - 1)];
}

int cn_afile_open(cn_afile *f, const char *path, unsigned mode, cn_err *err)
{
    size_t n = strlen(path);
    int r = 0;
    *f = (cn_afile){.fd = -1};
    if (!n)
        return cn_err_set(err, -EINVAL, "empty path");
    if (!(f->path = strdup(path)) || !(f->tmp = malloc(n + sizeof(".XXXXXX.tmp")))) {
        r = cn_err_set(err, -ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    memcpy(f->tmp, path, n);
    memcpy(f->tmp + n, ".XXXXXX.tmp", sizeof(".XXXXXX.tmp"));
    for (int i = 0; i < TMP_TRIES && f->fd < 0; i++) {
        random_suffix(f->tmp + n + 1);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (f->fd < 0 && errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        r = -errno;
        cn_err_set(err, r, "%s: %s", f->tmp, strerror(-r));
        goto fail;
    }
    return 0;
fail:
    free(f->tmp); /* nothing was created */
    free(f->path);
    *f = (cn_afile){.fd = -1};
    return r;
}

int cn_afile_write(cn_afile *f, const void *data, size_t len, cn_err *err)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(f->fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int r = w < 0 ? -errno : -EIO;
            return cn_err_set(err, r, "%s: %s", f->tmp, strerror(-r));
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* fopencookie's write: all of it or -1 (the stream's error flag; errno says why). */
static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
    int r = cn_afile_write(cookie, buf, len, NULL);
    if (r < 0) {
        errno = -r;
        return -1;
    }
    return (ssize_t)len;
}

FILE *cn_afile_stream(cn_afile *f)
{
    return fopencookie(f, "w", (cookie_io_functions_t){.write = stream_write});
}

/* fsyncs the directory holding path. 0 or -errno. */
static int sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int r = 0, fd;
    if (!dir)
        return -ENOMEM;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0)
        r = -errno;
    if (fd >= 0)
        close(fd);
    free(dir);
    return r;
}

int cn_afile_commit(cn_afile *f, cn_err *err)
{
    int r = 0;
    const char *what = "";
    if (fsync(f->fd) < 0)
        r = -errno;
    if (close(f->fd) < 0 && r == 0)
        r = -errno; /* NFS reports write errors here */
    f->fd = -1;
    if (r == 0 && rename(f->tmp, f->path) < 0)
        r = -errno;
    if (r == 0) {
        free(f->tmp); /* renamed: nothing to remove any more */
        f->tmp = NULL;
        /* The content is in place; this makes the rename itself durable. */
        r = sync_dir(f->path);
        what = "syncing its directory: ";
    }
    if (r < 0)
        cn_err_set(err, r, "%s: %s%s", f->tmp ? f->tmp : f->path, what, strerror(-r));
    cn_afile_abort(f);
    return r;
}

void cn_afile_abort(cn_afile *f)
{
    if (!f)
        return;
    if (f->tmp) {
        if (f->fd >= 0)
            close(f->fd);
        unlink(f->tmp);
    }
    free(f->tmp);
    free(f->path);
    *f = (cn_afile){.fd = -1};
}

int cn_common_write_file_atomic(const char *path, unsigned mode, const void *data, size_t len,
                                cn_err *err)
{
    cn_afile f;
    int r = cn_afile_open(&f, path, mode, err);
    if (r < 0)
        return r;
    r = cn_afile_write(&f, data, len, err);
    if (r < 0) {
        cn_afile_abort(&f);
        return r;
    }
    return cn_afile_commit(&f, err);
}
