/* import_cpuprofile.c — Chrome/V8 `.cpuprofile` JSON (what `node --cpu-prof` writes),
 * parsed as a stream with yajl so a 100 MB file costs its tables, not its text.
 *
 * Layout (calltree.md §5.1): {nodes: [{id, callFrame: {functionName, url, lineNumber,
 * columnNumber, scriptId}, hitCount, children | parent}], startTime, endTime (µs),
 * samples: [leaf node id], timeDeltas: [µs]}. Unknown keys are skipped whatever their
 * type. A small state machine follows the nesting; nodes are kept in flat arrays, and
 * when the nodes array closes the tree is checked (unknown child ids, a node with two
 * parents, nodes not reachable from nodes[0]: a cycle) and each node gets its stack:
 * (root) is no frame, its children ((program), (idle), (garbage collector) and JS
 * entry points) are roots.
 *
 * Weights reproduce DevTools' CPUProfileDataModel (§5.2): one sample per entry of
 * `samples`, at the prefix sum of timeDeltas (ns after startTime), weighing
 * hitCount(node) / (samples of node) — 1 when the file's hit counts agree with its
 * samples, 0 for V8's first `(program)` sample that no hit count covers; hit counts are
 * counted from the samples when nodes[0] has none. The profile's unit is ms and its
 * scale the average interval (endTime − startTime) / 1000 / Σ hitCount, so self(node) =
 * hitCount × the average interval, exactly DevTools' figure. fixMissingSamples (§5.2
 * step 6) only changes timeline stacks (cn_agg_sample_set_timeline_stack).
 *
 * Memory: when the nodes come first (as V8 writes them) and no two nodes share a stack,
 * each `samples` entry goes straight into the profile (time 0, patched in place as
 * timeDeltas stream by), so the import holds nothing per sample beyond the profile's own
 * table; otherwise node ids (4 bytes per sample) and times (8) are kept until the end.
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "import_internal.h"

enum state {
    ST_BEGIN,
    ST_TOP,
    ST_NODES,
    ST_NODE,
    ST_CF,
    ST_CHILDREN,
    ST_SAMPLES,
    ST_DELTAS,
    ST_END
};

enum key {
    K_OTHER,
    K_NODES,
    K_START,
    K_END,
    K_SAMPLES,
    K_DELTAS,
    K_HEAD,
    K_ID,
    K_CALLFRAME,
    K_HIT,
    K_CHILDREN,
    K_PARENT,
    K_FNAME,
    K_URL,
    K_LINE,
    K_COL,
};

enum vtype { V_NULL, V_BOOL, V_INT, V_DOUBLE, V_STRING };

#define NO_ID INT64_MIN

struct cn_fmt__cpuprof {
    char *name;
    yajl_handle h;
    cn_agg_profile *p;
    cn_err *err;   /* of the current feed/finish call */
    int rc;        /* the error a callback raised */
    uint64_t base; /* bytes fed before the current chunk */
    enum state st;
    enum key key;
    size_t skip; /* depth inside a value being skipped */

    bool have_nodes, have_start, have_end, have_samples, have_deltas, samples_done;
    double start_us, end_us;

    /* nodes (struct of arrays) */
    int32_t *n_id, *n_name, *n_url, *n_line, *n_col, *n_parent_id;
    int64_t *n_hit; /* -1: absent */
    uint32_t *n_child_off, *n_child_cnt;
    uint64_t *n_offset; /* byte offset of the node, for messages */
    size_t n_nodes, cap_nodes;
    int32_t *child_ids;
    size_t n_child_ids, cap_child_ids;
    cn_fmt__u64map id_index; /* id -> node index */
    /* the node being read */
    int64_t cur_id, cur_parent, cur_hit, cur_line, cur_col;
    int32_t cur_name, cur_url;
    bool cur_cf;

    /* after the nodes: per node */
    bool nodes_done;
    int32_t *stack, *bottom, *parent;
    double *weight;
    int64_t *count; /* samples per node */
    int32_t program, idle, gc;
    bool hits_from_file;
    double total_hits;

    /* samples: node ids, then (resolved) node indices */
    int32_t *smp;
    size_t n_smp, cap_smp;
    bool resolved;
    uint64_t samples_offset;
    int64_t *times; /* ns after startTime, per sample in file order (when kept) */
    size_t cap_times;
    size_t n_deltas;
    int64_t cum_ns;
    bool streaming; /* samples are added (or timed) as timeDeltas arrive */
    bool unsorted;
    /* direct mode: each node has its own stack, so `samples` entries go straight into
     * the profile (a node is recovered from its stack) and no per-sample array is kept */
    int32_t *node_of_stack; /* stack id -> node index */
    bool injective, direct;
    size_t n_added;
};

