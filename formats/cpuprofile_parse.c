/* cpuprofile_parse.c — Chrome/V8 `.cpuprofile` JSON (what `node --cpu-prof` writes),
 * parsed as a stream with yajl so a 100 MB file costs its tables, not its text.
 *
 * Layout (docs/calltree.md §5.1): {nodes: [{id, callFrame: {functionName, url,
 * lineNumber, columnNumber, scriptId}, hitCount, children | parent}], startTime, endTime
 * (µs), samples: [leaf node id], timeDeltas: [µs]}. Unknown keys are skipped whatever
 * their type. A small state machine follows the nesting and checks each value's type;
 * nodes go into flat arrays, and what they mean (the tree, weights, times) is
 * cpuprofile_model.c's, called when the nodes array closes, when timeDeltas open, and at
 * the end.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "cpuprofile.h"

static enum key key_of(enum state st, const unsigned char *s, size_t n)
{
    static const struct {
        enum state st;
        const char *name;
        enum key key;
    } keys[] = {
        {ST_TOP, "nodes", K_NODES},
        {ST_TOP, "startTime", K_START},
        {ST_TOP, "endTime", K_END},
        {ST_TOP, "samples", K_SAMPLES},
        {ST_TOP, "timeDeltas", K_DELTAS},
        {ST_TOP, "head", K_HEAD},
        {ST_NODE, "id", K_ID},
        {ST_NODE, "callFrame", K_CALLFRAME},
        {ST_NODE, "hitCount", K_HIT},
        {ST_NODE, "children", K_CHILDREN},
        {ST_NODE, "parent", K_PARENT},
        {ST_CF, "functionName", K_FNAME},
        {ST_CF, "url", K_URL},
        {ST_CF, "lineNumber", K_LINE},
        {ST_CF, "columnNumber", K_COL},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i].st == st && strlen(keys[i].name) == n && !memcmp(keys[i].name, s, n))
            return keys[i].key;
    return K_OTHER;
}

static const char *key_name(enum key k)
{
    static const char *const names[] = {
        "?",          "nodes",        "startTime", "endTime",  "samples", "timeDeltas",   "head",
        "id",         "callFrame",    "hitCount",  "children", "parent",  "functionName", "url",
        "lineNumber", "columnNumber",
    };
    return names[k];
}

/* ---- yajl callbacks -------------------------------------------------------------- */

static int type_error(cn_fmt__cpuprof *c, const char *want)
{
    bool elems =
        c->st == ST_CHILDREN || c->st == ST_SAMPLES || c->st == ST_DELTAS || c->st == ST_NODES;
    const char *where = c->st == ST_CHILDREN  ? "children"
                        : c->st == ST_SAMPLES ? "samples"
                        : c->st == ST_DELTAS  ? "timeDeltas"
                        : c->st == ST_NODES   ? "nodes"
                                              : key_name(c->key);
    return CN_FMT__CP_FAIL(c, "'%s' %s %s", where, elems ? "elements must be" : "must be", want);
}

static int on_delta(cn_fmt__cpuprof *c, enum vtype t, long long iv, double dv)
{
    int64_t ns;
    if (t == V_INT) {
        if (iv > 9000000000000LL || iv < -9000000000000LL)
            return CN_FMT__CP_FAIL(c, "timeDeltas value out of range");
        ns = (int64_t)iv * 1000;
    } else {
        if (!isfinite(dv) || fabs(dv) > 9e12)
            return CN_FMT__CP_FAIL(c, "timeDeltas value out of range");
        ns = (int64_t)llround(dv * 1000.0);
    }
    c->cum_ns += ns;
    if (c->cum_ns > INT64_MAX / 4 || c->cum_ns < INT64_MIN / 4)
        return CN_FMT__CP_FAIL(c, "timeDeltas sum out of range");
    size_t k = c->n_deltas++;
    if (c->streaming && c->direct) {
        if (k >= c->n_added)
            return CN_FMT__CP_FAIL(c, "timeDeltas has more entries than samples (%zu)", c->n_added);
        if (k > 0 && ns < 0) /* sample k - 1 is at the previous sum */
            c->unsorted = true;
        /* the sample was added at time 0; the table is not sorted before the end */
        if (cn_agg_sample_set_time(c->p, k, c->cum_ns) < 0)
            return CN_FMT__CP_FAIL(c, "internal error: sample %zu is missing", k);
        return 1;
    }
    if (c->streaming) {
        if (k >= c->n_smp)
            return CN_FMT__CP_FAIL(c, "timeDeltas has more entries than samples (%zu)", c->n_smp);
        return cn_fmt__cpuprof_add_sample(c, k, c->cum_ns);
    }
    if (CN_RESERVE(c->times, c->cap_times, k + 1) < 0)
        return CN_FMT__CP_NOMEM(c);
    c->times[k] = c->cum_ns;
    return 1;
}

