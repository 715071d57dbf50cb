/* opts.c — a session's spec (cn_live_session_opts): its one validator, its one JSON codec
 * (docs/protocol.md "attach, run, system") and the session's render header.
 *
 * The CLI parses argv into the spec and checks it here; canopyd decodes the same fields
 * with the same rules; the in-process host checks what the CLI hands it. Durations travel
 * as integer nanoseconds, so what the user typed ("500us") is what the host applies.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "cn_live.h"
#include "live_internal.h"

void cn_live_session_opts_init(cn_live_session_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->freq = CN_LIVE_FREQ_DEFAULT;
    o->unwind = CN_SMP_UNWIND_AUTO;
}

void cn_live_session_opts_clear(cn_live_session_opts *o)
{
    if (!o)
        return;
    cn_fleet_labels_clear(&o->labels);
    cn_live_session_opts_init(o);
}

/* ---- validation ---------------------------------------------------------------------- */

static int check_name(const char *v, cn_err *err)
{
    size_t n = strlen(v);
    if (!n || n > CN_LIVE_NAME_MAX || strchr(v, '/') || v[0] == '-')
        return cn_err_set(err, -EINVAL,
                          "name: 1 to %d bytes, no '/', not starting with '-' (got '%.80s')",
                          CN_LIVE_NAME_MAX, v);
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return cn_err_set(err, -EINVAL, "name: control characters");
    if (strspn(v, "0123456789") == n)
        return cn_err_set(err, -EINVAL, "name: '%s' is all digits (it would read as a PID)", v);
    if (v[0] == 's' && n > 1 && strspn(v + 1, "0123456789") == n - 1)
        return cn_err_set(err, -EINVAL, "name: '%s' looks like a session id (s<number>)", v);
    return 0;
}

static int check_event(const char *v, cn_err *err)
{
    size_t n = strlen(v);
    if (!n || n > CN_LIVE_EVENT_MAX || strspn(v, CN_LIVE_EVENT_CHARS) != n)
        return cn_err_set(err, -EINVAL, "event: 1 to %d bytes of [a-z0-9-_:/=,] (got '%.80s')",
                          CN_LIVE_EVENT_MAX, v);
    return 0;
}

int cn_live_session_opts_validate(const cn_live_session_opts *o, cn_err *err)
{
    if (o->freq < 1 || o->freq > CN_LIVE_FREQ_MAX)
        return cn_err_set(err, -EINVAL, "freq: an integer from 1 to %d Hz", CN_LIVE_FREQ_MAX);
    if (o->event && check_event(o->event, err) < 0)
        return -EINVAL;
    if (o->stack_size &&
        (o->stack_size < CN_LIVE_STACK_SIZE_MIN || o->stack_size > CN_LIVE_STACK_SIZE_MAX ||
         o->stack_size % CN_LIVE_STACK_SIZE_ALIGN))
        return cn_err_set(err, -EINVAL, "stack_size: a multiple of %d from %d to %d bytes",
                          CN_LIVE_STACK_SIZE_ALIGN, CN_LIVE_STACK_SIZE_MIN, CN_LIVE_STACK_SIZE_MAX);
    if (o->duration_ns < 0)
        return cn_err_set(err, -EINVAL, "duration: must not be negative");
    if (o->min_block_ns > (uint64_t)INT64_MAX)
        return cn_err_set(err, -EINVAL, "min_block: out of range");
    if (o->name && check_name(o->name, err) < 0)
        return -EINVAL;
    if (o->cgroup &&
        (o->kind != CN_LIVE_SYSTEM || o->cgroup[0] != '/' ||
         strlen(o->cgroup) >= CN_CGROUP_PATH_MAX || strstr(o->cgroup, "/../") ||
         (strlen(o->cgroup) >= 3 && !strcmp(o->cgroup + strlen(o->cgroup) - 3, "/..")) ||
         strchr(o->cgroup, '\n')))
        return cn_err_set(err, -EINVAL,
                          "cgroup: an absolute directory path without '..' components, for a "
                          "system session only");
    if (cn_fleet_labels_get(&o->labels, "host"))
        return cn_err_set(err, -EINVAL, "label host is set by canopyd (fleet_host)");
    return 0;
}