static uint64_t offset_now(const cn_fmt__cpuprof *c)
{
    return c->base + (c->h ? yajl_get_bytes_consumed(c->h) : 0);
}

/* Records an error at byte offset off; returns 0 (what a yajl callback returns to stop). */
__attribute__((format(printf, 4, 5))) static int fail_at(cn_fmt__cpuprof *c, int code, uint64_t off,
                                                         const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->rc = cn_err_set(c->err, code, "%s: byte %llu: %s", c->name, (unsigned long long)off, msg);
    return 0;
}

#define FAIL(c, ...) fail_at((c), -EINVAL, offset_now(c), __VA_ARGS__)
#define NOMEM(c)     fail_at((c), -ENOMEM, offset_now(c), "out of memory")

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

/* ---- building the tree when the nodes array closes --------------------------------- */

static int32_t node_index(const cn_fmt__cpuprof *c, int64_t id)
{
    return cn_fmt__u64map_get(&c->id_index, (uint64_t)id);
}

/* Interns the func and frame of node i. Returns the frame id or negative errno. */
static int32_t node_frame(cn_fmt__cpuprof *c, size_t i)
{
    const char *name = cn_agg_string_get(c->p, c->n_name[i]);
    const char *url = c->n_url[i] >= 0 ? cn_agg_string_get(c->p, c->n_url[i]) : "";
    int32_t line = c->n_line[i] >= 0 ? c->n_line[i] + 1 : 0;
    int32_t col = c->n_col[i];
    int32_t res = -1;
    char *file = NULL;
    if (!name || !*name)
        name = "(anonymous)";
    if (*url) {
        res = cn_agg_resource(c->p, url, NULL, url, CN_AGG_RES_URL);
        if (res < 0)
            return res;
    }
    /* The func key is (name, resource, file): the position goes into file, so two
     * functions of one name in one script stay apart (a func is (name, url, line, col)). */
    if (*url || line > 0) {
        size_t n = strlen(url) + 32;
        file = malloc(n);
        if (!file)
            return -ENOMEM;
        snprintf(file, n, "%s:%d:%d", url, line, col >= 0 ? col + 1 : 0);
    }
    int32_t func = cn_agg_func(c->p, name, res, file, line);
    free(file);
    if (func < 0)
        return func;
    return cn_agg_frame(c->p, func, res, col >= 0 ? col : -1, line);
}

static bool is_meta_name(const char *s, const char *want)
{
    return s && !strcmp(s, want);
}

/* Parents from children lists (and `parent` fields), reachability from nodes[0], then
 * per node its stack, bottom node and the meta nodes. Returns 1 or 0 (error set). */