/* Direct mode: adds one `samples` entry to the profile (at its time if timeDeltas came
 * first, else at 0 until the deltas patch it). */
static int direct_sample(cn_fmt__cpuprof *c, int32_t id)
{
    int32_t j = cn_fmt__cpuprof_node(c, id);
    size_t k = c->n_added;
    int64_t t = 0;
    if (j < 0)
        return CN_FMT__CP_FAIL(c, "samples[%zu] references unknown node id %d", k, id);
    if (c->have_deltas) {
        if (k >= c->n_deltas)
            return CN_FMT__CP_FAIL(c, "samples has more entries than timeDeltas (%zu)",
                                   c->n_deltas);
        t = c->times[k];
        if (k > 0 && t < c->times[k - 1])
            c->unsorted = true;
    }
    if (cn_agg_add_sample(c->p, c->stack[j], t, 1.0, -1) < 0)
        return CN_FMT__CP_NOMEM(c);
    c->count[j]++;
    c->n_added++;
    return 1;
}

static int on_scalar(cn_fmt__cpuprof *c, enum vtype t, long long iv, double dv,
                     const unsigned char *s, size_t n)
{
    bool is_int = t == V_INT, is_num = t == V_INT || t == V_DOUBLE;
    if (c->skip)
        return 1;
    switch (c->st) {
    case ST_BEGIN:
        return CN_FMT__CP_FAIL(c, "a .cpuprofile is a JSON object");
    case ST_TOP:
        if (c->key == K_START || c->key == K_END) {
            if (!is_num)
                return type_error(c, "a number");
            *(c->key == K_START ? &c->start_us : &c->end_us) = is_int ? (double)iv : dv;
            *(c->key == K_START ? &c->have_start : &c->have_end) = true;
        } else if (c->key == K_NODES || c->key == K_SAMPLES || c->key == K_DELTAS) {
            return type_error(c, "an array");
        } else if (c->key == K_HEAD) {
            return CN_FMT__CP_FAIL(c, "legacy .cpuprofile ('head' tree) is not supported");
        }
        return 1;
    case ST_NODES:
        return type_error(c, "objects");
    case ST_NODE:
        if (c->key == K_ID || c->key == K_HIT || c->key == K_PARENT) {
            if (!is_int || iv < (c->key == K_HIT ? 0 : INT32_MIN + 1) || iv > INT32_MAX)
                return type_error(c,
                                  c->key == K_HIT ? "a non-negative integer" : "a 32-bit integer");
            *(c->key == K_ID ? &c->cur_id : c->key == K_HIT ? &c->cur_hit : &c->cur_parent) = iv;
        } else if (c->key == K_CALLFRAME) {
            return type_error(c, "an object");
        } else if (c->key == K_CHILDREN) {
            return type_error(c, "an array");
        }
        return 1;
    case ST_CF:
        if (c->key == K_FNAME || c->key == K_URL) {
            if (t != V_STRING)
                return type_error(c, "a string");
            int32_t id = cn_agg_string(c->p, (const char *)s, n);
            if (id < 0)
                return CN_FMT__CP_NOMEM(c);
            *(c->key == K_FNAME ? &c->cur_name : &c->cur_url) = id;
        } else if (c->key == K_LINE || c->key == K_COL) {
            if (!is_int || iv < -1 || iv > INT32_MAX - 1)
                return type_error(c, "an integer >= -1");
            *(c->key == K_LINE ? &c->cur_line : &c->cur_col) = iv;
        }
        return 1;
    case ST_CHILDREN:
        if (!is_int || iv < INT32_MIN + 1 || iv > INT32_MAX)
            return type_error(c, "32-bit integers");
        if (CN_RESERVE(c->child_ids, c->cap_child_ids, c->n_child_ids + 1) < 0)
            return CN_FMT__CP_NOMEM(c);
        c->child_ids[c->n_child_ids++] = (int32_t)iv;
        return 1;
    case ST_SAMPLES:
        if (!is_int || iv < INT32_MIN + 1 || iv > INT32_MAX)
            return type_error(c, "32-bit integers (node ids)");
        if (c->direct)
            return direct_sample(c, (int32_t)iv);
        if (CN_RESERVE(c->smp, c->cap_smp, c->n_smp + 1) < 0)
            return CN_FMT__CP_NOMEM(c);
        c->smp[c->n_smp++] = (int32_t)iv;
        return 1;
    case ST_DELTAS:
        if (!is_num)
            return type_error(c, "numbers");
        return on_delta(c, t, iv, dv);
    case ST_END:
        break;
    }
    return CN_FMT__CP_FAIL(c, "unexpected value");
}