/* ---- JSON ---------------------------------------------------------------------------- */

int cn_live_session_opts_to_json(const cn_live_session_opts *o, json_t *req)
{
    int rc = 0;
    if (o->pid > 0)
        rc |= json_object_set_new(req, "pid", json_integer(o->pid));
    if (o->cgroup)
        rc |= json_object_set_new(req, "cgroup", json_string(o->cgroup));
    rc |= json_object_set_new(req, "freq", json_integer(o->freq));
    if (o->event)
        rc |= json_object_set_new(req, "event", json_string(o->event));
    if (o->unwind != CN_SMP_UNWIND_AUTO)
        rc |= json_object_set_new(req, "unwind", json_string(cn_smp_unwind_name(o->unwind)));
    if (o->stack_size)
        rc |= json_object_set_new(req, "stack_size", json_integer(o->stack_size));
    if (o->no_kernel)
        rc |= json_object_set_new(req, "kernel", json_false());
    if (o->no_python)
        rc |= json_object_set_new(req, "python", json_false());
    if (o->duration_ns)
        rc |= json_object_set_new(req, "duration_ns", json_integer(o->duration_ns));
    if (o->retention_ns)
        rc |= json_object_set_new(req, "retention_ns", json_integer(o->retention_ns));
    if (o->name)
        rc |= json_object_set_new(req, "name", json_string(o->name));
    if (o->mode != CN_SMP_MODE_CPU)
        rc |= json_object_set_new(req, "mode", json_string(cn_smp_mode_name(o->mode)));
    if (o->min_block_ns)
        rc |= json_object_set_new(req, "min_block_ns", json_integer((json_int_t)o->min_block_ns));
    if (o->labels.n) {
        json_t *l = json_object();
        rc |= !l;
        for (size_t i = 0; l && i < o->labels.n; i++)
            rc |= json_object_set_new(l, o->labels.v[i].key, json_string(o->labels.v[i].value));
        rc |= json_object_set_new(req, "labels", l);
    }
    if (o->no_fleet)
        rc |= json_object_set_new(req, "fleet", json_false());
    return rc ? -ENOMEM : 0;
}

/* A duration field: integer ns under key_ns, or the text an older client sends under key.
 * Leaves *ns when neither is there. 0 or -EINVAL with err set. */
static int get_duration(const json_t *req, const char *key, const char *key_ns, int64_t *ns,
                        cn_err *err)
{
    const json_t *t = json_object_get(req, key), *n = json_object_get(req, key_ns);
    t = json_is_null(t) ? NULL : t;
    n = json_is_null(n) ? NULL : n;
    if (t && n)
        return cn_err_set(err, -EINVAL, "\"%s\" and \"%s\" together", key, key_ns);
    if (n) {
        if (!json_is_integer(n))
            return cn_err_set(err, -EINVAL, "\"%s\" must be an integer (ns)", key_ns);
        *ns = json_integer_value(n);
    } else if (t) {
        if (!json_is_string(t) || cn_common_parse_duration(json_string_value(t), ns) < 0)
            return cn_err_set(err, -EINVAL, "bad %s (a duration string, e.g. \"30s\")", key);
    }
    return 0;
}