static int build_tree(cn_fmt__cpuprof *c)
{
    size_t n = c->n_nodes;
    int32_t *par = NULL, *order = NULL, *kid_off = NULL, *kids = NULL;
    int ok = 0;
    if (n == 0)
        return fail_at(c, -EINVAL, offset_now(c), "the nodes array is empty");
    par = malloc(n * sizeof(*par));
    order = malloc(n * sizeof(*order));
    kid_off = calloc(n + 1, sizeof(*kid_off));
    kids = malloc(n * sizeof(*kids));
    c->stack = malloc(n * sizeof(*c->stack));
    c->bottom = malloc(n * sizeof(*c->bottom));
    c->count = calloc(n, sizeof(*c->count));
    c->weight = malloc(n * sizeof(*c->weight));
    if (!par || !order || !kid_off || !kids || !c->stack || !c->bottom || !c->count || !c->weight) {
        NOMEM(c);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        par[i] = -1;
    for (size_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < c->n_child_cnt[i]; k++) {
            int32_t cid = c->child_ids[c->n_child_off[i] + k];
            int32_t j = node_index(c, cid);
            if (j < 0) {
                fail_at(c, -EINVAL, c->n_offset[i], "node %d lists unknown child id %d", c->n_id[i],
                        cid);
                goto out;
            }
            if (par[j] >= 0 || j == 0) {
                fail_at(c, -EINVAL, c->n_offset[i],
                        "node %d lists node %d as a child, but it already has a parent "
                        "or is the root (a cycle)",
                        c->n_id[i], cid);
                goto out;
            }
            par[j] = (int32_t)i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (c->n_parent_id[i] == INT32_MIN)
            continue;
        int32_t j = node_index(c, c->n_parent_id[i]);
        if (j < 0 || (par[i] >= 0 && par[i] != j) || i == 0) {
            fail_at(c, -EINVAL, c->n_offset[i], "node %d has a bad parent %d", c->n_id[i],
                    c->n_parent_id[i]);
            goto out;
        }
        par[i] = j;
    }
    /* children lists from par[] (counting sort), then breadth first from the root */
    for (size_t i = 1; i < n; i++)
        if (par[i] >= 0)
            kid_off[par[i] + 1]++;
    for (size_t i = 0; i < n; i++)
        kid_off[i + 1] += kid_off[i];
    for (size_t i = 1; i < n; i++)
        if (par[i] >= 0)
            kids[kid_off[par[i]]++] = (int32_t)i;
    for (size_t i = n; i > 0; i--)
        kid_off[i] = kid_off[i - 1];
    kid_off[0] = 0;
    size_t head = 0, tail = 0;
    order[tail++] = 0;
    while (head < tail) {
        int32_t v = order[head++];
        for (int32_t k = kid_off[v]; k < kid_off[v + 1]; k++)
            order[tail++] = kids[k];
    }
    if (tail < n) {
        for (size_t i = 0; i < n; i++) {
            bool seen = false;
            for (size_t k = 0; k < tail && !seen; k++)
                seen = order[k] == (int32_t)i;
            if (!seen) {
                fail_at(c, -EINVAL, c->n_offset[i],
                        "node %d is not reachable from the root node (a cycle?)", c->n_id[i]);
                goto out;
            }
        }
    }
    c->program = c->idle = c->gc = -1;
    c->stack[0] = -1;
    c->bottom[0] = -1;
    for (size_t k = 1; k < n; k++) {
        int32_t v = order[k], pv = par[v];
        int32_t frame = node_frame(c, (size_t)v);
        int32_t st = frame < 0 ? frame : cn_agg_stack(c->p, c->stack[pv], frame);
        if (st < 0) {
            NOMEM(c);
            goto out;
        }
        c->stack[v] = st;
        c->bottom[v] = pv == 0 ? v : c->bottom[pv];
        if (pv == 0) {
            const char *nm = cn_agg_string_get(c->p, c->n_name[v]);
            if (c->program < 0 && is_meta_name(nm, "(program)"))
                c->program = v;
            if (c->idle < 0 && is_meta_name(nm, "(idle)"))
                c->idle = v;
            if (c->gc < 0 && is_meta_name(nm, "(garbage collector)"))
                c->gc = v;
        }
    }
    c->node_of_stack = malloc((cn_agg_stack_count(c->p) + 1) * sizeof(*c->node_of_stack));
    if (!c->node_of_stack) {
        NOMEM(c);
        goto out;
    }
    memset(c->node_of_stack, 0xff, (cn_agg_stack_count(c->p) + 1) * sizeof(*c->node_of_stack));
    c->injective = true;
    for (size_t v = 1; v < n; v++) {
        if (c->node_of_stack[c->stack[v]] >= 0)
            c->injective = false;
        c->node_of_stack[c->stack[v]] = (int32_t)v;
    }
    c->parent = par;
    par = NULL;
    c->nodes_done = true;
    ok = 1;
out:
    free(par);
    free(order);
    free(kid_off);
    free(kids);
    return ok;
}

static void compute_weights(cn_fmt__cpuprof *c);

/* Turns sample ids into node indices and fixes per-node weights. 1, or 0 with error. */
static int resolve_samples(cn_fmt__cpuprof *c)
{
    if (c->resolved)
        return 1;
    for (size_t k = 0; k < c->n_smp; k++) {
        int32_t j = node_index(c, c->smp[k]);
        if (j < 0)
            return fail_at(c, -EINVAL, c->samples_offset,
                           "samples[%zu] references unknown node id %d", k, c->smp[k]);
        c->smp[k] = j;
        c->count[j]++;
    }
    c->resolved = true;
    compute_weights(c);
    return 1;
}

/* Per-node sample weight hitCount / samples (1 when they agree) and Σ hitCount. */
static void compute_weights(cn_fmt__cpuprof *c)
{
    c->hits_from_file = c->n_hit[0] >= 0;
    c->total_hits = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        double hit =
            c->hits_from_file ? (double)(c->n_hit[i] > 0 ? c->n_hit[i] : 0) : (double)c->count[i];
        c->total_hits += hit;
        c->weight[i] = c->count[i] ? hit / (double)c->count[i] : 0.0;
    }
}