static int cb_null(void *ctx)
{
    return on_scalar(ctx, V_NULL, 0, 0, NULL, 0);
}

static int cb_bool(void *ctx, int b)
{
    return on_scalar(ctx, V_BOOL, b, 0, NULL, 0);
}

static int cb_int(void *ctx, long long v)
{
    return on_scalar(ctx, V_INT, v, 0, NULL, 0);
}

static int cb_double(void *ctx, double d)
{
    return on_scalar(ctx, V_DOUBLE, 0, d, NULL, 0);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    return on_scalar(ctx, V_STRING, 0, 0, s, n);
}

static int begin_node(cn_fmt__cpuprof *c)
{
    c->cur_id = NO_ID;
    c->cur_parent = INT32_MIN;
    c->cur_hit = -1;
    c->cur_line = -1;
    c->cur_col = -1;
    c->cur_name = -1;
    c->cur_url = -1;
    c->cur_cf = false;
    size_t n = c->n_nodes + 1, cap = c->cap_nodes;
#define GROW(a)                                                                                    \
    do {                                                                                           \
        size_t c_ = c->cap_nodes;                                                                  \
        if (CN_RESERVE(c->a, c_, n) < 0)                                                           \
            return CN_FMT__CP_NOMEM(c);                                                            \
        cap = c_;                                                                                  \
    } while (0)
    GROW(n_id);
    GROW(n_name);
    GROW(n_url);
    GROW(n_line);
    GROW(n_col);
    GROW(n_parent_id);
    GROW(n_hit);
    GROW(n_child_off);
    GROW(n_child_cnt);
    GROW(n_offset);
#undef GROW
    c->cap_nodes = cap;
    size_t i = c->n_nodes;
    c->n_offset[i] = cn_fmt__jstream_offset(&c->js) - 1;
    c->n_child_off[i] = (uint32_t)c->n_child_ids;
    c->n_child_cnt[i] = 0;
    return 1;
}