/* The string, integer and enum fields. 0 or -EINVAL with err set. */
static int scalars_from_json(const json_t *req, cn_live_session_opts *o, cn_err *err)
{
    const char *str;
    int64_t iv;
    bool b;
    int r;
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((r = (call)) < 0)                                                                      \
            return r;                                                                              \
    } while (0)
    if (o->kind != CN_LIVE_SYSTEM) {
        iv = o->pid;
        TRY(cn_proto_get_int(req, "pid", &iv, err));
        o->pid = iv > 0 && iv <= INT32_MAX ? (pid_t)iv : 0;
    }
    TRY(cn_proto_get_str(req, "cgroup", &o->cgroup, err));
    TRY(cn_proto_get_str(req, "name", &o->name, err));
    TRY(cn_proto_get_str(req, "event", &o->event, err));
    iv = o->freq;
    TRY(cn_proto_get_int(req, "freq", &iv, err));
    o->freq = iv >= 1 && iv <= CN_LIVE_FREQ_MAX ? (uint32_t)iv : 0; /* 0: refused below */
    str = NULL;
    TRY(cn_proto_get_str(req, "unwind", &str, err));
    if (str && cn_smp_unwind_parse(str, &o->unwind) < 0)
        return cn_err_set(err, -EINVAL, "unknown unwind mode '%.32s' (fp, dwarf, auto)", str);
    iv = o->stack_size;
    TRY(cn_proto_get_int(req, "stack_size", &iv, err));
    o->stack_size = iv >= 0 && iv <= CN_LIVE_STACK_SIZE_MAX ? (uint32_t)iv : 1; /* 1: refused */
    b = !o->no_kernel;
    TRY(cn_proto_get_bool(req, "kernel", &b, err));
    o->no_kernel = !b;
    b = !o->no_python;
    TRY(cn_proto_get_bool(req, "python", &b, err));
    o->no_python = !b;
    str = NULL;
    TRY(cn_proto_get_str(req, "mode", &str, err));
    if (str && cn_smp_mode_parse(str, &o->mode) < 0)
        return cn_err_set(err, -EINVAL, "unknown mode '%.32s' (cpu, off-cpu, wall)", str);
    b = !o->no_fleet;
    TRY(cn_proto_get_bool(req, "fleet", &b, err));
    o->no_fleet = !b;
#undef TRY
    return 0;
}

static int labels_from_json(const json_t *req, cn_live_session_opts *o, cn_err *err)
{
    const json_t *l = json_object_get(req, "labels");
    const char *k;
    json_t *v;
    if (!l)
        return 0;
    if (!json_is_object(l))
        return cn_err_set(err, -EINVAL, "\"labels\" must be an object of strings");
    json_object_foreach((json_t *)l, k, v)
    {
        if (!json_is_string(v))
            return cn_err_set(err, -EINVAL, "label %.64s: value must be a string", k);
        int r = cn_fleet_labels_set(&o->labels, k, json_string_value(v), err);
        if (r < 0)
            return r;
    }
    return 0;
}

int cn_live_session_opts_from_json(const json_t *req, cn_live_session_opts *o, cn_err *err)
{
    int64_t mb = (int64_t)o->min_block_ns;
    int r;
    if ((r = scalars_from_json(req, o, err)) < 0 ||
        (r = get_duration(req, "duration", "duration_ns", &o->duration_ns, err)) < 0 ||
        (r = get_duration(req, "min_block", "min_block_ns", &mb, err)) < 0 ||
        (r = get_duration(req, "retention", "retention_ns", &o->retention_ns, err)) < 0 ||
        (r = labels_from_json(req, o, err)) < 0)
        return r == -ENOMEM ? r : -EINVAL;
    if (o->kind != CN_LIVE_SYSTEM && o->pid <= 0)
        return cn_err_set(err, -EINVAL, "\"pid\" (a positive integer) is required");
    if (mb < 0)
        return cn_err_set(err, -EINVAL, "min_block: must not be negative");
    o->min_block_ns = (uint64_t)mb;
    return cn_live_session_opts_validate(o, err);
}

/* ---- the render header --------------------------------------------------------------- */

void cn_live__otlp_init(cn_live_session *s)
{
    if (gethostname(s->host, sizeof(s->host) - 1) < 0)
        s->host[0] = '\0';
    s->otlp = (cn_fmt_otlp_opts){.host = s->host[0] ? s->host : NULL};
}

void cn_live_session_render_opts(const cn_live_session *s, const char *title, cn_fmt_render_opts *o)
{
    cn_live_session_info info;
    cn_live_session_info_get(s, &info);
    cn_fmt_render_opts_init(o);
    o->title = title ? title : info.name ? info.name : info.id;
    o->session = info.id;
    o->event = info.event;
    o->samples = (int64_t)info.samples;
    o->lost = (int64_t)info.lost;
    o->unwind = (cn_fmt_unwind){
        .known = true, .user_stacks = info.user_stacks, .outcomes = info.unwind_outcomes};
    o->python = info.python;
    o->cgroup = info.cgroup;
    o->has_now = true;
    o->now_ns = cn_live_session_now(s);
    o->otlp = &s->otlp;
}