/* Adds sample k at time t (ns after startTime). 1, or 0 with error. */
static int add_sample(cn_fmt__cpuprof *c, size_t k, int64_t t)
{
    int32_t node = c->smp[k];
    if (!c->unsorted && k > 0) {
        int64_t prev = c->times ? c->times[k - 1] : cn_agg_sample_time(c->p, k - 1);
        if (t < prev) {
            c->unsorted = true;
            if (!c->times) { /* keep every time from now on, for the stable re-order */
                c->times = malloc(c->n_smp * sizeof(*c->times));
                if (!c->times)
                    return NOMEM(c);
                for (size_t i = 0; i < k; i++)
                    c->times[i] = cn_agg_sample_time(c->p, i);
            }
        }
    }
    if (c->times)
        c->times[k] = t;
    if (cn_agg_add_sample(c->p, c->stack[node], t, c->weight[node], -1) < 0)
        return NOMEM(c);
    return 1;
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
    return FAIL(c, "'%s' %s %s", where, elems ? "elements must be" : "must be", want);
}

static int on_delta(cn_fmt__cpuprof *c, enum vtype t, long long iv, double dv)
{
    int64_t ns;
    if (t == V_INT) {
        if (iv > 9000000000000LL || iv < -9000000000000LL)
            return FAIL(c, "timeDeltas value out of range");
        ns = (int64_t)iv * 1000;
    } else {
        if (!isfinite(dv) || fabs(dv) > 9e12)
            return FAIL(c, "timeDeltas value out of range");
        ns = (int64_t)llround(dv * 1000.0);
    }
    c->cum_ns += ns;
    if (c->cum_ns > INT64_MAX / 4 || c->cum_ns < INT64_MIN / 4)
        return FAIL(c, "timeDeltas sum out of range");
    size_t k = c->n_deltas++;
    if (c->streaming && c->direct) {
        if (k >= c->n_added)
            return FAIL(c, "timeDeltas has more entries than samples (%zu)", c->n_added);
        if (k > 0 && ns < 0) /* sample k - 1 is at the previous sum */
            c->unsorted = true;
        /* the sample was added at time 0; the table is not sorted before the end */
        if (cn_agg_sample_set_time(c->p, k, c->cum_ns) < 0)
            return FAIL(c, "internal error: sample %zu is missing", k);
        return 1;
    }
    if (c->streaming) {
        if (k >= c->n_smp)
            return FAIL(c, "timeDeltas has more entries than samples (%zu)", c->n_smp);
        return add_sample(c, k, c->cum_ns);
    }
    if (CN_FMT__RESERVE(c->times, c->cap_times, k + 1) < 0)
        return NOMEM(c);
    c->times[k] = c->cum_ns;
    return 1;
}