static int end_node(cn_fmt__cpuprof *c)
{
    size_t i = c->n_nodes;
    if (c->cur_id == NO_ID)
        return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i], "node without an 'id'");
    if (!c->cur_cf)
        return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i],
                                       "node %lld has no 'callFrame'", (long long)c->cur_id);
    if (cn_fmt__cpuprof_node(c, c->cur_id) >= 0)
        return cn_fmt__jstream_fail_at(&c->js, -EINVAL, c->n_offset[i], "repeated node id %lld",
                                       (long long)c->cur_id);
    if (c->n_child_ids > UINT32_MAX || i >= INT32_MAX)
        return CN_FMT__CP_FAIL(c, "too many nodes");
    if (cn_u64map_put(&c->id_index, (uint64_t)c->cur_id, (int32_t)i) < 0)
        return CN_FMT__CP_NOMEM(c);
    c->n_id[i] = (int32_t)c->cur_id;
    c->n_name[i] = c->cur_name;
    c->n_url[i] = c->cur_url;
    c->n_line[i] = (int32_t)c->cur_line;
    c->n_col[i] = (int32_t)c->cur_col;
    c->n_parent_id[i] = (int32_t)c->cur_parent;
    c->n_hit[i] = c->cur_hit;
    c->n_child_cnt[i] = (uint32_t)(c->n_child_ids - c->n_child_off[i]);
    c->n_nodes++;
    return 1;
}

/* Opens timeDeltas: stream samples into the profile when everything else is known. */
static int begin_deltas(cn_fmt__cpuprof *c)
{
    c->have_deltas = true;
    c->n_deltas = 0;
    c->cum_ns = 0;
    if (c->direct && c->samples_done) {
        c->streaming = true;
    } else if (c->nodes_done && c->samples_done && !c->direct) {
        if (!cn_fmt__cpuprof_resolve(c))
            return 0;
        c->streaming = true;
    }
    return 1;
}

static int on_open(cn_fmt__cpuprof *c, bool is_map)
{
    if (c->skip) {
        c->skip++;
        return 1;
    }
    switch (c->st) {
    case ST_BEGIN:
        if (!is_map)
            return CN_FMT__CP_FAIL(c, "a .cpuprofile is a JSON object");
        c->st = ST_TOP;
        return 1;
    case ST_TOP:
        if (c->key == K_HEAD)
            return CN_FMT__CP_FAIL(c, "legacy .cpuprofile ('head' tree) is not supported");
        if (c->key == K_START || c->key == K_END)
            return type_error(c, "a number");
        if (c->key == K_NODES || c->key == K_SAMPLES || c->key == K_DELTAS) {
            if (is_map)
                return type_error(c, "an array");
            bool *seen = c->key == K_NODES     ? &c->have_nodes
                         : c->key == K_SAMPLES ? &c->have_samples
                                               : &c->have_deltas;
            if (*seen)
                return CN_FMT__CP_FAIL(c, "repeated key '%s'", key_name(c->key));
            *seen = true;
            if (c->key == K_NODES) {
                c->st = ST_NODES;
            } else if (c->key == K_SAMPLES) {
                c->samples_offset = cn_fmt__jstream_offset(&c->js) - 1;
                c->st = ST_SAMPLES;
                c->direct = c->nodes_done && c->injective;
            } else {
                c->st = ST_DELTAS;
                return begin_deltas(c);
            }
            return 1;
        }
        c->skip = 1;
        return 1;
    case ST_NODES:
        if (!is_map)
            return type_error(c, "objects");
        c->st = ST_NODE;
        return begin_node(c);
    case ST_NODE:
        if (c->key == K_CALLFRAME && is_map) {
            c->cur_cf = true;
            c->st = ST_CF;
            return 1;
        }
        if (c->key == K_CHILDREN && !is_map) {
            c->st = ST_CHILDREN;
            return 1;
        }
        if (c->key != K_OTHER)
            return type_error(c, c->key == K_CALLFRAME  ? "an object"
                                 : c->key == K_CHILDREN ? "an array"
                                                        : "an integer");
        c->skip = 1;
        return 1;
    case ST_CF:
        if (c->key != K_OTHER)
            return type_error(c, c->key == K_FNAME || c->key == K_URL ? "a string" : "an integer");
        c->skip = 1;
        return 1;
    case ST_CHILDREN:
    case ST_SAMPLES:
        return type_error(c, "integers");
    case ST_DELTAS:
        return type_error(c, "numbers");
    case ST_END:
        break;
    }
    return CN_FMT__CP_FAIL(c, "unexpected value");
}

static int cb_start_map(void *ctx)
{
    return on_open(ctx, true);
}

