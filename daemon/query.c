/* query.c — a session's answer to a query: the protocol's QUERY fields arrive decoded as a
 * cn_fmt_spec (cn_fmt_spec_from_json) and are rendered by formats/' one renderer
 * (cn_fmt_render) into a byte buffer, so a daemon session answers exactly what `canopy
 * open` prints for the same profile. Only the session's header fields and its clock (for
 * --last) are added here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "d_internal.h"

/* The renderer's options for session s: title, live header fields, the session's clock. */
static void session_opts(cn_live_session *s, cn_live_session_info *info, cn_fmt_render_opts *o)
{
    cn_live_session_info_get(s, info);
    cn_fmt_render_opts_init(o);
    o->title = cn_live_session_name(s) ? cn_live_session_name(s) : cn_live_session_id(s);
    o->session = cn_live_session_id(s);
    o->event = info->event;
    o->samples = (int64_t)info->samples;
    o->lost = (int64_t)info->lost;
    o->unwind = (cn_fmt_unwind){
        .known = true, .user_stacks = info->user_stacks, .outcomes = info->unwind_outcomes};
    o->has_now = true;
    o->now_ns = cn_live_session_now(s);
}

int cn_d__render_to(cn_live_session *s, cn_agg_profile *p, const cn_fmt_spec *spec, FILE *f,
                    cn_buf *notes, cn_err *err)
{
    cn_live_session_info info;
    cn_fmt_render_opts o;
    session_opts(s, &info, &o);
    o.notes = notes;
    return cn_fmt_render(p, spec, &o, f, err);
}

int cn_d_render(cn_live_session *s, const cn_fmt_spec *spec, cn_buf *out, cn_buf *notes,
                cn_err *err)
{
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);

    if (!f)
        return cn_err_set(err, -ENOMEM, "out of memory");
    int r = cn_d__render_to(s, cn_live_session_profile(s), spec, f, notes, err);
    if (fclose(f) != 0 && r == 0)
        r = cn_err_set(err, -ENOMEM, "out of memory");
    if (r == 0 && (r = cn_buf_append(out, mem, len)) < 0)
        cn_err_set(err, r, "output too large");
    free(mem);
    return r;
}

json_t *cn_d__lines_json(cn_live_session *s, cn_agg_profile *p, const cn_fmt_spec *spec,
                         const char *func, int *code, cn_err *err)
{
    cn_live_session_info info;
    cn_fmt_render_opts o;
    json_t *lines = NULL;

    session_opts(s, &info, &o);
    *code = cn_fmt_lines_json(p, spec, &o, func, &lines, err);
    return lines;
}

json_t *cn_d_lines_json(cn_live_session *s, const cn_fmt_spec *spec, const char *func, int *code,
                        cn_err *err)
{
    return cn_d__lines_json(s, cn_live_session_profile(s), spec, func, code, err);
}
