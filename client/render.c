/* render.c — runs a parsed query on a loaded profile and writes it in the chosen format.
 *
 * Shared by `canopy open` and (for live sessions hosted in-process) `canopy tree`. The
 * result is written to a memory buffer first and emitted only when everything succeeded,
 * so that an error leaves stdout (or the -o file) untouched: interface.md's "nothing goes
 * to stdout on error". Transform arguments are checked against the untransformed profile
 * first (unknown function or library: exit 2); a PATH that names no call node only earns
 * a note on stderr.
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
    return !q->output && q->format == CN_FMT_TEXT && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
}

int cn_cli_check_transforms(cn_agg_profile *p, const cn_cli_query *q)
{
    cn_err err = {0};

    for (size_t i = 0; i < q->n_transforms; i++) {
        if (cn_agg_transform_check(p, &q->transforms[i], &err) < 0) {
            fprintf(stderr, "canopy: %s\n", err.msg);
            return CN_EXIT_USAGE;
        }
    }
    return CN_EXIT_OK;
}

/* Exit status for an engine error: resource exhaustion is a runtime failure, anything
 * else (bad query, unsupported combination) is bad usage or input. */
static int status_of(int rc)
{
    return rc == -ENOMEM || rc == -EIO || rc == -ENOSPC ? CN_EXIT_FAIL : CN_EXIT_USAGE;
}

/* True when some chain of nodes from a root, named path[0], path[1], …, exists below
 * `first` (siblings linked through next_sibling). Several funcs may share a name, so
 * every matching sibling is tried. */
static bool path_exists(const cn_agg_profile *p, const cn_agg_tree *t, int32_t first,
                        char *const *path, size_t len)
{
    if (len == 0)
        return true;
    for (int32_t n = first; n >= 0; n = t->nodes[n].next_sibling) {
        const char *name = cn_agg_func_name(p, t->nodes[n].func);
        if (name && !strcmp(name, path[0]) &&
            path_exists(p, t, t->nodes[n].first_child, path + 1, len - 1))
            return true;
    }
    return false;
}

/* Prints a note when transform i's PATH is no call node path of the tree it applies to
 * (the tree after transforms 0..i-1; the inverted tree for focus-inverted). Returns 0, or
 * an exit status after printing an error. */
static int note_unmatched_path(cn_agg_profile *p, const cn_cli_query *q, size_t i)
{
    const cn_agg_transform *t = &q->transforms[i];
    cn_agg_query sub = q->query;
    cn_agg_tree *tree = NULL;
    cn_err err = {0};

    sub.n_transforms = i;
    sub.view = t->kind == CN_AGG_TF_FOCUS_INVERTED ? CN_AGG_VIEW_INVERTED : CN_AGG_VIEW_TREE;
    sub.view_func = NULL;
    sub.group_by = CN_AGG_GROUP_NONE;
    int rc = cn_agg_query_run(p, &sub, &tree, &err);
    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return status_of(rc);
    }
    if (!path_exists(p, tree, tree->first_root, t->path, t->path_len)) {
        char *spec = cn_agg_transform_format(t);
        fprintf(stderr, "canopy: note: '%s': '%s' is not a call node path%s; applied as written\n",
                spec ? spec : t->arg, t->arg, i ? " after the transforms before it" : "");
        free(spec);
    }
    cn_agg_tree_free(tree);
    return 0;
}

/* Runs the query and writes the tree in text or JSON. */
static int write_tree(cn_agg_profile *p, const cn_cli_query *q, const cn_fmt_write_opts *o,
                      FILE *out)
{
    cn_agg_tree *tree = NULL;
    cn_err err = {0};
    int rc = cn_agg_query_run(p, &q->query, &tree, &err);

    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return status_of(rc);
    }
    rc = q->format == CN_FMT_JSON ? cn_fmt_write_json(p, tree, o, out)
                                  : cn_fmt_write_text(p, tree, o, out);
    cn_agg_tree_free(tree);
    if (rc < 0) {
        fprintf(stderr, "canopy: writing %s output: %s\n", cn_cli_format_name(q->format),
                strerror(-rc));
        return status_of(rc);
    }
    return CN_EXIT_OK;
}

int cn_cli_write_timeline(cn_agg_profile *p, const cn_cli_query *q, FILE *out)
{
    cn_agg_call *calls = NULL;
    size_t n = 0;
    cn_err err = {0};
    int rc = cn_agg_timeline(p, &q->query, &calls, &n, &err);

    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return status_of(rc);
    }
    if (q->format == CN_FMT_JSON)
        rc = cn_fmt_write_timeline_json(p, calls, n, out);
    else if (q->format == CN_FMT_CHROME_TRACE)
        rc = cn_fmt_write_chrome_trace(p, calls, n, out);
    else if (q->format == CN_FMT_SPEEDSCOPE)
        rc = cn_fmt_write_timeline_speedscope(p, calls, n, out, &err);
    else
        rc = cn_fmt_write_timeline_text(p, calls, n, out);
    free(calls);
    if (rc < 0) {
        if (err.msg[0])
            fprintf(stderr, "canopy: %s\n", err.msg);
        else
            fprintf(stderr, "canopy: writing %s output: %s\n", cn_cli_format_name(q->format),
                    strerror(-rc));
        return status_of(rc);
    }
    return CN_EXIT_OK;
}