static int cb_start_array(void *ctx)
{
    return on_open(ctx, false);
}

static int on_close(cn_fmt__cpuprof *c)
{
    if (c->skip) {
        c->skip--;
        return 1;
    }
    switch (c->st) {
    case ST_TOP:
        c->st = ST_END;
        return 1;
    case ST_NODES:
        c->st = ST_TOP;
        return cn_fmt__cpuprof_build_tree(c);
    case ST_NODE:
        c->st = ST_NODES;
        return end_node(c);
    case ST_CF:
        c->st = ST_NODE;
        return 1;
    case ST_CHILDREN:
        c->st = ST_NODE;
        return 1;
    case ST_SAMPLES:
        c->samples_done = true;
        c->st = ST_TOP;
        return 1;
    case ST_DELTAS:
        c->st = ST_TOP;
        return 1;
    default:
        return CN_FMT__CP_FAIL(c, "unbalanced JSON");
    }
}

static int cb_end(void *ctx)
{
    return on_close(ctx);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
    cn_fmt__cpuprof *c = ctx;
    if (!c->skip)
        c->key = key_of(c->st, s, n);
    return 1;
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool,    cb_int, cb_double,      NULL,   cb_string,
    cb_start_map, cb_map_key, cb_end, cb_start_array, cb_end,
};

/* ---- public (module-internal) API ------------------------------------------------- */

cn_fmt__cpuprof *cn_fmt__cpuprof_new(const char *name)
{
    cn_fmt__cpuprof *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->p = cn_agg_profile_new();
    if (!c->p || cn_fmt__jstream_init(&c->js, name, &callbacks, c) < 0)
        return cn_fmt__cpuprof_free(c);
    return c;
}

cn_fmt__cpuprof *cn_fmt__cpuprof_free(cn_fmt__cpuprof *c)
{
    if (!c)
        return NULL;
    cn_fmt__jstream_fini(&c->js);
    cn_agg_profile_free(c->p);
    free(c->n_id);
    free(c->n_name);
    free(c->n_url);
    free(c->n_line);
    free(c->n_col);
    free(c->n_parent_id);
    free(c->n_hit);
    free(c->n_child_off);
    free(c->n_child_cnt);
    free(c->n_offset);
    free(c->child_ids);
    cn_u64map_clear(&c->id_index);
    free(c->stack);
    free(c->bottom);
    free(c->parent);
    free(c->weight);
    free(c->count);
    free(c->smp);
    free(c->times);
    free(c->node_of_stack);
    free(c);
    return NULL;
}

int cn_fmt__cpuprof_feed(cn_fmt__cpuprof *c, const void *data, size_t len, cn_err *err)
{
    return cn_fmt__jstream_feed(&c->js, data, len, err);
}

int cn_fmt__cpuprof_finish(cn_fmt__cpuprof *c, cn_agg_profile **out, cn_err *err)
{
    int rc = cn_fmt__jstream_finish(&c->js, err);
    if (rc < 0)
        return rc;
    if (c->st != ST_END)
        return CN_FMT__CP_FAIL(c, "truncated JSON"), c->js.rc;
    if (!c->have_nodes)
        return cn_err_set(err, -EINVAL, "%s: not a .cpuprofile: no 'nodes' array", c->js.name);
    if (!c->have_start || !c->have_end)
        return cn_err_set(err, -EINVAL, "%s: missing 'startTime' or 'endTime'", c->js.name);
    if (c->end_us < c->start_us)
        return cn_err_set(err, -EINVAL, "%s: endTime is before startTime", c->js.name);
    rc = cn_fmt__cpuprof_complete(c);
    if (rc < 0)
        return rc;
    *out = c->p;
    c->p = NULL;
    return 0;
}

/* The first byte after blanks (and a UTF-8 byte order mark) opens a JSON object. */
bool cn_fmt__looks_json(const char *data, size_t len)
{
    size_t i = cn_fmt__json_skip_blank(data, len, 0);
    return i < len && data[i] == '{';
}