/* Direct mode: adds one `samples` entry to the profile (at its time if timeDeltas came
 * first, else at 0 until the deltas patch it). */
static int direct_sample(cn_fmt__cpuprof *c, int32_t id)
{
    int32_t j = node_index(c, id);
    size_t k = c->n_added;
    int64_t t = 0;
    if (j < 0)
        return FAIL(c, "samples[%zu] references unknown node id %d", k, id);
    if (c->have_deltas) {
        if (k >= c->n_deltas)
            return FAIL(c, "samples has more entries than timeDeltas (%zu)", c->n_deltas);
        t = c->times[k];
        if (k > 0 && t < c->times[k - 1])
            c->unsorted = true;
    }
    if (cn_agg_add_sample(c->p, c->stack[j], t, 1.0, -1) < 0)
        return NOMEM(c);
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
        return FAIL(c, "a .cpuprofile is a JSON object");
    case ST_TOP:
        if (c->key == K_START || c->key == K_END) {
            if (!is_num)
                return type_error(c, "a number");
            *(c->key == K_START ? &c->start_us : &c->end_us) = is_int ? (double)iv : dv;
            *(c->key == K_START ? &c->have_start : &c->have_end) = true;
        } else if (c->key == K_NODES || c->key == K_SAMPLES || c->key == K_DELTAS) {
            return type_error(c, "an array");
        } else if (c->key == K_HEAD) {
            return FAIL(c, "legacy .cpuprofile ('head' tree) is not supported");
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
                return NOMEM(c);
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
        if (CN_FMT__RESERVE(c->child_ids, c->cap_child_ids, c->n_child_ids + 1) < 0)
            return NOMEM(c);
        c->child_ids[c->n_child_ids++] = (int32_t)iv;
        return 1;
    case ST_SAMPLES:
        if (!is_int || iv < INT32_MIN + 1 || iv > INT32_MAX)
            return type_error(c, "32-bit integers (node ids)");
        if (c->direct)
            return direct_sample(c, (int32_t)iv);
        if (CN_FMT__RESERVE(c->smp, c->cap_smp, c->n_smp + 1) < 0)
            return NOMEM(c);
        c->smp[c->n_smp++] = (int32_t)iv;
        return 1;
    case ST_DELTAS:
        if (!is_num)
            return type_error(c, "numbers");
        return on_delta(c, t, iv, dv);
    case ST_END:
        break;
    }
    return FAIL(c, "unexpected value");
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
        if (CN_FMT__RESERVE(c->a, c_, n) < 0)                                                      \
            return NOMEM(c);                                                                       \
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
    c->n_offset[i] = offset_now(c) - 1;
    c->n_child_off[i] = (uint32_t)c->n_child_ids;
    c->n_child_cnt[i] = 0;
    return 1;
}

