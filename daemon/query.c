/* query.c — a session's answer to a query: the protocol's QUERY fields arrive decoded as a
 * cn_fmt_spec (cn_fmt_spec_from_json) and are rendered by formats/' one renderer
 * (cn_fmt_render) into a byte buffer, so a daemon session answers exactly what `canopy
 * open` prints for the same profile. The session's header fields and its clock (for
 * --last) come from live/'s cn_live_session_render_opts, as in the CLI's in-process mode. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "d_internal.h"

int cn_d__render_to(cn_live_session *s, cn_agg_profile *p, const cn_fmt_spec *spec, FILE *f,
                    cn_buf *notes, cn_err *err)
{
    cn_fmt_render_opts o;
    cn_live_session_render_opts(s, NULL, &o);
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
    cn_fmt_render_opts o;
    json_t *lines = NULL;

    cn_live_session_render_opts(s, NULL, &o);
    *code = cn_fmt_lines_json(p, spec, &o, func, &lines, err);
    return lines;
}

json_t *cn_d_lines_json(cn_live_session *s, const cn_fmt_spec *spec, const char *func, int *code,
                        cn_err *err)
{
    return cn_d__lines_json(s, cn_live_session_profile(s), spec, func, code, err);
}
