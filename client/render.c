/* render.c — the client's side of rendering: the bytes come from formats/' one renderer
 * (cn_fmt_render), the same canopyd uses; here they are buffered and written to stdout or
 * the -o file only when everything succeeded, so that an error leaves the output
 * untouched (docs/cli.md: nothing goes to stdout on error). The renderer's notes (a PATH
 * that names no call node) and errors become one-line messages on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

int cn_cli_emit(const char *path, const char *data, size_t len)
{
    if (!path) {
        if (len && fwrite(data, 1, len, stdout) != len) {
            fprintf(stderr, "canopy: writing to stdout: %s\n", strerror(errno));
            return CN_EXIT_FAIL;
        }
        if (fflush(stdout) != 0) {
            fprintf(stderr, "canopy: writing to stdout: %s\n", strerror(errno));
            return CN_EXIT_FAIL;
        }
        return CN_EXIT_OK;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "canopy: %s: %s\n", path, strerror(errno));
        return CN_EXIT_FAIL;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "canopy: %s: %s\n", path, w < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(path);
            return CN_EXIT_FAIL;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        fprintf(stderr, "canopy: %s: %s\n", path, strerror(errno));
        unlink(path);
        return CN_EXIT_FAIL;
    }
    return CN_EXIT_OK;
}

int cn_cli_emit_buffered(const char *output, int (*write)(void *ctx, FILE *out), void *ctx)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);

    if (!mem) {
        fprintf(stderr, "canopy: out of memory\n");
        return CN_EXIT_FAIL;
    }
    int status = write(ctx, mem);
    if (fclose(mem) != 0 && status == CN_EXIT_OK) {
        fprintf(stderr, "canopy: out of memory\n");
        status = CN_EXIT_FAIL;
    }
    if (status == CN_EXIT_OK)
        status = cn_cli_emit(output, buf, len);
    free(buf);
    return status;
}

bool cn_cli_want_color(const cn_cli_query *q)
{
    return !q->output && q->spec.format == CN_FMT_TEXT && isatty(STDOUT_FILENO) &&
           !getenv("NO_COLOR");
}

int cn_cli_status_of(int rc)
{
    return rc == -ENOMEM || rc == -EIO || rc == -ENOSPC ? CN_EXIT_FAIL : CN_EXIT_USAGE;
}

/* Prints each line of the renderer's notes as "canopy: LINE" on stderr. */
static void print_notes(const cn_buf *notes)
{
    const char *p = cn_buf_ptr(notes), *end = p + cn_buf_len(notes);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char *t = cn_term_dup(p, n); /* notes quote function names: the terminal rule */
        fprintf(stderr, "canopy: %s\n", t ? t : "(out of memory)");
        free(t);
        p += n + 1;
    }
}

int cn_cli_render_mem(cn_agg_profile *p, const cn_fmt_spec *spec, const cn_fmt_render_opts *opts,
                      char **out, size_t *len, cn_err *err)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *mem = open_memstream(&buf, &n);

    if (!mem)
        return cn_err_set(err, -ENOMEM, "out of memory");
    int rc = cn_fmt_render(p, spec, opts, mem, err);
    if (fclose(mem) != 0 && rc == 0)
        rc = cn_err_set(err, -ENOMEM, "out of memory");
    if (rc < 0) {
        if (err && !err->msg[0])
            cn_err_set(err, rc, "%s", strerror(-rc));
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

int cn_cli_render(cn_agg_profile *p, const cn_cli_query *q, const cn_fmt_render_opts *opts)
{
    cn_fmt_render_opts o;
    cn_buf notes;
    cn_err err = {0};
    char *buf = NULL;
    size_t len = 0;
    int status;

    if (opts)
        o = *opts;
    else
        cn_fmt_render_opts_init(&o);
    cn_buf_init(&notes, 0); /* bounded by the transforms the user gave */
    o.notes = &notes;
    int rc = cn_cli_render_mem(p, &q->spec, &o, &buf, &len, &err);
    print_notes(&notes);
    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg));
        status = cn_cli_status_of(rc);
    } else {
        status = cn_cli_emit(q->output, buf, len);
    }
    free(buf);
    cn_buf_free(&notes);
    return status;
}

int cn_cli_timeline_check(const cn_cli_query *q)
{
    cn_err err = {0};

    if (cn_fmt_timeline_check(&q->spec, &err) < 0) {
        fprintf(stderr, "canopy timeline: %s\n", CN_TERM_STR(err.msg));
        return CN_EXIT_USAGE;
    }
    return CN_EXIT_OK;
}