static int end_node(cn_fmt__cpuprof *c)
{
    size_t i = c->n_nodes;
    if (c->cur_id == NO_ID)
        return fail_at(c, -EINVAL, c->n_offset[i], "node without an 'id'");
    if (!c->cur_cf)
        return fail_at(c, -EINVAL, c->n_offset[i], "node %lld has no 'callFrame'",
                       (long long)c->cur_id);
    if (node_index(c, c->cur_id) >= 0)
        return fail_at(c, -EINVAL, c->n_offset[i], "repeated node id %lld", (long long)c->cur_id);
    if (c->n_child_ids > UINT32_MAX || i >= INT32_MAX)
        return FAIL(c, "too many nodes");
    if (cn_fmt__u64map_put(&c->id_index, (uint64_t)c->cur_id, (int32_t)i) < 0)
        return NOMEM(c);
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
        if (!resolve_samples(c))
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
            return FAIL(c, "a .cpuprofile is a JSON object");
        c->st = ST_TOP;
        return 1;
    case ST_TOP:
        if (c->key == K_HEAD)
            return FAIL(c, "legacy .cpuprofile ('head' tree) is not supported");
        if (c->key == K_START || c->key == K_END)
            return type_error(c, "a number");
        if (c->key == K_NODES || c->key == K_SAMPLES || c->key == K_DELTAS) {
            if (is_map)
                return type_error(c, "an array");
            bool *seen = c->key == K_NODES     ? &c->have_nodes
                         : c->key == K_SAMPLES ? &c->have_samples
                                               : &c->have_deltas;
            if (*seen)
                return FAIL(c, "repeated key '%s'", key_name(c->key));
            *seen = true;
            if (c->key == K_NODES) {
                c->st = ST_NODES;
            } else if (c->key == K_SAMPLES) {
                c->samples_offset = offset_now(c) - 1;
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
    return FAIL(c, "unexpected value");
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
        return build_tree(c);
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
        return FAIL(c, "unbalanced JSON");
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
    c->name = strdup(name ? name : "(buffer)");
    c->p = cn_agg_profile_new();
    c->h = yajl_alloc(&callbacks, NULL, c);
    if (!c->name || !c->p || !c->h)
        return cn_fmt__cpuprof_free(c);
    return c;
}

cn_fmt__cpuprof *cn_fmt__cpuprof_free(cn_fmt__cpuprof *c)
{
    if (!c)
        return NULL;
    if (c->h)
        yajl_free(c->h);
    cn_agg_profile_free(c->p);
    free(c->name);
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
    cn_fmt__u64map_clear(&c->id_index);
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

/* Turns a yajl error (not one of ours) into a message with the byte offset. */
static int yajl_fail(cn_fmt__cpuprof *c, const unsigned char *chunk, size_t len)
{
    if (c->rc < 0)
        return c->rc;
    unsigned char *msg = yajl_get_error(c->h, 0, chunk, len);
    const char *m = msg ? (const char *)msg : "parse error";
    bool truncated = strstr(m, "premature EOF") != NULL;
    size_t ml = strlen(m);
    while (ml && (m[ml - 1] == '\n' || m[ml - 1] == ' '))
        ml--;
    c->rc = cn_err_set(c->err, -EINVAL, "%s: byte %llu: %s (%.*s)", c->name,
                       (unsigned long long)offset_now(c),
                       truncated ? "truncated JSON" : "invalid JSON", (int)ml, m);
    if (msg)
        yajl_free_error(c->h, msg);
    return c->rc;
}

int cn_fmt__cpuprof_feed(cn_fmt__cpuprof *c, const void *data, size_t len, cn_err *err)
{
    c->err = err;
    if (c->rc < 0)
        return c->rc;
    yajl_status s = yajl_parse(c->h, data, len);
    if (s != yajl_status_ok)
        return yajl_fail(c, data, len);
    c->base += len;
    return 0;
}

/* Adds samples that could not stream (timeDeltas before samples, or nodes last). */
static int add_remaining(cn_fmt__cpuprof *c)
{
    if (!resolve_samples(c))
        return 0;
    if (c->have_deltas && c->n_deltas != c->n_smp)
        return fail_at(c, -EINVAL, c->samples_offset, "samples has %zu entries but timeDeltas %zu",
                       c->n_smp, c->n_deltas);
    if (!c->have_deltas && c->n_smp) { /* no times: spread the samples evenly */
        c->times = malloc(c->n_smp * sizeof(*c->times));
        if (!c->times)
            return NOMEM(c);
        double step = (c->end_us - c->start_us) * 1000.0 / (double)c->n_smp;
        for (size_t k = 0; k < c->n_smp; k++)
            c->times[k] = (int64_t)llround(step * (double)k);
    }
    for (size_t k = 0; k < c->n_smp; k++)
        if (!add_sample(c, k, c->times[k]))
            return 0;
    if (!c->have_samples) { /* hit counts only: one sample per node */
        for (size_t i = 1; i < c->n_nodes; i++) {
            if (c->n_hit[i] <= 0)
                continue;
            c->total_hits += (double)c->n_hit[i];
            if (cn_agg_add_sample(c->p, c->stack[i], 0, (double)c->n_hit[i], -1) < 0)
                return NOMEM(c);
        }
    }
    return 1;
}

static int cmp_order(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (time, index) pairs */
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* fixMissingSamples (calltree.md §5.2 step 6) on the time-ordered samples, written as
 * timeline stacks. 1, or 0 with error. */
static int fix_missing(cn_fmt__cpuprof *c)
{
    size_t n = c->direct ? c->n_added : c->n_smp;
    int32_t *seq = c->smp;
    int64_t *ord = NULL;
    int ok = 0;
    if (c->program < 0 || n < 3)
        return 1;
    if (c->direct) { /* the profile is the sequence: sort it, read nodes off stacks */
        seq = malloc(n * sizeof(*seq));
        if (!seq || cn_agg_samples_sort(c->p) < 0) {
            NOMEM(c);
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            int32_t st = cn_agg_sample_stack(c->p, k);
            seq[k] = st < 0 ? 0 : c->node_of_stack[st];
        }
    } else if (c->unsorted) {
        ord = malloc(n * 2 * sizeof(*ord));
        seq = malloc(n * sizeof(*seq));
        if (!ord || !seq) {
            NOMEM(c);
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            ord[2 * k] = c->times[k];
            ord[2 * k + 1] = (int64_t)k;
        }
        qsort(ord, n, 2 * sizeof(*ord), cmp_order);
        for (size_t k = 0; k < n; k++)
            seq[k] = c->smp[ord[2 * k + 1]];
        if (cn_agg_samples_sort(c->p) < 0) {
            NOMEM(c);
            goto out;
        }
    }
    int32_t prev = seq[0], cur = seq[1];
    for (size_t i = 1; i + 1 < n; i++) {
        int32_t next = seq[i + 1];
        bool sys_prev = prev == c->program || prev == c->gc || prev == c->idle;
        bool sys_next = next == c->program || next == c->gc || next == c->idle;
        if (cur == c->program && !sys_prev && !sys_next && prev != 0 && next != 0 &&
            c->bottom[prev] == c->bottom[next] &&
            cn_agg_sample_set_timeline_stack(c->p, i, c->stack[prev]) < 0) {
            NOMEM(c);
            goto out;
        }
        prev = cur;
        cur = next;
    }
    ok = 1;
out:
    free(ord);
    if (seq != c->smp)
        free(seq);
    return ok;
}

static int set_meta(cn_fmt__cpuprof *c)
{
    char buf[64];
    size_t n = cn_agg_sample_count(c->p);
    double span_ms = (c->end_us - c->start_us) / 1000.0;
    cn_agg_profile_set_unit(c->p, CN_AGG_UNIT_MS);
    cn_agg_profile_set_scale(c->p,
                             c->total_hits > 0 && span_ms > 0 ? span_ms / c->total_hits : 1.0);
    if (cn_agg_meta_set(c->p, "format", "cpuprofile") < 0)
        return NOMEM(c);
    snprintf(buf, sizeof(buf), "%.17g", c->start_us);
    if (cn_agg_meta_set(c->p, "cpuprofile.start_us", buf) < 0)
        return NOMEM(c);
    /* DevTools' end of the last sample: last + (last - first) / (n - 1) (§5.2 step 4) */
    if (n > 0) {
        if (cn_agg_samples_sort(c->p) < 0)
            return NOMEM(c);
        int64_t first = cn_agg_sample_time(c->p, 0), last = cn_agg_sample_time(c->p, n - 1);
        int64_t end =
            n > 1 ? last + (last - first) / (int64_t)(n - 1) : (int64_t)llround(span_ms * 1e6);
        snprintf(buf, sizeof(buf), "%lld", (long long)end);
        if (cn_agg_meta_set(c->p, "timeline.end_ns", buf) < 0)
            return NOMEM(c);
    }
    return 1;
}

/* Direct mode's end: lengths, times without timeDeltas, weights, the unsorted mark. */
static int finish_direct(cn_fmt__cpuprof *c)
{
    cn_agg_profile *p = c->p;
    size_t n = c->n_added;
    if (c->have_deltas && c->n_deltas != n)
        return fail_at(c, -EINVAL, c->samples_offset, "samples has %zu entries but timeDeltas %zu",
                       n, c->n_deltas);
    if (!c->have_deltas) { /* no times: spread the samples evenly */
        double step = (c->end_us - c->start_us) * 1000.0 / (double)(n ? n : 1);
        for (size_t k = 0; k < n; k++)
            cn_agg_sample_set_time(p, k, (int64_t)llround(step * (double)k)); /* k < n */
    }
    compute_weights(c);
    bool all_one = true;
    for (size_t i = 0; i < c->n_nodes && all_one; i++)
        all_one = !c->count[i] || c->weight[i] == 1.0;
    for (size_t k = 0; k < n && !all_one; k++) {
        int32_t st = cn_agg_sample_stack(p, k);
        cn_agg_sample_set_weight(p, k, c->weight[st < 0 ? 0 : c->node_of_stack[st]]); /* k < n */
    }
    return 1;
}

int cn_fmt__cpuprof_finish(cn_fmt__cpuprof *c, cn_agg_profile **out, cn_err *err)
{
    c->err = err;
    if (c->rc < 0)
        return c->rc;
    if (yajl_complete_parse(c->h) != yajl_status_ok)
        return yajl_fail(c, NULL, 0);
    if (c->st != ST_END)
        return fail_at(c, -EINVAL, offset_now(c), "truncated JSON"), c->rc;
    if (!c->have_nodes)
        return cn_err_set(err, -EINVAL, "%s: not a .cpuprofile: no 'nodes' array", c->name);
    if (!c->have_start || !c->have_end)
        return cn_err_set(err, -EINVAL, "%s: missing 'startTime' or 'endTime'", c->name);
    if (c->end_us < c->start_us)
        return cn_err_set(err, -EINVAL, "%s: endTime is before startTime", c->name);
    if (c->direct) {
        if (!finish_direct(c))
            return c->rc;
    } else if (!c->streaming && !add_remaining(c)) {
        return c->rc;
    }
    if (c->streaming && !c->direct && c->n_deltas != c->n_smp)
        return cn_err_set(err, -EINVAL, "%s: samples has %zu entries but timeDeltas %zu", c->name,
                          c->n_smp, c->n_deltas);
    if (!fix_missing(c) || !set_meta(c))
        return c->rc;
    *out = c->p;
    c->p = NULL;
    return 0;
}

int cn_fmt__import_cpuprofile(const char *data, size_t len, const char *name, cn_agg_profile **out,
                              cn_err *err)
{
    cn_fmt__cpuprof *c = cn_fmt__cpuprof_new(name);
    if (!c)
        return cn_err_set(err, -ENOMEM, "%s: out of memory", name);
    int rc = cn_fmt__cpuprof_feed(c, data, len, err);
    if (rc == 0)
        rc = cn_fmt__cpuprof_finish(c, out, err);
    cn_fmt__cpuprof_free(c);
    return rc;
}

/* The first byte after blanks (and a UTF-8 byte order mark) opens a JSON object. */
bool cn_fmt__looks_json(const char *data, size_t len)
{
    size_t i = 0;
    if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
        i = 3;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    return i < len && data[i] == '{';
}