int cn_cli_timeline_check(const cn_cli_query *q)
{
    if (q->format != CN_FMT_TEXT && q->format != CN_FMT_JSON && q->format != CN_FMT_CHROME_TRACE &&
        q->format != CN_FMT_SPEEDSCOPE) {
        fprintf(stderr,
                "canopy timeline: --format %s: expected text, json, chrome-trace or speedscope\n",
                cn_cli_format_name(q->format));
        return CN_EXIT_USAGE;
    }
    if (q->view_given || q->query.group_by != CN_AGG_GROUP_NONE) {
        fprintf(stderr, "canopy timeline: views and --group-by do not apply to a timeline\n");
        return CN_EXIT_USAGE;
    }
    return CN_EXIT_OK;
}

/* cn_cli_emit_buffered's writer for cn_cli_timeline_emit (ctx: the profile and query). */
typedef struct timeline_ctx {
    cn_agg_profile *p;
    const cn_cli_query *q;
} timeline_ctx;

static int timeline_write(void *ctx, FILE *out)
{
    const timeline_ctx *t = ctx;
    return cn_cli_write_timeline(t->p, t->q, out);
}

int cn_cli_timeline_emit(cn_agg_profile *p, cn_cli_query *q)
{
    cn_cli_query_resolve_range(p, q);
    int status = cn_cli_check_transforms(p, q);
    if (status != CN_EXIT_OK)
        return status;
    timeline_ctx t = {.p = p, .q = q};
    return cn_cli_emit_buffered(q->output, timeline_write, &t);
}

/* Writes the result into out. Returns an exit status after printing any error. */
static int write_format(cn_agg_profile *p, const cn_cli_query *q, const cn_fmt_write_opts *o,
                        FILE *out)
{
    cn_err err = {0};
    int rc;

    if (cn_agg_is_diff(p))
        return cn_cli_write_diff(p, q, true, o->title, out);
    switch (q->format) {
    case CN_FMT_TEXT:
    case CN_FMT_JSON:
        return write_tree(p, q, o, out);
    case CN_FMT_CHROME_TRACE:
        return cn_cli_write_timeline(p, q, out);
    case CN_FMT_FOLDED:
        rc = cn_fmt_write_folded(p, &q->query, out, &err);
        break;
    case CN_FMT_PPROF:
        rc = cn_fmt_write_pprof(p, &q->query, out, &err);
        break;
    case CN_FMT_SPEEDSCOPE:
        rc = cn_fmt_write_speedscope(p, &q->query, out, &err);
        break;
    case CN_FMT_SVG:
        rc = cn_fmt_write_svg(p, &q->query, o, out, &err);
        break;
    case CN_FMT_CANOPY:
        rc = cn_agg_write_canopy(p, out);
        break;
    default:
        rc = -EINVAL;
        break;
    }
    if (rc < 0) {
        fprintf(stderr, "canopy: %s\n", err.msg[0] ? err.msg : strerror(-rc));
        return status_of(rc);
    }
    return CN_EXIT_OK;
}

/* cn_cli_emit_buffered's writer for cn_cli_render: the state write_format needs. */
typedef struct render_ctx {
    cn_agg_profile *p;
    const cn_cli_query *q;
    const cn_fmt_write_opts *o;
} render_ctx;

static int render_write(void *ctx, FILE *out)
{
    const render_ctx *r = ctx;
    return write_format(r->p, r->q, r->o, out);
}

int cn_cli_render(cn_agg_profile *p, cn_cli_query *q, const char *title,
                  const cn_fmt_write_opts *extra)
{
    cn_fmt_write_opts o;
    int status;

    cn_cli_query_resolve_range(p, q);
    if ((status = cn_cli_check_transforms(p, q)) != CN_EXIT_OK)
        return status;
    for (size_t i = 0; i < q->n_transforms; i++) {
        if (!cn_agg_tf_takes_path(q->transforms[i].kind))
            continue;
        status = note_unmatched_path(p, q, i);
        if (status != 0)
            return status;
    }

    cn_fmt_write_opts_init(&o);
    if (extra) {
        o.session = extra->session;
        o.event = extra->event;
        o.samples = extra->samples;
        o.lost = extra->lost;
    }
    o.title = title;
    o.max_depth = q->depth;
    o.min_percent = q->min_percent;
    o.color = cn_cli_want_color(q);
    o.transforms = q->transforms;
    o.n_transforms = q->n_transforms;

    render_ctx r = {.p = p, .q = q, .o = &o};
    return cn_cli_emit_buffered(q->output, render_write, &r);
}
